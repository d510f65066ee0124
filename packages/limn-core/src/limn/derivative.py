"""Values computed off the gradient graph, with torch's derivative formula attached: the math functions' glue.

A function such as sin reduces its argument with tables and rounding tricks whose own gradient means nothing,
so limn.trig and limn.logexp compute the value from detached inputs in float64 and `carry` it, linked to the
inputs by carriers whose gradient is torch's formula (cos x for sin) and whose value leaves it unchanged.
`unary` and `binary` are that pattern for a one- and a two-input function, dtypes as torch (ints give float32).
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from limn import autograd, dtypes
from limn.primitives import Tensor, TensorLike


def carry(value: Tensor, x: Tensor, derivative: Callable[[], Tensor]) -> Tensor:
    """`value` itself (-0.0, inf and NaN included) whose gradient w.r.t. x is derivative() (a tensor of x's
    shape and dtype, called only when a gradient flows), including the inf and NaN torch's formula gives.

    The carrier added to value is a sum of terms, each +-0 but where it serves (there, the gradient wanted):
      linear  x finite, d finite      z * d, z = x - x.detach() taken where x is finite: 0, gradient 1
      steep   x finite, d = +-inf     sqrt(z) * +-1: 0, gradient 1 / (2 sqrt 0) = inf
      poison  d NaN                   where(True, 0, x * NaN): 0, and the untaken branch's gradient 0 * NaN
      along   x infinite, value = x d x * d: value's own infinity (sinh(inf) = inf, d = inf)
      blank   x inf or NaN, value NaN (x - x.detach()) * d: NaN, as value is already, gradient d
    and no term elsewhere, gradient 0 (x infinite and value finite: torch's formula gives 0, as atan'(inf)).
    Trap: the derivative is taken from detached inputs, so a second derivative through it is 0.

    >>> x = Tensor([0.5], requires_grad=True)
    >>> carry(Tensor([7.0]), x, lambda: Tensor([3.0])).sum().backward()
    >>> x.grad.tolist()
    [3.0]
    """
    if not (autograd.is_grad_enabled() and x.requires_grad):
        return value
    d, xd, v = derivative().detach(), x.detach(), value.detach()
    finite_x, finite_d, nan_d = xd.isfinite(), d.isfinite(), d.isnan()
    z = finite_x.where(x, 0.0) - finite_x.where(xd, 0.0)  # 0 everywhere, gradient 1 where x is finite
    linear = z * finite_d.where(d, 0.0)
    steep = finite_x.logical_and(finite_d.logical_or(nan_d).logical_not())
    steep = steep.where(steep.where(z, 1.0).sqrt() * d.gt(0).where(1.0, -1.0), 0.0)
    poison = nan_d.where(nan_d.where(0.0, x * nan_d.where(math.nan, 0.0)), 0.0)
    along = finite_x.logical_not().logical_and((xd * d).eq(v))
    along = along.where(x * along.where(d, 1.0), 0.0)
    blank = finite_x.logical_not().logical_and(v.isnan())
    blank = blank.where((x - xd) * blank.where(d, 1.0), 0.0)
    return value - (0 - (linear + steep + poison + along + blank))  # 0 - (+-0) is +0: value keeps its zeros' signs


def unary(x: Tensor, value: Callable[[Tensor], Tensor], derivative: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    """f(x) for a float function computed in float64: value(x64) from the detached input, and the gradient
    derivative(x64, value) (both float64 tensors). An int or bool x gives float32, a float x its own dtype."""
    x = x._float()
    wide = x.cast(dtypes.float64)
    xd = wide.detach()
    out = value(xd)
    out = carry(out, wide, lambda: derivative(xd, _as_torch_sees_it(out, x.dtype)))
    return out.cast(x.dtype)


def _as_torch_sees_it(out: Tensor, dtype: dtypes.DType) -> Tensor:
    """The float64 value rounded to the result's dtype (and widened back): torch's formulas that use the
    result (exp2's 2**x ln 2, tan's 1 + tan**2) see it so, inf where it overflows."""
    return out if dtype == dtypes.float64 else out.cast(dtype).cast(dtypes.float64)


def binary(
    x: Tensor,
    other: TensorLike,
    what: str,
    value: Callable[[Tensor, Tensor], Tensor],
    dx: Callable[[Tensor, Tensor, Tensor, dtypes.DType], Tensor],
    dy: Callable[[Tensor, Tensor, Tensor, dtypes.DType], Tensor],
    reverse: bool = False,
) -> Tensor:
    """f(x, other) for a float function of two inputs, promoted and broadcast as in + (ints and bools give
    float32) and computed in float64; dx and dy take (x64, y64, value) and give the partial derivatives."""
    a, b = x._operands(other, what, reverse)
    a, b = a._float(), b._float()
    wa, wb = a.cast(dtypes.float64), b.cast(dtypes.float64)
    ad, bd = wa.detach(), wb.detach()
    out = value(ad, bd)
    seen = _as_torch_sees_it(out, a.dtype)
    out = carry(out, wa, lambda: dx(ad, bd, seen, a.dtype))
    out = carry(out, wb, lambda: dy(ad, bd, seen, a.dtype))
    return out.cast(a.dtype)
