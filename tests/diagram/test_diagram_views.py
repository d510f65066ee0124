"""Rule: limn.diagram draws the graph it is given: the graph view has a box per node and an edge per operand
read (oracle: the graph's own toposort), the schedule view a cluster per kernel named as ir() names it with
the ops that kernel computes and buffer edges between kernels (oracle: the schedule), a repeated block
collapses to one box counting its calls, and `python -m limn.diagram` writes each format from its extension."""

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from limn import Tensor
from limn.compiler.codegen import lower_schedule
from limn.compiler.explain import explain_schedule
from limn.compiler.schedule import schedule
from limn.diagram import __main__ as diagram_main
from limn.diagram import build
from limn.graph import provenance
from limn.graph.ops import ELEMENTWISE, MOVEMENT, Op, toposort


def small_loss():
    x = Tensor.randn((4, 5))
    w = Tensor.randn((5, 3), requires_grad=True)
    loss = ((x @ w).softmax(-1) * 2.0).sum()
    loss.backward()
    return loss, w.grad


def test_graph_view_has_a_box_per_node_and_an_edge_per_operand():
    loss, grad = small_loss()
    g = build(loss, grad, expand=True)
    order = toposort([loss.node, grad.node])
    assert len(g.boxes) == len(order), f"{len(g.boxes)} boxes for {len(order)} nodes"
    assert len(g.edges) == sum(len(n.srcs) for n in order), g
    labels = sorted(b.detail for b in g.boxes)
    assert labels == sorted(f"{n.dtype.name}{list(n.shape)}" for n in order)
    ops = sorted(b.label.split()[0] for b in g.boxes)
    assert ops == sorted(n.op.name for n in order)


def test_fold_elementwise_draws_no_elementwise_box_and_names_the_ops_on_edges():
    loss, grad = small_loss()
    g = build(loss, grad, fold_elementwise=True)
    names = {b.label.split()[0] for b in g.boxes}
    assert not names & {op.name for op in ELEMENTWISE}, names
    assert any(" via " in e.label for e in g.edges), [e.label for e in g.edges]


def test_schedule_view_has_a_cluster_per_kernel_named_as_explain_names_it():
    loss, grad = small_loss()
    sched = schedule([loss.node, grad.node])
    program = lower_schedule(sched)
    g = build(loss, grad, schedule=True, expand=True)
    names = [k.name for k in explain_schedule(sched, program).kernels]
    assert [c.label for c in g.clusters] == names
    for name, kernel in zip(names, program.kernels):  # the IR's header, and the matmul form where marked
        assert name == str(kernel).splitlines()[0] + ("  (a matmul)" if kernel.matmul else ""), name
    boxes = {b.id: b for b in g.boxes}
    for cluster, kernel in zip(g.clusters, sched.kernels):
        ops = {boxes[m].label.split()[0] for m in cluster.members}
        computed = {n.op.name for n in sched.computed_by(kernel) if n.op not in MOVEMENT and n.op is not Op.CONST}
        assert computed <= ops, f"{cluster.label}: boxes {ops}, computes {computed}"
        assert "stores buf" in cluster.tooltip, cluster.tooltip
    buffer_edges = [e for e in g.edges if e.kind == "buffer"]
    assert buffer_edges and all(e.label.startswith("buf") for e in buffer_edges)


def test_the_schedule_view_hover_text_is_the_explanation_with_source_lines():
    with provenance.recording():
        loss, grad = small_loss()
    g = build(loss, grad, schedule=True)
    e = explain_schedule(schedule([loss.node, grad.node]))
    for cluster, k in zip(g.clusters, e.kernels):
        assert cluster.tooltip == str(k), cluster.tooltip
    assert any("test_diagram_views.py:" in c.tooltip for c in g.clusters)
    svg = ET.fromstring(g.to_svg())
    titles = [t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert any("a reduce is always stored" in t for t in titles), "hovering a kernel shows its reasons"


def layer(x, w):
    return x + (x @ w).relu()


def three_layers():
    x = Tensor.randn((2, 4))
    ws = [Tensor.randn((4, 4), requires_grad=True) for _ in range(3)]
    for w in ws:
        x = layer(x, w)
    loss = x.sum()
    loss.backward()
    return loss, [w.grad for w in ws]


def test_a_repeated_block_collapses_to_one_box_with_its_count_unless_expanded():
    with provenance.recording(stacks=True):
        loss, grads = three_layers()
    g = build(loss, *grads)
    blocks = [b for b in g.boxes if b.group == "block"]
    assert sorted(b.label for b in blocks) == ["layer (x3)", "layer (x3) backward"], [b.label for b in blocks]
    expanded = build(loss, *grads, expand=True)
    assert not [b for b in expanded.boxes if b.group == "block"]
    assert len(expanded.boxes) == len(toposort([loss.node] + [g.node for g in grads]))
    sched_view = build(loss, *grads, schedule=True)
    assert any(b.group == "block" and b.label == "layer (x3)" for b in sched_view.boxes), sched_view.boxes
    for view in (g, sched_view):
        view.layout()  # a collapsed drawing is still acyclic, so it lays out


def test_build_refuses_what_is_not_a_tensor():
    with pytest.raises(TypeError, match="draws tensors; got a str"):
        build("loss")
    with pytest.raises(ValueError, match="no tensors"):
        build([])


SCRIPT = """\
from limn import Tensor

def block(x, w):
    return (x @ w).tanh()

def nothing():
    pass


def needs(x, y=1):
    return x


def step():
    x = Tensor.randn((3, 4))
    ws = [Tensor.randn((4, 4), requires_grad=True) for _ in range(4)]
    for w in ws:
        x = block(x, w)
    loss = (x * x).mean()
    loss.backward()
    return [loss] + [w.grad for w in ws]
"""


def run_command_line(args: list[str], capsys) -> tuple[int, str]:
    """`python -m limn.diagram ARGS` in this process: its exit status and what it says on stderr (a SystemExit
    with a message prints that message, as the interpreter does)."""
    capsys.readouterr()
    try:
        status = diagram_main.main(args)
    except SystemExit as e:
        if isinstance(e.code, str):
            return 1, e.code
        status = e.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize(
    "suffix, flags",
    [
        (".svg", []),
        (".svg", ["--schedule", "--theme", "dark"]),
        (".dot", ["--fold-elementwise"]),
        (".tex", ["--schedule", "--expand"]),
    ],
)
def test_the_command_line_writes_the_format_its_extension_names(tmp_path: Path, suffix: str, flags: list[str], capsys):
    script = tmp_path / "user_model.py"
    script.write_text(SCRIPT)
    out = tmp_path / f"out{suffix}"
    args = [f"{script}:step", *flags, "-o", str(out)]
    status, err = run_command_line(args, capsys)
    assert status == 0, f"python -m limn.diagram {' '.join(args)}\n{err}"
    text = out.read_text()
    if suffix == ".svg":
        ET.fromstring(text)
        if "--expand" not in flags and "--fold-elementwise" not in flags:
            assert "block (x4)" in text, "the four calls of block collapse"
    elif suffix == ".dot":
        assert text.lstrip().startswith("digraph")
    else:
        assert "\\begin{tikzpicture}" in text and "\\end{document}" in text


def test_python_dash_m_runs_the_command_line(tmp_path: Path):
    # the module's own entry point, in a fresh interpreter: a drawing written, a mistake told on stderr
    script = tmp_path / "user_model.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, "-m", "limn.diagram", f"{script}:step", "-o", str(tmp_path / "out.svg")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and (tmp_path / "out.svg").exists(), f"{' '.join(cmd)}\n{done.stderr}"
    cmd = [sys.executable, "-m", "limn.diagram", f"{script}:nope", "-o", str(tmp_path / "a.svg")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "has no function 'nope'" in done.stderr, done.stderr


def test_the_command_line_names_what_is_wrong(tmp_path: Path, capsys):
    script = tmp_path / "user_model.py"
    script.write_text(textwrap.dedent(SCRIPT))
    cases = [
        ([f"{script}:nope", "-o", str(tmp_path / "a.svg")], "has no function 'nope'; its functions: "),
        ([f"{tmp_path / 'missing.py'}:step", "-o", str(tmp_path / "a.svg")], "no script"),
        ([f"{script}:step", "-o", str(tmp_path / "a.pdf")], "the format comes from the extension"),
        ([str(script), "-o", str(tmp_path / "a.svg")], "expected SCRIPT.py:FUNCTION"),
        ([f"{script}:nothing", "-o", str(tmp_path / "a.svg")], "nothing returned None; return the tensors"),
        ([f"{script}:needs", "-o", str(tmp_path / "a.svg")], "takes arguments (x) and is called with none"),
        ([f"{script}:step", "-o", str(tmp_path / "no" / "a.svg")], f"the folder {tmp_path / 'no'} does not exist"),
        ([f"{script}:step", "--device", "abacus", "-o", str(tmp_path / "a.svg")], "--device abacus: "),
    ]
    for args, message in cases:
        status, err = run_command_line(args, capsys)
        lines = err.strip().splitlines()
        assert status != 0 and len(lines) == 1 and message in err, f"python -m limn.diagram {' '.join(args)}: {err}"
