"""Rule: while limn.graph.provenance records, each node gets the Site of the user's line that made it (the
innermost frame outside limn), gradients get the Site of the forward value they differentiate, rewrites
keep the Site of the node they replace, and nothing is recorded or paid for while it is off. Oracle: this
file's own line numbers, found with inspect from a `# line:` marker."""

import inspect

from limn import Tensor
from limn.graph import ops, provenance
from limn.graph.ops import Op, rebuilt, toposort


def marked_line(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    (hit,) = [start + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# line: {marker}")]
    return hit


def model(x, w):
    h = (x @ w).relu()  # line: hidden
    return h.sum()  # line: total


def test_each_node_is_attributed_to_the_user_line_that_made_it_with_the_limn_function_called():
    with provenance.recording():
        x, w = Tensor.randn((3, 4)), Tensor.randn((4, 2), requires_grad=True)
        loss = model(x, w)
    hidden, total = marked_line(model, "hidden"), marked_line(model, "total")
    site = provenance.site(loss.node)
    assert (site.file, site.line, site.function, site.backward) == (__file__, total, "model", False), site
    assert "sum" in site.api, site
    made = [n for n in toposort([loss.node]) if n.op not in (Op.BUFFER, Op.CONST)]
    assert {provenance.site(n).line for n in made} == {hidden, total}, [provenance.site(n) for n in made]
    product = next(n for n in made if n.op is Op.SUM)  # the matmul's fold comes before the final sum
    assert provenance.site(product).line == hidden and "matmul" in provenance.site(product).api
    assert str(site).startswith(f"test_provenance.py:{total} in model (")


def test_gradient_nodes_take_the_forward_lines_site_marked_backward():
    w = Tensor.randn((4, 2), requires_grad=True)
    with provenance.recording():
        loss = model(Tensor.randn((3, 4)), w)
        loss.backward()
    forward_lines = {marked_line(model, "hidden"), marked_line(model, "total")}
    grads = [provenance.site(n) for n in toposort([w.grad.node]) if n.op not in (Op.BUFFER, Op.CONST)]
    grads = [s for s in grads if s is not None and s.backward]
    assert grads and {s.line for s in grads} <= forward_lines, grads


def test_nothing_is_recorded_while_off_and_the_hook_is_removed():
    assert ops.on_create is None, "recording is off by default (LIMN_EXPLAIN unset in the test run)"
    y = Tensor.randn((3,)) * 2.0
    assert provenance.site(y.node) is None
    with provenance.recording():
        with provenance.recording(stacks=True):
            assert provenance.is_recording()
        assert ops.on_create is not None, "an inner block ending leaves the outer one recording"
    assert ops.on_create is None and not provenance.is_recording()


def test_a_rebuilt_node_keeps_the_site_of_the_node_it_replaces_after_recording_ends():
    with provenance.recording():
        a = Tensor.randn((3,))
        y = a * 2.0  # line: made
    made = marked_line(test_a_rebuilt_node_keeps_the_site_of_the_node_it_replaces_after_recording_ends, "made")
    other = Tensor.randn((3,)).node
    copy = rebuilt(y.node, (other, y.node.srcs[1]))
    assert copy is not y.node and provenance.site(copy).line == made


def outer(x):
    return inner(x) + 1.0  # line: call


def inner(x):
    return x * 3.0  # line: body


def test_stacks_record_the_user_frames_outermost_first_and_tell_calls_apart():
    with provenance.recording(stacks=True):
        a = outer(Tensor.randn((2,)))
        b = outer(Tensor.randn((2,)))
    mul_a = next(n for n in toposort([a.node]) if n.op is Op.MUL)
    mul_b = next(n for n in toposort([b.node]) if n.op is Op.MUL)
    sa, sb = provenance.site(mul_a), provenance.site(mul_b)
    assert [f.function for f in sa.stack[-2:]] == ["outer", "inner"], sa.stack
    assert sa.stack[-1].line == marked_line(inner, "body") and sa.stack[-2].line == marked_line(outer, "call")
    assert sa == sb, "the same line is the same Site"
    assert sa.stack[-1].call != sb.stack[-1].call, "two calls of inner are told apart"


def test_a_node_made_by_limn_alone_outside_user_code_gets_no_frame_inside_limn():
    with provenance.recording():
        y = Tensor.randn((4, 5)).softmax(-1)
    for n in toposort([y.node]):
        site = provenance.site(n)
        if site is not None:
            assert "/limn/" not in site.file.replace("\\", "/").split("/tests/")[-1], site
            assert site.file == __file__, site
