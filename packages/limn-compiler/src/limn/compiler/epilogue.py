"""Epilogues: an elementwise kernel folds into the reduce kernel whose totals it reads, cell for cell.

A reduce is always stored (fusion.ALWAYS_STORED), so the elementwise work after it (a linear layer's bias
add and the gelu after that, a residual add; in a backward, the add of two gradient contributions) was a
second kernel: a second pass over memory. When that kernel runs over the reduce's output cells and reads a
total only at the cell it computes, the reduce kernel can compute its values right after the fold, while
the total is still in a register or in cache. The reduce keeps storing its total (other kernels, or the
caller, may read it) and gains the consumer's outputs as `also`, evaluated once per output cell after the
fold (kernel.py's Kernel says how they read the total). limn-c's matmul tiles apply them a tile at a time.

The consumer (C) moves back to where the reduce (R) runs, so it folds only where that changes nothing any
kernel sees, and where the nest stays fast; every one of these must hold:
- C is elementwise work (merge's `mergeable`, and no gather), and its loop shape is R's output cells: R's
  loop shape with the reduce dims dropped, up to dims of size 1 (a view that only drops them composes);
- C reads R's outputs only at the cell it computes (a tile hands its cells over before the others exist);
- no kernel between them reads what C writes, or writes what C reads or writes;
- R's fold reads nothing C writes, C does not write R's outputs, and every load of a buffer the merged
  kernel writes is at the cell it writes (merge's `cells_only`);
- every value stored has one width (merge's `one_width`: gcc leaves a loop scalar when it stores mixed
  widths).
Pipeline: tensor -> graph -> schedule (fusion, merge, then **epilogue**) -> IR -> renderer -> device.
"""

from __future__ import annotations

from dataclasses import dataclass

from limn.compiler.kernel import Const, Expr, Fold, Gather, Join, Kernel, Load, walk_expr
from limn.compiler.merge import WINDOW, cell_view, cells_only, mergeable, one_width, rebuilt, stored_values
from limn.graph.ops import REDUCE, Shape
from limn.graph.view import View, row_major_strides


def fold_epilogues(kernels: list[Kernel], joins: dict[int, Join] | None = None) -> list[Kernel]:
    """The kernels in run order, each elementwise one that may (see the module docstring) folded into the
    reduce kernel whose totals it reads, at that kernel's place; renamed k0, k1, ... in their new order.
    `joins` gets, per value folded, why it was."""
    joins = {} if joins is None else joins
    done: list[Kernel] = []
    for kernel in kernels:
        r = _reduce_read(done, kernel)
        if r is None:
            done.append(kernel)
        else:
            why = f"folded into the store of the reduce writing buf{done[r].out}: an elementwise consumer of its totals"
            joins.update((slot, Join("epilogue", why)) for slot, _ in stored_values(kernel))
            done[r] = _folded(done[r], kernel)
    return [k.named(f"k{n}") for n, k in enumerate(done)]


@dataclass(frozen=True)
class Cells:
    """How a consumer's loop shape lies on a reduce's: each of the consumer's dims of size over 1 is, in
    order, one of the reduce's output dims of size over 1 (`pairs`, consumer dim -> reduce dim)."""

    shape: Shape  # the reduce's loop shape
    pairs: tuple[tuple[int, int], ...]
    units: tuple[int, ...]  # the consumer's dims of size 1

    @staticmethod
    def of(r: Kernel, c: Kernel) -> Cells | None:
        """How c's cells lie on r's output cells, or None where c's loop shape is not r's output cells."""
        c_dims = [d for d, s in enumerate(c.loop_shape) if s != 1]
        r_dims = [d for d, s in enumerate(r.loop_shape) if s != 1 and d not in r.form.reduce_axes]
        if [c.loop_shape[d] for d in c_dims] != [r.loop_shape[d] for d in r_dims]:
            return None
        units = tuple(d for d, s in enumerate(c.loop_shape) if s == 1)
        return Cells(r.loop_shape, tuple(zip(c_dims, r_dims)), units)

    def total(self, r: Kernel) -> View:
        """The view reading r's own output at each output cell: stride 0 along the reduce dims."""
        out_cells = tuple(1 if d in r.form.reduce_axes else s for d, s in enumerate(self.shape))
        return View(self.shape, row_major_strides(out_cells))

    def lift(self, view: View) -> View | None:
        """A view over the consumer's loop shape as one over the reduce's that reads the same cell at each
        output cell (stride 0 along every other dim), or None where a dim of size 1 is masked off."""
        if view.mask is not None and any(view.mask[d] != (0, 1) for d in self.units):
            return None
        strides = [0] * len(self.shape)
        mask = None if view.mask is None else [(0, s) for s in self.shape]
        for c_dim, r_dim in self.pairs:
            strides[r_dim] = view.strides[c_dim]
            if mask is not None:
                mask[r_dim] = view.mask[c_dim]
        return View(self.shape, tuple(strides), view.offset, None if mask is None else tuple(mask))


def _reduce_read(done: list[Kernel], c: Kernel) -> int | None:
    """The position in `done` of the latest reduce kernel whose totals `c` reads and may fold into, or None."""
    if not mergeable(c) or any(isinstance(e, Gather) for e in c.exprs):
        return None
    reads, writes = set(c.inputs), set(c.outputs)
    between_reads: set[int] = set()
    between_writes: set[int] = set()
    for p in range(len(done) - 1, max(-1, len(done) - 1 - WINDOW), -1):
        r = done[p]
        if (
            r.op in REDUCE
            and r.out in reads
            and not writes & between_reads
            and not (reads | writes) & between_writes
            and _may_fold(r, c)
        ):
            return p
        between_reads |= set(r.inputs)
        between_writes |= set(r.outputs)
    return None


def _may_fold(r: Kernel, c: Kernel) -> bool:
    """The rules of the module docstring that concern r and c themselves."""
    if not isinstance(r.form, Fold) or not one_width(r, c):
        return False
    cells = Cells.of(r, c)
    if cells is None:
        return False
    writes, totals = set(c.outputs), dict(stored_values(r))
    if writes & set(totals) or any(isinstance(e, Load) and e.slot in writes for e in walk_expr([r.form.expr])):
        return False
    cell = cell_view(c)
    for e in c.exprs:
        if isinstance(e, Load) and e.slot in totals and (e.view != cell or e.dtype != totals[e.slot].dtype):
            return False
        view = e.view if isinstance(e, Load) else e.mask_view if isinstance(e, Const) else None
        if view is not None and cells.lift(view) is None:
            return False
    earlier = [e for _, root in r.form.also for e in walk_expr([root])]  # r's epilogue so far, over r's cells
    return cells_only(c.exprs, writes, cell) and cells_only(earlier, writes, cells.total(r))


def _folded(r: Kernel, c: Kernel) -> Kernel:
    """r with c's values as further outputs: c's loads lifted onto r's loop shape, its loads of r's total
    reading r's own output, and its loads of r's earlier epilogue outputs those outputs' expressions."""
    cells = Cells.of(r, c)
    assert cells is not None, f"{c.name} was folded into {r.name} without lying on its cells"
    total, earlier = cells.total(r), dict(r.form.also)

    def leaf(e: Expr) -> Expr:
        if isinstance(e, Load):
            if e.slot in earlier:
                return earlier[e.slot]
            view = total if e.slot == r.out else cells.lift(e.view)
            return Load(e.slot, view, e.dtype)
        assert isinstance(e, Const), f"{c.name}: an elementwise kernel holds {type(e).__name__}"
        return e if e.mask_view is None else Const(e.value, e.dtype, cells.lift(e.mask_view))

    new = rebuilt(c.roots, leaf)
    return r.storing(tuple((slot, new[id(e)]) for slot, e in stored_values(c)))
