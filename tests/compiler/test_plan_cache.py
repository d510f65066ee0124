"""Rules of the shared executor (limn.compiler.jit), run on the IR interpreter device: plans are cached by graph
structure, programs by source, the ASSIGNs of one realize() are one transaction, and LIMN_DEBUG shows it.
The stats counters of a fresh device (the ir_device fixture) are the oracle for what was built."""

import numpy as np
import pytest

import limn
import limn.compiler.jit
from limn import Tensor
from limn.compiler.codegen import ir


def mlp(x: Tensor, w: Tensor) -> Tensor:
    return (x @ w).relu().sum(1)


def reference_mlp(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.maximum(x @ w, 0).sum(1)


def test_same_structure_with_new_buffers_schedules_and_lowers_nothing(ir_device, monkeypatch):
    rng = np.random.default_rng(0)
    first = [rng.standard_normal(s).astype(np.float32) for s in ((4, 5), (5, 3))]
    mlp(Tensor(first[0]), Tensor(first[1])).numpy()
    stats = ir_device.stats
    built, hits, compiled = stats.plans_built, stats.plan_hits, stats.programs_compiled

    def refuse(*args):
        raise AssertionError("a cached structure was scheduled or lowered again")

    monkeypatch.setattr(limn.compiler.jit, "schedule", refuse)
    monkeypatch.setattr(limn.compiler.jit, "lower_schedule", refuse)
    second = [rng.standard_normal(s).astype(np.float32) for s in ((4, 5), (5, 3))]
    got = mlp(Tensor(second[0]), Tensor(second[1])).numpy()
    assert (stats.plans_built, stats.plan_hits, stats.programs_compiled) == (built, hits + 1, compiled), (
        f"the second call should only hit the plan cache: {stats}"
    )
    np.testing.assert_allclose(
        got,
        reference_mlp(*second),
        rtol=1e-5,
        atol=1e-5,
        err_msg="the cached plan must compute with the new buffers",
    )


def sgd_losses(steps: int, stats_after_each: list | None = None) -> list[float]:
    """SGD on a tiny linear regression, each step's update realized together with its loss."""
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((8, 3)).astype(np.float32)
    ys = xs @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3
    w = Tensor(rng.standard_normal((3, 1)).astype(np.float32), requires_grad=True)
    b = Tensor(np.zeros(1, np.float32), requires_grad=True)
    losses = []
    for _ in range(steps):
        loss = ((Tensor(xs) @ w + b - Tensor(ys)) ** 2).mean()
        loss.backward()
        for p in (w, b):
            p.assign(p - 0.1 * p.grad)
        limn.realize(loss, w, b)
        w.grad = b.grad = None
        losses.append(loss.item())
        if stats_after_each is not None:
            stats = limn.get_device().stats
            stats_after_each.append((stats.plans_built, stats.programs_compiled, stats.plan_hits))
    return losses


def test_training_loop_builds_plans_only_on_the_first_step(ir_device):
    per_step: list[tuple[int, int, int]] = []
    losses = sgd_losses(5, per_step)
    built, compiled, _ = per_step[0]
    assert built == 1 and compiled > 0, f"step 1 builds one plan: {per_step[0]}"
    assert per_step[1:] == [(built, compiled, hits) for hits in range(1, 5)], (
        "steps 2-5 must reuse step 1's plan and programs; "
        f"(plans_built, programs_compiled, plan_hits) per step: {per_step}"
    )
    limn.set_device("numpy")
    np.testing.assert_allclose(losses, sgd_losses(5), rtol=1e-5, err_msg="losses differ from the numpy device")
    assert losses[-1] < losses[0], f"SGD should reduce the loss: {losses}"


def test_new_shape_builds_a_new_plan(ir_device):
    rng = np.random.default_rng(2)
    mlp(Tensor(rng.standard_normal((4, 5), np.float32)), Tensor(rng.standard_normal((5, 3), np.float32))).numpy()
    x, w = rng.standard_normal((6, 5), np.float32), rng.standard_normal((5, 3), np.float32)
    got = mlp(Tensor(x), Tensor(w)).numpy()
    assert (ir_device.stats.plans_built, ir_device.stats.plan_hits) == (2, 0), (
        f"a (6, 5) input is a new structure: {ir_device.stats}"
    )
    np.testing.assert_allclose(got, reference_mlp(x, w), rtol=1e-5, atol=1e-5)


def test_identical_kernels_across_plans_hit_the_program_cache(ir_device):
    # sum(0) and sum(0, keepdim=True) are two graph structures (the first adds a reshape that aliases),
    # but both run the same one kernel
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    Tensor(x).sum(0).numpy()
    compiled, hits = ir_device.stats.programs_compiled, ir_device.stats.program_hits
    got = Tensor(x).sum(0, keepdim=True).numpy()
    stats = ir_device.stats
    assert stats.plans_built == 2, f"two structures, two plans: {stats}"
    assert (stats.programs_compiled, stats.program_hits) == (compiled, hits + 1), (
        f"the second plan's kernel is the first's, so it must come from the program cache: {stats}"
    )
    np.testing.assert_array_equal(got, x.sum(0, keepdims=True))


def test_negative_zero_constant_is_its_own_plan(ir_device):
    # 0.0 == -0.0 as python floats, but a plan that bakes one in computes a different answer for the other
    x = np.array([1.0, 2.0], np.float32)
    assert (1 / (Tensor(x) * 0.0)).numpy().tolist() == [np.inf, np.inf]
    got = (1 / (Tensor(x) * -0.0)).numpy()
    assert got.tolist() == [-np.inf, -np.inf], f"x * -0.0 reused the plan of x * 0.0: {got}"


def test_assigns_from_each_others_old_values_swap(ir_device):
    for first in ("a", "b"):  # the order the assigns are written in cannot matter
        a, b = Tensor(np.array([1.0, 2.0], np.float32)), Tensor(np.array([3.0, 4.0], np.float32))
        old_a, old_b = a.detach(), b.detach()  # a after a.assign(...) names the new value
        if first == "a":
            a.assign(old_b)
            b.assign(old_a)
        else:
            b.assign(old_a)
            a.assign(old_b)
        limn.realize(a, b)
        assert (a.tolist(), b.tolist()) == ([3.0, 4.0], [1.0, 2.0]), (
            f"assigning {first} first: a={a.tolist()} b={b.tolist()}, expected a swap"
        )


@pytest.mark.parametrize("value", ["p.T", "p.T * 2 + p"])
def test_assign_reading_its_own_target_through_a_permuted_view(ir_device, value):
    start = np.arange(16, dtype=np.float32).reshape(4, 4)
    p = Tensor(start)
    p.assign(eval(value, {"p": p}))  # in place, cell (i, j) would read (j, i) after it was overwritten
    p.realize()
    np.testing.assert_array_equal(p.numpy(), eval(value, {"p": start}), err_msg=f"p.assign({value})")


@pytest.mark.parametrize("value", ["p + 1", "p.T"])  # written in place; through a temp, then copied
def test_assigned_tensor_stays_on_its_own_buffer(ir_device, value):
    start = np.arange(4, dtype=np.float32).reshape(2, 2)
    p = Tensor(start)
    buffer = p.node.arg  # what other tensors, optimizers and captures hold
    p.assign(eval(value, {"p": p}))
    p.realize()
    assert p.node.arg is buffer, f"after p.assign({value}) p holds {p.node.arg}, not its own buffer {buffer}"
    np.testing.assert_array_equal(buffer.numpy(), eval(value, {"p": start}))


def test_realized_reshape_of_a_buffer_keeps_its_value_when_the_buffer_is_assigned(ir_device):
    p = Tensor(np.arange(4, dtype=np.float32).reshape(2, 2))
    flat = p.reshape(4)
    p.assign(p + 10)
    limn.realize(p, flat)  # flat is read before the step, like every value in one realize()
    p.assign(p * 0).realize()
    assert flat.tolist() == [0.0, 1.0, 2.0, 3.0], f"flat changed with p: it shares p's bytes ({flat.tolist()})"
    assert p.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def run_twice(x: np.ndarray) -> None:
    for _ in range(2):
        (Tensor(x) * 2).sum().numpy()


def test_debug_1_prints_each_plan_built_once(ir_device, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path))  # no plan index entry from an earlier run
    monkeypatch.setenv("LIMN_DEBUG", "1")
    run_twice(np.ones((3, 4), np.float32))
    err = capsys.readouterr().err
    assert err.splitlines() == ["[limn ir] plan 1: 1 kernels"], (
        f"LIMN_DEBUG=1 should print the one plan built, and nothing on the cache hit:\n{err}"
    )


def test_debug_2_prints_each_plan_explained_beside_its_ir_once(ir_device, capsys, monkeypatch):
    monkeypatch.setenv("LIMN_DEBUG", "2")
    run_twice(np.ones((3, 4), np.float32))
    err = capsys.readouterr().err
    explained = str(limn.explain((Tensor(np.ones((3, 4), np.float32)) * 2).sum()))
    assert err.count(explained) == 1, f"LIMN_DEBUG=2 should print limn.explain's text once (not on the hit):\n{err}"
    (kernel,) = ir((Tensor(np.ones((3, 4), np.float32)) * 2).sum()).kernels
    nest = str(kernel).splitlines()[1:]  # the kernel's IR, less its header line
    assert "\n".join(nest) in err, f"LIMN_DEBUG=2 should print the plan's loop nest as ir() does:\n{err}"


def test_debug_2_says_which_rule_stored_each_buffer(ir_device, capsys, monkeypatch):
    monkeypatch.setenv("LIMN_DEBUG", "2")
    run_twice(np.ones((3, 4), np.float32))
    err = capsys.readouterr().err
    assert err.count("  stores buf1 float32[1, 1]: a reduce is always stored; sink 0\n") == 1, (
        f"LIMN_DEBUG=2 should say once, per buffer, which fusion rule stored it:\n{err}"
    )


def test_debug_3_prints_sources_and_per_kernel_timings(ir_device, capsys, monkeypatch):
    monkeypatch.setenv("LIMN_DEBUG", "3")
    run_twice(np.ones((3, 4), np.float32))
    err = capsys.readouterr().err
    timings = [line for line in err.splitlines() if line.startswith("[limn ir] k0 SUM loop[3, 4]: ")]
    assert len(timings) == 2 and all(t.endswith(" ms") for t in timings), (
        f"LIMN_DEBUG=3 should time the kernel on both runs:\n{err}"
    )


def test_debug_0_prints_nothing(ir_device, capsys, monkeypatch):
    monkeypatch.setenv("LIMN_DEBUG", "0")
    run_twice(np.ones((3, 4), np.float32))
    assert capsys.readouterr().err == "", "LIMN_DEBUG=0 must be silent"


def test_an_allocation_the_device_refuses_keeps_the_devices_reason(ir_device, monkeypatch):
    """Rule: a MemoryError from a device's alloc names the buffer asked for and keeps what the device said
    (a GPU says how much is free), raised before any kernel runs."""

    def refuse(dtype, shape):
        raise MemoryError("asked 96 bytes, 3 free")

    x = Tensor(np.ones(6, np.float32))  # its buffer allocated before the device starts refusing
    monkeypatch.setattr(ir_device, "alloc", refuse)
    before = ir_device.stats.kernels_run
    with pytest.raises(MemoryError, match=r"24 bytes for a float32\[6\] buffer: asked 96 bytes, 3 free"):
        (x * 2).realize()
    assert ir_device.stats.kernels_run == before
