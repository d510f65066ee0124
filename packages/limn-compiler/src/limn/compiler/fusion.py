"""The fusion policy: which values of a graph get a buffer of their own, and why (each keeps its Reason).

Views and elementwise work fuse into the kernel that reads them unless a rule stores them, in this order:
by op group (ALWAYS_STORED), by reader (OPERANDS_IN_MEMORY), sinks, recompute-or-store for values several
kernels reach (the cost model), and views a kernel cannot index through (the missing-buffer loop).
Pipeline: tensor -> graph -> **schedule** (fusion.py decides, schedule.py builds) -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

from limn.compiler.kernel import Expr, Gather, loads_of, walk_expr
from limn.graph.ops import (
    BARRIERS,
    ELEMENTWISE,
    ESCAPE,
    INDEXED,
    MOVEMENT,
    REDUCE,
    SOURCES,
    TRANSCENDENTAL,
    Node,
    Op,
    Shape,
)
from limn.graph.view import View


class Rule(Enum):
    """The rules that give a value a buffer, one line each; a Reason names one and says it for one value."""

    OP = "op"  # its op is always stored (ALWAYS_STORED)
    OPERAND = "operand"  # the op reading it reads it from memory (OPERANDS_IN_MEMORY)
    SINK = "sink"  # the caller reads it
    STRETCHED = "stretched"  # a view (an expand, a pad) stretches it: stored once, not evaluated per cell read
    SHARED = "shared"  # several kernels reach it and recomputing it in each costs more than RECOMPUTE_LIMIT
    VIEW_CHAIN = "view chain"  # it is a view that does not compose with the view it is read through
    PAD = "pad"  # a pad reads it: padding must read zeros, not f(0)
    ASSIGN_TEMP = "assign temp"  # an ASSIGN that cannot write in place writes a temp, copied over last


@dataclass(frozen=True)
class Reason:
    """Why one value has a buffer: the rule that stored it, and that rule's sentence for this value."""

    rule: Rule
    detail: str

    def __str__(self) -> str:
        return self.detail


# ---- what is always stored ----

# By op group, whoever reads the value. The other groups, SOURCES (a load or a literal), MOVEMENT (index
# arithmetic on a load) and ELEMENTWISE (evaluated at the reader's index), fuse into their readers unless
# a rule further down stores them.
ALWAYS_STORED: dict[frozenset[Op], str] = {
    REDUCE: "a reduce is always stored",  # a kernel folds one reduce, into its own output
    INDEXED: "a gather or scatter is always stored",  # its cells are picked by indices read at run time
    BARRIERS: "a barrier (CONTIGUOUS, ASSIGN) is always stored",  # putting a value in memory is its meaning
    ESCAPE: "a custom kernel's output is always stored",  # the device writes whole buffers
}


@dataclass(frozen=True)
class Operands:
    """The srcs of one op that must be in memory when it runs."""

    positions: tuple[int, ...] | None  # which srcs; None: every src
    through_views: bool  # True: what a view of the src reads is stored (the view stays index arithmetic)
    why: str


# By reader: a Gather reads its source and its indices as plain loads (the index replaces one coordinate of
# the source's view), and jit checks every index against its extent in memory before the kernel runs.
OPERANDS_IN_MEMORY: dict[Op, Operands] = {
    Op.GATHER: Operands((0, 1), True, "a gather reads its source and indices from memory"),
    Op.SCATTER: Operands((1,), True, "a scatter reads its indices from memory"),
    Op.CUSTOM: Operands(None, False, "a custom kernel reads whole row-major buffers"),
}


# ---- recompute or store: the cost model for a value several kernels reach ----
# Stored, it costs a write of memory per element and a read per reader; recomputed, it costs each reader
# the elementwise ops below it and the reads of the values in memory they start from. The weights count both
# in units of one add, and a value whose count passes RECOMPUTE_LIMIT is stored.

OP_WEIGHT = 1
"""ADD, MUL, NEG, CMPLT, WHERE, CAST: one instruction per element, the unit the other weights are in."""

TRANSCENDENTAL_WEIGHT = 4
"""EXP, LOG, SQRT, RECIP (ops.TRANSCENDENTAL): a math-library call or a divide, taken as four adds."""

VIEW_WEIGHT = 0
"""A view is index arithmetic folded into the load below it, so recomputing it costs nothing; a pad over a
computed value is never recomputed at all (it is stored by the pad rule)."""

LOAD_WEIGHT = 8
"""A read of a buffer at least as large as the value (a leaf it does not broadcast), past the first: a stream
of memory per element, taken as eight adds (the first costs what reading the stored value would). A smaller
leaf (a bias, a scalar) is read through a broadcast and stays in cache, so it costs nothing here. A residual
stream, the sum of every layer's outputs, is then stored once rather than re-read from all of them by each
kernel that reads it."""

RECOMPUTE_LIMIT = 24
"""A shared value costing up to this many units is recomputed in every kernel that reaches it; past it, it is
stored. 24 (six transcendentals, or 24 adds) is where one write and one read of memory per element are taken
to cost less than recomputing."""

WEIGHT: dict[Op, int] = (
    {op: OP_WEIGHT for op in ELEMENTWISE}
    | {op: TRANSCENDENTAL_WEIGHT for op in TRANSCENDENTAL}
    | {op: VIEW_WEIGHT for op in MOVEMENT}
)


def recompute_cost(node: Node, stored: dict[int, Reason], loads: bool = True) -> int | None:
    """The weighted ops below `node` and (with `loads`) the reads of the values in memory they start from
    beyond the first (counting stops once past RECOMPUTE_LIMIT), or None when a pad over a computed value lies
    below: that is never recomputed. The first full-size read is free because storing the value would cost
    its readers one read too: a chain of elementwise ops on one buffer (a GELU's pieces on a matmul's output)
    is recomputed from it rather than stored piece by piece."""
    cost, reads, seen, stack = 0, 0, set(), [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if is_leaf(n, stored):
            if loads and n.op is not Op.CONST and n.size >= node.size:
                cost += LOAD_WEIGHT if reads else 0
                reads += 1
            if cost > RECOMPUTE_LIMIT:
                return cost
            continue
        if n.op in MOVEMENT and n.arg.mask is not None:
            return None
        assert n.op in WEIGHT, f"{n} reached the cost model unstored: every op outside WEIGHT is ALWAYS_STORED"
        cost += WEIGHT[n.op]
        if cost > RECOMPUTE_LIMIT:
            return cost
        stack.extend(n.srcs)
    return cost


def _too_costly(cost: int | None) -> str | None:
    """Why a value with this recompute cost is stored rather than recomputed, or None when it is not."""
    if cost is None:
        return "it holds a pad over a computed value"
    if cost > RECOMPUTE_LIMIT:
        return f"recompute cost over {RECOMPUTE_LIMIT}"
    return None


# ---- what the policy decided for one graph ----


@dataclass
class Decisions:
    """The policy's answers for one graph, keyed by node id: the build reads them, the loops add to them."""

    stored: dict[int, Reason] = field(default_factory=dict)  # values with a buffer of their own
    recomputed: set[int] = field(default_factory=set)  # shared values every kernel reaching them recomputes
    via_temp: dict[int, Reason] = field(default_factory=dict)  # ASSIGNs whose ordering forces a temp

    def store(self, node: Node, reason: Reason) -> None:
        """Gives `node` a buffer; the first rule to store a value is its reason. A leaf BUFFER is in memory."""
        if node.op is not Op.BUFFER:
            self.stored.setdefault(id(node), reason)


def is_leaf(node: Node, stored: dict[int, Reason]) -> bool:
    """A value a kernel reads rather than computes: a source (a load or a literal) or a stored value."""
    return node.op in SOURCES or id(node) in stored


def free_to_recompute(node: Node, stored: dict[int, Reason]) -> bool:
    """Sources, and views of leaves: a kernel reaching one reads it (a view is index arithmetic on the
    load), so it is never counted as work two kernels share."""
    return node.op in SOURCES or (node.op in MOVEMENT and is_leaf(node.srcs[0], stored))


_STORED_BY_OP: dict[Op, Reason] = {}  # ALWAYS_STORED by op: the first group an op is in gives its reason
for _group, _why in ALWAYS_STORED.items():
    for _op in _group:
        _STORED_BY_OP.setdefault(_op, Reason(Rule.OP, _why))


def decide(order: list[Node], sinks: list[Node]) -> Decisions:
    """Every buffer the graph below `sinks` needs (`order` is its toposort), each with its Reason."""
    decisions = Decisions()
    for node in order:
        reason = _STORED_BY_OP.get(node.op)
        if reason is not None:
            decisions.store(node, reason)
        operands = OPERANDS_IN_MEMORY.get(node.op)
        if operands is not None:
            positions = range(len(node.srcs)) if operands.positions is None else operands.positions
            for i in positions:
                src = node.srcs[i]
                if operands.through_views and src.op in MOVEMENT:
                    src = src.srcs[0]
                decisions.store(src, Reason(Rule.OPERAND, operands.why))
    for s in sinks:
        if s.op is not Op.BUFFER and not aliases(s, decisions.stored):
            decisions.store(s, Reason(Rule.SINK, "a sink is read by the caller"))
    settle(order, decisions)
    return decisions


def aliases(sink: Node, stored: dict[int, Reason]) -> bool:
    """A sink that is a plain reshape of a value this schedule stores reads that value's buffer as it is.
    Leaf buffers (never in `stored`) and ASSIGN targets belong to the caller and change later: they copy."""
    if sink.op not in MOVEMENT:
        return False
    src = sink.srcs[0]
    owned = id(src) in stored and src.op is not Op.ASSIGN
    return owned and sink.arg.is_contiguous and src.size == sink.size


def settle(order: list[Node], decisions: Decisions) -> None:
    """Decides the shared values, then stores what some kernel cannot index through, one value at a time:
    each new buffer changes which kernel reaches what, so the shared values are decided again after it."""
    decisions.recomputed = share(order, decisions)
    while need := first_missing_buffer(order, decisions):
        assert id(need.node) not in decisions.stored, f"{need.node} is stored but still asked for"
        decisions.store(need.node, need.reason)
        decisions.recomputed = share(order, decisions)


# ---- shared and stretched values ----

_SHARED = -1  # share()'s owner for a value two kernels reach


def share(order: list[Node], decisions: Decisions) -> set[int]:
    """Decides, for every elementwise value two kernels reach, whether each recomputes it (cost within
    RECOMPUTE_LIMIT) or it is stored, and returns the recomputed ones. A computed value a view stretches is
    stored rather than recomputed once per copy when it feeds a reduce or costs past the limit: a matmul's
    operands are then plain loads, and nothing is evaluated (m, n, k) times. One pass from the sinks down: a
    value inlined into one kernel belongs to it, one that two kernels reach is shared, and so are the sources
    of a shared value recomputed. The build asserts the outcome: no value is computed by two kernels unless
    it is in the returned set."""
    stored = decisions.stored
    by_id = {id(n): n for n in order}
    owner: dict[int, int] = {}  # node id -> the kernel (its root's id) inlining it, or _SHARED
    recomputed: set[int] = set()
    for node in reversed(order):  # every consumer before the values it reads
        if node.op in SOURCES:
            continue
        if id(node) in stored:
            kernel = id(node)  # a kernel root: its sources are inlined into it
        elif id(node) not in owner:
            continue  # an aliasing sink: nothing to compute
        else:
            kernel = owner[id(node)]
            stretched = _stretched_reason(node, by_id.get(kernel), stored)
            if stretched is not None:
                decisions.store(node.srcs[0], stretched)  # stored once, read as often as the view asks
                continue
            if kernel == _SHARED and not free_to_recompute(node, stored):
                why = _too_costly(recompute_cost(node, stored))
                if why is None:
                    recomputed.add(id(node))  # every kernel that reaches it reaches its sources too
                else:
                    decisions.store(node, Reason(Rule.SHARED, f"shared by several kernels, {why}"))
                    kernel = id(node)
        for s in node.srcs:
            owner[id(s)] = kernel if owner.get(id(s), kernel) == kernel else _SHARED
    return recomputed


def _stretched_reason(node: Node, root: Node | None, stored: dict[int, Reason]) -> Reason | None:
    """Why the computed value a view `node` stretches is stored, or None when the view reads through to it.
    `root` is the kernel `node` is inlined into, None when several kernels reach it."""
    if node.op not in MOVEMENT or is_leaf(node.srcs[0], stored):
        return None
    src = node.srcs[0]
    if node.size <= src.size:
        return None
    stretch = f"a view stretches its {src.size} elements to {node.size}"
    if root is None:
        return Reason(Rule.STRETCHED, f"{stretch} for several kernels")
    if root.op in REDUCE:
        return Reason(Rule.STRETCHED, f"{stretch} into a reduce")
    # once per copy, from the same few cells: what repeats is the ops, the reads stay in cache
    why = _too_costly(recompute_cost(src, stored, loads=False))
    return None if why is None else Reason(Rule.STRETCHED, f"{stretch}, {why}")


# ---- views a kernel cannot index through ----


def compose(inner: View, outer: View) -> View | None:
    """One View reading `inner` at the row-major positions `outer` gives over inner's shape; None where none does."""
    if inner.is_contiguous:
        return outer
    flat = None if inner.mask is not None else inner.reshape((inner.size,))
    if flat is None:  # not one strided line: composed only where outer reorders inner's dims
        return _reordered(inner, outer)
    step = flat.strides[0] if inner.size > 1 else 0
    strides = tuple(s * step for s in outer.strides)
    return View(outer.shape, strides, flat.offset + outer.offset * step, outer.mask)


def _reordered(inner: View, outer: View) -> View | None:
    """`inner` read through an `outer` that only puts inner's dims in another order (a permute, size-1
    dims added or dropped): inner with its dims (and mask) moved the same way. None for any other outer."""
    dims = sorted((d for d, n in enumerate(outer.shape) if n != 1), key=lambda d: -outer.strides[d])
    sizes = tuple(outer.shape[d] for d in dims)  # outer's dims in inner's row-major order
    plain = not outer.offset and outer.mask is None and 0 < outer.size == inner.size
    if not plain or View.contiguous(sizes).strides != tuple(outer.strides[d] for d in dims):
        return None
    lined = inner.reshape(sizes)  # None unless it only drops size-1 dims
    order = tuple(sorted(range(len(dims)), key=lambda k: dims[k]))  # outer's non-1 dims, as positions in sizes
    return None if lined is None else lined.permute(order).reshape(outer.shape)


@dataclass(frozen=True)
class Need:
    """A value the kernels cannot be built without storing, and the rule that says so."""

    node: Node
    reason: Reason


def kernel_reads(node: Node) -> list[tuple[Node, bool]]:
    """The values the kernel of stored `node` builds expressions for, in the order schedule.py builds them,
    each with whether it is `node` itself computed from its srcs (rather than loaded from its own buffer)."""
    if node.op in ESCAPE:
        return []  # a custom kernel reads its srcs' slots whole
    if node.op is Op.ASSIGN:
        return [(node.srcs[1], False)]
    if node.op is Op.SCATTER:
        base, idx, upd = node.srcs
        return [(idx, False), (base, False), (upd, False)]
    if node.op in REDUCE or node.op in (Op.GATHER, Op.CONTIGUOUS):
        return [(s, False) for s in node.srcs]  # a reduce's or copy's one src; a gather's source, then indices
    return [(node, True)]  # a stored view, elementwise value or const is its own kernel


class MissingBuffer(Exception):
    """Raised by kernel_walk where a kernel cannot read through a view: `need` says which value to store."""

    def __init__(self, need: Need) -> None:
        super().__init__(need.reason.detail)
        self.need = need


UNCOMPOSED = "its view does not compose with the one it is read by"
PADDED = "a pad reads it, and padding must read zeros, not f(0)"
Step = tuple[Node, View | None, list[tuple[int, int]] | None]  # node, view read through, sources' keys


def kernel_walk(
    root: Node, is_root: bool, stored: dict[int, Reason], seen: set[tuple[int, int]], views: dict[View, View]
) -> Iterator[Step]:
    """What a kernel computes for `root`, each node after its sources, once per view it is read through: the
    one walk of first_missing_buffer and of the kernel builder (schedule._Build.expr). A leaf (a load or a
    literal) has source_keys None; `is_root` computes a stored root from its srcs. Pairs in `seen` are skipped,
    and `views` holds one object per distinct view, so a pair can hold its id. MissingBuffer where it fails."""
    stack: list[Step] = [(root, None, None)]
    while stack:
        node, outer, source_keys = stack.pop()
        if source_keys is not None:  # its sources came first
            yield node, outer, source_keys
            continue
        key, own = (id(node), id(outer)), node is root and is_root  # a root its own kernel computes is no leaf
        if key in seen and not own:
            continue
        seen.add(key)
        if (is_leaf(node, stored) and not own) or node.op is Op.CONST:
            yield node, outer, None
            continue
        if node.op in MOVEMENT:
            inner = node.arg if outer is None else compose(node.arg, outer)  # what the node's source is read through
            if inner is None:
                raise MissingBuffer(Need(node, Reason(Rule.VIEW_CHAIN, UNCOMPOSED)))
            src = node.srcs[0]
            if inner.mask is not None and not is_leaf(src, stored):
                raise MissingBuffer(Need(src, Reason(Rule.PAD, PADDED)))
            sources = [(src, views.setdefault(inner, inner))]
        else:
            assert node.op in ELEMENTWISE, f"{node} reached a kernel unstored: ALWAYS_STORED covers every other op"
            sources = [(s, outer) for s in node.srcs]
        stack.append((node, outer, [(id(s), id(v)) for s, v in sources]))
        stack.extend((s, v, None) for s, v in reversed(sources))


def first_missing_buffer(order: list[Node], decisions: Decisions) -> Need | None:
    """The first value, in the order the kernels are built, that a kernel reaches through a view it cannot
    index through: a view that does not compose with the one above it (copy it first), or a pad over a
    computed value (store the value: the pad must read zeros, not f(0)). None when every kernel builds.

    What one kernel's walk found nothing below is nothing below for the next kernel either (a layer norm's
    kernels all reach the residual stream), so the kernels share the set of (node, view) pairs walked."""
    views: dict[View, View] = {}
    walked: set[tuple[int, int]] = set()
    for node in order:
        if id(node) in decisions.stored:
            for root, is_root in kernel_reads(node):
                try:
                    for _ in kernel_walk(root, is_root, decisions.stored, walked, views):
                        pass
                except MissingBuffer as missing:
                    return missing.need
    return None


# ---- ASSIGNs that write a temp ----

ASSIGN_ORDER = Reason(Rule.ASSIGN_TEMP, "writing in place would have to precede a reader of the old value")


def assign_temp_reason(node: Node, value: Expr, target: int, decisions: Decisions) -> Reason | None:
    """Why ASSIGN `node`, whose built value is `value`, writes a temp instead of its target slot; None when
    it writes in place. Either it reads its target at another cell than it writes (in place, one cell would
    see another's new value), or ordering found no place for the in-place write (decisions.via_temp)."""
    if id(node) in decisions.via_temp:
        return decisions.via_temp[id(node)]
    if _reads_target_elsewhere(value, target, node.shape):
        return Reason(Rule.ASSIGN_TEMP, "its value reads the target at other cells than it writes")
    return None


def _reads_target_elsewhere(value: Expr, target: int, shape: Shape) -> bool:
    identity = View.contiguous(shape)
    for e in walk_expr([value]):
        for load in loads_of(e):
            if load.slot == target and (load.view != identity or isinstance(e, Gather)):
                return True
    return False
