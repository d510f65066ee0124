/* The vector words of the matmul tiles (limn/c/rewrites/matmul.py) and of fused attention (limn/c/attention.py),
   which a unit holding either includes once after the prelude: vector types sized to the widest the target
   has, and LIMN_VEC_FMA, which must be a true fused multiply-add in every lane, or a tile would round
   differently from the scalar fmaf fold. x86 gets the FMA instructions through the compiler builtins that
   immintrin.h wraps (parsing immintrin.h cost cc 0.14 s per unit, four times the rest of the prelude); any
   other target a per-lane fma loop that the compiler may vectorize. A unit carries what follows this comment. */
#include <stdlib.h>
#if defined(__AVX512F__)
#define LIMN_VEC_BYTES 64
#elif defined(__AVX2__)
#define LIMN_VEC_BYTES 32
#else
#define LIMN_VEC_BYTES 16
#endif
#define LIMN_VEC_FLOAT (LIMN_VEC_BYTES / 4)
#define LIMN_VEC_DOUBLE (LIMN_VEC_BYTES / 8)
typedef float limn_vec_float __attribute__((vector_size(LIMN_VEC_BYTES)));
typedef double limn_vec_double __attribute__((vector_size(LIMN_VEC_BYTES)));
#if defined(__AVX512F__) /* x in every lane, as immintrin.h's set1 spells it */
#define LIMN_SPLAT_F(x) ((limn_vec_float){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x})
#define LIMN_SPLAT_D(x) ((limn_vec_double){x, x, x, x, x, x, x, x})
#else
#define LIMN_SPLAT_F(x) ((limn_vec_float){x, x, x, x, x, x, x, x})
#define LIMN_SPLAT_D(x) ((limn_vec_double){x, x, x, x})
#endif
#if defined(__GNUC__) && defined(__AVX512F__)
static inline limn_vec_float limn_vfma_f(float x, limn_vec_float b, limn_vec_float c) {
    return __builtin_ia32_vfmaddps512_mask(LIMN_SPLAT_F(x), b, c, (unsigned short)-1, 4); /* 4: the current rounding */
}
static inline limn_vec_double limn_vfma_d(double x, limn_vec_double b, limn_vec_double c) {
    return __builtin_ia32_vfmaddpd512_mask(LIMN_SPLAT_D(x), b, c, (unsigned char)-1, 4);
}
#elif defined(__GNUC__) && defined(__AVX2__) && defined(__FMA__)
static inline limn_vec_float limn_vfma_f(float x, limn_vec_float b, limn_vec_float c) {
    return __builtin_ia32_vfmaddps256(LIMN_SPLAT_F(x), b, c);
}
static inline limn_vec_double limn_vfma_d(double x, limn_vec_double b, limn_vec_double c) {
    return __builtin_ia32_vfmaddpd256(LIMN_SPLAT_D(x), b, c);
}
#else
static inline limn_vec_float limn_vfma_f(float x, limn_vec_float b, limn_vec_float c) {
    for (int k = 0; k < LIMN_VEC_FLOAT; k++) c[k] = fmaf(x, b[k], c[k]);
    return c;
}
static inline limn_vec_double limn_vfma_d(double x, limn_vec_double b, limn_vec_double c) {
    for (int k = 0; k < LIMN_VEC_DOUBLE; k++) c[k] = fma(x, b[k], c[k]);
    return c;
}
#endif
#define LIMN_VEC_FMA(x, b, c) _Generic((x), float: limn_vfma_f, double: limn_vfma_d)(x, b, c)
