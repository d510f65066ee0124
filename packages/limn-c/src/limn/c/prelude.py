"""The C every kernel library starts with: the helpers rendered kernels call, and the rows that name them.

float32 exp and log that vectorize, blends of bits for every WHERE, and LIMN_IVDEP, which marks loops whose
iterations are independent; the float16 and bfloat16 conversions are limn.compiler.half_widths' (shared with limn-cuda).
MATH_FUNCS and SELECTS are the entries of the C-style base (limn.compiler.cstyle) that CRenderer (c/source.py) overrides
to call them.
Pipeline: IR -> C source (c/source.py) -> **this prelude + the kernels** -> cc.
"""

from limn.compiler import cstyle
from limn.compiler.half_widths import BITS, CONVERSIONS, ROUNDS
from limn.graph.ops import Op

# float32 exp and log are the prelude's polynomials, which vectorize; the rest is C99's <math.h>
MATH_FUNCS: dict[str, dict[str, str]] = {
    **cstyle.MATH_FUNCS,
    "float": {**cstyle.MATH_FUNCS["float"], "exp": "limn_expf", "log": "limn_logf", "pick": "limn_pickf"},
    "double": {**cstyle.MATH_FUNCS["double"], "pick": "limn_pickd"},
}

# WHERE as a blend of bits for every dtype (see limn_pick_uint32_t below for why not C's ?:); the rest of each
# table is the C-style base's. An int blends in the unsigned type its arithmetic wraps in ({u}), a bool (an
# int 0 or 1 while computed) in 32 bits.
SELECTS: dict[str, dict[Op, str]] = {
    "float": {**cstyle.C_OPS, Op.WHERE: "{pick}({a}, {b}, {c})"},
    "int": {**cstyle.C_INT_OPS, Op.WHERE: "({t})limn_pick_{u}({a}, ({u}){b}, ({u}){c})"},
    "bool": {**cstyle.C_BOOL_OPS, Op.WHERE: "(int)limn_pick_uint32_t({a}, (uint32_t){b}, (uint32_t){c})"},
}

HEAD = r"""#include <stdint.h>
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

/* Between the nests of one kernel: a nest that reads what an earlier one stored must see those stores.
   gcc 12.2 at -O3 (any -march) moved an int fold's stores into `out` past the loads of the epilogue nest
   after it, which read stale totals (tests/compiler/test_epilogue_adversarial.py). It emits no instruction;
   it only keeps the compiler from carrying memory accesses across it. */
#if defined(__GNUC__)
#define LIMN_NEST_BARRIER __asm__ __volatile__("" ::: "memory")
#else
#define LIMN_NEST_BARRIER
#endif

"""

PICKS = r"""static inline float limn_pickf(int when, float a, float b) {
    return limn_float(limn_pick(when, limn_bits(a), limn_bits(b)));
}

/* Every WHERE is one of these blends, never a ?: (SELECTS below). gcc 12.2 at -O3 with -fno-trapping-math
   turns a ?: whose arm is a load only that arm reads into a masked load, and its loop vectorizer then
   drops that load's permutation when the value is broadcast along an inner loop: out[i][j] = c[i] ? x[i] :
   0 read x[j] (tests/c/test_where_blend.py holds three such kernels). A blend reads both arms always. */
static inline uint32_t limn_pick_uint32_t(int when, uint32_t a, uint32_t b) { return limn_pick(when, a, b); }

static inline uint64_t limn_pick_uint64_t(int when, uint64_t a, uint64_t b) {
    const uint64_t mask = (uint64_t)0 - (uint64_t)(when != 0);
    return (a & mask) | (b & ~mask);
}

static inline double limn_pickd(int when, double a, double b) {
    uint64_t x, y;
    memcpy(&x, &a, 8);
    memcpy(&y, &b, 8);
    x = limn_pick_uint64_t(when, x, y);
    double d;
    memcpy(&d, &x, 8);
    return d;
}

"""

MATH = r"""/* exp and log for float32 that the compiler can vectorize: no branches, no libm calls, no errno, and
   only 32-bit lanes (float compares select floats, integer compares select integers). Both reduce the
   argument by powers of two and finish with a short polynomial: within one unit in the last place of
   the correctly rounded answer (tests/c/test_math_accuracy.py), far inside the 1e-5 the numpy device
   allows. Edge cases (inf, nan, 0, the subnormals) select their answers rather than branch to them.
   Their compares are C99's quiet ones (isgreater, isless, ...), which raise no flag on a nan: gcc may
   then run them, under an AVX-512 mask, where a kernel's ?: has moved the whole call into one arm. */
/* a * b + c for exp's argument reduction and polynomial: one rounding (an FMA instruction) where the
   target has one, two where fmaf would be a library call. exp stays within one ulp either way; only its
   speed differs (an FMA takes a third off the work of a vectorized exp). Every kernel of one build calls
   the same exp, so rewrites of a nest still agree bit for bit. */
static inline float limn_madd(float a, float b, float c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
    return fmaf(a, b, c);
#else
    return a * b + c;
#endif
}

static inline float limn_pow2i(int32_t n) { /* 2**n for -126 <= n <= 127 */
    return limn_float((uint32_t)(n + 127) << 23);
}

static inline float limn_expf(float x) {
    float clamped = limn_pickf(isgreater(x, 89.0f), 89.0f, x); /* nan passes both clamps: its compares are false */
    clamped = limn_pickf(isless(clamped, -104.0f), -104.0f, clamped);
    /* adding 1.5 * 2**23 rounds x / ln 2 to an integer n (ties to even), left in the low mantissa bits */
    const float shifted = limn_madd(clamped, 1.44269504088896341f, 12582912.0f);
    const float n = shifted - 12582912.0f;
    const int32_t k = (int32_t)(limn_bits(shifted) - 0x4b400000u); /* n as an integer, -150 <= k <= 128 */
    /* |r| <= ln2/2 */
    const float r = limn_madd(-n, 1.428606765330187045e-06f, limn_madd(-n, 0.693145751953125f, clamped));
    /* e**r as 1 + r + r**2 (c2 + ... + c6 r**4), the c's fitted by Lawson's reweighted least squares on
       Chebyshev points: relative error 3e-9 over |r| <= ln2/2, so the roundings decide the answer */
    float p = 0x1.6a2352p-10f;
    p = limn_madd(p, r, 0x1.123a6cp-7f);
    p = limn_madd(p, r, 0x1.5558f4p-5f);
    p = limn_madd(p, r, 0x1.55549p-3f);
    p = limn_madd(p, r, 0x1.fffffcp-2f);
    p = limn_madd(p, r, 1.0f);
    p = limn_madd(p, r, 1.0f);
    /* 2**k as two normal factors, so a subnormal answer is rounded once (>> on a negative int is floor).
       The edges need no selects: past 88.72... it overflows to inf, below -103.97... rounds to 0, a nan
       flows through (every float32 checked for x86-64, -v3, -v4) */
    const int32_t half = k >> 1;
    return p * limn_pow2i(half) * limn_pow2i(k - half);
}

static inline float limn_logf(float x) {
    /* subnormal inputs are scaled up by 2**23 first; the scale's own exponent is taken back below */
    const float scale = limn_pickf(isless(x, 1.17549435e-38f), 8388608.0f, 1.0f);
    /* x = 2**k * m with m in [sqrt(1/2), sqrt(2)): moving the cut between exponents from 1 to sqrt(1/2)
       is one integer add */
    const uint32_t bits = limn_bits(x * scale) + (0x3f800000u - 0x3f3504f3u);
    const int32_t k = (int32_t)(bits >> 23) - 127 - (int32_t)((limn_bits(scale) >> 23) - 127u);
    const float f = limn_float((bits & 0x007fffffu) + 0x3f3504f3u) - 1.0f; /* m - 1, exact */
    /* log(1 + f) = 2 atanh(s) = f - f**2 / 2 + s (f**2 / 2 + R), s = f / (2 + f), R a polynomial in s**2
       (FreeBSD's logf: the even and odd terms in two chains) */
    const float s = f / (2.0f + f), z = s * s, w = z * z;
    const float r = z * (0x1.555554p-1f + w * 0x1.23d3dcp-2f) + w * (0x1.999c26p-2f + w * 0x1.f13c4cp-3f);
    const float half_f2 = 0.5f * f * f, kf = (float)k;
    /* k ln 2 in two parts: the high one has 17 significant bits, so k times it is exact for every normal x */
    const float y = kf * 0x1.62e300p-1f - ((half_f2 - (s * (half_f2 + r) + kf * 0x1.2fefa2p-17f)) - f);
    float edge = limn_pickf(x == INFINITY, INFINITY, y);
    edge = limn_pickf(x == 0.0f, -INFINITY, edge);
    return limn_pickf(!isgreaterequal(x, 0.0f), NAN, edge); /* below -0, or nan */
}

"""

PRELUDE = HEAD + BITS + PICKS + CONVERSIONS + MATH + ROUNDS
