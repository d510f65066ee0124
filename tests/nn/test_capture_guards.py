"""Rule: a captured step never replays a stale Python value it read itself (limn.capture.guards). A float in a
closure cell rebound outside the step (a learning-rate schedule written by hand), a global counter a branch
reads, a setting on `self`, a default argument: each is noted when the step is recorded, and a replay after
it changed records the step again, so every call computes what the uncaptured loop computes (the oracle, on
the same device, bit for bit). Values that stay put replay without recording again."""

from __future__ import annotations

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.capture import CaptureError, capture
from limn.capture.guards import guards_of

XS = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)


@pytest.fixture(params=["numpy", "c"])
def device(request):
    limn.set_device(request.param)
    return request.param


def _hand_written_schedule(captured: bool) -> np.ndarray:
    """SGD by hand with lr = base * decay**step computed outside the step and read from its closure."""
    w = Tensor(np.ones(4, np.float32))
    lr = 0.1

    def step(x):
        w.assign(w - lr * x)
        return w * 1.0

    run = capture(step) if captured else step
    for k in range(5):
        lr = 0.1 * 0.5**k  # noqa: F841 (read by step through its closure cell)
        run(Tensor(XS[k]))
    return w.numpy()


def test_a_learning_rate_rebound_outside_the_step_moves_the_weights_as_the_uncaptured_loop(device):
    np.testing.assert_array_equal(_hand_written_schedule(True), _hand_written_schedule(False))


COUNT = 0


def _branch_on_a_global_counter(captured: bool) -> list[np.ndarray]:
    global COUNT
    COUNT = 0

    def step(x):
        return x * 2.0 if COUNT % 2 else x - 1.0

    run = capture(step) if captured else step
    outs = []
    for k in range(5):
        outs.append(run(Tensor(XS[k])).numpy())
        COUNT += 1
    return outs


def test_a_branch_on_a_global_counter_follows_the_counter(device):
    for k, (a, b) in enumerate(zip(_branch_on_a_global_counter(True), _branch_on_a_global_counter(False))):
        np.testing.assert_array_equal(a, b, err_msg=f"call {k + 1}")


class Scaler:
    def __init__(self) -> None:
        self.scale = 2.0


SCALER = Scaler()


def test_an_attribute_of_self_that_changes_records_again_and_one_that_stays_replays(device):
    class Scaler:  # a class per test: a method captured on its class refuses a second instance
        def __init__(self) -> None:
            self.scale = 2.0

        @capture
        def step(self, x):
            return x * self.scale

    model = Scaler()
    np.testing.assert_array_equal(model.step(Tensor(XS[0])).numpy(), XS[0] * 2.0)
    np.testing.assert_array_equal(model.step(Tensor(XS[1])).numpy(), XS[1] * 2.0)
    assert Scaler.step.replays == 1
    model.scale = 3.0
    np.testing.assert_array_equal(model.step(Tensor(XS[2])).numpy(), XS[2] * 3.0)
    assert Scaler.step.recordings == 2


def test_a_default_argument_that_is_changed_records_again(device):
    def step(x, shift=1.0):
        return x + shift

    run = capture(step)
    run(Tensor(XS[0]))
    step.__defaults__ = (5.0,)
    np.testing.assert_array_equal(run(Tensor(XS[1])).numpy(), XS[1] + 5.0)


def test_the_guards_name_what_the_step_reads_and_where():
    base = 0.5
    settings = {"clip": 1.0}

    def step(x, self=SCALER):
        return x * base * settings["clip"] * self.scale * COUNT

    found = {g.what: g for g in guards_of(step, (None,), {})}
    assert {"closure variable base", "closure variable settings", "global COUNT", "self.scale"} <= set(found), found
    assert found["closure variable base"].value == 0.5 and found["closure variable base"].line.endswith(
        f":{step.__code__.co_firstlineno + 1}"
    )


def test_a_chain_of_attributes_is_guarded_to_its_plain_value(device):
    """self.settings.clip, as train_stories reads its settings: the plain value at the end is what is noted."""

    class Settings:
        clip = 1.0

    class Model:
        def __init__(self) -> None:
            self.settings = Settings()

        @capture
        def step(self, x):
            return x * self.settings.clip

    model = Model()
    np.testing.assert_array_equal(model.step(Tensor(XS[0])).numpy(), XS[0])
    model.settings.clip = 0.25
    np.testing.assert_array_equal(model.step(Tensor(XS[1])).numpy(), XS[1] * np.float32(0.25))
    assert "self.settings.clip" in {g.what for g in Model.step.guards}


def test_a_value_too_long_to_watch_is_refused_on_the_first_replay_not_replayed_stale(device):
    table = [float(i) for i in range(20_000)]  # numbers, but too many to compare before every replay

    def step(x):
        return x * table[3]

    run = capture(step)
    np.testing.assert_array_equal(run(Tensor(XS[0])).numpy(), XS[0] * 3.0)
    with pytest.raises(CaptureError, match=r"reads closure variable table at .*over 10,000 numbers.*tensor argument"):
        run(Tensor(XS[1]))


class Schedule:
    """A learning-rate schedule written by hand, as a newcomer would: the step asks it for the rate."""

    def __init__(self) -> None:
        self.base, self.count = 0.1, 0

    def rate(self) -> float:
        return self.base * 0.5**self.count


def _scheduled(captured: bool) -> np.ndarray:
    w = Tensor(np.ones(4, np.float32))
    schedule = Schedule()

    def step(x):
        w.assign(w - schedule.rate() * x)  # the rate is read inside a method the step calls
        return w * 1.0

    run = capture(step) if captured else step
    for k in range(4):
        run(Tensor(XS[k]))
        schedule.count += 1
    return w.numpy()


def test_a_value_read_inside_a_method_the_step_calls_is_guarded_too(device):
    """The guards read the user's functions and methods the step calls (one call deep): the schedule's count
    changes, the step records again, and the weights are the uncaptured loop's."""
    np.testing.assert_array_equal(_scheduled(True), _scheduled(False))


def test_a_tensors_attributes_are_not_python_state():
    """x.T.shape reads off a tensor argument: no guard (a tensor's attributes are its data's, and reading some
    of them would build graph on every replay)."""

    def step(x):
        return x * x.T.shape[0] * x.ndim

    assert guards_of(step, (Tensor(XS[:4]),), {}) == []


def test_a_partial_and_a_callable_object_are_read_as_their_function(device):
    import functools

    class Step:
        def __init__(self) -> None:
            self.scale = 2.0

        def __call__(self, x, shift):
            return x * self.scale + shift

    step = Step()
    run = capture(functools.partial(step, shift=1.0))
    np.testing.assert_array_equal(run(Tensor(XS[0])).numpy(), XS[0] * 2.0 + 1.0)
    step.scale = 4.0
    np.testing.assert_array_equal(run(Tensor(XS[1])).numpy(), XS[1] * 4.0 + 1.0)
    assert "self.scale" in {g.what for g in run.guards}
