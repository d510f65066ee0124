/* The packed matmul every tiled kernel of one dtype and tile shape calls (limn/c/rewrites/matmul.py reads this
   file and fills in its capitalized words), blocked the way BLAS libraries block: out[i, j] = the sum over r
   of a[i, r] * b[r, j], for i < ni and j < nj, each operand at its own strides. For each block of KC rows of r
   and each block of NC columns, the team packs the block's panels of b once (TJ columns each, the last one
   zero-padded), then splits the row tiles: each thread packs its tile's rows of a (r-major, rows past the
   edge zero) and sweeps them across the block's panels with the tile folds of kernels/tile.c, folding from
   the totals the last block stored. Every cell sees the plain nest's fmas in its order. Where the panels
   cannot be allocated it folds cell by cell. `team` 0 runs it on the calling thread alone. Sizes are
   arguments, so one copy serves a unit's every tiled kernel. Kernels carry what follows this comment. */
#ifndef GUARD
#define GUARD
/* the packed matmul of ROWS x VECTORS tiles (limn/c/kernels/matmul.c) */
static __attribute__((noinline)) void NAME(REAL* out, int64_t o_i, const REAL* a, int64_t a_i, int64_t a_r,
                                          const REAL* b, int64_t b_r, int64_t b_j, int64_t ni, int64_t nj,
                                          int64_t nr, int team) {
    const int64_t tj = TJ, kc = nr < KC ? nr : KC;
    const int64_t nc = ((nj < NC ? nj : NC) + tj - 1) / tj * tj; /* a whole number of panels */
    REAL* bpack = nr > 0 ? (REAL*)malloc(sizeof(REAL) * kc * nc) : 0;
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
        REAL apack[KC * ROWS]; /* a's tile rows, r-major: this thread's own */
        for (int64_t kb = 0; kb < nr; kb += kc)
            for (int64_t jb = 0; jb < nj; jb += nc) { /* a block of columns, packed */
                const int64_t ke = kb + kc < nr ? kb + kc : nr;
                const int64_t je = jb + nc < nj ? jb + nc : nj;
#pragma omp for schedule(static)
                for (int64_t jt = jb; jt < je; jt += tj) { /* panel jt/TJ: rows [kb, ke) of b's columns */
                    REAL* panel = bpack + (jt - jb) * kc;
                    const int64_t cols = nj - jt < tj ? nj - jt : tj;
                    if (cols == TJ && b_j == 1) /* whole rows of b: a copy of fixed size, which cc inlines */
                        for (int64_t r = kb; r < ke; r++) memcpy(panel + (r - kb) * TJ, b + r * b_r + jt, sizeof(REAL) * TJ);
                    else
                        for (int64_t r = kb; r < ke; r++) {
                            for (int64_t c = 0; c < cols; c++) panel[(r - kb) * tj + c] = b[r * b_r + (jt + c) * b_j];
                            for (int64_t c = cols; c < tj; c++) panel[(r - kb) * tj + c] = 0; /* lanes never stored */
                        }
                }
#pragma omp for schedule(static)
                for (int64_t it = 0; it < ni; it += ROWS) {
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
                    for (int64_t jt = jb; jt < je; jt += tj) {
                        const REAL* panel = bpack + (jt - jb) * kc;
                        const int64_t cols = nj - jt < tj ? nj - jt : tj;
                        REAL* cells = out + it * o_i + jt;
                        if (here == ROWS && cols == tj) TILE(cells, o_i, apack, 1, ROWS, panel, ke - kb, kb == 0, cols, here);
                        else EDGE(cells, o_i, apack, 1, ROWS, panel, ke - kb, kb == 0, cols, here);
                    }
                }
            }
    }
    free(bpack);
}
#endif
