"""A diagram Graph drawn as SVG on its Layout: rounded boxes coloured by group, arrows, clusters behind.

It takes a Graph and its Layout and gives an svg.Drawing: each cluster a light rectangle, each edge a polyline
with an arrowhead (heavier and dashed for a buffer) and its label in small muted text beside it, each cluster's
label at its top-left over the lines that cross it, each box a rounded rect with its label in bold over its
detail. Every box, cluster and edge is its own <g> with a class naming what it is (and a box's group) and a
<title> a browser shows on hover; boxes and clusters also have an id, and a cluster's label is a <g
class="cluster-label"> with the cluster's data-id.
Pipeline: Graph -> diagram/layout.layout_graph -> Layout -> **diagram/draw_svg.render** -> svg.Drawing -> .svg file.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from limn.diagram.labels import EDGE_LABEL_SIZE, GAP
from limn.diagram.layout import BOX_PAD_Y, CLUSTER_LABEL_SIZE, CLUSTER_PAD, DETAIL_SIZE, LABEL_SIZE, TITLE_SIZE, Layout
from limn.diagram.svg import Drawing, Element, Theme, get_theme

if TYPE_CHECKING:
    from limn.diagram.graph import Graph

# (fill, stroke) of a box per group and theme: pale tints on white, deep tones on the dark background, each
# group its own hue so that a graph's sources, reductions and movement read apart at a glance
GROUP_COLOURS = {
    "light": {
        "": ("#f3f4f6", "#8c959f"),
        "source": ("#dbeafe", "#3b82f6"),
        "elementwise": ("#dcfce7", "#22a05a"),
        "reduce": ("#fef3c7", "#d4a017"),
        "movement": ("#ede9fe", "#8b5cf6"),
        "indexed": ("#fce7f3", "#db2777"),
        "custom": ("#ffedd5", "#ea7a1a"),
        "assign": ("#fee2e2", "#dc2626"),
        "block": ("#e5e7eb", "#4b5563"),
    },
    "dark": {
        "": ("#21262d", "#6e7681"),
        "source": ("#1c3556", "#58a6ff"),
        "elementwise": ("#12402a", "#3fb950"),
        "reduce": ("#47380c", "#d29922"),
        "movement": ("#352a5c", "#a371f7"),
        "indexed": ("#52213f", "#f778ba"),
        "custom": ("#4d2e12", "#f0883e"),
        "assign": ("#561d1d", "#f85149"),
        "block": ("#30363d", "#8b949e"),
    },
}
GROUPS = tuple(GROUP_COLOURS["light"])
# a cluster's fill and border: a tint just off the background
CLUSTER_COLOURS = {"light": ("#f6f8fa", "#d0d7de"), "dark": ("#161b22", "#3d444d")}
ARROW_ID = "limn-arrow"


def css_id(prefix: str, raw: str, taken: set[str]) -> str:
    """An XML id for a box or cluster: `prefix-` and the raw id with anything but letters, digits, - and _
    written as _, made unique with a -2, -3 suffix when two raw ids clean up alike. The raw id goes beside it
    in data-id, escaped.

    >>> css_id("box", "a/b 1", set())
    'box-a_b_1'
    """
    base = f"{prefix}-{re.sub(r'[^A-Za-z0-9_-]', '_', raw)}"
    candidate, k = base, 1
    while candidate in taken:
        k += 1
        candidate = f"{base}-{k}"
    taken.add(candidate)
    return candidate


def render(graph: Graph, layout: Layout, theme: str | Theme = "light") -> Drawing:
    """The Drawing of `graph` at `layout`'s positions: clusters first, then edges, then the clusters' labels
    and the boxes over them."""
    theme = get_theme(theme)
    if theme.name not in GROUP_COLOURS:
        raise ValueError(f"diagram colours exist for the themes {sorted(GROUP_COLOURS)}, got {theme.name!r}")
    drawing = Drawing(layout.width, layout.height, theme)
    _arrow_marker(drawing)
    if layout.title_at is not None:
        x, y = layout.title_at
        drawing.text(x, y, graph.title, size=TITLE_SIZE, font_weight="bold", class_="title")
    taken: set[str] = set()
    _draw_clusters(drawing, graph, layout, taken)
    _draw_edges(drawing, graph, layout)
    _draw_cluster_labels(drawing, graph, layout)
    _draw_boxes(drawing, graph, layout, taken)
    return drawing


def _arrow_marker(drawing: Drawing) -> None:
    """One arrowhead in <defs>, its tip at the line's end and in the line's colour (context-stroke is SVG 2;
    the fill attribute below it is what older renderers use)."""
    defs = drawing.add("defs")
    marker = Element(
        "marker",
        {
            "id": ARROW_ID,
            "viewBox": "0 0 10 10",
            "refX": "10",
            "refY": "5",
            "markerWidth": "8",
            "markerHeight": "8",
            "markerUnits": "userSpaceOnUse",
            "orient": "auto",
        },
    )
    marker.children.append(Element("path", {"d": "M 0 0 L 10 5 L 0 10 z", "fill": drawing.theme.muted}))
    defs.children.append(marker)


def _draw_clusters(drawing: Drawing, graph: Graph, layout: Layout, taken: set[str]) -> None:
    fill, stroke = CLUSTER_COLOURS[drawing.theme.name]
    for cluster in graph.clusters:
        rect = layout.clusters[cluster.id]
        group_id = css_id("cluster", cluster.id, taken)
        with drawing.group(title=cluster.tooltip or cluster.label, id=group_id, class_="cluster", data_id=cluster.id):
            drawing.rect(rect.x, rect.y, rect.width, rect.height, rx=8, fill=fill, stroke=stroke)


def _draw_cluster_labels(drawing: Drawing, graph: Graph, layout: Layout) -> None:
    """Each cluster's label, drawn after the edges: a line entering the cluster through its top passes under
    the label, whose halo in the cluster's fill keeps it whole."""
    fill, _ = CLUSTER_COLOURS[drawing.theme.name]
    halo = {"stroke": fill, "stroke_width": 3, "paint_order": "stroke"}
    for cluster in graph.clusters:
        rect = layout.clusters[cluster.id]
        with drawing.group(title=cluster.tooltip or cluster.label, class_="cluster-label", data_id=cluster.id):
            baseline = rect.y + CLUSTER_PAD + CLUSTER_LABEL_SIZE * 0.8
            x = rect.x + CLUSTER_PAD
            drawing.text(x, baseline, cluster.label, size=CLUSTER_LABEL_SIZE, fill=drawing.theme.muted, **halo)


def _draw_edges(drawing: Drawing, graph: Graph, layout: Layout) -> None:
    theme = drawing.theme
    for edge, route in zip(graph.edges, layout.edges):
        style = {"stroke_width": 1.2}
        if edge.kind == "buffer":  # a buffer crossing kernels: heavier and dashed, to stand apart from a value
            style = {"stroke_width": 2.2, "stroke_dasharray": "6 3"}
        title = f"{edge.src} -> {edge.dst}" + (f": {edge.label}" if edge.label else "")
        with drawing.group(title=title, class_=f"edge {edge.kind}", data_src=edge.src, data_dst=edge.dst):
            drawing.polyline(route.points, stroke=theme.muted, marker_end=f"url(#{ARROW_ID})", **style)
            if edge.label:
                x, y = route.label_at
                x += GAP if route.label_anchor == "start" else -GAP
                # a halo in the background colour keeps the label readable where it crosses a line
                halo = {"stroke": theme.background, "stroke_width": 3, "paint_order": "stroke"}
                text = edge.label
                drawing.text(x, y + 3, text, size=EDGE_LABEL_SIZE, anchor=route.label_anchor, fill=theme.muted, **halo)


def _draw_boxes(drawing: Drawing, graph: Graph, layout: Layout, taken: set[str]) -> None:
    colours = GROUP_COLOURS[drawing.theme.name]
    for box in graph.boxes:
        rect = layout.boxes[box.id]
        fill, stroke = colours[box.group]
        title = box.tooltip or "\n".join(line for line in (box.label, box.detail) if line)
        group_id = css_id("box", box.id, taken)
        with drawing.group(title=title, id=group_id, class_=f"box group-{box.group or 'default'}", data_id=box.id):
            drawing.rect(rect.x, rect.y, rect.width, rect.height, rx=6, fill=fill, stroke=stroke)
            baseline = rect.y + BOX_PAD_Y + LABEL_SIZE
            drawing.text(rect.cx, baseline, box.label, size=LABEL_SIZE, anchor="middle", font_weight="bold")
            if box.detail:
                detail_baseline = baseline + DETAIL_SIZE * 1.3
                drawing.text(rect.cx, detail_baseline, box.detail, size=DETAIL_SIZE, anchor="middle", class_="detail")
