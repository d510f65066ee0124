/* The fold every matmul tile of one shape calls (limn/c/rewrites/matmul.py reads this file and fills in its
   capitalized words for each shape; the guard keeps one definition when several kernels of a unit bring
   it). It folds a patch of output cells (ROWS x VECTORS) over `steps` rows of a packed
   panel of b: totals from 0 (first) or from what the last block of r stored, one fma per cell per step in
   order, stored back, so each cell sees the plain nest's fmas. Row ii of the patch is out + ii * out_row; its
   a at step s is a[ii * a_row + s * a_step]. Only the first columns of each vector are loaded and
   stored (all of them for a whole tile, `cols` of them at the right edge, where the other lanes fold the panel's
   zeros, unread). It is not inlined: one copy per unit, not one per tile, is what keeps cc's time down.
   Kernels carry what follows this comment. */
#ifndef GUARD
#define GUARD
/* the fold of a ROWS x VECTORS matmul tile (limn/c/kernels/tile.c) */
static __attribute__((noinline)) void NAME(REAL* out, int64_t out_row, const REAL* a, int64_t a_row,
                                          int64_t a_step, const REAL* panel, int64_t steps, int first,
                                          int64_t cols) {
    (void)cols; /* a whole tile stores every lane */
    VEC acc[ROWS][VECTORS];
    for (int ii = 0; ii < ROWS; ii++)
        for (int v = 0; v < VECTORS; v++) {
            acc[ii][v] = (VEC){0};
            if (!first) memcpy(&acc[ii][v], out + ii * out_row + v * LANES, sizeof(REAL) * (COLUMNS));
        }
    for (int64_t s = 0; s < steps; s++) {
        VEC row[VECTORS];
        for (int v = 0; v < VECTORS; v++) memcpy(&row[v], panel + (s * VECTORS + v) * LANES, sizeof row[v]);
        for (int ii = 0; ii < ROWS; ii++) {
            const REAL x = a[ii * a_row + s * a_step];
            for (int v = 0; v < VECTORS; v++) acc[ii][v] = LIMN_VEC_FMA(x, row[v], acc[ii][v]);
        }
    }
    for (int ii = 0; ii < ROWS; ii++)
        for (int v = 0; v < VECTORS; v++) memcpy(out + ii * out_row + v * LANES, &acc[ii][v], sizeof(REAL) * (COLUMNS));
}
#endif
