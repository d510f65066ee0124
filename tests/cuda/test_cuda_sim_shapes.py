"""The CUDA kernel shapes run on cuda-sim (the emitted CUDA C, compiled as C++ and run on CPU threads), and on the
GPU where there is one, against the numpy device:
- one thread per cell: a grid-stride walk past one launch's threads (4 blocks of 32 on cuda-sim, 32 blocks of 256
  per multiprocessor on a GPU) covers every cell once;
- scatters: every add of a scatter landing on one row, for each dtype the atomics cover (narrow cells by
  compare-and-swap on their word), exact for the ints;
- the long fold (a block per cell, partial totals, a fixed tree): sums, maxima, an int total, a float16 total, a
  fold with an epilogue, at the tolerance of a regrouped sum, and the same bits on a second run.
Marked `cuda`: nox -s "tests(cuda-sim)" runs it (each graph is a g++ build)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from cuda_devices import WHERE

import limn
from limn import Tensor
from limn.compiler.codegen import ir
from limn.cuda.source import LONG_FOLD, CudaRenderer

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")]
rng = np.random.default_rng(0)


def on(device: str, build):
    """build()'s value computed on `device` ("gpu": the cuda device, the test skipped without one)."""
    try:
        limn.set_device("cuda" if device == "gpu" else device)
    except limn.DeviceError as e:
        pytest.skip(f"no CUDA device: {e}")
    try:
        return build().numpy()
    finally:
        limn.set_device("numpy")


@pytest.mark.parametrize("where", WHERE)
def test_a_grid_stride_walk_covers_every_cell_once(where):
    # cuda-sim: 4551 cells, 128 threads, 36 passes each; a GPU (at most 132 SMs x 32 blocks x 256): 3.3M cells
    shape = (37, 41, 3) if where == "cuda-sim" else (1100, 1000, 3)
    x = rng.standard_normal(shape).astype(np.float32)
    build = lambda: (Tensor(x).permute(2, 0, 1) * 2 + 1).contiguous()  # noqa: E731
    np.testing.assert_array_equal(on(where, build), on("numpy", build))


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int16", "int8", "uint8", "float16"])
def test_every_add_of_a_scatter_lands_on_one_row(dtype, where):
    np_dtype = limn.dtypes.as_dtype(dtype).np
    src = rng.integers(0, 3, (300, 5)) if dtype in ("uint8", "int8") else rng.integers(-3, 4, (300, 5))
    src = src.astype(np_dtype)
    idx = np.full(300, 2, np.int32)  # every row adds into row 2
    build = lambda: Tensor.zeros(4, 5, dtype=limn.dtypes.as_dtype(dtype)).index_add(0, Tensor(idx), Tensor(src))  # noqa: E731
    got, want = on(where, build), on("numpy", build)
    if dtype == "float16":  # each add rounds to float16, in whatever order the adds land
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-2, atol=1.0)
    else:  # small integers: exact in any order
        np.testing.assert_array_equal(got, want)


FOLDS = {
    "row sums": lambda x: x.sum(1),
    "a total and its mean": lambda x: x.mean(),
    "row maxima": lambda x: x.max(axis=1),
    "an int total": lambda x: (x * 10).cast(limn.int32).sum(1),
    "a float16 total": lambda x: x.cast(limn.float16).sum(1),
    "a log-sum-exp (fold, epilogue)": lambda x: (x - x.max(axis=1, keepdim=True)).exp().sum(1).log(),
}


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("name", FOLDS)
def test_a_long_fold_runs_a_block_per_cell_and_matches_numpy(name, where):
    x = rng.random((3, LONG_FOLD + 1234)).astype(np.float32)  # positive terms: no cancellation to magnify rounding
    build = lambda: FOLDS[name](Tensor(x))  # noqa: E731
    blocks = [launch.block for k in ir(build()).kernels for launch in CudaRenderer().render(k).launches]
    assert 256 in blocks, f"{name}: no long-fold launch in {blocks}"
    got, want = on(where, build), on("numpy", build)
    tol = 2e-3 if name == "a float16 total" else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    assert on(where, build).tobytes() == got.tobytes(), f"{name}: a second run gave other bits"
