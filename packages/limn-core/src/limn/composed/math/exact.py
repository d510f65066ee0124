"""Exact float64 arithmetic from the primitives: Veltkamp's split, Dekker's product, a correctly rounded
divide and C's fmod, for limn.composed.math.rounding.

Each takes float64 tensors of one shape and gives float64 tensors. They rely on every ADD and MUL rounding
once to nearest (the C device compiles without -ffast-math and with -ffp-contract=off, so nothing fuses or
reassociates): a * b is then hi + lo exactly, and r - q * b is exact where the reduction below keeps it so.
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import limn

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

_SPLITTER = 2.0**27 + 1.0  # Veltkamp: a float64 splits into halves of 26 bits and 27 bits (one of them a sign)
FMOD_STEPS = 12  # each step takes ~25 bits off the quotient: float32's widest (2**277) and float64's to 2**300


def split(a: Tensor) -> tuple[Tensor, Tensor]:
    """(hi, lo) with a = hi + lo exactly, hi holding a's top 26 bits (Veltkamp). |a| below 2**996 (no overflow)."""
    c = a * _SPLITTER
    hi = c - (c - a)
    return hi, a - hi


def product(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """(p, e) with p = a * b rounded and p + e = a * b exactly (Dekker's TwoProduct)."""
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def divide(a: Tensor, b: Tensor) -> Tensor:
    """a / b rounded to nearest for finite a and nonzero finite b, in float64 (the DIV primitive is absent:
    a * (1/b) can miss by an ulp, and trunc(6 / 3) must be 2): one Newton step on the exact residual.
    Non-finite operands and zero b give a * (1/b)'s answer."""
    r = b.reciprocal()
    q = a * r
    p, e = product(q, b)
    residual = (a - p) - e  # a - q b, exact: q b is within an ulp of a
    corrected = q + residual * r
    in_range = q.abs().lt(2.0**990).logical_and(b.abs().lt(2.0**990))  # the splits stay finite
    usable = in_range.logical_and(r.isfinite()).logical_and(q.ne(0)).logical_and(corrected.isfinite())
    return usable.where(corrected, q)


def fmod(a: Tensor, b: Tensor) -> Tensor:
    """C's fmod(a, b) exactly for float64 tensors: a - n b with n = trunc(a / b), the sign of a (fmod(-3, 3) is
    -0.0); NaN for b = 0, an infinite a or a NaN; a itself for an infinite b.

    Long division, FMOD_STEPS times: q is r / b rounded to 26 bits (an integer), and r - q b is exact with
    q b = q hi + q lo (Dekker). The remainder ends within 1.5 b of 0 and moves into [0, b). Trap: a float64
    quotient |a / b| above 2**300 is not reduced that far, and gives NaN rather than a wrong number."""
    ax, bx = a.abs(), b.abs()
    usable = ax.isfinite().logical_and(bx.isfinite()).logical_and(bx.ne(0))
    r, d = usable.where(ax, 0.0), usable.where(bx, 1.0)
    # fmod(a s, b s) = fmod(a, b) s for a power of two s: keep d's split finite and its low half normal
    large, small = d.gt(2.0**990), d.lt(2.0**-900)
    scale = large.where(_f64(d, 2.0**-200), small.where(_f64(d, 2.0**200), 1.0))
    r, d = r * scale, d * scale
    dh, dl = split(d)
    inverse = d.reciprocal()
    for _ in range(FMOD_STEPS):
        q = r * inverse  # within an ulp of r / d: the next step, or the end, takes up the slack
        whole = q.lt(2.0**26).logical_and(q.gt(-(2.0**26)))
        q = whole.where(_nearest_small(q), split(q)[0])  # an integer of at most 26 bits
        r = (r - q * dh) - q * dl
    unreduced = r.abs().ge(2.0 * d).logical_or(r.isnan())  # a float64 quotient past 2**300
    r = r.lt(0).where(r + d, r)  # into [0, d): exact, r is a multiple of d's last bit and below 2 d
    r = r.ge(d).where(r - d, r)
    r = r.lt(0).where(r + d, r)
    r = unreduced.where(math.nan, r * large.where(_f64(d, 2.0**200), small.where(_f64(d, 2.0**-200), 1.0)))
    out = a.lt(0).logical_or(a.reciprocal().lt(0)).where(-r, r)  # a's sign, -0.0 included
    out = usable.where(out, math.nan)
    keeps_a = ax.lt(bx).logical_and(ax.isfinite())  # |a| < |b| (b = inf too): a itself, exactly
    return keeps_a.where(a, out)


def _nearest_small(q: Tensor) -> Tensor:
    """q rounded to an integer, for |q| < 2**51: (q + 1.5 * 2**52) - 1.5 * 2**52 rounds at the units."""
    big = 1.5 * 2.0**52
    return (q + big) - big


def _f64(like: Tensor, value: float) -> Tensor:
    """value as a 0-d tensor of like's dtype (a where of python floats alone would make float32)."""
    return limn.Tensor.full((), value, dtype=like.dtype, device=like.device)
