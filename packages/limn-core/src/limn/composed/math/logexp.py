"""The exp and log family beyond the EXP and LOG primitives: exp2, log2, log10, log1p, expm1, logaddexp,
logaddexp2, hypot, copysign, lerp, isclose and allclose.

Each takes a tensor (and a second operand, promoted and broadcast as in +) and gives a tensor composed from
the primitives: the float functions are computed in float64 and rounded once to the input's dtype, with
torch's derivative attached (limn.composed.math.derivative), so float32 results are correctly rounded but for rare ties
and float64 ones within a few ulps. log1p and expm1 keep tiny x exactly (Goldberg's and Kahan's tricks).
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn.composed.math import derivative
from limn.frontend.arguments import TensorLike

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

_LN2, _LN10 = math.log(2), math.log(10)


def _log1p64(x: Tensor) -> Tensor:
    """log(1 + x) for float64 x, accurate for tiny x: log(u) * x / (u - 1) with u = 1 + x rounded (Goldberg),
    x itself where u is 1 (so -0.0 stays), inf at inf, -inf at -1, NaN below."""
    u = 1.0 + x
    exact = u.eq(1.0)
    ratio = x / exact.where(1.0, u - 1.0)  # x / (u - 1) corrects the rounding of 1 + x
    out = exact.where(x, u.log() * ratio)
    return x.eq(math.inf).where(math.inf, out)


def _expm1_64(x: Tensor) -> Tensor:
    """e**x - 1 for float64 x, accurate for tiny x: (u - 1) x / log(u) with u = e**x (Kahan) below |x| = 1 (above,
    (u - 1) x would overflow first near 709), x itself where u is 1 (so -0.0 stays), -1 where u - 1 is -1."""
    u = x.exp()
    exact = u.eq(1.0)
    saturated = (u - 1.0).eq(-1.0).logical_or(u.eq(math.inf))
    log_u = exact.logical_or(saturated).where(1.0, u.log())
    corrected = x.abs().lt(1.0).where((u - 1.0) * x / log_u, u - 1.0)  # past 1, u - 1 loses nothing
    return exact.where(x, saturated.where(u - 1.0, corrected))


def _logaddexp64(a: Tensor, b: Tensor, base_log: float) -> Tensor:
    """torch's logaddexp (base_log 1) and logaddexp2 (base_log ln 2): max + log1p(base**-|a - b|) / base_log,
    and a itself where a and b are one infinity (inf - inf would be NaN)."""
    same_infinity = a.isinf().logical_and(a.eq(b))
    high = a.lt(b).where(b, a)  # max, NaN where a is NaN (and b's NaN comes through a - b)
    gap = same_infinity.where(0.0, (a - b).abs())
    out = high + _log1p64((-gap * base_log).exp()) * (1 / base_log)
    return same_infinity.where(a, out)


def _hypot64(a: Tensor, b: Tensor) -> Tensor:
    """sqrt(a**2 + b**2) as C's hypot: m sqrt(1 + (n/m)**2) for m = max(|a|, |b|), so no overflow; inf
    where either side is infinite, even beside a NaN."""
    a, b = a.abs(), b.abs()
    high, low = a.lt(b).where(b, a), a.lt(b).where(a, b)
    zero = high.eq(0.0)
    ratio = low / zero.where(1.0, high)
    out = zero.where(0.0, high * (1.0 + ratio * ratio).sqrt())
    return a.isinf().logical_or(b.isinf()).where(math.inf, out)


class LogExpMixin:
    """Tensor's logarithms and exponentials in other bases, and the functions built on them (logaddexp, hypot, lerp,
    isclose)."""

    __slots__ = ()

    def exp2(self) -> Tensor:
        """2**x, elementwise (e**(x ln 2) in float64). The gradient is 2**x ln 2.

        >>> Tensor([3.0, -1.0]).exp2().tolist()
        [8.0, 0.5]
        """
        return derivative.unary(self, lambda x: (x * _LN2).exp(), lambda x, out: out * _LN2)

    def log2(self) -> Tensor:
        """The base-2 log (-inf at 0, NaN below). The gradient is 1 / (x ln 2)."""
        return derivative.unary(self, lambda x: x.log() * (1 / _LN2), lambda x, out: (x * _LN2).reciprocal())

    def log10(self) -> Tensor:
        """The base-10 log (-inf at 0, NaN below). The gradient is 1 / (x ln 10)."""
        return derivative.unary(self, lambda x: x.log() * (1 / _LN10), lambda x, out: (x * _LN10).reciprocal())

    def log1p(self) -> Tensor:
        """log(1 + x), exact for tiny x (log1p(1e-30) is 1e-30, log1p(-0.0) is -0.0); -inf at -1, NaN below.
        The gradient is 1 / (1 + x): inf at -1."""
        return derivative.unary(self, _log1p64, lambda x, out: (x + 1.0).reciprocal())

    def expm1(self) -> Tensor:
        """e**x - 1, exact for tiny x (expm1(1e-30) is 1e-30); -1 at -inf. The gradient is e**x (out + 1)."""
        return derivative.unary(self, _expm1_64, lambda x, out: out + 1.0)

    def logaddexp(self, other: TensorLike) -> Tensor:
        """log(e**x + e**other) without overflow. Gradients 1 / (1 + e**(other - x)) and its mirror, as torch's.

        >>> round(Tensor([1000.0]).logaddexp(Tensor([1000.0])).item(), 3)
        1000.693
        """
        return derivative.binary(
            self,
            other,
            "logaddexp",
            lambda a, b: _logaddexp64(a, b, 1.0),
            lambda a, b, out, dtype: (1.0 + (b - a).exp()).reciprocal(),
            lambda a, b, out, dtype: (1.0 + (a - b).exp()).reciprocal(),
        )

    def logaddexp2(self, other: TensorLike) -> Tensor:
        """log2(2**x + 2**other) without overflow. Gradients 1 / (1 + 2**(other - x)) and its mirror."""
        return derivative.binary(
            self,
            other,
            "logaddexp2",
            lambda a, b: _logaddexp64(a, b, _LN2),
            lambda a, b, out, dtype: (1.0 + ((b - a) * _LN2).exp()).reciprocal(),
            lambda a, b, out, dtype: (1.0 + ((a - b) * _LN2).exp()).reciprocal(),
        )

    def hypot(self, other: TensorLike) -> Tensor:
        """sqrt(x**2 + other**2) without overflow or underflow. Gradients x / hypot and other / hypot: NaN at the
        origin, as torch's."""
        return derivative.binary(
            self, other, "hypot", _hypot64, lambda a, b, out, dtype: a / out, lambda a, b, out, dtype: b / out
        )

    def copysign(self, other: TensorLike) -> Tensor:
        """|x| with the sign bit of other (-0.0 counts as negative), as torch.copysign; ints give float32. The
        gradient is out / x (0 where x is 0) to x and 0 to other, as torch's.
        Trap: a NaN in other reads as positive (limn cannot see a NaN's sign bit)."""
        return derivative.binary(
            self,
            other,
            "copysign",
            lambda a, b: b.signbit().where(-a.abs(), a.abs()),
            lambda a, b, out, dtype: a.eq(0.0).where(0.0, out / a),
            lambda a, b, out, dtype: limn.Tensor.full(b.shape, 0.0, dtype=b.dtype, device=b.device),
        )

    def lerp(self, end: TensorLike, weight: TensorLike) -> Tensor:
        """x + weight (end - x), by torch's two-sided formula: from x where |weight| < 0.5, from end otherwise
        (end - (end - x)(1 - weight)), so weight 1 gives end exactly. Gradients 1 - weight, weight, end - x.

        >>> Tensor([1.0]).lerp(Tensor([3.0]), 0.25).tolist()
        [1.5]
        """
        if not self.dtype.is_float:
            raise TypeError(f"lerp: a {self.dtype.name} start (torch has no int kernel); cast it to a float dtype")
        start, end = self._operands(end, "lerp")
        gap = end - start
        if isinstance(weight, limn.Tensor):
            w, _ = weight._operands(start, "lerp")
            near = w.abs().lt(0.5)
        else:
            w, near = weight, abs(weight) < 0.5
        if isinstance(near, bool):
            return start + w * gap if near else end - gap * (1 - w)
        return near.where(start + w * gap, end - gap * (1 - w))

    def isclose(self, other: TensorLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
        """|x - other| <= atol + rtol |other| as a bool tensor, as torch.isclose: equal values (infinities too) are
        close, NaNs only with equal_nan. x and other must share a dtype (torch raises too); ints compare in float32.

        >>> Tensor([1.0, 2.0]).isclose(Tensor([1.0 + 1e-7, 2.1])).tolist()
        [True, False]
        """
        if isinstance(other, limn.Tensor) and other.dtype != self.dtype:
            raise TypeError(
                f"isclose: x is {self.dtype.name} and other {other.dtype.name}; torch requires one dtype: cast one side"
            )
        a, b = self._operands(other, "isclose")
        close = a.eq(b)
        if equal_nan:
            close = close.logical_or(a.isnan().logical_and(b.isnan()))
        if rtol == 0 and atol == 0:
            return close
        a, b = a._float(), b._float()
        allowed = atol + (rtol * b).abs()
        actual = (a - b).abs()
        return close.logical_or(actual.isfinite().logical_and(actual.le(allowed)))

    def allclose(self, other: TensorLike, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
        """Whether every element is isclose, as a python bool; it computes now (realizes). Empty is True."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all().item())
