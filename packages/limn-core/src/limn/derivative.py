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

    The carrier added to value is +-0 (or value's own NaN or infinity) and has the gradient wanted:
      linear  x finite, d finite        z * d, z = x - x.detach(): exactly 0, gradient 1
      steep   x finite, d inf or NaN    sqrt(z) * (+-1, or 0 for NaN): 0, gradient 1 / (2 sqrt 0) = inf (times 0: NaN)
      along   x infinite, value = x d   x * d: value's own infinity (sinh(inf) = inf, d = inf)
      blank   x inf or NaN, value NaN   z * d: NaN as value already is, gradient d
      poison  x infinite, d NaN         where(True, 0, x * NaN): 0, and the untaken branch's gradient 0 * NaN
    and 0 elsewhere (x infinite, value not NaN: torch's formula gives 0 there, as atan'(inf) = 0).
    Trap: a finite nonzero or infinite d at an infinite x with a value it cannot reach comes out 0.
    Trap: the derivative is taken from detached inputs, so a second derivative through it is 0.

    >>> x = Tensor([0.5], requires_grad=True)
    >>> carry(Tensor([7.0]), x, lambda: Tensor([3.0])).sum().backward()
    >>> x.grad.tolist()
    [3.0]
    """
    if not (autograd.is_grad_enabled() and x.requires_grad):
        return value
    d, xd, v = derivative().detach(), x.detach(), value.detach()
    finite_x, finite_d = xd.isfinite(), d.isfinite()
    linear = finite_x.logical_and(finite_d)
    steep = finite_x.logical_and(finite_d.logical_not())
    along = xd.isinf().logical_and(v.isinf()).logical_and((xd * d).eq(v))
    blank = finite_x.logical_not().logical_and(v.isnan())
    poisoned = xd.isinf().logical_and(v.isnan().logical_not()).logical_and(d.isnan())
    z = x - xd
    by_linear = z * linear.where(d, 0.0)
    by_steep = steep.where(z, 1.0).sqrt() * d.isnan().where(0.0, d.gt(0).where(1.0, -1.0))
    by_along = x * along.where(d, 1.0)
    by_blank = z * blank.where(d, 1.0)
    # a where's untaken branch x * NaN: value 0, gradient 0 * NaN = NaN, and only where asked
    by_poison = poisoned.where(0.0, x * poisoned.where(math.nan, 0.0))
    otherwise = blank.where(by_blank, poisoned.where(by_poison, 0.0))
    carrier = linear.where(by_linear, steep.where(by_steep, along.where(by_along, otherwise)))
    return value - (0 - carrier)  # 0 - (+-0) is +0, so value keeps the sign of its zeros


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
