"""Where a diagram's edge labels go: beside their line, clear of every box, every other text and, if it can be, of
every other line.

It takes the laid-out edges (polylines), the boxes and the texts already fixed (cluster labels, the title) and
gives each labelled edge a point on its line and a side: its text starts 4 px right of the point, or ends 4 px
left of it. Points are tried from the middle of the line outward, each on both sides; a spot that meets a box or
a text is never taken, and among the others the first that crosses no other edge's line, no cluster border and
no arrowhead wins, else the one that crosses the fewest. An edge with no free spot is counted as crowded: the
layout then tries again with more room between layers.
Pipeline: Graph -> diagram/layout.layout_graph -> **diagram/labels.place_labels** -> Layout -> svg/tikz.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator

from limn.diagram.svg import text_width

Point = tuple[float, float]
Span = tuple[float, float, float, float]  # an axis-aligned extent: left, top, right, bottom

EDGE_LABEL_SIZE = 9
# text_width has Helvetica's metrics; a browser without Helvetica draws in its sans-serif (DejaVu Sans on
# Linux), up to a fifth wider (digits, brackets): edge and cluster labels get that much room
FONT_SLACK = 1.2
GAP = 4  # between a label's text and the point of its line it is placed at
MIN_X, MIN_Y = 4.0, 4.0  # a label left of or above this would leave the drawing, which grows only right and down
ARROW_ROOM = 8  # above and below a box, where arrowheads and line ends crowd: a label there is a last resort
MAX_TRIES = 25  # spots tried along one line, both sides each


def label_span(at: Point, label: str, anchor: str = "start") -> Span:
    """The extent an edge label covers, as the renderers draw it: baseline 3 px below `at`, the text starting
    GAP px right of it ("start") or ending GAP px left of it ("end"), FONT_SLACK times its estimated width."""
    x, y = at
    width = text_width(label, EDGE_LABEL_SIZE) * FONT_SLACK
    left = x + GAP if anchor == "start" else x - GAP - width
    top = y + 3 - EDGE_LABEL_SIZE * 0.8
    return left, top, left + width, top + EDGE_LABEL_SIZE


def _meets(a: Span, b: Span) -> bool:
    """True when the interiors meet; touching sides do not."""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _crosses(segment: Span, span: Span) -> bool:
    """True when the segment (x0, y0, x1, y1) passes through the span's interior."""
    x0, y0, x1, y1 = segment
    if x0 == x1:  # most segments run straight down a layer
        return span[0] < x0 < span[2] and min(y0, y1) < span[3] and span[1] < max(y0, y1)
    if not (min(x0, x1) < span[2] and span[0] < max(x0, x1) and min(y0, y1) < span[3] and span[1] < max(y0, y1)):
        return False
    if y0 == y1:
        return True
    # a slanted line misses the span when all four corners lie on one side of it
    sides = [(x1 - x0) * (cy - y0) - (y1 - y0) * (cx - x0) for cx in (span[0], span[2]) for cy in (span[1], span[3])]
    return min(sides) < 0 < max(sides)


class _Grid:
    """Items with extents bucketed by 64-pixel cells, to find cheaply the ones near a span."""

    CELL = 64

    def __init__(self) -> None:
        self.cells: dict[tuple[int, int], list] = defaultdict(list)

    def _keys(self, span: Span) -> Iterator[tuple[int, int]]:
        c = self.CELL
        for i in range(int(span[0] // c), int(span[2] // c) + 1):
            for j in range(int(span[1] // c), int(span[3] // c) + 1):
                yield i, j

    def add(self, span: Span, item: object) -> None:
        c, cells, entry = self.CELL, self.cells, (span, item)
        for i in range(int(span[0] // c), int(span[2] // c) + 1):
            for j in range(int(span[1] // c), int(span[3] // c) + 1):
                cells[i, j].append(entry)

    def near(self, span: Span) -> Iterator[tuple[Span, object]]:
        for key in self._keys(span):
            yield from self.cells.get(key, ())


def along(points: tuple[Point, ...], fractions: Iterable[float]) -> list[Point]:
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


def _fractions(points: tuple[Point, ...]) -> list[float]:
    """Where along a line to try a label, from the middle outward: a spot every 10 px or so, at most MAX_TRIES."""
    total = sum(abs(x1 - x0) + abs(y1 - y0) for (x0, y0), (x1, y1) in zip(points, points[1:]))
    step = max(0.8 / (MAX_TRIES - 1), 10 / total) if total > 0 else 1.0
    out, k = [0.5], 1
    while k * step < 0.45:
        out += [0.5 - k * step, 0.5 + k * step]
        k += 1
    return out


class _Obstacles:
    """What a label must not meet (boxes, texts, labels placed), and what it had better not cross: other edges'
    lines, cluster borders, the arrowhead room above and below each box."""

    def __init__(self, boxes: Iterable[Span], texts: Iterable[Span], clusters: Iterable[Span], lines) -> None:
        self.hard, self.soft, self.lines = _Grid(), _Grid(), _Grid()
        for span in [*boxes, *texts]:
            self.hard.add(span, None)
        for left, top, right, bottom in boxes:
            self.soft.add((left, top - ARROW_ROOM, right, bottom + ARROW_ROOM), "inside")
        for span in clusters:
            self.soft.add(span, "border")
        for edge, points in enumerate(lines):
            for (x0, y0), (x1, y1) in zip(points, points[1:]):
                self.lines.add((min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)), (edge, (x0, y0, x1, y1)))

    def blocked(self, span: Span) -> bool:
        if span[0] < MIN_X or span[1] < MIN_Y:
            return True
        return any(_meets(span, other) for other, _ in self.hard.near(span))

    def cost(self, span: Span, edge: int, bound: int) -> int:
        """How many other lines, cluster borders and arrowhead rooms the span meets (counted up to `bound`)."""
        seen, total = set(), 0
        for _, (owner, segment) in self.lines.near(span):
            if owner != edge and segment not in seen and _crosses(segment, span):
                seen.add(segment)
                total += 1
                if total >= bound:
                    return total
        for other, kind in self.soft.near(span):
            if (other, kind) in seen or not _meets(span, other):
                continue
            seen.add((other, kind))
            inside = other[0] <= span[0] and other[1] <= span[1] and span[2] <= other[2] and span[3] <= other[3]
            total += 2 if kind == "inside" or not inside else 0
        return total


def place_labels(
    labels: list[str], lines: list[tuple[Point, ...]], boxes: list[Span], texts: list[Span], clusters: list[Span]
) -> tuple[list[tuple[Point, str]], int]:
    """Each edge's (point, anchor) for its label ("start": the text starts right of the point, "end": it ends
    left of it; the middle of the line for an edge with no label), and how many labels found no spot clear of
    boxes and texts (those sit at the middle of their line, over what is there)."""
    obstacles = _Obstacles(boxes, texts, clusters, lines)
    placed, crowded = [], 0
    for edge, (label, points) in enumerate(zip(labels, lines)):
        middle = along(points, (0.5,))[0]
        if not label:
            placed.append((middle, "start"))
            continue
        best, best_cost = None, None
        for at in along(points, _fractions(points)):
            for anchor in ("start", "end"):
                span = label_span(at, label, anchor)
                if obstacles.blocked(span):
                    continue
                cost = obstacles.cost(span, edge, 1 << 30 if best_cost is None else best_cost)
                if best_cost is None or cost < best_cost:
                    best, best_cost = (at, anchor), cost
                if cost == 0:
                    break
            if best_cost == 0:
                break
        if best is None:
            crowded += 1
            best = (middle, "start")
        obstacles.hard.add(label_span(best[0], label, best[1]), None)
        placed.append(best)
    return placed, crowded
