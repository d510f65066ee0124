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
