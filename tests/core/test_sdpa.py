"""Fused attention (limn.composed.functional.sdpa: the CUSTOM ops sdpa, sdpa_bwd_q, sdpa_bwd_kv and their numpy
references) against torch's F.scaled_dot_product_attention (a key_mask spelled to torch as attn_mask), then against the
composition:
 - forward and the gradients of q, k, v (and of a weight on the output, so dO is not all ones) on numpy
   and c run as CUSTOM kernels (c's are limn.c.attention, tests/c/test_sdpa_c.py): t_q != t_k, d = 1, t = 1,
   ragged tiles, batch and head dims (0 included), causal top-left as torch's, key_mask, both, dead rows;
 - float16 and bfloat16 on numpy, computed in float32 and diffed at their own rounding;
 - a key_mask is the same as slicing the hidden keys away; the references called directly, at several tile
   sizes, equal the composition; the fused backward holds no (t_q, t_k) node and a training step schedules
   one call of each kernel; create_graph=True gets the composed backward and its second derivative is
   torch's; bad shapes and dtypes raise, naming the shapes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
from oracle import Table, case

import limn
from limn import Tensor
from limn.autograd import grad
from limn.compiler.schedule import schedule
from limn.composed.functional import attention, sdpa
from limn.frontend import custom_call
from limn.graph.ops import Op, toposort

rng = np.random.default_rng(0)


def r(*shape: int, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


F = "torch.nn.functional.scaled_dot_product_attention"
S = "Tensor.scaled_dot_product_attention"
TRIL = "torch.ones({t_q}, {t_k}, dtype=torch.bool).tril()"


def row(id: str, q: np.ndarray, k: np.ndarray, v: np.ndarray, ours: str = "", theirs: str = "", **inputs):
    """One table row: attention times a random weight w (so dO is not all ones), limn's keywords and torch's."""
    w = r(*np.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], v.shape[-1], dtype=q.dtype)
    return case(f"{S}(q, k, v{ours}) * w", f"{F}(q, k, v{theirs}) * w", q=q, k=k, v=v, w=w, id=id, **inputs)


def _mask(*shape: int, dead: tuple = ()) -> np.ndarray:
    m = rng.random(shape) < 0.6
    m[..., 1] = True  # every query sees a key, except in the rows made dead below
    for index in dead:
        m[index] = False
    return m


Q, K, V = r(2, 3, 5, 8), r(2, 3, 7, 8), r(2, 3, 7, 4)
Q64, K64, V64 = (x.astype(np.float64) for x in (Q, K, V))
MASK = _mask(2, 1, 7)  # one flag per key, shared by the heads
DEAD = _mask(2, 3, 7, dead=((1, 2),))  # batch 1, head 2 sees no key at all
CAUSAL_DEAD = _mask(2, 3, 7)
CAUSAL_DEAD[:, :, 0] = False  # with causal, query 0 sees only key 0: its row is dead
Q_RAGGED, K_RAGGED, V_RAGGED = r(1, 2, 67, 8), r(1, 2, 130, 8), r(1, 2, 130, 8)

TABLE = Table(
    [
        row("t_q < t_k", Q, K, V),
        row("t_q > t_k", K, Q, Q[..., :4]),
        row("float64", Q64, K64, V64),
        row("causal square", Q, Q, Q, ", causal=True", ", is_causal=True"),
        row("causal t_q < t_k (top-left)", Q, K, V, ", causal=True", ", is_causal=True"),
        row("causal t_q > t_k (top-left)", K, Q, Q[..., :4], ", is_causal=True", ", is_causal=True"),
        row("causal float64", Q64, K64, V64, ", causal=True", ", is_causal=True"),
        row("key_mask", Q, K, V, ", key_mask=m", ", attn_mask=m[..., None, :]", m=MASK),
        row(
            "key_mask + causal",
            Q,
            K,
            V,
            ", key_mask=m, causal=True",
            f", attn_mask=m[..., None, :] & {TRIL.format(t_q=5, t_k=7)}",
            m=MASK,
        ),
        row("key_mask float64", Q64, K64, V64, ", key_mask=m", ", attn_mask=m[..., None, :]", m=MASK),
        row("a head that sees no key", Q, K, V, ", key_mask=m", ", attn_mask=m[..., None, :]", m=DEAD),
        row(
            "a causal row that sees no key",
            Q,
            K,
            V,
            ", key_mask=m, causal=True",
            f", attn_mask=m[..., None, :] & {TRIL.format(t_q=5, t_k=7)}",
            m=CAUSAL_DEAD,
        ),
        row("d = 1", r(2, 5, 1), r(2, 7, 1), r(2, 7, 1)),
        row("d = 80", r(2, 9, 80), r(2, 11, 80), r(2, 11, 80), ", causal=True", ", is_causal=True"),
        row("d = 128, float64", *(r(2, 9, 128, dtype=np.float64) for _ in range(3))),
        row("t = 1", r(3, 1, 8), r(3, 1, 8), r(3, 1, 8), ", causal=True", ", is_causal=True"),
        row("no batch dims", Q[0, 0], K[0, 0], V[0, 0]),
        row("batch of 0", r(0, 3, 5, 8), r(0, 3, 7, 8), r(0, 3, 7, 4)),
        row("batch dims broadcast", Q, K[:1], V[:1]),
        row("ragged tiles", Q_RAGGED, K_RAGGED, V_RAGGED, ", causal=True", ", is_causal=True"),
        row("scale", Q, K, V, ", scale=0.3", ", scale=0.3"),
        row(
            "key_mask with a float attn_mask (composed)",
            Q,
            K,
            V,
            ", attn_mask=a, key_mask=m",
            ", attn_mask=a.masked_fill(~m[..., None, :], -math.inf)",
            a=r(5, 7),
            m=MASK,
        ),
        row("gqa", Q, K[:, :1], V[:, :1], ", enable_gqa=True", ", enable_gqa=True"),
    ]
)


@pytest.mark.parametrize("name", TABLE.ids)
def test_fused_attention_matches_torch(device: str, name: str) -> None:
    TABLE.assert_agrees(device, name)


def _custom_names(*tensors: Tensor) -> set[str]:
    return {n.arg.name for n in toposort([t.node for t in tensors]) if n.op is Op.CUSTOM}


def test_numpy_and_c_run_the_custom_kernels(device: str) -> None:
    q, k, v = (Tensor(x, requires_grad=True) for x in (Q, K, V))
    out = Tensor.scaled_dot_product_attention(q, k, v, key_mask=Tensor(MASK), causal=True)
    out.sum().backward()
    assert _custom_names(out, q.grad, k.grad, v.grad) == {"sdpa", "sdpa_bwd_q", "sdpa_bwd_kv"}


def test_a_general_mask_or_a_dropout_of_one_is_composed_even_where_the_kernels_are() -> None:
    """A dropout below 1 stays fused (tests/core/test_sdpa_dropout.py); one of 1 drops every weight."""
    q = Tensor(Q)
    assert _custom_names(Tensor.scaled_dot_product_attention(q, q, q, attn_mask=Tensor(Q[..., :5] > 0))) == set()
    assert _custom_names(Tensor.scaled_dot_product_attention(q, q, q, dropout_p=1.0)) == set()
    assert _custom_names(Tensor.scaled_dot_product_attention(q, q, q, dropout_p=0.5)) == {"sdpa"}


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_half_widths_compute_in_float32_and_round_once(dtype) -> None:
    tol = 4 * float(ml_dtypes.finfo(dtype).eps)
    narrow = [x.astype(dtype) for x in (Q, K, V)]
    w = r(2, 3, 5, 4)
    ours = [Tensor(x, requires_grad=True) for x in narrow]
    out = Tensor.scaled_dot_product_attention(*ours, key_mask=Tensor(MASK), causal=True)
    (out * Tensor(w.astype(dtype))).sum().backward()
    theirs = [torch.tensor(x.astype(np.float32), requires_grad=True) for x in narrow]
    mask = torch.tensor(MASK)[..., None, :] & torch.ones(5, 7, dtype=torch.bool).tril()
    want = torch.nn.functional.scaled_dot_product_attention(*theirs, attn_mask=mask)
    (want * torch.tensor(w.astype(dtype).astype(np.float32))).sum().backward()
    assert out.numpy().dtype == dtype
    np.testing.assert_allclose(out.numpy().astype(np.float32), want.detach().numpy(), rtol=tol, atol=tol)
    for mine, t in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad.numpy().astype(np.float32), t.grad.numpy(), rtol=tol, atol=tol)


def test_a_key_mask_is_slicing_the_hidden_keys_away(device: str) -> None:
    keep = np.array([0, 2, 3, 6])
    mask = np.zeros(7, bool)
    mask[keep] = True
    q, k, v = (Tensor(x, requires_grad=True) for x in (Q64, K64, V64))
    masked = Tensor.scaled_dot_product_attention(q, k, v, key_mask=Tensor(mask))
    q2, k2, v2 = (Tensor(x, requires_grad=True) for x in (Q64, K64[..., keep, :], V64[..., keep, :]))
    sliced = Tensor.scaled_dot_product_attention(q2, k2, v2)
    w = Tensor(r(2, 3, 5, 4, dtype=np.float64))
    ((masked * w).sum() + (sliced * w).sum()).backward()
    np.testing.assert_allclose(masked.numpy(), sliced.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(q.grad.numpy(), q2.grad.numpy(), rtol=1e-12, atol=1e-12)
    for full, part in ((k.grad.numpy(), k2.grad.numpy()), (v.grad.numpy(), v2.grad.numpy())):
        np.testing.assert_allclose(full[..., keep, :], part, rtol=1e-12, atol=1e-12)
        assert not full[..., ~mask, :].any(), "a hidden key gets no gradient"


REFERENCE_CASES = {
    "plain": dict(causal=False, masked=False),
    "causal": dict(causal=True, masked=False),
    "key_mask + causal, dead rows": dict(causal=True, masked=True),
}


@pytest.mark.parametrize("tile", [1, 3, 64])
@pytest.mark.parametrize("name", REFERENCE_CASES)
def test_the_references_equal_the_composition(name: str, tile: int) -> None:
    """sdpa.forward, backward_q and backward_kv, called directly, against attention's composition and its
    autograd gradients, in float64, with tiles of 1, of 3 (ragged over 5 queries and 7 keys) and one tile."""
    causal, masked = REFERENCE_CASES[name]["causal"], REFERENCE_CASES[name]["masked"]
    q, k, v = r(6, 5, 3, dtype=np.float64), r(6, 7, 3, dtype=np.float64), r(6, 7, 2, dtype=np.float64)
    d_out = r(6, 5, 2, dtype=np.float64)
    key_mask = CAUSAL_DEAD.reshape(6, 7) if masked else None
    out, lse = sdpa.forward(q, k, v, key_mask, causal, 0.4, tile=tile)
    d_q = sdpa.backward_q(q, k, v, key_mask, out, lse, d_out, causal, 0.4, tile=tile)
    d_k, d_v = sdpa.backward_kv(q, k, v, key_mask, out, lse, d_out, causal, 0.4, tile=tile)

    tq, tk, tv = (Tensor(x, requires_grad=True) for x in (q, k, v))
    mask = None if key_mask is None else Tensor(key_mask)
    want = attention.composed(tq, tk, tv, None, 0.0, causal, 0.4, mask)
    want_lse = attention.masked_scores(tq, tk, 0.4, causal=causal, key_mask=mask).logsumexp(-1)
    (want * Tensor(d_out)).sum().backward()
    for got, expected in ((out, want), (lse, want_lse), (d_q, tq.grad), (d_k, tk.grad), (d_v, tv.grad)):
        np.testing.assert_allclose(got, expected.numpy(), rtol=1e-12, atol=1e-12)
    if masked:
        assert np.isneginf(lse[:, 0]).all() and not out[:, 0].any(), "a dead row: L = -inf, O = 0"


def test_the_fused_backward_never_holds_a_score_matrix() -> None:
    """On numpy (which has the kernels) no node of forward or backward has the (t_q, t_k) of the scores."""
    q, k, v = (Tensor(x, requires_grad=True) for x in (r(2, 3, 5, 3), r(2, 3, 7, 3), r(2, 3, 7, 4)))
    out = Tensor.scaled_dot_product_attention(q, k, v, key_mask=Tensor(MASK), causal=True)
    (out * Tensor(r(2, 3, 5, 4))).sum().backward()
    nodes = toposort([q.grad.node, k.grad.node, v.grad.node])
    assert {"sdpa", "sdpa_bwd_q", "sdpa_bwd_kv"} <= {n.arg.name for n in nodes if n.op is Op.CUSTOM}
    scores = [n for n in nodes if n.shape[-2:] in ((5, 7), (7, 5))]
    assert scores == [], f"nodes of the scores' shape: {[(n.op, n.shape) for n in scores]}"


def test_a_training_step_schedules_one_call_of_each_kernel() -> None:
    """Forward and backward in one graph: sdpa runs once, writing O and L (the backward reads the forward's own
    sibling nodes), then sdpa_bwd_q and sdpa_bwd_kv (which writes dK and dV) once each."""
    q, k, v = (Tensor(x, requires_grad=True) for x in (Q, K, V))
    out = Tensor.scaled_dot_product_attention(q, k, v, key_mask=Tensor(MASK), causal=True)
    loss = (out * Tensor(r(2, 3, 5, 4))).sum()
    loss.backward()
    kernels = schedule([loss.node, q.grad.node, k.grad.node, v.grad.node]).kernels
    calls = sorted((k.form.arg.name, len(k.outputs)) for k in kernels if k.op is Op.CUSTOM)
    assert calls == [("sdpa", 2), ("sdpa_bwd_kv", 2), ("sdpa_bwd_q", 1)]


def test_create_graph_gets_the_composed_backward_and_second_derivatives_are_torchs(device: str) -> None:
    x = [r(2, 2, 5, 3, dtype=np.float64), r(2, 2, 7, 3, dtype=np.float64), r(2, 2, 7, 4, dtype=np.float64)]
    w, u = r(2, 2, 5, 4, dtype=np.float64), [r(*a.shape, dtype=np.float64) for a in x]
    ours = [Tensor(a, requires_grad=True) for a in x]
    out = Tensor.scaled_dot_product_attention(*ours, key_mask=Tensor(MASK), causal=True)
    firsts = grad((out * Tensor(w)).sum(), ours, create_graph=True)
    assert "sdpa_bwd_q" not in _custom_names(*firsts), "create_graph=True composes the backward"
    total = sum(((g * Tensor(c)).sum() for g, c in zip(firsts, u)), Tensor(0.0, dtype=limn.float64))
    total.backward()

    theirs = [torch.tensor(a, requires_grad=True) for a in x]
    mask = torch.tensor(MASK)[..., None, :] & torch.ones(5, 7, dtype=torch.bool).tril()
    t_out = torch.nn.functional.scaled_dot_product_attention(*theirs, attn_mask=mask)
    t_firsts = torch.autograd.grad((t_out * torch.tensor(w)).sum(), theirs, create_graph=True)
    sum((g * torch.tensor(c)).sum() for g, c in zip(t_firsts, u)).backward()
    for mine, t_first in zip(firsts, t_firsts):
        np.testing.assert_allclose(mine.numpy(), t_first.detach().numpy(), rtol=1e-10, atol=1e-10)
    for mine, t in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_the_logsumexp_output_and_its_gradient_are_torchs() -> None:
    """L, the second output of sdpa (the frontend keeps it internal), is the row logsumexp of the visible
    scores, -inf for a row that sees none; its gradient (composed) is torch's logsumexp's."""
    q3, k3, v3 = Q64.reshape(6, 5, 8), K64.reshape(6, 7, 8), V64.reshape(6, 7, 4)
    mask = CAUSAL_DEAD.reshape(6, 7)
    _out, lse = custom_call.apply(
        "sdpa", Tensor(q3), Tensor(k3), Tensor(v3), Tensor(mask), causal=True, scale=0.5, masked=True
    )
    visible = torch.tensor(mask)[:, None, :] & torch.ones(5, 7, dtype=torch.bool).tril()
    t_lse = (torch.tensor(q3) @ torch.tensor(k3).transpose(-2, -1) * 0.5).masked_fill(~visible, -torch.inf)
    assert lse.dtype == limn.float64 and lse.shape == (6, 5)
    np.testing.assert_allclose(lse.numpy(), t_lse.logsumexp(-1).numpy(), rtol=1e-12, atol=1e-12)  # -inf too

    q, k, v = (Tensor(x, requires_grad=True) for x in (q3, k3, v3))
    _out, lse = custom_call.apply("sdpa", q, k, v, causal=True, scale=0.5, masked=False)
    w = r(6, 5, dtype=np.float64)
    (lse * Tensor(w)).sum().backward()
    tq, tk = torch.tensor(q3, requires_grad=True), torch.tensor(k3, requires_grad=True)
    causal = torch.ones(5, 7, dtype=torch.bool).tril()
    t_lse = (tq @ tk.transpose(-2, -1) * 0.5).masked_fill(~causal, -torch.inf).logsumexp(-1)
    (t_lse * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(q.grad.numpy(), tq.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(k.grad.numpy(), tk.grad.numpy(), rtol=1e-12, atol=1e-12)
    assert v.grad is None or not v.grad.numpy().any(), "L does not depend on v"


MISTAKES = {
    "q and k differ in d": (lambda: (Tensor(Q), Tensor(K[..., :6]), Tensor(V)), {}, r"\(2, 3, 5, 8\).*\(2, 3, 7, 6\)"),
    "k and v differ in t_k": (
        lambda: (Tensor(Q), Tensor(K), Tensor(V[..., :6, :])),
        {},
        r"\(2, 3, 7, 8\).*\(2, 3, 6, 4\)",
    ),
    "key_mask of the wrong length": (
        lambda: (Tensor(Q), Tensor(K), Tensor(V)),
        {"key_mask": Tensor(MASK[..., :6])},
        r"\(2, 1, 6\).*\(2, 3, 7, 8\)",
    ),
    "key_mask not bool": (
        lambda: (Tensor(Q), Tensor(K), Tensor(V)),
        {"key_mask": Tensor(MASK.astype(np.float32))},
        r"float32 \(2, 1, 7\).*\(2, 3, 7, 8\)",
    ),
    "key_mask that does not broadcast": (
        lambda: (Tensor(Q), Tensor(K), Tensor(V)),
        {"key_mask": Tensor(_mask(4, 7))},
        r"\(2, 3\).*\(4,\)",
    ),
    "non-float q": (
        lambda: (Tensor(Q.astype(np.int32)), Tensor(K.astype(np.int32)), Tensor(V.astype(np.int32))),
        {},
        r"int32 \(2, 3, 5, 8\)",
    ),
}


@pytest.mark.parametrize("name", MISTAKES)
def test_bad_input_raises_naming_the_shapes(name: str) -> None:
    make, keywords, message = MISTAKES[name]
    with pytest.raises(limn.ArgumentError, match=message):
        Tensor.scaled_dot_product_attention(*make(), **keywords)
