/* limn's fused attention for the cuda and cuda-sim devices: the three kernels as templates over a storage width
   (limn/cuda/attention.py reads this file, and instantiates them after each width's traits). */
/* the kernels' shapes and params, as run_custom wrote them into the META buffer */
struct limn_sdpa_dims {
    int64_t n, t_q, t_k, d, d_v;
    bool causal, masked;
    double scale;
};

/* dropout's p (0 for none), its generator's key and first counter: in shared memory, one copy a block, so the
   registers the unrolled tiles hold stay theirs */
struct limn_sdpa_drop {
    double p;
    uint64_t seed, counter;
};

static __device__ __forceinline__ limn_sdpa_dims limn_sdpa_read(const int64_t* meta) {
    limn_sdpa_dims s;
    s.n = meta[0], s.t_q = meta[1], s.t_k = meta[2], s.d = meta[3], s.d_v = meta[4];
    s.causal = meta[5] != 0, s.masked = meta[6] != 0;
    s.scale = __longlong_as_double((long long)meta[7]);
    return s;
}

/* the block's dropout, written by its first thread; every thread of the block calls it (it holds a barrier) */
static __device__ __forceinline__ void limn_sdpa_read_drop(limn_sdpa_drop& drop, const int64_t* meta,
                                                           const double* seed, const double* counter) {
    if (threadIdx.x == 0) {
        drop.p = __longlong_as_double((long long)meta[8]);
        drop.seed = drop.p > 0 ? limn_sdpa_word_of(seed) : 0;
        drop.counter = drop.p > 0 ? limn_sdpa_word_of(counter) : 0;
    }
    __syncthreads();
}

/* Dropout's factor for weight f = (b t_q + i) t_k + j (limn.composed.functional.sdpa's dropout_factors): 1 / (1 - p)
   where the uniform number of the Squares word at counter + f (float compute) or of the pair at counter + 2 f
   (double) is at least p, else 0; 1 without dropout. */
template <class W>
static __device__ __forceinline__ typename W::R limn_sdpa_keep(const limn_sdpa_drop& drop, int64_t f) {
    typedef typename W::R R;
    if (drop.p == 0) return (R)1;
    const R factor = (R)(1.0 / (1.0 - drop.p));
    if (sizeof(R) == 8) {
        const uint64_t at = drop.counter + 2 * (uint64_t)f;
        const uint64_t top = ((uint64_t)limn_sdpa_squares32(at, drop.seed) << 21) +
                             (limn_sdpa_squares32(at + 1, drop.seed) >> 11); /* 32 + 21 bits */
        return (double)top * 1.1102230246251565404236316680908203125e-16 >= drop.p ? factor : (R)0; /* 2**-53 */
    }
    const uint32_t word = limn_sdpa_squares32(drop.counter + (uint64_t)f, drop.seed);
    return (float)(word >> 8) * 5.9604644775390625e-08f >= (float)drop.p ? factor : (R)0; /* 2**-24 */
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
                                                         const double* seed, const double* counter,
                                                         typename W::S* out, typename W::R* lse, const int64_t* meta) {
    typedef typename W::R R;
    __shared__ R ks[W::TILE][W::CHUNK]; /* a chunk of a key tile's columns */
    __shared__ R vs[W::TILE][W::CHUNK]; /* a chunk of a value tile's columns */
    __shared__ limn_sdpa_drop drop;
    const limn_sdpa_dims s = limn_sdpa_read(meta);
    limn_sdpa_read_drop(drop, meta, seed, counter);
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
                    p[r] = p[r] * limn_sdpa_keep<W>(drop, (b * s.t_q + i) * s.t_k + j0 + r); /* dropout: O's terms only */
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
                                                            const double* seed, const double* counter,
                                                            const typename W::S* out, const typename W::R* lse,
                                                            const typename W::S* d_out, typename W::S* d_q,
                                                            const int64_t* meta) {
    typedef typename W::R R;
    __shared__ R ks[W::TILE][W::CHUNK]; /* a chunk of a key tile's columns */
    __shared__ R vs[W::TILE][W::CHUNK]; /* a chunk of a value tile's columns */
    __shared__ limn_sdpa_drop drop;
    const limn_sdpa_dims s = limn_sdpa_read(meta);
    limn_sdpa_read_drop(drop, meta, seed, counter);
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
                    const R z = limn_sdpa_keep<W>(drop, (b * s.t_q + i) * s.t_k + j0 + r); /* dropout weighs dP */
                    p[r] = visible ? W::exp_(p[r] * scale - row_lse) : (R)0;
                    ds[r] = visible ? p[r] * (z * ds[r] - delta) : (R)0; /* 0 even where D is NaN */
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
                                                             const double* seed, const double* counter,
                                                             const typename W::S* out, const typename W::R* lse,
                                                             const typename W::S* d_out, typename W::S* d_k,
                                                             typename W::S* d_v, const int64_t* meta) {
    typedef typename W::R R;
    __shared__ R qs[W::TILE][W::CHUNK]; /* a chunk of a query tile's columns (and the dots' stage) */
    __shared__ R gs[W::TILE][W::CHUNK]; /* the same chunk of its rows of dO */
    __shared__ R row_lse[W::TILE], row_delta[W::TILE];
    __shared__ limn_sdpa_drop drop;
    const limn_sdpa_dims s = limn_sdpa_read(meta);
    limn_sdpa_read_drop(drop, meta, seed, counter);
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
                    /* dropout weighs dP, and P where dV reads it */
                    const R z = limn_sdpa_keep<W>(drop, (b * s.t_q + i0 + r) * s.t_k + j);
                    p[r] = visible ? W::exp_(p[r] * scale - row_lse[r]) : (R)0;
                    ds[r] = visible ? p[r] * (z * ds[r] - row_delta[r]) : (R)0; /* 0 even where D is NaN */
                    p[r] = p[r] * z;
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
