"""The scheduler's output: kernels as expression trees over numbered buffer slots, and the Schedule.

A Kernel fills one slot by evaluating a small tree (Load / Const / Alu / Gather) at every point of its loop
shape; a Schedule is the kernels in run order, the slots they read and write, the sinks, and why each
written slot holds a value (fusion.py's Reason). schedule.py builds it; codegen.py lowers each kernel.
Pipeline: tensor -> graph -> **schedule** -> IR (codegen.py) -> renderer -> device.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from limn.dtypes import DType
from limn.graph.ops import CustomArg, Node, Op, Shape, postorder
from limn.graph.view import View

if TYPE_CHECKING:
    from limn.compiler.fusion import Reason

# ---- the kernel expression tree ----


@dataclass(frozen=True)
class Load:
    """Reads buffer `slot` through `view` (cells outside the view's mask read as zero)."""

    slot: int
    view: View
    dtype: DType


@dataclass(frozen=True)
class Const:
    """A constant; with a masked view it is `value` inside the mask and zero outside (a padded const)."""

    value: Any
    dtype: DType
    mask_view: View | None = None


@dataclass(frozen=True)
class Alu:
    """One elementwise primitive (NEG ... WHERE) applied to sub-expressions."""

    op: Op
    srcs: tuple[Expr, ...]
    dtype: DType


@dataclass(frozen=True)
class Gather:
    """src[..., idx, ...] along axis: reads buffer `src.slot` at the position its view gives after the
    axis coordinate is replaced by the value of `idx` (an int Load)."""

    src: Load
    idx: Load
    axis: int
    dtype: DType


Expr = Load | Const | Alu | Gather


def walk_expr(roots: Sequence[Expr]) -> list[Expr]:
    """Every sub-expression, each after its sources, each once (a Gather reads its two loads itself)."""
    return postorder(roots, lambda e: e.srcs if isinstance(e, Alu) else ())


def loads_of(e: Expr) -> tuple[Load, ...]:
    """The buffer reads one node of an expression makes itself: a Load its own, a Gather its two."""
    if isinstance(e, Load):
        return (e,)
    if isinstance(e, Gather):
        return (e.src, e.idx)
    return ()


# ---- kernels ----


Stored = tuple[tuple[int, Expr], ...]  # further slots a kernel writes, each with the expression it stores


@dataclass(frozen=True)
class Elementwise:
    """At every point of the loop shape, `expr` into the kernel's out and each of `also` into its slot: maps,
    views, copies, gathers, assigns. Kernels merged cell for cell (limn.compiler.merge) add to `also`; the
    expressions share what they have in common."""

    expr: Expr
    also: Stored = ()


@dataclass(frozen=True)
class Fold:
    """`expr` folded over `reduce_axes` with the kernel's op (SUM or MAX) into out, then each of `also`, the
    epilogue (limn.compiler.epilogue), once per output cell after the fold has finished it, into its slot.
    The epilogue's views are over the loop shape with stride 0 along the reduce axes, so they read one value
    per output cell, and a Load of the kernel's own out reads the finished total (as stored: rounded to
    out's dtype). out itself is still stored, since other kernels may read it."""

    expr: Expr
    reduce_axes: tuple[int, ...]
    also: Stored = ()


@dataclass(frozen=True)
class Contraction(Fold):
    """A Fold the graph states as a matmul: a SUM of the MUL of two loads, each broadcast (stride 0) along
    a kept axis the other reads, as `a @ b` is built (a[i, r] expanded along j, times b[r, j] expanded along
    i, summed over r). Lowering reads it as any Fold; devices that tile matmuls tile only these
    (KernelIR.matmul carries the mark to limn.compiler.matmul_form)."""


def fold_form(op: Op, expr: Expr, reduce_axes: tuple[int, ...], loop_shape: Shape) -> Fold:
    """A reduce's form: a Contraction when the graph states a matmul (see Contraction), else a Fold."""
    if op is not Op.SUM or not isinstance(expr, Alu) or expr.op is not Op.MUL:
        return Fold(expr, reduce_axes)
    a, b = expr.srcs
    if not (isinstance(a, Load) and isinstance(b, Load)) or a.view.mask or b.view.mask:
        return Fold(expr, reduce_axes)
    kept = [d for d in range(len(loop_shape)) if d not in reduce_axes and loop_shape[d] != 1]

    def broadcast(x: Load, y: Load) -> bool:  # x is constant along a kept axis that y reads
        return any(x.view.strides[d] == 0 and y.view.strides[d] != 0 for d in kept)

    states = broadcast(a, b) and broadcast(b, a)
    return Contraction(expr, reduce_axes) if states else Fold(expr, reduce_axes)


@dataclass(frozen=True)
class Scatter:
    """SCATTER: `base` copied into out at every point, then a second nest over idx's `shape` adding the
    updates, out[..., idx[j], ...] += upd[j] along `axis`."""

    base: Expr
    idx: Load
    upd: Expr
    axis: int
    shape: Shape


@dataclass(frozen=True)
class Custom:
    """A CUSTOM call: the device's kernel for `arg`, reading slots `inputs` and writing slots `outputs`."""

    arg: CustomArg
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


Form = Elementwise | Fold | Scatter | Custom


@dataclass(frozen=True)
class Kernel:
    """One unit of compiled work: fill slot `out` over the points of `loop_shape`, in the way its `form`
    says (a tagged union: Elementwise, Fold, Scatter or Custom; `op` names the graph op it came from)."""

    name: str
    op: Op
    out: int
    loop_shape: Shape
    form: Form

    @property
    def roots(self) -> list[Expr]:
        """The expressions whose values the kernel stores: the form's expr (a scatter's base), then its also's."""
        form = self.form
        if isinstance(form, Custom):
            return []
        if isinstance(form, Scatter):
            return [form.base]
        return [form.expr] + [e for _, e in form.also]

    @functools.cached_property
    def exprs(self) -> list[Expr]:
        """Every sub-expression of the roots, each after its sources (walk_expr), walked once per kernel."""
        return walk_expr(self.roots)

    @functools.cached_property
    def inputs(self) -> tuple[int, ...]:
        """Slots this kernel reads, in first-use order (walked once per kernel: planning asks often)."""
        form = self.form
        if isinstance(form, Custom):
            return form.inputs
        walked = self.exprs if not isinstance(form, Scatter) else walk_expr([form.base, form.idx, form.upd])
        found: dict[int, None] = {}  # an ordered set
        for e in walked:
            for load in loads_of(e):
                found.setdefault(load.slot)
        if isinstance(form, Fold) and form.also:
            found.pop(self.out, None)  # an epilogue reads the total this kernel folds, not an input
        return tuple(found)

    def named(self, name: str) -> Kernel:
        """This kernel under another name (the passes renumber k0, k1, ...), keeping what was walked of it:
        `exprs` and `inputs` do not depend on the name."""
        if name == self.name:
            return self
        renamed = replace(self, name=name)
        for walked in ("exprs", "inputs"):
            if walked in self.__dict__:
                renamed.__dict__[walked] = self.__dict__[walked]
        return renamed

    def storing(self, more: Stored) -> Kernel:
        """This elementwise or fold kernel storing `more` values too (a merge, or an epilogue)."""
        assert isinstance(self.form, (Elementwise, Fold)), f"{self.name} ({self.op.name}) stores no further values"
        return replace(self, form=replace(self.form, also=self.form.also + more))

    @property
    def outputs(self) -> tuple[int, ...]:
        form = self.form
        if isinstance(form, Custom):
            return form.outputs
        also = form.also if isinstance(form, (Elementwise, Fold)) else ()
        return (self.out, *(slot for slot, _ in also))


# ---- the schedule ----


class SlotKind(StrEnum):
    """What a slot's buffer is, for the executor that allocates it (a StrEnum: `kind == "input"` holds)."""

    INPUT = "input"  # a leaf buffer the caller binds
    TEMP = "temp"  # allocated per run
    ASSIGN = "assign"  # a temp whose value lands in the slot's `target` after every other kernel


@dataclass(frozen=True)
class Slot:
    """A buffer the schedule reads or writes; `target` is set for an ASSIGN slot only."""

    number: int
    dtype: DType
    shape: Shape
    kind: SlotKind
    target: int | None = None


@dataclass(frozen=True)
class Sink:
    """One value the caller asked for: the slot holding it and the shape it is read as (a sink that only
    drops a reduce's kept dim reads that kernel's slot as it is, with its own shape)."""

    slot: int
    shape: Shape


@dataclass(frozen=True)
class Join:
    """Why a value is computed in another kernel's nest: the pass that moved it (merge.py's "producer" or
    "sibling", epilogue.py's "epilogue") and its sentence for this value. A value never moved has none."""

    rule: str
    detail: str


@dataclass
class Schedule:
    kernels: list[Kernel]
    slots: list[Slot]
    inputs: list[int]  # slots bound to the graph's leaf buffers, in leaf order
    sinks: list[Sink]
    reasons: dict[int, Reason] = field(default_factory=dict)  # per slot a kernel writes: why it holds a value
    computes: dict[int, list[Node]] = field(default_factory=dict)  # per slot written: the graph nodes evaluated
    slot_of: dict[int, int] = field(default_factory=dict)  # id(node) -> the slot holding its value, if stored
    joins: dict[int, Join] = field(default_factory=dict)  # per slot moved into another kernel's nest: why

    def computed_by(self, kernel: Kernel) -> list[Node]:
        """The graph nodes a kernel evaluates (a node cheap enough to recompute is in every kernel that
        reads it), gathered over the slots it writes: merged kernels keep what each part computed."""
        found: dict[int, Node] = {}
        for s in kernel.outputs:
            for node in self.computes.get(s, ()):
                found.setdefault(id(node), node)
        return list(found.values())


class ScheduleError(RuntimeError):
    """The graph holds something the scheduler cannot turn into kernels; the message names the op."""


def describe(sched: Schedule) -> str:
    """One line per kernel: name, op, loop shape, slots read and written."""
    lines = []
    for k in sched.kernels:
        reads = ", ".join(f"buf{s}" for s in k.inputs)
        writes = ", ".join(f"buf{s}" for s in k.outputs)
        lines.append(f"{k.name}  {k.op.name}  loop{list(k.loop_shape)}  reads [{reads}]  writes [{writes}]")
    return "\n".join(lines)
