"""Scaled dot-product attention, torch's F.scaled_dot_product_attention plus limn's per-key mask.

The frontend checks q, k, v and sends key masks and causal attention to the fused CUSTOM kernels
(limn.composed.functional.sdpa: no (..., t_q, t_k) score matrix, forward or backward, dropout drawn inside) on a device
that supplies them; a general attn_mask, a dropout of 1, or a device without the kernels, gets the composition here:
softmax(q k^T * scale + mask) v.
Pipeline: **tensor (attention)** -> custom_call.apply("sdpa") or composed ops -> graph -> schedule -> device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.random import rng
from limn.errors import ArgumentError
from limn.frontend import custom_call
from limn.frontend.arguments import broadcast_shape

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


class AttentionMixin:
    """Tensor.scaled_dot_product_attention, torch's."""

    __slots__ = ()

    def scaled_dot_product_attention(
        self,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
        *,
        causal: bool = False,
        key_mask: Tensor | None = None,
    ) -> Tensor:
        """torch's F.scaled_dot_product_attention: query (..., t_q, d), key (..., t_k, d), value (..., t_k, d_v)
        give (..., t_q, d_v); the batch dims broadcast. attn_mask broadcasts to (..., t_q, t_k): a bool mask says
        which keys a query may see, a float one is added to the scores. is_causal (or limn's causal=) lets query i
        see keys 0..i: the top-left triangle, as torch's, also when t_q != t_k (not with attn_mask). scale
        defaults to 1/sqrt(d). enable_gqa lets key and value have fewer heads (dim -3) than query, each shared by
        a group of query heads. dropout_p drops attention weights, as torch's does whenever it is above 0.

        key_mask (..., t_k) bool is limn's: True keeps a key (padding, a part-filled kv cache). It composes with
        causal, and its leading dims broadcast against the batch dims from the right, as any torch broadcast: a
        (B, t_k) padding mask for (B, heads, t, d) queries is key_mask[:, None]. Without attn_mask the call runs
        on the fused kernels (limn.composed.functional.sdpa) where the device has them, dropout too: they draw
        the mask Tensor.dropout would draw from the device's default generator, the backward the same again.

        A query row whose every key is masked out gives zeros and passes no gradient, as torch's (its softmax
        would be over nothing), on the fused path and the composed one.

        >>> q = Tensor.ones((1, 2, 4))
        >>> Tensor.scaled_dot_product_attention(q, q, q, is_causal=True).shape
        (1, 2, 4)
        """
        causal = bool(is_causal or causal)
        _check(self, key, value, key_mask)
        if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
            raise TypeError(
                f"scaled_dot_product_attention: dropout_p must be a number (a float, as torch's), got "
                f"{type(dropout_p).__name__} {dropout_p!r}"
            )
        if not 0.0 <= dropout_p <= 1.0:
            raise ArgumentError(
                f"scaled_dot_product_attention: dropout_p has to be between 0 and 1, but got {dropout_p}"
            )
        if causal and attn_mask is not None:
            raise ArgumentError(
                "scaled_dot_product_attention: is_causal=True takes no attn_mask (as torch); fold it in"
            )
        if enable_gqa:
            key, value = _shared_heads(self, key), _shared_heads(self, value)
        scale = 1.0 / math.sqrt(self.shape[-1]) if scale is None else float(scale)
        if attn_mask is None and dropout_p < 1:
            return _fused(self, key, value, key_mask, causal, scale, float(dropout_p))
        return composed(self, key, value, attn_mask, dropout_p, causal, scale, key_mask)


def _check(query: Tensor, key: Tensor, value: Tensor, key_mask: Tensor | None) -> None:
    """Raises ArgumentError, naming the shapes, for q, k, v (and key_mask) that cannot attend."""
    shapes = f"query {query.shape}, key {key.shape}, value {value.shape}"
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ArgumentError(f"scaled_dot_product_attention: q, k, v need (..., t, d) shapes, got {shapes}")
    if not query.dtype.is_float or key.dtype != query.dtype or value.dtype != query.dtype:
        raise ArgumentError(
            f"scaled_dot_product_attention: query, key and value must share one float dtype (as torch), got "
            f"{query.dtype.name} {query.shape}, {key.dtype.name} {key.shape}, {value.dtype.name} {value.shape}; "
            "cast them first"
        )
    if key.shape[-1] != query.shape[-1]:
        raise ArgumentError(f"scaled_dot_product_attention: q and k must share their last dim d, got {shapes}")
    if value.shape[-2] != key.shape[-2]:
        raise ArgumentError(f"scaled_dot_product_attention: k and v must share their length t_k, got {shapes}")
    if key_mask is None:
        return
    if key_mask.dtype != dtypes.bool_ or key_mask.ndim < 1 or key_mask.shape[-1] != key.shape[-2]:
        raise ArgumentError(
            f"scaled_dot_product_attention: key_mask must be bool (..., t_k) with t_k = {key.shape[-2]}, one "
            f"flag per key; got {key_mask.dtype.name} {key_mask.shape} for key {key.shape} (a per-pair mask "
            "goes in attn_mask)"
        )


def _fused(
    query: Tensor, key: Tensor, value: Tensor, key_mask: Tensor | None, causal: bool, scale: float, dropout: float
) -> Tensor:
    """The call of the fused CUSTOM op in its layout: batch dims broadcast and flattened to N. Dropout draws
    its words' counter from the default generator: a word per weight (N, t_q, t_k), a pair for float64."""
    t_q, d, t_k, d_v = query.shape[-2], query.shape[-1], key.shape[-2], value.shape[-1]
    what = "scaled_dot_product_attention: the batch dims of query, key, value (and key_mask)"
    batch = broadcast_shape(broadcast_shape(query.shape[:-2], key.shape[:-2], what), value.shape[:-2], what)
    if key_mask is not None:
        batch = broadcast_shape(batch, key_mask.shape[:-1], what)
    n = math.prod(batch)
    q = query.broadcast_to(batch + (t_q, d)).reshape((n, t_q, d))  # (..., t_q, d) -> (N, t_q, d)
    k = key.broadcast_to(batch + (t_k, d)).reshape((n, t_k, d))  # (..., t_k, d) -> (N, t_k, d)
    v = value.broadcast_to(batch + (t_k, d_v)).reshape((n, t_k, d_v))  # (..., t_k, d_v) -> (N, t_k, d_v)
    inputs = [q, k, v]
    if key_mask is not None:
        inputs.append(key_mask.broadcast_to(batch + (t_k,)).reshape((n, t_k)))  # (..., t_k) -> (N, t_k)
    params = {"causal": causal, "scale": scale, "masked": key_mask is not None}
    if dropout > 0:
        g = rng.default_generator(query.device)
        inputs += [g.key, g.draw(n * t_q * t_k * (2 if query.dtype == dtypes.float64 else 1))]
        params["dropout"] = dropout
    out, _logsumexp = custom_call.apply("sdpa", *inputs, **params)
    return out.reshape(batch + (t_q, d_v))  # (N, t_q, d_v) -> (..., t_q, d_v)


def masked_scores(
    query: Tensor,
    key: Tensor,
    scale: float,
    attn_mask: Tensor | None = None,
    causal: bool = False,
    key_mask: Tensor | None = None,
) -> Tensor:
    """q k^T * scale, (..., t_q, t_k), with -inf where a mask hides the key (a float attn_mask is added)."""
    t_q, t_k = query.shape[-2], key.shape[-2]
    scores = (query @ key.transpose(-2, -1)) * scale  # (..., t_q, t_k)
    if causal:
        seen = limn.Tensor.ones((t_q, t_k), dtype=dtypes.bool_, device=query.device).tril()  # query i sees keys 0..i
        scores = scores.masked_fill(seen.logical_not(), -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == dtypes.bool_:
            scores = scores.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            scores = scores + attn_mask
    if key_mask is not None:
        scores = scores.masked_fill(key_mask.unsqueeze(-2).logical_not(), -math.inf)  # (..., 1, t_k)
    return scores


def safe_softmax(scores: Tensor) -> Tensor:
    """softmax over the keys (the last dim); a row whose every score is -inf attends to nothing and gives 0,
    not NaN, and passes no gradient (torch's safe softmax). The dead row's scores are swapped for zeros before
    the softmax, so its backward meets no NaN either (a float attn_mask of -inf adds straight into them)."""
    dead = scores.eq(-math.inf).all(-1, keepdim=True)  # (..., t_q, 1)
    return dead.where(0.0, dead.where(0.0, scores).softmax(-1))


def composed(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    dropout_p: float,
    causal: bool,
    scale: float,
    key_mask: Tensor | None = None,
) -> Tensor:
    """Attention composed from primitives (checked arguments, scale given): materialises (..., t_q, t_k)."""
    scores = masked_scores(query, key, scale, attn_mask, causal, key_mask)
    masked = attn_mask is not None or key_mask is not None
    weights = safe_softmax(scores) if masked else scores.softmax(-1)
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
