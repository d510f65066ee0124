/* limn's fused attention for the c device: what both widths share (limn/c/attention.py reads this file). */
#include <stdlib.h>

/* n rounded up to a multiple of `to` */
static inline int64_t limn_sdpa_round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

/* the keys row tile [r0, r1) can see end here: past r1 - 1 every key is hidden from all its rows (causal) */
static int64_t limn_sdpa_key_end(int causal, int64_t r1, int64_t t_k) { return causal && r1 < t_k ? r1 : t_k; }

/* The cells or terms of a product causal attention needs: row i needs index x (a column of c, or a term k of
   the sum when on_k) only when i + lo <= x <= i + hi. A row of queries against a tile of keys needs key
   x <= i + (row0 - key0); a row of keys against a tile of queries needs query x >= i + (key0 - row0). The
   product skips the blocks and terms no row of a register tile needs: skipped cells keep what they held, and
   the callers read them only through a mask built from the indices. */
typedef struct {
    int64_t lo, hi;
    int on_k;
} limn_sdpa_band;

#define LIMN_SDPA_FAR (INT64_C(1) << 62) /* past any index: a band side that skips nothing */

static limn_sdpa_band limn_sdpa_band_of(int causal, int64_t lo, int64_t hi, int on_k) {
    return causal ? (limn_sdpa_band){lo, hi, on_k} : (limn_sdpa_band){-LIMN_SDPA_FAR, LIMN_SDPA_FAR, on_k};
}

/* the first of `count` queries (the first being query i0) that key `key` is visible to: all of them unless
   causal hides the key from the queries before it */
static int64_t limn_sdpa_first_query(int causal, int64_t key, int64_t i0, int64_t count) {
    const int64_t first = causal ? key - i0 : 0;
    return first < 0 ? 0 : first > count ? count : first;
}

/* the register tile of limn_sdpa_gemm: rows of cells by two vectors, 8 x 2 where AVX-512 gives 32 registers */
#if LIMN_VEC_BYTES == 64
#define LIMN_SDPA_MR 8
#else
#define LIMN_SDPA_MR 4
#endif
