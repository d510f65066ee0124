"""The C every kernel library starts with: the helpers rendered kernels call, and the rows that name them.

float16 and bfloat16 conversions (round to nearest even, bit for bit what ml_dtypes does), float32 exp and log
that vectorize, and LIMN_IVDEP, which marks loops whose iterations are independent. HALF_WIDTHS and MATH_FUNCS
are the entries of the C-style base (limn.cstyle) that CRenderer (c_source.py) overrides to call them.
Pipeline: IR -> C source (c_source.py) -> **this prelude + the kernels** -> cc.
"""

from limn import cstyle, dtypes
from limn.cstyle import CType

# the half widths are 16-bit patterns in memory and floats while computed, converted by the helpers below
HALF_WIDTHS: dict[dtypes.DType, CType] = {
    dtypes.float16: CType("uint16_t", "float", "limn_f16_to_f32", "limn_f32_to_f16", "limn_round_f16"),
    dtypes.bfloat16: CType("uint16_t", "float", "limn_bf16_to_f32", "limn_f32_to_bf16", "limn_round_bf16"),
}

# float32 exp and log are the prelude's polynomials, which vectorize; the rest is C99's <math.h>
MATH_FUNCS: dict[str, dict[str, str]] = {
    **cstyle.MATH_FUNCS,
    "float": {**cstyle.MATH_FUNCS["float"], "exp": "limn_expf", "log": "limn_logf"},
}

PRELUDE = r"""#include <stdint.h>
#include <string.h>
#include <math.h>

/* Innermost loops carry no dependence from one iteration to the next (each writes its own cell), but
   inside an OpenMP region the compiler no longer sees the parameters' restrict and would guard or skip
   vectorizing; this says what it cannot prove. Scatter nests, whose adds may collide, never get it. */
#if defined(__clang__)
#define LIMN_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define LIMN_IVDEP _Pragma("GCC ivdep")
#else
#define LIMN_IVDEP
#endif

/* float16 and bfloat16 are stored as 16-bit patterns and computed in float32; these convert with
   round-to-nearest-even, bit for bit what ml_dtypes (the numpy device) does. */
static inline float limn_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0) {
        float f = (float)man * 5.9604644775390625e-08f; /* subnormal: man * 2**-24, exact */
        memcpy(&bits, &f, 4);
        bits |= sign;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float out;
    memcpy(&out, &bits, 4);
    return out;
}

static inline uint16_t limn_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* nan */
    if (ax >= 0x47800000u) return (uint16_t)(sign | 0x7c00u);                        /* inf */
    if (ax < 0x38800000u) { /* below 2**-14: a float16 subnormal, counted in units of 2**-24 */
        float a;
        memcpy(&a, &ax, 4);
        float units = a * 16777216.0f;
        units = (units + 8388608.0f) - 8388608.0f; /* rounds to an integer, ties to even */
        return (uint16_t)(sign | (uint32_t)units);
    }
    uint32_t h = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13), rest = ax & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h += 1u; /* a carry rolls into the exponent */
    return (uint16_t)(sign | h);
}

static inline float limn_bf16_to_f32(uint16_t h) {
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static inline uint16_t limn_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* nan stays nan */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* exp and log for float32 that the compiler can vectorize: no branches, no libm calls, no errno.
   Both reduce the argument by powers of two and finish with a short polynomial; the error is about one
   unit in the last place, far inside the 1e-5 the numpy device allows. Edge cases (inf, nan, 0, the
   subnormals) select their answers rather than branch to them. */
static inline float limn_pow2i(int32_t n) { /* 2**n for -126 <= n <= 127 */
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline float limn_expf(float x) {
    const float clamped = x > 89.0f ? 89.0f : (x < -104.0f ? -104.0f : x);
    const float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(x / ln 2) */
    const float r = (clamped - n * 0.693145751953125f) - n * 1.428606765330187045e-06f; /* |r| <= ln2/2 */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f; /* e**r, Taylor to r**7 */
    const int32_t k = (int32_t)n, half = k / 2; /* two factors, so 2**k may be subnormal */
    float y = p * limn_pow2i(half) * limn_pow2i(k - half);
    y = x > 88.72283935546875f ? INFINITY : y;
    return x != x ? x : y;
}

static inline float limn_logf(float x) {
    const int tiny = x < 1.17549435e-38f; /* subnormal inputs are scaled up by 2**23 first */
    const float scaled = tiny ? x * 8388608.0f : x;
    uint32_t bits;
    memcpy(&bits, &scaled, 4);
    int32_t e = (int32_t)((bits >> 23) & 0xffu) - 127;
    uint32_t mbits = (bits & 0x7fffffu) | 0x3f800000u; /* the mantissa as a float in [1, 2) */
    float m;
    memcpy(&m, &mbits, 4);
    const int big = m > 1.41421356f; /* keep m in [sqrt(1/2), sqrt(2)) so s below stays small */
    m = big ? m * 0.5f : m;
    e = e + big - (tiny ? 23 : 0);
    const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s; /* log m = 2 atanh s */
    float p = 1.0f / 11.0f;
    p = p * s2 + 1.0f / 9.0f;
    p = p * s2 + 1.0f / 7.0f;
    p = p * s2 + 1.0f / 5.0f;
    p = p * s2 + 1.0f / 3.0f;
    p = p * s2 + 1.0f;
    float y = (float)e * 0.693145751953125f + (2.0f * s * p + (float)e * 1.428606765330187045e-06f);
    y = x == INFINITY ? INFINITY : y;
    y = x == 0.0f ? -INFINITY : y;
    return (x < 0.0f || x != x) ? NAN : y;
}

static inline float limn_round_f16(float f) { return limn_f16_to_f32(limn_f32_to_f16(f)); }
static inline float limn_round_bf16(float f) { return limn_bf16_to_f32(limn_f32_to_bf16(f)); }
"""
