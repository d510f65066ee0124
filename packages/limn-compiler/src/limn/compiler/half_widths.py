"""The half widths in C: float16 and bfloat16 as 16-bit patterns in memory and float32 values while computed,
and the conversions between them, shared by every C-family prelude (limn-c's, limn-cuda's).

The conversions round to nearest even, bit for bit what ml_dtypes (the numpy device) does. They are plain C
over three helpers, BITS (a float's bits and back, a blend of bits), so the same text compiles as C (cc), as
CUDA device code (NVRTC with -default-device) and as C++ (the CUDA-on-CPU shim); a prelude includes BITS, then
CONVERSIONS, and ROUNDS wherever its own helpers are defined. HALF_WIDTHS is the rows of the C-style type table
(limn.compiler.cstyle.TYPES) that name them.
Pipeline: IR -> C-family source -> **these helpers** in each language's prelude.
"""

from limn import dtypes
from limn.compiler.cstyle import CType

# the half widths are 16-bit patterns in memory and floats while computed, converted by the helpers below
HALF_WIDTHS: dict[dtypes.DType, CType] = {
    dtypes.float16: CType("uint16_t", "float", "limn_f16_to_f32", "limn_f32_to_f16", "limn_round_f16"),
    dtypes.bfloat16: CType("uint16_t", "float", "limn_bf16_to_f32", "limn_f32_to_bf16", "limn_round_bf16"),
}

BITS = r"""/* A float's bits and back: memcpy is the defined way, and compilers make it a no-op. */
static inline uint32_t limn_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static inline float limn_float(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* `when ? a : b` as an and-or of bits. A ?: is a branch to the compiler, which may copy the code after
   it into each arm and fold it there; gcc 12 did that to exp's clamps, leaving in one arm a constant
   product that overflows, which it may not run unconditionally, so for AVX2 the loop kept its branch
   and was not vectorized. A blend of bits is one vector select on every ISA. */
static inline uint32_t limn_pick(int when, uint32_t a, uint32_t b) {
    const uint32_t mask = 0u - (uint32_t)(when != 0);
    return (a & mask) | (b & ~mask);
}

"""

CONVERSIONS = r"""/* float16 and bfloat16 are stored as 16-bit patterns and computed in float32; these convert with
   round-to-nearest-even, bit for bit what ml_dtypes (the numpy device) does. Like exp and log below
   they select rather than branch, in 32-bit lanes only, so a loop of them vectorizes. */
static inline float limn_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, shifted = (uint32_t)(h & 0x7fffu) << 13;
    const uint32_t exp = shifted & 0x0f800000u;  /* the float16 exponent, in float32's place */
    const uint32_t normal = shifted + 0x38000000u; /* rebias 15 -> 127 */
    const uint32_t special = normal + 0x38000000u; /* inf and nan: exponent all ones */
    /* subnormal (and zero): 2**-14 * (1 + man / 1024) - 2**-14 is man * 2**-24, exactly */
    const uint32_t subnormal = limn_bits(limn_float(normal + 0x00800000u) - 6.103515625e-05f);
    uint32_t bits = limn_pick(exp == 0x0f800000u, special, normal);
    bits = limn_pick(exp == 0, subnormal, bits);
    return limn_float(sign | bits);
}

static inline uint16_t limn_f32_to_f16(float f) {
    const uint32_t x = limn_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    /* normal: rebias 127 -> 15 and round the 13 dropped bits to nearest even (add 0xfff, and 1 more when
       the kept part is odd; a carry rolls into the exponent, up to inf) */
    const uint32_t normal = (ax - 0x38000000u + 0xfffu + ((ax >> 13) & 1u)) >> 13;
    /* below 2**-14, a float16 subnormal: adding 0.5 leaves units of 2**-24 in the low bits, rounded to even */
    const uint32_t subnormal = limn_bits(limn_float(ax) + 0.5f) - 0x3f000000u;
    uint32_t h = limn_pick(ax < 0x38800000u, subnormal, normal);
    h = limn_pick(ax >= 0x47800000u, 0x7c00u, h);                          /* inf */
    h = limn_pick(ax > 0x7f800000u, 0x7e00u | ((ax >> 13) & 0x3ffu), h); /* nan: quiet, top payload kept */
    return (uint16_t)(sign | h);
}

static inline float limn_bf16_to_f32(uint16_t h) { return limn_float((uint32_t)h << 16); }

static inline uint16_t limn_f32_to_bf16(float f) {
    const uint32_t x = limn_bits(f);
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return (uint16_t)limn_pick((x & 0x7fffffffu) > 0x7f800000u, (x >> 16) | 0x40u, rounded); /* nan stays nan */
}

"""

ROUNDS = r"""static inline float limn_round_f16(float f) { return limn_f16_to_f32(limn_f32_to_f16(f)); }
static inline float limn_round_bf16(float f) { return limn_bf16_to_f32(limn_f32_to_bf16(f)); }
"""
