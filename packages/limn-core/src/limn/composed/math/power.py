"""Powers: x ** n by squaring for integer n (ints by the bits of an int tensor power), and x ** y by C's pow
rules otherwise, the gradients torch's formulas.

pow takes a tensor and an exponent (a python number or a tensor; rpow a number base) and gives a tensor
composed from primitives. Any float exponent but an integer goes through _pow: e**(y log|x|) with a sign,
C's pow giving the value where that fails (zeros, infinities, exact 1s), and the gradient carried as torch's
formula (limn.composed.math.derivative.carry). tests/core/test_edge_values.py holds every value and gradient against
torch. Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.math import bitwise, derivative
from limn.errors import ArgumentError
from limn.frontend.arguments import Scalar, TensorLike

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def _float_pow(x: Tensor, c: float) -> Tensor:
    """x ** c for a float tensor and a python float c that is not an integer, as torch's pow_tensor_scalar:
    sqrt and 1/sqrt for 0.5 and -0.5 (torch's rsqrt: (-0.0) ** -0.5 is -inf), C's pow (_pow) otherwise. The
    gradient is torch's c * x ** (c - 1), that power by the same rules, so d/dx x ** 1.5 at -inf is
    1.5 sqrt(-inf) = NaN and d/dx x ** -0.5 at -inf is -0.5 (-inf) ** -1.5 = -0.0, as torch's."""
    xd = x.detach()
    if c in (0.5, -0.5):
        root = xd.sqrt()
        value = root if c > 0 else root.reciprocal()
    else:
        compute = x.dtype.compute  # half widths compute in float32 and round once
        value = _pow(xd.cast(compute), limn.Tensor.full(x.shape, c, dtype=compute, device=x.device)).cast(x.dtype)
    return derivative.carry(value, (x,), lambda x, out: (x.pow(c - 1) * c,))


def _int_pow(x: Tensor, n: int) -> Tensor:
    """x ** n for a python int n by squaring: about 2 log2 |n| multiplies, real for negative x."""
    if not x.dtype.is_float and n < 0:
        raise RuntimeError(
            f"pow: a {x.dtype.name} tensor ** {n}: integers to negative integer powers are not allowed "
            f"(torch raises too); cast to a float dtype first, e.g. x.cast('float32') ** {n}"
        )
    x = x.cast(dtypes.int32) if x.dtype == dtypes.bool_ else x
    if n == 0:
        return limn.Tensor.full(x.shape, True, device=x.device).where(1, x)  # x ** 0 = 1, linked to x (gradient 0)
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


class PowerMixin:
    """Tensor's powers: x ** y with torch's int and float rules, and y ** x."""

    __slots__ = ()

    def pow(self, exponent: TensorLike) -> Tensor:
        """x ** exponent, with torch's values and gradients.

        A python int exponent (or an integer-valued float) multiplies by squaring: exact for negative bases
        and for every n, and x ** 0 is 1 still linked to x (its gradient is 0, as torch's). 0.5 and -0.5 are
        sqrt and 1/sqrt, as torch computes them. Any other exponent, tensors included, follows C's pow (see
        _pow): a negative base to an integer-valued power is real, odd powers keeping the sign, and 0 ** 0,
        inf ** 0 and 1 ** nan are 1. The dtype is torch's: an int tensor to a python int stays int (a negative
        int power raises, as in torch), to a python float (2.0 too) it is float32, to an int tensor it is exact
        and wraps, as torch's (see _int_tensor_pow).

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
            return _int_pow(self, int(exponent))
        # an integer-valued float power is float (int32 ** 2.0 is float32, as torch's), by squaring; larger
        # integer-valued floats are all even: _pow's |x| ** y
        if isinstance(exponent, float) and exponent.is_integer() and abs(exponent) <= 2**64:
            return _int_pow(self._float(), int(exponent))
        if isinstance(exponent, float):
            return _float_pow(self._float(), exponent)
        base = self if isinstance(exponent, limn.Tensor) else self._float()
        b, y = base._operands(exponent, "pow")
        if not b.dtype.is_float:
            return _int_tensor_pow(b, y)
        dtype = b.dtype  # half widths compute in float32 and round once
        return _pow(b.cast(dtype.compute), y.cast(dtype.compute)).cast(dtype)

    def rpow(self, base: Scalar) -> Tensor:
        """base ** x for a python number base, by the rules of pow: (-5.5) ** 2.0 = 30.25, 0 ** 0 = 1. An int
        base to an int tensor power is an int of x's dtype, as torch's (2 ** int32 tensor is int32)."""
        x = self
        if isinstance(base, np.generic):
            base = base.item()
        if not x.dtype.is_float and not isinstance(base, float):
            b, y = x._operands(base, "pow", reverse=True)
            return _int_tensor_pow(b, y)
        x = x._float()
        return limn.Tensor.full(x.shape, base, dtype=x.dtype, device=x.device).pow(x)

    __pow__ = pow
    __rpow__ = rpow


def _int_tensor_pow(b: Tensor, y: Tensor) -> Tensor:
    """b ** y for int tensors of one dtype and shape, as torch's powi: by squaring over the bits of y, wrapping
    in the dtype as torch's multiplies do; for y < 0, 1 where b = 1, +-1 where b = -1 (by y's parity), else 0.
    A bool base and exponent raise ArgumentError, a RuntimeError as torch's ("pow" not implemented for 'Bool')."""
    if b.dtype == dtypes.bool_:
        raise ArgumentError(  # torch's NotImplementedError, a RuntimeError
            "pow: a bool tensor to the power of a bool tensor has no bool result (torch raises too); cast a "
            "side to an int, e.g. x.cast('int32') ** y"
        )
    k = y.lt(0).where(0, y)  # the non-negative exponents, by squaring
    result, square = limn.Tensor.full(b.shape, 1, dtype=b.dtype, device=b.device), b
    for bit in _bits(k):
        result = bit.eq(1).where(result * square, result)  # b ** k = product of b ** (2 ** i) over k's bits i
        square = square * square
    odd = (y % 2).eq(1)  # floor remainder: 1 for a negative odd y too
    negative_power = b.eq(1).where(1, b.eq(-1).where(odd.where(-1, 1), 0))  # torch's powi for y < 0
    return y.lt(0).where(negative_power, result).cast(b.dtype)


def _bits(k: Tensor) -> list[Tensor]:
    """The bits of a non-negative int tensor, lowest first, as float64 0s and 1s: read off its value in float64
    (an int64 through its two exact 32-bit halves, as limn.composed.math.bitwise cuts it), a few ops a bit."""
    if k.dtype == dtypes.int64:
        hi, lo = bitwise.halves(k)
        parts = [(lo, 32), (hi, 31)]
    else:
        parts = [(k.cast(dtypes.float64), k.dtype.bits - (0 if k.dtype == dtypes.uint8 else 1))]
    bits = []
    for q, count in parts:
        for _ in range(count):
            half = bitwise.half_floor(q)
            bits.append(q - 2.0 * half)
            q = half
    return bits


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

    The value comes from detached x and y: sign * e**(y log|x|), sign -1 for a negative base to an odd
    power (a finite negative base to a non-integer power keeps x, and log x makes it NaN), and C's rules at
    the edges (x = +-0 or +-inf, and 1s such as 1 ** nan). The gradient is torch's formulas, carried
    (derivative.carry) with their infs and NaNs: d/dx = y x**(y-1) (0 where y = 0), so (-inf) ** 2.5 has
    +inf, and d/dy = x**y log x (0 where x = 0 <= y), NaN for a negative base as log x is."""
    xd, yd = x.detach(), y.detach()
    rules = _pow_rules(xd, yd)
    safe_base = rules.edge.where(1.0, rules.use_abs.where(-xd, xd)).cast(dtypes.float64)
    smooth = rules.sign * _magnitude(safe_base, rules.edge.where(0.0, yd).cast(dtypes.float64)).cast(x.dtype)
    value = rules.edge.where(rules.edge_value, smooth)
    return derivative.carry(value, (x, y), _pow_partials)


SQUARINGS = 7  # integer powers below 2**7 multiply by squaring


def _magnitude(base: Tensor, y: Tensor) -> Tensor:
    """base ** y in float64 for a finite base > 0 (or a NaN). An integer y below 2**SQUARINGS multiplies by
    squaring, exact wherever the power is representable (as C's pow is, so (-5.5) ** 2.0 is 30.25) and the
    same bits on every device; any other y, or a power that overflowed or vanished on the way, is
    e**(y log base). float32 rounds the float64 power once."""
    ay = y.abs()
    q = ay.lt(2**SQUARINGS).logical_and(ay.floor().eq(ay)).where(ay, math.nan)  # NaN: not by squaring
    power, square = limn.Tensor.ones(base.shape, dtype=dtypes.float64, device=base.device), base
    for _ in range(SQUARINGS):  # base ** q = the product of base ** (2 ** i) over q's bits i
        half = bitwise.half_floor(q)
        power = (q - 2.0 * half).eq(1).where(power * square, power)
        square, q = square * square, half
    power = y.lt(0).where(power.reciprocal(), power)
    squared = q.eq(0).logical_and(power.isfinite()).logical_and(power.ne(0))  # q is 0 after the bits, NaN if not
    return squared.where(power, (y * base.log()).exp())


def _pow_partials(x: Tensor, y: Tensor, out: Tensor) -> tuple[Tensor, Tensor]:
    """torch's pow_backward: d/dx = y x**(y-1), 0 where y = 0; d/dy = x**y log x, 0 where x = 0 and y >= 0."""
    dx = y.eq(0).where(0.0, y * _pow(x, y - 1))
    dy = x.eq(0).logical_and(y.ge(0)).where(0.0, out * x.log())
    return dx, dy
