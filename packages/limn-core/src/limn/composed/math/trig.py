"""Trigonometric and hyperbolic functions: sin, cos, tan, their inverses, atan2, sinh, cosh and their inverses.

Each takes a tensor (atan2 two) and gives a tensor in its float dtype (ints give float32), computed in float64
from primitives and rounded once, with torch's derivative attached (limn.composed.math.derivative). sin, cos and tan
reduce x exactly by multiples of pi/2 over the whole float range, by Payne-Hanek: x's integer mantissa
times the bits of 2/pi that matter at x's exponent, read from a table, in exact float64 products (see
_quadrant). The kernels on [-pi/4, pi/4] and atan are fdlibm's polynomials; the rest are built on those
and on limn.composed.math.logexp. Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import autograd, dtypes
from limn.composed.math import derivative, logexp
from limn.frontend.arguments import TensorLike

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

HALF_PI = math.pi / 2
TINY = 2.0**-27  # below it sin x, tan x, asin x, atan x (and the hyperbolic ones) round to x itself in float64

# ---- the bits of 2/pi, and the Payne-Hanek table ----
#
# A float64 |x| is M * 2**F with M an integer of 53 bits; limn splits M into pieces of 24, 24 and 5 bits,
# each m * 2**G. Only the bits of 2/pi worth 2**-(G-1) and below matter for m * 2**G * 2/pi mod 4 (higher ones
# give multiples of 4), so row G of the table holds the next CHUNKS * 24 of them, chunk j as the 24-bit
# integer D_j times 2**(-22 - 24 j): m * D_j needs 48 bits, so each product is exact.

CHUNKS = 6  # 144 bits past the first that matters: the fraction keeps 53 bits even for x within 2**-61 of k pi/2
G_LOWEST, G_HIGHEST = -54, 1053  # the exponents of the pieces of |x| from pi/4 to the largest float64
_BITS = 1300  # of 2/pi, beyond the highest the table reads (1053 + 22 + 24 * 5)


def _arctan_inverse(k: int, one: int) -> int:
    """atan(1/k) * one, in integer fixed point, by its series."""
    total, term, n, sign = 0, one // k, 1, 1
    while term:
        total += sign * (term // n)
        term //= k * k
        n, sign = n + 2, -sign
    return total


def two_over_pi_bits(n: int) -> int:
    """floor(2/pi * 2**n) as a python int, from Machin's formula pi = 16 atan(1/5) - 4 atan(1/239)."""
    guard = 64
    one = 1 << (n + guard)
    pi = 16 * _arctan_inverse(5, one) - 4 * _arctan_inverse(239, one)  # pi * 2**(n + guard), to a few units
    return (2 << (2 * (n + guard))) // pi >> guard


def _table() -> np.ndarray:
    """Row G - G_LOWEST, column j: the j-th 24 bits of 2/pi from the one worth 2**-(G-1), times 2**(-22 - 24 j)."""
    bits = two_over_pi_bits(_BITS)
    rows = []
    for g in range(G_LOWEST, G_HIGHEST + 1):
        row = []
        for j in range(CHUNKS):
            last = g + 22 + 24 * j  # the lowest bit of chunk j is worth 2**-last
            chunk = (bits >> (_BITS - last)) & 0xFFFFFF if last >= 0 else 0
            row.append(math.ldexp(chunk, -22 - 24 * j))
        rows.append(row)
    return np.array(rows, np.float64)


TABLE = _table()  # (G_HIGHEST - G_LOWEST + 1, CHUNKS)
SCALES = np.array([math.ldexp(1.0, 52 - e) for e in range(-2, 1025)], np.float64)  # 2**(52 - e), row e + 2


def _nearest_positive(v: Tensor) -> Tensor:
    """v rounded to an integer (ties to even) for float64 0 <= v < 2**52: the add rounds at the units."""
    return (v + 2.0**52) - 2.0**52


def _floor_positive(v: Tensor) -> Tensor:
    """floor(v) for float64 0 <= v < 2**52: the nearest integer, less one where it rounded up."""
    t = _nearest_positive(v)
    return t.gt(v).where(t - 1.0, t)


def _column(t: Tensor, j: int) -> Tensor:
    return t[:, j]  # (N, CHUNKS) -> (N,)


def _quadrant(ax: Tensor) -> tuple[Tensor, Tensor]:
    """(q, r) with |x| = q pi/2 + r mod 2 pi, q in 0..4 and |r| <= pi/4 (a little over at the rounding edge),
    for a float64 tensor of shape (N,) with every value in [pi/4, 2**1024): Payne-Hanek, exact before r's
    last rounding."""
    n = ax.shape[0]
    e0 = (ax.log() * (1 / math.log(2))).cast(dtypes.int32)  # the exponent, or one off near a power of 2
    e0 = e0.lt(-1).where(-1, e0.gt(1023).where(1023, e0))
    mantissa = ax * limn.Tensor(SCALES, device=ax.device).gather(0, e0 + 2)  # |x| 2**(52 - e0)
    up, down = mantissa.ge(2.0**53), mantissa.lt(2.0**52)
    mantissa = up.where(mantissa * 0.5, down.where(mantissa * 2.0, mantissa))  # now an integer in [2**52, 2**53)
    e = e0 + up.cast(dtypes.int32) - down.cast(dtypes.int32)
    high = _floor_positive(mantissa * 2.0**-29)  # M = high 2**29 + middle 2**5 + low
    rest = mantissa - high * 2.0**29
    middle = _floor_positive(rest * 2.0**-5)
    low = rest - middle * 2.0**5
    table = limn.Tensor(TABLE, device=ax.device)
    total = None
    for piece, shift in ((high, 29), (middle, 5), (low, 0)):
        rows = (e - 52 + shift - G_LOWEST).reshape(n, 1).expand(n, CHUNKS)  # (N,) -> (N, CHUNKS)
        products = piece.reshape(n, 1) * table.gather(0, rows)  # m * D_j 2**(-22 - 24 j), exact
        total = products if total is None else total + products  # exact: each column stays within 53 bits
    whole = _column(total, 0)
    whole = whole - 4.0 * _floor_positive(whole * 0.25) + _column(total, 1)  # mod 4, plus the next chunk: exact
    whole = whole - 4.0 * _floor_positive(whole * 0.25)  # x 2/pi mod 4, to 2**-46
    q = _nearest_positive(whole)
    fraction = whole - q  # exact, in [-1/2, 1/2]
    fraction = ((fraction + _column(total, 2)) + _column(total, 3)) + (_column(total, 4) + _column(total, 5))
    return q, fraction * HALF_PI


# fdlibm's kernels on [-pi/4, pi/4] (k_sin.c, k_cos.c): within an ulp of float64's sin and cos
_SIN = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
        2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)  # fmt: skip
_COS = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
        -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)  # fmt: skip


def _horner(z: Tensor, coefficients: tuple[float, ...]) -> Tensor:
    """c0 + z (c1 + z (c2 + ...)): a polynomial in z."""
    acc = z * coefficients[-1] + coefficients[-2]
    for c in reversed(coefficients[:-2]):
        acc = acc * z + c
    return acc


def _sin_cos(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(sin |x|, cos |x|, sign) for a float64 tensor: the reduction and the kernels. Non-finite x gives NaN."""
    shape, ax = x.shape, x.lt(0).where(-x, x)  # |x| (-0.0 stays, and goes the small way)
    finite = ax.lt(math.inf)
    large = finite.logical_and(ax.ge(math.pi / 4))
    flat = large.where(ax, 1.0).reshape(-1)  # (...) -> (N,): the reduction reads one row per element
    q, r = _quadrant(flat)
    q, r = large.where(q.reshape(shape), 0.0), large.where(r.reshape(shape), ax)
    z = r * r
    s = r + r * z * _horner(z, _SIN)  # sin r = r - r**3/6 + ...
    c = 1.0 - 0.5 * z + z * z * _horner(z, _COS)  # cos r = 1 - r**2/2 + ...
    # sin and cos of q pi/2 + r, q mod 4
    q = q.ge(4).where(q - 4, q)
    sin = q.eq(0).where(s, q.eq(1).where(c, q.eq(2).where(-s, -c)))
    cos = q.eq(0).where(c, q.eq(1).where(-s, q.eq(2).where(-c, s)))
    nan = _constant(x, math.nan)
    return finite.where(sin, nan), finite.where(cos, nan), x.lt(0).where(-1.0, 1.0)


def _constant(x: Tensor, value: float) -> Tensor:
    """value as a 0-d tensor of x's dtype (a where of two python floats would make float32)."""
    return limn.Tensor.full((), value, dtype=x.dtype, device=x.device)


def _odd(x: Tensor, value: Tensor) -> Tensor:
    """value, but x itself where |x| < TINY: the odd functions that round to x there (and keep -0.0)."""
    return x.abs().lt(TINY).where(x, value)


def _sin64(x: Tensor) -> Tensor:
    s, _, sign = _sin_cos(x)
    return _odd(x, sign * s)


def _cos64(x: Tensor) -> Tensor:
    return _sin_cos(x)[1]


def _with_shared_reduction(x: Tensor, value, derivative_of, live) -> Tensor:
    """derivative.unary for sin, cos and tan, whose value and derivative read one reduction: value(s, c, sign,
    x64) and derivative_of(s, c, sign, x64, out) share it, so the graph holds it once. Under create_graph the
    derivative is live(x64, out) instead, built from the live input so that it differentiates again."""
    parts = []

    def forward(x64: Tensor) -> Tensor:
        parts.append(_sin_cos(x64))
        return value(*parts[0], x64)

    def gradient(x64: Tensor, out: Tensor) -> Tensor:
        if autograd.is_grad_enabled():  # backward(create_graph=True): a second derivative will be taken
            return live(x64, out)
        return derivative_of(*parts[0], x64, out)

    return derivative.unary(x, forward, gradient)


# ---- inverse trigonometric functions ----

# fdlibm's atan (s_atan.c): atan of the breakpoints 0.5, 1, 1.5, inf (high and low parts) and the polynomial
_ATAN_HI = (
    4.63647609000806093515e-01,
    7.85398163397448278999e-01,
    9.82793723247329054082e-01,
    1.57079632679489655800e00,
)
_ATAN_LO = (
    2.26987774529616870924e-17,
    3.06161699786838301793e-17,
    1.39033110312309984516e-17,
    6.12323399573676603587e-17,
)
_ATAN_EVEN = (3.33333333333329318027e-01, 1.42857142725034663711e-01, 9.09088713343650656196e-02,
              6.66107313738753120669e-02, 4.97687799461593236017e-02, 1.62858201153657823623e-02)  # fmt: skip
_ATAN_ODD = (-1.99999999998764832476e-01, -1.11111104054623557880e-01, -7.69187620504482999495e-02,
             -5.83357013379057348645e-02, -3.65315727442169155270e-02)  # fmt: skip


def _atan64(x: Tensor) -> Tensor:
    """atan x for float64 x: |x| moved near 0, 0.5, 1, 1.5 or inf, and fdlibm's polynomial around it."""
    a = x.abs()
    bands = (a.lt(7 / 16), a.lt(11 / 16), a.lt(19 / 16), a.lt(39 / 16))
    safe = a.lt(math.inf).where(a, 1.0)  # inf takes -1/x = -0 below; keep the other branches finite
    t = bands[0].where(
        a,
        bands[1].where(
            (2.0 * a - 1.0) / (2.0 + a),  # atan a = atan 0.5 + atan t
            bands[2].where((a - 1.0) / (a + 1.0), bands[3].where((a - 1.5) / (1.0 + 1.5 * safe), -1.0 / a)),
        ),
    )
    z = t * t
    w = z * z
    series = z * _horner(w, _ATAN_EVEN) + w * _horner(w, _ATAN_ODD)  # atan t = t - t (z/3 - z**2/5 + ...)
    near_zero = t - t * series
    hi, lo = _constant(x, _ATAN_HI[3]), _constant(x, _ATAN_LO[3])  # float64 tensors: a python float is float32
    for band, high, low in reversed(list(zip(bands[1:], _ATAN_HI[:3], _ATAN_LO[:3]))):
        hi, lo = band.where(high, hi), band.where(low, lo)
    shifted = hi - ((t * series - lo) - t)
    out = bands[0].where(near_zero, shifted)
    return _odd(x, x.lt(0).where(-out, out))


def _asin64(x: Tensor) -> Tensor:
    # asin x = atan(x / sqrt((1 - x)(1 + x))): 1 - x is exact near 1, and x / 0 = +-inf gives +-pi/2
    return _odd(x, _atan64(x / ((1.0 - x) * (1.0 + x)).sqrt()))


def _acos64(x: Tensor) -> Tensor:
    # acos x = 2 atan(sqrt((1 - x) / (1 + x))): exact differences at both ends; -1 gives 2 atan(inf) = pi
    return 2.0 * _atan64(((1.0 - x) / (1.0 + x)).sqrt())


def _atan2_64(y: Tensor, x: Tensor) -> Tensor:
    """C's atan2: the angle of (x, y), signed zeros and infinities included."""
    ay, ax = y.abs(), x.abs()
    both_inf = ay.isinf().logical_and(ax.isinf())
    both_zero = ay.eq(0).logical_and(ax.eq(0))
    ratio = both_inf.where(1.0, both_zero.where(0.0, ay / ax))  # inf/inf and 0/0 as their limits, 1 and 0
    angle = _atan64(ratio)  # in [0, pi/2]
    angle = x.signbit().where((math.pi - angle) + 1.2246467991473532e-16, angle)  # pi - angle, pi in two parts
    angle = (ay + ax).isnan().where(math.nan, angle)
    return y.signbit().where(-angle, angle)


def _atan2_scale(y: Tensor, x: Tensor, dtype: dtypes.DType) -> Tensor:
    """1 / (x**2 + y**2) as torch's atan2 gradient takes it: 0 where the sum is 0 in the result's dtype."""
    total = x * x + y * y
    zero = total.cast(dtype).eq(0)
    return zero.where(0.0, zero.where(1.0, total).reciprocal())


# ---- hyperbolic functions ----

_OVERFLOW_HALF = 709.0  # past it e**|x| overflows, so sinh and cosh take (e**(|x|/2))**2 / 2


def _sinh64(x: Tensor) -> Tensor:
    a = x.abs()
    t = logexp._expm1_64(a.lt(22.0).where(a, 0.0))
    near = 0.5 * (t + t / (t + 1.0))  # sinh a = (e**a - e**-a) / 2 = (t + t / (t + 1)) / 2, t = e**a - 1
    half = (0.5 * a.lt(_OVERFLOW_HALF).where(0.0, a)).exp()
    far = a.lt(_OVERFLOW_HALF).where(0.5 * a.exp(), 0.5 * half * half)  # e**-a is below an ulp past 22
    out = a.lt(22.0).where(near, far)
    return _odd(x, x.lt(0).where(-out, out))


def _cosh64(x: Tensor) -> Tensor:
    a = x.abs()
    half = (0.5 * a.lt(_OVERFLOW_HALF).where(0.0, a)).exp()
    e = a.lt(_OVERFLOW_HALF).where(a, 0.0).exp()
    return a.lt(_OVERFLOW_HALF).where(0.5 * e + 0.5 / e, 0.5 * half * half)  # cosh a = (e**a + e**-a) / 2


_LN2 = math.log(2)


def _asinh64(x: Tensor) -> Tensor:
    # fdlibm's s_asinh.c: log(2a) past 2**28, log(2a + 1/(sqrt(a**2 + 1) + a)) past 2, else
    # log1p(a + a**2 / (1 + sqrt(1 + a**2)))
    a = x.abs()
    huge = a.gt(2.0**28)
    mid = a.gt(2.0)
    m = huge.where(2.0, a)  # keeps a**2 finite where it is not used
    far = huge.where(a.log() + _LN2, (2.0 * m + 1.0 / ((m * m + 1.0).sqrt() + m)).log())
    near = logexp._log1p64(a + a * a / (1.0 + (1.0 + a * a).sqrt()))
    out = mid.where(far, near)
    return _odd(x, x.lt(0).where(-out, out))


def _acosh64(x: Tensor) -> Tensor:
    # fdlibm's e_acosh.c: log(2x) past 2**28, log(2x - 1/(x + sqrt(x**2 - 1))) past 2, else log1p(t + sqrt(2t + t**2))
    huge = x.gt(2.0**28)
    mid = x.gt(2.0)
    m = huge.where(4.0, mid.where(x, 4.0))
    far = huge.where(x.log() + _LN2, (2.0 * m - 1.0 / (m + (m * m - 1.0).sqrt())).log())
    t = x - 1.0
    near = logexp._log1p64(t + (2.0 * t + t * t).sqrt())
    return x.lt(1.0).where(math.nan, mid.where(far, near))  # NaN below 1 (rounding could hide it far below)


def _atanh64(x: Tensor) -> Tensor:
    # atanh a = log1p(2a / (1 - a)) / 2 (fdlibm's e_atanh.c); a = 1 gives log1p(inf) = inf
    a = x.abs()
    t = a + a
    out = 0.5 * a.lt(0.5).where(logexp._log1p64(t + t * a / (1.0 - a)), logexp._log1p64(t / (1.0 - a)))
    return _odd(x, x.lt(0).where(-out, out))


class TrigMixin:
    """Tensor's trigonometric and hyperbolic functions and their inverses, with numpy's arc* names."""

    __slots__ = ()

    def sin(self) -> Tensor:
        """The sine, within an ulp or two of float64's at every x (1e10 and 3e38 too: the reduction is exact);
        sin(-0.0) is -0.0, sin(inf) NaN. The gradient is cos x.

        >>> round(Tensor([1e10]).sin().item(), 5)
        -0.48751
        """
        return _with_shared_reduction(
            self, lambda s, c, sign, x: _odd(x, sign * s), lambda s, c, sign, x, out: c, lambda x, out: x.cos()
        )

    def cos(self) -> Tensor:
        """The cosine (exact reduction, as sin); cos(inf) is NaN. The gradient is -sin x."""
        return _with_shared_reduction(
            self, lambda s, c, sign, x: c, lambda s, c, sign, x, out: -_odd(x, sign * s), lambda x, out: -x.sin()
        )

    def tan(self) -> Tensor:
        """The tangent, sin x / cos x after the exact reduction; tan(-0.0) is -0.0. The gradient is 1 + tan**2."""
        return _with_shared_reduction(
            self,
            lambda s, c, sign, x: _odd(x, sign * s / c),
            lambda s, c, sign, x, out: 1.0 + out * out,
            lambda x, out: 1.0 + out * out,
        )

    def atan(self) -> Tensor:
        """The arctangent, in (-pi/2, pi/2); atan(+-inf) is +-pi/2. The gradient is 1 / (1 + x**2)."""
        return derivative.unary(self, _atan64, lambda x, out: 1.0 / (1.0 + x * x))

    def asin(self) -> Tensor:
        """The arcsine, NaN outside [-1, 1]. The gradient is 1 / sqrt(1 - x**2): inf at +-1, as torch's."""
        return derivative.unary(self, _asin64, lambda x, out: (1.0 - x * x).sqrt().reciprocal())

    def acos(self) -> Tensor:
        """The arccosine, in [0, pi], NaN outside [-1, 1]. The gradient is -1 / sqrt(1 - x**2)."""
        return derivative.unary(self, _acos64, lambda x, out: -((1.0 - x * x).sqrt().reciprocal()))

    def atan2(self, other: TensorLike) -> Tensor:
        """The angle of the point (other, y) from the x axis, in [-pi, pi], as torch.atan2(y, other): atan2(0, -1)
        is pi, atan2(-0.0, -1) is -pi, atan2(inf, inf) pi/4. Gradients x / (x**2 + y**2) to y and -y / (x**2 + y**2)
        to other, 0 where x**2 + y**2 is 0 in the result's dtype, as torch's.

        >>> round(Tensor([1.0]).atan2(Tensor([-1.0])).item(), 4)
        2.3562
        """
        return derivative.binary(
            self,
            other,
            "atan2",
            _atan2_64,
            lambda y, x, out, dtype: x * _atan2_scale(y, x, dtype),
            lambda y, x, out, dtype: -y * _atan2_scale(y, x, dtype),
        )

    def sinh(self) -> Tensor:
        """The hyperbolic sine, accurate near 0 (through expm1) and up to the overflow. The gradient is cosh x."""
        return derivative.unary(self, _sinh64, lambda x, out: _cosh64(x))

    def cosh(self) -> Tensor:
        """The hyperbolic cosine; inf past float's range. The gradient is sinh x."""
        return derivative.unary(self, _cosh64, lambda x, out: _sinh64(x))

    def asinh(self) -> Tensor:
        """The inverse hyperbolic sine. The gradient is 1 / sqrt(x**2 + 1)."""
        return derivative.unary(self, _asinh64, lambda x, out: (x * x + 1.0).sqrt().reciprocal())

    def acosh(self) -> Tensor:
        """The inverse hyperbolic cosine: acosh(1) is 0, NaN below 1. The gradient is 1 / sqrt(x**2 - 1): inf at 1."""
        return derivative.unary(self, _acosh64, lambda x, out: (x * x - 1.0).sqrt().reciprocal())

    def atanh(self) -> Tensor:
        """The inverse hyperbolic tangent: atanh(+-1) is +-inf, NaN outside [-1, 1]. The gradient is 1 / (1 - x**2)."""
        return derivative.unary(self, _atanh64, lambda x, out: (1.0 - x * x).reciprocal())

    arcsin = asin
    arccos = acos
    arctan = atan
    arctan2 = atan2
    arcsinh = asinh
    arccosh = acosh
    arctanh = atanh
