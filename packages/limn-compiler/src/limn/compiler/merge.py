"""Multi-output kernels: an elementwise kernel folds into a later one that reads its output cell for cell.

The fusion policy stores a value when several kernels need it (a sink, a value shared past the recompute
limit, an ASSIGN): then one kernel computes and stores it and the next reads it back. When that next kernel
runs over the same loop shape and reads the stored value at the very cell it computes, the two can be one
nest: it computes the value once, stores it (others still read it), and uses it in a register. An AdamW
step is three such kernels per parameter (m, v, then the parameter reading both); a gelu kept for its
backward is three more. Merged, each is one pass over memory.

A merge moves the earlier kernel (P) to where the later one (C) runs, so it must not change what any
kernel sees: no kernel between them reads what P writes or writes what P reads or writes; C reads P's
outputs only at the cell it computes; and every load of a buffer the merged kernel writes is at the cell
it writes (the stores come after every load of their cell, so such a load still sees the old value).
Two kernels that read the same buffers (or one overwrites what the other reads, an in-place state)
without one reading the other's output merge at the earlier one's place, on the same terms.
Reduces, gathers, scatters, custom kernels and CONTIGUOUS copies (a layout change) are never merged,
nor kernels whose stored values differ in width.
Pipeline: tensor -> graph -> schedule (fusion, then **merge**) -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from limn.compiler.kernel import Alu, Const, Elementwise, Expr, Fold, Gather, Join, Kernel, Load, walk_expr
from limn.graph.ops import REDUCE, Op
from limn.graph.view import View

NOT_MERGED = frozenset(REDUCE | {Op.GATHER, Op.SCATTER, Op.CUSTOM, Op.CONTIGUOUS})

WINDOW = 8
"""How many kernels back a kernel looks for one to absorb: an optimizer's or an activation's kernels run
side by side, and a longer look costs planning time on every new graph."""


def merge_kernels(kernels: list[Kernel], joins: dict[int, Join] | None = None) -> list[Kernel]:
    """The kernels in run order, each elementwise one folded into the first later kernel that may take
    it (see the module docstring), renamed k0, k1, ... in their new order. `joins` gets, per value that
    moved, why it did."""
    joins = {} if joins is None else joins
    done: list[Kernel] = []
    for kernel in kernels:
        while (p := _producer(done, kernel)) is not None:
            why = f"an elementwise producer, computed cell for cell in its reader's nest (which stores buf{kernel.out})"
            joins.update((slot, Join("producer", why)) for slot, _ in stored_values(done[p]))
            kernel = _merged(done[p], kernel)
            del done[p]
        s = _sibling(done, kernel)
        if s is None:
            done.append(kernel)
        else:
            earlier = done[s]
            why = f"elementwise work over the cells of buf{earlier.out}, done in the same pass as it"
            joins.update((slot, Join("sibling", why)) for slot, _ in stored_values(kernel))
            done[s] = earlier.storing(tuple(stored_values(kernel)))
    return [k.named(f"k{n}") for n, k in enumerate(done)]


def unread_dropped(kernels: list[Kernel], kept: set[int]) -> list[Kernel]:
    """The kernels without stores nothing reads: a value stored for two readers that the joins put in the one
    nest computing it (a gelu's erf, kept for its gradient) lives in registers there. `kept` slots stay."""
    read = {slot for k in kernels for slot in k.inputs} | kept
    for n, k in enumerate(kernels):
        if isinstance(k.form, (Elementwise, Fold)) and any(slot not in read for slot, _ in k.form.also):
            also = tuple((slot, e) for slot, e in k.form.also if slot in read)
            kernels[n] = replace(k, form=replace(k.form, also=also))
    return kernels


def mergeable(k: Kernel) -> bool:
    """Whether a kernel is elementwise work that may move into another's nest (no NOT_MERGED op)."""
    return isinstance(k.form, Elementwise) and k.op not in NOT_MERGED


def one_width(a: Kernel, b: Kernel) -> bool:
    """Whether every value the two kernels store has one width: gcc leaves a loop that stores bytes
    beside doubles scalar (the vectors of each would hold different numbers of cells)."""
    return len({e.dtype.itemsize for _, e in stored_values(a) + stored_values(b)}) == 1


def cell_view(k: Kernel) -> View:
    """The view that reads a kernel's own output at the cell it computes."""
    return View.contiguous(k.loop_shape)


def _producer(done: list[Kernel], consumer: Kernel) -> int | None:
    """The position in `done` of the latest kernel that `consumer` may absorb, or None."""
    if not mergeable(consumer) or any(isinstance(e, Gather) for e in consumer.exprs):
        return None
    reads = set(consumer.inputs)
    between_reads: set[int] = set()
    between_writes: set[int] = set()
    for p in range(len(done) - 1, max(-1, len(done) - 1 - WINDOW), -1):
        candidate = done[p]
        writes = set(candidate.outputs)
        if writes & reads and _may_fold(candidate, consumer, between_reads, between_writes):
            return p
        between_reads |= set(candidate.inputs)
        between_writes |= writes
    return None


def _sibling(done: list[Kernel], k: Kernel) -> int | None:
    """The position in `done` of a recent kernel over the same loop shape that reads what `k` reads or
    what `k` overwrites (an optimizer's in-place state), and whose place `k` may run at instead of its
    own; or None. `k` does not read what that kernel writes (that is _producer's case)."""
    if not mergeable(k) or any(isinstance(e, Gather) for e in k.exprs):
        return None
    reads, writes = set(k.inputs), set(k.outputs)
    between_reads: set[int] = set()
    between_writes: set[int] = set()
    for s in range(len(done) - 1, max(-1, len(done) - 1 - WINDOW), -1):
        e = done[s]
        e_reads, e_writes = set(e.inputs), set(e.outputs)
        if e_writes & reads:
            return None  # k reads what e writes: it cannot run before e
        if (
            mergeable(e)
            and e.loop_shape == k.loop_shape
            and one_width(e, k)
            and (reads | writes) & e_reads
            and not writes & (e_writes | between_reads | between_writes)
            and not reads & between_writes
            and cells_only(e.exprs + k.exprs, e_writes | writes, cell_view(k))
        ):
            return s
        between_reads |= e_reads
        between_writes |= e_writes
    return None


def cells_only(exprs: list[Expr], written: set[int], cell: View) -> bool:
    """Whether every load of a buffer the kernel writes reads the cell being written."""
    return all(e.view == cell for e in exprs if isinstance(e, Load) and e.slot in written)


def _may_fold(p: Kernel, c: Kernel, between_reads: set[int], between_writes: set[int]) -> bool:
    if not mergeable(p) or p.loop_shape != c.loop_shape or not one_width(p, c):
        return False
    writes = set(p.outputs)
    if writes & between_reads or (writes | set(p.inputs)) & between_writes or writes & set(c.outputs):
        return False
    cell = cell_view(c)
    for e in c.exprs:  # the consumer reads what p writes only at its own cell
        if isinstance(e, Load) and e.slot in writes and e.view != cell:
            return False
    value = dict(stored_values(p))
    if any(isinstance(e, Load) and e.slot in value and e.dtype != value[e.slot].dtype for e in c.exprs):
        return False
    return cells_only(p.exprs + c.exprs, writes | set(c.outputs), cell)


def stored_values(k: Kernel) -> list[tuple[int, Expr]]:
    """Each slot the kernel writes with the expression whose value it stores there."""
    assert isinstance(k.form, (Elementwise, Fold)), f"{k.name} ({k.op.name}) stores no expressions"
    return [(k.out, k.form.expr), *k.form.also]


def _merged(p: Kernel, c: Kernel) -> Kernel:
    """c computing p's values too: c's loads of p's outputs become p's expressions, and p's outputs
    are stored beside c's."""
    value = dict(stored_values(p))

    def leaf(e: Expr) -> Expr:
        assert isinstance(e, (Load, Const)), f"{c.name}: an elementwise kernel holds {type(e).__name__}"
        return value.get(e.slot, e) if isinstance(e, Load) else e

    new = rebuilt(c.roots, leaf)
    also = tuple((slot, new[id(e)]) for slot, e in c.form.also) + tuple(stored_values(p))
    return replace(c, form=Elementwise(new[id(c.form.expr)], also))


def rebuilt(roots: list[Expr], leaf: Callable[[Expr], Expr]) -> dict[int, Expr]:
    """Every node of `roots` (by id) rebuilt with each leaf (Load, Const) replaced by what `leaf` gives for it; an Alu
    whose sources are all unchanged is kept as it is, so what the roots share stays shared."""
    new: dict[int, Expr] = {}
    for e in walk_expr(roots):
        if isinstance(e, Alu):
            srcs = tuple(new[id(s)] for s in e.srcs)
            new[id(e)] = e if all(a is b for a, b in zip(srcs, e.srcs)) else Alu(e.op, srcs, e.dtype)
        else:
            new[id(e)] = leaf(e)
    return new
