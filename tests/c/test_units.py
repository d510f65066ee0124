"""A new plan's kernels compiled as several translation units at once (limn/c/units.py):
- the cut puts every kernel in exactly one unit, keeps each unit in the plan's order, gives no unit less than
  UNIT_COST where it can help it, and weighs tiled kernels by TILE_WEIGHT;
- a plan built from several units computes what the numpy device does, and the next device finds every unit
  in the kernel cache;
- a unit cc rejects, or one that runs past the compile timeout, raises CompileError naming its kernels and
  leaves nothing in the cache folder; LIMN_DEBUG=1 says which kernels cc built and why;
- tiled kernels call one shared fold per tile shape (limn/c/kernels/tile.c), defined once in a unit that holds
  several of them, and compute what the numpy device does; the packed matmul, called with an empty sum, writes
  its zeros;
- a plan with fused attention starts cc on its attention library (its width's only) when the plan is begun,
  before its units; attention on a dtype the kernels do not take is refused before anything compiles.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.c import toolchain, units
from limn.c.device import CDevice
from limn.c.toolchain import CompileError
from limn.compiler import progress
from limn.compiler.codegen import ir


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
@pytest.mark.parametrize("costs", [[5], [40_000] * 7, [90_000, 10, 10, 50_000, 33_000, 1, 64_000], [1] * 40])
def test_the_cut_holds_each_kernel_once_in_order_in_units_of_like_cost(costs, workers):
    cut = units.split(costs, workers)
    flat = list(itertools.chain.from_iterable(cut))
    assert sorted(flat) == list(range(len(costs))), f"split({costs}, {workers}) = {cut}"
    assert all(unit == sorted(unit) and unit for unit in cut), "each unit in the plan's order, none empty"
    assert len(cut) <= max(1, min(workers, sum(costs) // units.UNIT_COST)), "no unit below UNIT_COST's worth"
    loads = [sum(costs[i] for i in unit) for unit in cut]
    assert max(loads) - min(loads) <= max(costs), f"greedy by cost leaves units within one kernel: {loads}"


def test_a_tiled_kernel_costs_more_than_its_bytes():
    assert units.cost("x" * 100 + "LIMN_VEC") == 108 * units.TILE_WEIGHT
    assert units.cost("x" * 100) == 100


def _plan_of_many_kernels() -> Tensor:
    x = Tensor(np.arange(48, dtype=np.float32).reshape(6, 8) / 10)
    parts = [(x * k).exp().sum(axis=1) for k in range(1, 6)]  # reductions of one input: a kernel each
    return sum(parts[1:], parts[0]) + (x @ x.T).max(axis=0)


def _run(device: CDevice) -> np.ndarray:
    limn.register_device("c_units", lambda: device)
    limn.set_device("c_units")
    try:
        return _plan_of_many_kernels().numpy()
    finally:
        limn.set_device("numpy")


def test_a_plan_built_from_several_units_computes_what_numpy_does(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(units, "UNIT_COST", 1)
    monkeypatch.setattr(units, "cores", lambda: 3)
    built = []
    real = units.build_all
    monkeypatch.setattr(units, "build_all", lambda sources, *rest: built.append(len(sources)) or real(sources, *rest))
    got = _run(CDevice())
    assert built and max(built) == 3, f"units per compile: {built}"
    np.testing.assert_allclose(got, _plan_of_many_kernels().numpy(), rtol=1e-6)
    libraries = sorted((tmp_path / "cache" / "c").glob("*.so"))
    before = {lib: lib.stat().st_mtime_ns for lib in libraries}
    np.testing.assert_array_equal(_run(CDevice()), got)
    assert {lib: lib.stat().st_mtime_ns for lib in libraries} == before, "the next device cut the same units"


def _two_kernels():
    a = ir(Tensor.ones((3,)) + 1).kernels[0]
    first = "void limn_first(float* restrict out) {\n    out[0] = 1;\n}\n"
    return [(a, first), (a, first.replace("first", "second"))]


def test_a_unit_cc_rejects_names_its_kernels_and_leaves_the_cache_clean(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    dev = CDevice()
    folder = tmp_path / "cache" / "c"
    before = set(folder.iterdir())  # the team's library, built with the device
    items = _two_kernels()
    items[1] = (items[1][0], "void limn_second(float* restrict out) {\n    out[0] = undefined_name;\n}\n")
    with pytest.raises(CompileError, match="limn_first, limn_second") as err:
        dev.compile_batch(items, progress.silent())
    assert "undefined_name" in str(err.value)
    assert set(folder.iterdir()) == before, "no source, temp library or checksum is left behind"


def test_a_unit_past_the_compile_timeout_names_its_kernels_and_leaves_the_cache_clean(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    dev = CDevice()
    folder = tmp_path / "cache" / "c"
    before = set(folder.iterdir())  # the team's library, built with the device
    monkeypatch.setattr(toolchain, "COMPILE_TIMEOUT_S", 0.001)
    with pytest.raises(CompileError, match=r"ran past 0\.001 s.*limn_first, limn_second"):
        dev.compile_batch(_two_kernels(), progress.silent())
    assert set(folder.iterdir()) == before, "no source, temp library or checksum is left behind"


def test_limn_debug_says_which_kernels_cc_built_and_why(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LIMN_DEBUG", "1")
    dev = CDevice()
    capsys.readouterr()
    dev.compile_batch(_two_kernels()[:1], progress.silent())
    err = capsys.readouterr().err
    assert "cc built 1 kernel (" in err and "not in the kernel cache: limn_first" in err, err
    dev.compile_batch(_two_kernels()[:1], progress.silent())
    assert "cc built" not in capsys.readouterr().err, "a kernel the cache holds is loaded, not built"


def test_tiled_kernels_share_one_fold_per_shape_defined_once_in_their_unit(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(units, "cores", lambda: 1)  # one unit: every kernel's fold meets the others'
    seen = []
    real = units.build_all
    monkeypatch.setattr(units, "build_all", lambda sources, *rest: seen.extend(sources) or real(sources, *rest))
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in [(37, 40), (40, 50), (50, 21)])
    limn.register_device("c_units", CDevice)
    limn.set_device("c_units")
    try:
        got = ((Tensor(a) @ Tensor(b)).relu() @ Tensor(c)).numpy()
    finally:
        limn.set_device("numpy")
    np.testing.assert_allclose(got, np.maximum(a @ b, 0) @ c, rtol=1e-5, atol=1e-5)
    (unit,) = seen
    shared = set(re.findall(r"^static [^\n]*void (limn_(?:matmul|tile)_\w+)\(", unit, flags=re.M))
    assert {"matmul", "tile"} <= {name.split("_")[1] for name in shared}, f"no shared matmul or fold: {shared}"
    kernels = re.findall(r"^void (limn_\w+)\(.*?^}", unit, flags=re.S | re.M)
    bodies = re.findall(r"^void limn_\w+\(.*?^}", unit, flags=re.S | re.M)
    tiled = [body for body in bodies if "matmul tile" in body]
    assert len(tiled) == 2, f"both products should be tiled: {kernels}"
    assert all("LIMN_VEC_FMA" not in body and re.search(r"limn_(matmul|tile)_\w+\(", body) for body in tiled), (
        "a tiled kernel carries its own fold instead of calling the shared one"
    )
    for name in shared:  # each kernel brings its copy; the guard keeps one (a second would not compile)
        assert unit.count(f"void {name}(") == len(tiled), f"{name}: one copy per tiled kernel"


def test_fused_attention_starts_compiling_when_its_plan_is_begun_for_its_width_only(tmp_path, monkeypatch):
    # cc builds the attention library on a thread of its own from the moment a new plan's graph is seen to
    # hold attention, so it is under way before the plan's units are handed to cc, and only float32's
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    events = []
    real_build_all = units.build_all
    monkeypatch.setattr(units, "build_all", lambda s, *rest: events.append("units") or real_build_all(s, *rest))
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 9, 8)).astype(np.float32) for _ in range(3))
    device = CDevice()
    real_library = device._library

    def library(source: str):
        if "limn_sdpa_forward" in source:
            events.append("attention started")
            assert "limn_sdpa_forward_f64" not in source, "only float32's kernels are built"
        return real_library(source)

    device.attention.build = library
    limn.register_device("c_units", lambda: device)
    limn.set_device("c_units")
    try:
        got = (Tensor.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), causal=True) * 2).numpy()
    finally:
        limn.set_device("numpy")
    assert events.count("attention started") == 1, events
    assert events.index("attention started") < events.index("units"), f"attention began after the units: {events}"
    want = Tensor.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), causal=True).numpy() * 2
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_attention_on_a_dtype_the_c_kernels_do_not_take_names_it_before_any_compile(monkeypatch):
    from limn.c import attention as c_attention
    from limn.compiler.ir import BufferArg, KernelIR

    device = CDevice()
    monkeypatch.setattr(device.attention, "build", lambda source: pytest.fail("built a library for int32"))
    arg = BufferArg("in0", 0, limn.int32, (1, 2, 2))
    kernel = KernelIR("k0", None, (1,), (arg, arg, arg), (arg,), (), custom="sdpa", params=())
    with pytest.raises(limn.DeviceError, match="int32"):
        device.attention.run(kernel, [np.zeros((1, 2, 2), np.int32)] * 4, 1)
    assert c_attention.width(limn.int32) is None and c_attention.width(limn.bfloat16) == "f32"


def test_an_attention_library_cc_rejects_raises_at_the_run_that_needs_it_and_is_tried_again(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 4, 8)).astype(np.float32) for _ in range(3))
    device = CDevice()
    tries = []

    def rejected(source: str):
        tries.append(source)
        raise CompileError("cc rejected the attention library (a test's stand-in)")

    device.attention.build = rejected
    limn.register_device("c_units", lambda: device)
    limn.set_device("c_units")
    try:
        for _ in range(2):  # the failure is not remembered as a library: the next run builds again
            with pytest.raises(CompileError, match="stand-in"):
                Tensor.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v)).numpy()
    finally:
        limn.set_device("numpy")
    assert len(tries) >= 2 and not device.attention.functions and not device.attention.building


def test_the_packed_matmul_writes_the_zeros_of_an_empty_sum(tmp_path, monkeypatch):
    # limn lowers a product over an empty axis to a fill, but the packed matmul takes its sizes at run time:
    # called with nr = 0 it must still write every cell (the plain fold's zeros), not leave what was there
    import ctypes

    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    device = CDevice()
    a, b = Tensor(np.ones((9, 5), np.float32)), Tensor(np.ones((5, 7), np.float32))
    source = device.render(ir(a @ b).kernels[0])
    (name,) = set(re.findall(r"noinline\)\) void (limn_matmul_\w+)\(", source))  # the driver, not its helpers
    exported = re.sub(rf"^static (__attribute__\(\(noinline\)\) void {name}\()", r"\1", source, flags=re.M)
    driver = getattr(device._library(units.source([exported])), name)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    driver.argtypes, driver.restype = [ptr, i64, ptr, i64, i64, ptr, i64, i64, i64, i64, i64, ctypes.c_int], None
    out = np.full((9, 7), 42.0, np.float32)
    a, b = np.ones((9, 1), np.float32), np.ones((1, 7), np.float32)
    driver(out.ctypes.data, 7, a.ctypes.data, 1, 1, b.ctypes.data, 7, 1, 9, 7, 0, 0)  # out = a[:, :0] @ b[:0]
    np.testing.assert_array_equal(out, np.zeros((9, 7), np.float32), err_msg=f"{name} with nr = 0")
    assert (Tensor.ones((9, 0)) @ Tensor.ones((0, 7))).numpy().tolist() == [[0.0] * 7] * 9
