"""The CUDA C every program starts with: the types and constants NVRTC does not predefine, the half widths'
conversions, and the atomics a scatter's adds go through.

NVRTC compiles with no system headers, so the fixed-width ints come from typedefs here and INFINITY and NAN
from bit patterns (memcpy, which the half widths' helpers call, is built into device code); under the
CUDA-on-CPU shim (LIMN_CUDA_SIM, limn.cuda_sim_shim) the same names come from the C++ standard headers.
ATOMICS names, per (op, dtype), the helper a colliding ACCUM calls; a pair with no row has no atomic CUDA does
in one instruction (the byte-wide ints, bool, the half widths), and the renderer declines such a scatter with
that reason.
Pipeline: IR -> CUDA C (cuda_source.py) -> **this prelude + the kernels** -> NVRTC / the shim.
"""

from limn import dtypes
from limn.dtypes import DType
from limn.half_widths import BITS, CONVERSIONS, ROUNDS
from limn.ops import Op

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

static __device__ __forceinline__ void limn_atomic_max_i32(int32_t* at, int32_t x) { atomicMax((int*)at, (int)x); }
static __device__ __forceinline__ void limn_atomic_max_i64(int64_t* at, int64_t x) {
    atomicMax((long long*)at, (long long)x);
}
"""

# the half widths' helpers are plain C; NVRTC compiles them as device functions (-default-device)
PRELUDE = TYPES + BITS + CONVERSIONS + ROUNDS + ATOMIC_HELPERS

ATOMICS: dict[tuple[Op, DType], str] = {
    (Op.ADD, dtypes.float32): "limn_atomic_add_f32",
    (Op.ADD, dtypes.float64): "limn_atomic_add_f64",
    (Op.ADD, dtypes.int32): "limn_atomic_add_i32",
    (Op.ADD, dtypes.int64): "limn_atomic_add_i64",
    (Op.MAX, dtypes.float32): "limn_atomic_max_f32",
    (Op.MAX, dtypes.int32): "limn_atomic_max_i32",
    (Op.MAX, dtypes.int64): "limn_atomic_max_i64",
}
