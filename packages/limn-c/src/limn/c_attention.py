"""The c device's fused attention kernels: sdpa, sdpa_bwd_q and sdpa_bwd_kv (limn.sdpa holds the layout and the
numpy references they are diffed against), as fixed C compiled once per device through its kernel cache.

Each kernel is a list of work items, one per (n, tile of rows), run by an OpenMP team: every output total is owned
by one item and folded in an order fixed by the tiles, never by the team, so threaded equals serial bit for bit
(tests/c/test_sdpa_c.py). Every product of two tiles (S = q k^T, dP = dO v^T, O += P v, dQ += dS k, dK += dS^T q,
dV += P^T dO) is one register-tiled routine, limn_sdpa_gemm, over operands packed once per call: the transposed
tiles of k and v (q and dO in the dK, dV pass) are laid out whole before the work items start, so no item
transposes a tile another has already transposed. What is left between the products (masks, the exp, the running
max and sums) runs elementwise over a tile's keys.
Pipeline: graph (CUSTOM nodes) -> schedule -> IR (a CUSTOM kernel) -> **these C functions** (CDevice.run_custom).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from limn import dtypes
from limn.c_matmul import VECTOR_PRELUDE
from limn.device import DeviceError
from limn.ir import KernelIR

NAMES = frozenset({"sdpa", "sdpa_bwd_q", "sdpa_bwd_kv"})

ROWS = 64  # queries per tile: one forward or dQ work item owns them, the dK, dV pass streams them
KEYS = 64  # keys per tile: the forward and dQ stream them, one dK, dV work item owns them

COMMON = r"""
#include <stdlib.h>

/* n rounded up to a multiple of `to` */
static inline int64_t limn_sdpa_round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

/* the keys row tile [r0, r1) can see end here: past r1 - 1 every key is hidden from all its rows (causal) */
static int64_t limn_sdpa_key_end(int causal, int64_t r1, int64_t t_k) { return causal && r1 < t_k ? r1 : t_k; }

/* the register tile of limn_sdpa_gemm: rows of cells by two vectors, 8 x 2 where AVX-512 gives 32 registers */
#if LIMN_VEC_BYTES == 64
#define LIMN_SDPA_MR 8
#else
#define LIMN_SDPA_MR 4
#endif
"""

# Written once over REAL, VEC, LANES, EXP, LOG, PICK and SUFFIX, instantiated for float (the prelude's vectorizing
# exp and log) and double (C's). Every product of two tiles is limn_sdpa_gemm on packed, zero-padded copies: a
# work item copies its rows of q (and dO), and each tile of k and v, into buffers whose row length is a multiple
# of two vectors, transposed where the product needs the other axis stride-1.
TEMPLATE = r"""
/* c = a . b, plus c's old value when `accumulate`: a (m, kk) with rows lda apart, b (kk, n) rows ldb apart, c (m, n)
   rows ldc apart; m a multiple of LIMN_SDPA_MR, n of two vectors. LIMN_SDPA_MR x 2 vectors of c stay in
   registers while k walks 0 .. kk in order, one fma per cell per step: a cell's bits depend on neither the tile
   nor the thread that computes it */
static void limn_sdpa_gemm_SUFFIX(const REAL* restrict a, int64_t lda, const REAL* restrict b, int64_t ldb,
                                  REAL* restrict c, int64_t ldc, int64_t m, int64_t n, int64_t kk, int accumulate) {
    for (int64_t i0 = 0; i0 < m; i0 += LIMN_SDPA_MR)
        for (int64_t j0 = 0; j0 < n; j0 += 2 * LANES) {
            VEC acc[LIMN_SDPA_MR][2];
            for (int ii = 0; ii < LIMN_SDPA_MR; ii++)
                for (int v = 0; v < 2; v++) {
                    acc[ii][v] = (VEC){0};
                    if (accumulate) memcpy(&acc[ii][v], c + (i0 + ii) * ldc + j0 + v * LANES, sizeof acc[ii][v]);
                }
            for (int64_t k = 0; k < kk; k++) {
                VEC row[2];
                memcpy(&row[0], b + k * ldb + j0, sizeof row[0]);
                memcpy(&row[1], b + k * ldb + j0 + LANES, sizeof row[1]);
                for (int ii = 0; ii < LIMN_SDPA_MR; ii++) {
                    const REAL x = a[(i0 + ii) * lda + k];
                    acc[ii][0] = LIMN_VEC_FMA(x, row[0], acc[ii][0]);
                    acc[ii][1] = LIMN_VEC_FMA(x, row[1], acc[ii][1]);
                }
            }
            for (int ii = 0; ii < LIMN_SDPA_MR; ii++)
                for (int v = 0; v < 2; v++)
                    memcpy(c + (i0 + ii) * ldc + j0 + v * LANES, &acc[ii][v], sizeof acc[ii][v]);
        }
}

/* dst (rows, ld) = the first `count` rows of src (each `width` long, `stride` apart), zero past them */
static void limn_sdpa_pack_SUFFIX(const REAL* restrict src, int64_t stride, int64_t count, int64_t width,
                                  REAL* restrict dst, int64_t rows, int64_t ld) {
    for (int64_t j = 0; j < rows; j++)
        for (int64_t c = 0; c < ld; c++) dst[j * ld + c] = j < count && c < width ? src[j * stride + c] : 0;
}

/* the same transposed: dst (rows, ld) with dst[c][j] = src[j][c], zero past the `count` rows and `width` columns */
static void limn_sdpa_pack_t_SUFFIX(const REAL* restrict src, int64_t stride, int64_t count, int64_t width,
                                    REAL* restrict dst, int64_t rows, int64_t ld) {
    for (int64_t c = 0; c < rows; c++)
        for (int64_t j = 0; j < ld; j++) dst[c * ld + j] = j < count && c < width ? src[j * stride + c] : 0;
}

/* a 64-byte-aligned block of n values, whole vectors past the end */
static REAL* limn_sdpa_alloc_SUFFIX(int64_t n) {
    return aligned_alloc(64, (size_t)limn_sdpa_round_up((int64_t)sizeof(REAL) * (n + 1), 64));
}

/* The tiles of x (n batch rows of t rows, each `width` long) as limn_sdpa_gemm's b operands, made once for every
   work item: tile (b, i) is rows [i size, (i + 1) size) of batch row b, at base + b * batch + i * tile with rows
   ld apart, transposed when asked (then (ld, size) wide: a row per column of x). Rows whose width is whole pairs
   of vectors are x itself when not transposed; the rest are zero-padded copies, held by `owned` */
typedef struct {
    const REAL* base;
    int64_t batch, tile, ld;
    REAL* owned;
} limn_sdpa_tiles_SUFFIX;

static limn_sdpa_tiles_SUFFIX limn_sdpa_tiles_make_SUFFIX(const REAL* x, int64_t n, int64_t t, int64_t width,
                                                          int64_t size, int transpose, int threads) {
    const int64_t padded = limn_sdpa_round_up(width, 2 * LANES), count = (t + size - 1) / size;
    if (!transpose && padded == width) return (limn_sdpa_tiles_SUFFIX){x, t * width, size * width, width, 0};
    REAL* owned = limn_sdpa_alloc_SUFFIX(n * count * size * padded);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t p = 0; p < n * count; p++) {
        const int64_t b = p / count, i0 = (p % count) * size, rows = t - i0 < size ? t - i0 : size;
        const REAL* src = x + (b * t + i0) * width;
        if (transpose) limn_sdpa_pack_t_SUFFIX(src, width, rows, width, owned + p * size * padded, padded, size);
        else limn_sdpa_pack_SUFFIX(src, width, rows, width, owned + p * size * padded, size, padded);
    }
    return (limn_sdpa_tiles_SUFFIX){owned, count * size * padded, size * padded, transpose ? size : padded, owned};
}

static inline const REAL* limn_sdpa_tile_SUFFIX(const limn_sdpa_tiles_SUFFIX* tiles, int64_t b, int64_t i) {
    return tiles->base + b * tiles->batch + i * tiles->tile;
}

/* the largest of top and s[0 .. width) (exact in any order), and the sum of s[0 .. width): each over 8 lanes
   (j % 8, the tail in lane 0), so 8 chains run side by side, folded in lane order at the end */
static REAL limn_sdpa_max_SUFFIX(const REAL* restrict s, int64_t width, REAL top) {
    REAL lane[8];
    for (int l = 0; l < 8; l++) lane[l] = top;
    int64_t j = 0;
    for (; j + 8 <= width; j += 8)
        for (int l = 0; l < 8; l++) lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
    for (; j < width; j++) lane[0] = s[j] > lane[0] ? s[j] : lane[0];
    for (int l = 0; l < 8; l++) top = lane[l] > top ? lane[l] : top;
    return top;
}

static REAL limn_sdpa_sum_SUFFIX(const REAL* restrict s, int64_t width) {
    REAL lane[8] = {0};
    int64_t j = 0;
    for (; j + 8 <= width; j += 8)
        for (int l = 0; l < 8; l++) lane[l] = lane[l] + s[j + l];
    for (; j < width; j++) lane[0] = lane[0] + s[j];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* row i's dots against keys j0 .. j0+width, in place: scaled, -inf where key j0 + j is hidden from row i */
static void limn_sdpa_scores_SUFFIX(REAL* restrict s, int64_t width, REAL scale, int causal, const uint8_t* mask,
                                    int64_t i, int64_t j0) {
    LIMN_IVDEP
    for (int64_t j = 0; j < width; j++) {
        const int visible = (!causal || j0 + j <= i) && (mask == 0 || mask[j0 + j] != 0);
        s[j] = PICK(visible, s[j] * scale, -INFINITY);
    }
}

/* one row's step of the online softmax: its scores s (in place) become exp(s - the new max), and the row's max m,
   denominator l and weighted sum a (d_v, its old terms moved onto the new max) are brought up to date for the
   tile's keys before a += s . v adds them */
static void limn_sdpa_online_row_SUFFIX(REAL* restrict s, REAL* restrict a, REAL* m, REAL* l, int64_t d_v,
                                        int64_t width) {
    const REAL top = limn_sdpa_max_SUFFIX(s, width, *m);
    const REAL shift = top == -INFINITY ? 0 : top; /* a row that has seen no key shifts by 0 */
    LIMN_IVDEP
    for (int64_t j = 0; j < width; j++) s[j] = EXP(s[j] - shift); /* 0 where hidden */
    const REAL rescale = EXP(*m - shift);
    *l = *l * rescale + limn_sdpa_sum_SUFFIX(s, width);
    LIMN_IVDEP
    for (int64_t c = 0; c < d_v; c++) a[c] = a[c] * rescale;
    *m = top;
}

/* P and dS for one row's tile, in place: s (its scores) becomes p = exp(s - lse), 0 where hidden, and dp (dO . v)
   becomes ds = p (dp - delta) */
static void limn_sdpa_grad_row_SUFFIX(REAL* restrict s, REAL* restrict dp, int64_t width, REAL lse, REAL delta) {
    LIMN_IVDEP
    for (int64_t j = 0; j < width; j++) {
        const REAL p = PICK(s[j] == -INFINITY, 0, EXP(s[j] - lse));
        s[j] = p;
        dp[j] = p * (dp[j] - delta);
    }
}

/* the same for one key's row of the transposed tiles (st, dpt: a column per query row i0 + r): lse and delta per
   query, -inf in lse marking a query past the end or one that sees no key */
static void limn_sdpa_grad_key_SUFFIX(REAL* restrict st, REAL* restrict dpt, const REAL* restrict lse,
                                      const REAL* restrict delta, REAL scale, int causal, int key_visible,
                                      int64_t key, int64_t i0) {
    LIMN_IVDEP
    for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) {
        const int visible = key_visible && (!causal || key <= i0 + r) && lse[r] != -INFINITY;
        const REAL p = PICK(visible, EXP(st[r] * scale - lse[r]), 0);
        st[r] = p;
        dpt[r] = p * (dpt[r] - delta[r]);
    }
}

/* D[i] = dO[i] . O[i] for every row, the term both backward kernels subtract */
static void limn_sdpa_delta_SUFFIX(const REAL* d_o, const REAL* out, REAL* delta, int64_t rows, int64_t d_v,
                                   int threads) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t i = 0; i < rows; i++) {
        REAL total = 0;
        for (int64_t c = 0; c < d_v; c++) total = MADD(d_o[i * d_v + c], out[i * d_v + c], total);
        delta[i] = total;
    }
}

/* Work item w is (batch row, tile of ROWS queries) = (w / tiles, w % tiles); it streams the key tiles past its
   rows: S = q k^T, the online softmax row by row, then O += P v. */
void limn_sdpa_forward_SUFFIX(const REAL* q, const REAL* k, const REAL* v, const uint8_t* key_mask, REAL* out,
                              REAL* lse, int64_t n, int64_t t_q, int64_t t_k, int64_t d, int64_t d_v, int causal,
                              double scale_, int threads) {
    const REAL scale = (REAL)scale_;
    const int64_t tiles = (t_q + LIMN_SDPA_ROWS - 1) / LIMN_SDPA_ROWS;
    const int64_t dp = limn_sdpa_round_up(d, 2 * LANES), dvp = limn_sdpa_round_up(d_v, 2 * LANES);
    limn_sdpa_tiles_SUFFIX kt = limn_sdpa_tiles_make_SUFFIX(k, n, t_k, d, LIMN_SDPA_KEYS, 1, threads);
    limn_sdpa_tiles_SUFFIX vr = limn_sdpa_tiles_make_SUFFIX(v, n, t_k, d_v, LIMN_SDPA_KEYS, 0, threads);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t w = 0; w < n * tiles; w++) {
        const int64_t b = w / tiles, r0 = (w % tiles) * LIMN_SDPA_ROWS;
        const int64_t rows = r0 + LIMN_SDPA_ROWS < t_q ? LIMN_SDPA_ROWS : t_q - r0;
        const int64_t mr = limn_sdpa_round_up(rows, LIMN_SDPA_MR);
        const uint8_t* mb = key_mask ? key_mask + b * t_k : 0;
        REAL* qp = limn_sdpa_alloc_SUFFIX(LIMN_SDPA_ROWS * (dp + dvp + LIMN_SDPA_KEYS));
        REAL* s = qp + LIMN_SDPA_ROWS * dp;       /* (ROWS, KEYS): scores, then exp(s - m) */
        REAL* acc = s + LIMN_SDPA_ROWS * LIMN_SDPA_KEYS; /* (ROWS, dvp): sum of exp(s - m) v over the keys seen */
        REAL m[LIMN_SDPA_ROWS], l[LIMN_SDPA_ROWS];
        limn_sdpa_pack_SUFFIX(q + (b * t_q + r0) * d, d, rows, d, qp, LIMN_SDPA_ROWS, dp);
        for (int64_t c = 0; c < LIMN_SDPA_ROWS * dvp; c++) acc[c] = 0;
        for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) m[r] = -INFINITY, l[r] = 0;
        const int64_t key_end = limn_sdpa_key_end(causal, r0 + rows, t_k);
        for (int64_t j0 = 0; j0 < key_end; j0 += LIMN_SDPA_KEYS) {
            const int64_t width = key_end - j0 < LIMN_SDPA_KEYS ? key_end - j0 : LIMN_SDPA_KEYS;
            const REAL* kj = limn_sdpa_tile_SUFFIX(&kt, b, j0 / LIMN_SDPA_KEYS);
            const REAL* vj = limn_sdpa_tile_SUFFIX(&vr, b, j0 / LIMN_SDPA_KEYS);
            limn_sdpa_gemm_SUFFIX(qp, dp, kj, kt.ld, s, LIMN_SDPA_KEYS, mr, LIMN_SDPA_KEYS, d, 0);
            for (int64_t r = 0; r < rows; r++) {
                REAL* sr = s + r * LIMN_SDPA_KEYS;
                limn_sdpa_scores_SUFFIX(sr, width, scale, causal, mb, r0 + r, j0);
                limn_sdpa_online_row_SUFFIX(sr, acc + r * dvp, &m[r], &l[r], dvp, width);
            }
            limn_sdpa_gemm_SUFFIX(s, LIMN_SDPA_KEYS, vj, vr.ld, acc, dvp, mr, dvp, width, 1);
        }
        for (int64_t r = 0; r < rows; r++) {
            const int seen = l[r] > 0;
            const REAL denom = seen ? l[r] : 1;
            LIMN_IVDEP
            for (int64_t c = 0; c < d_v; c++)
                out[(b * t_q + r0 + r) * d_v + c] = PICK(seen, acc[r * dvp + c] / denom, 0);
            lse[b * t_q + r0 + r] = seen ? m[r] + LOG(denom) : -INFINITY;
        }
        free(qp);
    }
    free(kt.owned);
    free(vr.owned);
}

/* Work items as the forward's: S = q k^T and dP = dO v^T per key tile, P and dS row by row, then dQ += dS k. */
void limn_sdpa_backward_q_SUFFIX(const REAL* q, const REAL* k, const REAL* v, const uint8_t* key_mask,
                                 const REAL* out, const REAL* lse, const REAL* d_out, REAL* d_q, int64_t n,
                                 int64_t t_q, int64_t t_k, int64_t d, int64_t d_v, int causal, double scale_,
                                 int threads) {
    const REAL scale = (REAL)scale_;
    const int64_t tiles = (t_q + LIMN_SDPA_ROWS - 1) / LIMN_SDPA_ROWS;
    const int64_t dp = limn_sdpa_round_up(d, 2 * LANES), dvp = limn_sdpa_round_up(d_v, 2 * LANES);
    REAL* delta = malloc(sizeof(REAL) * (size_t)(n * t_q + 1));
    limn_sdpa_delta_SUFFIX(d_out, out, delta, n * t_q, d_v, threads);
    limn_sdpa_tiles_SUFFIX kt = limn_sdpa_tiles_make_SUFFIX(k, n, t_k, d, LIMN_SDPA_KEYS, 1, threads);
    limn_sdpa_tiles_SUFFIX vt = limn_sdpa_tiles_make_SUFFIX(v, n, t_k, d_v, LIMN_SDPA_KEYS, 1, threads);
    limn_sdpa_tiles_SUFFIX kr = limn_sdpa_tiles_make_SUFFIX(k, n, t_k, d, LIMN_SDPA_KEYS, 0, threads);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t w = 0; w < n * tiles; w++) {
        const int64_t b = w / tiles, r0 = (w % tiles) * LIMN_SDPA_ROWS;
        const int64_t rows = r0 + LIMN_SDPA_ROWS < t_q ? LIMN_SDPA_ROWS : t_q - r0;
        const int64_t mr = limn_sdpa_round_up(rows, LIMN_SDPA_MR), first = b * t_q + r0;
        const uint8_t* mb = key_mask ? key_mask + b * t_k : 0;
        REAL* qp = limn_sdpa_alloc_SUFFIX(LIMN_SDPA_ROWS * (2 * dp + dvp + 2 * LIMN_SDPA_KEYS));
        REAL* gp = qp + LIMN_SDPA_ROWS * dp;      /* (ROWS, dvp): the rows of dO */
        REAL* s = gp + LIMN_SDPA_ROWS * dvp;      /* (ROWS, KEYS): scores, then P */
        REAL* ds = s + LIMN_SDPA_ROWS * LIMN_SDPA_KEYS; /* (ROWS, KEYS): dP, then dS */
        REAL* acc = ds + LIMN_SDPA_ROWS * LIMN_SDPA_KEYS; /* (ROWS, dp): sum of dS k over the keys seen */
        limn_sdpa_pack_SUFFIX(q + first * d, d, rows, d, qp, LIMN_SDPA_ROWS, dp);
        limn_sdpa_pack_SUFFIX(d_out + first * d_v, d_v, rows, d_v, gp, LIMN_SDPA_ROWS, dvp);
        for (int64_t c = 0; c < LIMN_SDPA_ROWS * dp; c++) acc[c] = 0;
        const int64_t key_end = limn_sdpa_key_end(causal, r0 + rows, t_k);
        for (int64_t j0 = 0; j0 < key_end; j0 += LIMN_SDPA_KEYS) {
            const int64_t width = key_end - j0 < LIMN_SDPA_KEYS ? key_end - j0 : LIMN_SDPA_KEYS;
            const int64_t tile = j0 / LIMN_SDPA_KEYS;
            limn_sdpa_gemm_SUFFIX(qp, dp, limn_sdpa_tile_SUFFIX(&kt, b, tile), kt.ld, s, LIMN_SDPA_KEYS, mr,
                                  LIMN_SDPA_KEYS, d, 0);
            limn_sdpa_gemm_SUFFIX(gp, dvp, limn_sdpa_tile_SUFFIX(&vt, b, tile), vt.ld, ds, LIMN_SDPA_KEYS, mr,
                                  LIMN_SDPA_KEYS, d_v, 0);
            for (int64_t r = 0; r < rows; r++) { /* the padding rows past them hold zeros: q and dO are 0 there */
                REAL *sr = s + r * LIMN_SDPA_KEYS, *dsr = ds + r * LIMN_SDPA_KEYS;
                const REAL row_lse = lse[first + r];
                if (row_lse == -INFINITY) { /* a row that sees no key: P = 0 */
                    for (int64_t j = 0; j < LIMN_SDPA_KEYS; j++) dsr[j] = 0;
                    continue;
                }
                limn_sdpa_scores_SUFFIX(sr, width, scale, causal, mb, r0 + r, j0);
                limn_sdpa_grad_row_SUFFIX(sr, dsr, width, row_lse, delta[first + r]);
            }
            const REAL* kj = limn_sdpa_tile_SUFFIX(&kr, b, tile);
            limn_sdpa_gemm_SUFFIX(ds, LIMN_SDPA_KEYS, kj, kr.ld, acc, dp, mr, dp, width, 1);
        }
        for (int64_t r = 0; r < rows; r++) {
            LIMN_IVDEP
            for (int64_t c = 0; c < d; c++) d_q[(first + r) * d + c] = acc[r * dp + c] * scale;
        }
        free(qp);
    }
    free(kt.owned);
    free(vt.owned);
    free(kr.owned);
    free(delta);
}

/* Work item w is (batch row, tile of KEYS keys); it streams the query tiles past its keys, transposed so a key is
   a row: S^T = k q^T and dP^T = v dO^T, P^T and dS^T key by key, then dV += P^T dO and dK += dS^T q. */
void limn_sdpa_backward_kv_SUFFIX(const REAL* q, const REAL* k, const REAL* v, const uint8_t* key_mask,
                                  const REAL* out, const REAL* lse, const REAL* d_out, REAL* d_k, REAL* d_v_,
                                  int64_t n, int64_t t_q, int64_t t_k, int64_t d, int64_t d_v, int causal,
                                  double scale_, int threads) {
    const REAL scale = (REAL)scale_;
    const int64_t tiles = (t_k + LIMN_SDPA_KEYS - 1) / LIMN_SDPA_KEYS;
    const int64_t dp = limn_sdpa_round_up(d, 2 * LANES), dvp = limn_sdpa_round_up(d_v, 2 * LANES);
    REAL* delta = malloc(sizeof(REAL) * (size_t)(n * t_q + 1));
    limn_sdpa_delta_SUFFIX(d_out, out, delta, n * t_q, d_v, threads);
    limn_sdpa_tiles_SUFFIX qt = limn_sdpa_tiles_make_SUFFIX(q, n, t_q, d, LIMN_SDPA_ROWS, 1, threads);
    limn_sdpa_tiles_SUFFIX gt = limn_sdpa_tiles_make_SUFFIX(d_out, n, t_q, d_v, LIMN_SDPA_ROWS, 1, threads);
    limn_sdpa_tiles_SUFFIX qr = limn_sdpa_tiles_make_SUFFIX(q, n, t_q, d, LIMN_SDPA_ROWS, 0, threads);
    limn_sdpa_tiles_SUFFIX gr = limn_sdpa_tiles_make_SUFFIX(d_out, n, t_q, d_v, LIMN_SDPA_ROWS, 0, threads);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t w = 0; w < n * tiles; w++) {
        const int64_t b = w / tiles, j0 = (w % tiles) * LIMN_SDPA_KEYS;
        const int64_t width = t_k - j0 < LIMN_SDPA_KEYS ? t_k - j0 : LIMN_SDPA_KEYS;
        const uint8_t* mb = key_mask ? key_mask + b * t_k : 0;
        REAL* kp = limn_sdpa_alloc_SUFFIX(LIMN_SDPA_KEYS * (2 * dp + 2 * dvp + 2 * LIMN_SDPA_ROWS));
        REAL* vp = kp + LIMN_SDPA_KEYS * dp;      /* (KEYS, dvp): the value tile */
        REAL* st = vp + LIMN_SDPA_KEYS * dvp;     /* (KEYS, ROWS): scores, then P, a key per row */
        REAL* dst = st + LIMN_SDPA_KEYS * LIMN_SDPA_ROWS; /* (KEYS, ROWS): dP, then dS */
        REAL* dk = dst + LIMN_SDPA_KEYS * LIMN_SDPA_ROWS; /* (KEYS, dp): sum of dS q over the queries seen */
        REAL* dv = dk + LIMN_SDPA_KEYS * dp;      /* (KEYS, dvp): sum of P dO over the queries seen */
        REAL row_lse[LIMN_SDPA_ROWS], row_delta[LIMN_SDPA_ROWS];
        limn_sdpa_pack_SUFFIX(k + (b * t_k + j0) * d, d, width, d, kp, LIMN_SDPA_KEYS, dp);
        limn_sdpa_pack_SUFFIX(v + (b * t_k + j0) * d_v, d_v, width, d_v, vp, LIMN_SDPA_KEYS, dvp);
        for (int64_t c = 0; c < LIMN_SDPA_KEYS * (dp + dvp); c++) dk[c] = 0; /* dk and dv, side by side */
        const int64_t mk = limn_sdpa_round_up(width, LIMN_SDPA_MR);
        /* query tiles that end before j0 see none of these keys (causal) */
        for (int64_t i0 = causal ? j0 / LIMN_SDPA_ROWS * LIMN_SDPA_ROWS : 0; i0 < t_q; i0 += LIMN_SDPA_ROWS) {
            const int64_t rows = i0 + LIMN_SDPA_ROWS < t_q ? LIMN_SDPA_ROWS : t_q - i0, first = b * t_q + i0;
            const int64_t tile = i0 / LIMN_SDPA_ROWS;
            for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) {
                row_lse[r] = r < rows ? lse[first + r] : -INFINITY;
                row_delta[r] = r < rows ? delta[first + r] : 0;
            }
            limn_sdpa_gemm_SUFFIX(kp, dp, limn_sdpa_tile_SUFFIX(&qt, b, tile), qt.ld, st, LIMN_SDPA_ROWS, mk,
                                  LIMN_SDPA_ROWS, d, 0);
            limn_sdpa_gemm_SUFFIX(vp, dvp, limn_sdpa_tile_SUFFIX(&gt, b, tile), gt.ld, dst, LIMN_SDPA_ROWS, mk,
                                  LIMN_SDPA_ROWS, d_v, 0);
            for (int64_t j = 0; j < mk; j++) {
                const int key_visible = j < width && (mb == 0 || mb[j0 + j] != 0);
                limn_sdpa_grad_key_SUFFIX(st + j * LIMN_SDPA_ROWS, dst + j * LIMN_SDPA_ROWS, row_lse, row_delta,
                                          scale, causal, key_visible, j0 + j, i0);
            }
            const REAL *gi = limn_sdpa_tile_SUFFIX(&gr, b, tile), *qi = limn_sdpa_tile_SUFFIX(&qr, b, tile);
            limn_sdpa_gemm_SUFFIX(st, LIMN_SDPA_ROWS, gi, gr.ld, dv, dvp, mk, dvp, rows, 1);
            limn_sdpa_gemm_SUFFIX(dst, LIMN_SDPA_ROWS, qi, qr.ld, dk, dp, mk, dp, rows, 1);
        }
        for (int64_t j = 0; j < width; j++) {
            LIMN_IVDEP
            for (int64_t c = 0; c < d; c++) d_k[(b * t_k + j0 + j) * d + c] = dk[j * dp + c] * scale;
            LIMN_IVDEP
            for (int64_t c = 0; c < d_v; c++) d_v_[(b * t_k + j0 + j) * d_v + c] = dv[j * dvp + c];
        }
        free(kp);
    }
    free(qt.owned);
    free(gt.owned);
    free(qr.owned);
    free(gr.owned);
    free(delta);
}
"""

WIDTHS = {  # the C spellings of each width the kernels are built for
    "f32": {
        **{"REAL": "float", "VEC": "limn_vec_float", "LANES": "LIMN_VEC_FLOAT"},
        **{"EXP": "limn_expf", "LOG": "limn_logf", "PICK": "limn_pickf", "MADD": "limn_madd"},
    },
    "f64": {
        **{"REAL": "double", "VEC": "limn_vec_double", "LANES": "LIMN_VEC_DOUBLE"},
        **{"EXP": "exp", "LOG": "log", "PICK": "limn_pickd", "MADD": "fma"},
    },
}
SUFFIX = {dtypes.float32: "f32", dtypes.float64: "f64"}


def source() -> str:
    """The C of all three kernels at both widths, to follow the prelude (limn_expf, limn_pickf, LIMN_IVDEP); the
    vector words (limn_vec_float, LIMN_VEC_FMA) are the matmul tiles' (c_matmul.VECTOR_PRELUDE)."""
    sizes = f"#define LIMN_SDPA_ROWS {ROWS}\n#define LIMN_SDPA_KEYS {KEYS}\n"
    parts = [VECTOR_PRELUDE, sizes, COMMON]
    for suffix, spelling in WIDTHS.items():
        text = TEMPLATE.replace("SUFFIX", suffix)
        for word, c in spelling.items():
            text = re.sub(rf"\b{word}\b", c, text)  # whole words: VEC is not the VEC of LIMN_VEC_FMA
        parts.append(text)
    return "".join(parts)


def functions(lib: ctypes.CDLL) -> dict[tuple[str, str], Callable[..., None]]:
    """The kernels of a library built from source(), by (CUSTOM name, width), their argument types set."""
    sizes = [ctypes.c_int64] * 5 + [ctypes.c_int, ctypes.c_double, ctypes.c_int]  # n, t_q, t_k, d, d_v, ...
    arrays = {"sdpa": 6, "sdpa_bwd_q": 8, "sdpa_bwd_kv": 9}  # pointers: inputs (with the mask) and outputs
    c_names = {"sdpa": "forward", "sdpa_bwd_q": "backward_q", "sdpa_bwd_kv": "backward_kv"}
    out = {}
    for name, pointers in arrays.items():
        for suffix in WIDTHS:
            f = getattr(lib, f"limn_sdpa_{c_names[name]}_{suffix}")
            f.argtypes, f.restype = [ctypes.c_void_p] * pointers + sizes, None
            out[(name, suffix)] = f
    return out


def run(kernels: dict[tuple[str, str], Callable[..., None]], kernel: KernelIR, handles: list[Any], threads: int):
    """Runs one CUSTOM attention kernel on its buffers (inputs, then outputs, as the KernelIR lists them).
    float16 and bfloat16 are widened to float32 copies here, computed there and rounded once when stored."""
    params = dict(kernel.params)
    dtype = kernel.inputs[0].dtype
    if dtype not in SUFFIX and dtype not in (dtypes.float16, dtypes.bfloat16):
        raise DeviceError(f"CUSTOM {kernel.custom!r}: the c device's kernels take float32 or float64, not {dtype.name}")
    wide = dtype if dtype in SUFFIX else dtypes.float32
    arrays = [np.ascontiguousarray(h) for h in handles]
    n_in = len(kernel.inputs)
    ins = [a if a.dtype == np.bool_ else a.astype(wide.np, copy=False) for a in arrays[:n_in]]
    outs = [a if a.dtype == wide.np else np.empty(a.shape, wide.np) for a in arrays[n_in:]]
    q, k, v = ins[:3]
    n, t_q, d = q.shape
    t_k, d_v = k.shape[1], v.shape[2]
    mask = ins[3].ctypes.data if params["masked"] else None
    rest = ins[4:] if params["masked"] else ins[3:]
    pointers = [q.ctypes.data, k.ctypes.data, v.ctypes.data, mask] + [a.ctypes.data for a in rest + outs]
    sizes = (n, t_q, t_k, d, d_v, int(params["causal"]), float(params["scale"]), threads)
    kernels[(kernel.custom, SUFFIX[wide])](*pointers, *sizes)
    for handle, result in zip(handles[n_in:], outs):
        if result is not handle:
            handle[...] = result.astype(handle.dtype)  # one rounding, from float32 (L is float32 already)
