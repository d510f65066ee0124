"""The c device's fused attention kernels: sdpa, sdpa_bwd_q and sdpa_bwd_kv (limn.sdpa holds the layout and the
numpy references they are diffed against), as fixed C compiled once per device through its kernel cache.

Each kernel is a list of work items, one per (n, tile of rows), run by an OpenMP team: every output total is owned
by one item and folded in an order fixed by the tiles, never by the team, so threaded equals serial bit for bit
(tests/c/test_sdpa_c.py). Inner loops run over the keys of a tile (scores, exp) or over d (the weighted sums).
Pipeline: graph (CUSTOM nodes) -> schedule -> IR (a CUSTOM kernel) -> **these C functions** (CDevice.run_custom).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from limn import dtypes
from limn.device import DeviceError
from limn.ir import KernelIR

NAMES = frozenset({"sdpa", "sdpa_bwd_q", "sdpa_bwd_kv"})

ROWS = 32  # query rows per work item in the forward and dQ kernels
BLOCK = 8  # terms of a d-long dot product added together before their total joins the dot
KEYS = 64  # keys per tile (the forward and dQ stream them; one dK, dV work item owns them), as limn.sdpa.TILE

COMMON = r"""
#include <stdlib.h>

/* a * b + c in double: one rounding where the target has FMA, as the prelude's limn_madd for float */
static inline double limn_sdpa_madd(double a, double b, double c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
    return fma(a, b, c);
#else
    return a * b + c;
#endif
}

/* the keys row tile [r0, r1) can see end here: past r1 - 1 every key is hidden from all its rows (causal) */
static int64_t limn_sdpa_key_end(int causal, int64_t r1, int64_t t_k) { return causal && r1 < t_k ? r1 : t_k; }
"""

# Written once over REAL, EXP, LOG, PICK, MADD and SUFFIX, instantiated for float (the prelude's vectorizing exp and
# log) and double (C's). Work item w of the forward and dQ is (n, row tile) = (w / tiles, w % tiles). Scores:
# s[j] = (sum over c of q[i][c] * kt[c][j]) * scale, the key tile transposed so j is the stride-1 axis.
TEMPLATE = r"""
/* k[j0 .. j0+width) of one batch row (t, d) transposed into kt (d, KEYS), so a score loop runs over keys */
static void limn_sdpa_transpose_SUFFIX(const REAL* restrict src, REAL* restrict kt, int64_t d, int64_t width) {
    for (int64_t c = 0; c < d; c++)
        for (int64_t j = 0; j < LIMN_SDPA_KEYS; j++) kt[c * LIMN_SDPA_KEYS + j] = j < width ? src[j * d + c] : 0;
}

/* dots[j] = x . column j of a transposed tile (d, KEYS), j < width: the terms of each dot are added in blocks of
   LIMN_SDPA_BLOCK, each block's total then into the dot, which keeps a long d's rounding error near that of a
   pairwise sum (the references' matmuls); the order is fixed, so the bits are too */
static inline __attribute__((always_inline)) void limn_sdpa_dots_n_SUFFIX(const REAL* restrict x,
                                                                         const REAL* restrict tile,
                                                                         REAL* restrict dots, int64_t d) {
    REAL block[LIMN_SDPA_KEYS];
    for (int64_t j = 0; j < LIMN_SDPA_KEYS; j++) dots[j] = 0;
    for (int64_t c0 = 0; c0 < d; c0 += LIMN_SDPA_BLOCK) {
        const int64_t c1 = c0 + LIMN_SDPA_BLOCK < d ? c0 + LIMN_SDPA_BLOCK : d;
        for (int64_t j = 0; j < LIMN_SDPA_KEYS; j++) block[j] = 0;
        int64_t c = c0;
        for (; c + 4 <= c1; c += 4) { /* four terms per pass over the block, added in order */
            const REAL x0 = x[c], x1 = x[c + 1], x2 = x[c + 2], x3 = x[c + 3];
            const REAL* t0 = tile + c * LIMN_SDPA_KEYS;
            LIMN_IVDEP
            for (int64_t j = 0; j < LIMN_SDPA_KEYS; j++) {
                const REAL b = MADD(x1, t0[LIMN_SDPA_KEYS + j], MADD(x0, t0[j], block[j]));
                block[j] = MADD(x3, t0[3 * LIMN_SDPA_KEYS + j], MADD(x2, t0[2 * LIMN_SDPA_KEYS + j], b));
            }
        }
        for (; c < c1; c++) {
            const REAL xc = x[c];
            LIMN_IVDEP
            for (int64_t j = 0; j < LIMN_SDPA_KEYS; j++) block[j] = MADD(xc, tile[c * LIMN_SDPA_KEYS + j], block[j]);
        }
        LIMN_IVDEP
        for (int64_t j = 0; j < LIMN_SDPA_KEYS; j++) dots[j] = dots[j] + block[j];
    }
}

/* a[c] += sum over j < width of w[j] * rows[j][c] (rows of length n, `stride` apart), folding j in order:
   four rows per pass over a, the same roundings as one row per pass with a quarter of the loads of a */
static inline __attribute__((always_inline)) void limn_sdpa_rows_n_SUFFIX(REAL* restrict a, const REAL* restrict w,
                                                                         const REAL* restrict rows, int64_t n,
                                                                         int64_t width) {
    int64_t j = 0;
    for (; j + 4 <= width; j += 4) {
        const REAL w0 = w[j], w1 = w[j + 1], w2 = w[j + 2], w3 = w[j + 3];
        const REAL *r0 = rows + j * n, *r1 = r0 + n, *r2 = r1 + n, *r3 = r2 + n;
        LIMN_IVDEP
        for (int64_t c = 0; c < n; c++) a[c] = MADD(w3, r3[c], MADD(w2, r2[c], MADD(w1, r1[c], MADD(w0, r0[c], a[c]))));
    }
    for (; j < width; j++) {
        const REAL wj = w[j];
        const REAL* rj = rows + j * n;
        LIMN_IVDEP
        for (int64_t c = 0; c < n; c++) a[c] = MADD(wj, rj[c], a[c]);
    }
}

/* limn_sdpa_rows_n with the common head widths made constants, so each copy's loop over c is unrolled whole */
static void limn_sdpa_rows_SUFFIX(REAL* restrict a, const REAL* restrict w, const REAL* restrict rows, int64_t n,
                                  int64_t width) {
    switch (n) {
    case 32: limn_sdpa_rows_n_SUFFIX(a, w, rows, 32, width); break;
    case 64: limn_sdpa_rows_n_SUFFIX(a, w, rows, 64, width); break;
    case 128: limn_sdpa_rows_n_SUFFIX(a, w, rows, 128, width); break;
    default: limn_sdpa_rows_n_SUFFIX(a, w, rows, n, width);
    }
}

/* limn_sdpa_dots_n, and limn_sdpa_outer_n below, with the common head widths made constants (as rows) */
static void limn_sdpa_dots_SUFFIX(const REAL* restrict x, const REAL* restrict tile, REAL* restrict dots, int64_t d) {
    switch (d) {
    case 32: limn_sdpa_dots_n_SUFFIX(x, tile, dots, 32); break;
    case 64: limn_sdpa_dots_n_SUFFIX(x, tile, dots, 64); break;
    case 128: limn_sdpa_dots_n_SUFFIX(x, tile, dots, 128); break;
    default: limn_sdpa_dots_n_SUFFIX(x, tile, dots, d);
    }
}

/* m[j][c] += w[j] * x[c] for j < width, c < n: one query row's share of dK or dV for a tile of keys */
static inline __attribute__((always_inline)) void limn_sdpa_outer_n_SUFFIX(REAL* restrict m, const REAL* restrict w,
                                                                          const REAL* restrict x, int64_t n,
                                                                          int64_t width) {
    for (int64_t j = 0; j < width; j++) {
        const REAL wj = w[j];
        REAL* mj = m + j * n;
        LIMN_IVDEP
        for (int64_t c = 0; c < n; c++) mj[c] = MADD(wj, x[c], mj[c]);
    }
}

static void limn_sdpa_outer_SUFFIX(REAL* restrict m, const REAL* restrict w, const REAL* restrict x, int64_t n,
                                   int64_t width) {
    switch (n) {
    case 32: limn_sdpa_outer_n_SUFFIX(m, w, x, 32, width); break;
    case 64: limn_sdpa_outer_n_SUFFIX(m, w, x, 64, width); break;
    case 128: limn_sdpa_outer_n_SUFFIX(m, w, x, 128, width); break;
    default: limn_sdpa_outer_n_SUFFIX(m, w, x, n, width);
    }
}

/* the same for two query rows, w0 x0 then w1 x1 added into each cell: the roundings of two calls of outer, with
   half the loads and stores of m */
static inline __attribute__((always_inline)) void limn_sdpa_outer2_n_SUFFIX(REAL* restrict m,
                                                                           const REAL* restrict w0,
                                                                           const REAL* restrict x0,
                                                                           const REAL* restrict w1,
                                                                           const REAL* restrict x1, int64_t n,
                                                                           int64_t width) {
    for (int64_t j = 0; j < width; j++) {
        const REAL a = w0[j], b = w1[j];
        REAL* mj = m + j * n;
        LIMN_IVDEP
        for (int64_t c = 0; c < n; c++) mj[c] = MADD(b, x1[c], MADD(a, x0[c], mj[c]));
    }
}

static void limn_sdpa_outer2_SUFFIX(REAL* restrict m, const REAL* restrict w0, const REAL* restrict x0,
                                    const REAL* restrict w1, const REAL* restrict x1, int64_t n, int64_t width) {
    switch (n) {
    case 32: limn_sdpa_outer2_n_SUFFIX(m, w0, x0, w1, x1, 32, width); break;
    case 64: limn_sdpa_outer2_n_SUFFIX(m, w0, x0, w1, x1, 64, width); break;
    case 128: limn_sdpa_outer2_n_SUFFIX(m, w0, x0, w1, x1, 128, width); break;
    default: limn_sdpa_outer2_n_SUFFIX(m, w0, x0, w1, x1, n, width);
    }
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

/* scores of query row x (d) against one transposed key tile, scaled, -inf where key j0+j is hidden from row i */
static void limn_sdpa_scores_SUFFIX(const REAL* restrict x, const REAL* restrict kt, REAL* restrict s, int64_t d,
                                    int64_t width, REAL scale, int causal, const uint8_t* mask, int64_t i,
                                    int64_t j0) {
    limn_sdpa_dots_SUFFIX(x, kt, s, d);
    LIMN_IVDEP
    for (int64_t j = 0; j < width; j++) {
        const int visible = (!causal || j0 + j <= i) && (mask == 0 || mask[j0 + j] != 0);
        s[j] = PICK(visible, s[j] * scale, -INFINITY);
    }
    for (int64_t j = width; j < LIMN_SDPA_KEYS; j++) s[j] = -INFINITY; /* past the last key: the padding */
}

/* p[j] = exp(s[j] - lse), 0 where hidden; then ds[j] = p[j] (dp[j] - delta), dp[j] = dO_i . v[j0 + j] */
static void limn_sdpa_grad_tile_SUFFIX(const REAL* restrict s, const REAL* restrict d_o, const REAL* restrict vt,
                                       REAL* restrict p, REAL* restrict ds, int64_t d_v, int64_t width, REAL lse,
                                       REAL delta) {
    LIMN_IVDEP
    for (int64_t j = 0; j < width; j++) p[j] = PICK(s[j] == -INFINITY, 0, EXP(s[j] - lse));
    limn_sdpa_dots_SUFFIX(d_o, vt, ds, d_v);
    LIMN_IVDEP
    for (int64_t j = 0; j < width; j++) ds[j] = p[j] * (ds[j] - delta);
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

void limn_sdpa_forward_SUFFIX(const REAL* q, const REAL* k, const REAL* v, const uint8_t* key_mask, REAL* out,
                              REAL* lse, int64_t n, int64_t t_q, int64_t t_k, int64_t d, int64_t d_v, int causal,
                              double scale_, int threads) {
    const REAL scale = (REAL)scale_;
    const int64_t tiles = (t_q + LIMN_SDPA_ROWS - 1) / LIMN_SDPA_ROWS;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t w = 0; w < n * tiles; w++) {
        const int64_t b = w / tiles, r0 = (w % tiles) * LIMN_SDPA_ROWS;
        const int64_t r1 = r0 + LIMN_SDPA_ROWS < t_q ? r0 + LIMN_SDPA_ROWS : t_q;
        const REAL *qb = q + b * t_q * d, *kb = k + b * t_k * d, *vb = v + b * t_k * d_v;
        const uint8_t* mb = key_mask ? key_mask + b * t_k : 0;
        REAL* kt = malloc(sizeof(REAL) * (size_t)(d * LIMN_SDPA_KEYS + (r1 - r0) * d_v + 1));
        REAL* acc = kt + d * LIMN_SDPA_KEYS; /* (rows, d_v): sum of exp(s - m) v over the keys seen */
        REAL m[LIMN_SDPA_ROWS], l[LIMN_SDPA_ROWS], s[LIMN_SDPA_KEYS];
        for (int64_t r = 0; r < r1 - r0; r++) {
            m[r] = -INFINITY; /* the largest score seen in row r0 + r */
            l[r] = 0;         /* sum of exp(s - m) over the keys seen */
            for (int64_t c = 0; c < d_v; c++) acc[r * d_v + c] = 0;
        }
        const int64_t key_end = limn_sdpa_key_end(causal, r1, t_k);
        for (int64_t j0 = 0; j0 < key_end; j0 += LIMN_SDPA_KEYS) {
            const int64_t width = key_end - j0 < LIMN_SDPA_KEYS ? key_end - j0 : LIMN_SDPA_KEYS;
            limn_sdpa_transpose_SUFFIX(kb + j0 * d, kt, d, width);
            for (int64_t i = r0; i < r1; i++) {
                if (causal && j0 > i) continue; /* every key of the tile is hidden from row i */
                limn_sdpa_scores_SUFFIX(qb + i * d, kt, s, d, width, scale, causal, mb, i, j0);
                const REAL top = limn_sdpa_max_SUFFIX(s, width, m[i - r0]);
                const REAL shift = top == -INFINITY ? 0 : top; /* a row that has seen no key shifts by 0 */
                LIMN_IVDEP
                for (int64_t j = 0; j < width; j++) s[j] = EXP(s[j] - shift); /* 0 where hidden */
                const REAL rescale = EXP(m[i - r0] - shift); /* the old terms, moved onto the new max */
                l[i - r0] = l[i - r0] * rescale + limn_sdpa_sum_SUFFIX(s, width);
                REAL* a = acc + (i - r0) * d_v;
                LIMN_IVDEP
                for (int64_t c = 0; c < d_v; c++) a[c] = a[c] * rescale;
                limn_sdpa_rows_SUFFIX(a, s, vb + j0 * d_v, d_v, width);
                m[i - r0] = top;
            }
        }
        for (int64_t i = r0; i < r1; i++) {
            const int seen = l[i - r0] > 0;
            const REAL denom = seen ? l[i - r0] : 1;
            LIMN_IVDEP
            for (int64_t c = 0; c < d_v; c++)
                out[(b * t_q + i) * d_v + c] = PICK(seen, acc[(i - r0) * d_v + c] / denom, 0);
            lse[b * t_q + i] = seen ? m[i - r0] + LOG(denom) : -INFINITY;
        }
        free(kt);
    }
}

void limn_sdpa_backward_q_SUFFIX(const REAL* q, const REAL* k, const REAL* v, const uint8_t* key_mask,
                                 const REAL* out, const REAL* lse, const REAL* d_out, REAL* d_q, int64_t n,
                                 int64_t t_q, int64_t t_k, int64_t d, int64_t d_v, int causal, double scale_,
                                 int threads) {
    const REAL scale = (REAL)scale_;
    const int64_t tiles = (t_q + LIMN_SDPA_ROWS - 1) / LIMN_SDPA_ROWS;
    REAL* delta = malloc(sizeof(REAL) * (size_t)(n * t_q + 1));
    limn_sdpa_delta_SUFFIX(d_out, out, delta, n * t_q, d_v, threads);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t w = 0; w < n * tiles; w++) {
        const int64_t b = w / tiles, r0 = (w % tiles) * LIMN_SDPA_ROWS;
        const int64_t r1 = r0 + LIMN_SDPA_ROWS < t_q ? r0 + LIMN_SDPA_ROWS : t_q;
        const REAL *qb = q + b * t_q * d, *kb = k + b * t_k * d, *vb = v + b * t_k * d_v;
        const uint8_t* mb = key_mask ? key_mask + b * t_k : 0;
        REAL* kt = malloc(sizeof(REAL) * (size_t)((d + d_v) * LIMN_SDPA_KEYS + (r1 - r0) * d + 1));
        REAL* vt = kt + d * LIMN_SDPA_KEYS;
        REAL* acc = vt + d_v * LIMN_SDPA_KEYS; /* (rows, d): sum of dS k over the keys seen */
        REAL s[LIMN_SDPA_KEYS], p[LIMN_SDPA_KEYS], ds[LIMN_SDPA_KEYS];
        for (int64_t c = 0; c < (r1 - r0) * d; c++) acc[c] = 0;
        const int64_t key_end = limn_sdpa_key_end(causal, r1, t_k);
        for (int64_t j0 = 0; j0 < key_end; j0 += LIMN_SDPA_KEYS) {
            const int64_t width = key_end - j0 < LIMN_SDPA_KEYS ? key_end - j0 : LIMN_SDPA_KEYS;
            limn_sdpa_transpose_SUFFIX(kb + j0 * d, kt, d, width);
            limn_sdpa_transpose_SUFFIX(vb + j0 * d_v, vt, d_v, width);
            for (int64_t i = r0; i < r1; i++) {
                const REAL row_lse = lse[b * t_q + i];
                if ((causal && j0 > i) || row_lse == -INFINITY) continue; /* no visible key here: P = 0 */
                limn_sdpa_scores_SUFFIX(qb + i * d, kt, s, d, width, scale, causal, mb, i, j0);
                limn_sdpa_grad_tile_SUFFIX(s, d_out + (b * t_q + i) * d_v, vt, p, ds, d_v, width, row_lse,
                                           delta[b * t_q + i]);
                limn_sdpa_rows_SUFFIX(acc + (i - r0) * d, ds, kb + j0 * d, d, width);
            }
        }
        for (int64_t i = r0; i < r1; i++) {
            LIMN_IVDEP
            for (int64_t c = 0; c < d; c++) d_q[(b * t_q + i) * d + c] = acc[(i - r0) * d + c] * scale;
        }
        free(kt);
    }
    free(delta);
}

void limn_sdpa_backward_kv_SUFFIX(const REAL* q, const REAL* k, const REAL* v, const uint8_t* key_mask,
                                  const REAL* out, const REAL* lse, const REAL* d_out, REAL* d_k, REAL* d_v_,
                                  int64_t n, int64_t t_q, int64_t t_k, int64_t d, int64_t d_v, int causal,
                                  double scale_, int threads) {
    const REAL scale = (REAL)scale_;
    const int64_t tiles = (t_k + LIMN_SDPA_KEYS - 1) / LIMN_SDPA_KEYS;
    REAL* delta = malloc(sizeof(REAL) * (size_t)(n * t_q + 1));
    limn_sdpa_delta_SUFFIX(d_out, out, delta, n * t_q, d_v, threads);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t w = 0; w < n * tiles; w++) {
        const int64_t b = w / tiles, j0 = (w % tiles) * LIMN_SDPA_KEYS;
        const int64_t width = t_k - j0 < LIMN_SDPA_KEYS ? t_k - j0 : LIMN_SDPA_KEYS;
        const REAL *qb = q + b * t_q * d, *kb = k + b * t_k * d, *vb = v + b * t_k * d_v;
        const uint8_t* mb = key_mask ? key_mask + b * t_k : 0;
        REAL* kt = malloc(sizeof(REAL) * (size_t)((d + d_v) * LIMN_SDPA_KEYS * 2 + 1));
        REAL* vt = kt + d * LIMN_SDPA_KEYS;
        REAL* dk = vt + d_v * LIMN_SDPA_KEYS; /* (keys, d): sum of dS q over the queries seen */
        REAL* dv = dk + d * LIMN_SDPA_KEYS;   /* (keys, d_v): sum of P dO over the queries seen */
        REAL s[LIMN_SDPA_KEYS], p[2][LIMN_SDPA_KEYS], ds[2][LIMN_SDPA_KEYS];
        const REAL *qs[2], *gs[2]; /* the query rows and dO rows of p and ds not yet added in */
        int pending = 0;
        for (int64_t c = 0; c < (d + d_v) * LIMN_SDPA_KEYS; c++) dk[c] = 0; /* dk and dv, side by side */
        limn_sdpa_transpose_SUFFIX(kb + j0 * d, kt, d, width);
        limn_sdpa_transpose_SUFFIX(vb + j0 * d_v, vt, d_v, width);
        /* rows before j0 see none of these keys (causal) */
        for (int64_t i = causal ? j0 : 0; i < t_q; i++) {
            const REAL row_lse = lse[b * t_q + i];
            if (row_lse == -INFINITY) continue; /* a row that sees no key passes no gradient */
            const REAL *qi = qb + i * d, *gi = d_out + (b * t_q + i) * d_v;
            limn_sdpa_scores_SUFFIX(qi, kt, s, d, width, scale, causal, mb, i, j0);
            limn_sdpa_grad_tile_SUFFIX(s, gi, vt, p[pending], ds[pending], d_v, width, row_lse, delta[b * t_q + i]);
            qs[pending] = qi;
            gs[pending] = gi;
            if (++pending == 2) { /* two rows' shares, in row order */
                limn_sdpa_outer2_SUFFIX(dv, p[0], gs[0], p[1], gs[1], d_v, width);
                limn_sdpa_outer2_SUFFIX(dk, ds[0], qs[0], ds[1], qs[1], d, width);
                pending = 0;
            }
        }
        if (pending == 1) {
            limn_sdpa_outer_SUFFIX(dv, p[0], gs[0], d_v, width);
            limn_sdpa_outer_SUFFIX(dk, ds[0], qs[0], d, width);
        }
        for (int64_t j = 0; j < width; j++) {
            LIMN_IVDEP
            for (int64_t c = 0; c < d; c++) d_k[(b * t_k + j0 + j) * d + c] = dk[j * d + c] * scale;
            LIMN_IVDEP
            for (int64_t c = 0; c < d_v; c++) d_v_[(b * t_k + j0 + j) * d_v + c] = dv[j * d_v + c];
        }
        free(kt);
    }
    free(delta);
}
"""

WIDTHS = {  # the C spellings of each width the kernels are built for
    "f32": {"REAL": "float", "EXP": "limn_expf", "LOG": "limn_logf", "PICK": "limn_pickf", "MADD": "limn_madd"},
    "f64": {"REAL": "double", "EXP": "exp", "LOG": "log", "PICK": "limn_pickd", "MADD": "limn_sdpa_madd"},
}
SUFFIX = {dtypes.float32: "f32", dtypes.float64: "f64"}


def source() -> str:
    """The C of all three kernels at both widths, to follow the prelude (limn_expf, limn_pickf, LIMN_IVDEP)."""
    sizes = f"#define LIMN_SDPA_ROWS {ROWS}\n#define LIMN_SDPA_KEYS {KEYS}\n#define LIMN_SDPA_BLOCK {BLOCK}\n"
    parts = [sizes, COMMON]
    for suffix, spelling in WIDTHS.items():
        text = TEMPLATE.replace("SUFFIX", suffix)
        for word, c in spelling.items():
            text = text.replace(word, c)
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
