"""Powers: x ** n by squaring for integer n, and x ** y by C's pow rules with torch's gradients otherwise.

pow takes a tensor and an exponent (a python number or a tensor; rpow a number base) and gives a tensor
composed from primitives. Any exponent but an integer goes through _pow: e**(y log|x|) with a sign, and
where that fails (zeros, infinities, exact 1s) C's pow gives the value and torch's formulas the gradient.
tests/core/test_edge_values.py holds every value and gradient here against torch.
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from limn import autograd, dtypes
from limn.primitives import Scalar, Tensor, TensorLike


def pow(x: Tensor, exponent: TensorLike) -> Tensor:
    """x ** exponent, with torch's values and gradients.

    A python int exponent (or an integer-valued float) multiplies by squaring: exact for negative bases
    and for every n, and x ** 0 is 1 still linked to x (its gradient is 0, as torch's). 0.5 and -0.5 are
    sqrt and 1/sqrt, as torch computes them. Any other exponent, tensors included, follows C's pow (see
    _pow): a negative base to an integer-valued power is real, odd powers keeping the sign, and 0 ** 0,
    inf ** 0 and 1 ** nan are 1. An int tensor to a negative int power raises, as in torch.

    >>> (Tensor([-2.0, 3.0]) ** 3).tolist()
    [-8.0, 27.0]
    >>> (Tensor([-1.0]) ** 65).tolist()
    [-1.0]
    >>> (Tensor([-2.0, 0.0]) ** Tensor([3.0, 0.0])).tolist()
    [-8.0, 1.0]
    """
    if isinstance(exponent, np.generic):
        exponent = exponent.item()
    if isinstance(exponent, (bool, int)):
        return _int_pow(x, int(exponent))
    if isinstance(exponent, float) and exponent.is_integer() and abs(exponent) <= 2**64:
        return _int_pow(x, int(exponent))  # larger integer-valued floats are all even: _pow's |x| ** y
    if isinstance(exponent, float) and exponent in (0.5, -0.5):
        root = x._float().sqrt()
        return root if exponent > 0 else root.reciprocal()  # torch's rsqrt: (-0.0) ** -0.5 is -inf
    base = x if isinstance(exponent, Tensor) else x._float()
    b, y = base._operands(exponent, "pow")
    if not b.dtype.is_float:
        raise TypeError(
            f"pow: a {x.dtype.name} tensor to the power of a {y.dtype.name} tensor: limn has no exact int "
            "power with a tensor exponent (torch computes one in ints); make a side float, e.g. x.cast('float32')"
        )
    dtype = b.dtype  # half widths compute in float32 and round once
    return _pow(b.cast(dtype.compute), y.cast(dtype.compute)).cast(dtype)


def _int_pow(x: Tensor, n: int) -> Tensor:
    """x ** n for a python int n by squaring: about 2 log2 |n| multiplies, real for negative x."""
    if not x.dtype.is_float and n < 0:
        raise RuntimeError(
            f"pow: a {x.dtype.name} tensor ** {n}: integers to negative integer powers are not allowed "
            f"(torch raises too); cast to a float dtype first, e.g. x.cast('float32') ** {n}"
        )
    x = x.cast(dtypes.int32) if x.dtype == dtypes.bool_ else x
    if n == 0:
        return Tensor.full(x.shape, True, device=x.device).where(1, x)  # x ** 0 = 1, linked to x (gradient 0)
    dtype = x.dtype
    x = x.cast(dtype.compute)  # half widths multiply in float32 and round once
    result, square, k = None, x if n > 0 else x.reciprocal(), abs(n)
    while k:  # x ** n = product of x ** (2 ** i) over the bits i of n
        if k & 1:
            result = square if result is None else result * square
        k >>= 1
        if k:
            square = square * square
    return result.cast(dtype)


def rpow(x: Tensor, base: Scalar) -> Tensor:
    """base ** x for a python number base, by the rules of pow: (-5.5) ** 2.0 = 30.25, 0 ** 0 = 1. An int
    tensor power of an int base raises TypeError (limn has no exact int power with a tensor exponent)."""
    if isinstance(base, np.generic):
        base = base.item()
    if not x.dtype.is_float and not isinstance(base, float):
        raise TypeError(
            f"pow: {base!r} ** a {x.dtype.name} tensor: limn has no exact int power with a tensor exponent "
            f"(torch computes one in ints); make a side float, e.g. {float(base)!r} ** x"
        )
    x = x._float()
    return Tensor.full(x.shape, base, dtype=x.dtype, device=x.device).pow(x)


# ---- x ** y for float tensors, by C's pow ----
#
# C's pow (and torch's) sorts each element of x ** y into one of these cases:
#   y = 0, x = 1, or x = +-1 and y = +-inf    exactly 1 (even for a NaN on the other side)
#   x = +-0 or x = +-inf                      0 or inf (inf where y > 0 matches |x| = inf), NaN for y NaN,
#                                             negated for a negative base (-0.0, -inf) to an odd integer y
#   x < 0, y an integer                       sign * |x| ** y, the sign -1 for an odd y
#   x < 0, y not an integer                   NaN (log x is NaN)
#   anything else                             e ** (y log x)
# The formula sign * e**(y log|x|) covers the last three; the first two are "the edge", whose values the
# rules give and whose gradients come from torch's formulas (the formula's own are 0/0 or inf/inf there).


@dataclass(frozen=True)
class _PowRules:
    """What C's pow decides per element of x ** y, as tensors of x's shape (from detached x and y)."""

    sign: Tensor  # -1 where a negative base (-0.0 and -inf too) meets an odd integer power, else 1
    use_abs: Tensor  # where |x| stands in for x: a negative base to an integer-valued power (or -0.0, -inf)
    edge: Tensor  # where sign * e**(y log|x|) fails: x = +-0 or +-inf, and the 1s it cannot make
    edge_value: Tensor  # x ** y at the edge points


def _integer_and_odd(y: Tensor, largest: float) -> tuple[Tensor, Tensor]:
    """Whether each y is an integer, and whether it is an odd one. `largest` is where the dtype's floats
    become all integers (2**23 in float32): below it, |y| + largest - largest rounds |y| to an integer."""
    ay = y.abs()
    integer = ay.ge(largest).logical_or((ay + largest - largest).eq(ay))
    half = ay * 0.5  # an integer |y| is odd where |y| / 2 is not an integer (every float from 2 * largest is even)
    odd = integer.logical_and(ay.lt(2 * largest)).logical_and((half + largest - largest).eq(half).logical_not())
    return integer, odd


def _pow_rules(x: Tensor, y: Tensor) -> _PowRules:
    """C's pow decisions for x ** y, from detached x and y of one shape and float dtype."""
    y_int, y_odd = _integer_and_odd(y, 2.0**52 if x.dtype == dtypes.float64 else 2.0**23)
    negative = x.lt(0).logical_or(x.reciprocal().lt(0))  # x < 0, or -0.0 (1 / -0.0 = -inf)
    finite_negative = x.lt(0).logical_and(x.gt(-math.inf))
    zero, infinite, unit = x.eq(0), x.isinf(), x.eq(1).logical_or(x.eq(-1))
    # where C's pow gives exactly 1, and of those the points where e**(y log|x|) would not (e**(nan * 0) and
    # e**(inf * 0) are NaN)
    one = y.eq(0).logical_or(x.eq(1)).logical_or(unit.logical_and(y.isinf()))
    formula_fails = y.eq(0).logical_and(x.isnan()).logical_or(x.eq(1).logical_and(y.isnan()))
    formula_fails = formula_fails.logical_or(unit.logical_and(y.isinf()))
    # for |x| in {0, inf}: |x| ** y is inf where y > 0 matches |x| = inf, else 0 (NaN for a NaN y)
    large = y.gt(0).eq(infinite)
    magnitude = y.isnan().where(math.nan, large.where(math.inf, 0.0))
    sign = negative.logical_and(y_odd).where(-1.0, 1.0)
    keeps_x = finite_negative.logical_and(y_int.logical_not())  # a finite negative base to a fraction: NaN
    return _PowRules(
        sign=sign,
        use_abs=negative.logical_and(keeps_x.logical_not()),
        edge=zero.logical_or(infinite).logical_or(formula_fails),
        edge_value=one.where(1.0, sign * magnitude),
    )


def _pow(x: Tensor, y: Tensor) -> Tensor:
    """x ** y for float tensors of one shape and dtype, by C's pow, with torch's gradients.

    Away from the edges it is sign * e**(y log|x|), sign -1 for a negative base to an odd power (a finite
    negative base to a non-integer power keeps x, and log x makes it NaN), which autograd differentiates as
    written. At the edges (x = +-0 or +-inf, and 1s such as 1 ** nan) that gradient is 0/0 or inf/inf, so
    the value comes from the rules and the gradient from torch's formulas, d/dx = y x**(y-1) (0 where y = 0)
    and d/dy = x**y log x (0 where x = 0 <= y), by _gradient_carrier. The one gradient it cannot carry is
    torch's +inf for (-inf) ** 2.5 (no composition rises to +inf at -inf): there it is 0."""
    rules = _pow_rules(x.detach(), y.detach())
    safe_base = rules.edge.where(1.0, rules.use_abs.where(-x, x))  # 1 ** 0 at the edges: gradient 0, not NaN
    safe_y = rules.edge.where(0.0, y)
    smooth = rules.sign * (safe_y * safe_base.log()).exp()  # x ** y = sign * e**(y log|x|)
    at_edge = rules.edge_value
    xd, yd = x.detach(), y.detach()
    if autograd.is_grad_enabled() and x.requires_grad:
        dx = yd.eq(0).where(0.0, yd * _pow(xd, yd - 1))  # torch: y x**(y-1), 0 where y = 0
        at_edge = _carrying(at_edge, _gradient_carrier(x, dx, at_edge, rules.edge))
    if autograd.is_grad_enabled() and y.requires_grad:
        dy = xd.eq(0).logical_and(yd.ge(0)).where(0.0, rules.edge_value * xd.log())  # torch: x**y log x
        at_edge = _carrying(at_edge, _gradient_carrier(y, dy, at_edge, rules.edge))
    return rules.edge.where(at_edge, smooth)


def _carrying(value: Tensor, carrier: Tensor) -> Tensor:
    """value itself, with carrier's gradient: value - (0 - carrier) is exactly value (-0.0 included) for a
    carrier that is +-0, or value's own infinity where value is infinite (_gradient_carrier makes one)."""
    return value - (0 - carrier)


def _gradient_carrier(t: Tensor, d: Tensor, value: Tensor, at: Tensor) -> Tensor:
    """A tensor whose gradient w.r.t. t is d (detached; inf and NaN too) where `at` holds and 0 elsewhere, and
    whose value leaves `value` as it is under _carrying: +-0, or value's own infinity where t is infinite.

    Three carriers, each for the points it can serve, fed values whose gradient is finite where it is not
    taken, so no NaN leaks through the where:
      linear  (t finite, d finite)    z * d, with z = t - t.detach(): exactly +0, gradient 1
      steep   (t finite, d = +-inf)   sqrt(z) with d's sign: 0, gradient 1 / (2 sqrt 0) = inf (times 0: NaN)
      along   (t infinite)            t * d where that is value's infinity (t = -inf, d = -inf, value = inf);
                                      z is NaN there, and nothing else carries a gradient"""
    finite_t = at.logical_and(t.isfinite())
    linear = finite_t.logical_and(d.isfinite())
    steep = finite_t.logical_and(d.isfinite().logical_not())
    along = at.logical_and(t.isinf()).logical_and(value.isinf()).logical_and((t.detach() * d).eq(value))
    z = t - t.detach()
    by_linear = z * linear.where(d, 0.0)
    by_steep = steep.where(z, 1.0).sqrt() * d.isnan().where(0.0, d.gt(0).where(1.0, -1.0))
    by_along = t * along.where(d, 1.0)
    return linear.where(by_linear, steep.where(by_steep, along.where(by_along, 0.0)))
