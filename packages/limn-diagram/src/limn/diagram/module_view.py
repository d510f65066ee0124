"""The module view of a diagram: a box per layer call, as a person draws a model, edges labelled with shapes.

While provenance records, each call of an nn.Module is a scope (limn.graph.provenance.Scope: the layer's class,
the name its caller holds it under, the tensors it holds), and each node keeps the scopes open when it was made.
The view draws the calls `expand` levels below the outermost call every drawn node shares (the model's own): at 0
a GPT is its embeddings, its blocks, its final norm and its head; at 1 each block is a cluster of its norms,
attention and MLP. A layer that calls no other stays one box at every level. What an opened layer's forward
computes outside any deeper call (a residual add, the heads' reshapes, attention itself) is a box named for the
limn function that made it, or, with `arithmetic=False`, no box: elementwise ops and views then pass their values
straight on along the edges. Repeated calls of one class held under one name with an index (`h.0`, `h.1`, ...)
collapse to one, counted (`h.*: Block x4`), the values passed from one copy to the next left out, unless
`collapse=False` or the collapse would close a cycle. `params=True` adds a box per parameter or buffer read.
Pipeline: tensors -> graph (+ provenance scopes) -> **module_view** -> diagram/graph.Graph -> .svg / .dot / .tex.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from limn.diagram.blocks import cyclic, has_cycle
from limn.diagram.graph import Box, Cluster, Edge, Graph
from limn.diagram.graph_view import group_of
from limn.graph import provenance
from limn.graph.ops import ELEMENTWISE, MOVEMENT, SOURCES, Node, Op, toposort
from limn.graph.provenance import Scope

Step = tuple[str, str, int]  # one level of a call's path: (name, class, which call of that name in its caller)


def shape_label(node: Node) -> str:
    """What an edge says of the value it carries: its shape, and its dtype when not float32."""
    dims = list(node.shape)
    return f"{dims}" if node.dtype.name == "float32" else f"{node.dtype.name}{dims}"


class _Calls:
    """The layer calls under the drawn nodes: each call's step, caller and whether it calls others, and which
    calls are copies merged into one (`copies`: canonical step -> count)."""

    def __init__(self, scoped: list[tuple[Scope, ...]], skip: int) -> None:
        self.steps: dict[int, Step] = {}
        self.caller: dict[int, int | None] = {}
        seen: dict[tuple, int] = Counter()
        for path in scoped:
            for depth in range(skip, len(path)):
                call = path[depth].call
                if call not in self.steps:
                    caller = path[depth - 1].call if depth > skip else None
                    key = (caller, path[depth].name, path[depth].kind)
                    self.steps[call], self.caller[call] = (path[depth].name, path[depth].kind, seen[key]), caller
                    seen[key] += 1
        self.opened = {c for c in self.caller.values() if c is not None}  # calls that call other layers
        self.copies: dict[Step, int] = {}

    def repeated(self) -> list[tuple[Step, list[int]]]:
        """Each canonical step ("h.*", class, 0) with the sibling calls (`h.0`, `h.1`, ...) it would merge."""
        groups: dict[tuple, list[int]] = defaultdict(list)
        for call, (name, kind, _) in self.steps.items():
            match = re.fullmatch(r"(.*)\.(\d+)", name)
            if match:
                groups[(self.caller[call], match.group(1), kind)].append(call)
        return [((f"{stem}.*", kind, 0), calls) for (_, stem, kind), calls in groups.items() if len(calls) > 1]

    def merge(self, step: Step, calls: list[int]) -> None:
        for call in calls:
            self.steps[call] = step
        self.copies[step] = len(calls)


class _ModuleView:
    def __init__(self, roots: Sequence[Node], expand: int, params: bool, arithmetic: bool, collapse: bool) -> None:
        self.order = toposort(list(roots))
        self.expand, self.params, self.arithmetic = expand, params, arithmetic
        self.sites = {id(n): provenance.site(n) for n in self.order}
        scoped = [s.scopes for s in self.sites.values() if s is not None and s.scopes]
        self.skip = _common_prefix(scoped)  # the model's own call (and any above it) is the picture itself
        if scoped and self.skip == max(len(p) for p in scoped):
            self.skip -= 1  # every node is inside one innermost call: that call is the one box
        self.held: dict[int, str] = {}  # id(node) -> the parameter or buffer it is, named by the first layer holding it
        for path in scoped:
            for scope in path:
                for name, node in scope.params:
                    self.held.setdefault(id(node), f"{scope.name or scope.kind}.{name}")
        self.calls = _Calls(scoped, self.skip)
        self.scope_of = {scope.call: scope for path in scoped for scope in path}
        if collapse:
            for step, calls in self.calls.repeated():
                inside = {id(n): self.backward(n) for n in self.order if set(self.call_ids(n)) & set(calls)}
                if not has_cycle(self.order, inside):
                    self.calls.merge(step, calls)

    def backward(self, node: Node) -> int:
        """1 for a gradient node, 0 for a forward one (the copies' forward and backward merge apart)."""
        site = self.sites[id(node)]
        return int(site is not None and site.backward)

    def call_ids(self, node: Node) -> list[int]:
        site = self.sites[id(node)]
        return [s.call for s in site.scopes[self.skip :]] if site is not None else []

    def path(self, node: Node) -> tuple[Step, ...]:
        return tuple(self.calls.steps[c] for c in self.call_ids(node))

    def passed(self, node: Node, key: tuple | None) -> Node:
        """The value a box passes on when node leaves it: for a layer call that returned one tensor, that
        tensor (a reader's view may reach past it to a value inside the call, of another shape)."""
        if key is None or key[0] != "layer":
            return node
        outputs = self.scope_of[self.call_ids(node)[len(key[1]) - 1]].outputs
        return outputs[0] if len(outputs) == 1 else node

    def copies(self, path: tuple[Step, ...]) -> int:
        """How many calls a box on this path stands for: the product of the merged counts along it."""
        return math.prod(self.calls.copies.get(step, 1) for step in path)

    def copy_of(self, node: Node) -> dict[Step, int]:
        """For each merged call on the node's path, which copy (its actual call) the node is in."""
        return {self.calls.steps[c]: c for c in self.call_ids(node) if self.calls.steps[c] in self.calls.copies}

    def box_key(self, node: Node) -> tuple | None:
        """The box the node is drawn in before op boxes are split: a layer call, an op of an opened layer's
        own, a parameter or an input; None when folded into edges or hidden (constants, undrawn parameters)."""
        calls, path = self.call_ids(node), self.path(node)
        if node.op in SOURCES:
            if node.op is Op.CONST or (id(node) in self.held and not self.params):
                return None
            if id(node) in self.held:
                return ("param", self.held[id(node)])
            site = self.sites[id(node)]
            if site is None or not site.scopes:
                return ("input", id(node))  # made outside every layer call: data the model is given
        # else a leaf a layer made (a dropout's random bits): part of that layer, as what it computes is
        site = self.sites[id(node)]
        backward = site is not None and site.backward  # a gradient: drawn apart from the forward it differentiates
        for depth, call in enumerate(calls):
            if depth == self.expand or call not in self.calls.opened:
                return ("layer", path[: depth + 1], backward)
        if not self.arithmetic and node.op in ELEMENTWISE | MOVEMENT:
            return None
        return ("op", path, backward, *(site.layer_site if site is not None else (node.op.name, 0)))


def module_view(
    roots: Sequence[Node],
    expand: int = 0,
    params: bool = False,
    arithmetic: bool = True,
    collapse: bool = True,
    title: str = "",
) -> Graph:
    """The module view of the graph under `roots` (see the module docstring)."""
    if expand < 0:
        raise ValueError(f"module_view: expand counts levels below the outermost call, 0 or more; got {expand}")
    view = _ModuleView(roots, expand, params, arithmetic, collapse)
    keys = _split_ops(view)
    ids = _ids(view.order, keys)
    edges, leaving = _edges(view, keys, ids)
    if cyclic((e.src, e.dst) for e in edges):
        # pieces of one line joined through a layer between them (`proj(x * 2) * 3`): each op a box of its own
        keys = {nid: (*key, nid) if key is not None and key[0] == "op" else key for nid, key in keys.items()}
        ids = _ids(view.order, keys)
        edges, leaving = _edges(view, keys, ids)
        if cyclic((e.src, e.dst) for e in edges):
            raise ValueError(
                "module_view: these layer calls cannot be drawn without a cycle (a layer whose value comes back "
                "into it through another); draw them with collapse=False, another expand, or the graph view"
            )
    members: dict[tuple, list[Node]] = defaultdict(list)
    for n in view.order:
        if keys[id(n)] is not None:
            members[keys[id(n)]].append(n)
    boxes = [_box(ids[key], key, nodes, leaving.get(ids[key], nodes[-1]), view) for key, nodes in members.items()]
    return Graph(boxes, edges, _clusters(keys, ids, view), title)


def _ids(order: list[Node], keys: dict[int, tuple | None]) -> dict[tuple, str]:
    ids: dict[tuple, str] = {}
    for n in order:
        if keys[id(n)] is not None:
            ids.setdefault(keys[id(n)], f"m{len(ids)}")
    return ids


def _split_ops(view: _ModuleView) -> dict[int, tuple | None]:
    """Each node's box key. An op box is what one line of a layer's forward made with one limn function, split
    into the pieces its nodes form joined by their own edges within one actual call; the k-th piece of each
    copy of a merged call is one box."""
    keys = {id(n): view.box_key(n) for n in view.order}
    root = {id(n): id(n) for n in view.order}

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    actual = {id(n): (keys[id(n)], tuple(view.call_ids(n))) for n in view.order}
    for n in view.order:
        if keys[id(n)] is not None and keys[id(n)][0] == "op":
            for s in n.srcs:
                if actual[id(s)] == actual[id(n)]:
                    root[find(id(s))] = find(id(n))
    ordinal: dict[int, int] = {}
    pieces: dict[tuple, int] = Counter()
    for n in view.order:
        key = keys[id(n)]
        if key is not None and key[0] == "op":
            piece = find(id(n))
            if piece not in ordinal:
                ordinal[piece] = pieces[actual[id(n)]]
                pieces[actual[id(n)]] += 1
            keys[id(n)] = (*key, ordinal[piece])
    return keys


def _box(box_id: str, key: tuple, nodes: list[Node], out: Node, view: _ModuleView) -> Box:
    """The box drawing `nodes`; `out` is the value it passes on (its shape is an op box's detail)."""
    if key[0] == "layer":
        label = _path_label(key[1][1:] if len(key[1]) > 1 else key[1], view) + (" backward" if key[2] else "")
        detail = _weights(nodes, out, view.copies(key[1]), view)
        return Box(box_id, label, detail, "block", f"{label}\n{len(nodes)} nodes of the op graph, {detail}")
    if key[0] == "param":
        return Box(box_id, key[1], shape_label(out), "source", f"{key[1]} {shape_label(out)}")
    if key[0] == "input":
        return Box(box_id, "input", shape_label(out), "source", f"input {shape_label(out)}")
    made_by = key[3].rpartition(".")[2].strip("_") or out.op.name  # Tensor.__add__ -> add
    made_by += " backward" if key[2] else ""
    tooltip = f"{key[3]}: " + ", ".join(sorted({n.op.name for n in nodes}))
    return Box(box_id, made_by, shape_label(out), group_of(out.op), tooltip)  # coloured by what it passes on


def _path_label(path: tuple[Step, ...], view: _ModuleView) -> str:
    """A layer call's label: the names down its path, then its class ("self_attn.q_proj: Linear"), and how many
    calls it stands for when merged ("h.*: Block x4")."""
    names = ".".join(name for name, _, _ in path if name)
    kind = path[-1][1]
    count = view.calls.copies.get(path[-1])
    return (f"{names}: {kind}" if names else kind) + (f" x{count}" if count else "")


def _weights(nodes: list[Node], out: Node, copies: int, view: _ModuleView) -> str:
    """A layer box's detail: how many weights one of its calls reads (parameters and buffers), else its value's
    shape."""
    read = {id(s): s for n in nodes for s in n.srcs if id(s) in view.held}
    total = sum(math.prod(s.shape) for s in read.values()) // copies
    if not total:
        return shape_label(out)
    each = " each" if copies > 1 else ""
    return f"{total:,} weights{each}" if total < 1e6 else f"{total / 1e6:.2f}M weights{each}"


def _clusters(keys: dict[int, tuple | None], ids: dict[tuple, str], view: _ModuleView) -> list[Cluster]:
    """A cluster per opened outermost layer, holding every box inside it (clusters do not nest: a box deeper
    down names its path from the cluster's layer in its label)."""
    members: dict[tuple, list[str]] = defaultdict(list)
    for key in dict.fromkeys(k for k in keys.values() if k is not None):
        inside = key[0] == "op" and key[1] or key[0] == "layer" and len(key[1]) > 1
        if inside:
            members[(key[1][:1], key[2])].append(ids[key])
    return [
        Cluster(f"c{i}", _path_label(path, view) + (" backward" if backward else ""), boxes)
        for i, ((path, backward), boxes) in enumerate(members.items())
    ]


def _edges(
    view: _ModuleView, keys: dict[int, tuple | None], ids: dict[tuple, str]
) -> tuple[list[Edge], dict[str, Node]]:
    """An edge per (drawn source, drawn reader) pair of boxes, labelled with the value's shape. A folded node
    passes its sources on to its readers; a hidden one (a constant, an undrawn parameter) passes nothing; a value
    one copy of a merged call passes to the next is left out (the copies are one box). Also each box's value
    that an edge carries out of it."""
    starts: dict[int, dict[str, Node]] = {}  # per folded node: the drawn boxes its value comes from
    edges: dict[tuple[str, str, str], Edge] = {}
    leaving: dict[str, Node] = {}
    for node in view.order:
        sources: dict[str, Node] = {}
        for s in node.srcs:
            if keys[id(s)] is not None:
                sources[ids[keys[id(s)]]] = s
            else:
                sources.update(starts.get(id(s), {}))
        if keys[id(node)] is None:
            starts[id(node)] = {} if node.op in SOURCES else sources
            continue
        mine = view.copy_of(node)
        for src_box, value in sources.items():
            theirs = view.copy_of(value)
            if src_box != ids[keys[id(node)]] and all(theirs.get(step, call) == call for step, call in mine.items()):
                passed = view.passed(value, keys[id(value)])
                key = (src_box, ids[keys[id(node)]], shape_label(passed))
                edges.setdefault(key, Edge(*key))
                leaving[src_box] = passed
    return list(edges.values()), leaving


def _common_prefix(paths: list[tuple[Scope, ...]]) -> int:
    """How many scopes, from the outermost, every path shares (the same calls)."""
    if not paths:
        return 0
    shortest = min(len(p) for p in paths)
    for depth in range(shortest):
        if len({p[depth].call for p in paths}) > 1:
            return depth
    return shortest
