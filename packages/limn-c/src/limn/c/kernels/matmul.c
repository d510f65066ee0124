/* The packed matmul every tiled kernel of one dtype and tile shape calls (limn/c/rewrites/matmul.py reads this
   file and fills in its capitalized words), blocked the way BLAS libraries block: out[i, j] = the sum over r
   of a[i, r] * b[r, j], for i < ni and j < nj, each operand at its own strides. b is packed a block of KC
   rows of r and NC columns at a time, into panels of TJ columns (PANEL; the last one zero-padded), and a's
   rows a tile of ROWS at a time (SWEEP; r-major, rows past the edge zero), each tile swept across the
   block's panels with the tile folds of kernels/tile.c, folding from the totals the last block stored. The
   team splits the work one of two ways: with no more rows than columns, each thread takes blocks of columns
   of its own and packs their panels itself; else the team packs each block's panels together, then splits
   the row tiles. (A conv's 32 x 8192 x 288 product ran at 175 GFLOP/s split by columns, 120 by rows; a GPT
   layer's 2048 x 128 x 384 at 220 by rows, 212 by columns.) Every cell sees the plain nest's fmas in order.
   Where the panels cannot be allocated it folds cell by cell. `team` 0 runs it on the calling thread alone.
   Sizes are arguments, so one copy serves a unit's every tiled kernel. Kernels carry what follows this
   comment. */
#ifndef GUARD
#define GUARD
#ifdef _OPENMP
int omp_get_max_threads(void); /* declared, not included: a compiler whose -fopenmp links need not ship omp.h */
int omp_get_thread_num(void);
#endif
/* panel jt/TJ of b: rows [kb, ke) of its TJ columns from jt, r-major, the columns past nj zero */
static inline void PANEL(REAL* panel, const REAL* b, int64_t b_r, int64_t b_j, int64_t nj, int64_t jt, int64_t kb,
                         int64_t ke) {
    const int64_t cols = nj - jt < TJ ? nj - jt : TJ;
    if (cols == TJ && b_j == 1) /* whole rows of b: a copy of fixed size, which cc inlines */
        for (int64_t r = kb; r < ke; r++) memcpy(panel + (r - kb) * TJ, b + r * b_r + jt, sizeof(REAL) * TJ);
    else if (b_r == 1) /* b's columns run along r (b^T read): 16 rows at a time, a column at a time, so each
                          read is a run of memory and the panel rows written stay in cache */
        for (int64_t r0 = kb; r0 < ke; r0 += 16) {
            const int64_t r1 = r0 + 16 < ke ? r0 + 16 : ke;
            for (int64_t c = 0; c < TJ; c++)
                for (int64_t r = r0; r < r1; r++) panel[(r - kb) * TJ + c] = c < cols ? b[r + (jt + c) * b_j] : 0;
        }
    else
        for (int64_t r = kb; r < ke; r++) {
            for (int64_t c = 0; c < cols; c++) panel[(r - kb) * TJ + c] = b[r * b_r + (jt + c) * b_j];
            for (int64_t c = cols; c < TJ; c++) panel[(r - kb) * TJ + c] = 0; /* lanes never stored */
        }
}
/* the tile of a's rows [it, it + here), r-major over [kb, ke), swept across the panels of columns [jb, je) */
static inline void SWEEP(REAL* out, int64_t o_i, const REAL* a, int64_t a_i, int64_t a_r, const REAL* bpack,
                         int64_t nj, int64_t ni, int64_t it, int64_t jb, int64_t je, int64_t kb, int64_t ke) {
    REAL apack[KC * ROWS];
    const int64_t here = ni - it < ROWS ? ni - it : ROWS; /* rows in this tile */
    if (here == ROWS && a_i == 1) /* the tile's rows side by side in a (a^T read): fixed-size copies */
        for (int64_t r = kb; r < ke; r++) memcpy(apack + (r - kb) * ROWS, a + it + r * a_r, sizeof(REAL) * ROWS);
    else if (here == ROWS) /* a fixed count of rows, which cc gathers into vectors */
        for (int64_t r = kb; r < ke; r++)
            for (int ii = 0; ii < ROWS; ii++) apack[(r - kb) * ROWS + ii] = a[(it + ii) * a_i + r * a_r];
    else
        for (int64_t r = kb; r < ke; r++) {
            for (int64_t ii = 0; ii < here; ii++) apack[(r - kb) * ROWS + ii] = a[(it + ii) * a_i + r * a_r];
            for (int64_t ii = here; ii < ROWS; ii++) apack[(r - kb) * ROWS + ii] = 0; /* never stored */
        }
    for (int64_t jt = jb; jt < je; jt += TJ) {
        const REAL* panel = bpack + (jt - jb) * (ke - kb);
        const int64_t cols = nj - jt < TJ ? nj - jt : TJ;
        REAL* cells = out + it * o_i + jt;
        if (here == ROWS && cols == TJ) TILE(cells, o_i, apack, 1, ROWS, panel, ke - kb, kb == 0, cols, here);
        else EDGE(cells, o_i, apack, 1, ROWS, panel, ke - kb, kb == 0, cols, here);
    }
}
/* the packed matmul of ROWS x VECTORS tiles (limn/c/kernels/matmul.c) */
static __attribute__((noinline)) void NAME(REAL* out, int64_t o_i, const REAL* a, int64_t a_i, int64_t a_r,
                                          const REAL* b, int64_t b_r, int64_t b_j, int64_t ni, int64_t nj,
                                          int64_t nr, int team) {
#ifdef _OPENMP
    const int64_t threads = team ? omp_get_max_threads() : 1;
#else
    const int64_t threads = 1;
#endif
    /* no more rows than columns: each thread packs and sweeps blocks of columns of its own, no panel crossing
       between cores and no barrier per block; else the team packs each block's panels, then splits the rows */
    const int by_columns = ni <= nj && nj >= threads * TJ;
    const int64_t share = by_columns ? (nj + threads - 1) / threads : nj; /* the columns a thread may take */
    const int64_t kc = nr < KC ? nr : KC;
    const int64_t nc = ((share < NC ? share : NC) + TJ - 1) / TJ * TJ; /* a whole number of panels */
    REAL* bpack = nr > 0 ? (REAL*)malloc(sizeof(REAL) * kc * nc * (by_columns ? threads : 1)) : 0;
    if (bpack == 0) { /* no memory for the panels, or an empty sum (its zeros): the plain fold, cell by cell */
#pragma omp parallel for schedule(static) if (team)
        for (int64_t i = 0; i < ni; i++)
            for (int64_t j = 0; j < nj; j++) {
                REAL total = 0;
                for (int64_t r = 0; r < nr; r++)
                    total = FMA(a[i * a_i + r * a_r], b[r * b_r + j * b_j], total);
                out[i * o_i + j] = total;
            }
        return;
    }
#pragma omp parallel if (team)
    {
        if (by_columns) {
#ifdef _OPENMP
            REAL* own = bpack + kc * nc * omp_get_thread_num();
#else
            REAL* own = bpack;
#endif
#pragma omp for schedule(static)
            for (int64_t jb = 0; jb < nj; jb += nc) {
                const int64_t je = jb + nc < nj ? jb + nc : nj;
                for (int64_t kb = 0; kb < nr; kb += kc) {
                    const int64_t ke = kb + kc < nr ? kb + kc : nr;
                    for (int64_t jt = jb; jt < je; jt += TJ) PANEL(own + (jt - jb) * (ke - kb), b, b_r, b_j, nj, jt, kb, ke);
                    for (int64_t it = 0; it < ni; it += ROWS) SWEEP(out, o_i, a, a_i, a_r, own, nj, ni, it, jb, je, kb, ke);
                }
            }
        } else
            for (int64_t kb = 0; kb < nr; kb += kc)
                for (int64_t jb = 0; jb < nj; jb += nc) {
                    const int64_t ke = kb + kc < nr ? kb + kc : nr;
                    const int64_t je = jb + nc < nj ? jb + nc : nj;
#pragma omp for schedule(static)
                    for (int64_t jt = jb; jt < je; jt += TJ) PANEL(bpack + (jt - jb) * (ke - kb), b, b_r, b_j, nj, jt, kb, ke);
#pragma omp for schedule(static)
                    for (int64_t it = 0; it < ni; it += ROWS) SWEEP(out, o_i, a, a_i, a_r, bpack, nj, ni, it, jb, je, kb, ke);
                }
    }
    free(bpack);
}
#endif
