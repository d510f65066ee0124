"""Bitwise ops: & | ^ ~ (logical on bools, bitwise on ints) and the shifts << >>, composed exactly from arithmetic.

Each takes an int or bool tensor (and a second operand, promoted and broadcast as in +) and gives a tensor of
the promoted dtype. ~x is -x - 1; a left shift multiplies by 2**n wrapped to the width (ints wrap, so the bits
shifted out vanish); an arithmetic right shift is floor(x / 2**n), exact in float64. and/or/xor on ints read
each operand's bits (q mod 2, q halved, in float64) and rebuild the result: one fused kernel of about 20
elementwise ops per bit (160 for int8, 640 for int32), correct for every value. int64 has more bits than a
float64 holds, so its values are first cut exactly into two 32-bit halves (`halves`) and each half combined
or shifted as an int32's would be. Floats raise, as in torch.
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from functools import partialmethod
from typing import TYPE_CHECKING

from limn import dtypes
from limn.frontend.arguments import TensorLike

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

_BIG = 2.0**52  # (v + 2**52) - 2**52 rounds a non-negative float64 v < 2**52 to an integer


def _check_ints(a: Tensor, what: str) -> None:
    if a.dtype.is_float:
        raise TypeError(
            f"{what}: a {a.dtype.name} tensor has no bits to combine (torch raises too); use an int or bool dtype"
        )


def _unsigned(x: Tensor) -> Tensor:
    """An int tensor's value mod 2**bits as float64, in [0, 2**bits): its two's complement bits as a number."""
    wide = x.cast(dtypes.float64)
    return wide.lt(0).where(wide + 2.0**x.dtype.bits, wide)


def half_floor(q: Tensor) -> Tensor:
    """floor(q / 2) for a float64 integer 0 <= q < 2**52."""
    h = q * 0.5
    t = (h + _BIG) - _BIG  # h rounded to an integer, ties to even
    return t.gt(h).where(t - 1.0, t)


def _combine(a: Tensor, b: Tensor, op: str) -> Tensor:
    """a op b bit by bit for int tensors of one dtype and shape, op one of and, or, xor."""
    if a.dtype == dtypes.int64:
        (ha, la), (hb, lb) = halves(a), halves(b)
        hi = _signed(_combine_bits(_unsigned_float(ha, 32), _unsigned_float(hb, 32), 32, op), 32)
        lo = _combine_bits(la, lb, 32, op)
        return hi.cast(dtypes.int64) * 2**32 + lo.cast(dtypes.int64)  # int64 arithmetic wraps: exact
    bits = a.dtype.bits
    return _signed(_combine_bits(_unsigned(a), _unsigned(b), bits, op), bits).cast(a.dtype)


def _combine_bits(qa: Tensor, qb: Tensor, bits: int, op: str) -> Tensor:
    """qa op qb for float64 integers in [0, 2**bits), bits <= 32, read and rebuilt one bit at a time."""
    out = None
    for k in range(bits):
        ha, hb = half_floor(qa), half_floor(qb)
        bit_a, bit_b = qa - 2.0 * ha, qb - 2.0 * hb  # bit k of each, 0 or 1
        both = bit_a * bit_b
        if op == "and":
            bit = both
        elif op == "or":
            bit = bit_a + bit_b - both
        else:
            bit = bit_a + bit_b - 2.0 * both
        term = bit * 2.0**k
        out = term if out is None else out + term
        qa, qb = ha, hb
    return out


def _signed(q: Tensor, bits: int) -> Tensor:
    """A float64 integer in [0, 2**bits) read back as two's complement."""
    return q.ge(2.0 ** (bits - 1)).where(q - 2.0**bits, q)


def _unsigned_float(v: Tensor, bits: int) -> Tensor:
    """A float64 integer in [-2**(bits-1), 2**(bits-1)) as its two's complement bits, in [0, 2**bits)."""
    return v.lt(0).where(v + 2.0**bits, v)


def halves(x: Tensor) -> tuple[Tensor, Tensor]:
    """An int64 x as float64 integers (hi, lo) with x = hi * 2**32 + lo exactly, hi in [-2**31, 2**31) and lo
    in [0, 2**32). x / 2**32 in float64 is off by at most 2**-22 (x rounds to 53 bits), so its floor is hi or
    one away; the remainder, computed in int64, says which."""
    hi = (x.cast(dtypes.float64) * 2.0**-32).floor().cast(dtypes.int64)
    lo = x - hi * 2**32
    hi = lo.lt(0).where(hi - 1, lo.ge(2**32).where(hi + 1, hi))
    lo = x - hi * 2**32
    return hi.cast(dtypes.float64), lo.cast(dtypes.float64)


def _bitwise(x: Tensor, other: TensorLike, op: str, reverse: bool) -> Tensor:
    a, b = x._operands(other, f"bitwise_{op}", reverse)
    _check_ints(a, f"bitwise_{op}")
    if a.dtype == dtypes.bool_:
        if op == "and":
            return a.logical_and(b)
        if op == "or":
            return a.logical_or(b)
        return a.ne(b)
    return _combine(a, b, op)


def _shift_operands(x: Tensor, other: TensorLike, what: str, reverse: bool) -> tuple[Tensor, Tensor]:
    """The value and the shift count, promoted (bools become int32, as torch makes them int64)."""
    a, b = x._operands(other, what, reverse)
    _check_ints(a, what)
    if a.dtype == dtypes.bool_:
        a, b = a.cast(dtypes.int32), b.cast(dtypes.int32)
    return a, b


def _power_of_two(n: Tensor) -> Tensor:
    """2**n as float64 for an int tensor 0 <= n <= 64, exactly: the product of 2**k over the bits k of n
    (every factor and product a power of two, so no rounding; e**(n ln 2) is off past 2**52)."""
    power, rest = None, n
    for k in (64, 32, 16, 8, 4, 2, 1):
        take = rest.ge(k)
        factor = take.where(2.0**k, 1.0)
        power = factor if power is None else power * factor
        rest = take.where(rest - k, rest)
    return power


class BitwiseMixin:
    """Tensor's bitwise ops on ints and bools, with python's &, |, ^, ~, << and >>."""

    __slots__ = ()

    def bitwise_and(self, other: TensorLike, reverse: bool = False) -> Tensor:
        """x & other: logical and on bools, bitwise and on ints (two's complement, every value exact).

        >>> (Tensor([12, -1]) & 10).tolist()
        [8, 10]
        """
        return _bitwise(self, other, "and", reverse)

    def bitwise_or(self, other: TensorLike, reverse: bool = False) -> Tensor:
        """x | other: logical or on bools, bitwise or on ints."""
        return _bitwise(self, other, "or", reverse)

    def bitwise_xor(self, other: TensorLike, reverse: bool = False) -> Tensor:
        """x ^ other: logical xor (x != other) on bools, bitwise xor on ints."""
        return _bitwise(self, other, "xor", reverse)

    def bitwise_not(self) -> Tensor:
        """~x: logical not on bools, -x - 1 on ints (exact: ~(-128) is 127 in int8, as the negation wraps).

        >>> (~Tensor([0, 5, -1])).tolist()
        [-1, -6, 0]
        """
        _check_ints(self, "bitwise_not")
        if self.dtype == dtypes.bool_:
            return self.logical_not()
        return self.neg() - 1  # ~x = -x - 1 in two's complement

    def bitwise_left_shift(self, other: TensorLike, reverse: bool = False) -> Tensor:
        """x << other: x * 2**other wrapped to the width, as torch; a count below 0 or from the width up gives 0.

        >>> (Tensor([5, -5]) << 2).tolist()
        [20, -20]
        """
        a, n = _shift_operands(self, other, "bitwise_left_shift", reverse)
        bits = a.dtype.bits
        inside = n.ge(0).logical_and(n.lt(bits))
        safe = inside.where(n, 0)
        power = _power_of_two(safe)
        # 2**n wrapped to the width: 2**(bits - 1) is the dtype's minimum, which multiplies as 2**(bits - 1) does
        multiplier = power.ge(2.0 ** (bits - 1)).where(-(2.0 ** (bits - 1)), power).cast(a.dtype)
        return inside.where(a * multiplier, 0)

    def bitwise_right_shift(self, other: TensorLike, reverse: bool = False) -> Tensor:
        """x >> other: the arithmetic shift floor(x / 2**other), as torch; a count below 0 or from the width up
        gives 0 for x >= 0 and -1 below.

        >>> (Tensor([5, -5]) >> 1).tolist()
        [2, -3]
        """
        a, n = _shift_operands(self, other, "bitwise_right_shift", reverse)
        bits = a.dtype.bits
        inside = n.ge(0).logical_and(n.lt(bits))
        count = inside.where(n, bits)  # past the width: a shift by the width, which leaves only the sign
        if a.dtype == dtypes.int64:
            return _right_shift_64(a, count)
        return _floor_shift(a.cast(dtypes.float64), count).cast(a.dtype)

    __and__ = bitwise_and
    __or__ = bitwise_or
    __xor__ = bitwise_xor
    __invert__ = bitwise_not
    __lshift__ = bitwise_left_shift
    __rshift__ = bitwise_right_shift
    __rand__ = partialmethod(bitwise_and, reverse=True)
    __ror__ = partialmethod(bitwise_or, reverse=True)
    __rxor__ = partialmethod(bitwise_xor, reverse=True)
    __rlshift__ = partialmethod(bitwise_left_shift, reverse=True)
    __rrshift__ = partialmethod(bitwise_right_shift, reverse=True)


def _floor_shift(v: Tensor, count: Tensor) -> Tensor:
    """floor(v / 2**count) for float64 integers |v| < 2**32 and int counts 0 <= count <= 64."""
    scaled = v * _power_of_two(count).reciprocal()  # exact: a power of two
    t = (scaled + 1.5 * _BIG) - 1.5 * _BIG  # |scaled| < 2**32: the nearest integer
    return t.gt(scaled).where(t - 1.0, t)  # floor


def _right_shift_64(a: Tensor, count: Tensor) -> Tensor:
    """a >> count for int64 a and 0 <= count <= 64, from a's halves: below 32 the high half moves down into
    the result's top (hi * 2**(32 - n), exact) beside lo >> n; from 32 on only the high half is left."""
    hi, lo = halves(a)
    low_count = count.lt(32)
    n = low_count.where(count, 0)
    top = (hi * _power_of_two(32 - n)).cast(dtypes.int64) + _floor_shift(lo, n).cast(dtypes.int64)
    rest = _floor_shift(hi, low_count.where(32, count) - 32).cast(dtypes.int64)
    return low_count.where(top, rest)
