/* limn's fused attention for the c device, written once for both widths: limn/c/attention.py replaces
   eight placeholder words (the keys of its WIDTHS, and the name suffix) with each width's C spelling. */
/* c = a . b, plus c's old value when `accumulate`: a (m, kk) with rows lda apart (or, when a_t, a's transpose
   (kk, m) is what is in memory), b (kk, n) rows ldb apart, c (m, n) rows ldc apart; m a multiple of
   LIMN_SDPA_MR, n of two vectors; only what `band` asks for. LIMN_SDPA_MR x 2
   vectors of c stay in registers while k walks its range in order, one fma per cell per step: a cell's bits
   depend on neither the tile nor the thread that computes it */
static void limn_sdpa_gemm_SUFFIX(const REAL* restrict a, int64_t lda, int a_t, const REAL* restrict b,
                                  int64_t ldb, REAL* restrict c, int64_t ldc, int64_t m, int64_t n, int64_t kk,
                                  int accumulate, limn_sdpa_band band) {
    for (int64_t i0 = 0; i0 < m; i0 += LIMN_SDPA_MR) {
        const int64_t first = i0 + band.lo, last = i0 + LIMN_SDPA_MR - 1 + band.hi; /* what the tile's rows need */
        const int64_t k0 = band.on_k && first > 0 ? first : 0, k1 = band.on_k && last + 1 < kk ? last + 1 : kk;
        for (int64_t j0 = 0; j0 < n; j0 += 2 * LANES) {
            if (!band.on_k && (j0 + 2 * LANES <= first || j0 > last)) continue; /* no row needs these columns */
            VEC acc[LIMN_SDPA_MR][2];
            for (int ii = 0; ii < LIMN_SDPA_MR; ii++)
                for (int v = 0; v < 2; v++) {
                    acc[ii][v] = (VEC){0};
                    if (accumulate) memcpy(&acc[ii][v], c + (i0 + ii) * ldc + j0 + v * LANES, sizeof acc[ii][v]);
                }
            for (int64_t k = k0; k < k1; k++) {
                VEC row[2];
                memcpy(&row[0], b + k * ldb + j0, sizeof row[0]);
                memcpy(&row[1], b + k * ldb + j0 + LANES, sizeof row[1]);
                for (int ii = 0; ii < LIMN_SDPA_MR; ii++) {
                    const REAL x = a_t ? a[k * lda + i0 + ii] : a[(i0 + ii) * lda + k];
                    acc[ii][0] = LIMN_VEC_FMA(x, row[0], acc[ii][0]);
                    acc[ii][1] = LIMN_VEC_FMA(x, row[1], acc[ii][1]);
                }
            }
            for (int ii = 0; ii < LIMN_SDPA_MR; ii++)
                for (int v = 0; v < 2; v++)
                    memcpy(c + (i0 + ii) * ldc + j0 + v * LANES, &acc[ii][v], sizeof acc[ii][v]);
        }
    }
}

/* dst (rows, ld) = the first `count` rows of src (each `width` long, `stride` apart), zero past them */
static void limn_sdpa_pack_SUFFIX(const REAL* restrict src, int64_t stride, int64_t count, int64_t width,
                                  REAL* restrict dst, int64_t rows, int64_t ld) {
    for (int64_t j = 0; j < rows; j++) {
        const int64_t have = j < count ? width : 0;
        if (have) memcpy(dst + j * ld, src + j * stride, sizeof(REAL) * (size_t)have);
        for (int64_t c = have; c < ld; c++) dst[j * ld + c] = 0;
    }
}

/* the same transposed: dst (rows, ld) with dst[c][j] = src[j][c], zero past the `count` rows and `width` columns */
static void limn_sdpa_pack_t_SUFFIX(const REAL* restrict src, int64_t stride, int64_t count, int64_t width,
                                    REAL* restrict dst, int64_t rows, int64_t ld) {
    for (int64_t c = 0; c < rows; c++) {
        REAL* row = dst + c * ld;
        if (c < width)
            for (int64_t j = 0; j < count; j++) row[j] = src[j * stride + c]; /* stores in order, loads from L1 */
        for (int64_t j = c < width ? count : 0; j < ld; j++) row[j] = 0;
    }
}

/* a 64-byte-aligned block of n values, whole vectors past the end */
static REAL* limn_sdpa_alloc_SUFFIX(int64_t n) {
    return aligned_alloc(64, (size_t)limn_sdpa_round_up((int64_t)sizeof(REAL) * (n + 1), 64));
}

/* The tiles of x (n batch rows of t rows, each `width` long) as limn_sdpa_gemm's operands, made once for every
   work item: tile (b, i) is rows [i size, (i + 1) size) of batch row b, at base + b * batch + i * tile with rows
   ld apart. Rows whose width is whole pairs of vectors are x itself, unless `whole` asks for every tile to have
   all `size` rows (an a operand is read in blocks of rows) and t is not a multiple of size; otherwise they are
   zero-padded copies, held by `owned` */
typedef struct {
    const REAL* base;
    int64_t batch, tile, ld;
    REAL* owned;
} limn_sdpa_tiles_SUFFIX;

static limn_sdpa_tiles_SUFFIX limn_sdpa_tiles_make_SUFFIX(const REAL* x, int64_t n, int64_t t, int64_t width,
                                                          int64_t size, int whole, int threads) {
    const int64_t padded = limn_sdpa_round_up(width, 2 * LANES), count = (t + size - 1) / size;
    if (padded == width && (!whole || t % size == 0))
        return (limn_sdpa_tiles_SUFFIX){x, t * width, size * width, width, 0};
    REAL* owned = limn_sdpa_alloc_SUFFIX(n * count * size * padded);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t p = 0; p < n * count; p++) {
        const int64_t b = p / count, i0 = (p % count) * size, rows = t - i0 < size ? t - i0 : size;
        const REAL* src = x + (b * t + i0) * width;
        limn_sdpa_pack_SUFFIX(src, width, rows, width, owned + p * size * padded, size, padded);
    }
    return (limn_sdpa_tiles_SUFFIX){owned, count * size * padded, size * padded, padded, owned};
}

static inline const REAL* limn_sdpa_tile_SUFFIX(const limn_sdpa_tiles_SUFFIX* tiles, int64_t b, int64_t i) {
    return tiles->base + b * tiles->batch + i * tiles->tile;
}

/* one tile's step of the online softmax, a key per row of st (KEYS, ROWS) and a query per column: the scores
   are scaled and masked (-inf where key j0 + j is hidden from query r0 + r), then become exp(s - the new max),
   and each query's max m and denominator l are brought up to date; rescale[r] is what its weighted sum must
   be multiplied by (its old terms moved onto the new max) before this tile's P v is added in */
static void limn_sdpa_online_SUFFIX(REAL* restrict st, REAL* restrict m, REAL* restrict l, REAL* restrict rescale,
                                    int64_t width, REAL scale, int causal, const uint8_t* mask, int64_t r0,
                                    int64_t j0) {
    REAL top[LIMN_SDPA_ROWS], shift[LIMN_SDPA_ROWS], sum[LIMN_SDPA_ROWS];
    for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) top[r] = m[r], sum[r] = 0;
    for (int64_t j = 0; j < width; j++) {
        REAL* sj = st + j * LIMN_SDPA_ROWS;
        const int64_t from = mask == 0 || mask[j0 + j] != 0 ? limn_sdpa_first_query(causal, j0 + j, r0, LIMN_SDPA_ROWS)
                                                            : LIMN_SDPA_ROWS;
        LIMN_IVDEP
        for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) { /* whole rows: a ragged start would run scalar */
            sj[r] = PICK(r >= from, sj[r] * scale, -INFINITY);
            top[r] = PICK(sj[r] > top[r], sj[r], top[r]);
        }
    }
    LIMN_IVDEP
    for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) {
        shift[r] = PICK(top[r] == -INFINITY, 0, top[r]); /* a query that has seen no key shifts by 0 */
        rescale[r] = EXP(m[r] - shift[r]);
    }
    for (int64_t j = 0; j < width; j++) { /* keys in order: each query's sum folds them as they come */
        REAL* sj = st + j * LIMN_SDPA_ROWS;
        LIMN_IVDEP
        for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) {
            sj[r] = EXP(sj[r] - shift[r]); /* 0 where hidden */
            sum[r] = sum[r] + sj[r];
        }
    }
    LIMN_IVDEP
    for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) {
        l[r] = l[r] * rescale[r] + sum[r];
        m[r] = top[r];
    }
}

/* z[c] = dropout's factor of weight first + c step, for c < count (limn_sdpa_drop); 1 without dropout */
static void limn_sdpa_factors_SUFFIX(const limn_sdpa_drop* drop, int64_t first, int64_t step, int64_t count,
                                     REAL* restrict z) {
    const REAL factor = drop->p > 0 ? (REAL)(1.0 / (1.0 - drop->p)) : 1;
    if (drop->p == 0) {
        for (int64_t c = 0; c < count; c++) z[c] = 1;
        return;
    }
    LIMN_IVDEP
    for (int64_t c = 0; c < count; c++) z[c] = KEEP(drop, first + c * step, factor);
}

/* dropout on a forward tile of exp(s - m) (st: a key per row, a query per column), after its sum has gone into
   l: only what O adds up is dropped; query r0 + r and key j0 + j of batch row b */
static void limn_sdpa_drop_tile_SUFFIX(REAL* restrict st, const limn_sdpa_drop* drop, int64_t b, int64_t r0,
                                       int64_t j0, int64_t width) {
    REAL z[LIMN_SDPA_ROWS];
    for (int64_t j = 0; j < width; j++) {
        limn_sdpa_factors_SUFFIX(drop, (b * drop->t_q + r0) * drop->t_k + j0 + j, drop->t_k, LIMN_SDPA_ROWS, z);
        LIMN_IVDEP
        for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) st[j * LIMN_SDPA_ROWS + r] *= z[r];
    }
}

/* P^T and dS^T for one key's row of the transposed tiles (st, dst: a column per query i0 + r), in place: the
   scores become p = exp(s scale - lse), 0 where hidden, and dP becomes dS = p (dP - delta); lse and delta per
   query, -inf in lse marking a query past the end or one that sees no key; z: dropout's factors per query,
   which weigh dP */
static void limn_sdpa_grad_key_SUFFIX(REAL* restrict st, REAL* restrict dst, const REAL* restrict lse,
                                      const REAL* restrict delta, const REAL* restrict z, REAL scale, int causal,
                                      int key_visible, int64_t key, int64_t i0) {
    const int64_t from = key_visible ? limn_sdpa_first_query(causal, key, i0, LIMN_SDPA_ROWS) : LIMN_SDPA_ROWS;
    LIMN_IVDEP
    for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) { /* hidden cells may be ones the product skipped: PICK, not * */
        const int visible = (r >= from) & (lse[r] != -INFINITY);
        const REAL p = PICK(visible, EXP(st[r] * scale - lse[r]), 0);
        st[r] = p;
        dst[r] = PICK(visible, p * (z[r] * dst[r] - delta[r]), 0);
    }
}

/* the same for one query's row of the tiles (s, ds: a column per key j0 + j), with that query's lse and delta;
   keys[j] says whether the key mask lets key j0 + j be seen (always a real array: a vector loop reading a
   null mask under a false condition still costs the CPU a fault assist per load); z: dropout's factors per key,
   which weigh dP, and P where dV reads it */
static void limn_sdpa_grad_query_SUFFIX(REAL* restrict s, REAL* restrict ds, const REAL* restrict z, REAL lse,
                                        REAL delta, REAL scale, int causal, const uint8_t* keys, int64_t width,
                                        int64_t query, int64_t j0) {
    const int64_t upto = lse == -INFINITY ? 0 : causal && query - j0 + 1 < width ? query - j0 + 1 : width;
    LIMN_IVDEP
    for (int64_t j = 0; j < LIMN_SDPA_KEYS; j++) { /* whole rows: a ragged end would run scalar */
        const int visible = (j < upto) & (keys[j] != 0); /* &, not &&: no branch in the loop */
        const REAL p = PICK(visible, EXP(s[j] * scale - lse), 0);
        s[j] = p * z[j];
        ds[j] = PICK(visible, p * (z[j] * ds[j] - delta), 0);
    }
}

/* The two tiles the dQ pass starts from, for keys j0 .. j0 + width against queries i0 .. i0 + ROWS:
   st = P^T and dst = dS^T (KEYS, ROWS), from the key and value tiles kj, vj (rows of KEYS x d, KEYS x d_v) and
   the transposed query and dO tiles qt, gt (d x ROWS, d_v x ROWS). lse and delta hold the ROWS queries' own. */
typedef struct {
    const REAL *kj, *vj, *qt, *gt;
    int64_t ldk, ldv, d, d_v, width, j0, i0, b;
} limn_sdpa_pair_SUFFIX;

static void limn_sdpa_pair_grads_SUFFIX(const limn_sdpa_pair_SUFFIX* t, REAL* st, REAL* dst, const REAL* lse,
                                        const REAL* delta, const uint8_t* mask, const limn_sdpa_drop* drop,
                                        REAL scale, int causal) {
    const int64_t mk = limn_sdpa_round_up(t->width, LIMN_SDPA_MR);
    const limn_sdpa_band cells = limn_sdpa_band_of(causal, t->j0 - t->i0, LIMN_SDPA_FAR, 0); /* key j: queries
                                                                   r >= j + j0 - i0 */
    limn_sdpa_gemm_SUFFIX(t->kj, t->ldk, 0, t->qt, LIMN_SDPA_ROWS, st, LIMN_SDPA_ROWS, mk, LIMN_SDPA_ROWS, t->d, 0,
                          cells);
    limn_sdpa_gemm_SUFFIX(t->vj, t->ldv, 0, t->gt, LIMN_SDPA_ROWS, dst, LIMN_SDPA_ROWS, mk, LIMN_SDPA_ROWS, t->d_v,
                          0, cells);
    REAL z[LIMN_SDPA_ROWS]; /* dropout's factors of key j for each query */
    for (int64_t j = 0; j < mk; j++) {
        const int key_visible = j < t->width && (mask == 0 || mask[t->j0 + j] != 0);
        const int64_t first = (t->b * drop->t_q + t->i0) * drop->t_k + t->j0 + j;
        limn_sdpa_factors_SUFFIX(drop, first, drop->t_k, LIMN_SDPA_ROWS, z);
        limn_sdpa_grad_key_SUFFIX(st + j * LIMN_SDPA_ROWS, dst + j * LIMN_SDPA_ROWS, lse, delta, z, scale, causal,
                                  key_visible, t->j0 + j, t->i0);
    }
}

/* a query tile's own lse and delta, ROWS long: -inf and 0 past the last query */
static void limn_sdpa_rows_of_SUFFIX(const REAL* lse, const REAL* delta, int64_t rows, REAL* row_lse,
                                     REAL* row_delta) {
    for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) {
        row_lse[r] = r < rows ? lse[r] : -INFINITY;
        row_delta[r] = r < rows ? delta[r] : 0;
    }
}

/* D[i] = dO[i] . O[i] for every row, the term both backward kernels subtract */
static void limn_sdpa_delta_SUFFIX(const REAL* d_o, const REAL* out, REAL* delta, int64_t rows, int64_t d_v,
                                   int threads) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t i = 0; i < rows; i++) {
        const REAL *x = d_o + i * d_v, *y = out + i * d_v;
        VEC part = {0}; /* a vector of partial sums, so the products of a row are not one chain of roundings */
        int64_t c = 0;
        for (; c + LANES <= d_v; c += LANES) {
            VEC a, b;
            memcpy(&a, x + c, sizeof a);
            memcpy(&b, y + c, sizeof b);
            part = part + a * b;
        }
        REAL total = 0;
        for (int l = 0; l < LANES; l++) total = total + part[l];
        for (; c < d_v; c++) total = MADD(x[c], y[c], total);
        delta[i] = total;
    }
}

/* Work item w is (batch row, tile of ROWS queries) = (w / tiles, w % tiles); it streams the key tiles past its
   queries, transposed so a key is a row: S^T = k q^T, the online softmax a key at a time over all the tile's
   queries, then O += P v. */
void limn_sdpa_forward_SUFFIX(const REAL* q, const REAL* k, const REAL* v, const uint8_t* key_mask,
                              const double* seed, const double* counter, REAL* out, REAL* lse, int64_t n, int64_t t_q,
                              int64_t t_k, int64_t d, int64_t d_v, int causal, double scale_, double dropout,
                              int threads) {
    const REAL scale = (REAL)scale_;
    const limn_sdpa_drop drop = limn_sdpa_drop_of(seed, counter, dropout, t_q, t_k);
    const int64_t tiles = (t_q + LIMN_SDPA_ROWS - 1) / LIMN_SDPA_ROWS;
    const int64_t dp = limn_sdpa_round_up(d, 2 * LANES), dvp = limn_sdpa_round_up(d_v, 2 * LANES);
    limn_sdpa_tiles_SUFFIX kr = limn_sdpa_tiles_make_SUFFIX(k, n, t_k, d, LIMN_SDPA_KEYS, 1, threads);
    limn_sdpa_tiles_SUFFIX vr = limn_sdpa_tiles_make_SUFFIX(v, n, t_k, d_v, LIMN_SDPA_KEYS, 0, threads);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t w = 0; w < n * tiles; w++) {
        const int64_t b = w / tiles, r0 = (w % tiles) * LIMN_SDPA_ROWS;
        const int64_t rows = r0 + LIMN_SDPA_ROWS < t_q ? LIMN_SDPA_ROWS : t_q - r0;
        const int64_t mr = limn_sdpa_round_up(rows, LIMN_SDPA_MR);
        const uint8_t* mb = key_mask ? key_mask + b * t_k : 0;
        REAL* qt = limn_sdpa_alloc_SUFFIX(LIMN_SDPA_ROWS * (dp + dvp + LIMN_SDPA_KEYS + 3));
        REAL* st = qt + dp * LIMN_SDPA_ROWS;       /* (KEYS, ROWS): scores, then exp(s - m), a key per row */
        REAL* acc = st + LIMN_SDPA_KEYS * LIMN_SDPA_ROWS; /* (ROWS, dvp): sum of exp(s - m) v over the keys seen */
        REAL* m = acc + LIMN_SDPA_ROWS * dvp;      /* (ROWS): the largest score each query has seen */
        REAL* l = m + LIMN_SDPA_ROWS;              /* (ROWS): its sum of exp(s - m) over the keys seen */
        REAL* rescale = l + LIMN_SDPA_ROWS;        /* (ROWS): what moves its sums onto a new max */
        limn_sdpa_pack_t_SUFFIX(q + (b * t_q + r0) * d, d, rows, d, qt, dp, LIMN_SDPA_ROWS);
        for (int64_t c = 0; c < LIMN_SDPA_ROWS * dvp; c++) acc[c] = 0;
        for (int64_t r = 0; r < LIMN_SDPA_ROWS; r++) m[r] = -INFINITY, l[r] = 0;
        const int64_t key_end = limn_sdpa_key_end(causal, r0 + rows, t_k);
        for (int64_t j0 = 0; j0 < key_end; j0 += LIMN_SDPA_KEYS) {
            const int64_t width = key_end - j0 < LIMN_SDPA_KEYS ? key_end - j0 : LIMN_SDPA_KEYS;
            const REAL* kj = limn_sdpa_tile_SUFFIX(&kr, b, j0 / LIMN_SDPA_KEYS);
            const REAL* vj = limn_sdpa_tile_SUFFIX(&vr, b, j0 / LIMN_SDPA_KEYS);
            const int64_t mk = limn_sdpa_round_up(width, LIMN_SDPA_MR);
            limn_sdpa_gemm_SUFFIX(kj, kr.ld, 0, qt, LIMN_SDPA_ROWS, st, LIMN_SDPA_ROWS, mk, LIMN_SDPA_ROWS, d, 0,
                                  limn_sdpa_band_of(causal, j0 - r0, LIMN_SDPA_FAR, 0));
            limn_sdpa_online_SUFFIX(st, m, l, rescale, width, scale, causal, mb, r0, j0);
            if (drop.p > 0) limn_sdpa_drop_tile_SUFFIX(st, &drop, b, r0, j0, width);
            for (int64_t r = 0; r < rows; r++) {
                LIMN_IVDEP
                for (int64_t c = 0; c < dvp; c++) acc[r * dvp + c] = acc[r * dvp + c] * rescale[r];
            }
            limn_sdpa_gemm_SUFFIX(st, LIMN_SDPA_ROWS, 1, vj, vr.ld, acc, dvp, mr, dvp, width, 1,
                                  limn_sdpa_band_of(causal, -LIMN_SDPA_FAR, r0 - j0, 1));
        }
        for (int64_t r = 0; r < rows; r++) {
            const int seen = l[r] != 0; /* 0 only when no key was seen: a NaN score makes the row NaN */
            const REAL denom = seen ? l[r] : 1;
            LIMN_IVDEP
            for (int64_t c = 0; c < d_v; c++)
                out[(b * t_q + r0 + r) * d_v + c] = PICK(seen, acc[r * dvp + c] / denom, 0);
            lse[b * t_q + r0 + r] = seen ? m[r] + LOG(denom) : -INFINITY;
        }
        free(qt);
    }
    free(kr.owned);
    free(vr.owned);
}

/* Work items as the forward's: per key tile, P^T and dS^T (limn_sdpa_pair_grads), then dQ += dS k. */
void limn_sdpa_backward_q_SUFFIX(const REAL* q, const REAL* k, const REAL* v, const uint8_t* key_mask,
                                 const double* seed, const double* counter, const REAL* out, const REAL* lse,
                                 const REAL* d_out, REAL* d_q, int64_t n, int64_t t_q, int64_t t_k, int64_t d,
                                 int64_t d_v, int causal, double scale_, double dropout, int threads) {
    const REAL scale = (REAL)scale_;
    const limn_sdpa_drop drop = limn_sdpa_drop_of(seed, counter, dropout, t_q, t_k);
    const int64_t tiles = (t_q + LIMN_SDPA_ROWS - 1) / LIMN_SDPA_ROWS;
    const int64_t dp = limn_sdpa_round_up(d, 2 * LANES), dvp = limn_sdpa_round_up(d_v, 2 * LANES);
    REAL* delta = malloc(sizeof(REAL) * (size_t)(n * t_q + 1));
    limn_sdpa_delta_SUFFIX(d_out, out, delta, n * t_q, d_v, threads);
    limn_sdpa_tiles_SUFFIX kr = limn_sdpa_tiles_make_SUFFIX(k, n, t_k, d, LIMN_SDPA_KEYS, 1, threads);
    limn_sdpa_tiles_SUFFIX vr = limn_sdpa_tiles_make_SUFFIX(v, n, t_k, d_v, LIMN_SDPA_KEYS, 1, threads);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t w = 0; w < n * tiles; w++) {
        const int64_t b = w / tiles, r0 = (w % tiles) * LIMN_SDPA_ROWS;
        const int64_t rows = r0 + LIMN_SDPA_ROWS < t_q ? LIMN_SDPA_ROWS : t_q - r0;
        const int64_t mr = limn_sdpa_round_up(rows, LIMN_SDPA_MR), first = b * t_q + r0;
        const uint8_t* mb = key_mask ? key_mask + b * t_k : 0;
        REAL* qt = limn_sdpa_alloc_SUFFIX(LIMN_SDPA_ROWS * (2 * dp + dvp + 2 * LIMN_SDPA_KEYS + 2));
        REAL* gt = qt + dp * LIMN_SDPA_ROWS;      /* (dvp, ROWS): the tile's rows of dO, transposed */
        REAL* st = gt + dvp * LIMN_SDPA_ROWS;     /* (KEYS, ROWS): P^T */
        REAL* dst = st + LIMN_SDPA_KEYS * LIMN_SDPA_ROWS; /* (KEYS, ROWS): dS^T */
        REAL* acc = dst + LIMN_SDPA_KEYS * LIMN_SDPA_ROWS; /* (ROWS, dp): sum of dS k over the keys seen */
        REAL* row_lse = acc + LIMN_SDPA_ROWS * dp;
        REAL* row_delta = row_lse + LIMN_SDPA_ROWS;
        limn_sdpa_pack_t_SUFFIX(q + first * d, d, rows, d, qt, dp, LIMN_SDPA_ROWS);
        limn_sdpa_pack_t_SUFFIX(d_out + first * d_v, d_v, rows, d_v, gt, dvp, LIMN_SDPA_ROWS);
        limn_sdpa_rows_of_SUFFIX(lse + first, delta + first, rows, row_lse, row_delta);
        for (int64_t c = 0; c < LIMN_SDPA_ROWS * dp; c++) acc[c] = 0;
        const int64_t key_end = limn_sdpa_key_end(causal, r0 + rows, t_k);
        for (int64_t j0 = 0; j0 < key_end; j0 += LIMN_SDPA_KEYS) {
            const int64_t width = key_end - j0 < LIMN_SDPA_KEYS ? key_end - j0 : LIMN_SDPA_KEYS;
            const int64_t tile = j0 / LIMN_SDPA_KEYS;
            const REAL* kj = limn_sdpa_tile_SUFFIX(&kr, b, tile);
            const limn_sdpa_pair_SUFFIX pair = {kj, limn_sdpa_tile_SUFFIX(&vr, b, tile), qt, gt, kr.ld, vr.ld,
                                                d, d_v, width, j0, r0, b};
            limn_sdpa_pair_grads_SUFFIX(&pair, st, dst, row_lse, row_delta, mb, &drop, scale, causal);
            limn_sdpa_gemm_SUFFIX(dst, LIMN_SDPA_ROWS, 1, kj, kr.ld, acc, dp, mr, dp, width, 1,
                                  limn_sdpa_band_of(causal, -LIMN_SDPA_FAR, r0 - j0, 1));
        }
        for (int64_t r = 0; r < rows; r++) {
            LIMN_IVDEP
            for (int64_t c = 0; c < d; c++) d_q[(first + r) * d + c] = acc[r * dp + c] * scale;
        }
        free(qt);
    }
    free(kr.owned);
    free(vr.owned);
    free(delta);
}

/* Work item w is (batch row, tile of KEYS keys); it streams the query tiles past its keys, a query per row: S =
   q k^T and dP = dO v^T, P and dS query by query, then dV += P^T dO and dK += dS^T q. */
void limn_sdpa_backward_kv_SUFFIX(const REAL* q, const REAL* k, const REAL* v, const uint8_t* key_mask,
                                  const double* seed, const double* counter, const REAL* out, const REAL* lse,
                                  const REAL* d_out, REAL* d_k, REAL* d_v_, int64_t n, int64_t t_q, int64_t t_k,
                                  int64_t d, int64_t d_v, int causal, double scale_, double dropout, int threads) {
    const REAL scale = (REAL)scale_;
    const limn_sdpa_drop drop = limn_sdpa_drop_of(seed, counter, dropout, t_q, t_k);
    const int64_t tiles = (t_k + LIMN_SDPA_KEYS - 1) / LIMN_SDPA_KEYS;
    const int64_t dp = limn_sdpa_round_up(d, 2 * LANES), dvp = limn_sdpa_round_up(d_v, 2 * LANES);
    REAL* delta = malloc(sizeof(REAL) * (size_t)(n * t_q + 1));
    limn_sdpa_delta_SUFFIX(d_out, out, delta, n * t_q, d_v, threads);
    limn_sdpa_tiles_SUFFIX qr = limn_sdpa_tiles_make_SUFFIX(q, n, t_q, d, LIMN_SDPA_ROWS, 1, threads);
    limn_sdpa_tiles_SUFFIX gr = limn_sdpa_tiles_make_SUFFIX(d_out, n, t_q, d_v, LIMN_SDPA_ROWS, 1, threads);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
    for (int64_t w = 0; w < n * tiles; w++) {
        const int64_t b = w / tiles, j0 = (w % tiles) * LIMN_SDPA_KEYS;
        const int64_t width = t_k - j0 < LIMN_SDPA_KEYS ? t_k - j0 : LIMN_SDPA_KEYS;
        const int64_t mk = limn_sdpa_round_up(width, LIMN_SDPA_MR);
        const uint8_t* mb = key_mask ? key_mask + b * t_k : 0;
        REAL* kt = limn_sdpa_alloc_SUFFIX(LIMN_SDPA_KEYS * (2 * dp + 2 * dvp + 2 * LIMN_SDPA_ROWS));
        REAL* vt = kt + dp * LIMN_SDPA_KEYS;      /* (dvp, KEYS): the value tile, transposed (kt: the keys) */
        REAL* s = vt + dvp * LIMN_SDPA_KEYS;      /* (ROWS, KEYS): scores, then P */
        REAL* ds = s + LIMN_SDPA_ROWS * LIMN_SDPA_KEYS; /* (ROWS, KEYS): dP, then dS */
        REAL* dk = ds + LIMN_SDPA_ROWS * LIMN_SDPA_KEYS; /* (KEYS, dp): sum of dS q over the queries seen */
        REAL* dv = dk + LIMN_SDPA_KEYS * dp;      /* (KEYS, dvp): sum of P dO over the queries seen */
        uint8_t keys[LIMN_SDPA_KEYS]; /* the key mask's word on each of the tile's keys */
        for (int64_t j = 0; j < LIMN_SDPA_KEYS; j++) keys[j] = j < width && (mb == 0 || mb[j0 + j] != 0);
        limn_sdpa_pack_t_SUFFIX(k + (b * t_k + j0) * d, d, width, d, kt, dp, LIMN_SDPA_KEYS);
        limn_sdpa_pack_t_SUFFIX(v + (b * t_k + j0) * d_v, d_v, width, d_v, vt, dvp, LIMN_SDPA_KEYS);
        for (int64_t c = 0; c < LIMN_SDPA_KEYS * (dp + dvp); c++) dk[c] = 0; /* dk and dv, side by side */
        /* query tiles that end before j0 see none of these keys (causal) */
        for (int64_t i0 = causal ? j0 / LIMN_SDPA_ROWS * LIMN_SDPA_ROWS : 0; i0 < t_q; i0 += LIMN_SDPA_ROWS) {
            const int64_t rows = i0 + LIMN_SDPA_ROWS < t_q ? LIMN_SDPA_ROWS : t_q - i0, first = b * t_q + i0;
            const int64_t mq = limn_sdpa_round_up(rows, LIMN_SDPA_MR);
            const REAL* qi = limn_sdpa_tile_SUFFIX(&qr, b, i0 / LIMN_SDPA_ROWS);
            const REAL* gi = limn_sdpa_tile_SUFFIX(&gr, b, i0 / LIMN_SDPA_ROWS);
            const limn_sdpa_band cells = limn_sdpa_band_of(causal, -LIMN_SDPA_FAR, i0 - j0, 0);
            limn_sdpa_gemm_SUFFIX(qi, qr.ld, 0, kt, LIMN_SDPA_KEYS, s, LIMN_SDPA_KEYS, mq, LIMN_SDPA_KEYS, d, 0, cells);
            limn_sdpa_gemm_SUFFIX(gi, gr.ld, 0, vt, LIMN_SDPA_KEYS, ds, LIMN_SDPA_KEYS, mq, LIMN_SDPA_KEYS, d_v, 0,
                                  cells);
            for (int64_t r = 0; r < rows; r++) {
                REAL z[LIMN_SDPA_KEYS]; /* dropout's factors of query i0 + r for each key */
                limn_sdpa_factors_SUFFIX(&drop, (first + r) * t_k + j0, 1, LIMN_SDPA_KEYS, z);
                limn_sdpa_grad_query_SUFFIX(s + r * LIMN_SDPA_KEYS, ds + r * LIMN_SDPA_KEYS, z, lse[first + r],
                                            delta[first + r], scale, causal, keys, width, i0 + r, j0);
            }
            const limn_sdpa_band terms = limn_sdpa_band_of(causal, j0 - i0, LIMN_SDPA_FAR, 1); /* key j: queries
                                                                   r >= j + j0 - i0 */
            limn_sdpa_gemm_SUFFIX(s, LIMN_SDPA_KEYS, 1, gi, gr.ld, dv, dvp, mk, dvp, rows, 1, terms);
            limn_sdpa_gemm_SUFFIX(ds, LIMN_SDPA_KEYS, 1, qi, qr.ld, dk, dp, mk, dp, rows, 1, terms);
        }
        for (int64_t j = 0; j < width; j++) {
            LIMN_IVDEP
            for (int64_t c = 0; c < d; c++) d_k[(b * t_k + j0 + j) * d + c] = dk[j * dp + c] * scale;
            LIMN_IVDEP
            for (int64_t c = 0; c < d_v; c++) d_v_[(b * t_k + j0 + j) * d_v + c] = dv[j * dvp + c];
        }
        free(kt);
    }
    free(qr.owned);
    free(gr.owned);
    free(delta);
}
