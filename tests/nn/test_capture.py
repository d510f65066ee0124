"""limn.capture: a captured training step is the uncaptured step, replayed without building graphs.

The oracle is the same step run uncaptured on the same device. Both run the same compiled plans (on c)
or the same numpy calls (on numpy), so losses and parameters must agree bit for bit, step for step. What
capture cannot replay correctly it must refuse with a CaptureError that says what changed.
"""

import numpy as np
import pytest
from training import training_step
from unguarded import halving_step, past_the_guards

import limn
import limn.nn as nn
import limn.optim as optim
from limn import Tensor
from limn.capture import CaptureError, capture

DEVICES = ["numpy", "c"]
STEPS = 10
BATCH, IN, HIDDEN, OUT = 8, 4, 16, 2

_rng = np.random.default_rng(0)
XS = _rng.standard_normal((STEPS, BATCH, IN)).astype(np.float32)
YS = _rng.standard_normal((STEPS, BATCH, OUT)).astype(np.float32)


@pytest.fixture(params=DEVICES)
def device(request):
    limn.set_device(request.param)
    return request.param


class MLP:
    def __init__(self):
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, OUT)

    def __call__(self, x):
        return self.fc2(self.fc1(x).tanh())  # (B, IN) -> (B, HIDDEN) -> (B, OUT)


def adamw(model):
    return optim.AdamW(nn.named_parameters(model), lr=1e-2, weight_decay=0.1)


def muon_and_adamw(model):
    named = list(nn.named_parameters(model))
    matrices = [(n, p) for n, p in named if p.ndim == 2]
    rest = [(n, p) for n, p in named if p.ndim != 2]
    return optim.Chain(optim.Muon(matrices, lr=0.02), optim.AdamW(rest, lr=1e-2))


def params(model):
    return {name: p.numpy() for name, p in nn.named_parameters(model)}


def run(make_opt, captured, steps=STEPS, lrs=None):
    """Trains a fresh seeded MLP; the loss and the parameters after every step, as numpy arrays."""
    limn.manual_seed(0)
    model = MLP()
    opt = make_opt(model)
    step = training_step(model, opt)
    if captured:
        step = capture(step)
    losses, trajectory = [], []
    for s in range(steps):
        if lrs is not None:
            opt.lr = lrs[s]
        loss = step(Tensor(XS[s]), Tensor(YS[s]))
        losses.append(loss.numpy())
        trajectory.append(params(model))
    return losses, trajectory


def assert_same_run(got, expected):
    (got_losses, got_params), (losses, trajectory) = got, expected
    for s in range(len(losses)):
        np.testing.assert_array_equal(got_losses[s], losses[s], err_msg=f"loss of step {s + 1}")
        for name in trajectory[s]:
            np.testing.assert_array_equal(got_params[s][name], trajectory[s][name], err_msg=f"{name}, step {s + 1}")


# ---- a captured step is the step ----


def test_a_captured_training_step_matches_the_uncaptured_one_bit_for_bit(device):
    assert_same_run(run(adamw, captured=True), run(adamw, captured=False))


def test_a_learning_rate_changed_between_captured_steps_takes_effect(device):
    lrs = [1e-2 * 0.5 ** (s % 4) for s in range(STEPS)]  # 1e-2, 5e-3, 2.5e-3, 1.25e-3, 1e-2, ...
    captured = run(adamw, captured=True, lrs=lrs)
    assert_same_run(captured, run(adamw, captured=False, lrs=lrs))
    # and the schedule mattered: a constant lr takes another path
    assert not np.array_equal(captured[1][-1]["fc1.weight"], run(adamw, captured=True)[1][-1]["fc1.weight"])


def test_a_captured_muon_and_adamw_chain_matches_the_uncaptured_one(device):
    assert_same_run(run(muon_and_adamw, captured=True, steps=6), run(muon_and_adamw, captured=False, steps=6))


def test_outputs_a_caller_keeps_are_not_overwritten_by_later_replays(device):
    expected, _ = run(adamw, captured=False, steps=6)
    limn.manual_seed(0)
    model = MLP()
    step = capture(training_step(model, adamw(model)))
    step(Tensor(XS[0]), Tensor(YS[0]))  # recorded
    kept = [step(Tensor(XS[s]), Tensor(YS[s])) for s in range(1, 6)]  # five replays, read only afterwards
    values = [loss.numpy() for loss in kept]
    assert len({v.tobytes() for v in values}) == 5
    for s, v in enumerate(values, start=1):
        np.testing.assert_array_equal(v, expected[s], err_msg=f"kept loss of step {s + 1}")


# ---- replays build nothing ----


def test_replays_build_no_plans_and_are_counted():
    limn.set_device("c")
    stats = limn.get_device("c").stats
    limn.manual_seed(0)
    model = MLP()
    step = capture(training_step(model, adamw(model)))
    step(Tensor(XS[0]), Tensor(YS[0]))
    assert step.replays == 0
    built, looked_up = stats.plans_built, stats.plan_hits
    for s in range(1, 6):
        step(Tensor(XS[s]), Tensor(YS[s]))
    assert step.replays == 5
    assert stats.plans_built == built, "a replay built a plan"
    assert stats.plan_hits == looked_up, "a replay handed a graph to the device to look its plan up"


def test_replays_are_counted_on_the_numpy_device():
    limn.manual_seed(0)
    model = MLP()
    step = capture(training_step(model, adamw(model)))
    for s in range(4):
        step(Tensor(XS[s]), Tensor(YS[s]))
    assert step.replays == 3


# ---- refusals ----


def _scaled(x, y, k=0.5):
    return (x * k - y).square().sum()


def _recorded(*values):
    step = capture(_scaled)
    step(Tensor(XS[0]), Tensor(XS[1]), *values)
    return step


CHANGED_ARGUMENTS = {
    "shape": (lambda: (Tensor(XS[2][:6]), Tensor(XS[3][:6])), r"float32\[6, 4\] on \w+, .*recorded with"),
    "dtype": (lambda: (Tensor(XS[2], dtype=limn.float64), Tensor(XS[3])), r"\(float64\[8, 4\] on \w+, .*recorded with"),
    "fewer arguments": (lambda: (Tensor(XS[2]),), r"with arguments \(float32\[8, 4\] on \w+\), recorded with"),
    "more arguments": (lambda: (Tensor(XS[2]), Tensor(XS[3]), 0.5), r"float 0\.5\), recorded with"),
    "device": (lambda: (Tensor(XS[2], device="numpy"), Tensor(XS[3], device="c")), r"on numpy, .* on c\)"),
}


@pytest.mark.parametrize("change", CHANGED_ARGUMENTS)
def test_a_replay_refuses_changed_arguments(device, change):
    make_args, match = CHANGED_ARGUMENTS[change]
    step = _recorded()
    step(Tensor(XS[2]), Tensor(XS[3]))  # a replay with the recorded structure is fine
    args = make_args()
    if change == "device" and device == "numpy":
        args = args[::-1]  # recorded on numpy: hand it a c tensor first
        match = r"on c, .* on numpy\)"
    with pytest.raises(CaptureError, match=match):
        step(*args)
    assert step.replays == 1
    step(Tensor(XS[4]), Tensor(XS[5]))  # a refusal leaves the recording as it was
    assert step.replays == 2


def test_a_replay_refuses_a_changed_python_value_argument(device):
    step = _recorded(0.5)
    with pytest.raises(CaptureError, match=r"float 0\.25\), recorded with .*float 0\.5\)"):
        step(Tensor(XS[0]), Tensor(XS[1]), 0.25)


def test_a_replay_refuses_two_tensors_where_the_recording_read_one_twice(device):
    step = capture(lambda a, b: a - b)
    x = Tensor(XS[0])
    step(x, x)  # recorded reading one buffer through both arguments
    with pytest.raises(CaptureError, match="sharing buffers"):
        step(Tensor(XS[1]), Tensor(XS[2]))


def _branches_on_item(x, y):
    loss = (x - y).square().sum()
    return loss * 2 if loss.item() > 1 else loss


def _reads_numpy(x, y):
    d = x - y
    return d * float(np.abs(d.numpy()).max())


@pytest.mark.parametrize("fn", [_branches_on_item, _reads_numpy], ids=["item", "numpy"])
def test_a_step_that_reads_a_value_back_into_python_is_refused(device, fn):
    with pytest.raises(CaptureError, match=r"reads a float32\[.*\] value back into Python"):
        capture(fn)(Tensor(XS[0]), Tensor(XS[1]))


# ---- host data, random numbers and pending assigns made inside the step ----


def eager_and_captured(make_step, calls=5, verify=0):
    """The outputs of `calls` calls of a fresh step, run eagerly and captured; each entry a numpy list."""
    runs = []
    for captured in (False, True):
        step = make_step()
        step = capture(step, verify=verify) if captured else step
        outs = []
        for c in range(calls):
            out = step(Tensor(XS[c]), Tensor(XS[c + 1]))
            outs.append([t.numpy() for t in (out if isinstance(out, tuple) else (out,))])
        runs.append(outs)
    return runs


def assert_same_calls(eager, captured, what):
    for c, (a, b) in enumerate(zip(eager, captured, strict=True)):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            np.testing.assert_array_equal(y, x, err_msg=f"{what}: output {i} of call {c + 1}, captured vs eager")


def _with_a_causal_mask():
    def step(x, y):
        n = x.shape[1]
        mask = Tensor(np.tril(np.ones((n, n), np.float32)))  # the same bytes on every call
        positions = Tensor.arange(n).cast(limn.float32)
        return (x @ mask + positions - y).sum(axis=1)

    return step


def test_host_data_the_same_on_every_call_replays_right(device):
    eager, captured = eager_and_captured(_with_a_causal_mask)
    assert_same_calls(eager, captured, "a step that builds a causal mask and arange positions from host data")


def test_host_data_that_changes_between_calls_is_refused_at_the_second_call(device):
    calls = iter(range(100))

    def step(x, y):
        return x + Tensor(np.full(x.shape, float(next(calls)), np.float32)) - y

    captured = capture(step)
    captured(Tensor(XS[0]), Tensor(XS[1]))
    with pytest.raises(CaptureError, match=r"makes a float32\[8, 4\] tensor from host data whose bytes changed"):
        captured(Tensor(XS[0]), Tensor(XS[1]))


def _uses_randn(x, y):
    return x + Tensor.randn(x.shape) - y


def _uses_rand(x, y):
    return x * Tensor.rand(x.shape) - y


@pytest.mark.parametrize("fn", [_uses_randn, _uses_rand], ids=["randn", "rand"])
def test_a_step_that_draws_random_numbers_replays_fresh_ones_as_the_eager_loop(device, fn):
    """The device generator's counter is state the step advances (limn.composed.random.rng): each replay draws anew."""

    def seeded():
        limn.manual_seed(3)
        return fn

    eager, captured = eager_and_captured(seeded)
    assert_same_calls(eager, captured, fn.__name__)
    assert not np.array_equal(captured[1][0], captured[2][0])


def test_host_data_made_after_a_result_is_dropped_is_not_taken_for_that_result(device):
    def step(x, y):
        (x * 2).realize()  # a result dropped at once: the host tensor below may be given its address
        return x + Tensor(np.ones(x.shape, np.float32)) - y

    eager, captured = eager_and_captured(lambda: step)
    assert_same_calls(eager, captured, "host data made after a dropped result")


def _pending_assign_step():
    """A step that assigns a running total and never realizes or returns it."""
    limn.manual_seed(0)
    total = Tensor(np.zeros((8, 4), np.float32))

    def step(x, y):
        total.assign(total + x)
        return (x - y).sum()

    return step, total


def test_an_assign_the_step_leaves_pending_is_replayed(device):
    expected = []
    step, total = _pending_assign_step()
    for c in range(4):
        step(Tensor(XS[c]), Tensor(XS[c + 1]))
        expected.append(total.numpy())
    step, total = _pending_assign_step()
    captured = capture(step)
    for c in range(4):
        captured(Tensor(XS[c]), Tensor(XS[c + 1]))
        np.testing.assert_array_equal(total.numpy(), expected[c], err_msg=f"the pending assign after call {c + 1}")
    assert captured.replays == 3


# ---- arguments and tensors the recording keeps ----


def test_a_replay_refuses_an_argument_that_is_a_buffer_the_recording_keeps(device):
    w = Tensor(np.ones((8, 4), np.float32))  # a parameter the step reads and updates itself

    def step(x, y):
        w.assign(w * 0.5 + x)
        return (w - y).sum()

    captured = capture(step)
    captured(Tensor(XS[0]), Tensor(XS[1]))
    with pytest.raises(CaptureError, match=r"argument 0 \(float32\[8, 4\]\) is a buffer the recording keeps"):
        captured(w, Tensor(XS[1]))


def test_a_step_that_assigns_its_own_argument_is_refused(device):
    def step(p, x):
        p.assign(p + x)
        return x.sum()

    with pytest.raises(CaptureError, match=r"assigns argument 0 \(float32\[8, 4\]\)"):
        capture(step)(Tensor(XS[0]), Tensor(XS[1]))


def test_a_global_tensor_rebound_between_calls_is_refused(device):
    scale = {"t": Tensor(np.full(4, 2.0, np.float32))}

    def step(x, y):
        return x * scale["t"] - y

    captured = capture(step)
    captured(Tensor(XS[0]), Tensor(XS[1]))
    scale["t"] = Tensor(np.full(4, 3.0, np.float32))  # the old tensor is gone: only the recording has it
    with pytest.raises(CaptureError, match=r"read a float32\[4\] tensor that nothing outside the recording holds"):
        captured(Tensor(XS[0]), Tensor(XS[1]))


# ---- verify mode: what the recording cannot see, the eager run shows ----


def test_verify_catches_a_python_float_that_changes_between_calls(device):
    step, _ = halving_step(0.5)  # Python state past the guards: the recording bakes the first value in
    captured = capture(step, verify=2)
    captured(Tensor(XS[0]), Tensor(XS[1]))
    with pytest.raises(CaptureError, match=r"verify: call 2 replayed differs from the eager call in output 0"):
        captured(Tensor(XS[0]), Tensor(XS[1]))


def test_verify_catches_a_branch_on_a_python_counter(device):
    calls = {"n": 0}

    @past_the_guards
    def odd() -> bool:  # a counter past the guards
        calls["n"] += 1
        return bool(calls["n"] % 2)

    def step(x, y):
        return x - y if odd() else x + y

    captured = capture(step, verify=1)
    captured(Tensor(XS[0]), Tensor(XS[1]))
    with pytest.raises(CaptureError, match=r"verify: call 2 .*max difference"):
        captured(Tensor(XS[0]), Tensor(XS[1]))


def test_verify_catches_a_deliberately_broken_replay_of_a_training_step(device):
    limn.manual_seed(0)
    model = MLP()
    opt = adamw(model)
    step = capture(training_step(model, opt), verify=3)
    step(Tensor(XS[0]), Tensor(YS[0]))
    run = step.runs[0]
    lr = opt.param_groups[0].tensors["lr"]
    kept = [i for i, leaf in enumerate(run.leaves) if leaf.kind == "kept" and leaf.buffer is lr.node.arg]
    assert kept, "the recording reads the learning rate as a kept buffer"
    wrong_lr = Tensor(np.array(0.5, np.float64))  # the replay now reads another learning rate
    run.leaves[kept[0]] = type(run.leaves[kept[0]])("kept", buffer=wrong_lr.node.arg)
    with pytest.raises(CaptureError, match=r"verify: call 2 replayed differs .*buffer the step assigns"):
        step(Tensor(XS[1]), Tensor(YS[1]))


def test_a_verified_training_step_matches_the_uncaptured_one_and_then_replays(device):
    expected = run(adamw, captured=False, steps=5)
    limn.manual_seed(0)
    model = MLP()
    step = capture(training_step(model, adamw(model)), verify=2)
    losses, trajectory = [], []
    for s in range(5):
        losses.append(step(Tensor(XS[s]), Tensor(YS[s])).numpy())
        trajectory.append(params(model))
    assert_same_run((losses, trajectory), expected)
    assert step.replays == 4


def test_capture_docstring_examples_run():
    import doctest

    import limn.capture.record

    result = doctest.testmod(limn.capture.record)
    assert result.failed == 0 and result.attempted > 0, f"{result.failed} of {result.attempted} examples failed"
