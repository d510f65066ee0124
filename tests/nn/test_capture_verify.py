"""limn.capture's verify mode names where a replay first parts from the eager call (limn.capture.verify).

The oracle is the eager call itself: a replay is broken on purpose (a kept buffer of the recording swapped
for another of the same shape, so the replay reads other bytes than the eager call), and the error must
name the first recorded kernel that reads the swapped slot, computed here from the recorded plan; on the
numpy device, which runs graphs and no kernels, the run and the result. A correct replay must pass.
Verify mode records where nodes are made (limn.graph.provenance) on the first call, so the kernel's source lines,
as limn.explain names them, are in the message too.
"""

import inspect
import re

import numpy as np
import pytest
from unguarded import halving_step, past_the_guards

import limn
from limn import Tensor
from limn.capture import CaptureError, capture, replay

_rng = np.random.default_rng(16)
XS = _rng.standard_normal((6, 8, 4)).astype(np.float32)


@pytest.fixture(params=["numpy", "c"])
def device(request):
    limn.set_device(request.param)
    return request.param


def _two_run_step():
    """A step of two device runs; the second reads a kept global `scale`, only after a kernel that does not."""
    scale = Tensor(np.full((8, 4), 2.0, np.float32))

    def step(x, y):
        h = (x * x).sum(axis=1, keepdim=True)  # (8, 4) -> (8, 1)
        h.realize()  # run 0
        m = (x - h).max(axis=0)  # (8, 4) -> (4,): the first kernel of run 1 reads no scale
        z = (x - m) * scale  # run 1, with the outputs
        return z.sum(), (z * y).max()

    return step, scale


def _swap_kept(step: capture, buffer) -> tuple[int, int]:
    """Rebinds the recording's leaf for `buffer` to another buffer of its shape; (run, leaf index)."""
    for r, run in enumerate(step.runs):
        for j, leaf in enumerate(run.leaves):
            if leaf.kind == "kept" and leaf.buffer is buffer:
                other = Tensor(np.full(buffer.shape, 3.0, np.float32))
                step.keep_alive = other  # the swapped-in tensor must live as long as the recording
                run.leaves[j] = type(leaf)("kept", buffer=other.node.arg)
                return r, j
    raise AssertionError("the recording reads the buffer as a kept leaf")


def test_verify_names_the_first_kernel_that_reads_a_swapped_buffer(device):
    """The first recorded kernel to write another value than the eager call's is the first reader of the
    swapped slot: its name as ir() prints it, the slot it writes, the binding that differs, its source line."""
    fn, scale = _two_run_step()
    step = capture(fn, verify=2)
    step(Tensor(XS[0]), Tensor(XS[1]))
    r, j = _swap_kept(step, scale.node.arg)
    assert r == 1
    with pytest.raises(CaptureError) as caught:
        step(Tensor(XS[2]), Tensor(XS[3]))
    message = str(caught.value)
    assert message.startswith("verify: call 2 replayed differs from the eager call")
    run = step.runs[r]
    if device == "numpy":
        assert re.search(rf"The first difference: run {r}, result \d+ float32\[", message), message
        assert f"It reads leaf {j}, which the recording binds to a kept float32[8, 4] buffer" in message
        return
    slot = run.plan.schedule.inputs[j]
    readers = [k for k in run.plan.program.kernels if slot in [b.slot for b in k.inputs]]
    first = readers[0]
    assert first is not run.plan.program.kernels[0], "the swapped slot is first read after another kernel"
    expected = f"{first.name} {first.op.name} loop{list(first.loop_shape)}"
    assert f"The first recorded kernel to differ: run {r}, kernel {expected}, writing buf" in message, message
    written = int(re.search(r"writing buf(\d+) float32\[[\d, ]*\]: max difference [\d.e+-]+", message).group(1))
    assert written in [b.slot for b in first.outputs]
    assert f"It reads buf{slot}, which the recording binds to a kept float32[8, 4] buffer" in message
    lines, start = inspect.getsourcelines(_two_run_step)
    scaled = start + next(i for i, line in enumerate(lines) if "z = (x - m) * scale" in line)
    assert f"test_capture_verify.py:{scaled} in " in message, "the kernel's source line, as limn.explain records it"


def test_a_correct_verified_replay_passes_and_runs_no_kernel_by_kernel_trace(device, monkeypatch):
    """The per-kernel trace runs only after the cheap comparison finds a difference."""

    def refuse(*args):
        raise AssertionError("the kernel-by-kernel trace ran on a replay that agrees with the eager call")

    monkeypatch.setattr(replay, "plan_traced", refuse)
    fn, _ = _two_run_step()
    eager = [[t.numpy() for t in fn(Tensor(XS[c]), Tensor(XS[c + 1]))] for c in range(4)]
    step = capture(fn, verify=3)
    for c in range(4):
        got = [t.numpy() for t in step(Tensor(XS[c]), Tensor(XS[c + 1]))]
        for i, (a, b) in enumerate(zip(got, eager[c], strict=True)):
            np.testing.assert_array_equal(a, b, err_msg=f"output {i} of verified call {c + 1}")
    assert step.replays == 3


def test_verify_names_a_changed_constant_as_the_cause(device):
    """A float in a closure changes the graph: the eager call's plan is another one, which is the cause."""
    fn, _ = halving_step(0.5)  # the float sits past the guards
    step = capture(fn, verify=1)
    step(Tensor(XS[0]), Tensor(XS[1]))
    if device == "numpy":
        match = r"Run 0 of the eager call ran another graph .*: a constant 0\.125 where the recording has 0\.25"
    else:
        match = r"Run 0 of the eager call built another plan: its kernel k0 \w+ loop\[8, 4\] .*`CONST .*= 0\.125 "
    with pytest.raises(CaptureError, match=match + r".*float or counter in a closure"):
        step(Tensor(XS[0]), Tensor(XS[1]))


def test_verify_names_a_different_number_of_runs_as_the_cause(device):
    """A branch on a Python counter that realizes once more: the eager call made another number of runs."""
    calls = {"n": 0}

    @past_the_guards
    def later() -> bool:  # a counter past the guards
        calls["n"] += 1
        return calls["n"] > 1

    def fn(x, y):
        d = x - y
        if later():
            d = (d * 2).realize() + 1
        return d.sum()

    step = capture(fn, verify=1)
    step(Tensor(XS[0]), Tensor(XS[1]))
    with pytest.raises(CaptureError, match=r"The eager call made 2 device runs \(realize\(\) calls\), the recording 1"):
        step(Tensor(XS[0]), Tensor(XS[1]))


def test_after_the_verified_calls_the_plans_let_go_of_the_first_calls_graph(device):
    """Verify records where the first call's nodes are made, and its plans hold them for the source lines;
    after the last verified call they let go, so a global rebound is again seen as let go and refused."""
    scale = {"t": Tensor(np.full(4, 2.0, np.float32))}
    step = capture(lambda x, y: x * scale["t"] - y, verify=1)
    for c in range(3):
        np.testing.assert_array_equal(step(Tensor(XS[c]), Tensor(XS[c + 1])).numpy(), XS[c] * 2 - XS[c + 1])
    scale["t"] = Tensor(np.full(4, 3.0, np.float32))  # the old tensor is gone: only the recording has it
    with pytest.raises(CaptureError, match=r"read a float32\[4\] tensor that nothing outside the recording holds"):
        step(Tensor(XS[0]), Tensor(XS[1]))
