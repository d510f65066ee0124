"""The reductions, composed from SUM and MAX: sum, max, min, mean, var, std, softmax, argmax, any, all, matmul.

Each takes a tensor and `axis` (an int, a tuple of ints, or None for every dim) with `keepdim`, and gives a
tensor; edge values follow torch (empty axes, NaN, inf, 0-d tensors; tests/core/test_edge_values.py). Named
as the methods limn.tensor makes of them (sum, max, ... as numpy's are), so Python's builtins are not used here.
Pipeline: **tensor (composed ops)** -> graph (SUM, MAX) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from limn import dtypes
from limn.ops import Op
from limn.primitives import Tensor, normalize_axis
from limn.view import prod

Axis = int | Sequence[int] | None  # a dim, several, or every dim


def _check_nonempty(x: Tensor, axes: tuple[int, ...], what: str) -> None:
    """max, min, argmax and argmin of no values have no answer: torch and numpy raise, and so does limn."""
    empty = [d for d in axes if x.shape[d] == 0]
    if empty:
        raise IndexError(
            f"{what}: axis {empty[0]} of a tensor of shape {x.shape} is empty, and the {what} of no values "
            "is undefined (torch and numpy raise too); reduce over a non-empty axis, or check the size first"
        )


def _dropped(x: Tensor, out: Tensor, axes: tuple[int, ...], keepdim: bool) -> Tensor:
    """out, reduced over `axes` of x with its reduced dims kept, without them unless keepdim."""
    return out if keepdim else out.reshape(tuple(s for d, s in enumerate(x.shape) if d not in axes))


def sum(x: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """The sum over axis. Bools sum as int32; half widths keep the running total in float32 and round once.
    The sum of no values is 0."""
    return x._reduce(Op.SUM, axis, keepdim)


def max(x: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """The largest value over axis (every dim when None). NaN propagates and a bool tensor gives bool, as
    torch.amax (not torch.max, which also returns indices); an empty axis raises IndexError, as in torch
    (there is no largest of no values). Ties share the gradient evenly, as torch.amax's."""
    _check_nonempty(x, x._axes(axis, "max"), "max")
    out = x._reduce(Op.MAX, axis, keepdim)
    return out.cast(dtypes.bool_) if x.dtype == dtypes.bool_ else out  # bools reduce as int32 0/1


def min(x: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """The smallest value over axis, by the rules of max."""
    _check_nonempty(x, x._axes(axis, "min"), "min")
    if x.dtype == dtypes.bool_:
        return x.logical_not().max(axis, keepdim).logical_not()  # min b = not max(not b)
    if x.dtype.is_int:
        # -x overflows at the most negative int; ~x = -x - 1 never does, and min x = ~max(~x)
        return -((-x - 1).max(axis, keepdim)) - 1
    return -((-x).max(axis, keepdim))  # min x = -max(-x)


def mean(x: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """The mean over axis, in float32 for int and bool tensors; NaN over an empty axis, as torch."""
    x = x._float()
    n = prod([x.shape[d] for d in x._axes(axis, "mean")])
    return x.sum(axis, keepdim) * (1.0 / n if n else float("nan"))


def var(x: Tensor, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    """sum((x - mean)**2) / (n - correction); correction=1 is torch's default, 0 the biased form.

    Once correction reaches n, torch divides by zero and so does limn: inf, or NaN where every value is
    the mean (and NaN for an empty slice). The gradient there is 2 (x - mean) / 0, so +-inf, which is
    torch's rule for an axis; torch's all-dims form instead gives +inf throughout."""
    x = x._float()
    n = prod([x.shape[d] for d in x._axes(axis, "var")])
    mean = x.mean(axis, keepdim=True)
    if n <= correction:
        centered = x - mean.detach()  # the mean's path would add inf * 0 = NaN to the gradient
        return (centered * centered).sum(axis, keepdim) * math.inf  # sum / 0
    # the mean's path adds sum(2 (x - mean)) / n = 0 to the gradient (it matters to second derivatives), but
    # a slice holding inf or NaN makes that sum NaN for every element; torch's gradient, 2 (x - mean) / (n - c),
    # is NaN only where x - mean is, so those slices (their mean is not finite) cut the mean's path
    mean = mean.isfinite().where(mean, mean.detach())
    centered = x - mean
    return (centered * centered).sum(axis, keepdim) * (1.0 / (n - correction))


def std(x: Tensor, axis: Axis = None, keepdim: bool = False, correction: int = 1) -> Tensor:
    """sqrt(var(x)), as torch, whose gradient is 0 where the std is 0.

    It is computed as m * sqrt(var(x / m)) with m = max|x| over each slice, so values near the float limits
    do not overflow when squared (torch accumulates in float64; x ~ 3e38 has a std of about 3e38, not inf).
    m is a constant to autograd, which leaves the gradient exact: std(x) = m std(x / m) for every m > 0."""
    axes = x._axes(axis, "std")
    x = x._float()
    wide = x.cast(x.dtype.compute)
    m = wide.abs()._reduce(Op.MAX, axes, keepdim=True).detach()
    # 1/m overflows for a subnormal m, so those slices are lifted by 2**64 first (exact: a power of two)
    lift = m.lt(2.0**-64).where(2.0**64, 1.0)
    lifted = m * lift
    unit = (wide * lift) * lifted.eq(0).where(1.0, lifted).reciprocal()  # x / m, and 0 where every x is 0
    v = unit.var(axes, keepdim=True, correction=correction)
    positive = v.gt(0)
    root = positive.where(positive.where(v, 1.0).sqrt(), v)  # sqrt(v), with gradient 0 (not 1/0) at v = 0
    return _dropped(x, (root * m).cast(x.dtype), axes, keepdim)


def logsumexp(x: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over axis, shifted by the max so exp cannot overflow; -inf over an empty axis."""
    axes = x._axes(axis, "logsumexp")
    x = x._float()
    m = x._reduce(Op.MAX, axes, keepdim=True).detach()  # shifting by the max keeps exp in range; it cancels
    m = m.isinf().where(0.0, m)  # an infinite max (or an empty slice's -inf) shifts by 0, as torch
    out = m + (x - m).exp().sum(axes, keepdim=True).log()  # logsumexp = m + log sum exp(x - m)
    return _dropped(x, out, axes, keepdim)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along axis (the last by default), shifted by the max so exp cannot overflow."""
    axis = normalize_axis(axis, x.ndim, "softmax")
    x = x._float()
    e = (x - x._reduce(Op.MAX, axis, keepdim=True).detach()).exp()  # softmax = exp(x - max) / sum
    return e / e.sum(axis, keepdim=True)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """log(softmax(x)) along axis, computed as (x - max) - log sum exp(x - max), never as a log of 0."""
    axis = normalize_axis(axis, x.ndim, "log_softmax")
    x = x._float()
    shifted = x - x._reduce(Op.MAX, axis, keepdim=True).detach()
    return shifted - shifted.exp().sum(axis, keepdim=True).log()  # log softmax = (x - max) - log sum exp(...)


def argmax(x: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first maximum along axis (over the flattened tensor when axis is None), int32. NaN
    counts as the largest value, as in torch. Bool tensors and empty axes raise, as in torch. No gradient."""
    if x.dtype == dtypes.bool_:
        raise TypeError("argmax of a bool tensor: torch does not define it; cast first, x.cast('int32').argmax()")
    if axis is None:
        _check_nonempty(x, x._axes(None, "argmax"), "argmax")
        return x.reshape(-1).argmax(0, keepdim=False)
    axis = normalize_axis(axis, x.ndim, "argmax")
    if x.ndim == 0:
        return Tensor.full((), 0, dtype=dtypes.int32, device=x.device)  # the one value sits at index 0
    _check_nonempty(x, (axis,), "argmax")
    n = x.shape[axis]
    hit = x.eq(x.max(axis, keepdim=True))
    if x.dtype.is_float:
        hit = hit.logical_or(x.isnan())  # NaN counts as the largest value, as in torch.argmax
    shape = [1] * x.ndim
    shape[axis] = n
    # the first hit has the largest (n - index); an index that misses scores 0
    score = hit.where(Tensor.arange(n, 0, -1, device=x.device).reshape(shape), 0)
    return (n - score.max(axis, keepdim=keepdim)).cast(dtypes.int32)


def argmin(x: Tensor, axis: int | None = None, keepdim: bool = False) -> Tensor:
    """Index of the first minimum, by the rules of argmax (NaN counts as the smallest value here)."""
    if x.dtype == dtypes.bool_:
        raise TypeError("argmin of a bool tensor: torch does not define it; cast first, x.cast('int32').argmin()")
    _check_nonempty(x, x._axes(axis, "argmin"), "argmin")
    # the first minimum of x is the first maximum of -x; for ints of ~x = -x - 1, since -x wraps at -128
    flipped = -x - 1 if x.dtype.is_int else -x
    return flipped.argmax(axis, keepdim)


def any(x: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """Whether some value over axis is nonzero (NaN is); over an empty axis False, as in torch. Bool, except
    for a uint8 tensor, where it is uint8 0/1, as torch's (a leftover of torch's byte masks)."""
    # any = max of (x != 0) as 0/1, > 0; MAX of nothing is the lowest int, so any of nothing is False
    out = x.cast(dtypes.bool_).cast(dtypes.int32)._reduce(Op.MAX, axis, keepdim).gt(0)
    return out.cast(dtypes.uint8) if x.dtype == dtypes.uint8 else out


def all(x: Tensor, axis: Axis = None, keepdim: bool = False) -> Tensor:
    """Whether every value over axis is nonzero; over an empty axis True, as in torch (uint8 as in any)."""
    out = x.logical_not().any(axis, keepdim).logical_not()  # all x = not any(not x)
    return out.cast(dtypes.uint8) if x.dtype == dtypes.uint8 else out


# ---- matmul: a broadcast multiply and a SUM ----


def matmul(x: Tensor, other: Tensor) -> Tensor:
    """(..., n, k) @ (..., k, m) -> (..., n, m) as a broadcast multiply and a sum over k, which the
    scheduler fuses into one kernel. 1-D operands act as a row or a column, as in numpy; batch dims
    broadcast. Half widths multiply and sum in float32 and round once.

    Trap: the numpy device builds the whole (..., n, m, k) product before summing it, so a large matmul
    runs out of memory there rather than slowly; the compiled devices walk it in one loop nest."""
    a, b = x, other if isinstance(other, Tensor) else Tensor(other)
    b_shape = b.shape
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: both operands need at least one dim; use * for scalars")
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    if squeeze_a:
        a = a.reshape(1, a.shape[0])
    if squeeze_b:
        b = b.reshape(b.shape[0], 1)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul {x.shape} @ {b_shape}: inner sizes {a.shape[-1]} and {b.shape[-2]} differ")
    dtype = dtypes.promote(a.dtype, b.dtype)
    compute = dtype.compute  # half widths: multiply and sum in float32, round once at the end
    a, b = a.cast(compute), b.cast(compute)
    prod_ = a.unsqueeze(-2) * b.transpose(-1, -2).unsqueeze(-3)  # (..., n, 1, k) * (..., 1, m, k)
    out = prod_.sum(-1).cast(dtype)  # (..., n, m, k) -> (..., n, m)
    if squeeze_a:
        out = out.squeeze(-2)
    if squeeze_b:
        out = out.squeeze(-1)
    return out


def dot(x: Tensor, other: Tensor) -> Tensor:
    """x @ other (matmul). Unlike torch.dot it is not limited to 1-D operands."""
    return x.matmul(other)
