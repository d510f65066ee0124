"""Rounding and division with rounding: floor, ceil, round, trunc, frac, fmod, remainder, floor_divide, // and %.

Each takes a tensor (and a divisor, promoted and broadcast as in +) and gives a tensor composed from the
primitives. Floats round by the add-and-subtract trick ((|x| + 2**23) - 2**23 is |x| to the nearest integer,
ties to even, in float32), so nothing passes through an int cast and |x| >= 2**23 stays as it is. fmod is
exact (C's fmod) through limn.modulo; ints divide exactly through float64. Edge values and signs of zeros
as torch (tests/core/test_rounding.py). Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> device.
"""

from __future__ import annotations

from functools import partialmethod
from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.math import derivative, exact
from limn.errors import ArgumentError
from limn.frontend.arguments import TensorLike

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def zero_gradient(x: Tensor, value: Tensor) -> Tensor:
    """value, linked to x with gradient 0, as torch gives floor, ceil, round and trunc (a where that always
    takes value: where sends x a zero)."""
    if not x.requires_grad:
        return value
    return limn.Tensor.full(x.shape, True, device=x.device).where(value, x)


def _integer_limit(x: Tensor) -> float:
    """Where x's float dtype (as computed) has only integers: 2**52 in float64, 2**23 in float32."""
    return 2.0**52 if x.dtype == dtypes.float64 else 2.0**23


def _nearest(x: Tensor) -> Tensor:
    """x rounded to the nearest integer, ties to even, for a float tensor in its compute dtype (no gradient)."""
    big = _integer_limit(x)
    negative = x.signbit()
    a = negative.where(-x, x)  # |x|, and +0.0 for -0.0
    r = a.lt(big).where((a + big) - big, a)  # below 2**23 the add rounds to an integer; above, a is one
    return negative.where(-r, r)  # the sign back: round(-0.3) is -0.0, as torch


def _floor(x: Tensor) -> Tensor:
    """The largest integer <= x for a float tensor in its compute dtype (no gradient); floor(-0.0) is -0.0."""
    r = _nearest(x)
    return r.gt(x).where(r - 1, r)  # nearest, less one where it rounded up


def _ceil(x: Tensor) -> Tensor:
    """The smallest integer >= x: -floor(-x), so ceil(-0.5) is -0.0, as torch."""
    return -_floor(-x)


def _trunc(x: Tensor) -> Tensor:
    """x rounded toward zero: floor(|x|) with x's sign, so trunc(-0.5) is -0.0."""
    negative = x.signbit()
    down = _floor(negative.where(-x, x))
    return negative.where(-down, down)


def _rounded(x: Tensor, how, what: str) -> Tensor:
    """x rounded by `how` (one of the float helpers above) with torch's dtype rules and zero gradient: ints
    come back as they are, bools raise (torch has no bool kernel)."""
    if x.dtype == dtypes.bool_:
        raise TypeError(f"{what}: a bool tensor cannot be rounded (torch raises too); cast it, e.g. x.cast('float32')")
    if not x.dtype.is_float:
        return x  # integers are their own floor, ceil, round and trunc
    value = how(x.detach().cast(x.dtype.compute)).cast(x.dtype)
    return zero_gradient(x, value)


# ---- division with rounding: fmod (C's), remainder (Python's %), floor_divide and div's rounding modes ----


def _check_divisible(a: Tensor, b: Tensor, what: str) -> None:
    """Raises as torch does for an int division by zero (ZeroDivisionError), and for bools (no kernel). An int
    tensor divisor is computed now to look for a zero: the one place these ops realize."""
    if a.dtype == dtypes.bool_:
        raise TypeError(f"{what}: bool tensors have no {what} (torch raises too); cast them, e.g. x.cast('int32')")
    if not a.dtype.is_float and b.size and bool(b.eq(0).any().item()):
        raise ZeroDivisionError(f"{what}: integer division by zero (a {b.dtype.name} divisor holds a 0), as torch")


def _int_quotient(a: Tensor, b: Tensor, mode: str) -> Tensor:
    """trunc(a / b) or floor(a / b) for int tensors, exactly, as float64 (|a|, |b| < 2**31, so a - q b is exact
    there and q is off by at most one before the fix). b has no zeros."""
    a, b = a.cast(dtypes.float64), b.cast(dtypes.float64)
    q = _trunc(a * b.reciprocal())
    rest = a - q * b
    # trunc: the rest has a's sign (or is 0) and |rest| < |b|; move q by one where the estimate missed
    over = rest.abs().ge(b.abs())
    q = over.where(q + (a * b).lt(0).where(-1.0, 1.0), q)
    rest = a - q * b
    wrong_side = rest.ne(0).logical_and(rest.lt(0).ne(a.lt(0)))
    q = wrong_side.where(q - (a * b).lt(0).where(-1.0, 1.0), q)
    if mode == "floor":
        rest = a - q * b
        q = rest.ne(0).logical_and(rest.lt(0).ne(b.lt(0))).where(q - 1.0, q)  # floor: the rest has b's sign
    return q


def _float_floor_quotient(a: Tensor, b: Tensor, remainder: Tensor | None = None) -> Tensor:
    """torch's floor division of floats (div_floor_floating) in float64: a / b where b is 0 (inf or NaN), else
    (a - fmod(a, b)) / b less one where the remainder's sign differs from b's, snapped to the nearest integer,
    and a zero with the sign of a / b. Given Python's remainder of a and b, (a - remainder) / b is that."""
    if remainder is None:
        mod = exact.fmod(a, b)
        div = exact.divide(a - mod, b)
        div = mod.ne(0).logical_and(b.lt(0).ne(mod.lt(0))).where(div - 1.0, div)
    else:
        div = exact.divide(a - remainder, b)
        past = a.ne(0).logical_and(a.lt(0).ne(b.lt(0)))  # an infinite b: fmod is a, and the quotient 0 or -1
        div = b.isinf().logical_and(a.isfinite()).where(past.where(-1.0, 0.0), div)
    down = _floor(div)
    snapped = (div - down).gt(0.5).where(down + 1.0, down)
    zero = a.signbit().ne(b.signbit()).where(-0.0, 0.0)
    out = div.eq(0).where(zero, snapped)
    return b.eq(0).where(a * b.reciprocal(), out)


def _ones(like: Tensor) -> Tensor:
    return limn.Tensor.full(like.shape, 1.0, dtype=like.dtype, device=like.device)


def divide_rounded(x: Tensor, other: TensorLike, rounding_mode: str, reverse: bool = False) -> Tensor:
    """x / other rounded toward zero ("trunc") or down ("floor"), as torch.div(..., rounding_mode=): ints stay
    ints (exact; a zero divisor raises ZeroDivisionError), floats round the correctly rounded quotient (trunc)
    or follow torch's floor formula (floor). The gradient is 0, as torch's."""
    if rounding_mode not in ("trunc", "floor"):
        raise ArgumentError(f"div: rounding_mode must be None, 'trunc' or 'floor', not {rounding_mode!r}")
    a, b = x._operands(other, "div", reverse)
    _check_divisible(a, b, f"div (rounding_mode={rounding_mode!r})")
    if not a.dtype.is_float:
        return _int_quotient(a, b, rounding_mode).cast(a.dtype)
    wide_a, wide_b = a.detach().cast(dtypes.float64), b.detach().cast(dtypes.float64)
    if rounding_mode == "trunc":
        value = _trunc(exact.divide(wide_a, wide_b).cast(a.dtype.compute).cast(dtypes.float64))
    else:
        value = _float_floor_quotient(wide_a, wide_b)
    value = zero_gradient(a, value.cast(a.dtype))
    return zero_gradient(b, value)


class RoundingMixin:
    """Tensor's roundings and divisions with rounding (floor, ceil, round, fmod, remainder, floor_divide), with // and
    %."""

    __slots__ = ()

    def signbit(self) -> Tensor:
        """True where x's sign bit is set: below 0, or -0.0 (1 / -0.0 is -inf), as torch.signbit.

        Trap: limn cannot read a NaN's sign bit (no bitcast in the op set): a NaN reads as positive, where
        torch.signbit(-nan) is True.

        >>> Tensor([-0.0, 0.0, -2.0]).signbit().tolist()
        [True, False, True]
        """
        if not self.dtype.is_float:
            return self.lt(0) if self.dtype.is_int else self.lt(False)
        return self.lt(0).logical_or(self.reciprocal().lt(0))

    def floor(self) -> Tensor:
        """The largest integer <= x, elementwise, in x's dtype (ints as they are). Gradient 0, as torch's.

        >>> Tensor([-1.5, -0.0, 2.7]).floor().tolist()
        [-2.0, -0.0, 2.0]
        """
        return _rounded(self, _floor, "floor")

    def ceil(self) -> Tensor:
        """The smallest integer >= x (ceil(-0.5) is -0.0). Gradient 0."""
        return _rounded(self, _ceil, "ceil")

    def trunc(self) -> Tensor:
        """x rounded toward zero (trunc(-0.5) is -0.0); torch's fix is the same. Gradient 0."""
        return _rounded(self, _trunc, "trunc")

    def round(self, decimals: int = 0) -> Tensor:
        """x to the nearest integer, ties to even (round(2.5) is 2), as torch.round; with `decimals`, to that many
        decimal places by torch's formula: nearest(x * 10**d) / 10**d (for d < 0: nearest(x / 10**-d) * 10**-d).
        Gradient 0. Ints raise with decimals (torch has no kernel for them) and come back as they are without.

        >>> Tensor([0.5, 1.5, 2.5, -0.5]).round().tolist()
        [0.0, 2.0, 2.0, -0.0]
        """
        if decimals == 0:
            return _rounded(self, _nearest, "round")
        if not self.dtype.is_float:
            raise TypeError(
                f"round: decimals={decimals} on a {self.dtype.name} tensor (torch has no int kernel); cast first"
            )

        scale = float(10 ** abs(decimals))

        def scaled(v: Tensor) -> Tensor:
            # torch's formulas; each quotient is taken in float64 and rounded once to v's dtype
            if decimals > 0:
                return (_nearest(v * scale).cast(dtypes.float64) * (1 / scale)).cast(
                    v.dtype
                )  # nearest(x 10**d) / 10**d
            quotient = (v.cast(dtypes.float64) * (1 / scale)).cast(v.dtype)
            return _nearest(quotient) * scale  # nearest(x / 10**-d) * 10**-d

        return _rounded(self, scaled, "round")

    def frac(self) -> Tensor:
        """x - trunc(x), with x's sign (frac(-1.5) is -0.5), NaN for inf; gradient 1, as torch. Ints raise."""
        if not self.dtype.is_float:
            raise TypeError(
                f"frac: a {self.dtype.name} tensor (torch has no int kernel); cast it to a float dtype first"
            )
        return self - self.trunc()

    def fmod(self, other: TensorLike) -> Tensor:
        """C's fmod: x - trunc(x / other) other, exact, with x's sign (fmod(-3, 3) is -0.0), as torch.fmod. Floats:
        NaN for other = 0, x itself for an infinite other; ints: an int result, and a zero divisor raises
        ZeroDivisionError, as torch. Gradients 1 and -trunc(x / other), as torch's.

        >>> Tensor([-7.0, 7.0]).fmod(3.0).tolist()
        [-1.0, 1.0]
        """
        a, b = self._operands(other, "fmod")
        _check_divisible(a, b, "fmod")
        if not a.dtype.is_float:
            q = _int_quotient(a, b, "trunc")
            return (a.cast(dtypes.float64) - q * b.cast(dtypes.float64)).cast(a.dtype)
        return derivative.binary(
            a,
            b,
            "fmod",
            exact.fmod,
            lambda a, b, out, dtype: _ones(a),
            lambda a, b, out, dtype: -_trunc(exact.divide(a, b).cast(dtype).cast(dtypes.float64)),
        )

    def remainder(self, other: TensorLike, reverse: bool = False) -> Tensor:
        """Python's %: x - floor(x / other) other, with other's sign (-7 % 3 is 2), as torch.remainder (and x % y):
        fmod(x, other) + other where the two signs differ. Ints stay ints and raise ZeroDivisionError for a zero
        divisor. Gradients 1 and -floor(x / other), as torch's.

        >>> Tensor([-7.0, 7.0]).remainder(3.0).tolist()
        [2.0, 1.0]
        """
        a, b = self._operands(other, "remainder", reverse)
        _check_divisible(a, b, "remainder")
        if not a.dtype.is_float:
            q = _int_quotient(a, b, "floor")
            return (a.cast(dtypes.float64) - q * b.cast(dtypes.float64)).cast(a.dtype)

        def value(a: Tensor, b: Tensor) -> Tensor:
            mod = exact.fmod(a, b)
            return mod.ne(0).logical_and(b.lt(0).ne(mod.lt(0))).where(mod + b, mod)  # torch's remainder

        return derivative.binary(
            a,
            b,
            "remainder",
            value,
            lambda a, b, out, dtype: _ones(a),
            lambda a, b, out, dtype: -_float_floor_quotient(a, b, out).cast(dtype).cast(dtypes.float64),
        )

    def floor_divide(self, other: TensorLike, reverse: bool = False) -> Tensor:
        """x // other: floor(x / other), as torch.floor_divide (div with rounding_mode="floor").

        >>> (Tensor([7, -7]) // 2).tolist()
        [3, -4]
        """
        return divide_rounded(self, other, "floor", reverse)

    fix = trunc
    __mod__ = remainder
    __floordiv__ = floor_divide
    __rfloordiv__ = partialmethod(floor_divide, reverse=True)
    __rmod__ = partialmethod(remainder, reverse=True)
