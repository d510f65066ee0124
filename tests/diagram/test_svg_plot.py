"""Rules for limn.diagram.svg (an SVG document) and limn.diagram.plot (a line chart on it).

The oracle for the chart is the SVG itself, parsed with xml.etree: the grid lines give each tick's pixel, the
tick labels its value, and every polyline point, mapped through the scale the two define, must land within
half a pixel of the data it stands for.
"""

import math
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from limn.diagram import plot, svg
from limn.diagram.plot import format_tick, line_chart, linear_ticks, log_ticks, nice_step

NS = "{http://www.w3.org/2000/svg}"
SUFFIX = {"k": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def parse(drawing: svg.Drawing) -> ET.Element:
    return ET.fromstring(drawing.to_string())


def series_groups(root: ET.Element) -> dict[str, ET.Element]:
    groups = [g for g in root.iter(f"{NS}g") if g.get("class") == "series"]
    return {g.find(f"{NS}title").text: g for g in groups}


def polyline_points(group: ET.Element) -> list[np.ndarray]:
    lines = group.findall(f"{NS}polyline")
    return [np.array([[float(c) for c in p.split(",")] for p in line.get("points").split()]) for line in lines]


def label_value(text: str) -> float:
    if text[-1] in SUFFIX:
        return float(text[:-1]) * SUFFIX[text[-1]]
    return float(text)


def axis_scale(root: ET.Element, axis: str, log: bool = False):
    """value -> pixel for one axis, from its grid lines (pixels) and tick labels (values), which come in the
    same order; a linear (or log10) map through the first and last tick."""
    grid = next(g for g in root.iter(f"{NS}g") if g.get("class") == "grid")
    if axis == "x":
        pixels = [float(line.get("x1")) for line in grid if line.get("x1") == line.get("x2")]
    else:
        pixels = [float(line.get("y1")) for line in grid if line.get("y1") == line.get("y2")]
    labels = [t.text for t in root.iter(f"{NS}text") if t.get("class") == f"tick {axis}"]
    values = [label_value(text) for text in labels]
    assert len(values) == len(pixels) >= 2, (labels, pixels)
    f = math.log10 if log else float
    (v0, p0), (v1, p1) = (values[0], pixels[0]), (values[-1], pixels[-1])
    return lambda v: p0 + (f(v) - f(v0)) / (f(v1) - f(v0)) * (p1 - p0)


def loss_curves(n_train=500, every=50):
    xs = np.arange(n_train) * 2048.0  # tokens seen
    train = 3.0 * np.exp(-xs / 3e5) + 1.2 + 0.02 * np.sin(xs / 1e4)
    val_x = xs[::every]
    return {"train": (xs, train), "validation": (val_x, 3.0 * np.exp(-val_x / 3e5) + 1.3)}


# ---- the document ----


def test_output_parses_as_svg_of_the_given_size():
    root = parse(line_chart(loss_curves(), title="loss", x_label="tokens seen", y_label="loss"))
    assert root.tag == f"{NS}svg"
    assert (root.get("width"), root.get("height"), root.get("viewBox")) == ("720", "420", "0 0 720 420")


def test_numbers_are_written_compactly():
    assert [svg.fmt(v) for v in (3.0, 2.5, 0.126, -0.004, 1234.5678, np.float32(1.5))] == [
        "3",
        "2.5",
        "0.13",
        "0",
        "1234.57",
        "1.5",
    ]
    d = svg.Drawing(10, 10)
    d.line(0, 0.5, 10.0, 7.25, stroke_width=np.float64(1.0))
    assert '<line x1="0" y1="0.5" x2="10" y2="7.25" stroke="#1f2328" stroke-width="1"/>' in d.to_string()


def test_attributes_and_text_are_escaped():
    tricky = 'a < b & "c"'
    d = svg.Drawing(100, 50)
    with d.group(title=tricky, class_=tricky):
        d.text(1, 20, tricky, data_note=tricky)
    root = parse(d)
    group = root.find(f"{NS}g")
    assert group.get("class") == tricky and group.find(f"{NS}title").text == tricky
    assert group.find(f"{NS}text").text == tricky and group.find(f"{NS}text").get("data-note") == tricky
    assert "a &lt; b &amp; " in d.to_string()


def test_chart_title_and_series_names_are_escaped():
    tricky = 'a < b & "c"'
    root = parse(line_chart({tricky: ([0, 1, 2], [1, 2, 3])}, title=tricky))
    assert [t.text for t in root.iter(f"{NS}text") if t.get("class") == "title"] == [tricky]
    assert list(series_groups(root)) == [tricky]


def test_groups_nest_and_close():
    d = svg.Drawing(100, 100)
    with d.group(class_="outer"):
        with d.group(title="inner"):
            d.circle(5, 5, 2)
        d.rect(0, 0, 1, 1)
    d.path("M 0 0 L 10 10")
    root = parse(d)
    outer = root.find(f"{NS}g")
    assert [child.tag for child in outer] == [f"{NS}g", f"{NS}rect"]
    assert outer.find(f"{NS}g/{NS}circle") is not None
    assert root[-1].tag == f"{NS}path" and root[-1].get("fill") == "none"


def test_save_writes_the_document(tmp_path):
    d = line_chart(loss_curves())
    path = d.save(tmp_path / "loss.svg")
    assert path.read_text() == d.to_string()
    assert os.listdir(tmp_path) == ["loss.svg"]


def test_a_failing_save_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "loss.svg"
    old = svg.Drawing(10, 10)
    old.save(path)

    def disk_full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(svg.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        line_chart(loss_curves()).save(path)
    assert path.read_text() == old.to_string()
    assert os.listdir(tmp_path) == ["loss.svg"]


def test_text_width_grows_with_length_and_font_size():
    assert svg.text_width("", 12) == 0
    assert svg.text_width("loss", 12) < svg.text_width("loss curve", 12)
    assert svg.text_width("loss", 24) == pytest.approx(2 * svg.text_width("loss", 12))
    assert svg.text_width("W", 12) > svg.text_width("i", 12)
    # Helvetica's digits are 0.556 em; a wide CJK character a full em
    assert svg.text_width("1000", 10) == pytest.approx(4 * 5.56)
    assert svg.text_width("損失", 10) == pytest.approx(20)


def test_themes_differ_and_unknown_names_say_which_exist():
    light, dark = svg.get_theme("light"), svg.get_theme("dark")
    assert light.background != dark.background and light.foreground != dark.foreground
    assert light.palette != dark.palette and len(set(light.palette)) == len(light.palette)
    backgrounds = {name: parse(line_chart(loss_curves(), theme=name))[0].get("fill") for name in ("light", "dark")}
    assert backgrounds == {"light": light.background, "dark": dark.background}
    with pytest.raises(ValueError, match=r"no theme named 'sepia'.*\['dark', 'light'\]"):
        line_chart(loss_curves(), theme="sepia")


# ---- the chart ----


@pytest.mark.parametrize("log_y", [False, True])
def test_one_polyline_per_series_whose_points_map_back_to_the_data(log_y):
    curves = loss_curves()
    root = parse(line_chart(curves, log_y=log_y, x_label="tokens seen", y_label="loss"))
    x_pixel, y_pixel = axis_scale(root, "x"), axis_scale(root, "y", log=log_y)
    assert x_pixel(2e5) > x_pixel(1e5) and y_pixel(2.0) < y_pixel(1.5)  # x grows rightward, y upward
    groups = series_groups(root)
    assert list(groups) == list(curves)
    for name, (xs, ys) in curves.items():
        (points,) = polyline_points(groups[name])
        expected = np.array([[x_pixel(x), y_pixel(y)] for x, y in zip(xs, ys)])
        assert points.shape == expected.shape
        assert np.abs(points - expected).max() < 0.5, name


def test_ticks_cover_the_data_and_lie_within_the_drawing():
    curves = loss_curves()
    root = parse(line_chart(curves))
    all_ys = np.concatenate([ys for _, ys in curves.values()])
    for axis, values in (("x", curves["train"][0]), ("y", all_ys)):
        ticks = [label_value(t.text) for t in root.iter(f"{NS}text") if t.get("class") == f"tick {axis}"]
        assert ticks[0] <= values.min() and ticks[-1] >= values.max(), (axis, ticks)
    for text in root.iter(f"{NS}text"):
        x = float(text.get("x"))
        assert 0 <= x <= 720 and 0 <= float(text.get("y")) <= 420, text.text


@pytest.mark.parametrize("lo, hi", [(0.13, 0.92), (2.1, 3.5), (0, 2_000_000), (-7.5, 0.01), (1e-6, 3e-6), (5, 5)])
def test_linear_ticks_are_1_2_5_steps_covering_the_range(lo, hi):
    ticks, step = linear_ticks(lo, hi, target=6)
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert min(abs(mantissa - m) for m in (1, 2, 5)) < 1e-9, step
    assert ticks[0] <= lo and ticks[-1] >= hi and len(ticks) >= 2
    assert all(abs(t / step - round(t / step)) < 1e-6 for t in ticks), ticks
    assert np.allclose(np.diff(ticks), step)
    if lo < hi:
        assert ticks[1] > lo and ticks[-2] < hi  # no tick wasted beyond the data


def test_nice_step_picks_the_smallest_1_2_5_step_for_the_target():
    assert [nice_step(10, 5), nice_step(11, 5), nice_step(0.7, 6), nice_step(2e6, 6)] == [2, 5, 0.2, 500_000]


@pytest.mark.parametrize("lo, hi", [(0.02, 300), (1e-12, 1e3), (0.5, 20), (2.1, 3.5), (1, 1)])
def test_log_ticks_are_decades_or_1_2_5_covering_the_range(lo, hi):
    ticks = log_ticks(lo, hi)
    assert ticks[0] <= lo and ticks[-1] >= hi and len(ticks) >= 2
    mantissas = [t / 10 ** math.floor(math.log10(t) + 1e-9) for t in ticks]
    if math.log10(hi / lo) > 2:
        assert all(abs(m - 1) < 1e-9 for m in mantissas), ticks
    else:
        assert all(abs(m - round(m)) < 1e-9 for m in mantissas), ticks


def test_tick_labels_are_compact_and_tell_neighbours_apart():
    assert format_tick(1000, 500, compact=True) == "1k"
    assert format_tick(2_500_000, 500_000, compact=True) == "2.5M"
    assert format_tick(3e9, 1e9, compact=True) == "3B"
    assert format_tick(3.14159, 0.5) == "3.14" and format_tick(0.0123456, 0.01) == "0.0123"
    labels = [format_tick(t, 0.001) for t in linear_ticks(2.001, 2.009)[0]]
    assert len(set(labels)) == len(labels), labels


def test_chart_x_labels_are_compact():
    root = parse(line_chart(loss_curves()))
    labels = [t.text for t in root.iter(f"{NS}text") if t.get("class") == "tick x"]
    assert labels[0] == "0" and labels[-1] == "1.2M", labels


def test_legend_lists_every_series_name():
    names = ["train", "validation", "train (ema)", "a much longer name that wraps"]
    series = {name: ([0, 1, 2], [3 - i, 2, 1]) for i, name in enumerate(names)}
    root = parse(line_chart(series, width=400))
    legend = next(g for g in root.iter(f"{NS}g") if g.get("class") == "legend")
    assert [t.text for t in legend.iter(f"{NS}text")] == names


def test_a_nan_splits_the_line_and_a_lone_point_gets_a_marker():
    xs = np.arange(200.0)
    ys = np.linspace(3, 1, 200)
    ys[[50, 52]] = np.nan  # runs 0..49, 51 alone, 53..199
    ys[120] = np.inf
    root = parse(line_chart({"train": (xs, ys)}))
    lines = polyline_points(series_groups(root)["train"])
    assert [len(points) for points in lines] == [50, 67, 79]
    markers = series_groups(root)["train"].findall(f"{NS}circle")
    assert len(markers) == 1 and float(markers[0].get("cx")) == pytest.approx(axis_scale(root, "x")(51), abs=0.5)


def test_markers_on_a_series_of_few_points_only():
    groups = series_groups(parse(line_chart(loss_curves(n_train=500, every=50))))
    assert len(groups["validation"].findall(f"{NS}circle")) == 10
    assert groups["train"].findall(f"{NS}circle") == []


def test_a_series_of_one_point_is_drawn_as_a_marker():
    root = parse(line_chart({"val": ([100], [2.5])}))
    group = series_groups(root)["val"]
    assert group.findall(f"{NS}polyline") == [] and len(group.findall(f"{NS}circle")) == 1


# ---- bad input ----


@pytest.mark.parametrize(
    "series, kwargs, message",
    [
        ({}, {}, r"at least one series, got an empty mapping"),
        ({"train": ([1, 2, 3], [1, 2])}, {}, r"'train' has 3 xs and 2 ys; give one y per x"),
        ({"train": ([1, 2], [math.nan, math.inf])}, {}, r"no point with a finite x and y.*'train': 2 points"),
        ({"val": ([1, 2], [0.5, -1.0])}, {"log_y": True}, r"log_y needs every y > 0.*'val' has y=-1.0 at x=2.0"),
        ({"train": ([1, 2], ["a", "b"])}, {}, r"'train': ys must be numbers"),
        ({"train": (np.zeros((2, 2)), np.zeros((2, 2)))}, {}, r"'train': xs must be one-dimensional.*\(2, 2\)"),
        ({"train": ([1, 2], [1, 2])}, {"width": 60}, r"a 60 x 420 chart leaves a plot of .* make it larger"),
    ],
)
def test_bad_input_says_what_was_given(series, kwargs, message):
    with pytest.raises(ValueError, match=message):
        line_chart(series, **kwargs)


def test_a_series_that_is_not_a_pair_is_a_type_error():
    with pytest.raises(TypeError, match=r"series 'train' must be a pair \(xs, ys\)"):
        line_chart({"train": [1.0, 2.0, 3.0]})
    with pytest.raises(TypeError, match="a mapping of name -> \\(xs, ys\\), got a list"):
        line_chart([([1], [2])])


def test_a_drawing_needs_a_positive_size():
    with pytest.raises(ValueError, match="positive, finite width and height, got 0 x 10"):
        svg.Drawing(0, 10)


def test_import_limn_does_not_import_svg_or_plot():
    code = textwrap.dedent(
        """
        import sys
        import limn
        print(sorted(m for m in ("limn.diagram.svg", "limn.diagram.plot") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert plot.Drawing is svg.Drawing  # and, asked for, the chart is built on the document
