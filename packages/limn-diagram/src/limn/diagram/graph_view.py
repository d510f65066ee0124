"""The graph view of a diagram: every node of the op graph a box, every value it reads an edge.

Each box is an op with its dtype and shape, coloured by its op group (ops.py), and each edge is labelled
with the value it carries, `dtype[shape]`. Hovering a box shows what the node's argument was and, when
limn.graph.provenance recorded it, the user's line that made it. `fold_elementwise` draws elementwise ops as
edges instead: the values they compute run straight from the op they start at to the op that reads them,
with the folded ops named on the edge. Repeated blocks (diagram/blocks) collapse to one box each, with
their count, unless `expand`. Needs limn-core alone; limn.diagram adds the schedule view.
Pipeline: tensors -> graph -> **graph_view** -> diagram/graph.Graph -> .svg / .dot / .tex.
"""

from __future__ import annotations

from collections.abc import Sequence

from limn.diagram.blocks import Block, repeated_blocks
from limn.diagram.graph import Box, Edge, Graph
from limn.graph import provenance
from limn.graph.ops import BARRIERS, ELEMENTWISE, ESCAPE, INDEXED, MOVEMENT, REDUCE, SOURCES, Node, Op, toposort

GROUP_OF: dict[frozenset[Op], str] = {
    SOURCES: "source",
    MOVEMENT: "movement",
    ELEMENTWISE: "elementwise",
    REDUCE: "reduce",
    INDEXED: "indexed",
    BARRIERS: "assign",
    ESCAPE: "custom",
}
"""The colour class of each op group (every op is in exactly one)."""


def group_of(op: Op) -> str:
    return next(name for ops, name in GROUP_OF.items() if op in ops)


def value_label(node: Node) -> str:
    """What an edge carrying node's value says: float32[4, 5]."""
    return f"{node.dtype.name}{list(node.shape)}"


def box_label(node: Node) -> str:
    """An op's name, with the argument that tells two of them apart at a glance (a constant's value, the
    axes a reduce folds, a custom kernel's name)."""
    if node.op is Op.CONST:
        return f"CONST {node.arg!r}"
    if node.op in REDUCE:
        return f"{node.op.name} axes {list(node.arg)}"
    if node.op is Op.CUSTOM:
        return f"CUSTOM {node.arg.name}"
    return node.op.name


def box_tooltip(node: Node) -> str:
    lines = [f"{node.op.name} {value_label(node)}"]
    if node.op is Op.VIEW:
        v = node.arg
        lines.append(f"strides {list(v.strides)}, offset {v.offset}" + (f", mask {v.mask}" if v.mask else ""))
    elif node.op in INDEXED:
        lines.append(f"axis {node.arg}")
    site = provenance.site(node)
    if site is not None:
        lines.append(f"made at {site.place} in {site.function}" + (f" ({site.api})" if site.api else ""))
        if site.backward:
            lines.append("(a gradient of the value made there)")
    return "\n".join(lines)


def graph_view(roots: Sequence[Node], fold_elementwise: bool = False, expand: bool = False, title: str = "") -> Graph:
    """The diagram of the graph under `roots` (nodes), as described in the module docstring."""
    order = toposort(roots)
    blocks = [] if expand else repeated_blocks(order)
    block_of = {nid: b for b in blocks for nid in b.members}
    folded = {id(n) for n in order if fold_elementwise and n.op in ELEMENTWISE and id(n) not in block_of}
    box_id = {id(n): f"n{i}" for i, n in enumerate(order)}
    for i, b in enumerate(blocks):
        for nid in b.members:
            box_id[nid] = f"block{i}"
    boxes = [_block_box(f"block{i}", b, order) for i, b in enumerate(blocks)]
    boxes += [
        Box(box_id[id(n)], box_label(n), value_label(n), group_of(n.op), box_tooltip(n))
        for n in order
        if id(n) not in folded and id(n) not in block_of
    ]
    edges = _edges(order, box_id, folded)
    return Graph(boxes, edges, [], title)


def _block_box(box: str, block: Block, order: list[Node]) -> Box:
    ops: dict[str, int] = {}
    for n in order:
        if id(n) in block.members:
            ops[n.op.name] = ops.get(n.op.name, 0) + 1
    counts = ", ".join(f"{name} {count}" for name, count in sorted(ops.items(), key=lambda kv: -kv[1]))
    tooltip = (
        f"{block.count} calls of {block.function} from {block.call_site}"
        f"{' (their gradients)' if block.backward else ''}: {len(block.members)} nodes\n{counts}"
    )
    return Box(box, block.label, f"{len(block.members)} nodes", "block", tooltip)


def _edges(order: list[Node], box_id: dict[int, str], folded: set[int]) -> list[Edge]:
    """One edge per (drawn source, reader) pair per operand; a folded elementwise op passes its sources on to
    its readers, naming itself on their edges. Edges inside one block box are left out."""
    # per folded node: the drawn nodes its value starts from, each with the ops folded on the way (the first
    # path found: x * x starts from x once)
    starts: dict[int, dict[int, tuple[Node, tuple[str, ...]]]] = {}
    edges: list[Edge] = []
    for node in order:
        sources: list[tuple[Node, tuple[str, ...]]] = []
        for s in node.srcs:
            sources.extend(starts[id(s)].values() if id(s) in folded else [(s, ())])
        if id(node) in folded:
            starts[id(node)] = {}
            for s, via in sources:
                starts[id(node)].setdefault(id(s), (s, via + (node.op.name,)))
            continue
        for s, via in sources:
            if box_id[id(s)] == box_id[id(node)]:
                continue  # inside one block
            label = value_label(s) + (f" via {' '.join(reversed(via))}" if via else "")
            edges.append(Edge(box_id[id(s)], box_id[id(node)], label))
    return _deduplicated_block_edges(edges)


def _deduplicated_block_edges(edges: list[Edge]) -> list[Edge]:
    """Edges into or out of a block box, one per (src, dst, label): six layers reading one stream are one
    arrow, not six."""
    seen: set[tuple[str, str, str]] = set()
    out = []
    for e in edges:
        key = (e.src, e.dst, e.label)
        if (e.src.startswith("block") or e.dst.startswith("block")) and key in seen:
            continue
        seen.add(key)
        out.append(e)
    return out
