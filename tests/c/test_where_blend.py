"""Rule: the c device computes a WHERE whose arm is a value only that arm reads exactly as the numpy device does,
also where the select is broadcast along an inner loop.

gcc 12.2 at -O3 with -fno-trapping-math turned such a ?: into a masked load and its loop vectorizer dropped
that load's permutation, so out[i, j] = where(c[i], x[i], 0) read x[j]: silent wrong numbers (and reads past
the buffer). The c device now spells every WHERE as a blend of bits (c_prelude.SELECTS). These are the three
graphs that found it, each against the numpy device.
"""

from __future__ import annotations

import numpy as np
import pytest

import limn
from limn import Tensor


def _sum_where_gradient() -> list[Tensor]:
    """var's isfinite-where pattern: the gradient broadcasts a selected row total along the last axis."""
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    b = Tensor(x, requires_grad=True)
    total = b.sum(2, keepdim=True)
    (total.lt(float("inf")).where(total, 0.0) * b).sum().backward()
    return [b.grad]


def _int_eq_grid() -> list[Tensor]:
    """An int eq grid selecting broadcast values, then a product of two columns."""
    s = np.arange(1, 9, dtype=np.float32).reshape(4, 2)
    i = np.array([[0, 0], [1, 1], [0, 2], [2, 2]], np.int32)
    p = np.arange(3, dtype=np.int32).reshape(3, 1)
    hit = Tensor(i).reshape(4, 1, 2).eq(Tensor(p))  # (4, 3, 2)
    v = hit.where(Tensor(s).reshape(4, 1, 2).expand(4, 3, 2), 1.0)
    return [v[..., 0] * v[..., 1]]


def _scatter_mean() -> list[Tensor]:
    """A scatter mean: counts and sums scattered, a division where the count is positive."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 5, 6)).astype(np.float32)
    i = Tensor(rng.integers(0, 6, (4, 5, 4)).astype(np.int32))
    s = rng.standard_normal((4, 5, 4)).astype(np.float32)
    count = Tensor.zeros((4, 5, 6), dtype="int32").scatter_add(2, i, Tensor.ones((4, 5, 4), dtype="int32"))
    summed = Tensor.zeros((4, 5, 6)).scatter_add(2, i, Tensor(s))
    return [(count > 0).where(summed / count.maximum(1).cast("float32"), Tensor(a))]


@pytest.mark.parametrize("build", [_sum_where_gradient, _int_eq_grid, _scatter_mean], ids=lambda f: f.__name__[1:])
def test_a_broadcast_where_on_c_equals_the_numpy_device(build) -> None:
    try:
        limn.set_device("c")
    except limn.DeviceError as e:
        pytest.skip(f"no c device here: {e}")
    got = [t.numpy() for t in build()]
    limn.set_device("numpy")
    want = [t.numpy() for t in build()]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6, err_msg=f"{build.__name__} on c")


def test_every_where_is_a_blend_of_bits_in_the_c_source() -> None:
    """No ?: for a WHERE of any dtype: the blend reads both arms, so no compiler makes an arm's load masked."""
    from limn.c.prelude import SELECTS
    from limn.graph.ops import Op

    for kind, table in SELECTS.items():
        assert "?" not in table[Op.WHERE], f"the {kind} WHERE is spelled {table[Op.WHERE]!r}, a branch"
