"""Scaled dot-product attention (limn.composed.functional.attention, composed from primitives) against torch's
F.scaled_dot_product_attention, forward and backward, on numpy and c: plain, bool and float masks that
broadcast, is_causal on square and rectangular scores, scale, grouped heads (enable_gqa), queries and keys of
different lengths, a fully masked row (zeros and no gradient, as torch) and the argument errors torch raises.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle import Table, case

import limn.nn  # noqa: F401 (the limn.nn spelling row)
from limn import Tensor

rng = np.random.default_rng(0)


def r(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


F = "torch.nn.functional.scaled_dot_product_attention"
S = "Tensor.scaled_dot_product_attention"
Q, K, V = r(2, 3, 5, 8), r(2, 3, 5, 8), r(2, 3, 5, 4)
K7, V7 = r(2, 3, 7, 8), r(2, 3, 7, 4)
BOOL_MASK = rng.random((5, 7)) < 0.7
BOOL_MASK[:, 0] = True  # every query sees a key
FLOAT_MASK = r(3, 1, 7)
KV_HEADS_1 = r(2, 1, 7, 8)

TABLE = Table(
    [
        case(f"{S}(q, k, v)", f"{F}(q, k, v)", q=Q, k=K, v=V, id="plain"),
        case(f"{S}(q, k, v, is_causal=True)", f"{F}(q, k, v, is_causal=True)", q=Q, k=K, v=V, id="causal"),
        case(f"{S}(q, k, v, is_causal=True)", f"{F}(q, k, v, is_causal=True)", q=Q, k=K7, v=V7, id="causal t_q < t_k"),
        case(f"{S}(q, k, v, attn_mask=m)", f"{F}(q, k, v, attn_mask=m)", q=Q, k=K7, v=V7, m=BOOL_MASK, id="bool mask"),
        case(f"{S}(q, k, v, m)", f"{F}(q, k, v, m)", q=Q, k=K7, v=V7, m=FLOAT_MASK, id="float mask broadcast"),
        case(f"{S}(q, k, v, scale=0.3)", f"{F}(q, k, v, scale=0.3)", q=Q, k=K, v=V, id="scale"),
        case("q.scaled_dot_product_attention(k, v)", f"{F}(q, k, v)", q=Q[0, 0], k=K[0, 0], v=V[0, 0], id="2-d"),
        case(
            f"{S}(q, k, v, enable_gqa=True)",
            f"{F}(q, k, v, enable_gqa=True)",
            q=Q[:, :2],
            k=KV_HEADS_1,
            v=KV_HEADS_1,
            id="gqa: 2 query heads share 1",
        ),
        case("limn.nn.scaled_dot_product_attention(q, k, v)", f"{F}(q, k, v)", q=Q, k=K, v=V, id="limn.nn spelling"),
    ]
)


@pytest.mark.parametrize("name", TABLE.ids)
def test_attention_matches_torch(device: str, name: str) -> None:
    TABLE.assert_agrees(device, name)


def test_a_query_that_sees_no_key_gives_zeros_and_no_gradient_as_torch(device: str) -> None:
    TABLE_ROW.assert_agrees(device, "a fully masked row")


TABLE_ROW = Table(
    [
        case(
            f"{S}(q, k, v, attn_mask=m)",
            f"{F}(q, k, v, attn_mask=m)",
            q=Q,
            k=K,
            v=V,
            m=np.array([[True] * 5, [False] * 5, [True, False, True, False, True], [True] * 5, [False] * 5]),
            id="a fully masked row",
        )
    ]
)


# NaN and masks, forward and backward, against torch's default CPU path (its flash kernel): a NaN score makes
# every row that can see it NaN and leaves the rows that cannot (causal rows before it, a masked key) alone;
# a row that sees no key is 0 with no gradient, whatever mask hid its keys
FLOAT_ROW = np.zeros((5, 5), np.float32)
FLOAT_ROW[1] = -np.inf  # query 1's every score is -inf: a float mask that hides the whole row
K_NAN = K.copy()
K_NAN[:, :, 2, 0] = np.nan  # key 2 of every head
HIDE_2 = np.ones(5, bool)
HIDE_2[2] = False
TABLE_NAN = Table(
    [
        case(f"{S}(q, k, v, m)", f"{F}(q, k, v, m)", q=Q, k=K, v=V, m=FLOAT_ROW, id="a float mask row all -inf"),
        case(f"{S}(q, k, v)", f"{F}(q, k, v)", q=Q, k=K_NAN, v=V, id="a NaN key"),
    ]
)


@pytest.mark.parametrize("name", TABLE_NAN.ids)
def test_nan_and_masked_rows_are_torchs_forward_and_backward(device: str, name: str) -> None:
    """The composed form (a float attn_mask) and the fused one (no mask): a row all -inf is 0 with no NaN in
    any gradient, and a NaN key makes every row that sees it NaN."""
    TABLE_NAN.assert_agrees(device, name)


# rows that cannot see a NaN: torch's flash kernel (its default on CPU) leaves them finite, and so does limn;
# torch's math kernel adds its causal mask as -inf, which a NaN score survives, so there every row is NaN
V8 = r(2, 3, 5, 8)  # torch's flash kernel takes d_v = d only
HIDDEN_NAN = {
    "a NaN key, causal (rows before it)": (dict(is_causal=True), dict(is_causal=True), Q, K_NAN, V8),
    "a NaN value under a masked key": (
        dict(key_mask=HIDE_2),
        dict(attn_mask=torch.tensor(HIDE_2[None, :])),
        Q,
        K,
        np.where(HIDE_2[:, None], V8, np.nan).astype(np.float32),
    ),
}


@pytest.mark.parametrize("name", list(HIDDEN_NAN))
def test_a_nan_leaves_the_rows_that_cannot_see_it_alone_as_torchs_flash_kernel(device: str, name: str) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    limn_kw, torch_kw, q, k, v = HIDDEN_NAN[name]
    lq, lk, lv = (Tensor(a, requires_grad=True) for a in (q, k, v))
    out = Tensor.scaled_dot_product_attention(
        lq, lk, lv, **{a: Tensor(b) if isinstance(b, np.ndarray) else b for a, b in limn_kw.items()}
    )
    out.sum().backward()
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **torch_kw)
    want.sum().backward()
    for what, got, ref in [
        ("out", out, want),
        ("dq", lq.grad, tq.grad),
        ("dk", lk.grad, tk.grad),
        ("dv", lv.grad, tv.grad),
    ]:
        got, ref = got.numpy(), ref.detach().numpy()
        if what == "dk" and "masked key" in name:
            # the named difference: a masked key is as if sliced away (the spec's oracle for key_mask), so its
            # dK is exactly 0; torch multiplies the hidden cell's zero by a NaN row's dP - D and gets NaN
            assert not got[..., 2, :].any() and np.isnan(ref[..., 2, :]).all(), f"{name}: the masked key's dK"
            got, ref = np.delete(got, 2, axis=-2), np.delete(ref, 2, axis=-2)
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, err_msg=f"{name}: {what} on {device}")
    if "causal" in name:
        assert np.isfinite(out.numpy()[..., :2, :]).all(), "the rows before the NaN key stay finite"


ERRORS = {
    "causal with a mask": lambda m: m(Q, K, V, attn_mask=BOOL_MASK[:, :5], is_causal=True),
    "head dims differ": lambda m: m(Q, K[..., :6], V),
    "key and value lengths differ": lambda m: m(Q, K7, V),
    "gqa heads do not divide": lambda m: m(Q, r(2, 2, 5, 8), r(2, 2, 5, 4), enable_gqa=True),
}


@pytest.mark.parametrize("name", ERRORS)
def test_attention_argument_mistakes_raise_runtimeerror_as_torch(name: str) -> None:
    def torch_sdpa(*args, **kwargs):
        args = [torch.tensor(a) for a in args]
        kwargs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        return torch.nn.functional.scaled_dot_product_attention(*args, **kwargs)

    def limn_sdpa(*args, **kwargs):
        args = [Tensor(a) for a in args]
        kwargs = {k: Tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        return Tensor.scaled_dot_product_attention(*args, **kwargs)

    with pytest.raises(RuntimeError):
        ERRORS[name](torch_sdpa)
    with pytest.raises(RuntimeError):
        ERRORS[name](limn_sdpa)
