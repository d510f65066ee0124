"""The CUDA renderer's emission rules (limn.cuda.source), read off the source it writes, with no GPU:
- a nest becomes one `__global__` function walking its cells grid-stride; which loops are the cells follows
  the rule in the module docstring (an untiled matmul's column loop inside its reduce loop is a cell coordinate, a
  repeated counter keeps the leading loops only, a 0-d total is one nest of one cell);
- a scatter's adds go through the prelude's atomics (a narrow cell's by compare-and-swap on its word), and a
  scatter with no atomic is declined with the reason and what to do;
- a long fold over few cells gets a block per cell (partial totals, a tree in shared memory), a short fold or
  many cells keep one thread per cell;
- every statement carries a `#line` marker giving the IR instruction's line in the kernel's printout."""

from __future__ import annotations

import re

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.compiler.codegen import ir
from limn.compiler.ir import Accum, BufferArg, EndLoop, KernelIR, LoadI, Loop, LoopVar, Store, Value
from limn.compiler.ir import Index as Ix
from limn.cuda.source import FEW_CELLS, FOLD_BLOCK, LONG_FOLD, CudaRenderer, CudaUnsupported, cell_loops, nests
from limn.graph.ops import Op


def kernels_of(*tensors: Tensor) -> list[KernelIR]:
    return [k for k in ir(*tensors).kernels if k.custom is None]


def only(*tensors: Tensor) -> KernelIR:
    (kernel,) = kernels_of(*tensors)
    return kernel


rng = np.random.default_rng(0)


def t(*shape: int, dtype=np.float32) -> Tensor:
    return Tensor(rng.standard_normal(shape).astype(dtype))


def test_a_matmul_nest_untiled_walks_rows_and_columns_as_cells_with_the_reduce_in_each_thread():
    kernel = only(t(4, 6) @ t(6, 3))
    (fill, fold) = [nest for _, nest in nests(kernel.body)]
    assert [loop.var.name for loop in cell_loops(fold)] == ["i0", "i1"], kernel
    program = CudaRenderer(tiling=None).render(kernel)  # tiles off: the first shape (tiles: test_cuda_matmul_tiles)
    assert [launch.cells for launch in program.launches] == [12, 12]
    fold_fn = program.source.split("_n1(")[1]
    assert "cell / 3 % 4" in fold_fn and "cell / 1 % 3" in fold_fn, fold_fn
    assert re.search(r"for \(int64_t r2 = 0; r2 < 6; r2\+\+\)", fold_fn) and "for (int64_t i1" not in fold_fn


def test_a_0d_total_is_one_nest_of_one_cell():
    kernel = only(t(5).sum())
    assert len(nests(kernel.body)) == 1, kernel
    program = CudaRenderer().render(kernel)
    assert [launch.cells for launch in program.launches] == [1], program.source


def test_a_repeated_counter_keeps_the_leading_loops_only():
    i0, i1 = LoopVar("i0"), LoopVar("i1")
    v = Value("v0")
    store = Store("out", Ix(((i0, 2), (i1, 1))), v)
    nest = [Loop(i0, 3), Loop(i1, 2), store, EndLoop(i1), Loop(i1, 2), store, EndLoop(i1), EndLoop(i0)]
    assert [loop.var.name for loop in cell_loops(nest)] == ["i0", "i1"]  # the leading perfect loops, once each


def test_a_scatter_adds_through_atomics():
    target = Tensor.zeros(3, 6)
    idx = Tensor(np.array([0, 2, 2, 1], np.int32))
    kernel = only(target.index_add(0, idx, t(4, 6)))
    source = CudaRenderer().render(kernel).source.split("/* k", 1)[1]
    assert "limn_atomic_add_f32(&out[" in source, source


@pytest.mark.parametrize(
    "dtype, helper",
    [(limn.int8, "limn_atomic_add_i8"), (limn.int16, "limn_atomic_add_i16"), (limn.float16, "limn_atomic_add_f16")],
)
def test_a_narrow_scatter_adds_by_compare_and_swap_on_its_word(dtype, helper):
    """CUDA's atomics start at 32 bits: a narrow cell is updated through the word that holds it (the spec has
    such a scatter decline; every dtype scatters here, and tests/test_backend_corpus.py diffs it on cuda-sim)."""
    target = Tensor.zeros(3, 6, dtype=dtype)
    idx = Tensor(np.array([0, 2, 2, 1], np.int32))
    kernel = only(target.index_add(0, idx, Tensor(np.ones((4, 6), dtype.np))))
    assert f"{helper}(&out[" in CudaRenderer().render(kernel).source.split("/* k", 1)[1]


def test_a_scatter_with_no_atomic_is_declined_with_the_reason():
    """A float16 MAX into memory at indices read from memory: no helper, so the renderer says what to do."""
    i0, v0, v1 = LoopVar("i0"), Value("v0"), Value("v1")
    body = (
        Loop(i0, 4),
        LoadI(v0, "in0", Ix(((i0, 1),)), limn.int32),
        LoadI(v1, "in1", Ix(((i0, 1),)), limn.float16),
        Accum("out", Ix(((v0, 1),)), Op.MAX, v1),
        EndLoop(i0),
    )
    ins = (BufferArg("in0", 0, limn.int32, (4,)), BufferArg("in1", 1, limn.float16, (4,)))
    kernel = KernelIR("k0", Op.SCATTER, (4,), ins, (BufferArg("out", 2, limn.float16, (3,)),), body)
    with pytest.raises(CudaUnsupported, match="no atomic MAX of float16.*or run this graph on the c device"):
        CudaRenderer().render(kernel)


def test_every_statement_names_its_ir_line():
    kernel = only((t(4, 6) * 2).exp() + 1)
    printed = str(kernel).splitlines()
    source = CudaRenderer().render(kernel).source
    body = source.split("/* k", 1)[1].splitlines()
    marks = [(n, re.match(r'#line (\d+) "k0"', line)) for n, line in enumerate(body)]
    pairs = [(int(m.group(1)), body[n + 1].strip()) for n, m in marks if m]
    assert pairs, source
    for line, statement in pairs:
        instr = printed[line - 1].split()
        if instr[0] in ("LOAD", "ARITH", "CONST"):
            assert f" {instr[1]} = " in statement, (printed[line - 1], statement)
        if instr[0] == "STORE":
            assert statement.startswith("out["), (printed[line - 1], statement)


def test_a_long_fold_over_few_cells_gets_a_block_per_cell():
    """Three rows of LONG_FOLD terms: one block of FOLD_BLOCK threads per row, a fixed tree in shared memory."""
    program = CudaRenderer().render(only(t(3, LONG_FOLD).sum(1)))
    (launch,) = program.launches
    assert (launch.block, launch.cells) == (FOLD_BLOCK, 3 * FOLD_BLOCK), launch
    assert f"__shared__ float partial[{FOLD_BLOCK}];" in program.source and "__syncthreads();" in program.source


@pytest.mark.parametrize("shape", [(3, LONG_FOLD - 1), (FEW_CELLS + 1, LONG_FOLD)], ids=["short fold", "many cells"])
def test_a_short_fold_or_many_cells_keep_one_thread_per_cell(shape):
    (launch,) = CudaRenderer().render(only(t(*shape).sum(1))).launches
    assert launch.block is None and launch.cells == shape[0], launch


def test_an_empty_tensor_renders_a_walk_over_no_cells():
    kernel = only(Tensor(np.zeros((0, 3), np.float32)) + 1)
    (launch,) = CudaRenderer().render(kernel).launches
    assert launch.cells == 0, launch
