"""The scheduler: cuts an op graph into fused kernels.

Elementwise work fuses into whatever consumes it; a cut falls wherever a value has to exist in memory: a
sink, a reduce, CONTIGUOUS, ASSIGN, GATHER, SCATTER, CUSTOM, a view the consumer cannot index through,
and an elementwise value two kernels would otherwise both compute. Each kernel is a small expression
tree (Load / Const / Alu / Gather) over numbered buffer slots, evaluated at every point of its loop shape.
A whole matmul (broadcast, multiply, reduce) is one kernel, and a sink that only drops a kept dim
aliases the kernel's buffer instead of copying it.
Pipeline: tensor -> graph -> **schedule** -> IR (codegen.py) -> renderer -> device.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from limn.dtypes import DType
from limn.ops import ELEMENTWISE, REDUCE, CustomArg, Node, Op, Shape, postorder, toposort
from limn.view import View

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


@dataclass(frozen=True)
class ScatterPart:
    """The second nest of a SCATTER kernel: out[..., idx[j], ...] += upd[j] over idx's shape."""

    idx: Load
    upd: Expr
    axis: int
    shape: Shape


@dataclass(frozen=True)
class Kernel:
    """One unit of compiled work: fill `out` by evaluating `expr` at every point of `loop_shape`
    (folding over `reduce_axes` with `op` when op is SUM or MAX). GATHER kernels carry a Gather in expr,
    SCATTER kernels a `scatter` part after the copy of the base, CUSTOM kernels only `custom`."""

    name: str
    op: Op
    out: int
    loop_shape: Shape
    expr: Expr | None
    reduce_axes: tuple[int, ...] = ()
    scatter: ScatterPart | None = None
    custom: CustomArg | None = None
    custom_inputs: tuple[int, ...] = ()
    custom_outputs: tuple[int, ...] = ()

    @property
    def inputs(self) -> tuple[int, ...]:
        """Slots this kernel reads, in first-use order."""
        if self.custom is not None:
            return self.custom_inputs
        found: list[int] = []
        roots: list[Expr] = [self.expr] if self.expr is not None else []
        if self.scatter is not None:
            roots += [self.scatter.idx, self.scatter.upd]
        for e in walk_expr(roots):
            slots = [e.slot] if isinstance(e, Load) else [e.src.slot, e.idx.slot] if isinstance(e, Gather) else []
            for s in slots:
                if s not in found:
                    found.append(s)
        return tuple(found)

    @property
    def outputs(self) -> tuple[int, ...]:
        return self.custom_outputs if self.custom is not None else (self.out,)


def walk_expr(roots: Sequence[Expr]) -> list[Expr]:
    """Every sub-expression, each after its sources, each once (a Gather reads its two loads itself)."""
    return postorder(roots, lambda e: e.srcs if isinstance(e, Alu) else ())


# ---- the schedule ----


@dataclass(frozen=True)
class Slot:
    """A buffer the schedule reads or writes. `kind` is 'input' (a leaf buffer the caller binds),
    'temp' (allocated per run), or 'assign' (a temp whose value lands in `target` after every kernel)."""

    number: int
    dtype: DType
    shape: Shape
    kind: str
    target: int | None = None


@dataclass
class Schedule:
    kernels: list[Kernel]
    slots: list[Slot]
    inputs: list[int]  # slots bound to the graph's leaf buffers, in leaf order
    sinks: list[tuple[int, Shape]]  # per sink: the slot holding it and the shape it is read as


class ScheduleError(RuntimeError):
    """The graph holds something the scheduler cannot turn into kernels; the message names the op."""


def compose(inner: View, outer: View) -> View | None:
    """A View equal to reading through `inner` at the positions `outer` produces, where outer indexes
    inner's shape in row-major order; None where no single View says that."""
    if inner.is_contiguous:
        return outer
    if inner.mask is not None:
        return None
    flat = inner.reshape((inner.size,))
    if flat is None or flat.mask is not None:
        return None
    step = flat.strides[0] if inner.size > 1 else 0
    strides = tuple(s * step for s in outer.strides)
    return View(outer.shape, strides, flat.offset + outer.offset * step, outer.mask)


class _NeedsBuffer(Exception):
    """Raised while building kernels when these nodes must be materialized first; the scheduler retries."""

    def __init__(self, *nodes: Node) -> None:
        self.nodes = nodes


def _cheap(node: Node, buffered: set[int]) -> bool:
    """Values a kernel may recompute freely instead of reading them from memory: sources, and views of
    values that already live in memory (a view is only index arithmetic on the load)."""
    if node.op in (Op.CONST, Op.BUFFER):
        return True
    if node.op is not Op.VIEW:
        return False
    src = node.srcs[0]
    return src.op in (Op.BUFFER, Op.CONST) or id(src) in buffered


class _Builder:
    """Turns the graph below each materialized node into a kernel expression, noting which kernels
    inline which nodes and which buffers each kernel reads before and after an ASSIGN."""

    def __init__(self, buffered: set[int], slot_of: dict[int, int]) -> None:
        self.buffered = buffered  # ids of nodes whose value lives in a buffer
        self.slot_of = slot_of
        self.users: dict[int, set[int]] = {}  # inlined node id -> kernels that inline it
        self.inlined: dict[int, set[int]] = {}  # kernel -> ids of the nodes it inlines
        self.old_reads: dict[int, set[int]] = {}  # kernel -> input slots it reads as they were
        self.new_reads: dict[int, set[int]] = {}  # kernel -> slots it reads after an ASSIGN wrote them

    def expr(self, root: Node, kernel: int, expand_root: bool = False) -> Expr:
        """The expression computing `root` at each point of its own (row-major) shape. expand_root builds
        root from its sources even though root itself is buffered (it is the value this kernel writes).

        memo is keyed by (node, view): a node read through a view V evaluates its sources through V
        too when it is elementwise, and through compose(its view, V) when it is itself a VIEW."""
        memo: dict[tuple[int, View | None], Expr] = {}
        stack: list[tuple[Node, View | None]] = [(root, None)]
        while stack:
            node, v = stack[-1]
            if (id(node), v) in memo:
                stack.pop()
                continue
            if (node is not root or not expand_root) and (id(node) in self.buffered or node.op is Op.BUFFER):
                memo[(id(node), v)] = self._load(node, v, kernel)
                stack.pop()
                continue
            if node.op is Op.CONST:
                masked = v if v is not None and v.mask is not None else None
                memo[(id(node), v)] = Const(node.arg, node.dtype, masked)
                stack.pop()
                continue
            if node.op is Op.VIEW:
                src = node.srcs[0]
                inner = node.arg if v is None else compose(node.arg, v)
                if inner is None:
                    raise _NeedsBuffer(node)  # two views that do not compose into one: copy first
                src_leaf = src.op in (Op.BUFFER, Op.CONST) or id(src) in self.buffered
                if inner.mask is not None and not src_leaf:
                    raise _NeedsBuffer(src)  # a pad must read zeros, not f(0): materialize f first
                sources = [(src, inner)]
            elif node.op in ELEMENTWISE:
                sources = [(s, v) for s in node.srcs]  # elementwise: same index, same outer view
            else:
                raise _NeedsBuffer(node)
            missing = [sv for sv in sources if (id(sv[0]), sv[1]) not in memo]
            if missing:
                stack.extend(reversed(missing))
                continue
            stack.pop()
            if not (node is root and expand_root) and not _cheap(node, self.buffered):
                self.users.setdefault(id(node), set()).add(kernel)
                self.inlined.setdefault(kernel, set()).add(id(node))
            built = tuple(memo[(id(s), sv)] for s, sv in sources)
            memo[(id(node), v)] = built[0] if node.op is Op.VIEW else Alu(node.op, built, node.dtype)
        return memo[(id(root), None)]

    def _load(self, node: Node, v: View | None, kernel: int) -> Load:
        slot = self.slot_of[id(node)]
        if node.op is Op.BUFFER:
            self.old_reads.setdefault(kernel, set()).add(slot)
        elif node.op is Op.ASSIGN:
            self.new_reads.setdefault(kernel, set()).add(slot)
        return Load(slot, v or View.contiguous(node.shape), node.dtype)


def schedule(sinks: Sequence[Node]) -> Schedule:
    """Cuts the graph below `sinks` into kernels (see the module docstring)."""
    sinks = list(sinks)
    order = toposort(sinks)
    buffered: set[int] = set()
    for node in order:
        if node.op in REDUCE or node.op in (Op.CONTIGUOUS, Op.ASSIGN, Op.GATHER, Op.SCATTER, Op.CUSTOM):
            buffered.add(id(node))
        if node.op in (Op.GATHER, Op.SCATTER):
            _buffer_index_source(node.srcs[1], buffered)  # indices are range-checked in memory
            if node.op is Op.GATHER:
                _buffer_index_source(node.srcs[0], buffered)
        if node.op is Op.CUSTOM:
            for s in node.srcs:
                buffered.add(id(s))  # a device kernel reads whole row-major buffers
        if node.op is Op.ASSIGN and node.srcs[0].op is not Op.BUFFER:
            raise ScheduleError(
                f"ASSIGN into a {node.srcs[0].op.name} node of shape {node.shape}: the target must be a realized buffer"
            )
    for s in sinks:
        if s.op is not Op.BUFFER and not _aliases(s, buffered):
            buffered.add(id(s))

    temp_assigns: set[int] = set()
    while True:
        recomputed = _buffer_shared(order, buffered)
        try:
            return _build(order, sinks, buffered, temp_assigns, recomputed)
        except _NeedsBuffer as need:
            for n in need.nodes:
                assert id(n) not in buffered, f"{n} is buffered but still asked for"
                buffered.add(id(n))
        except _NeedsTemp as need:
            temp_assigns.add(id(need.node))


class _NeedsTemp(Exception):
    """An in-place ASSIGN cannot be ordered after every reader of the old value: write a temp instead."""

    def __init__(self, node: Node) -> None:
        self.node = node


def _buffer_index_source(node: Node, buffered: set[int]) -> None:
    """Indices and gather sources are read straight from memory: buffer whatever they are views of."""
    base = node.srcs[0] if node.op is Op.VIEW else node
    if base.op is not Op.BUFFER:
        buffered.add(id(base))


def _aliases(sink: Node, buffered: set[int]) -> bool:
    """A sink that is a plain reshape of a value this schedule computes reads that value's buffer as it
    is. Leaf buffers and ASSIGN targets belong to the caller and change later, so their reshapes copy."""
    if sink.op is not Op.VIEW:
        return False
    src = sink.srcs[0]
    owned = id(src) in buffered and src.op not in (Op.BUFFER, Op.ASSIGN)
    return owned and sink.arg.is_contiguous and src.size == sink.size


_SHARED = -1  # _buffer_shared's owner for a value two kernels reach

# A value two kernels reach is computed again in each when its own work, down to values in memory, is
# at most this many elementwise ops (exp, log, sqrt and recip count 4): reading it back would cost a
# write and a read of memory per element, more than redoing a few flops. Past it, it gets a buffer.
RECOMPUTE_LIMIT = 24
_COSTLY = frozenset({Op.EXP, Op.LOG, Op.SQRT, Op.RECIP})


def _recompute_cost(node: Node, buffered: set[int]) -> int | None:
    """The elementwise work below `node` down to values in memory, or None past RECOMPUTE_LIMIT."""
    cost, seen, stack = 0, set(), [node]
    while stack:
        n = stack.pop()
        if id(n) in seen or id(n) in buffered or n.op in (Op.BUFFER, Op.CONST):
            continue
        seen.add(id(n))
        if n.op is Op.VIEW:
            if n.arg.mask is not None:
                return None  # a pad over a computed value is buffered anyway
            stack.append(n.srcs[0])
            continue
        if n.op not in ELEMENTWISE:
            return None
        cost += 4 if n.op in _COSTLY else 1
        if cost > RECOMPUTE_LIMIT:
            return None
        stack.extend(n.srcs)
    return cost


def _buffer_shared(order: list[Node], buffered: set[int]) -> set[int]:
    """Decides, for every elementwise value that two kernels reach, whether each recomputes it (when it
    is cheap, see RECOMPUTE_LIMIT) or it becomes a kernel of its own, and returns the recomputed ones.
    A computed value that a view stretches is stored rather than recomputed once per copy, when it feeds
    a reduce or costs more than the limit: a matmul's operands are then plain loads, and nothing is
    evaluated (m, n, k) times. One pass from the sinks down: a value inlined into one kernel belongs to
    it, one that two kernels reach is shared, and so are the sources of a shared value recomputed. It is
    the rule _build checks, applied outermost first, so thousands of shared values need no rebuild each."""
    by_id = {id(n): n for n in order}
    owner: dict[int, int] = {}  # node id -> the kernel (its root's id) inlining it, or _SHARED
    recomputed: set[int] = set()
    for node in reversed(order):  # every consumer before the values it reads
        if node.op in (Op.BUFFER, Op.CONST):
            continue
        if id(node) in buffered:
            kernel = id(node)  # a kernel root: its sources are inlined into it
        elif id(node) not in owner:
            continue  # an aliasing sink: nothing to compute
        else:
            kernel = owner[id(node)]
            src = node.srcs[0] if node.op is Op.VIEW else None
            if src is not None and node.size > src.size and src.op not in (Op.BUFFER, Op.CONST):
                root = by_id.get(kernel)
                into_reduce = kernel == _SHARED or (root is not None and root.op in REDUCE)
                if id(src) not in buffered and (into_reduce or _recompute_cost(src, buffered) is None):
                    buffered.add(id(src))  # stretched: stored once, read as often as the view asks
                    continue
            if kernel == _SHARED and not _cheap(node, buffered):
                if _recompute_cost(node, buffered) is not None:
                    recomputed.add(id(node))  # every kernel that reaches it reaches its sources too
                else:
                    buffered.add(id(node))
                    kernel = id(node)
        for s in node.srcs:
            owner[id(s)] = kernel if owner.get(id(s), kernel) == kernel else _SHARED
    return recomputed


def _build(
    order: list[Node], sinks: list[Node], buffered: set[int], temp_assigns: set[int], recomputed: set[int]
) -> Schedule:
    slots: list[Slot] = []
    slot_of: dict[int, int] = {}
    inputs: list[int] = []
    buffer_slot: dict[int, int] = {}  # id(Buffer) -> slot, so one buffer read twice is one slot

    def new_slot(node: Node, kind: str, target: int | None = None) -> int:
        slots.append(Slot(len(slots), node.dtype, node.shape, kind, target))
        return len(slots) - 1

    for node in order:  # leaves first, numbered in the order the graph meets them
        if node.op is Op.BUFFER:
            key = id(node.arg)
            if key not in buffer_slot:
                buffer_slot[key] = new_slot(node, "input")
                inputs.append(buffer_slot[key])
            slot_of[id(node)] = buffer_slot[key]

    builder = _Builder(buffered, slot_of)
    kernels: list[Kernel] = []
    assign_nodes: dict[int, Node] = {}  # kernel index -> its ASSIGN node, for in-place ordering
    copies: list[tuple[int, int]] = []
    custom_done: dict[tuple, list[int]] = {}
    for node in order:
        if id(node) not in buffered or node.op is Op.BUFFER:
            continue
        kid = len(kernels)
        name = f"k{kid}"
        if node.op is Op.CUSTOM:
            arg: CustomArg = node.arg
            key = (arg.name, arg.params, tuple(id(s) for s in node.srcs))
            if key in custom_done:  # a sibling output: the merged call already writes it
                slot_of[id(node)] = custom_done[key][arg.output]
                continue
            outs = [-1] * arg.n_outputs
            same_call = (arg.name, arg.params, node.srcs)
            for sib in order:
                if sib.op is Op.CUSTOM and (sib.arg.name, sib.arg.params, sib.srcs) == same_call:
                    outs[sib.arg.output] = slot_of[id(sib)] = new_slot(sib, "temp")
            if -1 in outs:
                raise ScheduleError(
                    f"CUSTOM {arg.name!r}: output {outs.index(-1)} has no node in the graph; a multi-output "
                    "kernel needs one node per output (limn.custom.apply makes them all)"
                )
            custom_done[key] = outs
            inputs_ = tuple(slot_of[id(s)] for s in node.srcs)
            kernels.append(
                Kernel(
                    name,
                    Op.CUSTOM,
                    outs[arg.output],
                    node.shape,
                    None,
                    custom=arg,
                    custom_inputs=inputs_,
                    custom_outputs=tuple(outs),
                )
            )
            continue
        if node.op is Op.ASSIGN:
            target = slot_of[id(node.srcs[0])]
            value = builder.expr(node.srcs[1], kid)
            if id(node) in temp_assigns or _reads_target_elsewhere(value, target, node.shape):
                out = slot_of[id(node)] = new_slot(node, "assign", target)
                copies.append((out, target))
            else:
                out = slot_of[id(node)] = target
                assign_nodes[kid] = node
            kernels.append(Kernel(name, Op.ASSIGN, out, node.shape, value))
            continue
        out = slot_of[id(node)] = new_slot(node, "temp")
        if node.op in REDUCE:
            src = node.srcs[0]
            kernels.append(Kernel(name, node.op, out, src.shape, builder.expr(src, kid), reduce_axes=tuple(node.arg)))
        elif node.op is Op.GATHER:
            src_load, idx_load = builder.expr(node.srcs[0], kid), builder.expr(node.srcs[1], kid)
            assert isinstance(src_load, Load) and isinstance(idx_load, Load), "gather operands are buffered"
            value = Gather(src_load, idx_load, node.arg, node.dtype)
            kernels.append(Kernel(name, Op.GATHER, out, node.shape, value))
        elif node.op is Op.SCATTER:
            base, idx, upd = node.srcs
            idx_load = builder.expr(idx, kid)
            assert isinstance(idx_load, Load), "scatter indices are buffered"
            part = ScatterPart(idx_load, builder.expr(upd, kid), node.arg, idx.shape)
            kernels.append(Kernel(name, Op.SCATTER, out, node.shape, builder.expr(base, kid), scatter=part))
        elif node.op is Op.CONTIGUOUS:
            kernels.append(Kernel(name, Op.CONTIGUOUS, out, node.shape, builder.expr(node.srcs[0], kid)))
        else:  # an elementwise sink, or an elementwise value that is shared or viewed
            kernels.append(Kernel(name, node.op, out, node.shape, builder.expr(node, kid, expand_root=True)))

    shared = [nid for nid, users in builder.users.items() if len(users) > 1 and nid not in recomputed]
    assert not shared, f"_buffer_shared left {len(shared)} values that several kernels compute"

    kernels = _order_kernels(kernels, slots, builder, assign_nodes)
    for temp, target in copies:  # assigns that could not write in place land last, all together
        shape = slots[target].shape
        load = Load(temp, View.contiguous(shape), slots[temp].dtype)
        kernels.append(Kernel(f"k{len(kernels)}", Op.ASSIGN, target, shape, load))
    sink_slots = []
    for s in sinks:
        base = s if id(s) in slot_of else s.srcs[0]  # an alias reads its source's buffer
        if s.op is Op.ASSIGN:
            base = s.srcs[0]  # the target itself, also when the value went through a temp first
        sink_slots.append((slot_of[id(base)], s.shape))
    return Schedule(kernels, slots, inputs, sink_slots)


def _order_kernels(
    kernels: list[Kernel], slots: list[Slot], builder: _Builder, assign_nodes: dict[int, Node]
) -> list[Kernel]:
    """Kernels in an order that respects data flow and lets in-place ASSIGNs run after every kernel that
    reads the value they overwrite. Renames kernels k0, k1, ... in that order."""
    producer: dict[int, int] = {}
    for i, k in enumerate(kernels):
        if k.op is not Op.ASSIGN or i not in assign_nodes:
            for s in k.outputs:
                producer[s] = i
    in_place = {kernels[i].out: i for i in assign_nodes}
    deps: list[set[int]] = [set() for _ in kernels]
    for i, k in enumerate(kernels):
        for s in k.inputs:
            if s in producer and producer[s] != i:
                deps[i].add(producer[s])
        for s in builder.new_reads.get(i, ()):
            if s in in_place and in_place[s] != i:
                deps[i].add(in_place[s])
    for i, reads in builder.old_reads.items():
        for target in reads:
            if target in in_place and in_place[target] != i:
                deps[in_place[target]].add(i)  # the old value is read before the assign overwrites it
    # Kahn's algorithm, taking the lowest ready kernel so kernels keep graph order where they can, and
    # in-place ASSIGNs only when nothing else is ready: a realize() that fails (a bad gather index) has
    # then most likely not written into any caller's buffer yet
    waiting = [len(d) for d in deps]
    unblocks: list[list[int]] = [[] for _ in kernels]
    for i, d in enumerate(deps):
        for j in d:
            unblocks[j].append(i)
    ready = [(i in assign_nodes, i) for i, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    done: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        done.append(i)
        for j in unblocks[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, (j in assign_nodes, j))
    if len(done) < len(kernels):  # a cycle, which only in-place ASSIGNs can close
        placed = set(done)
        stuck = next(i for i in range(len(kernels)) if i not in placed and i in assign_nodes)
        raise _NeedsTemp(assign_nodes[stuck])
    return [_renamed(kernels[i], f"k{n}") for n, i in enumerate(done)]


def _renamed(k: Kernel, name: str) -> Kernel:
    return k if k.name == name else replace(k, name=name)


def _reads_target_elsewhere(value: Expr, target: int, shape: Shape) -> bool:
    """True when the assigned value reads its own target at another cell than the one it writes, so
    writing in place would let one cell see another's new value."""
    identity = View.contiguous(shape)
    for e in walk_expr([value]):
        loads = [e] if isinstance(e, Load) else [e.src, e.idx] if isinstance(e, Gather) else []
        for load in loads:
            if load.slot == target and (load.view != identity or isinstance(e, Gather)):
                return True
    return False


def kernel_count(sinks: Sequence[Node]) -> int:
    """How many kernels the scheduler makes for these sinks (what fusion tests count)."""
    return len(schedule(sinks).kernels)


def describe(sched: Schedule) -> str:
    """One line per kernel: name, op, loop shape, slots read and written."""
    lines = []
    for k in sched.kernels:
        reads = ", ".join(f"buf{s}" for s in k.inputs)
        writes = ", ".join(f"buf{s}" for s in k.outputs)
        lines.append(f"{k.name}  {k.op.name}  loop{list(k.loop_shape)}  reads [{reads}]  writes [{writes}]")
    return "\n".join(lines)
