"""Rules for common values (limn.compiler.cse), each against an oracle:
- a value written twice is computed once: a layer norm (mean, then var, which takes the mean again) is
  one reduce for the mean, and still matches torch; a WHERE between a value and itself is that value, and
  of its condition only what may raise (a gather's index check) still runs;
- values that only look alike stay apart: constants differing in sign (0.0, -0.0), the same op over
  different buffers, different dtypes;
- effects are never merged: two equal assigns are two writes, and two pending assigns into one buffer in
  one run still raise."""

import numpy as np
import pytest
import torch

import limn
from limn import Tensor, nn
from limn.compiler.schedule import describe, schedule
from limn.graph.ops import Op


def _sums(sched) -> int:
    return sum(1 for k in sched.kernels if k.op is Op.SUM)


def test_a_layer_norm_takes_its_mean_once_and_matches_torch():
    x_np = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    ln = nn.LayerNorm(64)
    y = ln(Tensor(x_np))
    sched = schedule([y.node])
    assert _sums(sched) == 2, f"the mean, then the centred squares:\n{describe(sched)}"
    want = torch.nn.functional.layer_norm(torch.tensor(x_np), (64,))
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_the_same_expression_written_twice_is_one_kernel():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    a, b = (x * 2).sum(1), (x * 2).sum(1)
    sched = schedule([a.node, b.node])
    assert len(sched.kernels) == 1 and sched.sinks[0].slot == sched.sinks[1].slot, describe(sched)
    limn.realize(a, b)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_where_between_a_value_and_itself_is_that_value_and_its_gradient_still_flows():
    """var() keeps its mean live where it is finite and detached elsewhere (cond.where(mean, mean.detach())):
    one value either way, so the mean's kernel stores it once, and the gradients still match torch's."""
    x_np = np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)
    x = Tensor(x_np, requires_grad=True)
    y = nn.LayerNorm(32)(x)
    sched = schedule([y.node])
    assert not [k.name for k in sched.kernels if any(getattr(e, "op", None) is Op.WHERE for e in k.exprs)]
    assert len(sched.kernels[0].outputs) == 2, f"the sum and the mean, once:\n{describe(sched)}"
    (y * y).sum().backward()
    x_t = torch.tensor(x_np, requires_grad=True)
    y_t = torch.nn.functional.layer_norm(x_t, (32,))
    (y_t * y_t).sum().backward()
    np.testing.assert_allclose(y.numpy(), y_t.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_a_condition_nothing_else_reads_is_not_computed_but_its_index_checks_still_run(ir_device):
    """where(c, z, z) is z, so a reduce inside c feeds nothing and gets no kernel; a gather inside c still runs,
    so an index out of range raises as it does on the numpy device (and at torch's call)."""
    x = Tensor(np.arange(16, dtype=np.float32).reshape(4, 4))
    z = x * 3
    y = ((x @ x).sum(1, keepdim=True) > 0).where(z, z)
    sched = schedule([y.node])
    assert [k.op for k in sched.kernels] == [Op.MUL], describe(sched)
    np.testing.assert_array_equal(y.numpy(), np.arange(16, dtype=np.float32).reshape(4, 4) * 3)
    v = Tensor(np.arange(4, dtype=np.float32))
    bad = (v[Tensor(np.array([0, -9, 1, 2], np.int32))] > 1).where(v * 3, v * 3)
    with pytest.raises(IndexError, match="out of range"):
        bad.numpy()


def test_constants_that_differ_in_sign_stay_apart():
    x = Tensor(np.array([-0.0, 1.0], dtype=np.float32))
    plus, minus = x + 0.0, x + (-0.0)
    limn.realize(plus, minus)
    # -0.0 + 0.0 is 0.0, but -0.0 + -0.0 is -0.0: one merged node would give one of them both answers
    assert np.signbit(plus.numpy()).tolist() == [False, False]
    assert np.signbit(minus.numpy()).tolist() == [True, False]


def test_the_same_op_over_other_buffers_or_dtypes_stays_apart():
    a = Tensor(np.ones(4, np.float32))
    b = Tensor(np.ones(4, np.float32))
    c = Tensor(np.ones(4, np.float64))
    outs = [a.exp(), b.exp(), c.exp()]
    sched = schedule([o.node for o in outs])
    assert len({s.slot for s in sched.sinks}) == 3, describe(sched)


def test_two_equal_assigns_are_two_writes():
    # one tensor's assigns land in order (the second realizes the first, as torch's in-place ops run): w is 2,
    # where one merged assign would leave 1
    w = Tensor(np.zeros(3, np.float32))
    w.realize()
    limn.realize(w.assign(w + 1), w.assign(w + 1))
    np.testing.assert_array_equal(w.numpy(), [2.0, 2.0, 2.0])
    # two tensors over one buffer, each with an assign pending, cannot both land in one run: it raises
    v = w.detach()
    with pytest.raises(Exception, match="two assigns write one"):
        limn.realize(w.assign(w + 1), v.assign(v + 1))
