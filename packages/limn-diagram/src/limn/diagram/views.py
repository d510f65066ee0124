"""Diagrams of a graph, its schedule, or its layer calls: `build(*tensors)` returns a Graph to save as .svg, .dot
or .tex.

The graph view (graph_view.py) draws every op. The schedule view draws what realizing the tensors
would run: each kernel a cluster named as ir() names it, holding the ops it computes; the buffers between
kernels as the edges that cross clusters (`buf3 float32[4, 1]`); views as edge labels, since a view is
index arithmetic inside the kernel that reads through it, not work of its own. Hovering a kernel shows
limn.explain's text for it: the values it stores with the fusion rule that stored each, and the user lines
it computes. Repeated blocks collapse to one box with a count unless `expand`.
Pipeline: tensors -> graph -> schedule -> explain -> **views** -> diagram.graph.Graph -> .svg / .dot / .tex.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from limn.compiler.explain import explain_schedule
from limn.compiler.kernel import Kernel, Schedule
from limn.compiler.schedule import schedule as make_schedule
from limn.diagram.blocks import Block, cyclic, repeated_blocks
from limn.diagram.graph import Box, Cluster, Edge, Graph
from limn.diagram.graph_view import box_label, box_tooltip, graph_view, group_of, value_label
from limn.diagram.module_view import module_view
from limn.frontend.tensor import Tensor
from limn.graph import provenance
from limn.graph.ops import MOVEMENT, Node, Op, toposort


def build(
    *tensors: Tensor,
    schedule: bool = False,
    modules: bool = False,
    fold_elementwise: bool = False,
    expand: bool | int = False,
    params: bool = False,
) -> Graph:
    """The diagram of these tensors' graph, or with `schedule=True` of the kernels realizing them, or with
    `modules=True` of the layer calls that made them (module_view.py; the graph must be built while provenance
    records). `fold_elementwise` draws elementwise ops as edges (in the module view: no box for a layer's own
    elementwise work); `expand` keeps repeated blocks apart, and in the module view is how many levels of layer
    calls to open (0: the model's own layers); `params` draws the module view's parameters.

        >>> from limn import Tensor
        >>> build(Tensor.randn((4, 5)).softmax(-1), schedule=True)
        Graph(11 boxes, 13 edges, 3 clusters)
    """
    roots = [t.node for t in _tensors(tensors)]
    if modules:
        if not any(provenance.site(n) is not None for n in toposort(roots)):
            raise ValueError(
                "diagram.build(modules=True) draws layer calls that provenance recorded, and none was: build the "
                "graph inside `with limn.graph.provenance.recording():` (python -m limn.diagram does), and draw it "
                "before .numpy() or .realize() (a realized tensor's graph is gone)"
            )
        return module_view(roots, int(expand), params=params, arithmetic=not fold_elementwise)
    if not schedule:
        return graph_view(roots, fold_elementwise=fold_elementwise, expand=expand)
    return schedule_view(make_schedule(roots), expand=expand)


def _tensors(values: Sequence[Any]) -> list[Tensor]:
    found: list[Tensor] = []
    for v in values:
        if isinstance(v, Tensor):
            found.append(v)
        elif isinstance(v, dict):
            found.extend(_tensors(list(v.values())))
        elif isinstance(v, Iterable) and not isinstance(v, (str, bytes)):  # a list, a tuple, parameters()
            found.extend(_tensors(list(v)))
        else:
            raise TypeError(f"diagram.build draws tensors; got a {type(v).__name__} ({v!r:.60}). Pass the tensors")
    if not found:
        raise ValueError("diagram.build was given no tensors to draw")
    return found


# ---- the schedule view ----


class _ScheduleView:
    """The boxes, edges and clusters of one schedule, built kernel by kernel."""

    def __init__(self, sched: Schedule, expand: bool) -> None:
        self.sched = sched
        self.explained = explain_schedule(sched)
        self.producer: dict[int, int] = {}  # slot -> index of the kernel that writes it
        for i, k in enumerate(sched.kernels):
            for s in k.outputs:
                self.producer.setdefault(s, i)
        self.computed = [{id(n): n for n in sched.computed_by(k)} for k in sched.kernels]
        self.block_of_kernel = {} if expand else self._kernel_blocks()
        self.shown = [self.drawn(k) for k in range(len(sched.kernels))]
        self.shown_ids = [{id(n) for n in nodes} for nodes in self.shown]
        self.boxes: dict[str, Box] = {}
        self.edges: list[Edge] = []
        self.clusters: list[Cluster] = []
        self.slot_box: dict[int, str] = {}  # slot -> the box whose value lands in it
        self.number: dict[int, int] = {}  # id(node) -> its number in box ids, in the order first drawn

    def _kernel_blocks(self) -> dict[int, tuple[int, Block]]:
        """Kernel index -> (block index, Block) for the kernels whose stored values are mostly one block's."""
        nodes = {nid: n for c in self.computed for nid, n in c.items()}
        blocks = repeated_blocks(toposort(list(nodes.values())))
        owner = {nid: i for i, b in enumerate(blocks) for nid in b.members}
        candidates: dict[int, int] = {}
        for k, kernel in enumerate(self.sched.kernels):
            # a kernel is the values it stores: the cheap ones it recomputes from elsewhere (a dropout mask
            # a gradient kernel re-derives) say nothing of where it belongs
            outs = set(kernel.outputs)
            stored = [owner.get(nid) for nid in self.computed[k] if self.sched.slot_of.get(nid) in outs]
            votes = Counter(stored).most_common(1)
            if votes and votes[0][0] is not None:
                candidates[k] = votes[0][0]
        # a kernel left out can sit between two of a block's kernels: such a block stays expanded, as the
        # node-level check does for the graph view
        reads = [(s, k) for k, kern in enumerate(self.sched.kernels) for s in kern.inputs if s in self.producer]
        deps = [(self.producer[s], k) for s, k in reads]
        deps = [(a, b) for a, b in deps if a != b]
        kept: dict[int, int] = {}
        for b in range(len(blocks)):
            trial = kept | {k: block for k, block in candidates.items() if block == b}
            if not _cyclic(deps, trial):
                kept = trial
        return {k: (b, blocks[b]) for k, b in kept.items()}

    def drawn(self, k: int) -> list[Node]:
        """The ops kernel k's cluster shows: what it computes, less views and constants, plus every node whose
        value it stores (a kernel that only copies through a view shows that view)."""
        kernel = self.sched.kernels[k]
        outs = set(kernel.outputs)
        nodes = []
        for nid, n in self.computed[k].items():
            stored_here = self.sched.slot_of.get(nid) in outs
            if stored_here or (n.op not in MOVEMENT and n.op is not Op.CONST):
                nodes.append(n)
        return nodes

    def box_of(self, k: int, n: Node) -> str:
        if k in self.block_of_kernel:
            return f"block{self.block_of_kernel[k][0]}"
        return f"{self.sched.kernels[k].name}.n{self.number.setdefault(id(n), len(self.number))}"

    def build(self) -> Graph:
        for k, kernel in enumerate(self.sched.kernels):
            for n in self.shown[k]:
                slot = self.sched.slot_of.get(id(n))
                if slot in kernel.outputs:
                    self.slot_box[slot] = self.box_of(k, n)
        for k, kernel in enumerate(self.sched.kernels):
            self._kernel(k, kernel)
        self._blocks()
        edges = _deduplicated(self.edges)
        return Graph(list(self.boxes.values()), edges, self.clusters)

    def _kernel(self, k: int, kernel: Kernel) -> None:
        nodes = self.shown[k]
        if k not in self.block_of_kernel:
            members = []
            for n in nodes:
                box = self.box_of(k, n)
                label = box_label(n)
                if n.op is Op.ASSIGN:
                    label = f"ASSIGN -> buf{self.sched.slot_of[id(n.srcs[0])]}"
                self.boxes[box] = Box(box, label, value_label(n), group_of(n.op), box_tooltip(n))
                members.append(box)
            tooltip = str(self.explained.kernels[k])
            self.clusters.append(Cluster(f"cluster_{kernel.name}", self.explained.kernels[k].name, members, tooltip))
        for n in nodes:
            srcs = n.srcs[1:] if n.op is Op.ASSIGN else n.srcs  # an assign's target is where it writes
            for s in srcs:
                self._edge(k, s, n)

    def _edge(self, k: int, src: Node, reader: Node) -> None:
        """The edge bringing src's value to reader in kernel k: through the views k indexes it by (named on
        the edge), from an op of k itself, or from the buffer another kernel (or the caller) stored it in."""
        seen_as = None
        while src.op in MOVEMENT and id(src) in self.computed[k] and id(src) not in self.shown_ids[k]:
            seen_as = seen_as or list(src.shape)
            src = src.srcs[0]
        if src.op is Op.CONST:
            return
        view = f" as {seen_as}" if seen_as is not None and seen_as != list(src.shape) else ""
        dst = self.box_of(k, reader)
        if id(src) in self.computed[k]:
            self.edges.append(Edge(self.box_of(k, src), dst, value_label(src) + view))
            return
        slot = self.sched.slot_of.get(id(src))
        if slot is None:
            return  # a value k recomputes from what is drawn already (a view of a view)
        label = f"buf{slot} {value_label(src)}{view}"
        self.edges.append(Edge(self._slot_source(slot, src), dst, label, "buffer"))

    def _slot_source(self, slot: int, node: Node) -> str:
        if slot in self.slot_box and self.sched.slots[slot].kind != "input":
            return self.slot_box[slot]
        box = f"buf{slot}"
        if box not in self.boxes:
            s = self.sched.slots[slot]
            tooltip = f"input buf{slot} {s.dtype.name}{list(s.shape)}\n{box_tooltip(node)}"
            self.boxes[box] = Box(box, f"buf{slot}", f"{s.dtype.name}{list(s.shape)}", "source", tooltip)
        return box

    def _blocks(self) -> None:
        kernels_in: dict[int, list[str]] = defaultdict(list)
        blocks: dict[int, Block] = {}
        for k, (b, block) in self.block_of_kernel.items():
            kernels_in[b].append(self.sched.kernels[k].name)
            blocks[b] = block
        for b, block in blocks.items():
            names = kernels_in[b]
            tooltip = f"{block.count} calls of {block.function} from {block.call_site}: {len(names)} kernels"
            self.boxes[f"block{b}"] = Box(f"block{b}", block.label, f"{len(names)} kernels", "block", tooltip)


def schedule_view(sched: Schedule, expand: bool = False) -> Graph:
    """The schedule view of a schedule already made (see the module docstring)."""
    return _ScheduleView(sched, expand).build()


def _cyclic(deps: list[tuple[int, int]], group: dict[int, int]) -> bool:
    """Whether the kernel graph `deps` (producer, reader) has a cycle once each kernel in `group` is
    contracted to its group's vertex."""

    def vertex(k: int) -> tuple:
        return ("block", group[k]) if k in group else ("kernel", k)

    return cyclic((vertex(a), vertex(b)) for a, b in deps if vertex(a) != vertex(b))


def _deduplicated(edges: list[Edge]) -> list[Edge]:
    """One edge per (src, dst, label), none from a box to itself (the layers of one collapsed block)."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for e in edges:
        key = (e.src, e.dst, e.label)
        if e.src != e.dst and key not in seen:
            seen.add(key)
            out.append(e)
    return out
