"""A diagram as data: Boxes joined by Edges, grouped in Clusters, and its renderers to SVG, Graphviz dot and TikZ.

A Graph is what limn.diagram builds from tensors (ops as boxes, values as edges, kernels as clusters) and what
anyone can build by hand. It validates itself, lays itself out with limn's own layered layout (diagram/layout),
and writes itself as an SVG (draw_svg, light or dark), as dot source for Graphviz, or as a standalone LaTeX
document of one tikzpicture at the same coordinates as the SVG. Pure stdlib.
Pipeline: tensors -> graph -> diagram.build -> **diagram/graph.Graph** -> Layout -> .svg / .dot / .tex.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from limn.atomic_write import write_atomically
from limn.diagram import draw_svg
from limn.diagram import layout as diagram_layout
from limn.diagram.labels import EDGE_LABEL_SIZE, GAP
from limn.diagram.layout import CLUSTER_LABEL_SIZE, CLUSTER_PAD, DETAIL_SIZE, LABEL_SIZE, Layout
from limn.diagram.svg import fmt

EDGE_KINDS = ("value", "buffer")
# the \usetikzlibrary names to_tikz's document loads: arrows.meta for its Stealth arrowheads
TIKZ_LIBRARIES: tuple[str, ...] = ("arrows.meta",)
FORMATS = {".svg": "to_svg", ".dot": "to_dot", ".gv": "to_dot", ".tex": "to_tikz"}


@dataclass
class Box:
    """One node drawn: its label (first line, "MUL" or "Block x6"), a detail line ("float32[4, 5]" or empty),
    the group that colours it (one of draw_svg.GROUPS) and the tooltip a browser shows on hover."""

    id: str
    label: str
    detail: str = ""
    group: str = ""
    tooltip: str = ""


@dataclass
class Edge:
    """A value flowing from box src to box dst, labelled (with its "float32[4, 5]"); kind "buffer" marks one
    stored between kernels, drawn heavier and dashed. Several edges may join one pair of boxes."""

    src: str
    dst: str
    label: str = ""
    kind: str = "value"


@dataclass
class Cluster:
    """Boxes drawn inside one labelled rectangle ("k3 SUM loop[4, 5]"): a box is in at most one cluster, and
    clusters do not nest."""

    id: str
    label: str
    members: list[str]
    tooltip: str = ""


@dataclass
class Graph:
    """A diagram: boxes, the edges between them (acyclic: data flows from src to dst), clusters, a title.

    >>> g = Graph([Box("a", "LOAD", "float32[4]"), Box("b", "EXP", "float32[4]")], [Edge("a", "b", "float32[4]")])
    >>> g
    Graph(2 boxes, 1 edge, 0 clusters)
    >>> g.to_svg().startswith("<svg")
    True
    """

    boxes: list[Box]
    edges: list[Edge]
    clusters: list[Cluster] = field(default_factory=list)
    title: str = ""
    # the last Layout made and the graph's contents it was made for (see layout)
    _cached: tuple[tuple, Layout] | None = field(default=None, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        def count(n: int, noun: str) -> str:
            return f"{n} {noun}" if n == 1 else f"{n} {noun}{'es' if noun.endswith('x') else 's'}"

        title = f", {self.title!r}" if self.title else ""
        parts = [count(len(self.boxes), "box"), count(len(self.edges), "edge"), count(len(self.clusters), "cluster")]
        return f"Graph({', '.join(parts)}{title})"

    def validate(self) -> None:
        """Raises ValueError, naming the id, for a box id used twice, an edge naming a missing box, a cluster
        member that is missing or in two clusters, a cluster with no members, an unknown group or edge kind.
        (A cycle is found by layout.)"""
        ids: set[str] = set()
        for box in self.boxes:
            if box.id in ids:
                raise ValueError(f"box id {box.id!r} is used by two boxes; give each box its own id")
            ids.add(box.id)
            if box.group not in draw_svg.GROUPS:
                raise ValueError(f"box {box.id!r} has group {box.group!r}; the groups are {draw_svg.GROUPS}")
        for edge in self.edges:
            for end in ("src", "dst"):
                if getattr(edge, end) not in ids:
                    raise ValueError(
                        f"edge {edge.src!r} -> {edge.dst!r} names {end} box {getattr(edge, end)!r}, which is not "
                        f"among the graph's {len(ids)} boxes; add the box or fix the edge"
                    )
            if edge.kind not in EDGE_KINDS:
                raise ValueError(f"edge {edge.src!r} -> {edge.dst!r} has kind {edge.kind!r}; kinds are {EDGE_KINDS}")
        owner: dict[str, str] = {}
        cluster_ids: set[str] = set()
        for cluster in self.clusters:
            if cluster.id in cluster_ids:
                raise ValueError(f"cluster id {cluster.id!r} is used by two clusters; give each its own id")
            cluster_ids.add(cluster.id)
            if not cluster.members:
                raise ValueError(f"cluster {cluster.id!r} has no members; give it its boxes or leave it out")
            for member in cluster.members:
                if member not in ids:
                    raise ValueError(f"cluster {cluster.id!r} lists member {member!r}, which is not a box id")
                if member in owner:
                    raise ValueError(
                        f"box {member!r} is a member of clusters {owner[member]!r} and {cluster.id!r}; a box is in "
                        f"at most one cluster (clusters do not nest)"
                    )
                owner[member] = cluster.id

    def layout(self) -> Layout:
        """Validates the graph, then places every box, cluster and edge (diagram/layout): the positions every
        renderer draws at. A cycle among the edges raises ValueError naming a box on it.

        The Layout is kept with a snapshot of the graph's contents, so that to_svg then save lay out once; any
        change to a box, edge, cluster or the title (the Graph and its parts are mutable) makes a new one. The
        Layout returned is shared between calls: read it, do not change it."""
        key = self._contents()
        if self._cached is None or self._cached[0] != key:
            self.validate()
            self._cached = (key, diagram_layout.layout_graph(self))
        return self._cached[1]

    def _contents(self) -> tuple:
        """Every field of every part, as tuples: equal exactly when a layout of either graph would be."""
        parts = lambda items: tuple(tuple(map(_frozen, vars(item).values())) for item in items)  # noqa: E731
        return parts(self.boxes), parts(self.edges), parts(self.clusters), self.title

    def to_svg(self, theme: str = "light") -> str:
        """The diagram as an SVG document, drawn by limn (no Graphviz), in the "light" or "dark" theme."""
        return draw_svg.render(self, self.layout(), theme).to_string()

    def to_dot(self) -> str:
        """Graphviz source (`dot -Tsvg`): clusters as `subgraph cluster_<n>_<id>`, a buffer edge dashed and bold,
        tooltips kept. Graphviz lays it out itself; this does not use limn's Layout."""
        self.validate()
        fills = draw_svg.GROUP_COLOURS["light"]
        lines = [
            "digraph limn {",
            "  rankdir=TB;",
            f"  label={_dot_string(self.title)}; labelloc=t;" if self.title else "",
            '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
            '  edge [fontname="Helvetica", fontsize=9];',
        ]
        clustered = {member for cluster in self.clusters for member in cluster.members}

        def node(box: Box, indent: str) -> str:
            label = box.label + (f"\n{box.detail}" if box.detail else "")
            fill, stroke = fills[box.group]
            tip = f", tooltip={_dot_string(box.tooltip)}" if box.tooltip else ""
            return f"{indent}{_dot_string(box.id)} [label={_dot_string(label)}, fillcolor={_dot_string(fill)}{tip}];"

        by_id = {box.id: box for box in self.boxes}
        for i, cluster in enumerate(self.clusters):
            lines.append(f"  subgraph {_dot_string(f'cluster_{i}_{cluster.id}')} {{")
            lines.append(f'    label={_dot_string(cluster.label)}; style="rounded,filled"; fillcolor="#f6f8fa";')
            if cluster.tooltip:
                lines.append(f"    tooltip={_dot_string(cluster.tooltip)};")
            lines += [node(by_id[member], "    ") for member in cluster.members]
            lines.append("  }")
        lines += [node(box, "  ") for box in self.boxes if box.id not in clustered]
        for edge in self.edges:
            attrs = [f"label={_dot_string(edge.label)}"] if edge.label else []
            if edge.kind == "buffer":
                attrs.append('style="dashed,bold"')
            suffix = f" [{', '.join(attrs)}]" if attrs else ""
            lines.append(f"  {_dot_string(edge.src)} -> {_dot_string(edge.dst)}{suffix};")
        lines.append("}")
        return "\n".join(line for line in lines if line) + "\n"

    def to_tikz(self) -> str:
        """A standalone LaTeX document (`pdflatex diagram.tex`) of one tikzpicture drawn at the Layout's
        coordinates (1 px = 0.75 pt, y flipped by the picture's axes): one \\node per box, one \\draw per edge,
        clusters as filled \\path rectangles. It needs the TikZ libraries in TIKZ_LIBRARIES (arrows.meta), which
        the document loads with \\usetikzlibrary; paste the picture elsewhere and load them there too."""
        return _tikz_document(self, self.layout())

    def save(self, path: str | os.PathLike) -> Path:
        """Writes the diagram to `path` in the format its extension names (.svg, .dot or .gv, .tex), atomically.

        >>> Graph([Box("a", "A")], []).save("diagram.pdf")
        Traceback (most recent call last):
        ValueError: cannot save a diagram as 'diagram.pdf': the formats are .svg, .dot, .gv, .tex (from the extension)
        """
        suffix = Path(path).suffix.lower()
        if suffix not in FORMATS:
            allowed = ", ".join(FORMATS)
            raise ValueError(f"cannot save a diagram as {str(path)!r}: the formats are {allowed} (from the extension)")
        text = getattr(self, FORMATS[suffix])()
        return write_atomically(path, text.encode("utf-8"))


def _frozen(value: object) -> object:
    """A field's value as a hashable, comparable snapshot: a cluster's member list as a tuple."""
    return tuple(value) if isinstance(value, list) else value


def _dot_string(text: str) -> str:
    """A dot double-quoted string: backslash and quote escaped, a newline as dot's centred line break."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# ---- TikZ ----

_TEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "#": r"\#",
    "$": r"\$",
    "%": r"\%",
    "&": r"\&",
    "_": r"\_",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def tex_escape(text: str) -> str:
    r"""Text safe inside a TeX group: the ten specials (and < >, which OT1 fonts draw wrong) spelled out.

    >>> tex_escape("x_1 & 50% {a}")
    'x\\_1 \\& 50\\% \\{a\\}'
    """
    return "".join(_TEX_SPECIAL.get(char, char) for char in text)


def _tikz_colour_name(group: str) -> str:
    return f"limn{group or 'default'}"


def _tikz_document(graph: Graph, layout: Layout) -> str:
    pt = lambda px: fmt(px * 0.75)  # noqa: E731 - the picture's unit, written in the style options below
    fills = draw_svg.GROUP_COLOURS["light"]
    cluster_fill, cluster_stroke = draw_svg.CLUSTER_COLOURS["light"]
    out = [
        r"\documentclass[border=4pt]{standalone}",
        r"\usepackage{tikz}",
        *(rf"\usetikzlibrary{{{name}}}" for name in TIKZ_LIBRARIES),
        *(rf"\definecolor{{{_tikz_colour_name(g)}}}{{HTML}}{{{fill[1:]}}}" for g, (fill, _) in fills.items()),
        *(rf"\definecolor{{{_tikz_colour_name(g)}line}}{{HTML}}{{{line[1:]}}}" for g, (_, line) in fills.items()),
        rf"\definecolor{{limncluster}}{{HTML}}{{{cluster_fill[1:]}}}",
        rf"\definecolor{{limnclusterline}}{{HTML}}{{{cluster_stroke[1:]}}}",
        r"\begin{document}",
        # the Layout's pixels, y down: 0.75pt per pixel (96 px to the inch), y axis flipped
        r"\begin{tikzpicture}[x=0.75pt, y=-0.75pt,",
        r"  box/.style={draw, rounded corners=3pt, align=center, inner sep=0pt, font=\sffamily},",
        r"  edge/.style={-{Stealth[length=5pt]}, draw=black!55, line width=0.6pt},",
        r"  buffer/.style={edge, dashed, line width=1.2pt},",
        rf"  elabel/.style={{font=\sffamily\fontsize{{{pt(EDGE_LABEL_SIZE)}}}{{{pt(EDGE_LABEL_SIZE)}}}\selectfont,"
        r" text=black!60, anchor=west, inner sep=1pt}]",
    ]
    if layout.title_at is not None:
        x, y = layout.title_at
        title = tex_escape(graph.title)
        out.append(rf"\path ({fmt(x)},{fmt(y)}) node[anchor=base west, font=\sffamily\bfseries] {{{title}}};")
    for cluster in graph.clusters:
        r = layout.clusters[cluster.id]
        out.append(
            rf"\path[fill=limncluster, draw=limnclusterline, rounded corners=4pt] ({fmt(r.x)},{fmt(r.y)}) rectangle "
            rf"({fmt(r.right)},{fmt(r.bottom)});"
        )
    for edge, route in zip(graph.edges, layout.edges):
        out.append(_tikz_edge(edge, route))
    for cluster in graph.clusters:  # over the edges, on the cluster's fill, as the SVG draws them
        r = layout.clusters[cluster.id]
        x, baseline = r.x + CLUSTER_PAD - 4 / 3, r.y + CLUSTER_PAD + CLUSTER_LABEL_SIZE * 0.8
        out.append(
            rf"\path ({fmt(x)},{fmt(baseline)}) node[anchor=base west, inner sep=1pt, fill=limncluster, "
            rf"font=\sffamily\fontsize{{{pt(CLUSTER_LABEL_SIZE)}}}{{{pt(CLUSTER_LABEL_SIZE)}}}\selectfont, "
            rf"text=black!60] {{{tex_escape(cluster.label)}}};"
        )
    label_font = rf"\sffamily\bfseries\fontsize{{{pt(LABEL_SIZE)}}}{{{pt(LABEL_SIZE * 1.2)}}}\selectfont"
    detail_font = rf"\fontsize{{{pt(DETAIL_SIZE)}}}{{{pt(DETAIL_SIZE * 1.3)}}}\selectfont"
    for box in graph.boxes:
        r = layout.boxes[box.id]
        colour = _tikz_colour_name(box.group)
        text = rf"{{{label_font} {tex_escape(box.label)}}}"
        if box.detail:
            text += rf"\\{{{detail_font} {tex_escape(box.detail)}}}"
        out.append(
            rf"\node[box, fill={colour}, draw={colour}line, minimum width={pt(r.width)}pt, "
            rf"minimum height={pt(r.height)}pt] at ({fmt(r.cx)},{fmt(r.y + r.height / 2)}) {{{text}}};"
        )
    out += [r"\end{tikzpicture}", r"\end{document}"]
    return "\n".join(out) + "\n"


def _tikz_edge(edge: Edge, route: diagram_layout.EdgeRoute) -> str:
    """One \\draw along the route, then its label as a node where the Layout puts it: its baseline 3 px below
    the label's point, starting GAP px right of it or ending GAP px left of it, as the SVG draws it."""
    style = "buffer" if edge.kind == "buffer" else "edge"
    out = rf"\draw[{style}] " + " -- ".join(f"({fmt(x)},{fmt(y)})" for x, y in route.points) + ";"
    if edge.label:
        (x, y), start = route.label_at, route.label_anchor == "start"
        anchor = "base west" if start else "base east"
        # elabel's inner sep is 1pt (4/3 px): its text starts that much inside the anchor
        x += (GAP - 4 / 3) if start else -(GAP - 4 / 3)
        out += rf" \path ({fmt(x)},{fmt(y + 3)}) node[elabel, anchor={anchor}] {{{tex_escape(edge.label)}}};"
    return out
