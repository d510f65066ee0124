"""Rule: docs/tour.md shows what running it prints, and the diagrams it draws. Each ```python block of the
page runs in turn, in one namespace, in a scratch folder, compiled under the page's own name and line numbers
(so the source lines limn.explain reports are the page's); the ```text block after it must be exactly what
it printed, and each tour-*.svg it saves must be the page's own image.
`python tests/test_tour.py --write` reruns the page and writes the outputs into it."""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import sys
from pathlib import Path

import limn

TOUR = Path(__file__).resolve().parent.parent / "docs" / "tour.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```\n", re.MULTILINE | re.DOTALL)


def blocks(text: str) -> list[tuple[str, str, int, int, int]]:
    """(language, body, first line of the body (1-based), start and end offsets of the whole block)."""
    found = []
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start(2)) + 1
        found.append((m.group(1), m.group(2), line, m.start(), m.end()))
    return found


def run_tour(text: str, folder: Path) -> list[tuple[int, str]]:
    """Runs every python block; returns (index of the block, what it printed) for each one."""
    namespace: dict = {"__name__": "tour"}
    printed = []
    old = os.getcwd()
    os.chdir(folder)
    try:
        limn.set_device("numpy")
        for i, (lang, body, line, _, _) in enumerate(blocks(text)):
            if lang != "python":
                continue
            code = compile("\n" * (line - 1) + body, "tour.md", "exec")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
            printed.append((i, out.getvalue()))
    finally:
        os.chdir(old)
        limn.set_device("numpy")
    return printed


def test_the_tour_prints_what_the_page_shows(tmp_path: Path):
    text = TOUR.read_text()
    found = blocks(text)
    checked = 0
    for i, got in run_tour(text, tmp_path):
        following = found[i + 1] if i + 1 < len(found) else None
        if not got:
            assert following is None or following[0] != "text", f"block {i} prints nothing; the page shows output"
            continue
        assert following is not None and following[0] == "text", f"block {i} prints, and the page shows no output"
        expected = following[1]
        diff = "".join(difflib.unified_diff(expected.splitlines(True), got.splitlines(True), "page", "run"))
        assert got == expected, f"docs/tour.md line {following[2]}: the page differs from the run\n{diff}"
        checked += 1
    assert checked >= 6, f"the tour checks {checked} printed blocks"
    drawn = sorted(tmp_path.glob("tour-*.svg"))
    assert [p.name for p in drawn] == sorted(p.name for p in TOUR.parent.glob("tour-*.svg")), "the page's images"
    for svg in drawn:
        assert svg.read_text() == (TOUR.parent / svg.name).read_text(), f"docs/{svg.name} is not what the tour draws"


def write(folder: Path) -> None:
    """Reruns the tour and writes each printed output into the ```text block after its code."""
    text = TOUR.read_text()
    found = blocks(text)
    pieces, pos = [], 0
    for i, got in run_tour(text, folder):
        if not got:
            continue
        following = found[i + 1] if i + 1 < len(found) else None
        _, _, _, _, code_end = found[i]
        pieces.append(text[pos:code_end])
        if following is not None and following[0] == "text":
            pieces.append(text[code_end : following[3]] + f"```text\n{got}```\n")
            pos = following[4]
        else:
            pieces.append(f"\n```text\n{got}```\n")
            pos = code_end
    pieces.append(text[pos:])
    TOUR.write_text("".join(pieces))
    for svg in folder.glob("tour-*.svg"):
        (TOUR.parent / svg.name).write_text(svg.read_text())


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_tour.py --write  (reruns docs/tour.md and writes its outputs)")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        write(Path(d))
    print(f"wrote {TOUR}")
