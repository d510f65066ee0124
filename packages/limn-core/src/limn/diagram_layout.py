"""A layered layout of a diagram Graph, written by limn itself (no Graphviz): where every box, cluster and edge goes.

It takes a validated Graph (boxes, edges, clusters) and gives a Layout in pixels, y growing downward: a Rect per
box and per cluster and a polyline per edge, from its src box to its dst box. Data flows top to bottom: a box's
layer is its longest path from a source, and each layer is ordered and spaced by diagram_layered. A cluster is
laid out on its own first, with a port on its border for each edge that crosses it, then placed as one big node
in the outer layout, so clusters never overlap and enclose only their members. Edge labels go where they hit
no box and no other label, where such a place is near the middle of the line.
Pipeline: tensors -> graph -> diagram.build -> Graph -> **diagram_layout.layout_graph** -> Layout -> svg/tikz.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from limn.diagram_layered import DUMMY_WIDTH, Level, layout_level
from limn.svg import text_width

if TYPE_CHECKING:
    from limn.diagram_graph import Graph

Point = tuple[float, float]

LABEL_SIZE, DETAIL_SIZE, EDGE_LABEL_SIZE, CLUSTER_LABEL_SIZE, TITLE_SIZE = 12, 10, 9, 10, 15
# text_width has Helvetica's regular metrics; a bold label runs up to this much wider (r, t, i, l in Bold)
BOLD_WIDTH = 1.15
BOX_PAD_X, BOX_PAD_Y, MIN_BOX_WIDTH = 12, 6, 44
CLUSTER_PAD, CLUSTER_HEADER = 10, 20  # a cluster's margin around its members, and the band its label sits in
MARGIN = 16  # between the drawing's edge and the outermost shape
TITLE_BAND = 28
LABEL_TRIES = (0.5, 0.35, 0.65, 0.2, 0.8)  # where along its line an edge label may go, tried in turn


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
    """Where one edge of the graph is drawn: a polyline from its src box's boundary to its dst box's, and the
    point its label starts at (the middle of the line, by length)."""

    index: int  # the edge's position in Graph.edges
    points: tuple[Point, ...]
    label_at: Point


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


def _layout_cluster(graph: Graph, unit: _Unit, sizes: dict[str, tuple[float, float]], label: str) -> None:
    """Lays out a cluster's interior, its ports included (port_of and port_side filled in by the caller), and
    sets the cluster's size: the interior, a margin, and the band its label sits in."""
    local = {box: k for k, box in enumerate(unit.members)}
    unit.member_sizes = [sizes[box] for box in unit.members]
    node_sizes = unit.member_sizes + [(DUMMY_WIDTH, 0.0)] * len(unit.port_of)
    pairs = [(local[graph.edges[i].src], local[graph.edges[i].dst]) for i in unit.inner_edges]
    for (i, end), port in unit.port_of.items():
        member = local[graph.edges[i].dst if end else graph.edges[i].src]
        pairs.append((port, member) if unit.port_side[port] == "top" else (member, port))
    unit.inner = layout_level(node_sizes, pairs, unit.port_side)
    label_width = text_width(label, CLUSTER_LABEL_SIZE) + 2 * CLUSTER_PAD
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
    """The Layout of a validated graph: see the module docstring for how it is made."""
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
            _layout_cluster(graph, unit, sizes, labels[unit.id])
    outer = layout_level([unit.size for unit in units], outer_pairs)

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
    routes = _place_labels(graph, routes, boxes, clusters)

    content_right = max((r.right for r in unit_rects), default=MARGIN)
    content_bottom = max((r.bottom for r in unit_rects), default=top)
    title_width = text_width(graph.title, TITLE_SIZE) * BOLD_WIDTH if graph.title else 0.0
    width = max(content_right, MARGIN + title_width) + MARGIN
    title_at = (MARGIN, MARGIN + TITLE_SIZE) if graph.title else None
    return Layout(width, content_bottom + MARGIN, boxes, clusters, routes, title_at)


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


def _along(points: tuple[Point, ...], fractions: tuple[float, ...]) -> list[Point]:
    """The points the given fractions of the way along a polyline, by length (measured once for all)."""
    lengths = [((x1 - x0) ** 2 + (y1 - y0) ** 2) ** 0.5 for (x0, y0), (x1, y1) in zip(points, points[1:])]
    total = sum(lengths)
    out = []
    for fraction in fractions:
        rest, at = total * fraction, points[-1]
        for (x0, y0), (x1, y1), length in zip(points, points[1:], lengths):
            if rest <= length and length > 0:
                t = rest / length
                at = (x0 + t * (x1 - x0), y0 + t * (y1 - y0))
                break
            rest -= length
        out.append(at)
    return out


class _Grid:
    """Rects bucketed by 64-pixel cells, to ask cheaply whether a new one meets any already there."""

    CELL = 64

    def __init__(self) -> None:
        self.cells: dict[tuple[int, int], list[Rect]] = defaultdict(list)

    def _keys(self, r: Rect):
        c = self.CELL
        for i in range(int(r.x // c), int(r.right // c) + 1):
            for j in range(int(r.y // c), int(r.bottom // c) + 1):
                yield i, j

    def add(self, r: Rect) -> None:
        for key in self._keys(r):
            self.cells[key].append(r)

    def hits(self, r: Rect) -> bool:
        return any(r.overlaps(other) for key in self._keys(r) for other in self.cells.get(key, ()))


def _label_rect(at: Point, label: str) -> Rect:
    """The box an edge label covers when its text starts 4 px right of `at` (as the renderers draw it)."""
    x, y = at
    return Rect(x + 4, y + 3 - EDGE_LABEL_SIZE * 0.8, text_width(label, EDGE_LABEL_SIZE), EDGE_LABEL_SIZE)


def _place_labels(graph: Graph, routes: list[EdgeRoute], boxes, clusters) -> list[EdgeRoute]:
    """Each labelled edge's label at the first of LABEL_TRIES along its line where it meets no box, no cluster
    label and no label placed before; where every try meets something, at the middle."""
    grid = _Grid()
    for rect in boxes.values():
        grid.add(rect)
    for rect in clusters.values():  # the band a cluster's label sits in
        grid.add(Rect(rect.x, rect.y, rect.width, CLUSTER_HEADER))
    placed = []
    for edge, route in zip(graph.edges, routes):
        if not edge.label:
            placed.append(EdgeRoute(route.index, route.points, _along(route.points, (0.5,))[0]))
            continue
        tries = _along(route.points, LABEL_TRIES)
        at = next((p for p in tries if not grid.hits(_label_rect(p, edge.label))), tries[0])
        grid.add(_label_rect(at, edge.label))
        placed.append(EdgeRoute(route.index, route.points, at))
    return placed
