"""A diagram's SVG as a real browser draws it: headless Chromium screenshots it, and the pixels must show it.

The oracle is the SVG's own geometry, parsed back with xml.etree: inside each box's text lines (where the SVG
puts them, as wide as svg.text_width estimates) the screenshot has ink, darker than the box's fill in the light
theme and lighter in the dark one; the box's fill shows inside its rect; and pixels far from every shape stay
the background colour. The PNG is decoded here (zlib and numpy, filter types 0 to 4), not with an image library.
Run by `nox -s browser`, which installs Debian's chromium where it is missing.
"""

import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import numpy as np
import pytest

from limn.diagram.graph import Box, Cluster, Edge, Graph
from limn.diagram.layout import BOLD_WIDTH
from limn.diagram.svg import text_width

needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")

NS = "{http://www.w3.org/2000/svg}"
FAR = 14  # pixels: a background pixel this far from every shape must be untouched (antialiasing stays closer)


# ---- a PNG decoder: just what a browser screenshot needs ----


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _unfilter_row(kind: int, row: np.ndarray, above: np.ndarray, bpp: int) -> np.ndarray:
    """One scanline's bytes with its PNG filter undone (RFC 2083 section 6): each byte was stored as its
    difference from a predictor made of the byte to its left (a), above (b) and above-left (c)."""
    if kind not in (0, 1, 2, 3, 4):
        raise ValueError(f"PNG filter type {kind} is not one of 0-4; the file is corrupt")
    if kind == 0:
        return row
    if kind == 2:
        return ((row.astype(np.int32) + above) % 256).astype(np.uint8)
    if kind == 1:  # the byte bpp to the left is already decoded: a running sum per channel
        pixels = row.reshape(-1, bpp).astype(np.int64)
        return (np.cumsum(pixels, axis=0) % 256).astype(np.uint8).reshape(-1)
    out = [0] * len(row)
    raw, up = row.tolist(), above.tolist()
    for i in range(len(raw)):
        a = out[i - bpp] if i >= bpp else 0
        c = up[i - bpp] if i >= bpp else 0
        predictor = (a + up[i]) // 2 if kind == 3 else _paeth(a, up[i], c)
        out[i] = (raw[i] + predictor) % 256
    return np.array(out, dtype=np.uint8)


def decode_png(data: bytes) -> np.ndarray:
    """An 8-bit RGB or RGBA, non-interlaced PNG as a (height, width, 3) uint8 array (alpha dropped)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, f"unsupported PNG: depth {depth}, colour {colour}"
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(height, 1 + width * bpp)
    rows, above = [], np.zeros(width * bpp, dtype=np.uint8)
    for line in raw:
        above = _unfilter_row(int(line[0]), line[1:], above, bpp)
        rows.append(above)
    return np.stack(rows).reshape(height, width, bpp)[:, :, :3]


def test_png_decoder_undoes_every_filter_type():
    """Oracle: an image encoded here with each filter type in turn (rows 0-4) decodes to itself."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    width, bpp = 7, 3
    encoded, above = [], np.zeros(width * bpp, dtype=np.int64)
    for kind, row in enumerate(image.reshape(5, -1).astype(np.int64)):
        left = np.concatenate([np.zeros(bpp, dtype=np.int64), row[:-bpp]])
        upper_left = np.concatenate([np.zeros(bpp, dtype=np.int64), above[:-bpp]])
        predictor = [
            np.zeros_like(row),
            left,
            above,
            (left + above) // 2,
            np.array([_paeth(a, b, c) for a, b, c in zip(left, above, upper_left)]),
        ][kind]
        encoded.append(bytes([kind]) + ((row - predictor) % 256).astype(np.uint8).tobytes())
        above = row
    ihdr = struct.pack(">IIBBBBB", width, 5, 8, 2, 0, 0, 0)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"".join(encoded)))
    assert np.array_equal(decode_png(png + chunk(b"IEND", b"")), image)


# ---- the screenshot ----


def small_graph() -> Graph:
    boxes = [
        Box("x", "LOAD", "float32[4, 5]", "source"),
        Box("max", "MAX", "float32[4, 1]", "reduce"),
        Box("exp", "EXP", "float32[4, 5]", "elementwise"),
        Box("sum", "SUM", "float32[4, 1]", "reduce"),
        Box("out", "DIV", "float32[4, 5]", "elementwise"),
    ]
    edges = [
        Edge("x", "max", "float32[4, 5]"),
        Edge("x", "exp"),
        Edge("max", "exp", kind="buffer"),
        Edge("exp", "sum"),
        Edge("exp", "out"),
        Edge("sum", "out", "float32[4, 1]", kind="buffer"),
    ]
    return Graph(boxes, edges, [Cluster("k1", "k1 SUM loop[4, 5]", ["exp", "sum"])], title="softmax")


def rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.int32)


def luminance(pixels: np.ndarray) -> np.ndarray:
    return pixels[..., 0] * 0.299 + pixels[..., 1] * 0.587 + pixels[..., 2] * 0.114


def screenshot(svg: str, width: int, height: int, tmp_path) -> np.ndarray:
    path = tmp_path / "diagram.svg"
    path.write_text(svg)
    command = [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--screenshot={tmp_path / 'out.png'}",
        f"--window-size={width},{height}",
        path.as_uri(),
    ]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and (tmp_path / "out.png").exists(), done.stderr[-2000:]
    image = decode_png((tmp_path / "out.png").read_bytes()).astype(np.int32)
    assert image.shape[:2] == (height, width), image.shape
    return image


def shape_boxes(root: ET.Element):
    """(x0, y0, x1, y1) of every shape the SVG draws but its background: rects, polylines, texts."""
    for rect in list(root.iter(f"{NS}rect"))[1:]:
        x, y, w, h = (float(rect.get(k)) for k in ("x", "y", "width", "height"))
        yield x, y, x + w, y + h
    for line in root.iter(f"{NS}polyline"):
        points = np.array([[float(c) for c in p.split(",")] for p in line.get("points").split()])
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            yield min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)
    for text in root.iter(f"{NS}text"):
        yield text_extent(text)


def text_extent(text: ET.Element) -> tuple[float, float, float, float]:
    """Where a text line's glyphs are estimated to be: text_width wide (wider for bold, as the layout sizes
    it) about its anchor, from cap height above the baseline to the descent below."""
    size, x, baseline = (float(text.get(k)) for k in ("font-size", "x", "y"))
    width = text_width(text.text, size) * (BOLD_WIDTH if text.get("font-weight") == "bold" else 1.0)
    left = {"middle": x - width / 2, "end": x - width}.get(text.get("text-anchor"), x)
    return left, baseline - 0.72 * size, left + width, baseline + 0.2 * size


@pytest.mark.browser
@needs_chromium
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_chromium_draws_every_box_its_labels_and_nothing_far_from_the_shapes(theme, tmp_path):
    svg = small_graph().to_svg(theme)
    root = ET.fromstring(svg)
    width, height = (int(float(root.get(k))) + 1 for k in ("width", "height"))
    background_rect = root.find(f"{NS}rect")
    assert background_rect.get("width") == root.get("width") and background_rect.get("height") == root.get("height")
    background = rgb(background_rect.get("fill"))
    if theme == "light":
        assert background.tolist() == [255, 255, 255]
    image = screenshot(svg, width + 40, height + 40, tmp_path)

    ink_seen = np.abs(image - background).sum(axis=2) > 60
    assert ink_seen.mean() > 0.02, f"the screenshot is almost all background ({ink_seen.mean():.1%} ink)"

    boxes = [g for g in root.iter(f"{NS}g") if (g.get("class") or "").startswith("box")]
    assert len(boxes) == len(small_graph().boxes)
    for g in boxes:
        rect = g.find(f"{NS}rect")
        x, y, w, h = (float(rect.get(k)) for k in ("x", "y", "width", "height"))
        fill = rgb(rect.get("fill"))
        # the fill shows in the box: the strip between its top border and its label
        strip = image[int(y) + 3 : int(y) + 5, int(x) + 8 : int(x + w) - 8]
        assert np.abs(strip - fill).max() <= 6, (g.get("data-id"), strip.reshape(-1, 3)[:3], fill)
        for text in g.findall(f"{NS}text"):
            x0, y0, x1, y1 = text_extent(text)
            area = image[int(y0) : int(y1) + 1, int(x0) : int(x1) + 1]
            contrast = luminance(area) - luminance(fill)
            ink = (contrast < -60) if theme == "light" else (contrast > 60)
            assert ink.sum() >= 4 * len(text.text), (g.get("data-id"), text.text, int(ink.sum()))

    far = np.ones((height - 1, width - 1), dtype=bool)
    for x0, y0, x1, y1 in shape_boxes(root):
        far[max(0, int(y0) - FAR) : int(y1) + FAR + 1, max(0, int(x0) - FAR) : int(x1) + FAR + 1] = False
    assert far.sum() > 2000, "too little empty space in the drawing for the background check to mean anything"
    stray = np.abs(image[: height - 1, : width - 1] - background).max(axis=2)[far]
    assert stray.max() <= 3, f"{int((stray > 3).sum())} pixels far from every shape are not the background"
