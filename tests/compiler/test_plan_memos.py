"""Rules for what planning keeps between plans, each held to an oracle that keeps nothing:
- limn.compiler.codegen lowers each distinct nest once: a kernel equal to one lowered before but for its slots gets
  the same instructions bound to its own slots, and every nest equals the one a fresh lowering gives;
- kernels, plans and programs never share across graphs that differ only in a constant, a dtype, or a view's
  strides, offset or mask: each gets the nest a fresh lowering gives and computes the numpy device's answer;
- the c device renders a nest met again once, with the source a fresh rendering gives, and a plan whose
  kernels were compiled before compiles nothing."""

import numpy as np
import pytest

import limn
import limn.compiler.codegen
from limn import Tensor
from limn.compiler.codegen import lower_schedule
from limn.compiler.ir import KernelIR
from limn.compiler.jit import structure_key
from limn.compiler.schedule import Schedule, schedule
from limn.graph.ops import Node, Op
from limn.graph.view import View


def fresh(sched: Schedule) -> list[KernelIR]:
    """The nests of a schedule lowered with nothing remembered: the oracle for the memo."""
    return [limn.compiler.codegen._Lowerer(k, sched).lower() for k in sched.kernels]


def planned(*tensors: Tensor) -> tuple[Schedule, tuple[KernelIR, ...]]:
    sched = schedule([t.node for t in tensors])
    return sched, lower_schedule(sched).kernels


def square(seed: int, dtype: str = "float32") -> Tensor:
    return Tensor(np.random.default_rng(seed).standard_normal((4, 4)).astype(dtype))


def test_a_nest_met_again_shares_its_instructions_bound_to_its_own_slots():
    a, b = square(0), square(1)  # two buffers, one computation: the same nest over other slots
    sched, (first, second) = planned((a * 2).exp().sum(1), (b * 2).exp().sum(1))
    assert second.body is first.body, "the second kernel's nest is the first's, lowered once"
    assert [x.slot for x in first.inputs] != [x.slot for x in second.inputs], "each reads its own buffer"
    assert [first, second] == fresh(sched), "rebinding must give the nest a fresh lowering gives"


# pairs of graphs that differ in one thing a nest spells out
NEIGHBOURS = {
    "constant": (lambda x: x * 2.0, lambda x: x * 3.0),
    "signed zero": (lambda x: 1 / (x * 0.0), lambda x: 1 / (x * -0.0)),
    "dtype": (lambda x: (x + 1).sum(0), lambda x: (Tensor(x.numpy().astype(np.float64)) + 1).sum(0)),
    "strides": (lambda x: x + 1, lambda x: x.permute(1, 0) + 1),
    "offset": (lambda x: x[0:2] + 1, lambda x: x[1:3] + 1),
    "mask": (lambda x: x.pad(((1, 0), (0, 0))) + 1, lambda x: x.pad(((0, 1), (0, 0))) + 1),
}


@pytest.mark.parametrize("differs_in", NEIGHBOURS, ids=str)
def test_kernels_that_differ_in_one_spelled_out_thing_never_share_a_nest(differs_in: str):
    one, other = NEIGHBOURS[differs_in]
    x = square(2)
    _, before = planned(one(x))
    sched, after = planned(other(x))
    assert list(after) == fresh(sched), f"{differs_in}: the second graph got another graph's nest"
    assert all(a.body is not b.body for a in before for b in after), f"{differs_in}: two nests share a body"


@pytest.mark.parametrize("differs_in", NEIGHBOURS, ids=str)
def test_graphs_that_differ_in_one_spelled_out_thing_build_their_own_plans(ir_device, differs_in: str):
    one, other = NEIGHBOURS[differs_in]
    x = np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32)
    got = [f(Tensor(x)).numpy() for f in (one, other)]
    assert (ir_device.stats.plans_built, ir_device.stats.plan_hits) == (2, 0), (
        f"{differs_in}: two structures must be two plans: {ir_device.stats}"
    )
    limn.set_device("numpy")
    for f, g in zip((one, other), got):
        np.testing.assert_allclose(g, f(Tensor(x)).numpy(), rtol=1e-6, err_msg=f"{differs_in}: wrong plan ran")


def test_keys_tell_apart_views_that_differ_only_in_their_mask():
    x = square(7).node
    masks = (((0, 4), (0, 2)), ((0, 4), (0, 3)))  # one more column read in the second
    views = [Node(Op.VIEW, (x,), x.dtype, (4, 4), View((4, 4), (4, 1), 0, mask)) for mask in masks]
    assert structure_key([views[0]])[0] != structure_key([views[1]])[0], "two masks, one plan key"
    before = lower_schedule(schedule([views[0]])).kernels
    sched = schedule([views[1]])
    after = lower_schedule(sched).kernels
    assert list(after) == fresh(sched) and after[0].body is not before[0].body, "two masks, one nest"


# ---- the c device ----


@pytest.fixture
def c_device(monkeypatch, tmp_path):
    """A fresh c device selected, its renderer's calls counted in `rendered`, over an empty kernel cache
    (so its source index, which would spare the renderer, holds nothing yet)."""
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    backend_c = pytest.importorskip("limn.c.device")
    try:
        device = backend_c.CDevice()
    except limn.DeviceError as e:
        pytest.skip(f"no c device here: {e}")
    device.rendered = []
    real = device.renderer.render

    def counting(kernel: KernelIR) -> tuple[str, str]:
        device.rendered.append(kernel.name)
        return real(kernel)

    monkeypatch.setattr(device.renderer, "render", counting)
    limn.register_device("c_memos", device)
    limn.set_device("c_memos")
    return device


def test_the_c_device_renders_a_nest_met_again_once(c_device):
    from limn.c.source import CRenderer

    a, b = square(4), square(5)
    sched, kernels = planned((a * 2).exp().sum(1), (b * 2).exp().sum(1))
    sources = [c_device.render(k) for k in kernels]
    assert c_device.rendered == ["k0"], f"the second kernel's nest is the first's: rendered {c_device.rendered}"
    assert sources == [CRenderer(c_device.options).render(k)[1] for k in kernels], "not the source rendering gives"


def test_an_equal_nest_in_another_body_renders_anew_to_the_same_source(c_device):
    _, (kernel,) = planned(square(6).exp().sum(1))
    body = tuple(list(kernel.body))  # the same instructions in another tuple
    copy = KernelIR(kernel.name, kernel.op, kernel.loop_shape, kernel.inputs, kernel.outputs, body)
    assert copy.body is not kernel.body and copy == kernel
    assert c_device.render(copy) == c_device.render(kernel) and len(c_device.rendered) == 2


def test_a_plan_of_kernels_compiled_before_compiles_nothing(c_device, monkeypatch):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    Tensor(x).sum(0).numpy()
    stats = c_device.stats
    compiled, hits = stats.programs_compiled, stats.program_hits

    def refuse(*args):
        raise AssertionError("a kernel compiled before was compiled again")

    monkeypatch.setattr(c_device, "compile_batch", refuse)
    got = Tensor(x).sum(0, keepdim=True).numpy()  # another structure, the same one kernel
    assert stats.plans_built == 2 and (stats.programs_compiled, stats.program_hits) == (compiled, hits + 1), (
        f"the second plan's kernel must come from the program cache: {stats}"
    )
    np.testing.assert_array_equal(got, x.sum(0, keepdims=True))
