"""Row pieces: a kernel run as kernels compiled for fewer rows, so a new row count compiles nothing new.

Most of a model's kernels walk rows first: a (B, T, C) activation's loop over B T, or T when B is 1, is the
outermost loop, and each row reads and writes its own cells. Such a kernel computes rows [s, s + m) exactly as
the same kernel compiled for m rows does when each buffer it touches starts s rows further on (s times the
buffer's elements per row). A sequence that grows, an evaluation at another length, or the last short batch
of an epoch then runs on kernels built for the power-of-two counts that add up to its own, 21 = 16 + 4 + 1,
each compiled once for every count (tests/compiler/test_row_pieces.py holds the pieces to the whole kernel,
bit for bit). The executor (limn.compiler.jit) cuts a kernel into pieces only when an earlier plan ran its
family, the same kernel at another row count: a plan whose shapes never change keeps its whole kernels.

A kernel's rows are independent (rows_of) when every top-level nest opens with the same non-reduce loop, no
mask tests that loop's counter, nothing is scattered, no buffer is both read and written, each buffer's index
moves by one fixed number of elements per row, and each output's rows are disjoint cells.
Pipeline: IR -> **row pieces** -> renderer -> device.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from limn.compiler.ir import Accum, Index, KernelIR, LoadI, Loop, LoopVar, Store, Value, is_scatter, top_level


@dataclass(frozen=True)
class Rows:
    """A kernel's outer loop as rows: its counter (i<dim>), its dim of the loop shape, how many rows, and each
    buffer's elements per row (inputs, then outputs, as the kernel lists them; 0 for one that every row reads
    whole, such as a weight)."""

    var: LoopVar
    dim: int
    count: int
    strides: tuple[int, ...]


def rows_of(kernel: KernelIR) -> Rows | None:
    """The kernel's rows, or None when its outer loop's iterations are not independent (the module's rules)."""
    if kernel.custom is not None or not kernel.body:
        return None
    nests = top_level(kernel.body)
    heads = {nest[0] for _, nest in nests}
    if len(heads) != 1 or any(len(nest) < 2 for _, nest in nests):
        return None  # an instruction outside every loop, or nests that open with different loops
    (head,) = heads
    if not isinstance(head, Loop) or head.reduce:
        return None
    if {b.slot for b in kernel.inputs} & {b.slot for b in kernel.outputs}:
        return None
    per_buffer = _row_strides(kernel, head.var)
    if per_buffer is None:
        return None
    strides = tuple(per_buffer.get(b.name, 0) for b in kernel.inputs + kernel.outputs)
    return Rows(head.var, int(head.var.name[1:]), head.extent, strides)


def _row_strides(kernel: KernelIR, var: LoopVar) -> dict[str, int] | None:
    """Each buffer's elements per row of `var`, one number for all of its accesses; None where a mask reads
    var, a scatter adds, or an output's rows could share a cell."""
    extents = {ins.var: ins.extent for ins in kernel.body if isinstance(ins, Loop)}
    outputs = {b.name for b in kernel.outputs}
    strides: dict[str, int] = {}
    for ins in kernel.body:
        if any(r.var == var for r in getattr(ins, "valid", ())) or is_scatter(ins):
            return None
        access = _access(ins)
        if access is None:
            continue
        buf, index = access
        stride = sum(coef for term, coef in index.terms if term == var)
        if strides.setdefault(buf, stride) != stride:
            return None  # the buffer moves by different amounts per row in two of its accesses
        if buf in outputs and not _within_a_row(index, var, stride, extents):
            return None
    return strides


def _access(ins: object) -> tuple[str, Index] | None:
    """The buffer an instruction reads or writes and the index it uses there (an ACCUM into a register: none)."""
    if isinstance(ins, (LoadI, Store)):
        return ins.buf, ins.index
    if isinstance(ins, Accum) and ins.index is not None:
        return str(ins.target), ins.index
    return None


def _within_a_row(index: Index, var: LoopVar, stride: int, extents: dict[LoopVar, int]) -> bool:
    """Whether the index, less var's term, stays in [0, stride): then rows of an output never share a cell."""
    low = high = index.const
    for term, coef in index.terms:
        if term == var:
            continue
        if isinstance(term, Value):
            return False
        span = coef * (extents[term] - 1)
        low, high = low + min(span, 0), high + max(span, 0)
    return stride > 0 and low >= 0 and high < stride


def family(kernel: KernelIR, rows: Rows) -> tuple:
    """What kernels that differ only in their row count share: the kernel with the count left out."""
    body = tuple(
        replace(ins, extent=0) if isinstance(ins, Loop) and ins.var == rows.var else ins for ins in kernel.body
    )
    buffers = tuple((b.name, b.dtype) for b in kernel.inputs + kernel.outputs)
    shape = kernel.loop_shape[: rows.dim] + (0,) + kernel.loop_shape[rows.dim + 1 :]
    return (kernel.op, shape, buffers, body, kernel.matmul)


@dataclass(frozen=True)
class Split:
    """A kernel cut into row pieces: its rows, each piece's (first row, rows), and the kernel each piece runs."""

    rows: Rows
    runs: tuple[tuple[int, int], ...]
    kernels: tuple[KernelIR, ...]


def split(kernel: KernelIR, rows: Rows, kin: tuple, made: dict[tuple, KernelIR]) -> Split:
    """The kernel (of family `kin`) as pieces of power-of-two row counts (pieces). `made` keeps each piece
    kernel by its family and count, so every plan that needs one gets the same object (a device keeps what it
    renders by it)."""
    runs = tuple(pieces(rows.count))
    kernels = []
    for _, count in runs:
        piece = made.get((kin, count))
        if piece is None:
            piece = made[(kin, count)] = with_rows(kernel, rows, count, kin)
        kernels.append(piece)
    return Split(rows, runs, tuple(kernels))


def pieces(count: int) -> list[tuple[int, int]]:
    """(first row, rows) of each piece of `count` rows: the powers of two in its binary digits, largest first.

    >>> pieces(21)
    [(0, 16), (16, 4), (20, 1)]
    """
    out, first = [], 0
    for bit in reversed(range(count.bit_length())):
        if count >> bit & 1:
            out.append((first, 1 << bit))
            first += 1 << bit
    return out


def with_rows(kernel: KernelIR, rows: Rows, count: int, kin: tuple | None = None) -> KernelIR:
    """The kernel for `count` rows: its outer loops' extent and its loop shape changed, every index kept (a
    piece's buffers start where its first row does). Its nest key is the sha256 of its family (`kin`, when
    the caller has it) and count, the same in every process, so a device keeps what it renders by it."""
    kin = family(kernel, rows) if kin is None else kin
    nest = hashlib.sha256(repr((kin, count)).encode()).hexdigest()
    body = tuple(
        replace(ins, extent=count) if isinstance(ins, Loop) and ins.var == rows.var else ins for ins in kernel.body
    )
    shape = kernel.loop_shape[: rows.dim] + (count,) + kernel.loop_shape[rows.dim + 1 :]
    return replace(kernel, name=f"{kernel.name}_rows{count}", loop_shape=shape, body=body, nest=nest)


class Families:
    """What a device's plans have run: each kernel family with the row count its first plan ran it at, and the
    piece kernels made so far (one object per family and count, so a device keeps what it renders by it)."""

    def __init__(self) -> None:
        self.counts: dict[tuple, int] = {}
        self.made: dict[tuple, KernelIR] = {}

    def cuts(self, kernels: Sequence[KernelIR], say: Callable[[str], None] | None = None) -> list[Split | None]:
        """Each kernel of a new plan cut into row pieces, or None to build it whole: whole unless an earlier
        plan ran its family at another count, and when the count is a power of two (one piece: the kernel
        itself). Then remembers the plan's families, so kernels of one plan never cut each other. `say` is
        told of each cut (LIMN_DEBUG=1)."""
        kinds = [None if k.custom is not None else _kind(k) for k in kernels]
        cuts = [None if kind is None else self._cut(k, *kind, say) for k, kind in zip(kernels, kinds)]
        for kind in kinds:
            if kind is not None:
                self.counts.setdefault(kind[1], kind[0].count)
        return cuts

    def _cut(self, kernel: KernelIR, rows: Rows, kin: tuple, say: Callable[[str], None] | None) -> Split | None:
        seen = self.counts.get(kin)
        if seen is None or seen == rows.count or rows.count & (rows.count - 1) == 0:
            return None
        cut = split(kernel, rows, kin, self.made)
        if say is not None:
            counts = " + ".join(str(n) for _, n in cut.runs)
            say(f"{kernel.name} runs as row pieces {counts}: a plan before ran it at {seen} rows")
        return cut


def _kind(kernel: KernelIR) -> tuple[Rows, tuple] | None:
    """The kernel's rows and family, when its rows are independent."""
    rows = rows_of(kernel)
    return None if rows is None else (rows, family(kernel, rows))
