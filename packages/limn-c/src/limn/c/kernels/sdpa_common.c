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

/* Dropout, as limn.composed.functional.sdpa's dropout_factors defines it: weight f of the (n, t_q, t_k) weights,
   f = (b t_q + i) t_k + j, is kept when the uniform number made from the Squares word at counter + f (float) or
   the pair from counter + 2 f (double) is at least p, and is then scaled by 1 / (1 - p); p = 0 is no dropout.
   The seed and counter arrive as a generator's 16-bit limbs, low first (limn_sdpa_word_of and
   limn_sdpa_squares32 come before this file: limn/compiler/squares_c.py). */
typedef struct {
    uint64_t seed, counter;
    double p;
    int64_t t_q, t_k;
} limn_sdpa_drop;

static limn_sdpa_drop limn_sdpa_drop_of(const double* seed, const double* counter, double p, int64_t t_q,
                                        int64_t t_k) {
    limn_sdpa_drop drop = {0, 0, seed ? p : 0, t_q, t_k};
    if (seed) drop.seed = limn_sdpa_word_of(seed), drop.counter = limn_sdpa_word_of(counter);
    return drop;
}

/* weight f's factor: `factor` (1 / (1 - p) in the width) where kept, 0 where dropped */
static inline float limn_sdpa_keep_f(const limn_sdpa_drop* drop, int64_t f, float factor) {
    const uint32_t word = limn_sdpa_squares32(drop->counter + (uint64_t)f, drop->seed);
    return (float)(word >> 8) * 0x1p-24f >= (float)drop->p ? factor : 0.0f; /* 24 bits: k / 2**24 is exact */
}

static inline double limn_sdpa_keep_d(const limn_sdpa_drop* drop, int64_t f, double factor) {
    const uint64_t at = drop->counter + 2 * (uint64_t)f;
    const uint64_t top = ((uint64_t)limn_sdpa_squares32(at, drop->seed) << 21) +
                         (limn_sdpa_squares32(at + 1, drop->seed) >> 11); /* 32 + 21 bits */
    return (double)top * 0x1p-53 >= drop->p ? factor : 0.0;
}
