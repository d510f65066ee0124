"""Draws docs/gpt-modules-0.svg and -1.svg: train_stories' GPT in the module view, at --expand 0 and 1.

    uv run python docs/model_pictures.py          # writes the two pictures
    uv run python docs/model_pictures.py --check  # exits 1 when a picture differs from what it draws

The model is examples/stories_gpt.py's at its default size (4 layers of width 128, context 128), on a batch of
16. A test (tests/diagram/test_diagram_modules.py) holds the committed pictures to what this draws.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import stories_gpt  # noqa: E402

import limn  # noqa: E402
from limn import Tensor  # noqa: E402
from limn.diagram import build  # noqa: E402
from limn.graph import provenance  # noqa: E402

PICTURES = {level: ROOT / "docs" / f"gpt-modules-{level}.svg" for level in (0, 1)}


def drawn() -> dict[int, str]:
    """Each picture's SVG text, by expand level."""
    limn.set_device("numpy")
    limn.manual_seed(0)
    model = stories_gpt.GPT(stories_gpt.Config())
    with provenance.recording(stacks=True):
        logits = model(Tensor.randint(0, 256, (16, model.config.context)))
    out = {}
    for level in PICTURES:
        graph = build(logits, modules=True, expand=level)
        graph.title = f"train_stories' GPT, python -m limn.diagram ... --modules --expand {level}"
        out[level] = graph.to_svg()
    return out


if __name__ == "__main__":
    pictures = drawn()
    if sys.argv[1:] == ["--check"]:
        stale = [p.name for level, p in PICTURES.items() if not p.is_file() or p.read_text() != pictures[level]]
        sys.exit(f"stale: {stale}; run python docs/model_pictures.py" if stale else 0)
    for level, path in PICTURES.items():
        path.write_text(pictures[level])
        print(f"wrote {path}")
