"""CUDA C for the loop-nest IR: the C-style base (limn.compiler.cstyle) with what CUDA spells differently, one
`__global__` function per top-level nest, and the rule that picks how each nest's work is spread over threads.

The shape here is the first of the spec's three: one thread per output cell, walking the cells grid-stride, with
every reduce loop run in order inside the thread, so a cell folds its terms in the C device's order and its bits
are the C device's but for the math library's. Which loops are the cells (`cell_loops`):
  - a scatter nest (an ACCUM at an index read from memory): every non-reduce loop, and the colliding adds go
    through atomics (limn.cuda.prelude.ATOMICS), the one place two threads touch one cell;
  - a nest whose every non-reduce loop appears once and whose every write names all of their counters: all of
    them, wherever they sit (a matmul's column loop inside its reduce loop becomes a coordinate of the thread);
  - any other nest: its leading loops (ir.leading_loops), the loops the C device's OpenMP team splits.
The second shape, a long fold over few cells (`long_fold`: at most FEW_CELLS cells, a register total over at least
LONG_FOLD terms), gives each cell a block: its threads fold strided slices of the terms, then a fixed tree in
shared memory folds their partial totals and thread 0 runs the epilogue. It is the one shape that regroups the
arithmetic (the partial totals), so its float results differ from the C device's in rounding; the tree's order
is fixed, so two runs give the same bits. The third, a nest that reads as a matmul (limn.compiler.matmul_form decides),
gets a block per output tile with both operands staged through shared memory (limn.cuda.matmul, Tiling); each
cell still folds r in order with the plain nest's fma, so it keeps the first shape's bits. A nest takes the long
fold when it has that shape, else the tiles when it is a matmul, else one thread per cell.
Each statement is preceded by `#line N "kernel"`, N the IR instruction's line in the kernel's printout, so an
NVRTC (or g++) error names the instruction it came from.
Pipeline: tensor -> graph -> schedule -> IR -> **CUDA C** (a CudaProgram) -> NVRTC -> the driver, or the shim.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from limn.compiler.cstyle import TYPES, CStyle, Decided
from limn.compiler.half_widths import HALF_WIDTHS
from limn.compiler.ir import (
    Acc,
    Accum,
    EndLoop,
    Instr,
    KernelIR,
    Loop,
    LoopVar,
    Store,
    is_scatter,
    leading_loops,
    top_level,
)
from limn.cuda.matmul import GPU_TILING, Tiling, render_tiles, tile_count, tiled_matmul
from limn.cuda.prelude import ATOMICS, PRELUDE
from limn.cuda.program import CudaProgram, Launch
from limn.runtime.device import DeviceError


class CudaUnsupported(DeviceError):
    """A kernel the cuda renderer cannot express: the message says which instruction and why."""


def nests(body: tuple[Instr, ...]) -> list[tuple[int, list[Instr]]]:
    """The body's top-level nests, each with the index of its first instruction: a LOOP ... ENDLOOP over a
    non-reduce dim at depth 0, or a run of what lies between them (straight-line instructions and reduce loops
    at depth 0: a 0-d kernel's total, folded by one thread)."""
    out: list[tuple[int, list[Instr]]] = []
    run: tuple[int, list[Instr]] | None = None
    for start, piece in top_level(body):
        if isinstance(piece[0], Loop) and not piece[0].reduce:
            if run is not None:
                out.append(run)
                run = None
            out.append((start, piece))
        else:
            run = (start, piece) if run is None else (run[0], run[1] + piece)
    if run is not None:
        out.append(run)
    return out


def cell_loops(nest: list[Instr]) -> list[Loop]:
    """The loops whose counters become a thread's coordinates (see the module docstring for the rule)."""
    loops = [ins for ins in nest if isinstance(ins, Loop) and not ins.reduce]
    if any(is_scatter(ins) for ins in nest):
        return loops
    counters = {loop.var for loop in loops}
    once = len(counters) == len(loops)
    writes = [ins for ins in nest if isinstance(ins, Store) or (isinstance(ins, Accum) and ins.index is not None)]
    if once and all(counters <= {t for t, _ in w.index.terms if isinstance(t, LoopVar)} for w in writes):
        return loops
    return leading_loops(nest)


def coordinates(cells: list[Loop]) -> list[str]:
    """Each cell loop's counter from the flat cell number, the first loop the slowest-moving (an empty loop
    leaves no cell to number: the walk over `cell` never starts)."""
    lines = []
    for k, loop in enumerate(cells):
        inner = math.prod(later.extent for later in cells[k + 1 :])
        lines.append(f"        const int64_t {loop.var} = cell / {inner} % {max(loop.extent, 1)};")
    return lines


FEW_CELLS = 1024  # a nest with at most this many cells leaves most of a GPU idle at one thread per cell
LONG_FOLD = 4096  # and a register total over at least this many terms is worth a block per cell
FOLD_BLOCK = 256  # threads folding one cell's terms on a GPU (a power of two: the tree halves it)


@dataclass(frozen=True)
class Fold:
    """A nest of the long-fold shape: its register total (the ACC), the reduce loop folding into it and the
    positions of both in the nest; what comes before the ACC and after the loop runs as it is written."""

    acc: Acc
    loop: Loop
    acc_at: int
    loop_at: int
    end_at: int
    accum: Accum


def long_fold(nest: list[Instr], cells: list[Loop]) -> Fold | None:
    """The long-fold shape of a nest (see the module docstring), or None: few cells, one ACC, one reduce loop
    of at least LONG_FOLD terms right inside the cell loops, a straight-line body with one ACCUM into that ACC,
    and no other loop."""
    if math.prod(loop.extent for loop in cells) > FEW_CELLS or any(is_scatter(ins) for ins in nest):
        return None
    cell_vars = {loop.var for loop in cells}
    inner = [(i, ins) for i, ins in enumerate(nest) if not (isinstance(ins, (Loop, EndLoop)) and ins.var in cell_vars)]
    loops = [(i, ins) for i, ins in inner if isinstance(ins, Loop)]
    accs = [(i, ins) for i, ins in inner if isinstance(ins, Acc)]
    if len(loops) != 1 or len(accs) != 1 or not loops[0][1].reduce or loops[0][1].extent < LONG_FOLD:
        return None
    (loop_at, loop), (acc_at, acc) = loops[0], accs[0]
    end_at = next(i for i, ins in inner if isinstance(ins, EndLoop) and ins.var == loop.var)
    body = nest[loop_at + 1 : end_at]
    accums = [ins for ins in body if isinstance(ins, Accum)]
    if acc_at > loop_at or len(accums) != 1 or accums[0].index is not None or accums[0].target != acc.dst:
        return None
    return Fold(acc, loop, acc_at, loop_at, end_at, accums[0])


class CudaRenderer(CStyle):
    """Renders a KernelIR as a CudaProgram: the prelude, then `extern "C" __global__ void NAME_nK(...)` per nest."""

    type_map = {**TYPES, **HALF_WIDTHS}
    kernel_prefix = 'extern "C" __global__ '
    restrict = "__restrict__"

    def __init__(self, fold_block: int = FOLD_BLOCK, tiling: Tiling | None = GPU_TILING) -> None:
        assert fold_block > 0 and fold_block & (fold_block - 1) == 0, f"fold_block {fold_block}: a power of two"
        self.fold_block = fold_block
        self.tiling = tiling  # None: matmuls keep one thread per cell (tests compare the two shapes)

    def render(self, kernel: KernelIR) -> CudaProgram:  # type: ignore[override]
        self.begin(kernel)
        self.atomic: set[int] = set()
        params = [self.param(b, True) for b in kernel.inputs] + [self.param(b, False) for b in kernel.outputs]
        bodies = [(start, nest, cell_loops(nest)) for start, nest in nests(kernel.body)]
        for _, nest, _ in bodies:
            self._mark_atomics(nest)
        folds = [long_fold(nest, cells) for _, nest, cells in bodies]
        tiled = [fold is None and self.tiling is not None for fold in folds]
        tiles = [tiled_matmul(nest, kernel) if ok else None for (_, nest, _), ok in zip(bodies, tiled)]
        texts = []
        for (start, nest, cells), fold, tile in zip(bodies, folds, tiles):
            if fold is not None:
                texts.append(self._fold_body(kernel, start, nest, cells, fold))
            elif tile is not None:
                texts.append(render_tiles(self, kernel, start, nest, tile, self.tiling))
            else:
                texts.append(self._function_body(kernel, start, nest, cells))
        digest = hashlib.sha256(("".join(texts) + ",".join(params)).encode()).hexdigest()[:16]
        name = f"limn_{kernel.op.name.lower()}_{digest}"
        functions, launches = [], []
        types = tuple(p.split(f" {self.restrict} ")[0] for p in params)
        for k, ((_, _, cells), fold, tile, text) in enumerate(zip(bodies, folds, tiles, texts)):
            fn = f"{name}_n{k}"
            functions.append(f"{self.kernel_prefix}void {fn}({', '.join(params)}) {{\n{text}}}\n")
            total = math.prod(loop.extent for loop in cells)
            if fold is not None:  # a block per cell
                launches.append(Launch(fn, types, total * self.fold_block, block=self.fold_block))
            elif tile is not None:  # a block per output tile
                threads = self.tiling.threads
                launches.append(Launch(fn, types, tile_count(tile, self.tiling) * threads, block=threads))
            else:
                launches.append(Launch(fn, types, total))
        header = f"/* {kernel.name}: {kernel.op.name} over loop{list(kernel.loop_shape)} */\n"
        return CudaProgram(PRELUDE + "\n" + header + "\n".join(functions), tuple(launches))

    def _mark_atomics(self, nest: list[Instr]) -> None:
        """Scatter ACCUMs go through an atomic, so the MUL before one is not folded into an fma there."""
        for ins in nest:
            if is_scatter(ins):
                self.atomic.add(id(ins))
                mul = self.fma_of.by_accum.pop(id(ins), None)
                if mul is not None:
                    self.fma_of.fused.discard(mul.dst)

    def _function_body(self, kernel: KernelIR, start: int, nest: list[Instr], cells: list[Loop]) -> str:
        """A grid-stride loop over the nest's cells, each cell's coordinates, then the nest without its cell
        loops, one statement per instruction."""
        total = math.prod(loop.extent for loop in cells)
        lines = [
            "    const int64_t stride = (int64_t)gridDim.x * blockDim.x;",
            "    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;",
            f"    for (int64_t cell = first; cell < {total}; cell += stride) {{",
        ]
        lines += coordinates(cells)
        cell_vars = {loop.var for loop in cells}
        depth = 2
        for offset, ins in enumerate(nest):
            if isinstance(ins, (Loop, EndLoop)) and ins.var in cell_vars:
                continue
            if isinstance(ins, Loop):
                lines.append("    " * depth + self.loop_head(ins.var, 0, ins.extent))
                depth += 1
            elif isinstance(ins, EndLoop):
                depth -= 1
                lines.append("    " * depth + "}")
            else:
                self._emit(lines, kernel, start + offset, ins, depth)
        lines.append("    }")
        return "".join(line + "\n" for line in lines)

    def _fold_body(self, kernel: KernelIR, start: int, nest: list[Instr], cells: list[Loop], fold: Fold) -> str:
        """A block per cell, grid-stride over the cells: each thread folds terms threadIdx.x, + blockDim.x, ...
        into its own total, the block's totals meet in a fixed tree in shared memory, and thread 0 runs what
        follows the loop with the block's total in the ACC's place."""
        total, block = math.prod(loop.extent for loop in cells), self.fold_block
        acc, var, ctype = fold.acc.dst, fold.loop.var, self.value_type(fold.acc.dtype)
        combine = self.op(
            fold.accum.op,
            ["partial[threadIdx.x]", "partial[threadIdx.x + half]"],
            fold.acc.dtype.compute,
            fold.acc.dtype.compute,
        )
        lines = [
            f"    __shared__ {ctype} partial[{block}];",
            f"    for (int64_t cell = blockIdx.x; cell < {total}; cell += gridDim.x) {{",
        ]
        lines += coordinates(cells)
        cell_vars = {loop.var for loop in cells}
        for offset, ins in enumerate(nest):
            if isinstance(ins, (Loop, EndLoop)) and ins.var in cell_vars:
                continue
            if offset == fold.loop_at:
                lines.append(
                    f"        for (int64_t {var} = threadIdx.x; {var} < {fold.loop.extent}; {var} += blockDim.x) {{"
                )
            elif offset == fold.end_at:
                lines += [
                    "        }",
                    f"        partial[threadIdx.x] = {acc};",
                    "        __syncthreads();",
                    "        for (int half = blockDim.x / 2; half > 0; half /= 2) { /* the fixed tree */",
                    f"            if (threadIdx.x < half) partial[threadIdx.x] = {combine};",
                    "            __syncthreads();",
                    "        }",
                    f"        {acc} = partial[0];",
                    "        if (threadIdx.x == 0) {",
                ]
            else:
                self._emit(lines, kernel, start + offset, ins, 3 if offset > fold.loop_at else 2)
        lines += ["        }", "        __syncthreads(); /* partial is read before the next cell writes it */", "    }"]
        return "".join(line + "\n" for line in lines)

    def _emit(self, lines: list[str], kernel: KernelIR, at: int, ins: Instr, depth: int) -> None:
        """One straight-line instruction, behind the `#line` marker of its line in the kernel's printout."""
        text = self.statement(ins, {})
        if text is not None:
            lines.append(f'#line {len(kernel.header_lines()) + at + 1} "{kernel.name}"')
            lines.append("    " * depth + text)

    def spell(self, ins: Instr, decided: Decided) -> str | None:
        if isinstance(ins, Accum) and id(ins) in self.atomic:
            return self._atomic(ins)
        return super().spell(ins, decided)

    def _atomic(self, ins: Accum) -> str:
        """A scatter's ACCUM as the atomic that adds (or takes the max) into its cell."""
        dtype = self.buf_dtype[ins.target]
        helper = ATOMICS.get((ins.op, dtype))
        if helper is None:
            raise CudaUnsupported(
                f"cuda: {self.kernel.name} scatters with {ins.op.name} into {dtype.name} ({ins}): there is no "
                f"atomic {ins.op.name} of {dtype.name} (limn.cuda.prelude.ATOMICS); scatter into float32 (cast "
                "before and after), or run this graph on the c device"
            )
        src = ins.src
        if self.value_type(self.dtype_of[ins.src]) != self.value_type(dtype):
            src = self.cast(src, self.dtype_of[ins.src], dtype)
        return f"{helper}(&{ins.target}[{self.index(ins.index)}], {src});"
