"""limn.capture's footguns, to the breadth of tinygrad's JIT tests (test_jit.py, test_jit_footguns.py).

Each test names one rule: the captured step replays correctly, its results equal to the same function run
eagerly (the oracle, on the same device, bit for bit), or it is refused with a CaptureError naming the
cause. Random draws are covered by test_capture_rng.py (dropout in a training step, reseeding) and
test_capture.py (rand, randn); reading a value back into Python (.item(), .numpy()) by test_capture.py.
"""

import numpy as np
import pytest
import torch
from unguarded import halving_step, past_the_guards

import limn
from limn import Tensor
from limn.capture import CaptureError, capture

_rng = np.random.default_rng(21)
XS = _rng.standard_normal((8, 8, 4)).astype(np.float32)


@pytest.fixture(params=["numpy", "c"])
def device(request):
    limn.set_device(request.param)
    return request.param


def outputs(out) -> list[np.ndarray]:
    if isinstance(out, Tensor):
        return [out.numpy()]
    return [t.numpy() for t in (out.values() if isinstance(out, dict) else out)]


def assert_replays_as_eager(make_step, make_args, calls=5, verify=0):
    """Runs a fresh step `calls` times eagerly and captured (make_step() -> fn; make_args(c) -> (args,
    kwargs)), and checks every call's outputs agree; returns the captured step."""
    eager_fn = make_step()
    expected = []
    for c in range(calls):
        args, kwargs = make_args(c)
        expected.append(outputs(eager_fn(*args, **kwargs)))
    step = capture(make_step(), verify=verify)
    for c in range(calls):
        args, kwargs = make_args(c)
        got = outputs(step(*args, **kwargs))
        for i, (a, b) in enumerate(zip(got, expected[c], strict=True)):
            np.testing.assert_array_equal(a, b, err_msg=f"output {i} of call {c + 1}, captured vs eager")
    return step


def pair(c):
    return (Tensor(XS[c]), Tensor(XS[c + 1])), {}


# ---- Python state the step reads ----


def _halving_closure():
    lr = {"value": 1.0}

    def step(x, y):
        lr["value"] /= 2
        return x * lr["value"] - y

    return step, lr


def test_a_python_float_in_a_closure_that_changes_records_the_step_again(device):
    """The guards (limn.capture.guards) note the float the step read; it changed, so each call records
    anew and computes what the eager loop computes, never the stale value."""
    fn, _ = _halving_closure()
    step = capture(fn)
    got = [step(Tensor(XS[c]), Tensor(XS[c + 1])).numpy() for c in range(4)]
    for c in range(4):
        np.testing.assert_array_equal(got[c], XS[c] * np.float32(0.5 ** (c + 1)) - XS[c + 1], err_msg=f"call {c + 1}")
    assert step.recordings == 4 and step.replays == 0


def test_a_value_that_changes_on_every_call_is_refused_naming_it_after_max_recordings(device):
    from limn.capture.record import MAX_RECORDINGS

    fn, _ = _halving_closure()
    step = capture(fn)
    for c in range(MAX_RECORDINGS):
        step(Tensor(XS[c % 4]), Tensor(XS[c % 4 + 1]))
    match = (
        r"reads closure variable lr at .*test_capture_footguns.py:\d+: \{'value': 0\.0078125\} when it was last "
        r"recorded, \{'value': 0\.00390625\} now, and it has been recorded 8 times .*\(a 0-d tensor"
    )
    with pytest.raises(CaptureError, match=match):
        step(Tensor(XS[0]), Tensor(XS[1]))


def test_a_python_float_read_two_calls_deep_replays_the_recorded_value_without_verify(device):
    """What the guards cannot see (a value read two calls below the step) is replayed as recorded: the module
    docstring's rule, which verify=N checks."""
    fn, _ = halving_step(1.0)
    step = capture(fn)
    got = [step(Tensor(XS[c]), Tensor(XS[c + 1])).numpy() for c in range(4)]
    for c in range(4):
        np.testing.assert_array_equal(got[c], XS[c] * np.float32(0.5) - XS[c + 1], err_msg=f"call {c + 1}")


def test_verify_catches_a_python_float_in_a_closure_and_names_the_constant(device):
    """verify runs the step eagerly too: the eager graph holds the new float, which it names as the cause."""
    fn, _ = halving_step(1.0)
    step = capture(fn, verify=1)
    step(Tensor(XS[0]), Tensor(XS[1]))
    changed = r"a constant 0\.25 where the recording has 0\.5" if device == "numpy" else r"CONST .*= 0\.25 .*0\.5"
    with pytest.raises(CaptureError, match=r"verify: call 2 .*" + changed + r".*float or counter in a closure"):
        step(Tensor(XS[2]), Tensor(XS[3]))


def test_a_replay_runs_no_python_so_side_effects_happen_on_the_recording_call_only(device):
    """The documented cost of replaying without Python: a counter (or print) in the step runs once."""
    calls = {"n": 0}

    @past_the_guards
    def count():
        calls["n"] += 1

    def fn(x, y):
        count()
        return x - y

    step = capture(fn)
    for c in range(4):
        np.testing.assert_array_equal(step(*pair(c)[0]).numpy(), XS[c] - XS[c + 1])
    assert calls["n"] == 1 and step.replays == 3


# ---- tensors the step makes from host data ----


def test_a_tensor_made_from_the_same_python_list_every_call_is_a_constant(device):
    """A list the step turns into a tensor is host data: the same bytes every call replay as recorded."""

    def make():
        return lambda x, y: x * Tensor([1.0, -2.0, 3.0, 0.5]) - y

    assert_replays_as_eager(make, pair)


def test_a_tensor_made_from_a_python_list_that_changes_is_refused_as_changed_host_data(device):
    """The second call records again and compares the host data: other bytes are refused, not replayed."""
    scale = [1.0, -2.0, 3.0, 0.5]

    @past_the_guards
    def scales():  # no guard reads it: the host-data check does
        scale[0] += 1
        return scale

    def fn(x, y):
        return x * Tensor(scales()) - y

    step = capture(fn)
    step(*pair(0)[0])
    with pytest.raises(CaptureError, match=r"makes a float32\[4\] tensor from host data whose bytes changed"):
        step(*pair(1)[0])


def test_a_list_read_back_from_a_tensor_inside_the_step_is_refused(device):
    """tolist() reads a value back into Python: a replay could not follow it, so the recording refuses."""
    with pytest.raises(CaptureError, match=r"reads a float32\[8, 4\] value back into Python"):
        capture(lambda x, y: Tensor(x.tolist()) - y)(*pair(0)[0])


def test_random_draws_are_fresh_on_every_replay_and_the_uncaptured_loops(device):
    """The generator's counter is device state the step advances (limn.composed.random.rng; see test_capture_rng.py)."""

    def make():
        limn.manual_seed(5)
        return lambda x, y: x * Tensor.rand(x.shape) - y

    step = assert_replays_as_eager(make, pair)
    assert step.replays == 3  # after the recording and its confirmation (a draw's counter offsets are host data)
    a, b = step(*pair(0)[0]).numpy(), step(*pair(0)[0]).numpy()
    assert not np.array_equal(a, b), "two replays on the same arguments drew the same numbers"


# ---- arguments ----


def test_one_tensor_passed_twice_replays_when_passed_twice_again(device):
    """A recording that read one buffer through two arguments binds it once: one tensor twice replays."""

    def one_twice(c):
        x = Tensor(XS[c])
        return (x, x), {}

    assert_replays_as_eager(lambda: lambda a, b: a * 2 - b, one_twice)


def test_two_tensors_where_the_recording_read_one_twice_are_refused(device):
    """Sharing is part of the recording: other sharing is refused, naming both (see also test_capture.py)."""
    step = capture(lambda a, b: a * 2 - b)
    step(*pair(0)[0])
    x = Tensor(XS[1])
    with pytest.raises(CaptureError, match=r"sharing buffers as \(0, 0\), recorded as \(0, 1\)"):
        step(x, x)


@pytest.mark.parametrize("view", ["slice", "reshape", "transpose"])
def test_an_argument_that_is_a_view_of_another_replays(device, view):
    """An argument is realized into its own buffer before it is bound, so a view of another argument
    reads the same values the eager step reads."""
    views = {
        "slice": lambda t: t[2:6],
        "reshape": lambda t: t.reshape(4, 8),
        "transpose": lambda t: t.transpose(0, 1),
    }

    def args(c):
        base = Tensor(XS[c])
        return (base, views[view](base)), {}

    assert_replays_as_eager(lambda: lambda a, b: (a.sum() * b, a * 3), args)


def test_arguments_that_are_views_at_other_offsets_each_call_replay(device):
    """tinygrad refuses views whose offset changes between calls; here each is realized to a buffer."""
    base = Tensor(XS.reshape(64, 4))

    def args(c):
        return (base[c : c + 8], Tensor(XS[c])), {}

    assert_replays_as_eager(lambda: lambda a, b: a * b + 1, args)


def test_a_different_batch_size_is_refused_naming_both_shapes(device):
    """A recording runs its recorded shapes only."""
    step = capture(lambda x, y: (x - y).square().sum())
    step(*pair(0)[0])
    with pytest.raises(
        CaptureError,
        match=r"arguments \(float32\[6, 4\] on \w+, float32\[6, 4\] on \w+\), "
        r"recorded with \(float32\[8, 4\] on \w+, float32\[8, 4\] on \w+\)",
    ):
        step(Tensor(XS[1][:6]), Tensor(XS[2][:6]))


def test_keyword_arguments_bind_by_name_in_any_order(device):
    """Keyword arguments are bound by name: their order in the call does not matter."""

    def args(c):
        if c % 2:
            return (), {"second": Tensor(XS[c + 1]), "first": Tensor(XS[c])}
        return (), {"first": Tensor(XS[c]), "second": Tensor(XS[c + 1])}

    assert_replays_as_eager(lambda: lambda first, second: first / (second.abs() + 1), args)


def test_an_argument_passed_by_name_where_it_was_positional_is_refused(device):
    """How an argument is passed is part of the recorded signature; the error shows the name."""
    step = capture(lambda first, second: first - second)
    step(*pair(0)[0])
    with pytest.raises(CaptureError, match=r"arguments \(float32\[8, 4\] on \w+, second=float32\[8, 4\]"):
        step(Tensor(XS[1]), second=Tensor(XS[2]))


def test_a_python_value_argument_replays_while_it_stays_the_same_and_is_refused_when_it_changes(device):
    """A non-tensor argument is recorded by value (it may be baked into the graph)."""
    step = assert_replays_as_eager(lambda: lambda x, y, k: x * k - y, lambda c: ((*pair(c)[0], 3), {}))
    with pytest.raises(CaptureError, match=r"int 4\), recorded with .*int 3\)"):
        step(*pair(0)[0], 4)


def test_a_numpy_array_argument_is_compared_by_identity_and_a_new_one_refused(device):
    """An array is an object the step may read anything from (its repr elides the middle): another array,
    however alike, is refused with the hint to pass it as a tensor; numpy scalars are values."""
    step = capture(lambda x, k, arr: x * float(k) + float(arr.sum()))
    arr = np.ones(2)
    step(Tensor(XS[0]), np.float32(2), arr)
    np.testing.assert_array_equal(step(Tensor(XS[1]), np.float32(2), arr).numpy(), XS[1] * 2 + 2)
    with pytest.raises(CaptureError, match=r"ndarray object at 0x[0-9a-f]+\), recorded with .*pass arrays as tensors"):
        step(Tensor(XS[1]), np.float32(2), np.ones(2))


def test_tensors_inside_a_container_argument_are_refused(device):
    """A tensor in a list is not an argument the recording can bind: a replay would read the first one."""
    step = capture(lambda a, arr: a + arr[0])
    with pytest.raises(CaptureError, match=r"argument 1 is a list holding tensors"):
        step(Tensor(XS[0]), [Tensor(XS[1])])


def test_a_zero_d_tensor_argument_replays_with_its_new_value(device):
    """A scalar passed as a 0-d tensor is a buffer like any other (pass changing numbers this way)."""
    assert_replays_as_eager(lambda: lambda x, s: x * s, lambda c: ((Tensor(XS[c]), Tensor(np.float32(c + 0.5))), {}))


def test_a_method_captured_on_its_class_refuses_a_second_instance(device):
    """The instance is an argument compared by identity: a method captured on its class serves the
    instance it recorded (tinygrad's silently shared class method), and capture per instance works."""

    class Scale:
        def __init__(self, s):
            self.s = Tensor(np.full(4, s, np.float32))

        @capture
        def forward(self, x):
            return x * self.s

    first, second = Scale(2.0), Scale(3.0)
    np.testing.assert_array_equal(first.forward(Tensor(XS[0])).numpy(), XS[0] * 2)
    np.testing.assert_array_equal(first.forward(Tensor(XS[1])).numpy(), XS[1] * 2)
    with pytest.raises(CaptureError, match=r"\(Scale object at 0x[0-9a-f]+, .*one object is not another"):
        second.forward(Tensor(XS[2]))
    per_instance = capture(Scale.forward.fn)
    for c in range(3):
        np.testing.assert_array_equal(per_instance(second, Tensor(XS[c])).numpy(), XS[c] * 3)


# ---- outputs ----


@pytest.mark.parametrize("returned", ["input", "slice", "reshape"])
def test_a_returned_input_or_view_of_one_replays(device, returned):
    """An output that is an argument as it is, or a view of one, is this call's argument's value."""
    views = {"input": lambda t: t, "slice": lambda t: t[:3], "reshape": lambda t: t.reshape(32)}
    step = assert_replays_as_eager(lambda: lambda x, y: (views[returned](x), (x - y).sum()), pair)
    kept = step(*pair(5)[0])[0]
    step(*pair(6)[0])
    np.testing.assert_array_equal(kept.numpy(), views[returned](Tensor(XS[5])).numpy(), err_msg="kept output")


def test_a_non_tensor_output_is_refused(device):
    """A replay returns buffers only: a Python value in the return would be the recorded one."""
    with pytest.raises(CaptureError, match=r"may return a tensor, or a tuple, list or dict of tensors"):
        capture(lambda x, y: (x - y, 3))(*pair(0)[0])


def test_an_output_fed_back_as_the_next_input_replays(device):
    """The generation loop: each call's output is the next call's input (tinygrad's input/output aliasing)."""

    def loop(step):
        x, out = Tensor(XS[0]), []
        for _ in range(5):
            x = step(x)
            out.append(x.numpy())
        return out

    def fn(x):
        return (x * 0.5 + 1).tanh()

    for c, (a, b) in enumerate(zip(loop(capture(fn)), loop(fn), strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"call {c + 1}")


def test_two_outputs_of_one_intermediate_fed_back_replay(device):
    """A rolling buffer: the new buffer and a view of it both come back, the buffer as the next input."""

    def fn(buf, frame):
        new = buf[1:].cat(frame, dim=0)  # (3, 4) -> (2, 4) + (1, 4) -> (3, 4)
        return new * 1, new[:1] * 1

    def loop(step):
        buf, out = Tensor(XS[0][:3]), []
        for c in range(5):
            buf, first = step(buf, Tensor(XS[c + 1][:1]))
            out += [buf.numpy(), first.numpy()]
        return out

    for i, (a, b) in enumerate(zip(loop(capture(fn)), loop(fn), strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"value {i}")


# ---- realizes, assigns and state ----


def _accumulating():
    total = Tensor(np.zeros((8, 4), np.float32))

    def fn(x, y):
        total.assign(total + x)
        total.realize()  # a realize inside the step: a second device run reads the first's result
        return (total * y).sum(), total * 1

    return fn


def test_a_realize_inside_the_step_replays_as_its_own_run(device):
    """Each realize() the step makes is one recorded run; later runs read earlier runs' results."""
    step = assert_replays_as_eager(_accumulating, pair, verify=2)
    assert len(step.runs) == 2


def test_a_pending_assign_the_caller_makes_between_calls_is_read_by_the_replay(device):
    """A tensor the step reads and the caller assigns without realizing: the eager step reads the new value,
    so capture realizes this thread's pending assigns before each replay (and before it records)."""

    def run(captured):
        scale = Tensor(np.ones(4, np.float32))
        scale.assign(Tensor(np.full(4, 3.0, np.float32)))  # pending before the first call
        step = capture(lambda x: x * scale) if captured else (lambda x: x * scale)
        out = []
        for c in range(4):
            out.append(step(Tensor(XS[c])).numpy())
            scale.assign(Tensor(np.full(4, c + 4.0, np.float32)))  # left pending: not realized
        return out

    for c, (a, b) in enumerate(zip(run(True), run(False), strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"call {c + 1}")


def test_a_step_that_raises_while_recorded_records_nothing_and_the_next_call_records(device):
    """The exception propagates; what the step assigned before raising is written as the eager call writes
    it (a pending assign is realized, nothing half-made), and the next call records anew."""

    def run(captured):
        w = Tensor(np.zeros((8, 4), np.float32))
        calls = {"n": 0}

        @past_the_guards
        def first() -> bool:  # the counter is no guard's, so the step replays
            calls["n"] += 1
            return calls["n"] == 1

        def fn(x, y):
            w.assign(w + x).realize()
            failing = first()
            w.assign(w * 2)  # left pending when the step raises
            if failing:
                raise ValueError("the step failed halfway")
            return (w - y).sum()

        step = capture(fn) if captured else fn
        with pytest.raises(ValueError, match="halfway"):
            step(*pair(0)[0])
        if captured:
            assert step.recording is None, "a step that raised left a recording"
        out = [w.numpy()]
        for c in range(1, 5):
            out += [step(*pair(c)[0]).numpy(), w.numpy()]
        return out, step

    (got, step), (expected, _) = run(True), run(False)
    for i, (a, b) in enumerate(zip(got, expected, strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"value {i}")
    assert step.replays == 3


def test_a_replay_that_raises_writes_nothing_and_the_next_replay_runs(device):
    """An index out of range stops the replay's run before its assign writes (the executor checks indices
    first), and the step replays on good arguments. Oracle: the step's sums in numpy (the eager step cannot
    go on past such an error: its failed assign stays pending, and raises again when read)."""
    w = Tensor(np.zeros((8, 4), np.float32))

    def fn(x, idx):
        w.assign(w + x[idx])
        return w.sum()

    step = capture(fn)
    order = np.arange(8)[::-1].copy()
    expected = np.zeros((8, 4), np.float32)
    for c in range(2):
        step(Tensor(XS[c]), Tensor(order))
        expected = expected + XS[c][order]
    with pytest.raises(IndexError, match=r"gather: index -?\d+ is out of range for (an axis|axis 0) of size 8"):
        step(Tensor(XS[2]), Tensor(np.array([0, 1, 2, 3, 4, 5, 6, 9])))
    np.testing.assert_array_equal(w.numpy(), expected, err_msg="the replay that raised wrote its assign")
    total = step(Tensor(XS[3]), Tensor(order))
    np.testing.assert_array_equal(w.numpy(), expected + XS[3][order])
    np.testing.assert_allclose(total.numpy(), (expected + XS[3][order]).sum(), rtol=1e-6)
    assert step.replays == 2


# ---- captures inside captures ----


def test_a_captured_function_called_inside_another_captured_step_replays(device):
    """Inside another step's recording a captured function runs eagerly, its runs recorded as the outer
    step's; called on its own it keeps its own recording."""
    inner = capture(lambda t: t * 2 + 1)
    inner(Tensor(XS[7]))  # recorded on its own before the outer step records

    def make():
        return lambda x, y: inner(x) * 3 - y

    assert_replays_as_eager(make, pair, verify=1)
    before = inner.replays  # the uncaptured outer step replayed it on every eager call
    np.testing.assert_array_equal(inner(Tensor(XS[6])).numpy(), XS[6] * 2 + 1)
    assert inner.replays == before + 1


MASKED_WRITES = {  # name: (the write, on a computed x, in limn's spelling and torch's)
    "-inf where a logit is below the top one's less 0.5": (
        lambda x: x.__setitem__(x < x.amax(-1, keepdim=True) - 0.5, -np.inf),
        lambda x: x.__setitem__(x < x.amax(-1, keepdim=True) - 0.5, -np.inf),
    ),
    "a 0-d tensor": (
        lambda x: x.__setitem__(x > 0.3, Tensor(np.float32(7.5))),
        lambda x: x.__setitem__(x > 0.3, torch.tensor(np.float32(7.5))),
    ),
    "a row where a row's sum is positive": (
        lambda x: x.__setitem__(x.sum(-1) > 0, Tensor(np.arange(4, dtype=np.float32))),
        lambda x: x.__setitem__(x.sum(-1) > 0, torch.arange(4, dtype=torch.float32)),
    ),
}


@pytest.mark.parametrize("case", list(MASKED_WRITES))
def test_a_masked_write_records_without_reading_back_and_equals_torch(device, case):
    """x[mask] = v, with v one value (or one row) for every masked place, is a WHERE: the step records it
    (nothing is read back) and replays it; the eager result is torch's."""
    write, torch_write = MASKED_WRITES[case]

    def make_step():
        def step(logits):
            x = logits * 1.0  # a value the step computes, as a sampler's logits are
            write(x)
            return x

        return step

    assert_replays_as_eager(make_step, lambda c: ((Tensor(XS[c]),), {}))
    want = torch.tensor(XS[0]) * 1.0
    torch_write(want)
    np.testing.assert_array_equal(make_step()(Tensor(XS[0])).numpy(), want.numpy(), err_msg=case)


def test_a_masked_write_with_a_value_per_place_is_refused_naming_the_line_and_the_where_form(device):
    def step(logits):
        x = logits * 1.0
        x[x > 0] = Tensor(np.ones(int((XS[0] > 0).sum()), np.float32))  # a value per masked place
        return x

    with pytest.raises(CaptureError, match=r"test_capture_footguns.py:\d+ in .*step.*mask.where\(value, x\)"):
        capture(step)(Tensor(XS[0]))
