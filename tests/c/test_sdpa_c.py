"""The c device's fused attention kernels (limn.c.attention) against the numpy references of
limn.composed.functional.sdpa:
- sdpa, sdpa_bwd_q and sdpa_bwd_kv called through custom_call.apply on c, diffed against sdpa.forward, backward_q and
  backward_kv (float32 at 1e-5, float64 at 1e-12) over t_q != t_k both ways, causal, key_mask, both, rows
  that see no key, d = 1, 32, 80 and 128 (rows used in place, rows padded to whole vectors), tiles that are
  ragged in rows and keys, N = 0 and t_k = 0;
- with dropout (params["dropout"], the seed and counter limbs as inputs), the same against the references given
  the same factors (sdpa.dropout_factors), a counter that wraps past 2**64 included;
- threaded equals serial bit for bit (and a team of 5), and two runs give the same bits, dropout too;
- the frontend on c (Tensor.scaled_dot_product_attention and its backward) is torch's, runs the three CUSTOM
  kernels, and its backward schedules no buffer of the scores' (t_q, t_k) shape; half widths are computed
  in float32 and rounded once, as the numpy device does; L alone is a realize of its own;
- (isa) gcc vectorizes the kernels' elementwise loops (the masks, the exp, the rescales, dropout's hash) and
  every product of two tiles is a register tile of vector fmas on x86-64-v3 and v4."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

import limn
from limn import Tensor
from limn.c import attention as c_attention
from limn.c.device import CDevice
from limn.c.prelude import PRELUDE
from limn.compiler.codegen import ir
from limn.composed.functional import sdpa
from limn.composed.random.rng import limbs_of
from limn.frontend import custom_call
from limn.graph.ops import Op, toposort


def _team_of_five() -> CDevice:
    device = CDevice()
    device.options.threads = 5  # more threads than work items in some cases, fewer in others
    return device


limn.register_device("c_serial", lambda: CDevice(threads=False))
limn.register_device("c_team5", _team_of_five)

rng = np.random.default_rng(0)


def r(*shape: int, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def _mask(n: int, t_k: int, dead: int | None = None) -> np.ndarray:
    m = rng.random((n, t_k)) < 0.6
    m[:, 0] = True
    if dead is not None:
        m[dead] = False  # batch row `dead` sees no key at all
    return m


# name -> (n, t_q, t_k, d, d_v, causal, key_mask or None)
CASES = {
    "t_q < t_k": (3, 5, 7, 8, 4, False, None),
    "t_q > t_k": (3, 7, 5, 8, 4, False, None),
    "causal t_q < t_k": (3, 5, 7, 8, 4, True, None),
    "causal t_q > t_k": (3, 7, 5, 8, 4, True, None),
    "key_mask": (3, 5, 7, 8, 4, False, _mask(3, 7)),
    "key_mask + causal": (3, 9, 7, 8, 4, True, _mask(3, 7)),
    "rows that see no key": (3, 5, 7, 8, 4, True, _mask(3, 7, dead=1)),
    "d = 1": (2, 5, 7, 1, 1, False, None),
    "d = 128": (2, 9, 11, 128, 128, True, None),
    "d = 80, rows of padded vectors": (2, 70, 131, 80, 48, True, _mask(2, 131)),
    "d = 32, rows of whole vectors": (2, 130, 70, 32, 64, False, None),
    "ragged tiles": (2, 67, 130, 8, 8, True, _mask(2, 130)),
    "one row, one key": (2, 1, 1, 8, 4, True, None),
    "N = 0": (0, 5, 7, 8, 4, False, None),
    "t_k = 0": (2, 5, 0, 8, 4, False, None),
}
TOLERANCE = {np.float32: 1e-5, np.float64: 1e-12}
DROPOUT_CASES = ["causal t_q > t_k", "key_mask + causal", "rows that see no key", "ragged tiles", "d = 128"]
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


def _factors(q: np.ndarray, k: np.ndarray, params: dict) -> np.ndarray | None:
    if "dropout" not in params:
        return None
    shape = (q.shape[0], q.shape[1], k.shape[1])
    return sdpa.dropout_factors(SEED, COUNTER, params["dropout"], shape, np.dtype(q.dtype))


def _run_kernels(device: str, name: str, dtype, dropout: float = 0.0) -> list[np.ndarray]:
    """O, L, dQ, dK, dV from the three kernels on `device`, the backward ones fed the reference's O and L."""
    (q, k, v), key_mask, params = _inputs(name, dtype, dropout)
    masks = ([] if key_mask is None else [key_mask]) + ([SEED, COUNTER] if dropout else [])
    out, lse = sdpa.forward(q, k, v, key_mask, params["causal"], params["scale"], drop=_factors(q, k, params))
    d_out = np.random.default_rng(1).standard_normal(out.shape).astype(dtype)
    limn.set_device(device)
    ins = [Tensor(x) for x in (q, k, v, *masks)]
    results = custom_call.apply("sdpa", *ins, **params)
    grads_in = [*ins, Tensor(out.astype(dtype)), Tensor(lse), Tensor(d_out)]
    results += custom_call.apply("sdpa_bwd_q", *grads_in, **params) + custom_call.apply(
        "sdpa_bwd_kv", *grads_in, **params
    )
    limn.realize(*results)
    return [x.numpy() for x in results]


def _references(name: str, dtype, dropout: float = 0.0) -> list[np.ndarray]:
    (q, k, v), key_mask, params = _inputs(name, dtype, dropout)
    causal, scale, drop = params["causal"], params["scale"], _factors(q, k, params)
    out, lse = sdpa.forward(q, k, v, key_mask, causal, scale, drop=drop)
    d_out = np.random.default_rng(1).standard_normal(out.shape).astype(dtype)
    out = out.astype(dtype)
    d_q = sdpa.backward_q(q, k, v, key_mask, out, lse, d_out, causal, scale, drop=drop)
    return [out, lse, d_q, *sdpa.backward_kv(q, k, v, key_mask, out, lse, d_out, causal, scale, drop=drop)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", CASES)
def test_the_c_kernels_equal_the_numpy_references(name: str, dtype) -> None:
    _assert_kernels_are_references(name, dtype, 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", DROPOUT_CASES)
def test_the_c_kernels_with_dropout_equal_the_numpy_references(name: str, dtype) -> None:
    _assert_kernels_are_references(name, dtype, 0.3)
    (q, k, _v), _mask, params = _inputs(name, dtype, 0.3)
    kept = (_factors(q, k, params) != 0).mean()
    assert 0.5 < kept < 0.9, f"{name}: {kept:.2f} of the weights kept at p = 0.3"


def _assert_kernels_are_references(name: str, dtype, dropout: float) -> None:
    tol = TOLERANCE[dtype]
    got, want = _run_kernels("c", name, dtype, dropout), _references(name, dtype, dropout)
    for what, g, w in zip(("O", "L", "dQ", "dK", "dV"), got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: {g.dtype}{g.shape}, not {w.dtype}{w.shape}"
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{name}: {what}")
    if name == "rows that see no key":
        assert np.isneginf(got[1][1]).all() and not got[0][1].any(), "a dead row: L = -inf, O = 0"
        assert not got[2][1].any() and not got[3][1].any() and not got[4][1].any(), "and no gradient"


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


BITS_CASES = {"ragged tiles": 0.0, "key_mask + causal": 0.0, "d = 128": 0.0, "ragged tiles, dropout": 0.2}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", BITS_CASES)
def test_threaded_equals_serial_bit_for_bit_and_two_runs_agree(name: str, dtype) -> None:
    case, dropout = name.split(",")[0], BITS_CASES[name]
    serial = _run_kernels("c_serial", case, dtype, dropout)
    for device in ("c", "c_team5", "c"):
        threaded = _run_kernels(device, case, dtype, dropout)
        for what, s, t in zip(("O", "L", "dQ", "dK", "dV"), serial, threaded):
            assert _same_bits(s, t), f"{name} {what}: {device} differs from serial"


def _custom_names(*tensors: Tensor) -> set[str]:
    return {n.arg.name for n in toposort([t.node for t in tensors]) if n.op is Op.CUSTOM}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_the_frontend_on_c_runs_the_kernels_and_is_torchs(dtype) -> None:
    """Causal attention with a padding mask over (2, 3) heads, forward and the gradients of q, k, v."""
    limn.set_device("c")
    x = [r(2, 3, 70, 16, dtype=dtype), r(2, 3, 90, 16, dtype=dtype), r(2, 3, 90, 8, dtype=dtype)]
    mask, w = _mask(2, 90)[:, None], r(2, 3, 70, 8, dtype=dtype)
    ours = [Tensor(a, requires_grad=True) for a in x]
    out = Tensor.scaled_dot_product_attention(*ours, causal=True, key_mask=Tensor(mask))
    (out * Tensor(w)).sum().backward()
    assert _custom_names(out, *(t.grad for t in ours)) == {"sdpa", "sdpa_bwd_q", "sdpa_bwd_kv"}

    theirs = [torch.tensor(a, requires_grad=True) for a in x]
    visible = torch.tensor(mask)[..., None, :] & torch.ones(70, 90, dtype=torch.bool).tril()
    want = torch.nn.functional.scaled_dot_product_attention(*theirs, attn_mask=visible)
    (want * torch.tensor(w)).sum().backward()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=tol, atol=tol)
    for mine, t in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)


def test_the_backward_on_c_schedules_no_buffer_of_the_scores_shape() -> None:
    """A training step's graph on c, forward and backward: no node and no scheduled buffer is (t_q, t_k)."""
    limn.set_device("c")
    q, k, v = (Tensor(x, requires_grad=True) for x in (r(2, 3, 5, 3), r(2, 3, 7, 3), r(2, 3, 7, 4)))
    out = Tensor.scaled_dot_product_attention(q, k, v, key_mask=Tensor(_mask(2, 7)[:, None]), causal=True)
    loss = (out * Tensor(r(2, 3, 5, 4))).sum()
    loss.backward()
    nodes = toposort([loss.node, q.grad.node, k.grad.node, v.grad.node])
    assert [n for n in nodes if n.shape[-2:] in ((5, 7), (7, 5))] == []
    program = ir(loss, q.grad, k.grad, v.grad)
    assert [s for s in program.schedule.slots if s.shape[-2:] in ((5, 7), (7, 5))] == []
    calls = sorted(k.custom for k in program.kernels if k.custom is not None)
    assert calls == ["sdpa", "sdpa_bwd_kv", "sdpa_bwd_q"]
    assert "CUSTOM  sdpa(in0, in1, in2, in3, causal=True, masked=True, scale=" in str(program), "params print"


def test_the_logsumexp_alone_is_a_realize_of_its_own() -> None:
    """L asked for without O: the call writes O into a scratch buffer (compiler.schedule) and L is the reference's."""
    limn.set_device("c")
    (q, k, v), key_mask, params = _inputs("key_mask + causal", np.float32)
    _out, lse = custom_call.apply("sdpa", Tensor(q), Tensor(k), Tensor(v), Tensor(key_mask), **params)
    want = sdpa.forward(q, k, v, key_mask, params["causal"], params["scale"])[1]
    np.testing.assert_allclose(lse.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dropout", [0.0, 0.3], ids=["no dropout", "dropout"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_half_widths_compute_in_float32_and_round_once_as_numpy(dtype, dropout: float) -> None:
    """With dropout too: one seed draws one mask on both devices (a float32 uniform number per weight)."""
    x = [r(2, 9, 8).astype(dtype), r(2, 11, 8).astype(dtype), r(2, 11, 4).astype(dtype)]
    results = {}
    for device in ("numpy", "c"):
        limn.set_device(device)
        limn.manual_seed(3)
        ours = [Tensor(a, requires_grad=True) for a in x]
        out = Tensor.scaled_dot_product_attention(*ours, causal=True, dropout_p=dropout)
        out.sum().backward()
        assert out.numpy().dtype == dtype and _custom_names(out, ours[0].grad) == {"sdpa", "sdpa_bwd_q"}
        results[device] = [t.numpy().astype(np.float32) for t in (out, *(a.grad for a in ours))]
    tol = float(ml_dtypes.finfo(dtype).eps)  # one rounding apart at most
    for c, numpy in zip(results["c"], results["numpy"]):
        np.testing.assert_allclose(c, numpy, rtol=tol, atol=tol)


# ---- (isa) the inner loops vectorize ----

# the float32 loops that must be vector code, by a piece of their statement
VECTOR_LOOPS = {
    "scores scaled and masked, the running max (forward)": "sj[r] = limn_pickf(r >= from, sj[r] * scale, -INFINITY)",
    "the exp of a tile (forward)": "sj[r] = limn_expf(sj[r] - shift[r])",
    "the running sums rescaled (forward)": "acc[r * dvp + c] = acc[r * dvp + c] * rescale[r]",
    "recomputed P, a row per key (dQ)": "const float p = limn_pickf(visible, limn_expf(st[r] * scale - lse[r]), 0)",
    "recomputed P, a row per query (dK, dV)": "const float p = limn_pickf(visible, limn_expf(s[j] * scale - lse), 0)",
    "dropout's factors, a Squares word each": "z[c] = limn_sdpa_keep_f(drop, first + c * step, factor)",
    "dropout on a forward tile": "st[j * LIMN_SDPA_ROWS + r] *= z[r]",
}
REGISTER = {"x86-64-v3": "ymm", "x86-64-v4": "zmm"}  # the vector registers of each target


def _compile(march: str, tmp: str, width: str, *extra: str) -> tuple[str, str]:
    """The prelude and one width's kernels built for `march`: the C unit and what gcc wrote with `extra` (a
    report or asm)."""
    device = CDevice(march=march)
    flags = [f for f in device.toolchain.flags if f != "-shared"]
    unit = PRELUDE + c_attention.source(width)
    path = Path(tmp) / "attention.c"
    path.write_text(unit)
    out = Path(tmp) / "a.out"
    cmd = [device.toolchain.cc, *flags, *extra, str(path), "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return unit, done.stderr if "-c" in extra else out.read_text()


@pytest.mark.isa
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc: its -fopt-info report is what is read")
@pytest.mark.parametrize("march", ["x86-64-v3", "x86-64-v4"])
def test_the_inner_loops_vectorize(march: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        unit, report = _compile(march, tmp, "f32", "-fopt-info-vec-optimized", "-c")
    vectorized = {int(m) for m in re.findall(r"attention\.c:(\d+):\d+: optimized: loop vectorized", report)}
    lines = unit.splitlines()
    for what, text in VECTOR_LOOPS.items():
        held = [i for i, line in enumerate(lines, 1) if text in line]
        assert held, f"{what}: no line holds {text!r}"
        at = [max(n for n in range(1, i + 1) if "for (" in lines[n - 1]) for i in held]  # the loop's `for` line
        assert all(i in vectorized for i in at), f"{what} ({march}): gcc did not vectorize lines {at}\n{report}"


@pytest.mark.isa
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc: its assembly is what is read")
@pytest.mark.parametrize("march", ["x86-64-v3", "x86-64-v4"])
def test_the_tile_products_are_vector_fmas(march: str) -> None:
    """limn_sdpa_gemm (every product of two tiles) keeps its register tile in the target's widest registers."""
    with tempfile.TemporaryDirectory() as tmp:
        asm = "".join(_compile(march, tmp, width, "-S")[1] for width in c_attention.WIDTHS)
    bodies = re.findall(r"^(limn_sdpa_gemm_f(?:32|64)[\w.]*):\n(.*?)\.size", asm, flags=re.S | re.M)
    assert {name.split(".")[0] for name, _ in bodies} == {"limn_sdpa_gemm_f32", "limn_sdpa_gemm_f64"}, asm[:2000]
    tile_rows = 8 if march == "x86-64-v4" else 4  # LIMN_SDPA_MR, rows of two vectors each
    for name, body in bodies:
        kind = "ps" if name.startswith("limn_sdpa_gemm_f32") else "pd"
        fmas = re.findall(rf"vfmadd\d*{kind}\s[^\n]*%{REGISTER[march]}", body)
        assert len(fmas) >= 2 * tile_rows, f"{name} ({march}): {len(fmas)} vector fmas, want a tile's {2 * tile_rows}"
