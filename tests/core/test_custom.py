"""Rules of CUSTOM, the escape hatch for kernels a device supplies whole, against the composition in
primitives as the oracle:
 - on a device that supplies the kernel, apply() makes one CUSTOM node per output, sharing srcs, and the
   numpy reference computes the same numbers as the composition;
 - on a device that supplies no kernel for the name, the graph holds no CUSTOM node at all;
 - a multi-output kernel runs once for all its siblings, on the numpy device and in a schedule;
 - gradients flow through the op's backward rule when it has one, through the composition otherwise, and
   are torch's for the same computation either way."""

import numpy as np
import pytest
import torch

import limn
from limn import Tensor
from limn.compiler.schedule import schedule
from limn.frontend import custom_call
from limn.graph import custom
from limn.graph.ops import Op, toposort

calls = {"reference": 0}


def _reference(inputs, params):
    calls["reference"] += 1
    (x,) = inputs
    scale = params["scale"]
    return [x.sum(axis=1, keepdims=True) * scale, (x * x).sum(axis=1, keepdims=True) * scale]


def _compose(x, scale):
    return [x.sum(axis=1, keepdim=True) * scale, (x * x).sum(axis=1, keepdim=True) * scale]


def _backward(inputs, output, out, grad, params):
    (x,) = inputs
    g = grad.expand(x.shape) * params["scale"]
    return [g if output == 0 else g * 2 * x]


def _signature(specs, params):
    (dtype, shape) = specs[0]
    return [(dtype, (shape[0], 1)), (dtype, (shape[0], 1))]


ROW_MOMENTS = custom.register(custom.CustomOp("test_row_moments", 2, _signature, _reference, _compose, _backward))
NO_BACKWARD = custom.register(
    custom.CustomOp("test_row_moments_no_backward", 2, _signature, _reference, _compose, None)
)


def _custom_nodes(tensors):
    return [n for n in toposort([t.node for t in tensors]) if n.op is Op.CUSTOM]


def test_a_supplied_kernel_becomes_one_custom_node_per_output_sharing_srcs():
    x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    s, q = custom_call.apply("test_row_moments", x, scale=0.5)
    nodes = _custom_nodes([s, q])
    assert len(nodes) == 2 and nodes[0].srcs == nodes[1].srcs
    assert sorted(n.arg.output for n in nodes) == [0, 1] and all(n.arg.n_outputs == 2 for n in nodes)


def test_the_numpy_reference_matches_the_composition():
    x_np = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    got = custom_call.apply("test_row_moments", Tensor(x_np), scale=0.25)
    want = _compose(Tensor(x_np), 0.25)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


def test_siblings_run_the_kernel_once_on_the_numpy_device():
    x = Tensor(np.ones((2, 3), np.float32))
    s, q = custom_call.apply("test_row_moments", x, scale=1.0)
    before = calls["reference"]
    limn.realize(s, q)
    assert calls["reference"] - before == 1


def test_a_device_without_the_kernel_never_sees_a_custom_node():
    limn.set_device("c")
    x = Tensor(np.ones((2, 3), np.float32))
    s, q = custom_call.apply("test_row_moments", x, scale=1.0)
    assert _custom_nodes([s, q]) == []
    np.testing.assert_allclose(s.numpy(), [[3.0], [3.0]])
    np.testing.assert_allclose(q.numpy(), [[3.0], [3.0]])


def test_a_schedule_merges_siblings_into_one_kernel_writing_both():
    x = Tensor(np.ones((2, 3), np.float32))
    s, q = custom_call.apply("test_row_moments", x, scale=1.0)
    sched = schedule([(s + 1).node, (q * 2).node])
    customs = [k for k in sched.kernels if k.op is Op.CUSTOM]
    assert len(customs) == 1 and len(customs[0].outputs) == 2


def test_a_schedule_gives_a_sibling_the_graph_never_reads_a_scratch_buffer():
    """Only q is asked for (s was realized before, or is never needed): the call still writes both outputs, s
    into a scratch slot of the shape the op's signature gives, which no sink reads."""
    x = Tensor(np.ones((2, 3), np.float32))
    _s, q = custom_call.apply("test_row_moments", x, scale=1.0)
    sched = schedule([(q * 2).node])
    (kernel,) = [k for k in sched.kernels if k.op is Op.CUSTOM]
    assert len(kernel.outputs) == 2
    scratch = sched.slots[kernel.outputs[0]]
    assert scratch.shape == (2, 1) and scratch.dtype == limn.float32
    assert kernel.outputs[0] not in [sink.slot for sink in sched.sinks]


@pytest.mark.parametrize("name", ["test_row_moments", "test_row_moments_no_backward"])
def test_gradients_match_torch(name):
    """With a backward rule the gradient is the rule's; without one the op is composed, and either way it is
    the gradient torch computes for the same moments (s = 0.5 sum x, q = 0.5 sum x**2 per row)."""
    x_np = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    x = Tensor(x_np, requires_grad=True)
    s, q = custom_call.apply(name, x, scale=0.5)
    (s.sum() + (q * q).sum()).backward()
    xt = torch.tensor(x_np, requires_grad=True)
    st, qt = xt.sum(dim=1, keepdim=True) * 0.5, (xt * xt).sum(dim=1, keepdim=True) * 0.5
    (st.sum() + (qt * qt).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    if name.endswith("no_backward"):
        assert _custom_nodes([s, q]) == [], "without a backward rule, a graph that needs gradients is composed"
    else:
        assert len(_custom_nodes([s, q])) == 2, "with a backward rule, the graph keeps its CUSTOM nodes"
