"""Rounding and division with rounding: floor, ceil, round, trunc, frac, fmod, remainder, floor_divide, // and %.

Each takes a tensor (and a divisor, promoted and broadcast as in +) and gives a tensor composed from the
primitives. Floats round by the add-and-subtract trick ((|x| + 2**23) - 2**23 is |x| to the nearest integer,
ties to even, in float32), so nothing passes through an int cast and |x| >= 2**23 stays as it is. fmod is
exact (C's fmod) through limn.modulo; ints divide exactly through float64. Edge values and signs of zeros
as torch (tests/core/test_rounding.py). Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> device.
"""

from __future__ import annotations

from limn import dtypes
from limn.primitives import Tensor


def signbit(x: Tensor) -> Tensor:
    """True where x's sign bit is set: below 0, or -0.0 (1 / -0.0 is -inf), as torch.signbit.

    Trap: limn cannot read a NaN's sign bit (no bitcast in the op set): a NaN reads as positive, where
    torch.signbit(-nan) is True.

    >>> Tensor([-0.0, 0.0, -2.0]).signbit().tolist()
    [True, False, True]
    """
    if not x.dtype.is_float:
        return x.lt(0) if x.dtype.is_int else x.lt(False)
    return x.lt(0).logical_or(x.reciprocal().lt(0))


def _no_gradient(x: Tensor, value: Tensor) -> Tensor:
    """value, linked to x with gradient 0, as torch gives floor, ceil, round and trunc (a where that always
    takes value: where sends x a zero)."""
    if not x.requires_grad:
        return value
    return Tensor.full(x.shape, True, device=x.device).where(value.detach(), x)


def _integer_limit(x: Tensor) -> float:
    """Where x's float dtype (as computed) has only integers: 2**52 in float64, 2**23 in float32."""
    return 2.0**52 if x.dtype == dtypes.float64 else 2.0**23


def _nearest(x: Tensor) -> Tensor:
    """x rounded to the nearest integer, ties to even, for a float tensor in its compute dtype (no gradient)."""
    big = _integer_limit(x)
    negative = signbit(x)
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
    negative = signbit(x)
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
    return _no_gradient(x, value)


def floor(x: Tensor) -> Tensor:
    """The largest integer <= x, elementwise, in x's dtype (ints as they are). Gradient 0, as torch's.

    >>> Tensor([-1.5, -0.0, 2.7]).floor().tolist()
    [-2.0, -0.0, 2.0]
    """
    return _rounded(x, _floor, "floor")


def ceil(x: Tensor) -> Tensor:
    """The smallest integer >= x (ceil(-0.5) is -0.0). Gradient 0."""
    return _rounded(x, _ceil, "ceil")


def trunc(x: Tensor) -> Tensor:
    """x rounded toward zero (trunc(-0.5) is -0.0); torch's fix is the same. Gradient 0."""
    return _rounded(x, _trunc, "trunc")


def round(x: Tensor, decimals: int = 0) -> Tensor:
    """x to the nearest integer, ties to even (round(2.5) is 2), as torch.round; with `decimals`, to that many
    decimal places by torch's formula: nearest(x * 10**d) / 10**d (for d < 0: nearest(x / 10**-d) * 10**-d).
    Gradient 0. Ints raise with decimals (torch has no kernel for them) and come back as they are without.

    >>> Tensor([0.5, 1.5, 2.5, -0.5]).round().tolist()
    [0.0, 2.0, 2.0, -0.0]
    """
    if decimals == 0:
        return _rounded(x, _nearest, "round")
    if not x.dtype.is_float:
        raise TypeError(f"round: decimals={decimals} on a {x.dtype.name} tensor (torch has no int kernel); cast first")

    scale = float(10 ** abs(decimals))

    def scaled(v: Tensor) -> Tensor:
        # torch's formulas; each quotient is taken in float64 and rounded once to v's dtype
        if decimals > 0:
            return (_nearest(v * scale).cast(dtypes.float64) * (1 / scale)).cast(v.dtype)  # nearest(x 10**d) / 10**d
        quotient = (v.cast(dtypes.float64) * (1 / scale)).cast(v.dtype)
        return _nearest(quotient) * scale  # nearest(x / 10**-d) * 10**-d

    return _rounded(x, scaled, "round")


def frac(x: Tensor) -> Tensor:
    """x - trunc(x), with x's sign (frac(-1.5) is -0.5), NaN for inf; gradient 1, as torch. Ints raise."""
    if not x.dtype.is_float:
        raise TypeError(f"frac: a {x.dtype.name} tensor (torch has no int kernel); cast it to a float dtype first")
    return x - trunc(x)
