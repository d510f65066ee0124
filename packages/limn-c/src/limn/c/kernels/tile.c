/* The fold every matmul tile of one shape calls (limn/c/rewrites/matmul.py reads this file and fills in its
   capitalized words for each shape; the guard keeps one definition when several kernels of a unit bring
   it). It folds a patch of output cells (ROWS x VECTORS) over `steps` rows of a packed panel of b: totals
   from 0 (first) or from what the last block of r stored, one fma per cell per step in order, stored back,
   so each cell sees the plain nest's fmas. Row ii of the patch is out + ii * out_row; its a at step s is
   a[ii * a_row + s * a_step] (steps fixed in the fold of packed rows of a: 1 and ROWS). A whole tile loads and stores every lane of every row; an edge tile only the
   first `cols` columns of its first `here` rows (its other lanes fold the panel's zeros, its other rows
   whatever a holds there, unread). Called per tile by a kernel, it is not inlined: one copy per unit, not
   one per kernel, is what keeps cc's time down; called by the packed matmul (kernels/matmul.c), which a
   unit also holds once, it is inlined there. Kernels carry what follows this comment. */
#ifndef GUARD
#define GUARD
/* the fold of a ROWS x VECTORS matmul tile (limn/c/kernels/tile.c) */
static CALLED void NAME(REAL* out, int64_t out_row, const REAL* a, int64_t a_row,
                                          int64_t a_step, const REAL* panel, int64_t steps, int first,
                                          int64_t cols, int64_t here) {
    (void)cols, (void)here, (void)a_row, (void)a_step; /* a whole tile stores every lane of every row */
    VEC acc[ROWS][VECTORS];
    for (int ii = 0; ii < ROWS; ii++)
        for (int v = 0; v < VECTORS; v++) {
            acc[ii][v] = (VEC){0};
            if (!first && ii < HERE) memcpy(&acc[ii][v], out + ii * out_row + v * LANES, sizeof(REAL) * (COLUMNS));
        }
    for (int64_t s = 0; s < steps; s++) {
        VEC row[VECTORS];
        for (int v = 0; v < VECTORS; v++) memcpy(&row[v], panel + (s * VECTORS + v) * LANES, sizeof row[v]);
        for (int ii = 0; ii < ROWS; ii++) {
            const REAL x = a[ii * AROW + s * ASTEP];
            for (int v = 0; v < VECTORS; v++) acc[ii][v] = LIMN_VEC_FMA(x, row[v], acc[ii][v]);
        }
    }
    for (int ii = 0; ii < HERE; ii++)
        for (int v = 0; v < VECTORS; v++) memcpy(out + ii * out_row + v * LANES, &acc[ii][v], sizeof(REAL) * (COLUMNS));
}
#endif
