"""The composed elementwise ops: sub, div, comparisons, NaN tests, logic, activations, maximum, clip.

Each method takes a tensor (and a second operand, promoted and broadcast as in +) and gives a tensor built
from the elementwise primitives alone, with its formula in a comment, so a device that implements the
primitives runs all of them. Edge values follow torch (NaN, inf, -0.0, ties; tests/core/test_edge_values.py).
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partialmethod
from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.math import derivative, rounding
from limn.errors import ArgumentError
from limn.frontend.arguments import Scalar, TensorLike, aliases, times_alpha

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

# tanh's Taylor series x (1 + z (c3 + z (c5 + ...))), z = x**2, to x**15: within 4e-15 of tanh below 0.2
_TANH_SERIES = (-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075, -929569 / 638512875)


ERF_SERIES_BELOW, ERF_SERIES_TERMS, ERF_FRACTION_TERMS = 2.5, 36, 30  # 7e-16 relative over the float64 range


def _erf64(x: Tensor) -> Tensor:
    """erf of a float64 x: a series of positive terms below 2.5, 1 - erfc past it from erfc's continued
    fraction (each exact to a few ulps where it is used; no cancellation in either)."""
    a = x.abs()
    small = a < ERF_SERIES_BELOW
    # erf(s) = 2/sqrt(pi) e**(-s**2) * s * (1 + 2s**2/3 (1 + 2s**2/5 (1 + ...))), every term positive
    s = small.where(a, 0.0)
    s2 = s * s
    acc = limn.Tensor.ones_like(s)
    for n in range(ERF_SERIES_TERMS, 0, -1):
        acc = 1 + acc * (s2 * (2 / (2 * n + 1)))
    series = (2 / math.sqrt(math.pi)) * (-s2).exp() * s * acc
    # erfc(b) = e**(-b**2) / sqrt(pi) / (b + (1/2) / (b + 1 / (b + (3/2) / (b + ...)))), b >= 2.5
    b = small.where(ERF_SERIES_BELOW, a)
    f = b
    for n in range(ERF_FRACTION_TERMS, 0, -1):
        f = b + (n / 2) / f
    erfc = (-(b * b)).exp() * (1 / math.sqrt(math.pi)) / f
    return a.eq(0).where(x, x.sign() * small.where(series, 1 - erfc))  # erf(-0.0) is -0.0, as torch's


def _erf_fast(x: Tensor) -> Tensor:
    """erf by Abramowitz & Stegun 7.1.26, within 1.5e-7 of it: gelu's float32 path, where that error is
    below the float32 result's own rounding once multiplied by x (and 6 terms cost less than erf's 66)."""
    # t = 1/(1 + p|x|); erf = 1 - poly(t) e**(-x**2), with the sign of x
    a = x.abs()
    t = (1 + 0.3275911 * a).reciprocal()
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    y = 1 - poly * (-(a * a)).exp()
    return x.sign() * y


def _erf_of_scaled(x: Tensor) -> Tensor:
    """erf(x / sqrt 2): float64's erf for float64, the Abramowitz & Stegun form for the narrower floats."""
    inner = x * (1 / math.sqrt(2))
    return inner.erf() if x.dtype == dtypes.float64 else _erf_fast(inner)


def _normal_pdf(x: Tensor) -> Tensor:
    """phi(x) = e**(-x**2 / 2) / sqrt(2 pi), the standard normal density."""
    return (x * x * -0.5).exp() * (1 / math.sqrt(2 * math.pi))


def _gelu_partials(x: Tensor, out: Tensor) -> tuple[Tensor]:
    """gelu's slope as torch's backward computes it: Phi(x) + x phi(x). Phi carries phi as its derivative,
    so the second derivative is 2 phi(x) - x**2 phi(x) at 0 too, where the erf approximation's sign(x) has none."""
    cdf = derivative.carry(0.5 * (1 + _erf_of_scaled(x.detach())), (x,), lambda x, out: (_normal_pdf(x),))
    return (cdf + x * _normal_pdf(x),)


_GELU_TANH_BETA, _GELU_TANH_KAPPA = math.sqrt(2 / math.pi), 0.044715


def _gelu_tanh(x: Tensor) -> Tensor:
    """x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3))), torch's approximate="tanh"."""
    inner = _GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * x * x * x)
    return 0.5 * x * (1 + inner.tanh())


def _gelu_tanh_slope(x: Tensor) -> Tensor:
    """The tanh form's slope, as torch's backward writes it: (1 + t) / 2 + x/2 (1 - t**2) beta (1 + 3 kappa x**2)."""
    t = (_GELU_TANH_BETA * (x + _GELU_TANH_KAPPA * x * x * x)).tanh()
    inner_slope = _GELU_TANH_BETA * (1 + 3 * _GELU_TANH_KAPPA * x * x)
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * inner_slope


def _by_formula(x: Tensor, value: Callable[[Tensor], Tensor], slope: Callable[[Tensor], Tensor]) -> Tensor:
    """value(x), computed in x's compute width (float32 for the half widths, rounded once, as torch's kernels),
    whose gradient is g * slope(x). The slope is built from the live input, so it differentiates again; autograd
    through value's own steps (both branches of a where, a division) cost several times the arithmetic."""
    wide = x.cast(x.dtype.compute)
    return derivative.carry(value(wide.detach()), (wide,), lambda w, out: (slope(w),)).cast(x.dtype)


def _saturating_slope(x: Tensor, k: float) -> Tensor:
    """sigmoid's slope at k x, e / (1 + e)**2 with e = e**(-k |x|): s (1 - s) and 1 - tanh**2 (times 4, k = 2)
    as torch writes them, but from x, where 1 - s of a rounded s near 1 kept few bits (torch's float32 tanh
    gradient at 6 is 0.08% off, and 0 past 9)."""
    e = (x.abs() * -k).exp()
    return e / ((1 + e) * (1 + e))


def _sigmoid(x: Tensor) -> Tensor:
    """1 / (1 + e) for x >= 0 and e / (1 + e) below, with e = e**-|x| in (0, 1]: the plain 1 / (1 + e**-x)
    overflows to inf below x = -88 in float32."""
    nonneg = x.ge(0)
    e = nonneg.where(-x, x).exp()
    return nonneg.where(1.0, e) / (1 + e)


def _tanh(x: Tensor) -> Tensor:
    """2 sigmoid(2x) - 1, and below |x| = 0.2 its Taylor series x (1 + z (c3 + z (c5 + ...))), z = x**2."""
    small = x.abs().lt(0.2)
    xs = small.where(x, 0.0)
    z = xs * xs
    acc = z * _TANH_SERIES[-1] + _TANH_SERIES[-2]
    for c in reversed(_TANH_SERIES[:-2]):
        acc = acc * z + c
    series = xs * (1 + z * acc)  # x (1 + ...) keeps the sign of -0.0
    return small.where(series, 2 * _sigmoid(2 * x) - 1)


def _tie_or_nan(a: Tensor, b: Tensor) -> Tensor:
    """maximum's (and minimum's) answer where neither of a, b is below the other: a tie, or a NaN.

    A tie gives a's value exactly with half the gradient to each side, and a NaN gives NaN with the whole
    gradient to both, as torch. (a + b) / 2 would overflow at the float limits and round subnormals, so a
    finite tie takes a - ((a - b) / 2 + 0), whose added term is exactly +0 there (so -0.0 keeps its sign)
    and whose gradient is the half-half split. At an infinite tie a - b is NaN, but (a + b) / 2 is a itself."""
    if not a.dtype.is_float:
        return a  # ints and bools: a tie, and no gradient to split
    difference, total = a - b, a + b  # at a tie: 0 (finite) or NaN (infinite); a NaN side makes both NaN
    finite_tie = difference.lt(math.inf)  # difference is 0 or NaN here, and only 0 is below inf
    infinite_or_nan = total.isnan().where(total, total * 0.5)
    return finite_tie.where(a - (difference * 0.5 + 0.0), infinite_or_nan)


def _clip_both(x: Tensor, lo: TensorLike, hi: TensorLike) -> Tensor:
    """min(max(x, lo), hi) with torch's gradients for two bounds, one of them a tensor: the value comes from
    whichever side it equals (hi where lo > hi, or where max(x, lo) passes hi; lo where x is below it), a tie
    splits it in half between x and that bound, and where a NaN is anywhere the whole gradient goes to x
    (a NaN bound makes the value NaN there, as torch)."""
    x, lo = x._operands(lo, "clamp")
    x, hi = x._operands(hi, "clamp")
    lo, hi = lo.broadcast_to(x.shape), hi.broadcast_to(x.shape)
    xd, lod, hid = x.detach(), lo.detach(), hi.detach()
    raised = lod.gt(xd).where(lod, xd)  # max(x, lo), NaN-free comparisons below
    to_hi = lod.gt(hid).logical_or(raised.gt(hid))
    to_lo = xd.lt(lod)
    tie_lo, tie_hi = xd.eq(lod), raised.eq(hid)
    nan_bound = (lod + hid).isnan()
    inside = nan_bound.where(x + math.nan, x)
    if x.dtype.is_float:
        tie_lo_value, tie_hi_value = _tie_or_nan(x, lo), _tie_or_nan(x, hi)
    else:
        tie_lo_value, tie_hi_value = x, x
    on_tie = tie_lo.where(tie_lo_value, tie_hi.where(tie_hi_value, inside))
    return to_hi.where(hi, to_lo.where(lo, on_tie))


def _int_bounds(x: Tensor, lo: TensorLike | None, hi: TensorLike | None) -> tuple:
    """An int tensor's python int bounds as torch takes them: one past the dtype's range on its own side is no
    bound (it would wrap when cast), and one past it on the other side (a min above the largest value, a max
    below the smallest) is an error, as in torch."""
    info = np.iinfo(x.dtype.np)
    for name, bound in (("min", lo), ("max", hi)):
        beyond = bound is not None and not isinstance(bound, bool) and isinstance(bound, (int, np.integer))
        if beyond and ((name == "min" and bound > info.max) or (name == "max" and bound < info.min)):
            raise ArgumentError(
                f"clamp: {name} value {bound} is outside the range of {x.dtype.name} ({info.min} to {info.max}); "
                f"cast x to a wider dtype first"
            )
    if isinstance(lo, (int, np.integer)) and not isinstance(lo, bool) and lo <= info.min:
        lo = None  # below every value: no bound
    if isinstance(hi, (int, np.integer)) and not isinstance(hi, bool) and hi >= info.max:
        hi = None
    return lo, hi


class ElementwiseMixin:
    """Tensor's elementwise ops composed from the primitives: subtraction, division, comparisons, the logical ops,
    clamps and the common activations, with python's operators."""

    __slots__ = ()
    __hash__ = object.__hash__  # __eq__ below is elementwise: a tensor stays hashable by identity, a dict key

    # ---- arithmetic ----
    def sub(self, other: TensorLike, reverse: bool = False, alpha: Scalar = 1) -> Tensor:
        """x - alpha * other (other - x with reverse=True), promoted and broadcast as in +, as torch.sub. Ints wrap."""
        a, b = self._operands(times_alpha(self, other, alpha, "sub"), "sub", reverse)
        return a + b.neg()  # a - b = a + (-b)

    def div(self, other: TensorLike, rounding_mode: str | None = None, reverse: bool = False) -> Tensor:
        """x / other (other / x with reverse=True), true division: int and bool operands give float32, as in
        torch. Trap: it is x * (1 / other), which can differ from a correctly rounded x / other in the last bit.
        rounding_mode "trunc" or "floor" rounds the quotient as torch.div does
        (limn.composed.math.rounding.divide_rounded)."""
        if rounding_mode is not None:
            return rounding.divide_rounded(self, other, rounding_mode, reverse)
        a, b = self._float()._operands(other, "div", reverse)
        a, b = a._float(), b._float()
        return a * b.reciprocal()  # a / b = a * (1/b)

    # ---- comparisons: CMPLT is False whenever a side is NaN (IEEE), and everything below is composed so
    # that eq is False, ne True, and le/ge False with a NaN on either side, as in torch ----
    def eq(self, other: TensorLike) -> Tensor:
        """x == other as a bool tensor, promoted and broadcast; False where either side is NaN."""
        a, b = self._operands(other, "eq")
        neither_below = a.lt(b).where(False, b.lt(a).where(False, True))
        if not a.dtype.is_float:
            return neither_below  # ints and bools have no NaN
        # a NaN is below nothing and above nothing, so it passes the test above: rule it out. a + b is NaN
        # when a side is (and for inf + -inf, which that test already rejects), one isnan for both sides
        return neither_below.where((a + b).isnan().logical_not(), False)

    def ne(self, other: TensorLike) -> Tensor:
        """x != other as a bool tensor; True where either side is NaN."""
        return self.eq(other).logical_not()

    def gt(self, other: TensorLike) -> Tensor:
        """x > other as a bool tensor; False where either side is NaN."""
        return self.lt(other, reverse=True)

    def le(self, other: TensorLike, reverse: bool = False) -> Tensor:
        """x <= other as a bool tensor (other <= x with reverse=True); False where either side is NaN."""
        a, b = self._operands(other, "le", reverse)
        if not a.dtype.is_float:
            return b.lt(a).logical_not()  # a <= b: b is not below a
        return a.lt(b).where(True, a.eq(b))  # a <= b: a is below b or equal to it (so neither is NaN)

    def ge(self, other: TensorLike) -> Tensor:
        """x >= other as a bool tensor; False where either side is NaN."""
        return self.le(other, reverse=True)

    def isnan(self) -> Tensor:
        """True where the value is NaN: the one value neither below inf nor above -inf. Ints and bools
        have no NaN, so it is all False for them, as in torch.

        >>> Tensor([float("nan"), 1.0, float("inf")]).isnan().tolist()
        [True, False, False]
        """
        if not self.dtype.is_float:
            return limn.Tensor.full(self.shape, False, device=self.device)
        return self.lt(math.inf).where(False, self.gt(-math.inf).where(False, True))  # not (x < inf or -inf < x)

    def isinf(self) -> Tensor:
        """True where the value is inf or -inf (never for ints and bools).

        >>> Tensor([float("-inf"), 1.0, float("nan")]).isinf().tolist()
        [True, False, False]
        """
        if not self.dtype.is_float:
            return limn.Tensor.full(self.shape, False, device=self.device)
        below_inf, above_minus_inf = self.lt(math.inf), self.gt(-math.inf)
        # isinf(x) = (x < inf) xor (-inf < x): a finite x passes both tests, NaN neither, inf and -inf one
        return below_inf.where(above_minus_inf.logical_not(), above_minus_inf)

    def isfinite(self) -> Tensor:
        """True where the value is neither inf, -inf nor NaN (always for ints and bools).

        >>> Tensor([float("-inf"), 1.0, float("nan")]).isfinite().tolist()
        [False, True, False]
        """
        if not self.dtype.is_float:
            return limn.Tensor.full(self.shape, True, device=self.device)
        return self.lt(math.inf).logical_and(self.gt(-math.inf))  # isfinite(x) = x < inf and -inf < x

    # ---- logic: any value is true where it is nonzero (NaN included) ----
    def logical_not(self) -> Tensor:
        """not x, elementwise, as a bool tensor (True where x is 0)."""
        return self.cast(dtypes.bool_).where(False, True)

    def logical_and(self, other: TensorLike) -> Tensor:
        """x and other, elementwise, as a bool tensor."""
        return self.cast(dtypes.bool_).where(other, False).cast(dtypes.bool_)

    def logical_or(self, other: TensorLike) -> Tensor:
        """x or other, elementwise, as a bool tensor."""
        return self.cast(dtypes.bool_).where(True, other).cast(dtypes.bool_)

    # ---- activations ----
    def relu(self) -> Tensor:
        """max(x, 0) as torch computes it: 0 below 0, x itself elsewhere (so relu(-0.0) is -0.0 and
        relu(nan) is nan). The gradient flows where x > 0 or x is NaN, and is 0 at 0, as torch's."""
        if not self.dtype.is_float:
            return self.gt(0).where(self, 0)  # relu(x) = x if x > 0 else 0
        flows = self.gt(0).where(True, self.lt(math.inf).logical_not())  # x > 0, or NaN (NaN is not below inf)
        return flows.where(self, self.lt(0).where(0.0, self.detach()))  # relu(x) = 0 if x < 0 else x

    def sigmoid(self) -> Tensor:
        """1 / (1 + e**-x), computed so that it never overflows, with the gradient s (1 - s) spelled from x."""
        return _by_formula(self._float(), _sigmoid, lambda x: _saturating_slope(x, 1.0))

    def tanh(self) -> Tensor:
        """The hyperbolic tangent: 2 sigmoid(2x) - 1, and below |x| = 0.2 its Taylor series, where that
        difference would cancel (tanh(1e-8) is 1e-8, not 0; tanh(-0.0) is -0.0), with the gradient 1 - t**2
        spelled from x. Differentiable to any order."""
        return _by_formula(self._float(), _tanh, lambda x: 4 * _saturating_slope(x, 2.0))

    def erf(self) -> Tensor:
        """The error function, as torch.erf: computed in float64 to within 1e-15 of it (float32 results are the
        float64 value rounded), with the derivative 2/sqrt(pi) e**(-x**2).

        >>> round(Tensor([0.5]).erf().item(), 6)
        0.5205
        """
        return derivative.unary(self, _erf64, lambda x, out: (2 / math.sqrt(math.pi)) * (-(x * x)).exp())

    def gelu(self, approximate: str = "none") -> Tensor:
        """x * Phi(x), with erf (torch's default, "none") or with torch's "tanh" approximation. The gradient is
        torch's formula, Phi(x) + x phi(x) (or the tanh form's), not the derivative of the erf approximation: a
        training step's backward computes about half the arithmetic per cell that way."""
        x = self._float()
        wide = x.cast(x.dtype.compute)  # half widths compute in float32 and round once, as torch's kernels
        if approximate == "tanh":
            out = derivative.carry(_gelu_tanh(wide.detach()), (wide,), lambda w, out: (_gelu_tanh_slope(w),))
        elif approximate == "none":
            # (x / 2) * (1 + erf(x / sqrt 2)): halving first keeps gelu(3e38) = 3e38 and gelu(+inf) = inf, as
            # torch's float64 kernel gives (its float32 kernels differ by ISA up there); gelu(-inf) is NaN as torch's
            value = (wide.detach() * 0.5) * (1 + _erf_of_scaled(wide.detach()))
            out = derivative.carry(value, (wide,), _gelu_partials)
        else:
            raise ArgumentError(f"gelu: approximate must be 'none' or 'tanh', not {approximate!r}")
        return out.cast(x.dtype)

    def silu(self) -> Tensor:
        """x * sigmoid(x) (swish), in the compute width and rounded once, with torch's gradient s (1 + x (1 - s))."""
        x = self._float()
        wide = x.cast(x.dtype.compute)

        def partials(w: Tensor, out: Tensor) -> tuple[Tensor]:
            s = w.sigmoid()
            return (s * (1 + w * (1 - s)),)

        return derivative.carry(wide.detach() * _sigmoid(wide.detach()), (wide,), partials).cast(x.dtype)

    def sign(self) -> Tensor:
        """-1, 0 or 1 in x's dtype: 0 at 0 and at NaN, as torch."""
        value = self.gt(0).cast(self.dtype) - self.lt(0).cast(self.dtype)  # (x > 0) - (x < 0): 0 at 0 and NaN, as torch
        return rounding.zero_gradient(self, value) if self.dtype.is_float else value  # linked to x, gradient 0 as torch

    def abs(self) -> Tensor:
        """|x|: |-0.0| is +0.0 and the gradient is sign(x), so 0 at 0, as torch. Ints wrap at their minimum."""
        if not self.dtype.is_float:
            return self * self.sign()  # |x| = x sign(x)
        # |x| = x sign(x) + 0: the + 0 makes |-0.0| +0.0, as torch; gradient sign(x), so 0 at 0 and at NaN
        return self * self.sign() + 0.0

    def square(self) -> Tensor:
        """x * x."""
        return self * self

    def rsqrt(self) -> Tensor:
        """1 / sqrt(x): inf at 0 and -inf at -0.0, as torch's rsqrt."""
        return self.sqrt().reciprocal()

    # ---- maximum, minimum and clip ----
    def maximum(self, other: TensorLike) -> Tensor:
        """The larger of x and other, elementwise, in their promoted dtype, as torch.maximum: exact for
        every value (ints at their limits, inf, subnormals), NaN wins, a tie gives x's value with half the
        gradient to each side, and a NaN gives each side the whole gradient.

        >>> Tensor([1.0, 5.0]).maximum(Tensor([3.0, 2.0])).tolist()
        [3.0, 5.0]
        """
        a, b = self._operands(other, "maximum")
        return b.lt(a).where(a, a.lt(b).where(b, _tie_or_nan(a, b)))

    def minimum(self, other: TensorLike) -> Tensor:
        """The smaller of x and other, by the rules of maximum."""
        a, b = self._operands(other, "minimum")
        return a.lt(b).where(a, b.lt(a).where(b, _tie_or_nan(a, b)))

    def clamp(self, min: TensorLike | None = None, max: TensorLike | None = None) -> Tensor:
        """torch's spelling of clip: x.clamp(min=0.0), x.clamp(lo_tensor, hi_tensor). See clip."""
        return self.clip(min, max)

    def clamp_min(self, min: TensorLike) -> Tensor:
        """clip(x, min, None), as torch.clamp_min."""
        return self.clip(min, None)

    def clamp_max(self, max: TensorLike) -> Tensor:
        """clip(x, None, max), as torch.clamp_max."""
        return self.clip(None, max)

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
        """x with NaN, inf and -inf replaced (by 0 and the dtype's largest and lowest finite values unless given),
        as torch.nan_to_num; ints and bools come back as they are. The gradient flows where x is finite.

        >>> Tensor([float("nan"), float("-inf"), 2.0]).nan_to_num(posinf=9.0).tolist()[::2]
        [0.0, 2.0]
        """
        if not self.dtype.is_float:
            return self
        info = np.finfo(self.dtype.np)
        high = float(info.max) if posinf is None else posinf
        low = float(info.min) if neginf is None else neginf
        # nan_to_num(x) = nan if x is NaN, high if inf, low if -inf, else x
        return self.isnan().where(nan, self.eq(math.inf).where(high, self.eq(-math.inf).where(low, self)))

    @aliases(min="lo", max="hi")  # torch's names: x.clip(min=0.0)
    def clip(self, lo: TensorLike | None = None, hi: TensorLike | None = None) -> Tensor:
        """Clamps into [lo, hi], as torch.clamp: min(max(x, lo), hi), so NaN stays NaN and lo > hi gives hi.
        The bounds go by position, as lo= and hi=, or by torch's names min= and max=; at least one is given.

        With number bounds the gradient flows only strictly inside (lo < x < hi), so it is 0 at the bounds
        and at NaN, as torch's. One tensor bound is maximum(x, lo) (or minimum(x, hi)), whose ties split the
        gradient between x and the bound, torch's rule; two (see _clip_both) follow torch's two-bound rule.

        >>> Tensor([-2.0, 0.5, 3.0]).clip(-1.0, 1.0).tolist()
        [-1.0, 0.5, 1.0]
        """
        if lo is None and hi is None:
            raise ArgumentError(
                f"clip/clamp of a {self.dtype.name} tensor of shape {self.shape}: both bounds are None, and at least "
                "one of min and max must be given (torch raises too); pass min=, max= or both"
            )
        if isinstance(lo, limn.Tensor) or isinstance(hi, limn.Tensor):
            if lo is not None and hi is not None:
                return _clip_both(self, lo, hi)
            return self.maximum(lo) if hi is None else self.minimum(hi)
        if self.dtype.is_int:
            lo, hi = _int_bounds(self, lo, hi)
        value, inside = self.detach(), None
        if lo is not None:
            value = value.lt(lo).where(lo, value)  # max(x, lo)
            inside = self.gt(lo)
        if hi is not None:
            value = value.gt(hi).where(hi, value)  # min(., hi)
            inside = self.lt(hi) if inside is None else inside.logical_and(self.lt(hi))
        if inside is None:
            return self  # an int tensor's bounds past its range on both sides: no bound left
        if any(isinstance(bound, float) and math.isnan(bound) for bound in (lo, hi)):
            value = value.where(math.nan, math.nan)  # a NaN bound makes every value NaN, as in torch
        return inside.where(self, value)  # x where it is strictly inside, so the gradient flows only there

    subtract = sub
    __sub__ = sub
    __rsub__ = partialmethod(sub, reverse=True)
    true_divide = div
    divide = div
    __truediv__ = div
    __rtruediv__ = partialmethod(div, reverse=True)
    __eq__ = eq
    __ne__ = ne
    __gt__ = gt
    __le__ = le
    __ge__ = ge
    sgn = sign
    absolute = abs
