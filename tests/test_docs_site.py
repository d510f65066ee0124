"""The documentation site as a reader's browser shows it (nox -s docs builds it with docs/site.py first):
- the home page and an API reference page open from disk in headless Chromium: their text is there (the
  README's first words; a Tensor method's signature and docstring), no error page, and their screenshots are
  pictures, not blank;
- every page of the navigation was built, and the search index ships beside the pages as a script (the offline
  plugin), holding the API's names, so search needs no server and no network;
- the docstring converter fences doctest examples and escapes what Markdown would read as links or tags.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "build" / "site" / "html"
sys.path.insert(0, str(ROOT / "docs"))
sys.path.insert(0, str(ROOT / "tests" / "diagram"))

pytestmark = pytest.mark.docs


@pytest.fixture(scope="module")
def site() -> Path:
    if not (HTML / "index.html").is_file():
        pytest.fail("build the site first: python docs/site.py (nox -s docs does)")
    if shutil.which("chromium") is None:
        pytest.fail("nox -s docs needs Debian's chromium on PATH")
    return HTML


def _chromium(*args: str) -> subprocess.CompletedProcess:
    flags = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    return subprocess.run(flags, capture_output=True, text=True, timeout=180)


def _rendered_text(page: Path) -> str:
    done = _chromium("--virtual-time-budget=5000", "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", done.stdout))


@pytest.mark.parametrize(
    "page, words",
    [
        ("index.html", ["limn is a deep learning framework", "Getting started", "Running a pretrained model"]),
        ("reference/tensor-elementwise-math.html", ["ElementwiseMixin", "logical_and", "torch.sub"]),
    ],
)
def test_two_pages_render_their_text_and_a_picture(site, page, words, tmp_path):
    from test_diagram_browser import decode_png

    text = _rendered_text(site / page)
    for word in words:
        assert word in text, f"{page}: {word!r} not in what Chromium shows: {text[:600]!r}"
    assert "\\<" not in text and "int([x])" not in text, "an escape shown, or a builtin's docstring on an attribute"
    assert "404" not in text.split("limn")[0] and "Traceback" not in text, text[:600]
    shot = tmp_path / "page.png"
    done = _chromium(f"--screenshot={shot}", "--window-size=1200,900", (site / page).as_uri())
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    image = decode_png(shot.read_bytes()).astype(np.int32)
    assert image.shape[:2] == (900, 1200), image.shape
    assert image.std() > 20, f"{page}: the screenshot is nearly one colour (std {image.std():.1f})"


def test_every_page_is_built_and_search_ships_with_them(site):
    config = json.loads((ROOT / "build" / "site" / "mkdocs.yml").read_text())

    def pages(nav) -> list[str]:
        found = []
        for entry in nav:
            for value in entry.values():
                found += pages(value) if isinstance(value, list) else [value]
        return found

    built = [p for p in pages(config["nav"]) if not (site / p.replace(".md", ".html")).is_file()]
    assert built == [], f"pages in the navigation that were not built: {built}"
    index = (site / "search" / "search_index.js").read_text()
    for name in ["scaled_dot_product_attention", "from_pretrained", "KVCache", "capture"]:
        assert name in index, f"the offline search index lacks {name!r}"
    assert index.startswith("var __index ="), "the index is a script a page loads from disk, not JSON it must fetch"


def test_docstrings_become_markdown_that_shows_their_own_characters():
    from docstrings_markdown import markdown

    text = 'Reads g["lr"] and x[0](y) as <lambda> does.\n\n>>> f([1, 2])\n[1, 2]\n\nAfter.'
    got = markdown(text)
    assert '\\["lr"\\]' in got and "x\\[0\\](y)" in got and "&lt;lambda&gt;" in got, got
    assert "```pycon\n>>> f([1, 2])\n[1, 2]\n```" in got, got
    assert markdown("a `x[0](y)` span") == "a `x[0](y)` span"
