"""Row pieces: a kernel run as kernels compiled for fewer rows, so a new row count compiles nothing new.

Most of a model's kernels walk rows first: a (B, T, C) activation's loop over B T, or T when B is 1, is the
outermost loop, and each row reads and writes its own cells. Such a kernel computes rows [s, s + m) exactly as
the same kernel compiled for m rows does when each buffer it touches starts s rows further on (s times the
buffer's elements per row). A sequence that grows, an evaluation at another length, or the last short batch
of an epoch then runs on kernels built for the power-of-two counts that add up to its own, 21 = 16 + 4 + 1,
each compiled once for every count (tests/c/test_row_pieces.py holds the pieces to the whole kernel, bit for
bit). Where a loop of a few iterations (attention's heads) has strides that hold the row count, it is peeled
first: each of its values is a call of the kernel without it, on buffers moved on as far. The executor
(limn.compiler.jit) cuts a kernel only when an earlier plan ran its family, the same kernel at another row
count: a plan whose shapes never change keeps its whole kernels.

A loop's iterations are independent (rows_of, peeled) when it is not a reduce, no mask tests its counter,
nothing is scattered, no buffer is both read and written, each buffer's index moves by one fixed number of
elements per iteration, and each output is written at one index that never gives two iterations one cell.
Pipeline: IR -> **row pieces** -> renderer -> device.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from limn.compiler.ir import (
    Acc,
    Accum,
    Arith,
    ConstI,
    EndLoop,
    Index,
    Instr,
    KernelIR,
    LoadI,
    Loop,
    LoopVar,
    Store,
    is_scatter,
    loop_ends,
    top_level,
)

PEEL_LIMIT = 64  # a loop peeled is a call per iteration: only loops of at most this many (heads), and never
# one longer than the rows it leaves (Families._cut)


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
    strides = _strides(kernel, head.var)
    return None if strides is None else Rows(head.var, int(head.var.name[1:]), head.extent, strides)


def _strides(kernel: KernelIR, var: LoopVar) -> tuple[int, ...] | None:
    """Each buffer's elements per iteration of `var` (inputs, then outputs), one number for all of its
    accesses; None where the iterations are not independent (the module's rules)."""
    if {b.slot for b in kernel.inputs} & {b.slot for b in kernel.outputs}:
        return None
    loops = {ins.var: ins for ins in kernel.body if isinstance(ins, Loop)}
    if len(loops) != len({(ins.var, ins.extent) for ins in kernel.body if isinstance(ins, Loop)}):
        return None  # a counter with two extents in two nests: the cell test below would read one of them
    outputs = {b.name for b in kernel.outputs}
    strides: dict[str, int] = {}
    written: dict[str, Index] = {}
    for ins in kernel.body:
        if any(r.var == var for r in getattr(ins, "valid", ())) or is_scatter(ins):
            return None
        access = _access(ins)
        if access is None:
            continue
        buf, index = access
        stride = sum(coef for term, coef in index.terms if term == var)
        if strides.setdefault(buf, stride) != stride:
            return None  # the buffer moves by different amounts per iteration in two of its accesses
        if buf in outputs and (written.setdefault(buf, index) != index or not _one_cell_each(index, loops)):
            return None
    if any(strides.get(b.name, 0) == 0 for b in kernel.outputs):
        return None  # every iteration would write the same cells
    return tuple(strides.get(b.name, 0) for b in kernel.inputs + kernel.outputs)


def _access(ins: object) -> tuple[str, Index] | None:
    """The buffer an instruction reads or writes and the index it uses there (an ACCUM into a register: none)."""
    if isinstance(ins, (LoadI, Store)):
        return ins.buf, ins.index
    if isinstance(ins, Accum) and ins.index is not None:
        return str(ins.target), ins.index
    return None


def _one_cell_each(index: Index, loops: dict[LoopVar, Loop]) -> bool:
    """Whether an output index gives every iteration of the non-reduce loops its own cell: each term's step is
    past the farthest the smaller steps reach (the test for strides that never overlap), and no reduce counter
    or loaded value moves it."""
    steps = []
    for term, coef in index.terms:
        loop = loops.get(term)
        if loop is None or loop.reduce:
            return False
        steps.append((abs(coef), loop.extent))
    reach = 0
    for step, extent in sorted(steps):
        if step <= reach:
            return False
        reach += step * (extent - 1)
    return True


class Kin:
    """A family as a dictionary key: its parts, hashed once (a tuple would hash every instruction again at each
    lookup), compared part by part where the hashes agree. Its repr is its parts', the same in every process."""

    __slots__ = ("parts", "digest")

    def __init__(self, parts: tuple) -> None:
        self.parts = parts
        self.digest = hash(parts)

    def __hash__(self) -> int:
        return self.digest

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Kin) and self.digest == other.digest and self.parts == other.parts

    def __repr__(self) -> str:
        return repr(self.parts)


def family(kernel: KernelIR, rows: Rows) -> Kin:
    """What kernels that differ only in their row count share: the kernel with the count left out. Its
    literals are also spelled out, since 0.0 == -0.0 and the two must not make one family."""
    body = tuple(
        replace(ins, extent=0) if isinstance(ins, Loop) and ins.var == rows.var else ins for ins in kernel.body
    )
    buffers = tuple((b.name, b.dtype) for b in kernel.inputs + kernel.outputs)
    shape = kernel.loop_shape[: rows.dim] + (0,) + kernel.loop_shape[rows.dim + 1 :]
    literals = tuple(
        repr(ins.value if isinstance(ins, ConstI) else ins.identity) for ins in body if isinstance(ins, (ConstI, Acc))
    )
    return Kin((kernel.op, shape, buffers, body, literals, kernel.matmul))


# ---- peeling a short loop ----


@dataclass(frozen=True)
class Peel:
    """A loop taken out of a kernel: each of its `count` values is a call of the kernel without it, on buffers
    moved on by `strides` elements per value (inputs, then outputs)."""

    var: LoopVar
    count: int
    strides: tuple[int, ...]


def peeled(kernel: KernelIR, loop: Loop) -> tuple[Peel, KernelIR] | None:
    """The kernel without `loop` (its LOOP, ENDLOOP and index terms gone, its dim of the loop shape 1), and
    how to call it once per iteration; None where the iterations are not independent, or where something
    that writes or opens a total lies outside the loop (the kernel without it would do that once per call)."""
    strides = _strides(kernel, loop.var) if not loop.reduce and loop.extent <= PEEL_LIMIT else None
    if strides is None:
        return None
    body: list[Instr] = []
    inside = False
    for ins in kernel.body:
        if isinstance(ins, (Loop, EndLoop)) and ins.var == loop.var:
            inside = isinstance(ins, Loop)
            continue
        if isinstance(ins, (Store, Acc)) or (isinstance(ins, Accum) and ins.index is not None):
            if not inside:
                return None
        body.append(_without_term(ins, loop.var))
    dim = int(loop.var.name[1:])
    shape = kernel.loop_shape[:dim] + (1,) + kernel.loop_shape[dim + 1 :]
    rest = replace(kernel, name=f"{kernel.name}_per_{loop.var}", loop_shape=shape, body=tuple(body), nest="")
    return Peel(loop.var, loop.extent, strides), rest


def _outer_loops(body: tuple[Instr, ...]) -> list[Loop]:
    """The loops with a loop inside (peeling an innermost one would make each call a strided loop), once each."""
    found: dict[LoopVar, Loop] = {}
    for start, end in loop_ends(body).items():
        if any(isinstance(ins, Loop) for ins in body[start + 1 : end]):
            found.setdefault(body[start].var, body[start])
    return list(found.values())


def _without_term(ins: Instr, var: LoopVar) -> Instr:
    index = getattr(ins, "index", None)
    if index is None:
        return ins
    return replace(ins, index=Index(tuple((t, c) for t, c in index.terms if t != var), index.const))


# ---- the ways to cut a kernel, and the cut ----


@dataclass(frozen=True)
class Form:
    """One way to run a kernel as calls of kernels for power-of-two row counts: with a loop peeled or not,
    the kernel whose rows are cut, those rows, and that kernel's family."""

    peel: Peel | None
    kernel: KernelIR
    rows: Rows
    family: Kin


def forms(kernel: KernelIR) -> list[Form]:
    """The kernel's own rows first, then its rows with each short loop peeled, where they are independent."""
    own = own_form(kernel)
    return ([] if own is None else [own]) + peeled_forms(kernel)


def own_form(kernel: KernelIR) -> Form | None:
    """The kernel's own rows and their family, where they are independent."""
    rows = None if kernel.custom is not None or not kernel.body else rows_of(kernel)
    return None if rows is None else Form(None, kernel, rows, family(kernel, rows))


def peeled_forms(kernel: KernelIR) -> list[Form]:
    """The kernel's rows with each short loop peeled, where they are independent."""
    if kernel.custom is not None or not kernel.body:
        return []
    out = []
    for loop in _outer_loops(kernel.body):
        made = peeled(kernel, loop)
        rest_rows = None if made is None else rows_of(made[1])
        if rest_rows is not None:
            out.append(Form(made[0], made[1], rest_rows, family(made[1], rest_rows)))
    return out


@dataclass(frozen=True)
class Split:
    """A kernel as calls of piece kernels: the distinct piece kernels, and each call's piece (an index into
    them) and each buffer's offset in elements (inputs, then outputs). `runs` names the pieces, for LIMN_DEBUG."""

    kernels: tuple[KernelIR, ...]
    calls: tuple[tuple[int, tuple[int, ...]], ...]
    runs: str

    def byte_calls(self) -> list[tuple[int, list[int]]]:
        """The calls with each offset in bytes (elements times the buffer's dtype's size): what a device adds
        to each buffer's address."""
        sizes = [b.dtype.itemsize for b in self.kernels[0].inputs + self.kernels[0].outputs]
        return [(i, [o * size for o, size in zip(offsets, sizes)]) for i, offsets in self.calls]


def split(form: Form, made: dict[tuple, KernelIR]) -> Split:
    """The form's kernel as pieces of power-of-two row counts (pieces), once per value of a peeled loop.
    `made` keeps each piece kernel by its family and count, so every plan that needs one gets the same object
    (a device keeps what it renders by it)."""
    runs = pieces(form.rows.count)
    kernels = []
    for _, count in runs:
        piece = made.get((form.family, count))
        if piece is None:
            piece = made[(form.family, count)] = with_rows(form.kernel, form.rows, count, form.family)
        kernels.append(piece)
    blocks = [(0,) * len(form.rows.strides)] if form.peel is None else _steps(form.peel)
    calls = []
    for block in blocks:
        for i, (first, _) in enumerate(runs):
            calls.append((i, tuple(b + first * r for b, r in zip(block, form.rows.strides))))
    name = " + ".join(str(n) for _, n in runs)
    runs_text = name if form.peel is None else f"({name}) for each of {form.peel.count} values of {form.peel.var}"
    return Split(tuple(kernels), tuple(calls), runs_text)


def _steps(peel: Peel) -> list[tuple[int, ...]]:
    return [tuple(v * s for s in peel.strides) for v in range(peel.count)]


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


def with_rows(kernel: KernelIR, rows: Rows, count: int, kin: Kin | None = None) -> KernelIR:
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
        self.counts: dict[Kin, int] = {}
        self.made: dict[tuple, KernelIR] = {}
        # each sketch's first kernel; then whether peeling gave a family an earlier plan ran (False: never look again)
        self.sketches: dict[tuple, KernelIR | bool] = {}
        # each nest's own form (KernelIR.nest: kernels of one nest have one body, so one rows and family)
        self.own: dict[str, Form | None] = {}
        # one object per family: a dict finds the very key object without comparing, where an equal family
        # compares every instruction (what most of a new shape's cut cost once it was planned before)
        self.kins: dict[Kin, Kin] = {}

    def cuts(self, kernels: Sequence[KernelIR], say: Callable[[str], None] | None = None) -> list[Split | None]:
        """Each kernel of a new plan cut into pieces, or None to build it whole: cut in the first of its forms
        whose family an earlier plan ran at another count (its own rows unless they are a power of two: one
        piece, the kernel itself). Then remembers the plan's families, so kernels of one plan never cut each
        other. `say` is told of each cut (LIMN_DEBUG=1)."""
        shapes = [self._forms(k) for k in kernels]
        cuts = [self._cut(k, ways, say) for k, ways in zip(kernels, shapes)]
        for ways in shapes:
            for form in ways:
                self.counts.setdefault(form.family, form.rows.count)
        return cuts

    def _interned(self, forms: list[Form]) -> list[Form]:
        return [replace(form, family=self.kins.setdefault(form.family, form.family)) for form in forms]

    def _forms(self, kernel: KernelIR) -> list[Form]:
        """The kernel's forms worth a look: its own rows, and its peeled forms only when their family is new
        and an earlier kernel had the kernel's sketch (the same instructions with other numbers), whose peeled
        families are then remembered first; once peeling a sketch's kernel finds no family an earlier plan ran
        (the row count is in what is left too, as in attention's (T, T) scores), it is not tried again.
        Peeling is costly to work out, and a plan whose shapes never change never needs it."""
        own = [] if kernel.custom is not None else [form for form in [self._own(kernel)] if form is not None]
        if kernel.custom is not None or (own and own[0].family in self.counts):
            return own
        sketch = _sketch(kernel)
        first = self.sketches.setdefault(sketch, kernel)
        if first is kernel or first is False:
            return own
        if first is not True:
            for form in self._interned(peeled_forms(first)):
                self.counts.setdefault(form.family, form.rows.count)
        peeled = self._interned(peeled_forms(kernel))
        self.sketches[sketch] = any(form.family in self.counts for form in peeled)
        return own + peeled

    def _own(self, kernel: KernelIR) -> Form | None:
        if kernel.nest in self.own:
            return self.own[kernel.nest]
        form = own_form(kernel)
        form = None if form is None else self._interned([form])[0]
        if kernel.nest:
            self.own[kernel.nest] = form
        return form

    def _cut(self, kernel: KernelIR, ways: list[Form], say: Callable[[str], None] | None) -> Split | None:
        """The first way whose family ran at another count. A kernel whose own rows' family ran before is cut
        by its own rows or not at all: a loop is peeled only where the row count is in the kernel's strides."""
        if ways and ways[0].peel is None and ways[0].family in self.counts:
            ways = ways[:1]
        for form in ways:
            seen = self.counts.get(form.family)
            whole = form.peel is None and form.rows.count & (form.rows.count - 1) == 0
            longer = form.peel is not None and form.peel.count > form.rows.count  # a call per value: peel the shorter
            if seen is None or seen == form.rows.count or whole or longer:
                continue
            cut = split(form, self.made)
            if say is not None:
                say(f"{kernel.name} runs as pieces {cut.runs}: a plan before ran it at {seen} rows")
            return cut
        return None


def _sketch(kernel: KernelIR) -> tuple:
    """The kernel's instructions without their numbers (an ARITH by its op, a loop by its counter): kernels of
    one sketch may be one family once peeled."""
    buffers = tuple(b.dtype for b in kernel.inputs + kernel.outputs)
    steps = tuple(
        ins.op if isinstance(ins, Arith) else ins.var if isinstance(ins, Loop) else type(ins) for ins in kernel.body
    )
    return (kernel.op, buffers, steps, len(kernel.loop_shape))
