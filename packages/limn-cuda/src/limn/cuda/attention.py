"""The cuda and cuda-sim devices' fused attention kernels: sdpa, sdpa_bwd_q and sdpa_bwd_kv as fixed CUDA C
(limn.composed.functional.sdpa holds the layout and the numpy references they are diffed against), compiled once per
device.

A block owns `block` rows, one per thread: query rows in the forward and dQ passes, key rows in the dK, dV pass.
It streams the other side past them in tiles of `tile` rows (keys, values; or queries, dO) staged through
static shared memory `chunk` columns at a time, so d and d_v may be any size: a row's totals over its output
columns are kept in registers `chunk` columns per pass, the scores recomputed on each pass. Every total is one
thread's and folds in the order the tiles fix, with no atomics, so the same input gives the same bits twice.
The shapes (n, t_q, t_k, d, d_v) and params are runtime values, read from a small int64 buffer (META) the
kernel is handed last, since both devices launch with buffers only: one compiled program per device serves
every shape. float16 and bfloat16 are read through the prelude's conversions, computed in float32 and rounded
once when stored, in the kernel (on the cuda device the buffers are GPU memory, so no host widening is possible).
Pipeline: graph (CUSTOM nodes) -> IR (a CUSTOM kernel) -> **this CUDA C** -> NVRTC / the shim (run_custom).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from limn import dtypes
from limn.compiler.ir import KernelIR
from limn.cuda.program import CudaProgram, Launch
from limn.dtypes import DType
from limn.runtime.device import DeviceError

NAMES = frozenset({"sdpa", "sdpa_bwd_q", "sdpa_bwd_kv"})
STATIC_SHARED_LIMIT = 48 * 1024  # a block's static __shared__ memory may not pass this

# the storage dtype -> (the kernels' suffix, its C storage type, its compute type, L's dtype)
WIDTHS: dict[DType, tuple[str, str, str, DType]] = {
    dtypes.float32: ("f32", "float", "float", dtypes.float32),
    dtypes.float64: ("f64", "double", "double", dtypes.float64),
    dtypes.float16: ("f16", "uint16_t", "float", dtypes.float32),
    dtypes.bfloat16: ("bf16", "uint16_t", "float", dtypes.float32),
}

# META, the int64 buffer every kernel takes last: the shapes, the flags, and scale's float64 bits
META = ("n", "t_q", "t_k", "d", "d_v", "causal", "masked", "scale_bits")


@dataclass(frozen=True)
class Tiles:
    """The sizes the kernels are compiled for. `block`: threads per block, one owned row each (the kernels
    read blockDim.x, so a smaller block also runs; `block` is what Launch.block asks for and __launch_bounds__
    allows). `tile`, `chunk`: rows per streamed tile and columns per stage and per register pass, for float32
    compute; `wide_tile`, `wide_chunk` the same for float64, whose registers are twice as wide."""

    block: int = 64
    tile: int = 32
    chunk: int = 16
    wide_tile: int = 16
    wide_chunk: int = 16

    def sizes(self, compute: str) -> tuple[int, int]:
        """(tile, chunk) for a compute type ("float" or "double")."""
        return (self.wide_tile, self.wide_chunk) if compute == "double" else (self.tile, self.chunk)

    def shared_bytes(self, name: str, compute: str) -> int:
        """The static shared memory one block of kernel `name` declares: two staged tiles, and in the dK,
        dV pass each streamed query's L and D besides.

        >>> GPU.shared_bytes("sdpa", "float"), GPU.shared_bytes("sdpa_bwd_kv", "double")
        (4096, 4352)
        """
        tile, chunk = self.sizes(compute)
        width = 8 if compute == "double" else 4
        rows = 2 * tile if name == "sdpa_bwd_kv" else 0
        return (2 * tile * chunk + rows) * width


GPU = Tiles()  # 64 threads a block; float32: 32-row tiles, 16 columns a pass (96 floats of registers in dK, dV)
SIM = Tiles(block=8, tile=4, chunk=8, wide_tile=4, wide_chunk=8)  # the sim: one std::thread per CUDA thread

TRAITS = r"""
/* A storage width: S the stored type, R the type computed in, load and store the one conversion each way. */
struct limn_sdpa_width_SFX {
    typedef STORE S;
    typedef REAL R;
    enum { TILE = TILE_ROWS, CHUNK = CHUNK_COLS };
    static __device__ __forceinline__ REAL load(STORE x) { return LOADED; }
    static __device__ __forceinline__ STORE store(REAL x) { return STORED; }
    static __device__ __forceinline__ REAL exp_(REAL x) { return EXP(x); }
    static __device__ __forceinline__ REAL log_(REAL x) { return LOG(x); }
    static __device__ __forceinline__ REAL madd(REAL a, REAL b, REAL c) { return FMA(a, b, c); }
};
"""

SPELLINGS = {  # the words TRAITS leaves open, per width
    "f32": {"LOADED": "x", "STORED": "x"},
    "f64": {"LOADED": "x", "STORED": "x", "EXP": "exp", "LOG": "log", "FMA": "fma"},
    "f16": {"LOADED": "limn_f16_to_f32(x)", "STORED": "limn_f32_to_f16(x)"},
    "bf16": {"LOADED": "limn_bf16_to_f32(x)", "STORED": "limn_f32_to_bf16(x)"},
}
FLOAT_MATH = {"EXP": "expf", "LOG": "logf", "FMA": "fmaf"}

COMMON = r"""
/* the kernels' shapes and params, as run_custom wrote them into the META buffer */
struct limn_sdpa_dims {
    int64_t n, t_q, t_k, d, d_v;
    bool causal, masked;
    double scale;
};
static __device__ __forceinline__ limn_sdpa_dims limn_sdpa_read(const int64_t* meta) {
    limn_sdpa_dims s;
    s.n = meta[0], s.t_q = meta[1], s.t_k = meta[2], s.d = meta[3], s.d_v = meta[4];
    s.causal = meta[5] != 0, s.masked = meta[6] != 0;
    s.scale = __longlong_as_double((long long)meta[7]);
    return s;
}

/* the keys a block of query rows [r0, r0 + blockDim.x) can see end here: causal hides the rest from them all */
static __device__ __forceinline__ int64_t limn_sdpa_key_end(const limn_sdpa_dims& s, int64_t r0) {
    const int64_t last = r0 + (int64_t)blockDim.x < s.t_q ? r0 + (int64_t)blockDim.x : s.t_q;
    return s.causal && last < s.t_k ? last : s.t_k;
}

/* The query rows block tile w holds in the forward and dQ passes: its batch row b, this thread's query i and
   flat row (a thread past t_q computes row r0's and writes nothing: live is false), the keys the tile can see
   end at key_end, and b's row of the key mask. */
typedef struct {
    int64_t b, i, row, key_end;
    bool live;
    const uint8_t* mask_row;
} limn_sdpa_rows;

static __device__ __forceinline__ limn_sdpa_rows limn_sdpa_rows_of(const limn_sdpa_dims& s, int64_t w, int64_t tiles,
                                                                  const uint8_t* key_mask) {
    const int64_t b = w / tiles, r0 = (w % tiles) * blockDim.x, i = r0 + threadIdx.x;
    const bool live = i < s.t_q;
    const limn_sdpa_rows rows = {b, i, b * s.t_q + (live ? i : r0), limn_sdpa_key_end(s, r0), live,
                                 key_mask + (s.masked ? b * s.t_k : 0)};
    return rows;
}

/* dot[r] = row . rows[j0 + r] over `width` columns for the tile's rows j0 + r < end (0 past end): the tile is
   staged through `stage` CHUNK columns at a time by the whole block, each thread folding its own row's dots in
   column order. Every thread of the block calls it (it holds barriers). */
template <class W>
static __device__ __forceinline__ void limn_sdpa_dots(const typename W::S* row, const typename W::S* rows,
                                                      int64_t width, int64_t j0, int64_t end,
                                                      typename W::R (*stage)[W::CHUNK], typename W::R* dot) {
    typedef typename W::R R;
#pragma unroll
    for (int r = 0; r < W::TILE; r++) dot[r] = 0;
    for (int64_t c0 = 0; c0 < width; c0 += W::CHUNK) {
        __syncthreads(); /* the stage's last readers are done */
        for (int e = threadIdx.x; e < W::TILE * W::CHUNK; e += blockDim.x) {
            const int r = e / W::CHUNK, c = e % W::CHUNK; /* e = r * CHUNK + c: row-major over (TILE, CHUNK) */
            const bool in = j0 + r < end && c0 + c < width;
            stage[r][c] = in ? W::load(rows[(j0 + r) * width + c0 + c]) : (R)0;
        }
        __syncthreads();
        const int64_t cols = width - c0 < W::CHUNK ? width - c0 : W::CHUNK;
        for (int64_t c = 0; c < cols; c++) {
            const R x = W::load(row[c0 + c]);
#pragma unroll
            for (int r = 0; r < W::TILE; r++) dot[r] = W::madd(x, stage[r][c], dot[r]);
        }
    }
}

/* Columns [c0, c0 + CHUNK) of the tile's rows j0 + r < end into `stage` (0 elsewhere), by the whole block. */
template <class W>
static __device__ __forceinline__ void limn_sdpa_stage(const typename W::S* rows, int64_t width, int64_t c0,
                                                       int64_t j0, int64_t end, typename W::R (*stage)[W::CHUNK]) {
    __syncthreads(); /* the stage's last readers are done */
    for (int e = threadIdx.x; e < W::TILE * W::CHUNK; e += blockDim.x) {
        const int r = e / W::CHUNK, c = e % W::CHUNK;
        const bool in = j0 + r < end && c0 + c < width;
        stage[r][c] = in ? W::load(rows[(j0 + r) * width + c0 + c]) : (typename W::R)0;
    }
    __syncthreads();
}

/* D = rowsum(dO * O) of one query row, folded in column order */
template <class W>
static __device__ __forceinline__ typename W::R limn_sdpa_delta(const typename W::S* d_out, const typename W::S* out,
                                                                int64_t d_v) {
    typename W::R total = 0;
    for (int64_t c = 0; c < d_v; c++) total = W::madd(W::load(d_out[c]), W::load(out[c]), total);
    return total;
}

/* Whether query i sees key j: in range, on or before the diagonal when causal, kept by the key mask. */
static __device__ __forceinline__ bool limn_sdpa_visible(const limn_sdpa_dims& s, const uint8_t* mask_row,
                                                         int64_t i, int64_t j, int64_t end) {
    return j < end && (!s.causal || j <= i) && (!s.masked || mask_row[j] != 0);
}

/* O and L. Block tile w owns query rows r0 + threadIdx.x of batch row b. Per pass over CHUNK output columns,
   it streams the key tiles: scores (limn_sdpa_dots), the running max m, the sum l of exp(s - m), and acc, the
   sum of exp(s - m) v over the pass's columns. The first pass writes L (every pass computes the same m, l). */
template <class W>
static __device__ __forceinline__ void limn_sdpa_forward(const typename W::S* q, const typename W::S* k,
                                                         const typename W::S* v, const uint8_t* key_mask,
                                                         typename W::S* out, typename W::R* lse, const int64_t* meta) {
    typedef typename W::R R;
    __shared__ R ks[W::TILE][W::CHUNK]; /* a chunk of a key tile's columns */
    __shared__ R vs[W::TILE][W::CHUNK]; /* a chunk of a value tile's columns */
    const limn_sdpa_dims s = limn_sdpa_read(meta);
    const R scale = (R)s.scale;
    const int64_t tiles = (s.t_q + blockDim.x - 1) / blockDim.x;
    for (int64_t w = blockIdx.x; w < s.n * tiles; w += gridDim.x) {
        const limn_sdpa_rows rows = limn_sdpa_rows_of(s, w, tiles, key_mask);
        const int64_t b = rows.b, i = rows.i, row = rows.row, key_end = rows.key_end;
        const bool live = rows.live;
        const uint8_t* mask_row = rows.mask_row;
        for (int64_t c0 = 0; c0 == 0 || c0 < s.d_v; c0 += W::CHUNK) {
            R m = -(R)INFINITY, l = 0, acc[W::CHUNK];
#pragma unroll
            for (int c = 0; c < W::CHUNK; c++) acc[c] = 0;
            for (int64_t j0 = 0; j0 < key_end; j0 += W::TILE) {
                R p[W::TILE]; /* the tile's scores, then exp(s - m) */
                limn_sdpa_dots<W>(q + row * s.d, k + b * s.t_k * s.d, s.d, j0, key_end, ks, p);
                R top = m;
#pragma unroll
                for (int r = 0; r < W::TILE; r++) {
                    p[r] = limn_sdpa_visible(s, mask_row, i, j0 + r, key_end) ? p[r] * scale : -(R)INFINITY;
                    top = p[r] > top ? p[r] : top;
                }
                const R shift = top == -(R)INFINITY ? (R)0 : top; /* a row that has seen no key yet shifts by 0 */
                const R rescale = W::exp_(m - shift);             /* the old terms, moved onto the new max */
                l = l * rescale;
#pragma unroll
                for (int c = 0; c < W::CHUNK; c++) acc[c] = acc[c] * rescale;
#pragma unroll
                for (int r = 0; r < W::TILE; r++) {
                    p[r] = W::exp_(p[r] - shift); /* 0 where hidden */
                    l = l + p[r];
                }
                limn_sdpa_stage<W>(v + b * s.t_k * s.d_v, s.d_v, c0, j0, key_end, vs);
#pragma unroll
                for (int r = 0; r < W::TILE; r++) {
#pragma unroll
                    for (int c = 0; c < W::CHUNK; c++) acc[c] = W::madd(p[r], vs[r][c], acc[c]);
                }
                m = top;
            }
            if (!live) continue;
            const bool seen = l != 0; /* 0 only when no key was seen: a NaN score makes the row NaN */
            const R denom = seen ? l : (R)1;
#pragma unroll
            for (int c = 0; c < W::CHUNK; c++)
                if (c0 + c < s.d_v) out[row * s.d_v + c0 + c] = W::store(seen ? acc[c] / denom : (R)0);
            if (c0 == 0) lse[row] = seen ? m + W::log_(denom) : -(R)INFINITY;
        }
    }
}

/* dQ. Block tiles as the forward's; per pass over CHUNK columns of d it streams the key tiles, recomputing
   P = exp(S - L) and dP = dO v^T, and folds dQ += dS k with dS = P (dP - D). */
template <class W>
static __device__ __forceinline__ void limn_sdpa_backward_q(const typename W::S* q, const typename W::S* k,
                                                            const typename W::S* v, const uint8_t* key_mask,
                                                            const typename W::S* out, const typename W::R* lse,
                                                            const typename W::S* d_out, typename W::S* d_q,
                                                            const int64_t* meta) {
    typedef typename W::R R;
    __shared__ R ks[W::TILE][W::CHUNK]; /* a chunk of a key tile's columns */
    __shared__ R vs[W::TILE][W::CHUNK]; /* a chunk of a value tile's columns */
    const limn_sdpa_dims s = limn_sdpa_read(meta);
    const R scale = (R)s.scale;
    const int64_t tiles = (s.t_q + blockDim.x - 1) / blockDim.x;
    for (int64_t w = blockIdx.x; w < s.n * tiles; w += gridDim.x) {
        const limn_sdpa_rows rows = limn_sdpa_rows_of(s, w, tiles, key_mask);
        const int64_t b = rows.b, i = rows.i, row = rows.row, key_end = rows.key_end;
        const bool live = rows.live;
        const uint8_t* mask_row = rows.mask_row;
        const R row_lse = lse[row];
        const R delta = limn_sdpa_delta<W>(d_out + row * s.d_v, out + row * s.d_v, s.d_v);
        const bool dead = row_lse == -(R)INFINITY; /* a row that sees no key: P = 0 */
        for (int64_t c0 = 0; c0 < s.d; c0 += W::CHUNK) {
            R acc[W::CHUNK];
#pragma unroll
            for (int c = 0; c < W::CHUNK; c++) acc[c] = 0;
            for (int64_t j0 = 0; j0 < key_end; j0 += W::TILE) {
                R p[W::TILE], ds[W::TILE]; /* P; dP, then dS */
                limn_sdpa_dots<W>(q + row * s.d, k + b * s.t_k * s.d, s.d, j0, key_end, ks, p);
                limn_sdpa_dots<W>(d_out + row * s.d_v, v + b * s.t_k * s.d_v, s.d_v, j0, key_end, vs, ds);
#pragma unroll
                for (int r = 0; r < W::TILE; r++) {
                    const bool visible = !dead && limn_sdpa_visible(s, mask_row, i, j0 + r, key_end);
                    p[r] = visible ? W::exp_(p[r] * scale - row_lse) : (R)0;
                    ds[r] = visible ? p[r] * (ds[r] - delta) : (R)0; /* 0 even where D is NaN */
                }
                limn_sdpa_stage<W>(k + b * s.t_k * s.d, s.d, c0, j0, key_end, ks);
#pragma unroll
                for (int r = 0; r < W::TILE; r++) {
#pragma unroll
                    for (int c = 0; c < W::CHUNK; c++) acc[c] = W::madd(ds[r], ks[r][c], acc[c]);
                }
            }
            if (!live) continue;
#pragma unroll
            for (int c = 0; c < W::CHUNK; c++)
                if (c0 + c < s.d) d_q[row * s.d + c0 + c] = W::store(acc[c] * scale);
        }
    }
}

/* dK and dV. Block tile w owns key rows j0 + threadIdx.x of batch row b; per pass over CHUNK columns (of d
   for dK, of d_v for dV, side by side) it streams the query tiles from the first query that sees a key of
   the block, staging each tile's L and D, recomputing P and dS, and folds dV += P^T dO and dK += dS^T q. */
template <class W>
static __device__ __forceinline__ void limn_sdpa_backward_kv(const typename W::S* q, const typename W::S* k,
                                                             const typename W::S* v, const uint8_t* key_mask,
                                                             const typename W::S* out, const typename W::R* lse,
                                                             const typename W::S* d_out, typename W::S* d_k,
                                                             typename W::S* d_v, const int64_t* meta) {
    typedef typename W::R R;
    __shared__ R qs[W::TILE][W::CHUNK]; /* a chunk of a query tile's columns (and the dots' stage) */
    __shared__ R gs[W::TILE][W::CHUNK]; /* the same chunk of its rows of dO */
    __shared__ R row_lse[W::TILE], row_delta[W::TILE];
    const limn_sdpa_dims s = limn_sdpa_read(meta);
    const R scale = (R)s.scale;
    const int64_t tiles = (s.t_k + blockDim.x - 1) / blockDim.x;
    const int64_t width = s.d > s.d_v ? s.d : s.d_v;
    for (int64_t w = blockIdx.x; w < s.n * tiles; w += gridDim.x) {
        const int64_t b = w / tiles, j0 = (w % tiles) * blockDim.x, j = j0 + threadIdx.x;
        const bool live = j < s.t_k;
        const int64_t key = b * s.t_k + (live ? j : j0);
        const bool kept = live && (!s.masked || key_mask[b * s.t_k + j] != 0);
        const int64_t first = s.causal ? (j0 < s.t_q ? j0 : s.t_q) : 0; /* queries before j0 see none of these */
        for (int64_t c0 = 0; c0 < width; c0 += W::CHUNK) {
            R dk[W::CHUNK], dv[W::CHUNK];
#pragma unroll
            for (int c = 0; c < W::CHUNK; c++) dk[c] = 0, dv[c] = 0;
            for (int64_t i0 = first; i0 < s.t_q; i0 += W::TILE) {
                __syncthreads(); /* the last tile's L and D are read */
                for (int r = threadIdx.x; r < W::TILE; r += blockDim.x) {
                    const int64_t query = b * s.t_q + i0 + r;
                    const bool in = i0 + r < s.t_q;
                    row_lse[r] = in ? lse[query] : -(R)INFINITY;
                    row_delta[r] = in ? limn_sdpa_delta<W>(d_out + query * s.d_v, out + query * s.d_v, s.d_v) : (R)0;
                }
                R p[W::TILE], ds[W::TILE]; /* P; dP, then dS */
                limn_sdpa_dots<W>(k + key * s.d, q + b * s.t_q * s.d, s.d, i0, s.t_q, qs, p);
                limn_sdpa_dots<W>(v + key * s.d_v, d_out + b * s.t_q * s.d_v, s.d_v, i0, s.t_q, qs, ds);
                __syncthreads(); /* L and D are staged (when d and d_v are 0 the dots hold no barrier) */
#pragma unroll
                for (int r = 0; r < W::TILE; r++) {
                    const bool visible = kept && i0 + r < s.t_q && (!s.causal || j <= i0 + r) &&
                                         row_lse[r] != -(R)INFINITY;
                    p[r] = visible ? W::exp_(p[r] * scale - row_lse[r]) : (R)0;
                    ds[r] = visible ? p[r] * (ds[r] - row_delta[r]) : (R)0; /* 0 even where D is NaN */
                }
                limn_sdpa_stage<W>(q + b * s.t_q * s.d, s.d, c0, i0, s.t_q, qs);
                limn_sdpa_stage<W>(d_out + b * s.t_q * s.d_v, s.d_v, c0, i0, s.t_q, gs);
#pragma unroll
                for (int r = 0; r < W::TILE; r++) {
#pragma unroll
                    for (int c = 0; c < W::CHUNK; c++) {
                        dk[c] = W::madd(ds[r], qs[r][c], dk[c]);
                        dv[c] = W::madd(p[r], gs[r][c], dv[c]);
                    }
                }
            }
            if (!live) continue;
#pragma unroll
            for (int c = 0; c < W::CHUNK; c++) {
                if (c0 + c < s.d) d_k[key * s.d + c0 + c] = W::store(dk[c] * scale);
                if (c0 + c < s.d_v) d_v[key * s.d_v + c0 + c] = W::store(dv[c]);
            }
        }
    }
}
"""

# each kernel's parameters by name (its buffers as the KernelIR lists them, the mask's slot always there and
# null when unmasked, then META) and the template it instantiates
ARGUMENTS = {
    "sdpa": ("q", "k", "v", "key_mask", "out", "lse", "meta"),
    "sdpa_bwd_q": ("q", "k", "v", "key_mask", "out", "lse", "d_out", "d_q", "meta"),
    "sdpa_bwd_kv": ("q", "k", "v", "key_mask", "out", "lse", "d_out", "d_k", "d_v", "meta"),
}
TEMPLATES = {"sdpa": "limn_sdpa_forward", "sdpa_bwd_q": "limn_sdpa_backward_q", "sdpa_bwd_kv": "limn_sdpa_backward_kv"}


def _fill(text: str, words: dict[str, str]) -> str:
    """`text` with each word of `words` spelled out: whole words between non-letters (SFX in limn_sdpa_SFX)."""
    for word, spelling in words.items():
        text = re.sub(rf"(?<![A-Za-z]){word}(?![A-Za-z])", spelling, text)
    return text


def source(tiles: Tiles) -> str:
    """The CUDA C of the three kernels at every width, to follow the prelude (cuda/prelude.PRELUDE: the int
    typedefs, INFINITY, the half widths' conversions). Function names: function_name(custom, dtype)."""
    parts = [COMMON]
    for dtype, (suffix, store, real, _) in WIDTHS.items():
        tile, chunk = tiles.sizes(real)
        words = {"SFX": suffix, "STORE": store, "REAL": real, "TILE_ROWS": str(tile), "CHUNK_COLS": str(chunk)}
        words |= FLOAT_MATH | SPELLINGS[suffix]
        parts.append(_fill(TRAITS, words))
        parts += [_entry(custom, dtype, tiles) for custom in ARGUMENTS]
    return "".join(parts)


def _entry(custom: str, dtype: DType, tiles: Tiles) -> str:
    """The extern "C" __global__ function running `custom` on `dtype`: its template at that width. A minimum
    of one block per multiprocessor in __launch_bounds__ lets ptxas give a thread up to 255 registers, which
    the unrolled register tiles take without spilling (tests/cuda/test_cuda_sdpa.py reads ptxas's report)."""
    names = ARGUMENTS[custom]
    signature = ", ".join(f"{t} __restrict__ {name}" for t, name in zip(params(custom, dtype), names))
    head = f'extern "C" __global__ __launch_bounds__({tiles.block}, 1) void {function_name(custom, dtype)}'
    body = f"{TEMPLATES[custom]}<limn_sdpa_width_{WIDTHS[dtype][0]}>({', '.join(names)})"
    return f"{head}({signature}) {{\n    {body};\n}}\n"


def function_name(custom: str, dtype: DType) -> str:
    """The __global__ function running CUSTOM `custom` on q's dtype."""
    return f"limn_{custom}_{WIDTHS[dtype][0]}"


def params(custom: str, dtype: DType) -> tuple[str, ...]:
    """The kernel's parameter types, in ARGUMENTS' order."""
    _, store, real, _ = WIDTHS[dtype]
    ins = [f"const {store}*"] * 3 + ["const uint8_t*"]
    if custom == "sdpa":
        return (*ins, f"{store}*", f"{real}*", "const int64_t*")
    grads = (f"const {store}*", f"const {real}*", f"const {store}*")
    outs = (f"{store}*",) if custom == "sdpa_bwd_q" else (f"{store}*", f"{store}*")
    return (*ins, *grads, *outs, "const int64_t*")


def launches(tiles: Tiles) -> tuple[Launch, ...]:
    """Every kernel's Launch, no cells (what a compile needs: the names and parameters)."""
    return tuple(
        Launch(function_name(custom, dtype), params(custom, dtype), 0, tiles.block)
        for dtype in WIDTHS
        for custom in sorted(NAMES)
    )


def program(tiles: Tiles) -> CudaProgram:
    """The three kernels at every width as one program (to follow PRELUDE), compiled once per device."""
    return CudaProgram(source(tiles), launches(tiles))


def dims(kernel: KernelIR) -> tuple[int, int, int, int, int]:
    """(n, t_q, t_k, d, d_v) of a CUSTOM attention kernel."""
    (n, t_q, d), (_, t_k, _), (_, _, d_v) = (b.shape for b in kernel.inputs[:3])
    return n, t_q, t_k, d, d_v


def launch(kernel: KernelIR, tiles: Tiles) -> Launch:
    """The one Launch that runs `kernel`: a thread per owned row (query rows, or key rows for dK, dV), whole
    blocks of them; DeviceError for a CUSTOM name or dtype these kernels do not serve."""
    dtype = kernel.inputs[0].dtype
    if kernel.custom not in NAMES:
        raise DeviceError(f"CUSTOM {kernel.custom!r} is not a fused attention kernel ({', '.join(sorted(NAMES))})")
    if dtype not in WIDTHS:
        names = ", ".join(d.name for d in WIDTHS)
        raise DeviceError(f"CUSTOM {kernel.custom!r}: the cuda attention kernels take {names}, not {dtype.name}")
    n, t_q, t_k, _, _ = dims(kernel)
    rows = t_k if kernel.custom == "sdpa_bwd_kv" else t_q
    cells = n * -(-rows // tiles.block) * tiles.block
    return Launch(function_name(kernel.custom, dtype), params(kernel.custom, dtype), cells, tiles.block)


def meta(kernel: KernelIR) -> np.ndarray:
    """The META buffer's values for `kernel`: int64[8], scale as its float64 bits."""
    values = dict(kernel.params)
    scale_bits = int(np.array(float(values["scale"]), np.float64).view(np.int64))
    flags = [int(bool(values["causal"])), int(bool(values["masked"]))]
    return np.array([*dims(kernel), *flags, scale_bits], np.int64)


def arguments(kernel: KernelIR, handles: list[Any], absent: Any, meta_buffer: Any) -> list[Any]:
    """The kernel's arguments in its parameters' order: `handles` (inputs, then outputs, as the KernelIR
    lists them) with `absent` in the mask's slot when there is no mask, then the META buffer."""
    if dict(kernel.params)["masked"]:
        return [*handles, meta_buffer]
    return [*handles[:3], absent, *handles[3:], meta_buffer]
