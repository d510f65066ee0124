"""Rules for limn's diagram Graph (limn.diagram.graph), its layered layout and its SVG, dot and TikZ renderers.

The oracle for the SVG is the SVG itself, parsed back with xml.etree: the rects of the box and cluster groups
are what a reader sees, so overlaps, containment and edge ends are checked on them, not only on the Layout.
Graphviz's dot and a TeX, where installed, are the oracles for the dot and TikZ output.
"""

import random
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from limn.diagram import layout as diagram_layout
from limn.diagram.graph import TIKZ_LIBRARIES, Box, Cluster, Edge, Graph
from limn.diagram.svg import text_width

NS = "{http://www.w3.org/2000/svg}"
EPS = 0.02  # the SVG writes two decimals


def sample_graph() -> Graph:
    """A softmax-like graph: a source read by two kernels, a buffer between them, a box outside any cluster,
    two edges between one pair, and ids that need escaping."""
    boxes = [
        Box("x", "LOAD", "float32[4, 5]", "source", tooltip="x: input\nfloat32[4, 5]"),
        Box("max", "MAX", "float32[4, 1]", "reduce"),
        Box("sub", "SUB", "float32[4, 5]", "elementwise"),
        Box("exp", "EXP", "float32[4, 5]", "elementwise"),
        Box("sum", "SUM", "float32[4, 1]", "reduce"),
        Box("div <&>", "DIV", "float32[4, 5]", "elementwise"),
        Box("view", "EXPAND", "", "movement"),
        Box("block", "Block x6", "a repeated block of many ops", "block"),
    ]
    edges = [
        Edge("x", "max", "float32[4, 5]"),
        Edge("x", "sub", "float32[4, 5]"),
        Edge("max", "view", "float32[4, 1]", kind="buffer"),
        Edge("view", "sub", "float32[4, 5]"),
        Edge("sub", "exp", "float32[4, 5]"),
        Edge("exp", "sum", "float32[4, 5]"),
        Edge("exp", "div <&>", "float32[4, 5]"),
        Edge("sum", "div <&>", "float32[4, 1]", kind="buffer"),
        Edge("sum", "div <&>", "again"),
        Edge("div <&>", "block"),
    ]
    clusters = [
        Cluster("k0", "k0 MAX loop[4, 5]", ["max"], tooltip="k0: a reduce materialises its output"),
        Cluster("k1", "k1 SUM loop[4, 5]", ["sub", "exp", "sum"]),
        Cluster("k2 a/b", "k2 DIV loop[4, 5]", ["div <&>"]),
    ]
    return Graph(boxes, edges, clusters, title="softmax")


# ---- the SVG, parsed back ----


def rect_of(element: ET.Element) -> diagram_layout.Rect:
    return diagram_layout.Rect(*(float(element.get(name)) for name in ("x", "y", "width", "height")))


def groups(root: ET.Element, kind: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{NS}g") if g.get("class", "").split()[:1] == [kind]]


def box_rects(root: ET.Element) -> dict[str, diagram_layout.Rect]:
    return {g.get("data-id"): rect_of(g.find(f"{NS}rect")) for g in groups(root, "box")}


def cluster_rects(root: ET.Element) -> dict[str, diagram_layout.Rect]:
    return {g.get("data-id"): rect_of(g.find(f"{NS}rect")) for g in groups(root, "cluster")}


def edge_lines(root: ET.Element) -> list[tuple[str, str, list[tuple[float, float]]]]:
    out = []
    for g in groups(root, "edge"):
        points = [tuple(float(c) for c in p.split(",")) for p in g.find(f"{NS}polyline").get("points").split()]
        out.append((g.get("data-src"), g.get("data-dst"), points))
    return out


def overlapping_pairs(rects: dict[str, diagram_layout.Rect]) -> list[tuple[str, str]]:
    """Every pair whose interiors meet: a sweep over x, so that a few thousand boxes check in well under n^2."""
    ordered = sorted(rects.items(), key=lambda item: item[1].x)
    pairs = []
    for i, (a, ra) in enumerate(ordered):
        for b, rb in ordered[i + 1 :]:
            if rb.x >= ra.right - EPS:
                break
            if ra.x < rb.right - EPS and ra.y < rb.bottom - EPS and rb.y < ra.bottom - EPS:
                pairs.append((a, b))
    return pairs


def on_boundary(point, rect: diagram_layout.Rect) -> bool:
    x, y = point
    inside_x = rect.x - EPS <= x <= rect.right + EPS
    inside_y = rect.y - EPS <= y <= rect.bottom + EPS
    on_side = min(abs(y - rect.y), abs(y - rect.bottom)) <= EPS or min(abs(x - rect.x), abs(x - rect.right)) <= EPS
    return inside_x and inside_y and on_side


def check_labels_fit(root: ET.Element) -> None:
    """Each box text's estimated extent (svg.text_width at its font size, widened for bold as the layout is)
    lies inside its box's rect, horizontally and from cap height to descent."""
    for g in groups(root, "box"):
        rect = rect_of(g.find(f"{NS}rect"))
        for text in g.findall(f"{NS}text"):
            size, x, baseline = (float(text.get(name)) for name in ("font-size", "x", "y"))
            width = text_width(text.text or "", size) * (diagram_layout.BOLD_WIDTH if text.get("font-weight") else 1)
            assert text.get("text-anchor") == "middle"
            assert rect.x <= x - width / 2 and x + width / 2 <= rect.right, (text.text, rect)
            assert rect.y <= baseline - 0.75 * size and baseline + 0.25 * size <= rect.bottom, (text.text, rect)


# a browser without Helvetica draws in its sans-serif, DejaVu Sans on Linux, up to a fifth wider than
# svg.text_width's Helvetica metrics (digits, brackets): edge and cluster labels and the title need that room
WIDER_FONT = 1.2


def text_extents(root: ET.Element) -> list[tuple[str, str, diagram_layout.Rect]]:
    """(kind of the group it is in: box, edge, cluster-label or title; its text; its estimated extent) for every
    text element: svg.text_width at its font size (widened for bold, as the layout does, and for all but a box's
    texts, which their box's padding covers, by WIDER_FONT), placed by its text-anchor, from 0.8 of the size
    above the baseline to 0.2 below (cap height to descent)."""
    parent = {child: g for g in root.iter() for child in g}
    out = []
    for text in root.iter(f"{NS}text"):
        size, x, baseline = (float(text.get(name)) for name in ("font-size", "x", "y"))
        classes = (parent[text].get("class") or "").split() if parent[text] is not root else []
        kind = classes[0] if classes else "title"
        width = text_width(text.text or "", size) * (diagram_layout.BOLD_WIDTH if text.get("font-weight") else 1)
        width *= 1 if kind == "box" else WIDER_FONT
        left = {"middle": x - width / 2, "end": x - width}.get(text.get("text-anchor"), x)
        out.append((kind, text.text or "", diagram_layout.Rect(left, baseline - 0.8 * size, width, size)))
    return out


def check_texts_inside_canvas(root: ET.Element) -> None:
    """Every text's estimated extent lies inside the SVG's width and height: nothing is cut off."""
    width, height = float(root.get("width")), float(root.get("height"))
    for kind, text, r in text_extents(root):
        assert r.x >= -EPS and r.y >= -EPS and r.right <= width + EPS and r.bottom <= height + EPS, (
            f"{kind} text {text!r} at {r} leaves the {width} x {height} canvas"
        )


def check_cluster_labels_inside_their_clusters(root: ET.Element) -> None:
    """Each cluster's label, at WIDER_FONT times its estimated width, lies inside its cluster's rect, clear of
    its left and right borders, and is drawn after every edge, so that no line crosses over it."""
    order = {element: k for k, element in enumerate(root.iter())}
    last_edge = max((order[g] for g in groups(root, "edge")), default=-1)
    clusters = cluster_rects(root)
    # the label is drawn over the edges, in a group of its own with its cluster's data-id
    labels = [g for g in groups(root, "cluster") + groups(root, "cluster-label") if g.find(f"{NS}text") is not None]
    assert sorted(g.get("data-id") for g in labels) == sorted(clusters)
    for g in labels:
        text = g.find(f"{NS}text")
        size, x = float(text.get("font-size")), float(text.get("x"))
        rect = clusters[g.get("data-id")]
        assert rect.x + 4 <= x and x + text_width(text.text, size) * WIDER_FONT <= rect.right - 4, (text.text, rect)
        assert rect.y < float(text.get("y")) - size * 0.8, (text.text, rect)
        assert order[text] > last_edge, f"cluster label {text.text!r} is drawn under the edges"


def check_texts_apart(root: ET.Element) -> None:
    """No two texts' estimated extents overlap (a box's label and detail lines included), and no edge label
    overlaps a box's rect."""
    texts = text_extents(root)
    extents = {f"{k} {kind} {text!r}": r for k, (kind, text, r) in enumerate(texts)}
    assert overlapping_pairs(extents) == []
    edge_labels = {f"edge {k} {text!r}": r for k, (kind, text, r) in enumerate(texts) if kind == "edge"}
    boxes = {f"box {box!r}": rect for box, rect in box_rects(root).items()}
    hits = [(a, b) for a, b in overlapping_pairs(edge_labels | boxes) if {a[:4], b[:4]} == {"edge", "box "}]
    assert hits == [], f"edge labels overlap boxes: {hits}"


def check_drawing(graph: Graph, theme: str = "light") -> ET.Element:
    """The rules every drawing keeps: no two boxes overlap, each cluster holds exactly its members, every edge
    runs from its src box to its dst box, every label fits its box, every text lies inside the canvas, each
    cluster label inside its cluster, and no two texts overlap, nor an edge label a box. Returns the parsed SVG."""
    root = ET.fromstring(graph.to_svg(theme))
    boxes, clusters = box_rects(root), cluster_rects(root)
    assert overlapping_pairs(boxes) == []
    cluster_ids = list(clusters)
    assert overlapping_pairs(clusters) == [], f"clusters overlap among {cluster_ids}"
    for cluster in graph.clusters:
        inside = {box for box, rect in boxes.items() if clusters[cluster.id].overlaps(rect)}
        assert inside == set(cluster.members), f"cluster {cluster.id!r} meets {sorted(inside)}"
        assert all(clusters[cluster.id].contains(boxes[m]) for m in cluster.members), cluster.id
    lines = edge_lines(root)
    assert len(lines) == len(graph.edges)
    for edge, (src, dst, points) in zip(graph.edges, lines):
        assert (src, dst) == (edge.src, edge.dst)
        assert on_boundary(points[0], boxes[edge.src]), (edge, points[0], boxes[edge.src])
        assert on_boundary(points[-1], boxes[edge.dst]), (edge, points[-1], boxes[edge.dst])
    check_labels_fit(root)
    check_texts_inside_canvas(root)
    check_cluster_labels_inside_their_clusters(root)
    check_texts_apart(root)
    return root


def test_svg_parses_and_holds_a_group_per_box_and_cluster_and_a_line_per_edge():
    graph = sample_graph()
    root = ET.fromstring(graph.to_svg())
    assert sorted(g.get("data-id") for g in groups(root, "box")) == sorted(box.id for box in graph.boxes)
    assert sorted(g.get("data-id") for g in groups(root, "cluster")) == sorted(c.id for c in graph.clusters)
    assert len(edge_lines(root)) == len(graph.edges)
    ids = [g.get("id") for g in root.iter(f"{NS}g") if g.get("id")]
    assert len(ids) == len(set(ids)) == len(graph.boxes) + len(graph.clusters)
    assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", i) for i in ids), ids


def test_box_groups_carry_their_group_class_and_tooltip_title():
    root = ET.fromstring(sample_graph().to_svg())
    by_id = {g.get("data-id"): g for g in groups(root, "box")}
    assert by_id["x"].get("class") == "box group-source"
    assert by_id["x"].find(f"{NS}title").text == "x: input\nfloat32[4, 5]"
    clusters = {g.get("data-id"): g for g in groups(root, "cluster")}
    assert clusters["k0"].find(f"{NS}title").text == "k0: a reduce materialises its output"


def test_no_two_boxes_overlap_clusters_hold_exactly_their_members_and_edges_join_their_boxes():
    check_drawing(sample_graph())
    check_drawing(sample_graph(), theme="dark")


def test_every_label_fits_inside_its_box():
    """Each text's estimated extent (svg.text_width at its font size, widened for bold as the layout is) lies
    inside its box's rect, horizontally and from cap height to descent (checked in check_drawing)."""
    check_labels_fit(ET.fromstring(sample_graph().to_svg()))


def test_edge_labels_sit_on_their_edge_and_cluster_labels_inside_their_cluster():
    root = ET.fromstring(sample_graph().to_svg())
    for g in groups(root, "edge"):
        text = g.find(f"{NS}text")
        if text is None:
            continue
        points = [tuple(float(c) for c in p.split(",")) for p in g.find(f"{NS}polyline").get("points").split()]
        # the text starts 4 px right of a point of the line (or ends 4 px left of it), its baseline 3 px below
        side = -4 if text.get("text-anchor") != "end" else 4
        at = (float(text.get("x")) + side, float(text.get("y")) - 3)
        assert min(distance_to_segment(at, a, b) for a, b in zip(points, points[1:])) < 0.05, (text.text, at)
    check_cluster_labels_inside_their_clusters(root)


def distance_to_segment(p, a, b) -> float:
    (px, py), (ax, ay), (bx, by) = p, a, b
    dx, dy = bx - ax, by - ay
    t = 0.0 if dx == dy == 0 else max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return ((px - ax - t * dx) ** 2 + (py - ay - t * dy) ** 2) ** 0.5


def test_several_edges_between_one_pair_are_drawn_apart():
    lines = [points for src, dst, points in edge_lines(ET.fromstring(sample_graph().to_svg())) if dst == "div <&>"]
    starts = [points[0] for points in lines]
    assert len(lines) == 3 and len(set(starts)) == 3


def test_dark_theme_uses_other_colours_than_light():
    def colours(svg: str) -> set[str]:
        return set(re.findall(r'(?:fill|stroke)="(#[0-9a-f]{6})"', svg))

    light, dark = colours(sample_graph().to_svg("light")), colours(sample_graph().to_svg("dark"))
    assert light and dark and not (light & dark), light & dark


def test_cluster_against_the_flow_still_encloses_only_its_members():
    """a1 -> b -> a2 with a1 and a2 in one cluster: the clusters' order has a cycle, laid out by reversing an
    edge, which is still drawn from its src box to its dst box."""
    graph = Graph(
        [Box("a1", "A1"), Box("b", "B"), Box("a2", "A2")],
        [Edge("a1", "b"), Edge("b", "a2"), Edge("a1", "a2")],
        [Cluster("a", "a", ["a1", "a2"])],
    )
    check_drawing(graph)


# ---- validation ----


@pytest.mark.parametrize(
    "graph, named",
    [
        (Graph([Box("a", "A"), Box("a", "B")], []), "'a'"),
        (Graph([Box("a", "A")], [Edge("a", "ghost")]), "'ghost'"),
        (Graph([Box("a", "A")], [], [Cluster("c", "c", ["nobody"])]), "'nobody'"),
        (Graph([Box("a", "A")], [], [Cluster("c", "c", ["a"]), Cluster("d", "d", ["a"])]), "'a'"),
        (Graph([Box("a", "A")], [], [Cluster("empty", "e", [])]), "'empty'"),
        (Graph([Box("a", "A", group="shiny")], []), "'shiny'"),
        (Graph([Box("a", "A"), Box("b", "B")], [Edge("a", "b", kind="pipe")]), "'pipe'"),
    ],
    ids=[
        "box-twice",
        "edge-to-missing-box",
        "missing-member",
        "member-of-two",
        "empty-cluster",
        "unknown-group",
        "unknown-kind",
    ],
)
def test_invalid_graph_raises_value_error_naming_the_id(graph, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        graph.layout()


def test_a_cycle_raises_value_error_naming_a_box_on_it():
    graph = Graph([Box("s", "S"), Box("p", "P"), Box("q", "Q"), Box("r", "R")], [
        Edge("s", "p"), Edge("p", "q"), Edge("q", "r"), Edge("r", "p")])  # fmt: skip
    with pytest.raises(ValueError, match="cycle through box '[pqr]'"):
        graph.layout()
    with pytest.raises(ValueError, match="cycle through box 'a'"):
        Graph([Box("a", "A")], [Edge("a", "a")]).layout()


# ---- dot ----


def test_dot_names_every_box_edge_and_cluster():
    graph = sample_graph()
    dot = graph.to_dot()
    assert dot.startswith("digraph") and dot.count("{") == dot.count("}")
    for box in graph.boxes:
        assert re.search(rf'^\s*"{re.escape(box.id)}" \[label=', dot, re.M), box.id
    for edge in graph.edges:
        pair = f'"{edge.src}" -> "{edge.dst}"'
        expected = sum((e.src, e.dst) == (edge.src, edge.dst) for e in graph.edges)
        assert dot.count(pair) == expected, pair
    assert len(re.findall(r'subgraph "cluster_', dot)) == len(graph.clusters)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_dot_is_accepted_by_graphviz():
    done = subprocess.run(["dot", "-Tsvg"], input=sample_graph().to_dot(), capture_output=True, text=True)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    root = ET.fromstring(done.stdout)
    titles = {t.text for t in root.iter(f"{NS}title")}
    assert {box.id for box in sample_graph().boxes} <= titles


# ---- TikZ ----


def test_tikz_document_loads_its_libraries_and_draws_each_box_and_edge_once():
    graph = sample_graph()
    tex = graph.to_tikz()
    libraries = re.findall(r"\\usetikzlibrary\{([^}]*)\}", tex)
    assert tuple(libraries) == TIKZ_LIBRARIES
    assert tex.startswith(r"\documentclass") and r"{standalone}" in tex.splitlines()[0]
    assert len(re.findall(r"\\node\[", tex)) == len(graph.boxes)
    assert len(re.findall(r"\\draw\[", tex)) == len(graph.edges)
    for env in ("document", "tikzpicture"):
        assert tex.count(rf"\begin{{{env}}}") == tex.count(rf"\end{{{env}}}") == 1
    assert braces_balance(tex)
    assert r"DIV" in tex and "<&>" not in tex  # ids are not written; labels are escaped


def braces_balance(tex: str) -> bool:
    """TeX's groups close in order: line breaks (\\\\) and escaped braces (\\{) are not groups."""
    depth = 0
    for token in re.findall(r"\\\\|\\[{}]|[{}]", tex):
        depth += {"{": 1, "}": -1}.get(token, 0)
        if depth < 0:
            return False
    return depth == 0


TEX = shutil.which("pdflatex") or shutil.which("lualatex")


@pytest.mark.skipif(TEX is None, reason="no TeX installed")
def test_tikz_document_compiles(tmp_path):
    (tmp_path / "diagram.tex").write_text(sample_graph().to_tikz())
    done = subprocess.run(
        [TEX, "-interaction=nonstopmode", "-halt-on-error", "diagram.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert (tmp_path / "diagram.pdf").stat().st_size > 0


# ---- save, repr ----


def test_save_picks_the_format_from_the_extension(tmp_path):
    graph = sample_graph()
    assert graph.save(tmp_path / "d.svg").read_text() == graph.to_svg()
    assert graph.save(tmp_path / "d.dot").read_text() == graph.to_dot()
    assert graph.save(tmp_path / "d.tex").read_text() == graph.to_tikz()
    with pytest.raises(ValueError, match=r"\.svg, \.dot, \.gv, \.tex"):
        graph.save(tmp_path / "d.png")
    assert not (tmp_path / "d.png").exists()


def test_repr_counts_boxes_edges_and_clusters():
    assert repr(sample_graph()) == "Graph(8 boxes, 10 edges, 3 clusters, 'softmax')"
    assert repr(Graph([Box("a", "A")], [])) == "Graph(1 box, 0 edges, 0 clusters)"


# ---- scale and random graphs ----


def generated_graph(n: int, m: int, n_clusters: int, seed: int) -> Graph:
    """n boxes, m edges each from a box to one of the 30 after it (a long chain of ops, as a training step
    is), and clusters of consecutive boxes."""
    rng = random.Random(seed)
    boxes = [Box(f"n{i}", rng.choice(["ADD", "MUL", "SUM", "RESHAPE"]), f"float32[{i}, 64]") for i in range(n)]
    edges = []
    for _ in range(m):
        dst = rng.randrange(1, n)
        edges.append(Edge(f"n{rng.randrange(max(0, dst - 30), dst)}", f"n{dst}", "float32[64]"))
    starts = sorted(rng.sample(range(n), n_clusters))
    clusters = [
        Cluster(f"k{k}", f"k{k}", [f"n{i}" for i in range(a, min(a + rng.randrange(1, 8), n))])
        for k, a in enumerate(starts)
    ]
    taken: set[str] = set()
    for cluster in clusters:  # consecutive starts can overlap: a box keeps its first cluster
        cluster.members = [m for m in cluster.members if m not in taken]
        taken.update(cluster.members)
    return Graph(boxes, edges, [c for c in clusters if c.members])


@pytest.mark.browser  # a dozen seconds of layout: nox -s browser runs it with the other heavy diagram checks
def test_three_thousand_boxes_lay_out_without_overlaps():
    check_drawing(generated_graph(3000, 4000, 150, seed=0))


@st.composite
def random_graphs(draw) -> Graph:
    n = draw(st.integers(1, 12))
    pairs = [(i, j) for j in range(n) for i in range(j)]
    chosen = draw(st.lists(st.sampled_from(pairs), max_size=20)) if pairs else []
    owner = draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n))
    labels = draw(st.lists(st.text("ABCmwil[]0, ", min_size=1, max_size=12), min_size=n, max_size=n))
    boxes = [Box(f"b{i}", labels[i], "float32[2]" if i % 2 else "") for i in range(n)]
    edges = [Edge(f"b{i}", f"b{j}", "f32" if (i + j) % 3 else "") for i, j in chosen]
    clusters = [Cluster(f"c{k}", f"cluster {k}", [f"b{i}" for i in range(n) if owner[i] == k]) for k in range(3)]
    return Graph(boxes, edges, [c for c in clusters if c.members])


@settings(deadline=None, max_examples=60)
@given(random_graphs())
def test_random_dags_with_clusters_never_overlap_and_clusters_hold_their_members(graph):
    check_drawing(graph)


def test_data_flows_down_every_edge_when_clusters_close_no_cycle():
    """Clusters of consecutive boxes keep the clusters' graph acyclic: then every dst box lies wholly below
    its src box (sources at the top), inside clusters and between them."""
    graph = generated_graph(200, 300, 20, seed=3)
    boxes = box_rects(ET.fromstring(graph.to_svg()))
    upward = [(e.src, e.dst) for e in graph.edges if boxes[e.dst].y < boxes[e.src].bottom]
    assert upward == []


def tour_like_schedule() -> Graph:
    """The shape of docs/tour-schedule.svg's top: two sources whose long labels meet above the kernel that
    reads both, a kernel whose label is longer than its boxes, a buffer label at the drawing's right."""
    boxes = [
        Box("b0", "buf0", "float32[4, 5]", "source"),
        Box("b1", "buf1", "float32[5, 3]", "source"),
        Box("mul", "MUL", "float32[4, 3, 5]", "elementwise"),
        Box("sum", "SUM", "float32[4, 3, 1]", "reduce"),
        Box("neg", "NEG", "float32[4, 3]", "elementwise"),
    ]
    edges = [
        Edge("b0", "mul", "buf0 float32[4, 5] as [4, 3, 5]", "buffer"),
        Edge("b1", "mul", "buf1 float32[5, 3] as [4, 3, 5]", "buffer"),
        Edge("mul", "sum", "float32[4, 3, 5]"),
        Edge("sum", "neg", "buf2 float32[4, 3, 1] as [4, 3]", "buffer"),
    ]
    clusters = [
        Cluster("k0", "k0  SUM  loop[4, 3, 5] and a long name", ["mul", "sum"]),
        Cluster("k1", "k1  NEG  loop[4, 3]", ["neg"]),
    ]
    return Graph(boxes, edges, clusters)


def crowded_graph() -> Graph:
    """Twenty boxes and 28 labelled edges, each reaching up to 30 boxes back: the lines crowd each layer gap."""
    return generated_graph(20, 28, 2, seed=0)


DRAWINGS = pytest.mark.parametrize(
    "make", [sample_graph, tour_like_schedule, crowded_graph], ids=["sample", "tour-like", "crowded"]
)


@DRAWINGS
def test_every_text_lies_inside_the_canvas(make):
    check_texts_inside_canvas(ET.fromstring(make().to_svg()))


@DRAWINGS
def test_every_cluster_label_lies_inside_its_cluster(make):
    check_cluster_labels_inside_their_clusters(ET.fromstring(make().to_svg()))


@DRAWINGS
def test_no_two_texts_overlap_nor_an_edge_label_a_box(make):
    check_texts_apart(ET.fromstring(make().to_svg()))


def test_to_svg_then_save_lays_out_once_and_a_change_lays_out_again(tmp_path, monkeypatch):
    """The Layout is kept while the graph's contents are unchanged; changing any part makes a new one."""
    calls = []
    real = diagram_layout.layout_graph
    monkeypatch.setattr(diagram_layout, "layout_graph", lambda graph: calls.append(1) or real(graph))
    graph = sample_graph()
    svg = graph.to_svg()
    graph.save(tmp_path / "d.svg")
    graph.save(tmp_path / "d.tex")
    assert len(calls) == 1 and (tmp_path / "d.svg").read_text() == svg
    graph.boxes[0].label = "A MUCH LONGER LABEL"
    assert graph.to_svg() != svg and len(calls) == 2
    graph.clusters[0].members.append("x")
    graph.layout()
    assert len(calls) == 3
    check_drawing(graph)
