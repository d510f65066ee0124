"""Rule: limn.explain says, for every kernel of a schedule, which of the user's source lines it computes and
why each value it writes is stored, in the fusion policy's words. The oracles: the line numbers come from
this file's own source (each graph line carries a `# line:` marker, found with inspect), and the rules from
what fusion.py's table says for that op. A failing test prints the whole explanation."""

import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import limn
from limn import Tensor
from limn.compiler.explain import NOT_RECORDED, Explanation, explain
from limn.graph import provenance
from limn.graph.ops import Op


def marked_line(fn, marker: str) -> int:
    """The line number of the line of fn carrying `# line: <marker>`."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# line: {marker}")]
    assert len(hits) == 1, f"{fn.__name__} has {len(hits)} lines marked {marker!r}"
    return hits[0]


def kernels_by_op(e: Explanation, op: Op) -> list:
    return [k for k, sk in zip(e.kernels, e.schedule.kernels) if sk.op is op]


def lines_of(kernel) -> set[int]:
    return {s.line for s in kernel.sites if s.file == __file__}


def softmax_graph(x):
    return x.softmax(-1)  # line: softmax


def test_softmax_three_kernels_from_one_line_each_reduce_stored_by_its_op():
    with provenance.recording():
        y = softmax_graph(Tensor.randn((4, 5)))
    e = explain(y)
    line = marked_line(softmax_graph, "softmax")
    assert [k.op for k in e.schedule.kernels] == [Op.MAX, Op.SUM, Op.MUL], e
    for k in e.kernels:
        assert lines_of(k) == {line}, f"every kernel computes line {line} only\n{e}"
    for k in kernels_by_op(e, Op.MAX) + kernels_by_op(e, Op.SUM):
        assert [s.rule for s in k.stores] == ["op"] and "a reduce is always stored" in k.stores[0].reason, e
    (last,) = kernels_by_op(e, Op.MUL)
    assert last.stores[0].rule == "sink" and last.stores[0].sinks == (0,), e
    assert e.kernels[0].name == "k0  MAX  loop[4, 5]", "kernels are named as ir() prints them"


def layernorm_graph(x, w, b):
    mean = x.mean(-1, keepdim=True)  # line: mean
    centred = x - mean  # line: centre
    var = (centred * centred).mean(-1, keepdim=True)  # line: var
    return centred * (var + 1e-5).rsqrt() * w + b  # line: scale


def test_layernorm_kernels_name_the_lines_they_fold():
    with provenance.recording():
        y = layernorm_graph(Tensor.randn((3, 8)), Tensor.randn((8,)), Tensor.randn((8,)))
    e = explain(y)
    mean, centre, var, scale = (marked_line(layernorm_graph, m) for m in ("mean", "centre", "var", "scale"))
    sums = kernels_by_op(e, Op.SUM)
    assert len(sums) == 2, e
    assert lines_of(sums[0]) == {mean}, f"the first reduce folds the mean's line\n{e}"
    assert lines_of(sums[1]) == {centre, var}, f"the variance folds x - mean in, and squares it\n{e}"
    final = e.kernels[-1]
    assert scale in lines_of(final) and final.stores[0].rule == "sink", e
    for k in sums:
        assert k.stores[0].rule == "op", e


def matmul_chain(a, b, c):
    ab = a @ b  # line: first
    return ab @ c  # line: second


def test_a_matmul_chain_is_one_reduce_per_product_each_from_its_line():
    with provenance.recording():
        y = matmul_chain(Tensor.randn((4, 6)), Tensor.randn((6, 5)), Tensor.randn((5, 3)))
    e = explain(y)
    first, second = marked_line(matmul_chain, "first"), marked_line(matmul_chain, "second")
    sums = kernels_by_op(e, Op.SUM)
    assert [lines_of(k) for k in sums] == [{first}, {second}], e
    assert sums[0].stores[0].rule == "op" and sums[0].stores[0].readers == (e.kernels[1].name.split()[0],), e


def sgd_step(w, x):
    loss = ((x @ w) ** 2).sum()  # line: loss
    loss.backward()  # line: backward
    return w.assign(w.detach() - 0.1 * w.grad)  # line: update


def test_an_optimizer_step_the_update_is_an_assign_and_gradients_name_the_forward_line():
    w = Tensor.randn((5, 3), requires_grad=True).realize()
    with provenance.recording():
        updated = sgd_step(w, Tensor.randn((4, 5)))
    e = explain(updated)
    loss, update = marked_line(sgd_step, "loss"), marked_line(sgd_step, "update")
    (assign,) = kernels_by_op(e, Op.ASSIGN)
    assert assign.stores[0].rule == "op" and "ASSIGN" in assign.stores[0].reason, e
    assert update in lines_of(assign), e
    backward = [s for k in e.kernels for s in k.sites if s.backward]
    assert backward and {s.line for s in backward} == {loss}, f"gradients come from the loss line\n{e}"
    assert all(str(s).endswith(", backward") for s in backward)


def stretched(x, w):
    e = x.exp()  # line: exp
    return e @ w  # line: product


def test_a_computed_matmul_operand_is_stored_as_stretched_from_its_own_line():
    with provenance.recording():
        y = stretched(Tensor.randn((4, 6)), Tensor.randn((6, 3)))
    e = explain(y)
    (exp,) = kernels_by_op(e, Op.EXP)
    assert exp.stores[0].rule == "stretched" and "24 elements to 72" in exp.stores[0].reason, e
    assert lines_of(exp) == {marked_line(stretched, "exp")}, e
    (product,) = kernels_by_op(e, Op.SUM)
    assert lines_of(product) == {marked_line(stretched, "product")}, e


def test_without_recording_the_explanation_says_so_and_still_gives_reasons():
    e = explain(Tensor.randn((4, 5)).softmax(-1))
    assert not e.recorded and NOT_RECORDED in e.brief() and NOT_RECORDED in str(e), e.brief()
    assert all(k.sites == () for k in e.kernels)
    assert [s.rule for k in e.kernels for s in k.stores] == ["op", "op", "sink"], e.brief()


def test_str_puts_each_kernels_loop_nest_beside_its_explanation():
    with provenance.recording():
        y = softmax_graph(Tensor.randn((4, 5)))
    text = str(explain(y))
    blocks = text.split("\n\n")
    assert len(blocks) == 3, text
    for block in blocks:
        head, nest = block.split("  ---- loop nest ----\n")
        assert "from " in head and "stores buf" in head and "LOOP" in nest and "STORE" in nest, block


def test_limn_explain_is_the_compiler_function():
    assert limn.explain is explain, "limn.explain comes from limn-compiler's limn.functions entry point"


def test_limn_explain_environment_prints_each_plan_with_its_lines(tmp_path: Path):
    script = tmp_path / "user_step.py"
    script.write_text(
        textwrap.dedent(
            """\
            import limn
            limn.set_device("c")
            x = limn.Tensor.randn((4, 5))
            y = x.softmax(-1)
            print(y.sum().item())
            """
        )
    )
    env = {**os.environ, "LIMN_EXPLAIN": "1"}
    try:
        limn.set_device("c")
    except limn.DeviceError as e:
        pytest.skip(f"the c device cannot run here: {e}")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "explained:" in done.stderr and "user_step.py:4 in <module> (Tensor.softmax)" in done.stderr, done.stderr
    assert "---- loop nest ----" in done.stderr and "a reduce is always stored" in done.stderr, done.stderr


def test_explain_prints_why_a_value_was_moved_into_another_kernel():
    # x.sum(1) * 2 + 1 is one kernel: the elementwise tail is the reduce's epilogue, and explain says so on
    # the line of the value it moved (the schedule's joins are the oracle: one per moved value)
    x = Tensor.randn((4, 8))
    found = explain(x.sum(1) * 2 + 1)
    (kernel,) = found.kernels
    moved = [s for s in kernel.stores if s.join]
    assert [s.slot for s in moved] == list(found.schedule.joins), found.brief()
    assert "folded into the store of the reduce writing buf" in found.brief(), found.brief()
