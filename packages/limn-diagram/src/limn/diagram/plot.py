"""A line chart drawn by limn itself: loss curves (train, validation) against tokens seen, as an svg.Drawing.

line_chart takes named series of (xs, ys) and gives a Drawing with axes on "nice" ticks (1, 2 or 5 x 10^k;
decades on a log y axis), tick labels written compactly (2.5M tokens, a loss of 3.14), a grid, a legend, and
circle markers on a series of few points. A point whose y is NaN or infinite is a gap: the line breaks there.
Pipeline: training logs (xs, ys per series) -> **plot.line_chart** -> svg.Drawing -> loss.svg.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from limn.diagram.svg import Drawing, Theme, text_width

# a series of at most this many finite points gets a marker on each (a validation loss measured every N steps)
MARKER_LIMIT = 40

PAD = 12  # pixels between the drawing's edge and anything on it
TITLE_SIZE, LABEL_SIZE, TICK_SIZE, LEGEND_SIZE = 15, 12, 11, 12
_SUFFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))  # B, not G: "1.5B tokens" is how it is said


@dataclass(frozen=True)
class Series:
    """One named curve: its xs and ys as float64 arrays of one length; `finite` marks the points drawn."""

    name: str
    xs: np.ndarray
    ys: np.ndarray

    @property
    def finite(self) -> np.ndarray:
        return np.isfinite(self.xs) & np.isfinite(self.ys)


@dataclass(frozen=True)
class Axis:
    """A data interval [lo, hi] mapped onto the pixels [start, end] (end < start for a y axis, which grows
    upward), linearly or in log10, with the tick values on it and the step their labels are written to."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool
    ticks: tuple[float, ...]
    step: float | None  # the spacing of linear ticks; None on a log axis, where each tick is its own decade

    def to_pixel(self, value: float) -> float:
        f = math.log10 if self.log else float
        t = (f(value) - f(self.lo)) / (f(self.hi) - f(self.lo))
        return self.start + t * (self.end - self.start)

    def label(self, value: float, compact: bool) -> str:
        return _tick_label(value, self.step, compact)


# ---- ticks ----


def nice_step(span: float, target: int) -> float:
    """The smallest of 1, 2, 5 x 10^k at least span / target: about `target` ticks over `span`.

    >>> nice_step(10, 5), nice_step(3.5, 6), nice_step(1_000_000, 4)
    (2, 1, 500000)
    """
    raw = span / max(target, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for mantissa in (1, 2, 5, 10):
        if mantissa * magnitude >= raw:
            step = mantissa * magnitude
            return int(step) if step >= 1 and step == int(step) else step
    raise AssertionError(f"no 1-2-5 step covers {raw} (magnitude {magnitude})")


def linear_ticks(lo: float, hi: float, target: int = 6) -> tuple[list[float], float]:
    """Ticks every nice_step from a multiple of it at or below lo to one at or above hi, and the step.

    >>> linear_ticks(0.13, 0.92, 5)
    ([0.0, 0.2, 0.4, 0.6, 0.8, 1.0], 0.2)
    """
    if hi == lo:  # one value: a window around it, so that it sits mid-axis
        lo, hi = lo - (abs(lo) * 0.1 or 1.0), hi + (abs(hi) * 0.1 or 1.0)
    step = nice_step(hi - lo, target)
    first, last = math.floor(lo / step), math.ceil(hi / step)
    # lo / step rounds; step back one tick where the rounding put the end inside the data
    while first * step > lo:
        first -= 1
    while last * step < hi:
        last += 1
    # i * step is 0.6000000000000001 for 3 * 0.2; twelve significant digits give the 0.6 that was meant
    return [float(f"{i * step:.12g}") for i in range(first, last + 1)], step


def log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks on a log axis, from the largest at or below lo to the smallest at or above hi (lo, hi > 0): decades
    (every n-th past eight of them); 1, 2, 5 in each decade across two decades or less; 1 to 9 under half of one.

    >>> log_ticks(0.02, 300)
    [0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]
    >>> log_ticks(2.1, 3.5)
    [2.0, 3.0, 4.0]
    """
    a, b = math.log10(lo), math.log10(hi)
    if b - a > 2:
        k0, k1 = math.floor(a), math.ceil(b)
        every = max(1, math.ceil((k1 - k0) / 8))
        return [10.0**k for k in range(k0, k1 + every, every)]  # the last is the first at or past k1
    mantissas = (1, 2, 5) if b - a > 0.5 else (1, 2, 3, 4, 5, 6, 7, 8, 9)
    candidates = [m * 10.0**k for k in range(math.floor(a) - 1, math.ceil(b) + 2) for m in mantissas]
    below = max(i for i, c in enumerate(candidates) if c <= lo)
    above = min(i for i, c in enumerate(candidates) if c >= hi)
    if below == above:  # one value that is itself a tick: its neighbours bound the axis
        below, above = below - 1, above + 1
    return [float(c) for c in candidates[below : above + 1]]


def format_tick(value: float, step: float, compact: bool = False) -> str:
    """A tick label: three significant digits, more where the ticks' step needs them to tell neighbours apart;
    `compact` writes thousands as k, millions as M, billions as B, trillions as T.

    >>> format_tick(2_500_000, 500_000, compact=True), format_tick(1000, 200, compact=True)
    ('2.5M', '1k')
    >>> format_tick(3.14159, 0.5), format_tick(0.001, 0.001), format_tick(10_010, 10)
    ('3.14', '0.001', '10010')
    """
    if value == 0:
        return "0"
    digits = max(3, _order(value) - _order(step) + 1)
    if compact:
        for scale, suffix in _SUFFIXES:
            if abs(value) >= scale:
                return _significant(value / scale, digits) + suffix
    return _significant(value, digits)


def _tick_label(value: float, step: float | None, compact: bool) -> str:
    """A linear axis's label to its step; a log axis's (step None) to the tick itself, its own decade."""
    return format_tick(value, step if step is not None else value, compact)


def _order(value: float) -> int:
    return math.floor(math.log10(abs(value)))


def _significant(value: float, digits: int) -> str:
    """`value` to `digits` significant digits, trailing zeros dropped: plain from 1e-4 up to a million, where
    a label stays short, and as 1e-5 or 2.5e7 (not 1e-05, 2.5e+07) outside that."""
    if 1e-4 <= abs(value) < 1e6:
        text = f"{value:.{max(0, digits - 1 - _order(value))}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    text = f"{value:.{digits}g}"
    if "e" not in text:  # as many digits as the number has: 1234567 to 7 digits
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}e{int(exponent)}"


# ---- input ----


def _as_series(series: Mapping[str, tuple[Sequence[float], Sequence[float]]], log_y: bool) -> list[Series]:
    """Checks the mapping and each (xs, ys) pair, and returns them as float64 Series."""
    if not isinstance(series, Mapping):
        raise TypeError(f"line_chart takes a mapping of name -> (xs, ys), got a {type(series).__name__}")
    if not series:
        raise ValueError("line_chart needs at least one series, got an empty mapping; pass {'train': (xs, ys)}")
    out = []
    for name, pair in series.items():
        try:
            xs_given, ys_given = pair
        except (TypeError, ValueError):
            raise TypeError(f"series {name!r} must be a pair (xs, ys), got {pair!r:.80}") from None
        xs, ys = _floats(name, "xs", xs_given), _floats(name, "ys", ys_given)
        if len(xs) != len(ys):
            raise ValueError(f"series {name!r} has {len(xs)} xs and {len(ys)} ys; give one y per x")
        out.append(Series(str(name), xs, ys))
    if not any(s.finite.any() for s in out):
        counts = ", ".join(f"{s.name!r}: {len(s.xs)} points" for s in out)
        raise ValueError(f"line_chart has no point with a finite x and y to draw ({counts}); nothing to plot")
    if log_y:
        for s in out:
            bad = s.finite & (s.ys <= 0)
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(
                    f"log_y needs every y > 0, but series {s.name!r} has y={float(s.ys[i])!r} at x={float(s.xs[i])!r} "
                    f"({int(bad.sum())} such points); pass log_y=False, or drop or clip those points"
                )
    return out


def _floats(name: str, which: str, values: Sequence[float]) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"series {name!r}: {which} must be numbers, got {values!r:.80} ({e})") from None
    if array.ndim != 1:
        raise ValueError(f"series {name!r}: {which} must be one-dimensional, got shape {array.shape}")
    return array


# ---- layout ----


@dataclass(frozen=True)
class _Legend:
    rows: list[list[tuple[str, float]]]  # per row, each entry's name and the x where its swatch starts
    top: float


def _legend(names: list[str], left: float, right: float, top: float) -> _Legend:
    """The legend's entries in rows above the plot, wrapped to its width (so it never covers a line)."""
    rows: list[list[tuple[str, float]]] = [[]]
    x = left
    for name in names:
        width = 22 + text_width(name, LEGEND_SIZE) + 18  # swatch, label, gap before the next
        if rows[-1] and x + width - 18 > right:
            rows.append([])
            x = left
        rows[-1].append((name, x))
        x += width
    return _Legend(rows, top)


def _range(values: list[np.ndarray]) -> tuple[float, float]:
    finite = np.concatenate(values)
    return float(finite.min()), float(finite.max())


def _axes(
    data: list[Series], log_y: bool, width: float, height: float, title: str, x_label: str, y_label: str
) -> tuple[Axis, Axis, _Legend]:
    """The x and y Axis and the legend: margins sized from the estimated widths of the labels around the plot."""
    x_lo, x_hi = _range([s.xs[s.finite] for s in data])
    y_lo, y_hi = _range([s.ys[s.finite] for s in data])
    x_ticks, x_step = linear_ticks(x_lo, x_hi, target=max(2, round(width / 110)))
    if log_y:
        y_ticks, y_step = log_ticks(y_lo, y_hi), None
    else:
        y_ticks, y_step = linear_ticks(y_lo, y_hi, target=max(2, round(height / 70)))
    # the plot's edges: past the y tick labels on the left, and far enough in that the first and last x tick
    # labels, centred on the plot's two ends, stay on the drawing
    y_label_width = max(text_width(_tick_label(t, y_step, compact=False), TICK_SIZE) for t in y_ticks)
    x_end_widths = [text_width(_tick_label(t, x_step, compact=True), TICK_SIZE) for t in (x_ticks[0], x_ticks[-1])]
    left = max(PAD + (LABEL_SIZE + 8 if y_label else 0) + y_label_width + 8, PAD + x_end_widths[0] / 2)
    right = width - PAD - x_end_widths[1] / 2
    legend = _legend([s.name for s in data], left, right, PAD + (TITLE_SIZE + 10 if title else 0))
    top = legend.top + 18 * len(legend.rows) + 6
    bottom = height - PAD - (LABEL_SIZE + 8 if x_label else 0) - TICK_SIZE - 8
    if right - left < 40 or bottom - top < 40:
        raise ValueError(
            f"a {width} x {height} chart leaves a plot of {right - left:.0f} x {bottom - top:.0f} pixels once its "
            "labels are placed; make it larger (the default is 720 x 420)"
        )
    x_axis = Axis(x_ticks[0], x_ticks[-1], left, right, False, tuple(x_ticks), x_step)
    y_axis = Axis(y_ticks[0], y_ticks[-1], bottom, top, log_y, tuple(y_ticks), y_step)
    return x_axis, y_axis, legend


# ---- drawing ----


def line_chart(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str = "",
    x_label: str = "",
    y_label: str = "",
    log_y: bool = False,
    theme: str | Theme = "light",
    width: float = 720,
    height: float = 420,
) -> Drawing:
    """A line chart of `series`, a mapping of name -> (xs, ys) (sequences or numpy arrays of one length), as a
    Drawing to save or to add to. Points with a NaN or infinite y (or x) are gaps in their line; a series of at
    most MARKER_LIMIT finite points also gets a marker on each. x tick labels are compact (tokens seen: 1k,
    2.5M); y labels have three significant digits; log_y puts y on a log scale, which needs every y > 0.

    Each series is a <g class="series"> whose title (a hover tooltip) is its name, holding one polyline per
    unbroken run of points. Raises ValueError for no series, xs and ys of different lengths, no finite point,
    or log_y over a y <= 0.

    >>> chart = line_chart({"train": ([0, 1000, 2000], [3.2, 2.1, 1.7])}, title="loss", x_label="tokens")
    >>> chart.to_string().count("<polyline"), "2k" in chart.to_string()
    (1, True)
    """
    data = _as_series(series, log_y)
    drawing = Drawing(width, height, theme=theme)
    x_axis, y_axis, legend = _axes(data, log_y, width, height, title, x_label, y_label)
    _draw_grid(drawing, x_axis, y_axis)
    for index, s in enumerate(data):
        _draw_series(drawing, s, x_axis, y_axis, drawing.theme.series_colour(index))
    _draw_labels(drawing, x_axis, y_axis, title, x_label, y_label)
    _draw_legend(drawing, legend, data)
    return drawing


def _draw_grid(drawing: Drawing, x_axis: Axis, y_axis: Axis) -> None:
    """A grid line at every tick, then the two axes over them."""
    grid = drawing.theme.grid
    with drawing.group(class_="grid", stroke=grid, stroke_width=1):
        for t in x_axis.ticks:
            x = x_axis.to_pixel(t)
            drawing.line(x, y_axis.start, x, y_axis.end, stroke=grid)
        for t in y_axis.ticks:
            y = y_axis.to_pixel(t)
            drawing.line(x_axis.start, y, x_axis.end, y, stroke=grid)
    with drawing.group(class_="axes", stroke_width=1):
        muted = drawing.theme.muted
        drawing.line(x_axis.start, y_axis.start, x_axis.end, y_axis.start, stroke=muted)
        drawing.line(x_axis.start, y_axis.start, x_axis.start, y_axis.end, stroke=muted)


def _draw_series(drawing: Drawing, s: Series, x_axis: Axis, y_axis: Axis, colour: str) -> None:
    """One polyline per run of finite points, a marker on each point of a short series and on a lone point
    (a run of one, which a polyline cannot show)."""
    finite = s.finite
    markers = int(finite.sum()) <= MARKER_LIMIT
    with drawing.group(title=s.name, class_="series"):
        for run in _runs(finite):
            points = [(x_axis.to_pixel(s.xs[i]), y_axis.to_pixel(s.ys[i])) for i in run]
            if len(points) > 1:
                drawing.polyline(points, stroke=colour, stroke_width=1.8, stroke_linejoin="round")
            if markers or len(points) == 1:
                for x, y in points:
                    drawing.circle(x, y, 3, fill=colour, class_="marker")


def _runs(finite: np.ndarray) -> list[range]:
    """The index ranges of consecutive True values: [F, T, T, F, T] -> [range(1, 3), range(4, 5)]."""
    edges = np.flatnonzero(np.diff(np.concatenate([[False], finite, [False]]).astype(np.int8)))
    return [range(int(start), int(stop)) for start, stop in zip(edges[::2], edges[1::2])]


def _draw_labels(drawing: Drawing, x_axis: Axis, y_axis: Axis, title: str, x_label: str, y_label: str) -> None:
    """Tick labels under and beside the axes, the axis labels, and the title."""
    muted, foreground = drawing.theme.muted, drawing.theme.foreground
    tick_y = y_axis.start + 6 + TICK_SIZE
    for t in x_axis.ticks:
        label = x_axis.label(t, compact=True)
        drawing.text(x_axis.to_pixel(t), tick_y, label, TICK_SIZE, "middle", fill=muted, class_="tick x")
    for t in y_axis.ticks:
        label = y_axis.label(t, compact=False)
        y = y_axis.to_pixel(t) + 0.35 * TICK_SIZE  # a baseline that centres the digits on the grid line
        drawing.text(x_axis.start - 6, y, label, TICK_SIZE, "end", fill=muted, class_="tick y")
    if x_label:
        x = (x_axis.start + x_axis.end) / 2
        drawing.text(x, drawing.height - PAD, x_label, LABEL_SIZE, "middle", fill=foreground, class_="label x")
    if y_label:
        x, y = PAD + LABEL_SIZE, (y_axis.start + y_axis.end) / 2
        rotate = f"rotate(-90 {x:.2f} {y:.2f})"
        drawing.text(x, y, y_label, LABEL_SIZE, "middle", fill=foreground, transform=rotate, class_="label y")
    if title:
        drawing.text(x_axis.start, PAD + TITLE_SIZE, title, TITLE_SIZE, font_weight="bold", class_="title")


def _draw_legend(drawing: Drawing, legend: _Legend, data: list[Series]) -> None:
    """Each series' colour (a short line, and a dot where the series has markers) beside its name."""
    colours = {s.name: drawing.theme.series_colour(i) for i, s in enumerate(data)}
    marked = {s.name for s in data if int(s.finite.sum()) <= MARKER_LIMIT}
    with drawing.group(class_="legend"):
        for row_index, row in enumerate(legend.rows):
            y = legend.top + 18 * row_index + 9
            for name, x in row:
                drawing.line(x, y, x + 16, y, stroke=colours[name], stroke_width=2.5)
                if name in marked:
                    drawing.circle(x + 8, y, 3, fill=colours[name])
                drawing.text(x + 22, y + 0.35 * LEGEND_SIZE, name, LEGEND_SIZE, class_="legend-label")
