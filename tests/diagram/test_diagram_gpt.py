"""Rule: a GPT training step, thousands of nodes, draws legibly: its transformer blocks collapse to one box
for the forward and one for the gradients, each counting the layers, in the graph view and in the schedule
view; with --expand every node is drawn. Oracle: the model's own layer count and the graph's toposort."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from limn import Tensor
from limn.diagram import build
from limn.graph import provenance
from limn.graph.ops import toposort

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import stories_gpt  # noqa: E402

LAYERS = 3


def training_step():
    model = stories_gpt.GPT(stories_gpt.Config(context=16, layers=LAYERS, heads=2, width=32))
    idx = Tensor.randint(0, 256, (2, 16))
    loss = model(idx).reshape(-1, 256).cross_entropy(Tensor.randint(0, 256, (32,)))
    loss.backward()
    return [loss] + [p.grad for p in model.parameters()]


def test_a_gpt_step_collapses_its_blocks_in_both_views():
    with provenance.recording(stacks=True):
        outputs = training_step()
    nodes = toposort([t.node for t in outputs])
    assert len(nodes) > 1000, f"the step has {len(nodes)} nodes"
    blocks_label = f"Block.forward (x{LAYERS})"
    for schedule in (False, True):
        g = build(outputs, schedule=schedule)
        labels = sorted(b.label for b in g.boxes if b.group == "block")
        assert labels == [blocks_label, f"{blocks_label} backward"], (schedule, labels)
        assert len(g.boxes) < len(nodes) / 4, f"schedule={schedule}: {len(g.boxes)} boxes for {len(nodes)} nodes"
        svg = ET.fromstring(g.to_svg())
        assert svg.tag.endswith("svg")
    expanded = build(outputs, expand=True)
    assert len(expanded.boxes) == len(nodes)
