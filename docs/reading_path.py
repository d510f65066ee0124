"""The reading path: the modules a reader reads, in order, to follow one tensor from `Tensor` to a C kernel and
back, with their line counts. `python docs/reading_path.py` prints the table; `--write` puts it in
docs/reading.md between its markers. tests/test_reading_path.py holds the page to this list and the path to
its budget.

The path ends at the C rewrites' table, which says which rewrite a loop takes and what each must keep
bit-identical to the plain nest; the rewrites themselves (tiles, jams, chunks, threads...) are the speed layer,
counted after the path with a budget of their own: every kernel renders without them, so a reader follows a
tensor to C first and reads them next. The composed catalogue, the fused attention kernels, the caches, nn and
the other devices are off the path: rooms a reader visits when a question leads there, not the corridor.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reading.md"
BEGIN, END = "<!-- reading path: begin -->", "<!-- reading path: end -->"

# The budgets in lines: each may only shrink. The redesign's target for the path is 6,000.
BUDGET = 6_225
SPEED_BUDGET = 852

# (distribution, module path under src/limn, what a reader learns there), in reading order
PATH = [
    ("limn-core", "frontend/tensor.py", "the Tensor a user holds: its bases, a mixin per composed module"),
    ("limn-core", "frontend/primitives.py", "Tensor's state, and the 19 primitives as methods, one Node each"),
    ("limn-core", "frontend/host.py", "what a tensor says about itself, and numpy(): the way back to the host"),
    ("limn-core", "graph/ops.py", "the op table, its groups, and the Node DAG"),
    ("limn-core", "graph/view.py", "layout as arithmetic: shape, strides, offset, mask"),
    ("limn-core", "dtypes.py", "the dtypes and how they mix"),
    ("limn-core", "autograd.py", "one gradient rule per primitive; backward() builds more graph"),
    ("limn-core", "runtime/engine.py", "realize: where a lazy graph is handed to a device"),
    ("limn-core", "runtime/snapshot.py", "assign's value semantics: what a value saw when it was built"),
    ("limn-core", "runtime/device.py", "the device protocol, buffers, and the registry"),
    ("limn-core", "runtime/numpy_device.py", "the reference: one numpy call per node"),
    ("limn-compiler", "compiler/schedule.py", "the scheduler's entry: a graph to kernels in run order"),
    ("limn-compiler", "compiler/cse.py", "equal computations become one node"),
    ("limn-compiler", "compiler/fusion.py", "which values get a buffer, each with its Reason"),
    ("limn-compiler", "compiler/kernel.py", "a kernel as an expression tree over buffer slots"),
    ("limn-compiler", "compiler/merge.py", "elementwise kernels that read each other cell for cell become one"),
    ("limn-compiler", "compiler/epilogue.py", "an elementwise kernel folds into the reduce whose totals it reads"),
    ("limn-compiler", "compiler/codegen.py", "lowering: a kernel becomes a loop nest, views become index arithmetic"),
    ("limn-compiler", "compiler/coalesce.py", "neighbouring reduce dims folded as one loop"),
    ("limn-compiler", "compiler/ir.py", "the loop-nest IR: its grammar, instructions and printout"),
    ("limn-compiler", "compiler/jit.py", "the executor: plans, program cache, the assign transaction"),
    ("limn-compiler", "compiler/cstyle.py", "what C and CUDA C spell alike"),
    ("limn-compiler", "compiler/half_widths.py", "float16 and bfloat16 as bit patterns in C"),
    ("limn-c", "c/source.py", "the C rendering of one loop nest"),
    ("limn-c", "c/isa.py", "the target's vector unit and the kernel shapes chosen for it"),
    ("limn-c", "c/rewrites/table.py", "which rewrites a loop takes: when each applies, what each keeps"),
    ("limn-c", "c/prelude.py", "the C every kernel library starts with"),
    ("limn-c", "c/device.py", "cc, ctypes, and the bytes coming back"),
]

# The speed layer, read after the path: the rewrites c/rewrites/table.py chooses among, in its order
SPEED = [
    ("limn-compiler", "compiler/matmul_form.py", "when a nest reads as a matmul"),
    ("limn-c", "c/rewrites/threads.py", "leading loops become one OpenMP parallel for"),
    ("limn-c", "c/rewrites/pad_split.py", "a loop cut at a mask's edges"),
    ("limn-c", "c/rewrites/matmul.py", "register-tiled matmuls, bit-identical to the plain nest"),
    ("limn-c", "c/rewrites/jam.py", "several cells of a fold side by side"),
    ("limn-c", "c/rewrites/chunk.py", "a costly fold's values made a chunk at a time"),
    ("limn-c", "c/rewrites/hoist.py", "what an inner loop does not change, computed once"),
    ("limn-c", "c/rewrites/split_epilogue.py", "a fold's loop, then its epilogue's loop"),
]


def lines_of(distribution: str, module: str) -> int:
    return len((ROOT / "packages" / distribution / "src" / "limn" / module).read_text().splitlines())


def table() -> str:
    """The path, then the speed layer, as markdown tables, each with a total line."""
    rows = ["| # | module | lines | what it holds |", "| --- | --- | ---: | --- |"]
    for i, (distribution, module, what) in enumerate(PATH + SPEED, 1):
        if i == len(PATH) + 1:
            rows.append(f"| | **the path** | **{total_lines(PATH):,}** | budget {BUDGET:,}; the target is 6,000 |")
        rows.append(f"| {i} | `limn/{module}` ({distribution}) | {lines_of(distribution, module):,} | {what} |")
    rows.append(f"| | **the speed layer** | **{total_lines(SPEED):,}** | budget {SPEED_BUDGET:,} |")
    return "\n".join(rows)


def total_lines(modules: list[tuple[str, str, str]] = PATH) -> int:
    return sum(lines_of(distribution, module) for distribution, module, _ in modules)


def page_with_table(page: str) -> str:
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        PAGE.write_text(page_with_table(PAGE.read_text()))
        print(f"wrote {PAGE}: {total_lines():,} lines on the path")
    else:
        print(table())
