"""The cuda devices' fused attention kernels (limn.cuda.attention) against the numpy references of
limn.composed.functional.sdpa:
- sdpa, sdpa_bwd_q and sdpa_bwd_kv called through custom_call.apply on cuda-sim (blocks of 8 rows, tiles of 4, 8
  columns a pass), diffed against sdpa.forward, backward_q and backward_kv (float32 at 1e-5, float64 at 1e-12,
  float16 and bfloat16 within two of their roundings) over ragged tiles and passes, rows past one block,
  t_q != t_k both ways, causal, key_mask, rows that see no key, N = 0, t_q = 0 and t_k = 0;
- with dropout (the seed and counter limbs as inputs), the same against the references given the same factors
  (sdpa.dropout_factors), a counter that wraps past 2**64 included;
- the same bits twice, and the same bits from one block walking the whole grid as from four;
- the frontend on cuda-sim (Tensor.scaled_dot_product_attention and its backward) runs the three kernels and
  equals the numpy device's, at every width, with dropout too (one seed: the same mask on both devices);
- the kernels compile through NVRTC to CUBIN for sm_80 and sm_90 with no spills and the static shared memory
  Tiles.shared_bytes says, within 48 KiB; the cuda device on the emulated driver runs them.
"""

from __future__ import annotations

import shutil
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from test_cuda_device import emulated as emulated_cuda  # noqa: F401 (a fixture: the cuda device, emulated driver)

import limn
from limn import Tensor, dtypes
from limn.compiler.codegen import ir
from limn.composed.functional import sdpa
from limn.composed.random.rng import limbs_of
from limn.cuda import attention as cuda_attention
from limn.cuda.sim.device import CudaSimDevice
from limn.frontend import custom_call
from limn.graph.ops import Op, toposort
from limn.runtime.device import DeviceError

# a g++ build of the kernels per device (seconds): nox -s "tests(cuda-sim)" runs them, not the default suite
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")]

limn.register_device("cuda-sim-1block", lambda: CudaSimDevice(max_blocks=1))

TILES = cuda_attention.SIM
HALVES = {np.float16: "float16", ml_dtypes.bfloat16: "bfloat16"}


def _mask(seed: int, n: int, t_k: int, dead: int | None = None) -> np.ndarray:
    m = np.random.default_rng(seed).random((n, t_k)) < 0.6
    m[:, 0] = True
    if dead is not None:
        m[dead] = False  # batch row `dead` sees no key at all
    return m


# name -> (n, t_q, t_k, d, d_v, causal, key_mask or None), against blocks of 8 rows, tiles of 4, passes of 8 columns
CASES = {
    "ragged tiles and passes": (2, 11, 13, 10, 9, True, _mask(0, 2, 13)),
    "t_q < t_k": (2, 5, 14, 8, 4, False, None),
    "t_q > t_k, rows past two blocks": (2, 19, 6, 8, 4, False, None),
    "causal t_q < t_k": (2, 5, 14, 3, 5, True, None),
    "causal t_q > t_k": (2, 19, 6, 3, 5, True, None),
    "key_mask": (3, 9, 10, 8, 8, False, _mask(1, 3, 10)),
    "rows that see no key": (3, 9, 10, 8, 8, True, _mask(2, 3, 10, dead=1)),
    "d = 1": (2, 5, 7, 1, 1, False, None),
    "three passes of columns": (1, 9, 9, 20, 17, True, None),
    "one row, one key": (2, 1, 1, 4, 4, True, None),
    "N = 0": (0, 5, 7, 8, 4, False, None),
    "t_q = 0": (2, 0, 7, 8, 4, False, None),
    "t_k = 0": (2, 5, 0, 8, 4, True, None),
}
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}
OUTPUTS = ("O", "L", "dQ", "dK", "dV")
SEED = np.array(limbs_of(0x5A3C_96E1_7B2D_48F1))
COUNTER = np.array(limbs_of(2**64 - 300))  # a draw that wraps past 2**64 partway


def _inputs(name: str, dtype, dropout: float = 0.0) -> tuple[list[np.ndarray], np.ndarray | None, dict]:
    n, t_q, t_k, d, d_v, causal, key_mask = CASES[name]
    seeded = np.random.default_rng(len(name))
    q, k, v = (seeded.standard_normal(s).astype(dtype) for s in ((n, t_q, d), (n, t_k, d), (n, t_k, d_v)))
    params = dict(causal=causal, scale=0.4, masked=key_mask is not None)
    if dropout:
        params["dropout"] = dropout
    return [q, k, v], key_mask, params


def _references(name: str, dtype, dropout: float = 0.0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The references' O, L, dQ, dK, dV in the kernels' dtypes, and what the backward kernels are fed: the
    reference's O (rounded to q's dtype), L, and a dO."""
    (q, k, v), key_mask, params = _inputs(name, dtype, dropout)
    causal, scale = params["causal"], params["scale"]
    wide = np.float64 if dtype == np.float64 else np.float32
    shape = (q.shape[0], q.shape[1], k.shape[1])
    drop = sdpa.dropout_factors(SEED, COUNTER, dropout, shape, np.dtype(wide)) if dropout else None
    out, lse = sdpa.forward(q, k, v, key_mask, causal, scale, drop=drop)
    out = out.astype(dtype)
    d_out = np.random.default_rng(1).standard_normal(out.shape).astype(dtype)
    d_q = sdpa.backward_q(q, k, v, key_mask, out, lse, d_out, causal, scale, drop=drop).astype(dtype)
    d_kv = sdpa.backward_kv(q, k, v, key_mask, out, lse, d_out, causal, scale, drop=drop)
    return [out, lse, d_q, *(x.astype(dtype) for x in d_kv)], [out, lse, d_out]


def _run_kernels(device: str, name: str, dtype, dropout: float = 0.0) -> list[np.ndarray]:
    """O, L, dQ, dK, dV from the three kernels on `device`, the backward ones fed the reference's O and L."""
    (q, k, v), key_mask, params = _inputs(name, dtype, dropout)
    _, (out, lse, d_out) = _references(name, dtype, dropout)
    limn.set_device(device)
    extras = ([] if key_mask is None else [key_mask]) + ([SEED, COUNTER] if dropout else [])
    ins = [Tensor(x) for x in (q, k, v, *extras)]
    results = custom_call.apply("sdpa", *ins, **params)
    grads_in = [*ins, Tensor(out), Tensor(lse), Tensor(d_out)]
    results += custom_call.apply("sdpa_bwd_q", *grads_in, **params) + custom_call.apply(
        "sdpa_bwd_kv", *grads_in, **params
    )
    assert all(r.node.op is Op.CUSTOM for r in results), "the device's kernels ran, not the composition"
    limn.realize(*results)
    return [x.numpy() for x in results]


def _check_against_references(got: list[np.ndarray], want: list[np.ndarray], name: str, tol: float) -> None:
    for what, g, w in zip(OUTPUTS, got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: {g.dtype}{g.shape}, not {w.dtype}{w.shape}"
        g32, w32 = g.astype(np.float64), w.astype(np.float64)
        np.testing.assert_allclose(g32, w32, rtol=tol, atol=tol, err_msg=f"{name}: {what}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", CASES)
def test_the_kernels_equal_the_numpy_references(name: str, dtype) -> None:
    got = _run_kernels("cuda-sim", name, dtype)
    _check_against_references(got, _references(name, dtype)[0], name, TOLERANCE[dtype])
    if name == "rows that see no key":
        assert np.isneginf(got[1][1]).all() and not got[0][1].any(), "a dead row: L = -inf, O = 0"
        assert not got[2][1].any() and not got[3][1].any() and not got[4][1].any(), "and no gradient"
    for what, g in zip(OUTPUTS, got):
        assert not np.isnan(g).any(), f"{name}: {what} holds a nan"


DROPOUT_CASES = ["ragged tiles and passes", "causal t_q > t_k", "rows that see no key", "three passes of columns"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=["float32", "float64", "float16"])
@pytest.mark.parametrize("name", DROPOUT_CASES)
def test_the_kernels_with_dropout_equal_the_numpy_references(name: str, dtype) -> None:
    got = _run_kernels("cuda-sim", name, dtype, dropout=0.3)
    tol = TOLERANCE.get(dtype) or 2 * float(ml_dtypes.finfo(dtype).eps)
    _check_against_references(got, _references(name, dtype, dropout=0.3)[0], name, tol)
    assert not _same_bits(got[0], _run_kernels("cuda-sim", name, dtype)[0]), "dropout changed nothing"


@pytest.mark.parametrize("dtype", list(HALVES), ids=list(HALVES.values()))
@pytest.mark.parametrize("name", ["ragged tiles and passes", "rows that see no key", "t_q > t_k, rows past two blocks"])
def test_half_widths_compute_in_float32_and_round_once(name: str, dtype) -> None:
    """The references widen to float32 too and are rounded once here, so the two are a rounding or so apart."""
    got = _run_kernels("cuda-sim", name, dtype)
    tol = 2 * float(ml_dtypes.finfo(dtype).eps)
    _check_against_references(got, _references(name, dtype)[0], name, tol)
    assert got[1].dtype == np.float32, "L is float32 for a half width"


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=["float32", "float64", "float16"])
@pytest.mark.parametrize("name", ["ragged tiles and passes", "three passes of columns"])
def test_the_same_bits_twice_and_from_any_grid(name: str, dtype) -> None:
    """The fold order is the tiles', not the grid's: one block walking every tile gives what four give."""
    first = _run_kernels("cuda-sim", name, dtype)
    for device in ("cuda-sim", "cuda-sim-1block"):
        for what, a, b in zip(OUTPUTS, first, _run_kernels(device, name, dtype)):
            assert _same_bits(a, b), f"{name} {what}: {device} differs from the first run"


def _custom_names(*tensors: Tensor) -> set[str]:
    return {n.arg.name for n in toposort([t.node for t in tensors]) if n.op is Op.CUSTOM}


def _attention_step(dtype, dropout: float = 0.0) -> tuple[list[np.ndarray], set[str]]:
    """Causal attention with a padding mask over (2, 3) heads on the current device: O and the gradients of q,
    k, v through a weighted sum, and the CUSTOM kernels the graphs hold."""
    rng = np.random.default_rng(7)
    x = [rng.standard_normal(s).astype(dtype) for s in ((2, 3, 10, 6), (2, 3, 13, 6), (2, 3, 13, 5))]
    mask, w = _mask(3, 2, 13)[:, None], rng.standard_normal((2, 3, 10, 5)).astype(dtype)
    ours = [Tensor(a, requires_grad=True) for a in x]
    limn.manual_seed(6)
    out = Tensor.scaled_dot_product_attention(*ours, causal=True, key_mask=Tensor(mask), dropout_p=dropout)
    (out * Tensor(w)).sum().backward()
    names = _custom_names(out, *(t.grad for t in ours))
    return [t.numpy().astype(np.float64) for t in (out, *(a.grad for a in ours))], names


@pytest.mark.parametrize("dropout", [0.0, 0.25], ids=["no dropout", "dropout"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, *HALVES], ids=["float32", "float64", *HALVES.values()])
def test_the_frontend_on_cuda_sim_runs_the_kernels_and_is_the_numpy_devices(dtype, dropout: float) -> None:
    limn.set_device("cuda-sim")
    got, names = _attention_step(dtype, dropout)
    assert names == {"sdpa", "sdpa_bwd_q", "sdpa_bwd_kv"}
    limn.set_device("numpy")
    want, _ = _attention_step(dtype, dropout)
    tol = {np.float32: 1e-5, np.float64: 1e-12}.get(dtype) or 2 * float(ml_dtypes.finfo(dtype).eps)
    for what, g, w in zip(("O", "dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=what)


def test_a_dtype_the_kernels_lack_is_refused_naming_the_ones_they_take() -> None:
    x = Tensor(np.ones((1, 2, 2), np.float32))
    (kernel,) = [k for k in ir(*custom_call.apply("sdpa", x, x, x, causal=False, scale=1.0, masked=False)).kernels]
    as_ints = replace(kernel, inputs=tuple(replace(b, dtype=limn.int32) for b in kernel.inputs))
    with pytest.raises(DeviceError, match=r"take float32, float64, float16, bfloat16, not int32"):
        cuda_attention.launch(as_ints, TILES)


# ---- the GPU build: NVRTC's CUBIN and ptxas's report; the cuda device on the emulated driver ----


@pytest.mark.parametrize("arch", [80, 90])
def test_the_kernels_compile_to_cubin_without_spills_within_the_shared_limit(arch: int) -> None:
    cuda_nvrtc = pytest.importorskip("limn.cuda.nvrtc")
    from limn.cuda.prelude import PRELUDE

    try:
        cuda_nvrtc.nvrtc_version()
    except DeviceError:
        pytest.skip("needs NVRTC (pip install limn-cuda[nvrtc])")
    tiles = cuda_attention.GPU
    compiled = cuda_nvrtc.compile(PRELUDE + cuda_attention.source(tiles), "limn_sdpa.cu", arch, cubin=True)
    for dtype, (_, _, real, _) in cuda_attention.WIDTHS.items():
        for name in cuda_attention.NAMES:
            report = compiled.resources[cuda_attention.function_name(name, dtype)]
            what = f"{report.name} on sm_{arch}"
            assert report.entry and 0 < report.registers <= 255, what
            assert (report.spill_store_bytes, report.spill_load_bytes, report.stack_bytes) == (0, 0, 0), what
            assert report.shared_bytes == tiles.shared_bytes(name, real) <= cuda_attention.STATIC_SHARED_LIMIT, what


EMULATED = [
    ("ragged tiles and passes", np.float32),
    ("t_q > t_k, rows past two blocks", np.float32),
    ("t_k = 0", np.float32),
    ("ragged tiles and passes", np.float64),
    ("rows that see no key", ml_dtypes.bfloat16),
]


@pytest.mark.parametrize("name, dtype", EMULATED, ids=[f"{n}-{np.dtype(d).name}" for n, d in EMULATED])
def test_the_cuda_device_runs_them_on_the_emulated_driver(emulated_cuda, name: str, dtype) -> None:  # noqa: F811
    """The GPU's tiles (cuda_attention.GPU), run by the emulated driver in blocks of 32 threads: the kernels
    read blockDim, so a block smaller than the one asked for still covers every row."""
    got = _run_kernels("cuda", name, dtype)
    tol = TOLERANCE.get(dtype) or 2 * float(ml_dtypes.finfo(dtype).eps)
    _check_against_references(got, _references(name, dtype)[0], name, tol)
    suffix = cuda_attention.WIDTHS[dtypes.from_numpy(np.dtype(dtype))][0]
    launched = {launch[0] for launch in emulated_cuda.launches}
    t_k = CASES[name][2]
    kernels = ["sdpa", "sdpa_bwd_q", *(["sdpa_bwd_kv"] if t_k else [])]
    assert launched == {f"limn_{k}_{suffix}" for k in kernels}
    blocks = {launch[2] for launch in emulated_cuda.launches if launch[0].startswith("limn_sdpa")}
    assert blocks == {cuda_attention.GPU.block}, "the block the kernels were written for"


@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_a_nan_key_reaches_the_rows_that_see_it_as_the_references_say(causal: bool) -> None:
    """The kernels agree with the numpy references where NaN goes: every row that sees key 5 (a NaN in it) is
    NaN with its L, the causal rows before it stay finite, and a masked key's P and dS are exactly 0 even in a
    NaN row (NaN positions compared too)."""
    n, t_q, t_k, d, d_v = 2, 11, 9, 8, 4
    seeded = np.random.default_rng(7)
    q, k, v = (seeded.standard_normal(s).astype(np.float32) for s in ((n, t_q, d), (n, t_k, d), (n, t_k, d_v)))
    k[:, 5, 0] = np.nan
    key_mask = np.ones((n, t_k), bool)
    key_mask[:, 7] = False
    params = dict(causal=causal, scale=0.4, masked=True)
    out, lse = sdpa.forward(q, k, v, key_mask, causal, 0.4)
    d_out = seeded.standard_normal(out.shape).astype(np.float32)
    want = [
        out,
        lse,
        sdpa.backward_q(q, k, v, key_mask, out, lse, d_out, causal, 0.4),
        *sdpa.backward_kv(q, k, v, key_mask, out, lse, d_out, causal, 0.4),
    ]
    assert np.isnan(out[:, 5:]).all() and (np.isfinite(out[:, :5]).all() if causal else np.isnan(out).all())
    limn.set_device("cuda-sim")
    ins = [Tensor(x) for x in (q, k, v, key_mask)]
    results = custom_call.apply("sdpa", *ins, **params)
    grads_in = [*ins, Tensor(out), Tensor(lse), Tensor(d_out)]
    results += custom_call.apply("sdpa_bwd_q", *grads_in, **params)
    results += custom_call.apply("sdpa_bwd_kv", *grads_in, **params)
    for what, got, ref in zip(OUTPUTS, results, want):
        np.testing.assert_allclose(got.numpy(), ref.astype(np.float32), rtol=1e-5, atol=1e-5, err_msg=what)
