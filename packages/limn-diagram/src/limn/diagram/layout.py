"""A layered layout of a diagram Graph, written by limn itself (no Graphviz): where every box, cluster and edge goes.

It takes a validated Graph (boxes, edges, clusters) and gives a Layout in pixels, y growing downward: a Rect per
box and per cluster and a polyline per edge, from its src box to its dst box. Data flows top to bottom: a box's
layer is its longest path from a source, and each layer is ordered and spaced by diagram/layered. A cluster is
laid out on its own first, with a port on its border for each edge that crosses it, then placed as one big node
in the outer layout, so clusters never overlap and enclose only their members. Edge labels go beside their
line, clear of boxes and texts (diagram/labels); where one finds no room, the layout is made again with more
room between layers. The drawing's size encloses every shape and every text.
Pipeline: tensors -> graph -> diagram.build -> Graph -> **diagram/layout.layout_graph** -> Layout -> svg/tikz.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from limn.diagram.labels import FONT_SLACK, label_span, place_labels
from limn.diagram.layered import DUMMY_WIDTH, LAYER_GAP, Level, layout_level
from limn.diagram.svg import text_width

if TYPE_CHECKING:
    from limn.diagram.graph import Graph

Point = tuple[float, float]

LABEL_SIZE, DETAIL_SIZE, CLUSTER_LABEL_SIZE, TITLE_SIZE = 12, 10, 10, 15
# text_width has Helvetica's regular metrics; a bold label runs up to this much wider (r, t, i, l in Bold)
BOLD_WIDTH = 1.15
BOX_PAD_X, BOX_PAD_Y, MIN_BOX_WIDTH = 12, 6, 44
CLUSTER_PAD, CLUSTER_HEADER = 10, 20  # a cluster's margin around its members, and the band its label sits in
MARGIN = 16  # between the drawing's edge and the outermost shape
TITLE_BAND = 28
# the gaps between layers tried in turn, until every edge label finds a spot clear of boxes and texts
LAYER_GAPS = (LAYER_GAP, 64, 104, 168)


@dataclass(frozen=True)
class Rect:
    """An axis-aligned rectangle: top-left corner (x, y), width and height, in pixels (y grows downward)."""

    x: float
    y: float
    width: float
    height: float

    @property
    def right(self) -> float:
        return self.x + self.width

    @property
    def bottom(self) -> float:
        return self.y + self.height

    @property
    def cx(self) -> float:
        return self.x + self.width / 2

    def contains(self, other: Rect) -> bool:
        return self.x <= other.x and self.y <= other.y and other.right <= self.right and other.bottom <= self.bottom

    def overlaps(self, other: Rect) -> bool:
        """True when the interiors meet; touching edges do not overlap."""
        return self.x < other.right and other.x < self.right and self.y < other.bottom and other.y < self.bottom


@dataclass(frozen=True)
class EdgeRoute:
    """Where one edge of the graph is drawn: a polyline from its src box's boundary to its dst box's, the
    point of the line its label is placed at, and the label's side: "start", its text starts 4 px right of the
    point, or "end", it ends 4 px left of it (diagram/labels.label_span)."""

    index: int  # the edge's position in Graph.edges
    points: tuple[Point, ...]
    label_at: Point
    label_anchor: str = "start"


@dataclass(frozen=True)
class Layout:
    """Every position a renderer needs, in pixels: the drawing's size, a Rect per box id and per cluster id, one
    EdgeRoute per edge (in Graph.edges' order) and where the title's baseline starts (None without a title)."""

    width: float
    height: float
    boxes: dict[str, Rect]
    clusters: dict[str, Rect]
    edges: list[EdgeRoute]
    title_at: Point | None

    def __repr__(self) -> str:
        return (
            f"Layout({self.width:.0f} x {self.height:.0f} px, {len(self.boxes)} boxes, "
            f"{len(self.clusters)} clusters, {len(self.edges)} edges)"
        )


def box_size(label: str, detail: str) -> tuple[float, float]:
    """A box's (width, height): its bold label and its detail line, each estimated with svg.text_width, plus
    padding, so that every line fits."""
    text = max(text_width(label, LABEL_SIZE) * BOLD_WIDTH, text_width(detail, DETAIL_SIZE))
    height = 2 * BOX_PAD_Y + LABEL_SIZE * 1.25 + (DETAIL_SIZE * 1.3 if detail else 0)
    return max(MIN_BOX_WIDTH, text + 2 * BOX_PAD_X), height


# ---- the graph: clusters laid out on their own, then placed as single nodes ----


def topological_order(graph: Graph) -> list[str]:
    """The box ids in an order where every edge's src comes before its dst (ties in the order the boxes were
    given). A cycle raises ValueError naming a box on it: edges are data flow, and data flow is acyclic."""
    succ: dict[str, list[str]] = defaultdict(list)
    pred: dict[str, list[str]] = defaultdict(list)
    indegree = {box.id: 0 for box in graph.boxes}
    for edge in graph.edges:
        succ[edge.src].append(edge.dst)
        pred[edge.dst].append(edge.src)
        indegree[edge.dst] += 1
    order = [box.id for box in graph.boxes if indegree[box.id] == 0]
    for u in order:
        for v in succ[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                order.append(v)
    if len(order) < len(indegree):
        left = {box for box, count in indegree.items() if count > 0}
        # every box left has a predecessor left; walking back through them must repeat, and what repeats is on
        # a cycle
        seen, box = set(), next(iter(sorted(left)))
        while box not in seen:
            seen.add(box)
            box = next(p for p in pred[box] if p in left)
        raise ValueError(
            f"the diagram's edges form a cycle through box {box!r} ({len(left)} boxes on or after cycles); "
            f"edges are data flow from src to dst and must be acyclic: remove or reverse the edge that closes it"
        )
    return order


@dataclass
class _Unit:
    """A node of the outer layout: one unclustered box, or a cluster: its members (in topological order) then
    its ports laid out as one level, the inner edges (graph edge indices, in `inner.chains` order up to the
    ports' edges) and, per crossing edge end (edge index, 0 for src or 1 for dst), its port's node."""

    id: str
    members: list[str]
    size: tuple[float, float] = (0.0, 0.0)
    is_cluster: bool = False
    inner: Level | None = None
    inner_edges: list[int] = field(default_factory=list)
    port_of: dict[tuple[int, int], int] = field(default_factory=dict)
    port_side: dict[int, str] = field(default_factory=dict)
    member_sizes: list[tuple[float, float]] = field(default_factory=list)


def _units(graph: Graph, rank: dict[str, int], sizes: dict[str, tuple[float, float]]) -> list[_Unit]:
    """The outer layout's nodes, in topological order of their first member."""
    clustered = {member for cluster in graph.clusters for member in cluster.members}
    units = [_Unit(box.id, [box.id], sizes[box.id]) for box in graph.boxes if box.id not in clustered]
    for cluster in graph.clusters:
        units.append(_Unit(cluster.id, sorted(cluster.members, key=rank.__getitem__), is_cluster=True))
    return sorted(units, key=lambda unit: rank[unit.members[0]])


def _unit_order(n: int, pairs: list[tuple[int, int]]) -> list[int]:
    """A topological order of the units 0..n-1 (given in their first members' order) under the edges between
    them, smallest index first among those ready. Clusters can close a cycle (a1 -> b -> a2, a1 and a2 in one
    cluster); then the smallest unit left goes next, and the edges into it from later units are drawn upward."""
    succ: dict[int, list[int]] = defaultdict(list)
    indegree = [0] * n
    for a, b in pairs:
        if a != b:
            succ[a].append(b)
            indegree[b] += 1
    ready = [k for k in range(n) if indegree[k] == 0]
    heapq.heapify(ready)
    done, order, next_left = [False] * n, [], 0
    while len(order) < n:
        if not ready:  # every unit left waits on a cycle: take the first of them
            while done[next_left]:
                next_left += 1
            heapq.heappush(ready, next_left)
            indegree[next_left] = 0
        k = heapq.heappop(ready)
        if done[k]:
            continue
        done[k] = True
        order.append(k)
        for m in succ[k]:
            indegree[m] -= 1
            if indegree[m] == 0 and not done[m]:
                heapq.heappush(ready, m)
    return order


def _layout_cluster(graph: Graph, unit: _Unit, sizes: dict[str, tuple[float, float]], label: str, gap: float) -> None:
    """Lays out a cluster's interior, its ports included (port_of and port_side filled in by the caller), and
    sets the cluster's size: the interior, a margin, and the band its label sits in, at least as wide as the
    label (with room for a wider font) and its margins."""
    local = {box: k for k, box in enumerate(unit.members)}
    unit.member_sizes = [sizes[box] for box in unit.members]
    node_sizes = unit.member_sizes + [(DUMMY_WIDTH, 0.0)] * len(unit.port_of)
    pairs = [(local[graph.edges[i].src], local[graph.edges[i].dst]) for i in unit.inner_edges]
    for (i, end), port in unit.port_of.items():
        member = local[graph.edges[i].dst if end else graph.edges[i].src]
        pairs.append((port, member) if unit.port_side[port] == "top" else (member, port))
    unit.inner = layout_level(node_sizes, pairs, unit.port_side, gap)
    label_width = text_width(label, CLUSTER_LABEL_SIZE) * FONT_SLACK + 2 * CLUSTER_PAD
    unit.size = (
        max(unit.inner.width + 2 * CLUSTER_PAD, label_width),
        unit.inner.height + CLUSTER_HEADER + 2 * CLUSTER_PAD,
    )


def _sort_edges(graph: Graph, units: list[_Unit], unit_of: dict[str, int]):
    """Splits the edges into those inside one cluster (appended to its inner_edges) and those between units:
    their indices, the (upper, lower) unit pairs the outer layout gets, and the set drawn upward. Each end of
    an edge between units that lies in a cluster gets a port on that cluster's border."""
    outer_edges, outer_pairs, flipped = [], [], set()
    for i, edge in enumerate(graph.edges):
        a, b = unit_of[edge.src], unit_of[edge.dst]
        if a == b:
            units[a].inner_edges.append(i)  # inside one cluster (an unclustered box has no edge to itself)
            continue
        # clusters can make the units' graph cyclic (a1 -> b -> a2 with a1, a2 in one cluster): an edge against
        # the units' order is laid out reversed, and drawn upward from its src to its dst
        flip = a > b
        outer_edges.append(i)
        outer_pairs.append((b, a) if flip else (a, b))
        if flip:
            flipped.add(i)
        for end, unit_index in ((0, a), (1, b)):
            unit = units[unit_index]
            if unit.is_cluster:
                port = len(unit.members) + len(unit.port_of)
                unit.port_of[(i, end)] = port
                # an edge leaves its src through the bottom and enters its dst through the top; flipped, the other way
                unit.port_side[port] = "bottom" if (end == 0) != flip else "top"
    return outer_edges, outer_pairs, flipped


def layout_graph(graph: Graph) -> Layout:
    """The Layout of a validated graph: see the module docstring for how it is made. It is made at each of
    LAYER_GAPS in turn until every edge label finds a spot clear of boxes and texts (the last is kept)."""
    for gap in LAYER_GAPS:
        layout, crowded = _layout_at(graph, gap)
        if crowded == 0:
            break
    return layout


def _layout_at(graph: Graph, gap: float) -> tuple[Layout, int]:
    """The Layout with `gap` pixels between layers, and how many edge labels found no free spot."""
    rank = {box: k for k, box in enumerate(topological_order(graph))}
    sizes = {box.id: box_size(box.label, box.detail) for box in graph.boxes}
    units = _units(graph, rank, sizes)
    unit_of = {box: index for index, unit in enumerate(units) for box in unit.members}
    units = [units[k] for k in _unit_order(len(units), [(unit_of[e.src], unit_of[e.dst]) for e in graph.edges])]
    unit_of = {box: index for index, unit in enumerate(units) for box in unit.members}
    outer_edges, outer_pairs, flipped = _sort_edges(graph, units, unit_of)
    labels = {cluster.id: cluster.label for cluster in graph.clusters}
    for unit in units:
        if unit.is_cluster:
            _layout_cluster(graph, unit, sizes, labels[unit.id], gap)
    outer = layout_level([unit.size for unit in units], outer_pairs, None, gap)

    top = MARGIN + (TITLE_BAND if graph.title else 0)
    unit_rects = [
        Rect(MARGIN + outer.x[k] - unit.size[0] / 2, top + outer.y[k], *unit.size) for k, unit in enumerate(units)
    ]
    boxes, clusters = _place_boxes(units, unit_rects)
    middles: list[list[Point]] = [[] for _ in graph.edges]
    for unit, rect in zip(units, unit_rects):
        if unit.is_cluster:
            origin = _inner_origin(unit, rect)
            for i, chain in zip(unit.inner_edges, unit.inner.chains):
                middles[i] = _chain_points(unit.inner, chain, origin)
    for i, chain in zip(outer_edges, outer.chains):
        edge, flip = graph.edges[i], i in flipped
        between = _chain_points(outer, chain, (MARGIN, top))
        src = _crossing(units[unit_of[edge.src]], unit_rects[unit_of[edge.src]], (i, 0), leaving=True)
        dst = _crossing(units[unit_of[edge.dst]], unit_rects[unit_of[edge.dst]], (i, 1), leaving=False)
        middles[i] = src + (between[::-1] if flip else between) + dst
    sides = [("top", "bottom") if i in flipped else ("bottom", "top") for i in range(len(graph.edges))]
    routes = _routes(graph, boxes, middles, sides)

    title_at = (MARGIN, MARGIN + TITLE_SIZE) if graph.title else None
    texts = [cluster_label_span(clusters[cluster.id], cluster.label) for cluster in graph.clusters]
    if graph.title:
        title_width = text_width(graph.title, TITLE_SIZE) * BOLD_WIDTH * FONT_SLACK
        texts.append((MARGIN, MARGIN, MARGIN + title_width, MARGIN + TITLE_BAND))
    spans = lambda rects: [(r.x, r.y, r.right, r.bottom) for r in rects]  # noqa: E731
    edge_labels = [edge.label for edge in graph.edges]
    placed, crowded = place_labels(
        edge_labels, [route.points for route in routes], spans(boxes.values()), texts, spans(clusters.values())
    )
    routes = [EdgeRoute(route.index, route.points, at, anchor) for route, (at, anchor) in zip(routes, placed)]
    label_spans = [label_span(at, label, anchor) for label, (at, anchor) in zip(edge_labels, placed) if label]
    # the drawing encloses every shape and every text, edge labels past the rightmost box included
    extents = spans(unit_rects) + texts + label_spans
    width = max((span[2] for span in extents), default=MARGIN) + MARGIN
    height = max((span[3] for span in extents), default=top) + MARGIN
    return Layout(width, height, boxes, clusters, routes, title_at), crowded


def cluster_label_span(rect: Rect, label: str) -> tuple[float, float, float, float]:
    """Where a cluster's label is drawn (left, top, right, bottom): inside its top-left corner, its baseline
    CLUSTER_PAD and 0.8 of its size below the cluster's top, FONT_SLACK times its estimated width."""
    left, top = rect.x + CLUSTER_PAD, rect.y + CLUSTER_PAD
    return left, top, left + text_width(label, CLUSTER_LABEL_SIZE) * FONT_SLACK, top + CLUSTER_LABEL_SIZE


def _inner_origin(unit: _Unit, rect: Rect) -> Point:
    """Where a cluster's interior (0, 0) lands: under its label band, centred when the label is the wider."""
    slack = rect.width - 2 * CLUSTER_PAD - unit.inner.width
    return rect.x + CLUSTER_PAD + slack / 2, rect.y + CLUSTER_HEADER + CLUSTER_PAD


def _place_boxes(units: list[_Unit], unit_rects: list[Rect]) -> tuple[dict[str, Rect], dict[str, Rect]]:
    boxes, clusters = {}, {}
    for unit, rect in zip(units, unit_rects):
        if not unit.is_cluster:
            boxes[unit.id] = rect
            continue
        clusters[unit.id] = rect
        ox, oy = _inner_origin(unit, rect)
        for k, box in enumerate(unit.members):
            width, height = unit.member_sizes[k]
            boxes[box] = Rect(ox + unit.inner.x[k] - width / 2, oy + unit.inner.y[k], width, height)
    return boxes, clusters


def _chain_points(level: Level, chain: list[int], origin: Point) -> list[Point]:
    """The points an edge passes its dummies at, top to bottom: down each one's layer at its x."""
    ox, oy = origin
    points = []
    for dummy in chain:
        layer = level.layer[dummy]
        top = oy + level.layer_top[layer]
        points += [(ox + level.x[dummy], top), (ox + level.x[dummy], top + level.layer_height[layer])]
    return points


def _crossing(unit: _Unit, rect: Rect, end: tuple[int, int], leaving: bool) -> list[Point]:
    """The points an edge end passes inside its cluster, in the edge's direction: from the box through the
    interior's dummies to its port and out across the border (leaving), or the reverse. None outside a cluster."""
    if not unit.is_cluster:
        return []
    port = unit.port_of[end]
    inner, (ox, oy) = unit.inner, _inner_origin(unit, rect)
    chain = inner.chains[len(unit.inner_edges) + port - len(unit.members)]  # ports' edges follow the inner ones
    x, y = ox + inner.x[port], oy + inner.y[port]
    if unit.port_side[port] == "top":  # the chain runs port -> member, down
        inward = [(x, rect.y), (x, y), *_chain_points(inner, chain, (ox, oy))]
    else:  # member -> port, down: reversed, it runs inward from the bottom border
        inward = [(x, rect.bottom), (x, y), *_chain_points(inner, chain, (ox, oy))[::-1]]
    return inward[::-1] if leaving else inward


def _routes(graph: Graph, boxes: dict[str, Rect], middles: list[list[Point]], sides) -> list[EdgeRoute]:
    """Each edge's polyline: its end points spread along the sides of the boxes they touch, ordered by where
    the line goes next so that edges leaving one side do not cross there, and several edges between one pair
    of boxes come out as separate lines. `sides` gives each edge's (src side, dst side), "top" or "bottom"."""
    ends: dict[tuple[str, str], list[tuple[float, int, int]]] = defaultdict(list)
    for i, (edge, middle, (src_side, dst_side)) in enumerate(zip(graph.edges, middles, sides)):
        toward_dst = middle[0][0] if middle else boxes[edge.dst].cx
        toward_src = middle[-1][0] if middle else boxes[edge.src].cx
        ends[(edge.src, src_side)].append((toward_dst, i, 0))
        ends[(edge.dst, dst_side)].append((toward_src, i, 1))
    port: dict[tuple[int, int], Point] = {}
    for (box, side), touching in ends.items():
        rect = boxes[box]
        y = rect.y if side == "top" else rect.bottom
        touching.sort()
        for k, (_, i, end) in enumerate(touching):
            port[(i, end)] = (rect.x + rect.width * (k + 1) / (len(touching) + 1), y)
    routes = []
    for i, middle in enumerate(middles):
        points = [port[(i, 0)], *middle, port[(i, 1)]]
        deduplicated = [p for k, p in enumerate(points) if k == 0 or p != points[k - 1]]
        routes.append(EdgeRoute(i, tuple(deduplicated), deduplicated[0]))
    return routes
