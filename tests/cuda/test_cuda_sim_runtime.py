"""Rules for the CUDA-on-CPU runtime (cuda_sim.py), on hand-written CUDA C with numpy as the oracle:
- a grid-stride loop capped at max_blocks blocks writes every cell once;
- a block reduction through `__shared__` and `__syncthreads()` sums what numpy sums, run by a Launch's own block;
- launches run in order, each seeing what the one before wrote;
- atomicAdd (float, int) and atomicMax from every thread on one cell lose no update;
- dynamic shared memory (`extern __shared__`) is Launch.shared_bytes of storage shared by the block;
- threads of a block waiting at different barriers fail the launch naming both lines; an early return does not hang;
- g++'s rejection raises SimCompileError with g++'s message; a second compile of the same program is a cache hit,
  and a cached library whose bytes no longer match their checksum (truncated, overwritten) is rebuilt, not loaded.
Values are integer-valued floats, so sums are exact in any order and comparisons can be exact too.
"""

import os
import shutil

import numpy as np
import pytest

from limn.cuda.program import CudaProgram, Launch
from limn.cuda.sim.runtime import SimCompileError, SimLaunchError, SimRuntime

# a g++ build per test (a few seconds each): nox -s "tests(cuda-sim)" runs them, not the default suite
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")]

GRID_STRIDE_ADD = """
extern "C" __global__ void add(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < 1000; i += blockDim.x * gridDim.x) {
        out[i] += a[i] + b[i];  // += so a cell written twice shows
    }
}
"""

# a block folds its grid-stride partial totals through shared memory: a barrier missing or misplaced reads a
# slot before its writer has written it
BLOCK_SUM = """
extern "C" __global__ void __launch_bounds__(16) partial(const float* x, float* partials, float* total) {
    __shared__ float slots[16];
    float sum = 0.0f;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < 1000; i += blockDim.x * gridDim.x) sum += x[i];
    slots[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned half = 8; half > 0; half /= 2) {
        if (threadIdx.x < half) slots[threadIdx.x] += slots[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = slots[0];
}

extern "C" __global__ void fold(const float* x, float* partials, float* total) {
    float sum = 0.0f;
    for (int b = 0; b < 4; ++b) sum += partials[b];
    total[0] = sum;
}
"""

ATOMICS = """
extern "C" __global__ void hit(const float* x, float* fsum, int* isum, int* imax) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < 512; i += blockDim.x * gridDim.x) {
        atomicAdd(&fsum[0], x[i]);
        atomicAdd(&isum[0], i);
        atomicMax(&imax[0], i);
    }
}
"""


@pytest.fixture
def runtime(tmp_path) -> SimRuntime:
    return SimRuntime(cache=tmp_path / "cache", max_blocks=4)


def run(runtime: SimRuntime, program: CudaProgram, arrays: list[np.ndarray], block: int) -> None:
    runtime.run(runtime.compile(program), program, [a.ctypes.data for a in arrays], block)


def test_grid_stride_add_writes_every_cell_once(runtime):
    program = CudaProgram(GRID_STRIDE_ADD, (Launch("add", ("const float*", "const float*", "float*"), cells=1000),))
    a, b = np.arange(1000, dtype=np.float32), np.full(1000, 3, np.float32)
    out = np.zeros(1000, np.float32)
    run(runtime, program, [a, b, out], block=8)  # grid min(125, 4) = 4: each thread walks ~31 strides
    np.testing.assert_array_equal(out, a + b)


def test_block_reduction_through_shared_memory_sums_what_numpy_sums(runtime):
    params = ("const float*", "float*", "float*")
    program = CudaProgram(BLOCK_SUM, (Launch("partial", params, cells=1000, block=16), Launch("fold", params, 1, 1)))
    x = (np.arange(1000) % 7).astype(np.float32)
    partials, total = np.zeros(4, np.float32), np.zeros(1, np.float32)
    run(runtime, program, [x, partials, total], block=8)  # partial's own block 16 wins over 8
    assert partials.sum() == x.sum() and np.all(partials > 0), partials  # all 4 blocks ran
    assert total[0] == x.sum()


def test_atomics_from_every_thread_on_one_cell_lose_no_update(runtime):
    program = CudaProgram(ATOMICS, (Launch("hit", ("const float*", "float*", "int*", "int*"), cells=512),))
    x = (np.arange(512) % 5 * 0.5).astype(np.float32)  # halves: every partial sum is exact in float32
    fsum, isum, imax = np.zeros(1, np.float32), np.zeros(1, np.int32), np.full(1, -1, np.int32)
    run(runtime, program, [x, fsum, isum, imax], block=128)  # 4 blocks of 128: 512 threads, one cell each
    assert fsum[0] == x.sum()
    assert isum[0] == 512 * 511 // 2
    assert imax[0] == 511


def test_dynamic_shared_memory_is_shared_by_the_block(runtime):
    source = """
extern "C" __global__ void reverse(const int* x, int* out) {
    extern __shared__ __align__(16) int staged[];
    staged[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = staged[blockDim.x - 1 - threadIdx.x];
}
"""
    program = CudaProgram(source, (Launch("reverse", ("const int*", "int*"), 64, block=16, shared_bytes=64),))
    x, out = np.arange(64, dtype=np.int32), np.zeros(64, np.int32)
    run(runtime, program, [x, out], block=16)
    np.testing.assert_array_equal(out, x.reshape(4, 16)[:, ::-1].ravel())


def test_threads_at_different_barriers_fail_the_launch_naming_both_lines(runtime):
    source = """extern "C" __global__ void split(int* out) {
    if (threadIdx.x % 2 == 0) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1;
}
"""
    program = CudaProgram(source, (Launch("split", ("int*",), cells=8),))
    with pytest.raises(SimLaunchError, match=r"launch 'split'.*different __syncthreads\(\).*lines 3 and 5"):
        run(runtime, program, [np.zeros(8, np.int32)], block=8)


def test_a_thread_returning_before_a_barrier_does_not_hang_it(runtime):
    source = """
extern "C" __global__ void guarded(int* out) {
    __shared__ int slots[8];
    if (threadIdx.x >= 5) return;  // a bounds guard ahead of a barrier: the block's tail drops out
    slots[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = slots[4 - threadIdx.x];
}
"""
    program = CudaProgram(source, (Launch("guarded", ("int*",), cells=8),))
    out = np.full(8, -1, np.int32)
    run(runtime, program, [out], block=8)
    assert out.tolist() == [4, 3, 2, 1, 0, -1, -1, -1]


def test_a_compile_error_raises_with_gxx_message_and_the_line(runtime):
    source = 'extern "C" __global__ void broken(float* out) {\n    out[0] = undeclared_value;\n}\n'
    program = CudaProgram(source, (Launch("broken", ("float*",), cells=1),))
    with pytest.raises(SimCompileError) as caught:
        runtime.compile(program)
    message = str(caught.value)
    assert "g++" in message and "-std=c++20" in message  # the command
    assert "program.cu:2" in message and "'undeclared_value' was not declared" in message  # g++'s output
    assert "    2 |     out[0] = undeclared_value;" in message  # the line it names


def test_a_second_compile_of_the_same_program_is_a_cache_hit(tmp_path):
    program = CudaProgram(GRID_STRIDE_ADD, (Launch("add", ("const float*", "const float*", "float*"), cells=1000),))
    first = SimRuntime(cache=tmp_path / "cache")
    first.compile(program)
    second = SimRuntime(cache=tmp_path / "cache")  # a fresh runtime: only the disk cache can answer
    module = second.compile(program)
    assert (first.builds, second.builds) == (1, 0)
    left = sorted(p.name.split(".", 1)[1] for p in (tmp_path / "cache").iterdir())
    assert left == ["hpp", "hpp.gch", "sha256", "so"], left  # library, its checksum, the shim; no temp file
    a, b, out = np.ones(1000, np.float32), np.ones(1000, np.float32), np.zeros(1000, np.float32)
    second.run(module, program, [a.ctypes.data, b.ctypes.data, out.ctypes.data], block=32)
    np.testing.assert_array_equal(out, 2)


@pytest.mark.parametrize("damage", ["truncate", "overwrite", "drop the checksum"])
def test_a_damaged_cache_entry_is_rebuilt_not_loaded(tmp_path, damage):
    program = CudaProgram(GRID_STRIDE_ADD, (Launch("add", ("const float*", "const float*", "float*"), cells=1000),))
    SimRuntime(cache=tmp_path / "cache").compile(program)
    (library,) = (tmp_path / "cache").glob("*.so")
    # the damage lands as a new file in the slot: this process has the old one mapped, and writing into a
    # mapped library would break the process, not the cache
    spoiled = tmp_path / "spoiled"
    if damage == "truncate":
        spoiled.write_bytes(library.read_bytes()[:100])
    elif damage == "overwrite":
        spoiled.write_bytes(b"\x7fELF" + b"\0" * 4000)  # an ELF header and nothing behind it
    if spoiled.exists():
        os.replace(spoiled, library)
    else:
        library.with_suffix(".sha256").unlink()
    again = SimRuntime(cache=tmp_path / "cache")
    module = again.compile(program)
    assert again.builds == 1, f"{damage}: the damaged library was loaded from the cache"
    a, b, out = np.ones(1000, np.float32), np.ones(1000, np.float32), np.zeros(1000, np.float32)
    again.run(module, program, [a.ctypes.data, b.ctypes.data, out.ctypes.data], block=32)
    np.testing.assert_array_equal(out, 2)


def test_another_programs_library_in_a_slot_is_rebuilt_with_a_warning(tmp_path):
    """A library verifies against the slot it is loaded for: another program's library copied there with
    its checksum is not run (it would fail on a missing symbol, or compute the other program); it is built
    again, with a warning, and gives this program's numbers."""
    program = CudaProgram(GRID_STRIDE_ADD, (Launch("add", ("const float*", "const float*", "float*"), cells=1000),))
    other = CudaProgram(GRID_STRIDE_ADD.replace("a[i] + b[i]", "a[i] - b[i]"), program.launches)
    assert other.source != program.source, "the two programs must differ for the test to mean anything"
    SimRuntime(cache=tmp_path / "cache").compile(program)
    (mine,) = (tmp_path / "cache").glob("*.so")
    SimRuntime(cache=tmp_path / "cache").compile(other)
    (theirs,) = [p for p in (tmp_path / "cache").glob("*.so") if p != mine]
    for suffix in (".sha256", ".so"):  # each lands as a new file: this process keeps the old ones mapped
        copy = tmp_path / f"copy{suffix}"
        copy.write_bytes(theirs.with_suffix(suffix).read_bytes())
        os.replace(copy, mine.with_suffix(suffix))
    again = SimRuntime(cache=tmp_path / "cache")
    with pytest.warns(RuntimeWarning, match="does not verify"):
        module = again.compile(program)
    assert again.builds == 1
    a, b, out = np.ones(1000, np.float32), np.ones(1000, np.float32), np.zeros(1000, np.float32)
    again.run(module, program, [a.ctypes.data, b.ctypes.data, out.ctypes.data], block=32)
    np.testing.assert_array_equal(out, 2)
