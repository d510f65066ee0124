"""The CUDA C every program starts with: the types and constants NVRTC does not predefine, the half widths'
conversions, and the atomics a scatter's adds go through.

NVRTC compiles with no system headers, so the fixed-width ints come from typedefs here and INFINITY and NAN
from bit patterns (memcpy, which the half widths' helpers call, is built into device code); under the
CUDA-on-CPU shim (LIMN_CUDA_SIM, limn.cuda.sim.shim) the same names come from the C++ standard headers.
ATOMICS names, per (op, dtype), the helper a colliding ACCUM calls. CUDA's atomics start at 32 bits, where the
spec has a narrow-int or half-width scatter decline; here such a cell is updated by compare-and-swap on the word
holding it, so every dtype scatters (a half width rounding at each add, as the c device's ordered adds do, in
whatever order the adds land). A pair with no row (a half width's MAX) is declined with the reason.
Pipeline: IR -> CUDA C (cuda/source.py) -> **this prelude + the kernels** -> NVRTC / the shim.
"""

from limn import dtypes
from limn.compiler.half_widths import BITS, CONVERSIONS, ROUNDS
from limn.dtypes import DType
from limn.graph.ops import Op

TYPES = r"""#ifndef LIMN_CUDA_SIM
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fffffff)
#endif
"""

ATOMIC_HELPERS = r"""
/* a scatter's colliding adds: CUDA's atomicAdd, int64 through its unsigned long long form (two's
   complement adds the same bits, and limn's ints wrap) */
static __device__ __forceinline__ void limn_atomic_add_f32(float* at, float x) { atomicAdd(at, x); }
static __device__ __forceinline__ void limn_atomic_add_f64(double* at, double x) { atomicAdd(at, x); }
static __device__ __forceinline__ void limn_atomic_add_i32(int32_t* at, int32_t x) { atomicAdd((int*)at, (int)x); }
static __device__ __forceinline__ void limn_atomic_add_i64(int64_t* at, int64_t x) {
    atomicAdd((unsigned long long*)at, (unsigned long long)x);
}

/* a scatter's colliding maxima, float32: a compare-and-swap loop on the bits, keeping a nan as the C-style
   MAX does (a value that is not larger, or a cell that is already nan, leaves the cell alone) */
static __device__ __forceinline__ void limn_atomic_max_f32(float* at, float x) {
    unsigned int* bits = (unsigned int*)at;
    unsigned int old = *bits;
    for (;;) {
        const float cur = __uint_as_float(old);
        if (cur != cur || !(x != x || x > cur)) return;
        const unsigned int seen = atomicCAS(bits, old, __float_as_uint(x));
        if (seen == old) return;
        old = seen;
    }
}

/* float64's maxima: the same loop on 64 bits */
static __device__ __forceinline__ void limn_atomic_max_f64(double* at, double x) {
    unsigned long long* bits = (unsigned long long*)at;
    unsigned long long old = *bits;
    for (;;) {
        const double cur = __longlong_as_double((long long)old);
        if (cur != cur || !(x != x || x > cur)) return;
        const unsigned long long seen = atomicCAS(bits, old, (unsigned long long)__double_as_longlong(x));
        if (seen == old) return;
        old = seen;
    }
}

static __device__ __forceinline__ void limn_atomic_max_i32(int32_t* at, int32_t x) { atomicMax((int*)at, (int)x); }
static __device__ __forceinline__ void limn_atomic_max_i64(int64_t* at, int64_t x) {
    atomicMax((long long*)at, (long long)x);
}

/* A narrow cell (a byte: int8, uint8, bool; two bytes: int16, the half widths) has no atomic of its own:
   CUDA's start at 32 bits. It is updated by compare-and-swap on the aligned 32-bit word that holds it, the
   word's other cells carried along unchanged. COMBINE(cur, x) gives the cell's new bits from its current bits
   `cur` (a uint32_t holding them in its low bits) and the value `x`; the ints wrap as the C-style ops do. */
#define LIMN_NARROW_ATOMIC(NAME, T, X, WIDTH, COMBINE)                                                   \
    static __device__ __forceinline__ void NAME(T* at, X x) {                                             \
        const unsigned long long address = (unsigned long long)at;                                        \
        unsigned int* word = (unsigned int*)(address & ~3ull);                                            \
        const unsigned int shift = (unsigned int)(address & 3ull) * 8u, cell = (1u << WIDTH) - 1u;      \
        unsigned int old = *word;                                                                         \
        for (;;) {                                                                                        \
            const uint32_t cur = (old >> shift) & cell;                                                   \
            const uint32_t next = (uint32_t)(COMBINE) & cell;                                             \
            const unsigned int seen = atomicCAS(word, old, (old & ~(cell << shift)) | (next << shift));   \
            if (seen == old) return;                                                                      \
            old = seen;                                                                                   \
        }                                                                                                 \
    }

LIMN_NARROW_ATOMIC(limn_atomic_add_i8, int8_t, int32_t, 8, cur + (uint32_t)x)
LIMN_NARROW_ATOMIC(limn_atomic_add_u8, uint8_t, int32_t, 8, cur + (uint32_t)x)
LIMN_NARROW_ATOMIC(limn_atomic_add_i16, int16_t, int32_t, 16, cur + (uint32_t)x)
LIMN_NARROW_ATOMIC(limn_atomic_or_b, uint8_t, int, 8, cur | (uint32_t)(x != 0))
LIMN_NARROW_ATOMIC(limn_atomic_max_i8, int8_t, int32_t, 8, (int8_t)cur > (int8_t)x ? cur : (uint32_t)x)
LIMN_NARROW_ATOMIC(limn_atomic_max_u8, uint8_t, int32_t, 8, cur > ((uint32_t)x & 255u) ? cur : (uint32_t)x)
LIMN_NARROW_ATOMIC(limn_atomic_max_i16, int16_t, int32_t, 16, (int16_t)cur > (int16_t)x ? cur : (uint32_t)x)
LIMN_NARROW_ATOMIC(limn_atomic_add_f16, uint16_t, float, 16, limn_f32_to_f16(limn_f16_to_f32((uint16_t)cur) + x))
LIMN_NARROW_ATOMIC(limn_atomic_add_bf16, uint16_t, float, 16,
                   limn_f32_to_bf16(limn_bf16_to_f32((uint16_t)cur) + x))
"""

# the half widths' helpers are plain C; NVRTC compiles them as device functions (-default-device)
PRELUDE = TYPES + BITS + CONVERSIONS + ROUNDS + ATOMIC_HELPERS

ATOMICS: dict[tuple[Op, DType], str] = {
    (Op.ADD, dtypes.float32): "limn_atomic_add_f32",
    (Op.ADD, dtypes.float64): "limn_atomic_add_f64",
    (Op.ADD, dtypes.int32): "limn_atomic_add_i32",
    (Op.ADD, dtypes.int64): "limn_atomic_add_i64",
    (Op.MAX, dtypes.float32): "limn_atomic_max_f32",
    (Op.MAX, dtypes.float64): "limn_atomic_max_f64",
    (Op.ADD, dtypes.int8): "limn_atomic_add_i8",
    (Op.ADD, dtypes.uint8): "limn_atomic_add_u8",
    (Op.ADD, dtypes.int16): "limn_atomic_add_i16",
    (Op.ADD, dtypes.bool_): "limn_atomic_or_b",
    (Op.MAX, dtypes.bool_): "limn_atomic_or_b",
    (Op.MAX, dtypes.int8): "limn_atomic_max_i8",
    (Op.MAX, dtypes.uint8): "limn_atomic_max_u8",
    (Op.MAX, dtypes.int16): "limn_atomic_max_i16",
    (Op.ADD, dtypes.float16): "limn_atomic_add_f16",
    (Op.ADD, dtypes.bfloat16): "limn_atomic_add_bf16",
    (Op.MAX, dtypes.int32): "limn_atomic_max_i32",
    (Op.MAX, dtypes.int64): "limn_atomic_max_i64",
}
