"""The third CUDA kernel shape: a nest that reads as a matmul (limn.compiler.matmul_form) as a block per output tile,
both operands staged through shared memory a slab of the reduce axis at a time, a patch of cells in registers per
thread.

A Tiling says how: a block owns `rows x cols` output cells of one batch entry, its threads a `patch_rows x
patch_cols` patch each, strided across the tile (thread (tr, tc) holds rows tr, tr + rows / patch_rows, ... and
columns likewise), so neighbouring threads read neighbouring shared-memory words and store neighbouring columns.
Each pass stages a slab of `depth` reduce steps: a's rows x depth and b's depth x cols, every thread loading
whole passes of the same number of elements (the Tiling refuses widths whose slabs the block cannot fill in whole
passes), the element order following whichever axis the operand has contiguous, zeros past the edges. Each cell
then folds its terms from the slab in r order with the fma the plain nest spells, from the plain nest's start (the
ACC's identity, or in the memory form the value the fill nest stored), so a tile's bits are the one-thread-per-
cell shape's and the c device's. The register form's STORE and epilogue run per cell once its total is final.
Pipeline: IR -> matmul form -> **shared-memory tiles** (CUDA C, through cuda/source.py) -> NVRTC or the shim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from limn.compiler.cstyle import TYPES
from limn.compiler.ir import Acc, Accum, EndLoop, Instr, KernelIR
from limn.compiler.matmul_form import Matmul, coef, match_matmul


@dataclass(frozen=True)
class Tiling:
    """The widths of a matmul tile: output rows and columns per block, reduce steps per staged slab, and the
    rows and columns of the patch each thread folds in registers."""

    rows: int = 128
    cols: int = 128
    depth: int = 8
    patch_rows: int = 8
    patch_cols: int = 8

    def __post_init__(self) -> None:
        sizes = (self.rows, self.cols, self.depth, self.patch_rows, self.patch_cols)
        if min(sizes) < 1:
            raise ValueError(f"Tiling{sizes}: every width must be at least 1")
        if self.rows % self.patch_rows or self.cols % self.patch_cols:
            raise ValueError(
                f"Tiling{sizes}: a patch of {self.patch_rows} x {self.patch_cols} does not divide the tile of "
                f"{self.rows} x {self.cols}; choose patch widths that divide the tile's"
            )
        for name, slab in (("a", self.rows * self.depth), ("b", self.depth * self.cols)):
            if slab % self.threads:
                raise ValueError(
                    f"Tiling{sizes}: {self.threads} threads cannot stage {name}'s slab of {slab} elements in whole "
                    "passes (a part pass would leave shared memory nobody wrote); make the slab a multiple of "
                    "the threads"
                )

    @property
    def down(self) -> int:
        """Threads down the tile: a thread's patch rows are this far apart."""
        return self.rows // self.patch_rows

    @property
    def across(self) -> int:
        """Threads across the tile: a thread's patch columns are this far apart."""
        return self.cols // self.patch_cols

    @property
    def threads(self) -> int:
        return self.down * self.across

    def cells(self, thread: int) -> list[tuple[int, int]]:
        """The (row, column) cells within the tile that `thread` folds, as the kernel computes them."""
        tr, tc = thread // self.across, thread % self.across
        return [
            (tr + p * self.down, tc + q * self.across) for p in range(self.patch_rows) for q in range(self.patch_cols)
        ]

    def staged(self, thread: int, extent: int, first_fast: bool, other: int) -> list[tuple[int, int]]:
        """The slab elements `thread` stages, as (first, second) with first < extent and second < other, the
        first coordinate fastest when `first_fast`; for a's slab extent is depth and other rows, for b's
        extent is cols and other depth (each operand's contiguous axis is its fast one)."""
        count = extent * other // self.threads
        out = []
        for k in range(count):
            e = thread + k * self.threads
            out.append((e % extent, e // extent) if first_fast else (e // other, e % other))
        return out


GPU_TILING = Tiling()  # 256 threads, 64 cells each: 128 registers a thread on sm_90, 8 KiB of slabs (float32)


def tiled_matmul(nest: list[Instr], kernel: KernelIR) -> Matmul | None:
    """The matmul a nest renders as tiles, or None: every nest limn.compiler.matmul_form accepts."""
    return match_matmul(nest, kernel)


def tile_count(m: Matmul, tiling: Tiling) -> int:
    """Blocks of work: one per batch entry and output tile."""
    batch = math.prod(loop.extent for loop in m.batch)
    return batch * -(-m.i.extent // tiling.rows) * -(-m.j.extent // tiling.cols)


def render_tiles(renderer, kernel: KernelIR, start: int, nest: list[Instr], m: Matmul, tiling: Tiling) -> str:
    """The function body of the tiled nest (see the module docstring), grid-stride over the tiles."""
    t = TYPES[m.dtype].value
    fma = renderer.math_funcs[t]["fma"]
    ti, tj = max(-(-m.i.extent // tiling.rows), 1), max(-(-m.j.extent // tiling.cols), 1)
    pr, pc, nr, depth = tiling.patch_rows, tiling.patch_cols, m.r.extent, tiling.depth
    zero = f"total[p][q] = {renderer.literal(0, m.a.dtype)};"  # cells past the edge fold zeros, never stored
    lines = [
        f"    __shared__ {t} slab_a[{depth}][{tiling.rows}]; /* a's rows x depth, r-major */",
        f"    __shared__ {t} slab_b[{depth}][{tiling.cols}]; /* b's depth x cols */",
        f"    const int row_thread = threadIdx.x / {tiling.across}, col_thread = threadIdx.x % {tiling.across};",
        f"    for (int64_t tile = blockIdx.x; tile < {tile_count(m, tiling)}; tile += gridDim.x) {{",
    ]
    for k, loop in enumerate(m.batch):  # the batch entry, slowest first, then the tile's place in it
        inner = math.prod(later.extent for later in m.batch[k + 1 :]) * ti * tj
        lines.append(f"        const int64_t {loop.var} = tile / {inner} % {max(loop.extent, 1)};")
    lines += [
        f"        const int64_t row0 = tile / {tj} % {ti} * {tiling.rows}, col0 = tile % {tj} * {tiling.cols};",
        f"        {t} total[{pr}][{pc}];",
        *_each_cell(tiling, m, _start_of(renderer, m, nest), outside=zero),
        f"        for (int64_t k0 = 0; k0 < {nr}; k0 += {depth}) {{",
        *_stage(renderer, m, tiling, "a"),
        *_stage(renderer, m, tiling, "b"),
        "            __syncthreads();",
        f"            const int steps = {nr} - k0 < {depth} ? (int)({nr} - k0) : {depth};",
        "            for (int kk = 0; kk < steps; kk++) { /* r in order: each cell's fold is the plain nest's */",
        _line_of(kernel, start, nest, m),
        f"                {t} a_col[{pr}], b_row[{pc}];",
        "#pragma unroll",
        f"                for (int p = 0; p < {pr}; p++) a_col[p] = slab_a[kk][row_thread + p * {tiling.down}];",
        "#pragma unroll",
        f"                for (int q = 0; q < {pc}; q++) b_row[q] = slab_b[kk][col_thread + q * {tiling.across}];",
        "#pragma unroll",
        f"                for (int p = 0; p < {pr}; p++)",
        "#pragma unroll",
        f"                    for (int q = 0; q < {pc}; q++) total[p][q] = {fma}(a_col[p], b_row[q], total[p][q]);",
        "            }",
        "            __syncthreads(); /* the slabs are read before the next pass writes them */",
        "        }",
        *_each_cell(tiling, m, _finish(renderer, kernel, start, nest, m)),
        "    }",
    ]
    return "".join(line + "\n" for line in lines)


def _each_cell(tiling: Tiling, m: Matmul, body: list[str], outside: str = "") -> list[str]:
    """`body` for each cell of the thread's patch inside the matrix, with the cell's i and j counters set
    (`outside` first, for every cell of the patch, inside the matrix or past its edge)."""
    return [
        "#pragma unroll",
        f"        for (int p = 0; p < {tiling.patch_rows}; p++)",
        "#pragma unroll",
        f"            for (int q = 0; q < {tiling.patch_cols}; q++) {{",
        *([f"                {outside}"] if outside else []),
        f"                const int64_t {m.i.var} = row0 + row_thread + p * {tiling.down};",
        f"                const int64_t {m.j.var} = col0 + col_thread + q * {tiling.across};",
        f"                if ({m.i.var} < {m.i.extent} && {m.j.var} < {m.j.extent}) {{",
        *("                    " + line for line in body),
        "                }",
        "            }",
    ]


def _line_of(kernel: KernelIR, start: int, nest: list[Instr], m: Matmul) -> str:
    """The `#line` marker of the fold's ACCUM, for the fma that stands for it."""
    at = next(k for k, ins in enumerate(nest) if isinstance(ins, Accum))
    return f'#line {len(kernel.header_lines()) + start + at + 1} "{kernel.name}"'


def _start_of(renderer, m: Matmul, nest: list[Instr]) -> list[str]:
    """Where each cell's fold starts: the ACC's identity, or (memory form) what the fill stored in out."""
    if m.registers:
        acc = next(ins for ins in nest if isinstance(ins, Acc))
        return [f"total[p][q] = {renderer.literal(acc.identity, acc.dtype)};"]
    return [f"total[p][q] = {m.out}[{renderer.index(m.out_index)}];"]


def _finish(renderer, kernel: KernelIR, start: int, nest: list[Instr], m: Matmul) -> list[str]:
    """What a cell does with its total: store it (memory form), or hand it to the register form's STORE and
    epilogue, spelled as the plain nest spells them behind their `#line` markers."""
    if not m.registers:
        return [f"{m.out}[{renderer.index(m.out_index)}] = total[p][q];"]
    acc = next(ins for ins in nest if isinstance(ins, Acc))
    renderer.dtype_of[acc.dst] = acc.dtype
    lines = [f"{renderer.value_type(acc.dtype)} {acc.dst} = total[p][q];"]
    r_end = next(k for k, ins in enumerate(nest) if isinstance(ins, EndLoop) and ins.var == m.r.var)
    depth = len(m.batch) + 2  # the output loops close at the end of the nest
    for offset in range(r_end + 1, len(nest) - depth):
        renderer._emit(lines, kernel, start + offset, nest[offset], 0)
    return lines


def _stage(renderer, m: Matmul, tiling: Tiling, which: str) -> list[str]:
    """The loads of one operand's slab for this pass: whole passes of the block's threads, zeros past the
    matrix's edges, the operand's contiguous axis fastest so a warp's loads are neighbours."""
    load = m.a if which == "a" else m.b
    r, other = m.r, (m.i if which == "a" else m.j)
    width = tiling.rows if which == "a" else tiling.cols
    passes = width * tiling.depth // tiling.threads
    origin = "row0" if which == "a" else "col0"
    if coef(load.index, r.var) == 1:  # r contiguous: consecutive threads take consecutive reduce steps
        place = f"const int kk = e % {tiling.depth}, at = e / {tiling.depth};"
    else:
        place = f"const int at = e % {width}, kk = e / {width};"
    return [
        "#pragma unroll",
        f"            for (int pass = 0; pass < {passes}; pass++) {{",
        f"                const int e = threadIdx.x + pass * {tiling.threads};",
        f"                {place}",
        f"                const int64_t {other.var} = {origin} + at, {r.var} = k0 + kk;",
        f"                slab_{which}[kk][at] = {other.var} < {other.extent} && {r.var} < {r.extent} "
        f"? {load.buf}[{renderer.index(load.index)}] : 0;",
        "            }",
    ]
