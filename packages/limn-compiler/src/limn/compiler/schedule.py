"""The scheduler: schedule(sinks) cuts an op graph into fused kernels, in the order they run.

It asks the fusion policy (fusion.py) which values get a buffer, builds each buffered value's kernel as an
expression tree over buffer slots (kernel.py), and orders the kernels so data flows forward and in-place
ASSIGNs run after every reader of the value they overwrite. The nouns of kernel.py are re-exported here.
Pipeline: tensor -> graph -> **schedule** -> IR (codegen.py) -> renderer -> device.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import replace

from limn.compiler.cse import common_values
from limn.compiler.epilogue import fold_epilogues
from limn.compiler.fusion import (
    ASSIGN_ORDER,
    RECOMPUTE_LIMIT,
    Decisions,
    Reason,
    Rule,
    assign_temp_reason,
    compose,
    decide,
    free_to_recompute,
    kernel_walk,
)
from limn.compiler.kernel import (
    Alu,
    Const,
    Custom,
    Elementwise,
    Expr,
    Gather,
    Join,
    Kernel,
    Load,
    Scatter,
    Schedule,
    ScheduleError,
    Sink,
    Slot,
    SlotKind,
    describe,
    fold_form,
    walk_expr,
)
from limn.compiler.merge import merge_kernels, unread_dropped
from limn.graph import custom
from limn.graph.ops import MOVEMENT, REDUCE, CustomArg, Node, Op, toposort
from limn.graph.view import View

__all__ = [
    "RECOMPUTE_LIMIT",
    "Alu",
    "Const",
    "Expr",
    "Gather",
    "Kernel",
    "Load",
    "Reason",
    "Rule",
    "Schedule",
    "ScheduleError",
    "Sink",
    "Slot",
    "SlotKind",
    "compose",
    "describe",
    "kernel_count",
    "schedule",
    "walk_expr",
]


def schedule(sinks: Sequence[Node], order: list[Node] | None = None) -> Schedule:
    """The kernels computing `sinks`, in run order, over numbered slots; `reasons` says for every slot a
    kernel writes which fusion rule gave it a buffer. `order` is toposort(sinks) when the caller has walked
    it already.

        >>> from limn import Tensor
        >>> print(describe(schedule([Tensor.randn((4, 5)).softmax(-1).node])))
        k0  MAX  loop[4, 5]  reads [buf0]  writes [buf1]
        k1  SUM  loop[4, 5]  reads [buf0, buf1]  writes [buf2]
        k2  MUL  loop[4, 5]  reads [buf0, buf1, buf2]  writes [buf3]
    """
    sinks = list(sinks)
    if order is None:
        order = toposort(sinks)
    sinks, shared = common_values(sinks, order)  # a value computed twice is one node (limn.compiler.cse)
    order = shared if shared is not None else order
    _check_assign_targets(order)
    decisions = decide(order, sinks)  # every buffer, each with its reason (fusion.py)
    build = _build(order, decisions)
    while stuck := _stuck_assign(build):
        decisions.via_temp[id(stuck)] = ASSIGN_ORDER  # a temp for this ASSIGN; every other decision stands
        build = _build(order, decisions)
    return _finish(build, sinks)


def kernel_count(sinks: Sequence[Node]) -> int:
    """How many kernels the scheduler makes for these sinks (what fusion tests count)."""
    return len(schedule(sinks).kernels)


def _check_assign_targets(order: list[Node]) -> None:
    for node in order:
        if node.op is Op.ASSIGN and node.srcs[0].op is not Op.BUFFER:
            raise ScheduleError(
                f"ASSIGN into a {node.srcs[0].op.name} node of shape {node.shape}: the target must be a realized buffer"
            )


# ---- building: one kernel per stored value ----


class _Build:
    """One build of every kernel, in graph order: the slots, each kernel's expression, the reason for each
    slot written, and what ordering needs (which kernels inline which values, who reads before an ASSIGN)."""

    def __init__(self, decisions: Decisions) -> None:
        self.decisions = decisions
        self.slots: list[Slot] = []
        self.slot_of: dict[int, int] = {}  # node id -> the slot holding its value
        self.inputs: list[int] = []  # slots of leaf buffers, in the order the graph meets them
        self.kernels: list[Kernel] = []
        self.reasons: dict[int, Reason] = {}  # per slot a kernel writes
        self.in_place: dict[int, Node] = {}  # kernel index -> the ASSIGN it writes into its target in place
        self.users: dict[int, set[int]] = {}  # inlined node id -> kernels that inline it
        self.old_reads: dict[int, set[int]] = {}  # kernel -> input slots it reads as they were
        self.new_reads: dict[int, set[int]] = {}  # kernel -> slots it reads after an ASSIGN wrote them
        self.reads: dict[int, set[int]] = {}  # kernel -> every slot it reads
        self.run_order: list[int] = []  # kernel indices in run order (short of all of them: a cycle)
        self.computes: dict[int, dict[int, Node]] = {}  # kernel -> the graph nodes it evaluates, by id

    def new_slot(self, node: Node, kind: SlotKind, reason: Reason | None, target: int | None = None) -> int:
        self.slots.append(Slot(len(self.slots), node.dtype, node.shape, kind, target))
        if reason is not None:
            self.reasons[len(self.slots) - 1] = reason
        return len(self.slots) - 1

    def expr(self, root: Node, kernel: int, is_root: bool = False) -> Expr:
        """The expression computing `root` at each point of its own (row-major) shape; `is_root` builds root
        from its srcs though it is stored (the value this kernel writes). It follows fusion.kernel_walk, the
        walk first_missing_buffer took, so whatever a kernel could not read through is stored already.
        memo is keyed by (node, view): a node read through a view V evaluates its sources through V too when
        it is elementwise, and through compose(its view, V) when it is itself a VIEW."""
        stored = self.decisions.stored
        memo: dict[tuple[int, int], Expr] = {}  # (id(node), id(view)); the view None at the node's own index
        for node, v, source_keys in kernel_walk(root, is_root, stored, set(), {}):
            key, own = (id(node), id(v)), node is root and is_root
            if source_keys is None:  # a literal, or a load of a stored value or a leaf buffer
                if node.op is Op.CONST and (id(node) not in stored or own):
                    memo[key] = Const(node.arg, node.dtype, v if v is not None and v.mask is not None else None)
                else:
                    memo[key] = self._load(node, v, kernel)
                continue
            self.computes.setdefault(kernel, {})[id(node)] = node
            if not own and not free_to_recompute(node, stored):
                self.users.setdefault(id(node), set()).add(kernel)
            sources = [memo[k] for k in source_keys]
            memo[key] = sources[0] if node.op in MOVEMENT else Alu(node.op, tuple(sources), node.dtype)
        return memo[(id(root), id(None))]

    def _load(self, node: Node, v: View | None, kernel: int) -> Load:
        slot = self.slot_of[id(node)]
        self.reads.setdefault(kernel, set()).add(slot)
        if node.op is Op.BUFFER:
            self.old_reads.setdefault(kernel, set()).add(slot)
        elif node.op is Op.ASSIGN:
            self.new_reads.setdefault(kernel, set()).add(slot)
        return Load(slot, v or View.contiguous(node.shape), node.dtype)


def _build(order: list[Node], decisions: Decisions) -> _Build:
    """Numbers the leaf buffers, builds one kernel per stored value in graph order, and orders them."""
    build = _Build(decisions)
    buffer_slot: dict[int, int] = {}  # id(Buffer) -> slot, so one buffer read twice is one slot
    for node in order:  # leaves first, numbered in the order the graph meets them
        if node.op is Op.BUFFER:
            if id(node.arg) not in buffer_slot:
                buffer_slot[id(node.arg)] = build.new_slot(node, SlotKind.INPUT, None)
                build.inputs.append(buffer_slot[id(node.arg)])
            build.slot_of[id(node)] = buffer_slot[id(node.arg)]
    custom_calls: dict[tuple, list[int]] = {}  # one CUSTOM call -> its output slots
    for node in order:
        if id(node) not in decisions.stored:
            continue
        if node.op is Op.CUSTOM:
            _custom_kernel(build, node, order, custom_calls)
        elif node.op is Op.ASSIGN:
            _assign_kernel(build, node)
        else:
            _kernel(build, node)
    shared = [nid for nid, users in build.users.items() if len(users) > 1 and nid not in decisions.recomputed]
    assert not shared, f"fusion.share left {len(shared)} values that several kernels compute"
    build.run_order = _run_order(build)
    return build


def _custom_kernel(build: _Build, node: Node, order: list[Node], calls: dict[tuple, list[int]]) -> None:
    """One kernel for all outputs of a CUSTOM call: the first of its output nodes met makes it."""
    build.computes.setdefault(len(build.kernels), {})[id(node)] = node
    arg: CustomArg = node.arg
    key = (arg.name, arg.params, tuple(id(s) for s in node.srcs))
    if key in calls:  # a sibling output: the merged call already writes it
        build.slot_of[id(node)] = calls[key][arg.output]
        return
    outs = [-1] * arg.n_outputs
    same_call = (arg.name, arg.params, node.srcs)
    for sib in order:
        if sib.op is Op.CUSTOM and (sib.arg.name, sib.arg.params, sib.srcs) == same_call:
            reason = build.decisions.stored[id(sib)]
            outs[sib.arg.output] = build.slot_of[id(sib)] = build.new_slot(sib, SlotKind.TEMP, reason)
    for i in [i for i, slot in enumerate(outs) if slot == -1]:
        # an output this graph never reads (L alone asked for, O realized before): the call still writes it,
        # into a scratch buffer of the shape the op's signature gives
        outs[i] = build.new_slot(_sibling(node, i), SlotKind.TEMP, None)
    calls[key] = outs
    inputs = tuple(build.slot_of[id(s)] for s in node.srcs)
    build.reads[len(build.kernels)] = set(inputs)
    name = f"k{len(build.kernels)}"
    kernel = Kernel(name, Op.CUSTOM, outs[arg.output], node.shape, Custom(arg, inputs, tuple(outs)))
    build.kernels.append(kernel)


def _sibling(node: Node, output: int) -> Node:
    """The CUSTOM node for output `output` of the call `node` belongs to, made from its op's signature."""
    arg: CustomArg = node.arg
    op = custom.REGISTRY.get(arg.name)
    if op is None:
        raise ScheduleError(f"CUSTOM kernel {arg.name!r} is not registered; import the module that defines it")
    (sibling,) = [n for n in custom.nodes(op, node.srcs, dict(arg.params)) if n.arg.output == output]
    return sibling


def _assign_kernel(build: _Build, node: Node) -> None:
    """An ASSIGN writes its target's slot in place, or a temp (an ASSIGN slot) copied over at the end."""
    kid = len(build.kernels)
    build.computes.setdefault(kid, {})[id(node)] = node
    target = build.slot_of[id(node.srcs[0])]
    value = build.expr(node.srcs[1], kid)
    build.reasons.setdefault(target, build.decisions.stored[id(node)])
    temp_reason = assign_temp_reason(node, value, target, build.decisions)
    if temp_reason is not None:
        out = build.slot_of[id(node)] = build.new_slot(node, SlotKind.ASSIGN, temp_reason, target)
    else:
        out = build.slot_of[id(node)] = target
        build.in_place[kid] = node
    build.kernels.append(Kernel(f"k{kid}", Op.ASSIGN, out, node.shape, Elementwise(value)))


def _kernel(build: _Build, node: Node) -> None:
    """The kernel of a stored REDUCE, GATHER, SCATTER, CONTIGUOUS, or of a stored elementwise value, view
    or const (a sink, a shared value, a stretched one), each writing a new temp slot."""
    kid = len(build.kernels)
    build.computes.setdefault(kid, {})[id(node)] = node
    name = f"k{kid}"
    out = build.slot_of[id(node)] = build.new_slot(node, SlotKind.TEMP, build.decisions.stored[id(node)])
    if node.op in REDUCE:
        src = node.srcs[0]
        form = fold_form(node.op, build.expr(src, kid), tuple(node.arg), src.shape)  # a Contraction or a Fold
        kernel = Kernel(name, node.op, out, src.shape, form)
    elif node.op is Op.GATHER:
        src_load, idx_load = build.expr(node.srcs[0], kid), build.expr(node.srcs[1], kid)
        assert isinstance(src_load, Load) and isinstance(idx_load, Load), "gather operands are stored"
        gather = Gather(src_load, idx_load, node.arg, node.dtype)
        kernel = Kernel(name, Op.GATHER, out, node.shape, Elementwise(gather))
    elif node.op is Op.SCATTER:
        base, idx, upd = node.srcs
        idx_load = build.expr(idx, kid)
        assert isinstance(idx_load, Load), "scatter indices are stored"
        form = Scatter(build.expr(base, kid), idx_load, build.expr(upd, kid), node.arg, idx.shape)
        kernel = Kernel(name, Op.SCATTER, out, node.shape, form)
    elif node.op is Op.CONTIGUOUS:
        kernel = Kernel(name, Op.CONTIGUOUS, out, node.shape, Elementwise(build.expr(node.srcs[0], kid)))
    else:
        kernel = Kernel(name, node.op, out, node.shape, Elementwise(build.expr(node, kid, is_root=True)))
    build.kernels.append(kernel)


# ---- ordering ----


def _run_order(build: _Build) -> list[int]:
    """Kernel indices in an order that respects data flow and lets in-place ASSIGNs run after every kernel
    that reads the value they overwrite; shorter than the kernels when in-place ASSIGNs close a cycle."""
    kernels, in_place = build.kernels, build.in_place
    producer: dict[int, int] = {}
    for i, k in enumerate(kernels):
        if i not in in_place:
            for s in k.outputs:
                producer[s] = i
    in_place_by_slot = {kernels[i].out: i for i in in_place}
    deps: list[set[int]] = [set() for _ in kernels]
    for i in range(len(kernels)):
        for s in build.reads.get(i, ()):
            if s in producer and producer[s] != i:
                deps[i].add(producer[s])
        for s in build.new_reads.get(i, ()):
            if s in in_place_by_slot and in_place_by_slot[s] != i:
                deps[i].add(in_place_by_slot[s])
    for i, reads in build.old_reads.items():
        for target in reads:
            if target in in_place_by_slot and in_place_by_slot[target] != i:
                deps[in_place_by_slot[target]].add(i)  # the old value is read before the assign overwrites it
    # Kahn's algorithm, taking the lowest ready kernel so kernels keep graph order where they can, and
    # in-place ASSIGNs only when nothing else is ready: a realize() that fails (a bad gather index) has
    # then most likely not written into any caller's buffer yet
    waiting = [len(d) for d in deps]
    unblocks: list[list[int]] = [[] for _ in kernels]
    for i, d in enumerate(deps):
        for j in d:
            unblocks[j].append(i)
    ready = [(i in in_place, i) for i, n in enumerate(waiting) if n == 0]
    heapq.heapify(ready)
    done: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        done.append(i)
        for j in unblocks[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, (j in in_place, j))
    return done


def _stuck_assign(build: _Build) -> Node | None:
    """The first in-place ASSIGN that no order puts after every reader of its old value, or None."""
    if len(build.run_order) == len(build.kernels):
        return None
    placed = set(build.run_order)
    return next(build.in_place[i] for i in range(len(build.kernels)) if i not in placed and i in build.in_place)


def _finish(build: _Build, sinks: list[Node]) -> Schedule:
    """The kernels in run order, renamed k0, k1, ...; then the copies of ASSIGN temps into their targets,
    all together; and each sink's slot. Elementwise kernels then fold into the kernels that read them cell
    for cell (limn.compiler.merge), and into the reduce kernels whose totals they read cell for cell
    (limn.compiler.epilogue)."""
    kernels = [_renamed(build.kernels[i], f"k{n}") for n, i in enumerate(build.run_order)]
    for temp in build.slots:
        if temp.kind is SlotKind.ASSIGN:
            assert temp.target is not None, f"ASSIGN slot buf{temp.number} has no target"
            shape = build.slots[temp.target].shape
            load = Load(temp.number, View.contiguous(shape), temp.dtype)
            kernels.append(Kernel(f"k{len(kernels)}", Op.ASSIGN, temp.target, shape, Elementwise(load)))
    sink_slots = []
    for s in sinks:
        base = s if id(s) in build.slot_of else s.srcs[0]  # an alias reads its source's buffer
        if s.op is Op.ASSIGN:
            base = s.srcs[0]  # the target itself, also when the value went through a temp first
        sink_slots.append(Sink(build.slot_of[id(base)], s.shape))
    computes: dict[int, list[Node]] = {}  # per slot written: the nodes of the kernel that writes it
    for i, k in enumerate(build.kernels):
        computes.setdefault(k.out, []).extend(build.computes.get(i, {}).values())
    joins: dict[int, Join] = {}  # per value merge or epilogue moved into another kernel's nest: why
    kernels = fold_epilogues(merge_kernels(kernels, joins), joins)
    kept = {s.slot for s in sink_slots} | {s.number for s in build.slots if s.kind is not SlotKind.TEMP}
    kernels = unread_dropped(kernels, kept)
    return Schedule(kernels, build.slots, build.inputs, sink_slots, build.reasons, computes, build.slot_of, joins)


def _renamed(k: Kernel, name: str) -> Kernel:
    return k if k.name == name else replace(k, name=name)
