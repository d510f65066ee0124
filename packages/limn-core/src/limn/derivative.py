"""Values computed off the gradient graph, with torch's derivative formula attached: the math functions' glue.

A function such as sin reduces its argument with tables and rounding tricks whose own gradient means nothing,
so limn.trig and limn.logexp compute the value from detached inputs in float64 and `carry` it, linked to the
inputs by carriers whose gradient is torch's formula (cos x for sin) and whose value leaves it unchanged.
`unary` and `binary` are that pattern for a one- and a two-input function, dtypes as torch (ints give float32).
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

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
    and 0 elsewhere (x infinite with a finite value: torch's formula is 0 there, as atan'(inf)).
    Trap: the derivative is taken from detached inputs, so a second derivative through it is 0.

    >>> x = Tensor([0.5], requires_grad=True)
    >>> carry(Tensor([7.0]), x, lambda: Tensor([3.0])).sum().backward()
    >>> x.grad.tolist()
    [3.0]
    """
    if not (autograd.is_grad_enabled() and x.requires_grad):
        return value
    d, xd, value = derivative().detach(), x.detach(), value.detach()
    finite_x, finite_d = xd.isfinite(), d.isfinite()
    linear = finite_x.logical_and(finite_d)
    steep = finite_x.logical_and(finite_d.logical_not())
    along = xd.isinf().logical_and(value.isinf()).logical_and((xd * d).eq(value))
    blank = finite_x.logical_not().logical_and(value.isnan())
    z = x - xd
    by_linear = z * linear.where(d, 0.0)
    by_steep = steep.where(z, 1.0).sqrt() * d.isnan().where(0.0, d.gt(0).where(1.0, -1.0))
    by_along = x * along.where(d, 1.0)
    by_blank = z * blank.where(d, 1.0)
    carrier = linear.where(by_linear, steep.where(by_steep, along.where(by_along, blank.where(by_blank, 0.0))))
    return value - (0 - carrier)  # 0 - (+-0) is +0, so value keeps the sign of its zeros


def unary(x: Tensor, value: Callable[[Tensor], Tensor], derivative: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    """f(x) for a float function computed in float64: value(x64) from the detached input, and the gradient
    derivative(x64, value) (both float64 tensors). An int or bool x gives float32, a float x its own dtype."""
    x = x._float()
    wide = x.cast(dtypes.float64)
    xd = wide.detach()
    out = value(xd)
    out = carry(out, wide, lambda: derivative(xd, out))
    return out.cast(x.dtype)


def binary(
    x: Tensor,
    other: TensorLike,
    what: str,
    value: Callable[[Tensor, Tensor], Tensor],
    dx: Callable[[Tensor, Tensor, Tensor], Tensor],
    dy: Callable[[Tensor, Tensor, Tensor], Tensor],
    reverse: bool = False,
) -> Tensor:
    """f(x, other) for a float function of two inputs, promoted and broadcast as in + (ints and bools give
    float32) and computed in float64; dx and dy take (x64, y64, value) and give the partial derivatives."""
    a, b = x._operands(other, what, reverse)
    a, b = a._float(), b._float()
    wa, wb = a.cast(dtypes.float64), b.cast(dtypes.float64)
    ad, bd = wa.detach(), wb.detach()
    out = value(ad, bd)
    out = carry(out, wa, lambda: dx(ad, bd, out))
    out = carry(out, wb, lambda: dy(ad, bd, out))
    return out.cast(a.dtype)
