"""The scans, composed from movement and elementwise ops: cumsum, cumprod, cummax, cummin, logcumsumexp.

Each takes a tensor and a dim (numpy's axis= names it too) and gives a tensor of its shape whose cell i combines
cells 0..i along that dim, as torch's do (cummax and cummin also give the index each value came from). Zero-length
dims give an empty result and a 0-d tensor is its own scan, as in torch (tests/core/test_scans.py).
Pipeline: **tensor (composed ops)** -> graph (VIEW, ADD, MUL, WHERE) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.reduce.reductions import DTypeLike, ValuesIndices
from limn.frontend.arguments import Scalar, axis_is_dim, normalize_axis

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

Parts = tuple["Tensor", ...]  # the values a scan carries together, each (..., n)

# The composition is a Hillis-Steele scan: step k combines each cell with the cell 2**k before it (a shrink and
# a pad of the running value, then one elementwise combine), so log2(n) steps of n cells, O(n log n) work.
# A triangular-mask reduce (sum over j of where(j <= i, x[j], 0)) is one kernel but O(n**2) work and memory on
# the numpy device, and only sums and maxes have a reduce to put under the mask; the log-step scan serves
# every combine here (add, multiply, max with its index, logaddexp) and stays O(n log n) up to long axes.
# Each step reads the previous one twice, so a step is materialized every other step: a fused kernel reads
# at most 4 cells per output, where fusing all of them would read 2**steps.


def _shift(p: Tensor, k: int, fill: Scalar) -> Tensor:
    """p moved k cells later along the last dim, `fill` in the k cells it leaves: out[..., i] = p[..., i - k]."""
    lead = ((0, 0),) * (p.ndim - 1)
    n = p.shape[-1]
    return p.shrink(tuple((0, s) for s in p.shape[:-1]) + ((0, n - k),)).pad_constant(lead + ((k, 0),), value=fill)


def _scan(parts: Parts, fills: tuple[Scalar, ...], combine: Callable[[Parts, Parts], Parts]) -> Parts:
    """The inclusive scan of `parts` along the last dim: combine(earlier, later) must be associative, and a
    `fills` cell must leave the other side unchanged (0 for +, 1 for *)."""
    n = parts[0].shape[-1]
    shift, step = 1, 0
    while shift < n:
        earlier = tuple(_shift(p, shift, fill) for p, fill in zip(parts, fills))
        parts = combine(earlier, parts)
        shift, step = shift * 2, step + 1
        if step % 2 == 0 and shift < n:
            parts = tuple(p.contiguous() for p in parts)
    return parts


def _along_last(x: Tensor, dim: int | None, what: str) -> tuple[Tensor, int]:
    """x with `dim` moved last (a 0-d tensor as shape (1,)), and that dim's index, for _from_last to undo.
    torch requires the dim, and so does limn."""
    if dim is None:
        raise TypeError(f"{what}: needs the dim to scan along, e.g. x.{what}(0) or x.{what}(dim=-1)")
    dim = normalize_axis(dim, x.ndim, what)
    if x.ndim == 0:
        return x.reshape(1), 0
    return x.transpose(dim, -1), dim


def _from_last(out: Tensor, like: Tensor, dim: int) -> Tensor:
    """_along_last undone: the last dim of `out` moved back to `dim`, in the shape of `like`."""
    return out.reshape(()) if like.ndim == 0 else out.transpose(dim, -1)


def _accumulator(x: Tensor, dtype: DTypeLike) -> Tensor:
    """x cast for a cumulative sum or product: dtype= first, as torch; ints and bools to int32 (torch: int64)."""
    if dtype is not None:
        return x.cast(dtype)
    return x if x.dtype.is_float else x.cast(dtypes.int32)


def _wide(x: Tensor) -> Tensor:
    """float32 and the half widths scan in float64, as torch's CPU kernels accumulate in double: the log-step
    scan's rounding then stays far below float32's, for any length and magnitude."""
    return x.cast(dtypes.float64) if x.dtype.is_float else x


def _running_best(x: Tensor, dim: int | None, largest: bool, what: str) -> ValuesIndices:
    """cummax (largest) or cummin: the scan of (value, index) pairs, where the later pair wins when its value
    is at least (at most) the earlier one, or is NaN while the earlier is not, so ties and NaN runs give the
    last index, as torch. The values are x gathered at those indices, so the gradient flows to them, as torch."""
    y, dim = _along_last(x, dim, what)
    keys = y.detach()
    n = keys.shape[-1]
    if keys.dtype == dtypes.bool_:
        keys = keys.cast(dtypes.int32)
    if keys.dtype.is_float:
        fill = -math.inf if largest else math.inf
    else:
        info = np.iinfo(keys.dtype.np)
        fill = int(info.min) if largest else int(info.max)
    positions = limn.Tensor.arange(n, device=x.device).reshape((1,) * (keys.ndim - 1) + (n,)).expand(keys.shape)

    def combine(earlier: Parts, later: Parts) -> Parts:
        (v0, i0), (v1, i1) = earlier, later
        better = v1.ge(v0) if largest else v1.le(v0)
        if v1.dtype.is_float:  # a later NaN wins; after an earlier NaN only a NaN does
            better = v1.isnan().logical_or(v0.isnan().logical_not().logical_and(better))
        return better.where(v1, v0), better.where(i1, i0)

    _, indices = _scan((keys, positions), (fill, -1), combine)
    values = y.gather(-1, indices)
    return ValuesIndices(_from_last(values, x, dim), _from_last(indices, x, dim))


def _logaddexp(earlier: Parts, later: Parts) -> Parts:
    """log(e**a + e**b) as m + log(1 + e**(lo - m)), m the larger: never overflows. Equal infinities (where
    lo - m is NaN) give m + log 2 = m, and a NaN on either side gives NaN. A finite tie keeps lo - m = 0 in
    the graph, so its gradient splits in half between the two sides."""
    (a,), (b,) = earlier, later
    below = a.lt(b)
    m, lo = below.where(b, a), below.where(a, b)
    same_infinity = m.isinf().logical_and(lo.eq(m))
    gap = same_infinity.where(0.0, lo - m)  # <= 0, or NaN with a NaN side
    return (m + (1 + gap.exp()).log(),)


class ScansMixin:
    """Tensor's running reductions along a dim: cumsum, cumprod, cummax, cummin, logcumsumexp."""

    __slots__ = ()

    @axis_is_dim
    def cumsum(self, dim: int | None = None, *, dtype: DTypeLike = None) -> Tensor:
        """torch.cumsum: out[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...] along dim. Ints and bools sum in
        int32 (torch: int64) and wrap; dtype= casts the input first. The gradient is the reversed cumsum.

        >>> Tensor([1, 2, 3]).cumsum(0).tolist()
        [1, 3, 6]
        """
        x = _accumulator(self, dtype)
        y, dim = _along_last(x, dim, "cumsum")
        (out,) = _scan(
            (_wide(y),), (0,), lambda earlier, later: (earlier[0] + later[0],)
        )  # out_i = out_(i-2^k) + out_i
        return _from_last(out.cast(x.dtype), x, dim)

    @axis_is_dim
    def cumprod(self, dim: int | None = None, *, dtype: DTypeLike = None) -> Tensor:
        """torch.cumprod: the running product along dim, ints and bools in int32 (torch: int64); dtype= casts
        the input first. The gradient is exact with zeros in the slice (autograd's rule for each multiply), as torch's.

        >>> Tensor([1, 2, 3, 4]).cumprod(0).tolist()
        [1, 2, 6, 24]
        """
        x = _accumulator(self, dtype)
        y, dim = _along_last(x, dim, "cumprod")
        (out,) = _scan((_wide(y),), (1,), lambda earlier, later: (earlier[0] * later[0],))  # out_i = out_(i-2^k) out_i
        return _from_last(out.cast(x.dtype), x, dim)

    @axis_is_dim
    def cummax(self, dim: int | None = None) -> ValuesIndices:
        """torch.cummax: (values, indices) of the running maximum along dim; NaN propagates; a tie and a run of
        NaNs give the last index, as torch; indices int32 (torch: int64). The gradient goes to the picked values.

        >>> Tensor([1, 3, 2, 3]).cummax(0).indices.tolist()
        [0, 1, 1, 3]
        """
        return _running_best(self, dim, True, "cummax")

    @axis_is_dim
    def cummin(self, dim: int | None = None) -> ValuesIndices:
        """torch.cummin: (values, indices) of the running minimum along dim, by the rules of cummax.

        >>> Tensor([3.0, 1.0, 2.0, 1.0]).cummin(0).indices.tolist()
        [0, 1, 1, 3]
        """
        return _running_best(self, dim, False, "cummin")

    @axis_is_dim
    def logcumsumexp(self, dim: int | None = None) -> Tensor:
        """torch.logcumsumexp: log(cumsum(exp(x))) along dim, each step a stable logaddexp, so no exp overflows
        and a running value far below the rest keeps its digits; -inf cells add nothing. Ints become float32.
        The gradient is torch's, NaN at an infinite input that equals its running value included.

        >>> round(Tensor([0.0, 0.0]).logcumsumexp(0).tolist()[1], 4)
        0.6931
        """
        x = self
        x = x._float()
        y, dim = _along_last(x, dim, "logcumsumexp")
        wide = _wide(y)  # in float64: near 1e4 a float32 running value's rounding moves the gradient by 1e-4
        (out,) = _scan((wide,), (-math.inf,), _logaddexp)
        # torch's gradient, sum over i >= j of g_i e**(x_j - out_i), is NaN where an infinite x_j equals out_j
        # (inf - inf) and where x_j is NaN: a where that never takes its second branch, wide * (NaN there, 0
        # elsewhere), passes 0 * NaN to those cells' gradient and 0 to the rest
        nan_grad = wide.isinf().logical_and(wide.eq(out)).logical_or(wide.isnan())
        poison = nan_grad.detach().where(math.nan, 0.0)
        out = limn.Tensor.full(out.shape, True, device=x.device).where(out, wide * poison)
        return _from_last(out.cast(x.dtype), x, dim)
