"""limn.nn.utils.clip_grad_norm_ / clip_grad_value_ against torch.nn.utils on the same gradients: the total
norm returned and every clipped gradient, for each norm order torch takes (2, 1, inf, -inf, 0, p), clipping
and not clipping, NaN and inf gradients, parameters without a gradient and float64 gradients.
"""

import math

import numpy as np
import pytest
import torch

import limn
import limn.nn as nn
import limn.optim as optim
from limn import Tensor
from limn.capture import capture

_rng = np.random.default_rng(5)
SHAPES = [(4, 3), (3,), (2, 2, 2)]
GRADS = [_rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def _pairs(grads, dtype=np.float32, without_grad=()):
    """limn and torch parameters holding `grads` (None for the indices in without_grad)."""
    ours, theirs = [], []
    for i, g in enumerate(grads):
        p = Tensor(np.zeros(g.shape, dtype), requires_grad=True)
        q = torch.zeros(g.shape, dtype=torch.from_numpy(np.zeros(0, dtype)).dtype, requires_grad=True)
        if i not in without_grad:
            p.grad, q.grad = Tensor(g.astype(dtype)), torch.from_numpy(g.astype(dtype))
        ours.append(p)
        theirs.append(q)
    return ours, theirs


def _assert_grads_equal(ours, theirs, rtol=1e-6):
    for i, (p, q) in enumerate(zip(ours, theirs)):
        if q.grad is None:
            assert p.grad is None, i
        else:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=rtol, atol=1e-7, err_msg=f"grad {i}")


NORM_TYPES = {"l2": 2.0, "l1": 1, "inf": math.inf, "-inf": -math.inf, "l0": 0, "p3.5": 3.5, "p0.5": 0.5}


@pytest.mark.parametrize("max_norm", [0.5, 1e3], ids=["clipping", "not-clipping"])
@pytest.mark.parametrize("norm", NORM_TYPES)
def test_clip_grad_norm_returns_torchs_total_norm_and_scales_as_torch(device, norm, max_norm):
    ours, theirs = _pairs(GRADS)
    total = nn.clip_grad_norm_(ours, max_norm, norm_type=NORM_TYPES[norm])
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=NORM_TYPES[norm])
    limn.realize(total, *[p.grad for p in ours])
    assert total.shape == () and total.dtype == limn.float32
    np.testing.assert_allclose(total.numpy(), expected.numpy(), rtol=1e-6)
    _assert_grads_equal(ours, theirs)


def test_clip_grad_norm_skips_parameters_without_grad_and_takes_one_tensor(device):
    ours, theirs = _pairs(GRADS, without_grad=(1,))
    total = nn.utils.clip_grad_norm_(ours, 0.1)
    np.testing.assert_allclose(total.numpy(), torch.nn.utils.clip_grad_norm_(theirs, 0.1).numpy(), rtol=1e-6)
    _assert_grads_equal(ours, theirs)
    one, one_torch = _pairs(GRADS[:1])
    total = nn.clip_grad_norm_(one[0], 0.1)  # a single tensor, not a list
    np.testing.assert_allclose(total.numpy(), torch.nn.utils.clip_grad_norm_(one_torch[0], 0.1).numpy(), rtol=1e-6)


def test_no_gradients_give_a_zero_norm_as_torch():
    ours, _ = _pairs(GRADS, without_grad=(0, 1, 2))
    assert nn.clip_grad_norm_(ours, 1.0).item() == torch.nn.utils.clip_grad_norm_([], 1.0).item() == 0.0


def test_float64_gradients_give_a_float64_norm(device):
    ours, theirs = _pairs(GRADS, dtype=np.float64)
    total = nn.clip_grad_norm_(ours, 0.5)
    assert total.dtype == limn.float64
    np.testing.assert_allclose(total.numpy(), torch.nn.utils.clip_grad_norm_(theirs, 0.5).numpy(), rtol=1e-12)
    _assert_grads_equal(ours, theirs, rtol=1e-12)


@pytest.mark.parametrize("bad", [math.nan, math.inf], ids=["nan", "inf"])
def test_a_nonfinite_gradient_makes_nan_gradients_or_raises_when_asked(device, bad):
    grads = [g.copy() for g in GRADS]
    grads[2][0, 1, 1] = bad
    ours, theirs = _pairs(grads)
    total = nn.clip_grad_norm_(ours, 1.0)
    expected = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    np.testing.assert_array_equal(total.numpy(), expected.numpy())
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())  # NaN where torch's are NaN
    ours, _ = _pairs(grads)
    with pytest.raises(RuntimeError, match="error_if_nonfinite=False"):
        nn.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)


def test_clip_grad_value_clamps_as_torch(device):
    ours, theirs = _pairs(GRADS, without_grad=(1,))
    assert nn.clip_grad_value_(ours, 0.7) is None
    torch.nn.utils.clip_grad_value_(theirs, 0.7)
    _assert_grads_equal(ours, theirs)


def test_clipping_runs_in_the_optimizer_step_and_in_a_captured_replay(device):
    """The clip is lazy: a captured step with it replays the eager loop's values."""
    xs = _rng.standard_normal((4, 8, 3)).astype(np.float32)

    def make():
        limn.manual_seed(0)
        model = nn.Linear(3, 2)
        return model, optim.SGD(nn.parameters(model), lr=0.5)

    def step_of(model, opt):
        def step(x):
            loss = model(x).square().sum()
            loss.backward()
            norm = nn.clip_grad_norm_(nn.parameters(model), 0.25)
            opt.step(loss, norm)
            return norm

        return step

    eager, captured = make(), make()
    eager_step, captured_step = step_of(*eager), capture(step_of(*captured))
    for x in xs:
        a, b = eager_step(Tensor(x)), captured_step(Tensor(x))
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert captured_step.replays == 3
    np.testing.assert_array_equal(eager[0].weight.numpy(), captured[0].weight.numpy())
