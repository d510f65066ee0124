"""Scaled dot-product attention composed from primitives, as torch.nn.functional.scaled_dot_product_attention.

softmax(q k^T * scale + mask) v: two matmuls around a softmax, so the scheduler fuses it as it fuses any
other graph and autograd differentiates it (and its gradient) like any composition. It materialises the
(..., t_q, t_k) scores; a device with a fused attention kernel takes over in the CUSTOM-op issue.
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math

from limn import dtypes
from limn.errors import ArgumentError
from limn.primitives import Tensor


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """torch's F.scaled_dot_product_attention: query (..., t_q, d), key (..., t_k, d), value (..., t_k, d_v)
    give (..., t_q, d_v). attn_mask broadcasts to (..., t_q, t_k): a bool mask says which keys a query may see,
    a float one is added to the scores. is_causal lets query i see keys 0..i (the top-left triangle, as
    torch's; not with attn_mask). scale defaults to 1/sqrt(d). enable_gqa lets key and value have fewer
    heads (dim -3) than query, each shared by a group of query heads. dropout_p drops attention weights, as
    torch's does whenever it is above 0.

    A query row whose every key is masked out gives zeros and passes no gradient, as torch's (its softmax
    would be over nothing).

    >>> q = Tensor.ones((1, 2, 4))
    >>> Tensor.scaled_dot_product_attention(q, q, q, is_causal=True).shape
    (1, 2, 4)
    """
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        shapes = (query.shape, key.shape, value.shape)
        raise ArgumentError(f"scaled_dot_product_attention: q, k, v need (..., t, d) shapes, got {shapes}")
    d, t_q, t_k = query.shape[-1], query.shape[-2], key.shape[-2]
    if key.shape[-1] != d:
        raise ArgumentError(f"scaled_dot_product_attention: query's last dim {d} and key's {key.shape[-1]} differ")
    if value.shape[-2] != t_k:
        raise ArgumentError(f"scaled_dot_product_attention: key has {t_k} positions and value {value.shape[-2]}")
    if is_causal and attn_mask is not None:
        raise ArgumentError("scaled_dot_product_attention: is_causal=True takes no attn_mask (as torch); fold it in")
    if enable_gqa:
        key, value = _shared_heads(query, key), _shared_heads(query, value)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale  # (..., t_q, t_k)
    if is_causal:
        seen = Tensor.ones((t_q, t_k), dtype=dtypes.bool_, device=query.device).tril()
        scores = scores.masked_fill(seen.logical_not(), -math.inf)
    elif attn_mask is not None:
        if attn_mask.dtype == dtypes.bool_:
            scores = scores.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            scores = scores + attn_mask
    weights = scores.softmax(-1)
    if attn_mask is not None:
        # torch's safe softmax: a row whose every score is -inf attends to nothing and gives 0, not NaN
        dead = scores.eq(-math.inf).all(-1, keepdim=True)
        weights = dead.where(0.0, weights)
    if dropout_p > 0:
        weights = weights.dropout(dropout_p)
    return weights @ value  # (..., t_q, d_v)


def _shared_heads(query: Tensor, kv: Tensor) -> Tensor:
    """key or value with its heads (dim -3) repeated so each serves its group of query heads (GQA)."""
    if query.ndim < 3 or kv.ndim < 3:
        raise ArgumentError("scaled_dot_product_attention: enable_gqa needs a heads dim, (..., heads, t, d)")
    h_q, h_kv = query.shape[-3], kv.shape[-3]
    if h_q % h_kv:
        raise ArgumentError(
            f"scaled_dot_product_attention: {h_q} query heads cannot share {h_kv} key/value heads evenly; "
            "the query's head count must be a multiple"
        )
    return kv if h_q == h_kv else kv.repeat_interleave(h_q // h_kv, dim=-3)
