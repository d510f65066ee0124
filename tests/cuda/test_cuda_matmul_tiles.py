"""The matmul tile shape (limn.cuda.matmul): its emission invariants over a sweep of shapes, tile widths and tails,
checked on the Tiling the kernel is written from, then the emitted CUDA C run on cuda-sim across those widths:
- every output cell is folded by exactly one thread of one block, for shapes that fill the tiles, miss them by one
  either way, or are smaller than one tile;
- every staged slab is written whole, each element by one thread, in passes every thread makes in full (a width
  the block cannot fill so is refused, naming why);
- the tiled kernel (on cuda-sim, and on the GPU where there is one) gives the one-thread-per-cell kernel's bits
  (each cell folds r in order with the same fma) and the numpy device's values at the corpus tolerance, for
  plain, batched, transposed and float64 operands and for a matmul with an epilogue in the register form.
Marked `cuda`: nox -s "tests(cuda-sim)" runs it."""

from __future__ import annotations

import itertools
import shutil
from collections import Counter

import numpy as np
import pytest
from cuda_devices import WHERE, make_device

import limn
from limn import Tensor
from limn.compiler.codegen import ir
from limn.cuda.matmul import Tiling, tile_count, tiled_matmul
from limn.cuda.source import CudaRenderer, nests

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")]

TILINGS = [
    Tiling(rows=8, cols=8, depth=4, patch_rows=2, patch_cols=2),  # 16 threads, two passes per slab
    Tiling(rows=16, cols=4, depth=4, patch_rows=4, patch_cols=1),  # tall tiles, one pass of b
    Tiling(rows=4, cols=16, depth=8, patch_rows=1, patch_cols=4),  # wide tiles, deep slabs
    Tiling(),  # the GPU's
]
SIDES = [1, 3, 4, 7, 8, 9, 16, 17, 130]  # one cell, under a tile, whole tiles, one past and one short


def tile_of(tiling: Tiling, number: int, ni: int, nj: int) -> tuple[int, int]:
    """(row0, col0) of tile `number`, as the kernel derives them."""
    ti, tj = max(-(-ni // tiling.rows), 1), max(-(-nj // tiling.cols), 1)
    return number // tj % ti * tiling.rows, number % tj * tiling.cols


@pytest.mark.parametrize("tiling", TILINGS, ids=str)
def test_the_tiles_cover_every_output_cell_exactly_once(tiling):
    for ni, nj in itertools.product(SIDES, SIDES):
        tiles = -(-ni // tiling.rows) * -(-nj // tiling.cols)
        folded = Counter()
        for number, thread in itertools.product(range(tiles), range(tiling.threads)):
            row0, col0 = tile_of(tiling, number, ni, nj)
            for ii, jj in tiling.cells(thread):
                if row0 + ii < ni and col0 + jj < nj:
                    folded[row0 + ii, col0 + jj] += 1
        every = {(i, j): 1 for i in range(ni) for j in range(nj)}
        assert folded == every, f"{tiling} on ({ni}, {nj}): cells folded other than once: " + str(
            {c: n for c, n in (every | folded).items() if folded.get(c) != 1}
        )


@pytest.mark.parametrize("tiling", TILINGS, ids=str)
@pytest.mark.parametrize("operand", ["a", "b"])
@pytest.mark.parametrize("r_fast", [True, False], ids=["r contiguous", "r strided"])
def test_every_pass_stages_a_whole_slab_each_element_once(tiling, operand, r_fast):
    width = tiling.rows if operand == "a" else tiling.cols
    per_thread = [tiling.staged(t, tiling.depth, r_fast, width) for t in range(tiling.threads)]
    assert len({len(s) for s in per_thread}) == 1, f"{tiling}: threads stage different counts {per_thread}"
    staged = Counter(e for s in per_thread for e in s)
    whole = {(kk, at): 1 for kk in range(tiling.depth) for at in range(width)}
    assert staged == whole, f"{tiling}, {operand}'s slab: elements staged other than once"


@pytest.mark.parametrize(
    "sizes, why",
    [
        ((4, 4, 2, 1, 1), "whole passes"),  # 16 threads, slabs of 8
        ((8, 8, 4, 3, 2), "does not divide"),
        ((8, 8, 0, 2, 2), "at least 1"),
    ],
)
def test_a_tiling_that_cannot_stage_whole_slabs_is_refused(sizes, why):
    with pytest.raises(ValueError, match=why):
        Tiling(*sizes)


def test_a_matmul_renders_a_block_per_tile_and_other_nests_do_not():
    limn.set_device("numpy")
    a, b = Tensor(np.ones((17, 9), np.float32)), Tensor(np.ones((9, 23), np.float32))
    tiling = TILINGS[0]
    kernel = ir(a @ b).kernels[0]
    program = CudaRenderer(tiling=tiling).render(kernel)
    matmuls = [tiled_matmul(nest, kernel) for _, nest in nests(kernel.body)]
    assert [m is not None for m in matmuls] == [False, True], "the fill nest is cells, the fold a matmul"
    fill, tiles = program.launches
    assert fill.block is None and tiles.block == tiling.threads
    assert tiles.cells == tile_count(matmuls[1], tiling) * tiling.threads == 3 * 3 * 16
    assert "__shared__ float slab_a[4][8]" in program.source
    plain = CudaRenderer(tiling=None).render(kernel)
    assert "slab_a" not in plain.source and all(launch.block is None for launch in plain.launches)


rng = np.random.default_rng(0)
CASES = {
    "plain": lambda: (rng.standard_normal((17, 13)), rng.standard_normal((13, 9)), lambda a, b: a @ b),
    "two rows": lambda: (rng.standard_normal((2, 33)), rng.standard_normal((33, 5)), lambda a, b: a @ b),
    "batched": lambda: (rng.standard_normal((3, 5, 7)), rng.standard_normal((3, 7, 6)), lambda a, b: a @ b),
    "b transposed": lambda: (rng.standard_normal((9, 11)), rng.standard_normal((10, 11)), lambda a, b: a @ b.T),
    "register form, epilogue": lambda: (
        rng.standard_normal((5, 4)),
        rng.standard_normal((6, 5)),
        lambda a, b: ((a + 1).T @ b.T).relu() * 2,
    ),
    "float64": lambda: (
        rng.standard_normal((6, 19)).astype(np.float64),
        rng.standard_normal((19, 10)).astype(np.float64),
        lambda a, b: a @ b,
    ),
}


def run_on(name: str, device, a: np.ndarray, b: np.ndarray, f) -> np.ndarray:
    limn.register_device(name, device)
    limn.set_device(name)
    try:
        return f(Tensor(a), Tensor(b)).numpy()
    finally:
        limn.set_device("numpy")


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("tiling", TILINGS[:3], ids=str)
@pytest.mark.parametrize("case", CASES)
def test_tiles_give_one_thread_per_cells_bits_and_numpys_values(where, tiling, case):
    a, b, f = CASES[case]()
    if a.dtype != np.float64:
        a, b = a.astype(np.float32), b.astype(np.float32)
    forms = [
        tiled_matmul(nest, kernel).registers
        for kernel in ir(f(Tensor(a), Tensor(b))).kernels
        for _, nest in nests(kernel.body)
        if tiled_matmul(nest, kernel) is not None
    ]
    assert forms, f"{case}: no nest of the graph reads as a matmul, so nothing here is tiled"
    if case == "register form, epilogue":
        assert any(forms), f"{case}: the matmuls are all in the memory form"
    tiled = run_on(f"{where}-tiles", make_device(where, tiling=tiling), a, b, f)
    cells = run_on(f"{where}-cells", make_device(where, tiling=None), a, b, f)
    want = f(Tensor(a), Tensor(b)).numpy()
    assert tiled.tobytes() == cells.tobytes(), (
        f"{case} under {tiling}: tiles and one thread per cell differ by {np.abs(tiled - cells).max()}"
    )
    np.testing.assert_allclose(tiled, want, rtol=1e-5, atol=1e-5, err_msg=f"{case} under {tiling}")
