"""The module view (limn/diagram/module_view.py): a box per layer call, as the model's code calls its layers.

Oracle: the model's own structure (train_stories' GPT: the names its attributes hold, its layer count, its
parameters' shapes) and the shapes its forward passes. Rules held:
- at --expand 0 the GPT is its embeddings, one box for its blocks counted x LAYERS, its final norm and its
  head, with the adds and views of its own forward, every edge labelled with the shape it carries;
- at --expand 1 the blocks open into one cluster holding their norms, attention, MLP and residual adds, and no
  edge runs from one copy of the block to the next;
- --params draws each parameter read, named by its path and shape; without it none is drawn;
- folding elementwise work leaves no box of elementwise ops only;
- without collapse every block is its own box; a layer called twice is two boxes; a line whose two pieces
  run through a layer between them is drawn acyclic;
- every drawing keeps the diagram rules (no overlapping boxes or texts, edge labels included);
- a graph built without provenance is refused with what to do; the command line draws the view.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_diagram_graph import check_drawing, check_texts_apart

import limn
from limn import Tensor, nn
from limn.diagram import build
from limn.diagram.__main__ import main
from limn.graph import provenance

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import stories_gpt  # noqa: E402

LAYERS, WIDTH, CONTEXT, BATCH = 3, 32, 16, 2


@pytest.fixture(scope="module")
def gpt():
    limn.set_device("numpy")
    return stories_gpt.GPT(stories_gpt.Config(context=CONTEXT, layers=LAYERS, heads=2, width=WIDTH))


@pytest.fixture(scope="module")
def logits(gpt) -> Tensor:
    with provenance.recording(stacks=True):
        return gpt(Tensor.randint(0, 256, (BATCH, CONTEXT)))


def labels(graph) -> list[str]:
    return [b.label for b in graph.boxes]


def test_expand_0_draws_the_models_own_layers_with_the_blocks_counted(gpt, logits):
    g = build(logits, modules=True)
    got = labels(g)
    for want in ["transformer.wte: Embedding", "transformer.wpe: Embedding", f"transformer.h.*: Block x{LAYERS}"]:
        assert want in got, f"{want!r} not among {got}"
    assert "transformer.ln_f: LayerNorm" in got and "lm_head: Linear" in got, got
    assert sum("Block" in label for label in got) == 1, f"the blocks collapse to one box: {got}"
    shapes = {e.label for e in g.edges}
    assert f"[{BATCH}, {CONTEXT}, {WIDTH}]" in shapes and f"[{BATCH}, {CONTEXT}, 256]" not in shapes, shapes
    block = next(b for b in g.boxes if "Block" in b.label)
    per_block = sum(p.numel() for p in gpt.transformer.h[0].parameters())
    assert block.detail == f"{per_block:,} weights each", block.detail
    check_drawing(g)


def test_expand_1_opens_the_blocks_into_one_cluster_without_edges_between_copies(logits):
    g = build(logits, modules=True, expand=1)
    (cluster,) = g.clusters
    assert cluster.label == f"transformer.h.*: Block x{LAYERS}", cluster.label
    inside = sorted(b.label for b in g.boxes if b.id in cluster.members)
    for want in ["ln_1: LayerNorm", "attn: CausalSelfAttention", "ln_2: LayerNorm", "mlp: MLP"]:
        assert want in inside, f"{want!r} not in the block's cluster: {inside}"
    assert inside.count("add") == 2, f"the two residual adds: {inside}"
    by_id = {b.id: b.label for b in g.boxes}
    second_add = [e for e in g.edges if by_id[e.src] == "add" and by_id[e.dst] == "ln_1: LayerNorm"]
    assert second_add == [], "the value one block passes to the next is not an edge inside the collapsed copies"
    check_drawing(g)


def test_params_draws_each_parameter_read_by_its_path(logits):
    with_params = build(logits, modules=True, params=True)
    params = {b.label: b.detail for b in with_params.boxes if b.group == "source" and b.label != "input"}
    assert params["transformer.wte.weight"] == f"[256, {WIDTH}]", params
    assert params["transformer.ln_f.bias"] == f"[{WIDTH}]", params
    plain = build(logits, modules=True)
    assert not [label for label in labels(plain) if label.endswith((".weight", ".bias"))], labels(plain)
    check_drawing(with_params)


def test_folding_leaves_no_box_of_elementwise_work(logits):
    g = build(logits, modules=True, expand=1, fold_elementwise=True)
    assert not any(b.group == "elementwise" for b in g.boxes), labels(g)
    assert "add" not in labels(g), labels(g)
    check_drawing(g)


def test_without_collapse_each_block_is_its_own_box(logits):
    from limn.diagram.module_view import module_view

    g = module_view([logits.node], collapse=False)
    blocks = sorted(label for label in labels(g) if "Block" in label)
    assert blocks == [f"transformer.h.{i}: Block" for i in range(LAYERS)], blocks
    check_drawing(g)


class Twice(nn.Module):
    """One Linear called twice, and a line whose two multiplications run through it."""

    def __init__(self) -> None:
        self.proj = nn.Linear(4, 4)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(self.proj(x * 2) * 3)


def test_a_layer_called_twice_is_two_boxes_and_the_drawing_stays_acyclic():
    with provenance.recording():
        y = Twice()(Tensor.ones((2, 4)))
    g = build(y, modules=True)
    assert labels(g).count("proj: Linear") == 2, labels(g)
    assert labels(g).count("mul") == 2, labels(g)
    check_drawing(g)


def test_a_graph_built_without_provenance_is_refused():
    y = Twice()(Tensor.ones((2, 4)))
    with pytest.raises(ValueError, match="provenance"):
        build(y, modules=True)


def test_the_command_line_draws_the_module_view(tmp_path: Path, capsys):
    script = tmp_path / "model.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(EXAMPLES)!r})\nimport stories_gpt\nfrom limn import Tensor\n"
        "def forward():\n"
        "    model = stories_gpt.GPT(stories_gpt.Config(context=8, layers=2, heads=2, width=16))\n"
        "    return model(Tensor.randint(0, 256, (1, 8)))\n"
    )
    out = tmp_path / "gpt.svg"
    assert main([f"{script}:forward", "--modules", "--expand", "1", "-o", str(out)]) == 0
    folded = tmp_path / "folded.svg"
    assert main([f"{script}:forward", "--modules", "--no-arithmetic", "-o", str(folded)]) == 0
    assert ">add<" not in folded.read_text(), "--no-arithmetic (linnet's name) folds the adds into edges"
    root = ET.fromstring(out.read_text())
    texts = [t.text for t in root.iter() if t.tag.endswith("text")]
    assert "transformer.h.*: Block x2" in texts and "mlp: MLP" in texts, texts
    assert "gpt.svg" in capsys.readouterr().out


def test_the_docs_pictures_are_what_the_module_view_draws_and_keep_the_rules():
    sys.path.insert(0, str(EXAMPLES.parent / "docs"))
    import model_pictures

    for level, svg in model_pictures.drawn().items():
        path = model_pictures.PICTURES[level]
        assert path.read_text() == svg, f"{path.name} is stale: run python docs/model_pictures.py"
        root = ET.fromstring(svg)
        texts = [t.text for t in root.iter() if t.tag.endswith("text")]
        assert "transformer.h.*: Block x4" in texts, texts
        check_texts_apart(root)


def test_the_module_view_renders_dark_and_as_dot_and_tikz(logits):
    g = build(logits, modules=True, expand=1)
    check_drawing(g, "dark")
    dot, tikz = g.to_dot(), g.to_tikz()
    for box in g.boxes:
        assert box.label in dot and box.label.replace("_", "\\_") in tikz, box.label


def test_a_training_step_draws_its_gradients_apart_from_the_forward(gpt):
    with provenance.recording(stacks=True):
        x = Tensor.randint(0, 256, (BATCH, CONTEXT))
        loss = gpt(x).reshape(-1, 256).cross_entropy(Tensor.randint(0, 256, (BATCH * CONTEXT,)))
        loss.backward()
    grads = [p.grad for p in gpt.parameters()]
    for expand in (0, 1):
        g = build(loss, *grads, modules=True, expand=expand)
        got = labels(g)
        assert f"transformer.h.*: Block x{LAYERS}" in got or expand, got
        assert any(label.endswith("backward") for label in got), got
        assert len(g.boxes) < 60, f"expand {expand}: {len(g.boxes)} boxes: {got}"
        check_drawing(g)


def test_each_thread_records_its_own_layer_calls(gpt):
    import threading

    stop = threading.Event()

    def busy():
        other = nn.Linear(4, 4)
        while not stop.is_set():
            other(Tensor.ones((1, 4)))

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        for _ in range(4):
            with provenance.recording(stacks=True):
                y = gpt(Tensor.randint(0, 256, (BATCH, CONTEXT)))
            assert f"transformer.h.*: Block x{LAYERS}" in labels(build(y, modules=True)), labels(build(y, modules=True))
    finally:
        stop.set()
        worker.join()


def test_a_model_of_one_layer_is_that_layer(tmp_path):
    class One(nn.Module):
        def __init__(self) -> None:
            self.lin = nn.Linear(3, 2)

        def forward(self, x: Tensor) -> Tensor:
            return self.lin(x)

    with provenance.recording():
        y = One()(Tensor.ones((4, 3)))
    assert "lin: Linear" in labels(build(y, modules=True)), labels(build(y, modules=True))
