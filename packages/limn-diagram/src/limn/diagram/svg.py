"""An SVG document: a Drawing of rects, lines, polylines, circles, paths and text, in groups, with a theme.

It takes shapes in pixel coordinates and gives the SVG text (to_string) or a file written atomically (save).
Attribute values and text are escaped, numbers are written with at most two decimals, and text_width
estimates how wide a label will render so that callers can size boxes before drawing them. Pure stdlib.
Pipeline: values (loss curves, a graph's layout) -> limn.diagram.plot / a diagram -> **svg.Drawing** -> .svg file.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from limn.atomic_write import write_atomically

Point = tuple[float, float]


@dataclass(frozen=True)
class Theme:
    """The colours of a drawing: its background, its ink (foreground), a softer ink for secondary text and
    axes (muted), the grid, and a palette of series colours chosen to stay distinguishable (Okabe and Ito's
    colour-blind-safe set, lightened for the dark theme)."""

    name: str
    background: str
    foreground: str
    muted: str
    grid: str
    palette: tuple[str, ...]
    font_family: str = "Helvetica, Arial, sans-serif"

    def series_colour(self, index: int) -> str:
        """The palette colour for the index-th series, cycling when there are more series than colours."""
        return self.palette[index % len(self.palette)]


LIGHT = Theme(
    name="light",
    background="#ffffff",
    foreground="#1f2328",
    muted="#57606a",
    grid="#e1e4e8",
    palette=("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"),
)
DARK = Theme(
    name="dark",
    background="#0d1117",
    foreground="#e6edf3",
    muted="#8b949e",
    grid="#30363d",
    palette=("#56b4e9", "#e69f00", "#3fcf9f", "#e08cc4", "#f0e442", "#ff8a4c", "#ffffff"),
)
THEMES = {theme.name: theme for theme in (LIGHT, DARK)}


def get_theme(theme: str | Theme) -> Theme:
    """A Theme by name ("light", "dark"), or the Theme given.

    >>> get_theme("dark").background
    '#0d1117'
    """
    if isinstance(theme, Theme):
        return theme
    if theme not in THEMES:
        raise ValueError(f"no theme named {theme!r}; the themes are {sorted(THEMES)}, or pass a svg.Theme")
    return THEMES[theme]


def fmt(value: float) -> str:
    """A number as SVG wants it, compactly: at most two decimals (a hundredth of a pixel), no trailing zeros.

    >>> fmt(3.0), fmt(0.125), fmt(-0.001), fmt(1e6)
    ('3', '0.12', '0', '1000000')
    """
    if not math.isfinite(value):
        raise ValueError(f"an SVG coordinate must be finite, got {value!r}")
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


# Helvetica's advance widths in thousandths of an em (its AFM metrics), grouped by width. Arial shares them,
# so for the default font family this is within a few percent of what a browser renders; for another font it
# is an estimate. Characters not listed count as a digit's 556, wide East Asian ones as a full em.
_WIDTHS_BY_GROUP = {
    191: "'",
    222: "ijl",
    260: "|",
    278: " !,./:;I[\\]ft",
    333: "()-`r",
    334: "{}",
    355: '"',
    389: "*",
    469: "^",
    500: "Jckvxyzs",
    556: "0123456789#$?L_abdeghnopqu",
    584: "+<=>~",
    611: "FTZ",
    667: "&ABEKPSVXY",
    722: "CDHNRUw",
    778: "GOQ",
    833: "Mm",
    889: "%",
    944: "W",
    1015: "@",
}
_CHAR_WIDTH = {char: width for width, chars in _WIDTHS_BY_GROUP.items() for char in chars}


def text_width(text: str, size: float) -> float:
    """An estimate of the rendered width, in pixels, of `text` at font size `size` in a sans font (Helvetica's
    metrics). Good for sizing boxes and margins; the renderer's font decides the true width, so leave a few
    pixels of padding.

    >>> round(text_width("loss", 12), 1), round(text_width("loss", 24), 1)
    (21.3, 42.7)
    """
    thousandths = 0
    for char in text:
        if char in _CHAR_WIDTH:
            thousandths += _CHAR_WIDTH[char]
        elif unicodedata.east_asian_width(char) in ("W", "F"):
            thousandths += 1000
        else:
            thousandths += 556
    return thousandths * size / 1000


@dataclass
class Element:
    """One SVG element: its tag, its attributes (already SVG names, values unescaped), its children and its
    text. Drawing builds these; `to_xml` writes one with its children, indented."""

    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Element] = field(default_factory=list)
    text: str = ""

    def to_xml(self, indent: int = 0) -> str:
        pad = "  " * indent
        attrs = "".join(f" {name}={quoteattr(value)}" for name, value in self.attrs.items())
        if not self.children and not self.text:
            return f"{pad}<{self.tag}{attrs}/>"
        if not self.children:
            return f"{pad}<{self.tag}{attrs}>{escape(self.text)}</{self.tag}>"
        inner = [child.to_xml(indent + 1) for child in self.children]
        if self.text:
            inner.insert(0, f"{pad}  {escape(self.text)}")
        return "\n".join([f"{pad}<{self.tag}{attrs}>", *inner, f"{pad}</{self.tag}>"])


def _svg_attrs(attrs: dict[str, object]) -> dict[str, str]:
    """Python keywords to SVG attributes: stroke_width= is stroke-width, class_= is class; numbers are written
    with fmt, None leaves the attribute out."""
    out = {}
    for name, value in attrs.items():
        if value is None:
            continue
        svg_name = name.rstrip("_").replace("_", "-")
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            out[svg_name] = str(value)
        else:
            out[svg_name] = fmt(value)
    return out


class Drawing:
    """An SVG document of `width` x `height` pixels on the theme's background. Shapes go into the drawing, or
    into the group opened last with `with drawing.group(...)`; each method returns the element it added.

    >>> d = Drawing(120, 40, theme="light")
    >>> with d.group(title="a < b & c"):
    ...     _ = d.rect(4, 4, 60, 20, fill=d.theme.grid)
    ...     _ = d.text(8, 18, "node", size=12)
    >>> print(d.to_string())  # doctest: +ELLIPSIS
    <svg xmlns="http://www.w3.org/2000/svg" width="120" height="40" viewBox="0 0 120 40" ...>
      <rect x="0" y="0" width="120" height="40" fill="#ffffff"/>
      <g>
        <title>a &lt; b &amp; c</title>
        <rect x="4" y="4" width="60" height="20" fill="#e1e4e8"/>
        <text x="8" y="18" font-size="12" fill="#1f2328">node</text>
      </g>
    </svg>
    """

    def __init__(self, width: float, height: float, theme: str | Theme = "light"):
        if not (width > 0 and height > 0 and math.isfinite(width) and math.isfinite(height)):
            raise ValueError(f"a Drawing needs a positive, finite width and height, got {width!r} x {height!r}")
        self.width, self.height = width, height
        self.theme = get_theme(theme)
        self.root = Element("svg", _svg_root_attrs(width, height, self.theme))
        self.root.children.append(Element("rect", _svg_attrs(dict(x=0, y=0, width=width, height=height))))
        self.root.children[0].attrs["fill"] = self.theme.background
        self._open = [self.root]  # the groups being filled, innermost last

    def add(self, tag: str, text: str = "", **attrs: object) -> Element:
        """Adds any element (a <marker>, a <defs>) to the innermost open group; the named methods use this."""
        element = Element(tag, _svg_attrs(attrs), text=text)
        self._open[-1].children.append(element)
        return element

    def rect(self, x: float, y: float, width: float, height: float, **attrs: object) -> Element:
        """A rectangle with its top-left corner at (x, y); rx= rounds its corners."""
        return self.add("rect", x=x, y=y, width=width, height=height, **attrs)

    def line(self, x1: float, y1: float, x2: float, y2: float, **attrs: object) -> Element:
        """A straight line from (x1, y1) to (x2, y2), in the theme's foreground unless stroke= says otherwise."""
        return self.add("line", x1=x1, y1=y1, x2=x2, y2=y2, **{"stroke": self.theme.foreground, **attrs})

    def polyline(self, points: Iterable[Point], **attrs: object) -> Element:
        """An open line through `points`, unfilled, in the foreground unless stroke= says otherwise."""
        coords = " ".join(f"{fmt(x)},{fmt(y)}" for x, y in points)
        return self.add("polyline", points=coords, **{"fill": "none", "stroke": self.theme.foreground, **attrs})

    def circle(self, cx: float, cy: float, r: float, **attrs: object) -> Element:
        """A circle of radius r centred on (cx, cy), filled with the foreground unless fill= says otherwise."""
        return self.add("circle", cx=cx, cy=cy, r=r, **{"fill": self.theme.foreground, **attrs})

    def path(self, d: str, **attrs: object) -> Element:
        """A path from SVG path data (`"M 0 0 L 10 10 Z"`), unfilled and in the foreground unless told."""
        return self.add("path", d=d, **{"fill": "none", "stroke": self.theme.foreground, **attrs})

    def text(
        self, x: float, y: float, content: str, size: float = 12, anchor: str = "start", **attrs: object
    ) -> Element:
        """`content` with its baseline at y, starting at x (anchor="start"), centred on it ("middle") or
        ending at it ("end"). The font is the theme's; text_width(content, size) estimates its width."""
        anchor_attr = None if anchor == "start" else anchor
        fill = {"fill": self.theme.foreground, **attrs}
        return self.add("text", content, x=x, y=y, font_size=size, text_anchor=anchor_attr, **fill)

    @contextlib.contextmanager
    def group(self, title: str = "", **attrs: object) -> Iterator[Element]:
        """Opens a <g>: shapes added inside the `with` go into it. `title` is its hover tooltip in a browser."""
        element = self.add("g", **attrs)
        if title:
            element.children.append(Element("title", text=title))
        self._open.append(element)
        try:
            yield element
        finally:
            self._open.pop()

    def to_string(self) -> str:
        """The SVG document, one element per line, ending in a newline."""
        return self.root.to_xml() + "\n"

    def save(self, path: str | os.PathLike) -> Path:
        """Writes the document to `path` atomically (a temp file in the same folder, then os.replace): a reader
        sees the old file or the new one, never half of one, and a failed write leaves the old file."""
        return write_atomically(path, self.to_string().encode("utf-8"))


def _svg_root_attrs(width: float, height: float, theme: Theme) -> dict[str, str]:
    size = _svg_attrs(dict(width=width, height=height))
    view_box = f"0 0 {size['width']} {size['height']}"
    return {"xmlns": "http://www.w3.org/2000/svg", **size, "viewBox": view_box, "font-family": theme.font_family}
