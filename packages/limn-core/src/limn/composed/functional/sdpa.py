"""Fused attention as three CUSTOM ops (sdpa, sdpa_bwd_q, sdpa_bwd_kv) and their numpy references, the
definition every backend's kernel is diffed against: flash-shaped, so no (t_q, t_k) matrix is ever whole.
Takes q, k, v (and a per-key mask) in the layout below; gives O and L forward, dQ and dK, dV backward.
Pipeline: tensor -> **custom_call.apply("sdpa")** -> graph (CUSTOM nodes) -> device (numpy runs these references).
"""

# The layout every kernel takes (the frontend, limn.composed.functional.attention, broadcasts and flattens batch x heads
# into N): q (N, t_q, d), k (N, t_k, d), v (N, t_k, d_v), all row-major and contiguous, one float dtype;
#   key_mask (N, t_k) bool (True keeps the key), an input only when params["masked"];
#   seed, counter: (4,) float64 limbs of a generator's key and of the counter its draw starts at (Generator.draw),
#   inputs only when params has a dropout above 0.
#   params: causal (bool: query i sees keys 0..i, torch's top-left is_causal, also for t_q != t_k: with
#   t_q > t_k rows past t_k - 1 see every key, with t_q < t_k the last row sees keys 0..t_q-1 only),
#   scale (float: the scores are q k^T * scale), masked (bool: a key_mask is among the inputs), and dropout
#   (float p in (0, 1), absent for none: each weight of P is kept with probability 1 - p and scaled by 1 / (1 - p),
#   its mask the one Tensor.dropout draws from the same words: weight (b, i, j) reads the word at counter
#   + (b t_q + i) t_k + j, or the pair from twice that for float64 (dropout_factors)).
#
#   sdpa         (q, k, v[, key_mask][, seed, counter])            -> O (N, t_q, d_v) in q's dtype, L (N, t_q)
#   sdpa_bwd_q   (q, k, v[, key_mask][, seed, counter], O, L, dO)  -> dQ (N, t_q, d) in q's dtype
#   sdpa_bwd_kv  (q, k, v[, key_mask][, seed, counter], O, L, dO)  -> dK (N, t_k, d), dV (N, t_k, d_v) in q's dtype
#
# L is each row's logsumexp of its visible scaled scores, float32 (float64 for float64 inputs): the
# probabilities are P = exp(S - L). A row that sees no key (every key masked, or t_k = 0) has O = 0,
# L = -inf and zero gradients, never NaN; a row that sees a NaN score is NaN, as torch's, and a hidden key's
# P and dS are exactly 0 in every row. float16 and bfloat16 are read, widened to float32, computed in
# float32 and rounded once when stored. D = rowsum(dO * O) is what both backward passes need besides P.
# Dropout (Z the kept weights' factors) leaves L as it is: O = (P Z) v, dV = (P Z)^T dO, dP = Z (dO v^T), and D
# is still rowsum(dO * O) = rowsum(P dP), so the backward passes regenerate Z from the same counters.

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from limn import dtypes
from limn.composed.functional import attention
from limn.composed.random import rng, sampling
from limn.dtypes import DType
from limn.frontend import custom_call
from limn.graph import custom
from limn.graph.ops import Shape

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

TILE = 64  # keys per tile in the forward and dQ passes, queries per tile in the dK, dV pass


def _wide(dtype: np.dtype) -> np.dtype:
    """The dtype a kernel computes in: float64 for float64, float32 for the rest."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _scores(q, k, key_mask, causal: bool, scale: float, rows: slice, keys: slice) -> np.ndarray:
    """S = q k^T * scale for query rows `rows` and keys `keys`, (N, rows, keys), -inf where a key is hidden."""
    s = q[:, rows] @ k[:, keys].transpose(0, 2, 1) * scale  # (N, rows, keys)
    visible = np.ones(s.shape, bool)
    if causal:
        i = np.arange(q.shape[1])[rows]
        j = np.arange(k.shape[1])[keys]
        visible &= j[None, None, :] <= i[None, :, None]  # query i sees keys 0..i
    if key_mask is not None:
        visible &= key_mask[:, None, keys]  # (N, 1, keys)
    return np.where(visible, s, -np.inf)


def _probabilities(q, k, key_mask, lse, causal: bool, scale: float, rows: slice, keys: slice) -> np.ndarray:
    """P = exp(S - L) recomputed for one tile, (N, rows, keys); exactly 0 where a key is hidden and in a row
    that sees no key (L = -inf), also when the row's L is NaN."""
    s = _scores(q, k, key_mask, causal, scale, rows, keys)
    row_lse = lse[:, rows, None]  # (N, rows, 1)
    return np.where(np.isneginf(row_lse) | np.isneginf(s), 0.0, np.exp(s - row_lse))


def _score_grads(p: np.ndarray, d_p: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """dS = P (dP - D), exactly 0 where P is (a hidden key, a row that sees none), even when D is NaN."""
    return np.where(p == 0, 0.0, p * (d_p - delta))


def forward(
    q, k, v, key_mask, causal: bool, scale: float, tile: int = TILE, drop=None
) -> tuple[np.ndarray, np.ndarray]:
    """O and L of attention, streaming the keys in tiles with a running max m, denominator l and weighted sum
    per query row: O = acc / l, L = m + log l. Arrays in the layout above; returns them in the compute dtype.
    `drop`: dropout's factors (N, t_q, t_k) (dropout_factors), which weigh what acc adds and not l.

    >>> q = np.ones((1, 2, 4))
    >>> forward(q, q, q, None, causal=True, scale=0.5)[1].round(4).tolist()
    [[2.0, 2.6931]]
    """
    wide = _wide(q.dtype)
    q, k, v = q.astype(wide), k.astype(wide), v.astype(wide)
    n, t_q, t_k = q.shape[0], q.shape[1], k.shape[1]
    row_max = np.full((n, t_q), -np.inf, wide)  # m: the largest score seen so far in each row
    denom = np.zeros((n, t_q), wide)  # l: sum of exp(s - m) over the keys seen
    acc = np.zeros((n, t_q, v.shape[2]), wide)  # sum of exp(s - m) v over the keys seen
    with np.errstate(invalid="ignore", divide="ignore"):
        for start in range(0, t_k, tile):
            keys = slice(start, min(start + tile, t_k))
            s = _scores(q, k, key_mask, causal, scale, slice(None), keys)  # (N, t_q, keys)
            new_max = np.maximum(row_max, s.max(axis=2))
            shift = np.where(np.isneginf(new_max), 0.0, new_max)  # a row that has seen no key yet shifts by 0
            p = np.exp(s - shift[..., None])  # 0 where hidden
            rescale = np.exp(row_max - shift)  # the old terms, moved onto the new max
            denom = denom * rescale + p.sum(axis=2)
            kept = p if drop is None else p * drop[:, :, keys]
            acc = acc * rescale[..., None] + kept @ v[:, keys]  # (N, t_q, d_v)
            row_max = new_max
        seen = denom != 0  # 0 only for a row that has seen no key; a NaN score makes the row NaN, as torch's
        safe = np.where(seen, denom, 1.0)
        out = np.where(seen[..., None], acc / safe[..., None], 0.0)
        lse = np.where(seen, row_max + np.log(safe), -np.inf)
    return out.astype(wide), lse.astype(wide)


def backward_q(
    q, k, v, key_mask, out, lse, d_out, causal: bool, scale: float, tile: int = TILE, drop=None
) -> np.ndarray:
    """dQ, one pass over the keys in tiles (each row's total sums over keys): dS = P (dP - D), dQ = dS k scale,
    with P = exp(S - L) recomputed per tile, dP = dO v^T and D = rowsum(dO * O)."""
    wide = _wide(q.dtype)
    q, k, v, out, lse, d_out = (x.astype(wide) for x in (q, k, v, out, lse, d_out))
    delta = (d_out * out).sum(axis=2)  # D: (N, t_q)
    d_q = np.zeros(q.shape, wide)
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, k.shape[1], tile):
            keys = slice(start, min(start + tile, k.shape[1]))
            p = _probabilities(q, k, key_mask, lse, causal, scale, slice(None), keys)  # (N, t_q, keys)
            d_p = d_out @ v[:, keys].transpose(0, 2, 1)  # (N, t_q, keys)
            if drop is not None:
                d_p = d_p * drop[:, :, keys]
            d_s = _score_grads(p, d_p, delta[..., None])
            d_q += d_s @ k[:, keys] * scale  # (N, t_q, d)
    return d_q


def backward_kv(
    q, k, v, key_mask, out, lse, d_out, causal: bool, scale: float, tile: int = TILE, drop=None
) -> tuple[np.ndarray, np.ndarray]:
    """dK and dV, one pass over the queries in tiles (each key's totals sum over queries), sharing the P it
    recomputes: dV = P^T dO, dK = dS^T q scale with dS = P (dP - D)."""
    wide = _wide(q.dtype)
    q, k, v, out, lse, d_out = (x.astype(wide) for x in (q, k, v, out, lse, d_out))
    delta = (d_out * out).sum(axis=2)  # D: (N, t_q)
    d_k, d_v = np.zeros(k.shape, wide), np.zeros(v.shape, wide)
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, q.shape[1], tile):
            rows = slice(start, min(start + tile, q.shape[1]))
            p = _probabilities(q, k, key_mask, lse, causal, scale, rows, slice(None))  # (N, rows, t_k)
            z = 1.0 if drop is None else drop[:, rows]  # (N, rows, t_k)
            d_v += (p * z).transpose(0, 2, 1) @ d_out[:, rows]  # (N, t_k, d_v)
            d_p = d_out[:, rows] @ v.transpose(0, 2, 1) * z  # (N, rows, t_k)
            d_s = _score_grads(p, d_p, delta[:, rows, None])
            d_k += d_s.transpose(0, 2, 1) @ q[:, rows] * scale  # (N, t_k, d)
    return d_k, d_v


# ---- dropout's factors ----


def dropout_factors(seed: np.ndarray, counter: np.ndarray, p: float, shape: Shape, dtype: np.dtype) -> np.ndarray:
    """What dropout multiplies each weight of `shape` (N, t_q, t_k) by, in compute dtype `dtype`: 1 / (1 - p)
    where it is kept and 0 where it is dropped, by Tensor.dropout's rule (sampling.dropout_factors) on the words
    from `counter` on under `seed` (both (4,) limbs): a word per weight, or for float64 a pair, whose 53 top bits
    make the uniform number."""
    n, wide = int(np.prod(shape)), np.dtype(dtype)
    per = 2 if wide == np.float64 else 1
    counters = np.arange(n * per, dtype=np.uint64) + np.uint64(rng.limbs_value(counter))  # wraps mod 2**64
    words = rng.squares32_host(counters, rng.limbs_value(seed)).astype(np.uint64)
    if per == 2:
        top = (words[0::2] << np.uint64(21)) + (words[1::2] >> np.uint64(11))  # 32 + 21 bits
        keep = top.astype(np.float64) * 2.0**-53 >= p
    else:
        keep = (words >> np.uint64(8)).astype(np.float32) * np.float32(2.0**-24) >= np.float32(p)
    factor = wide.type(np.float32(1.0 / (1.0 - p)) if per == 1 else 1.0 / (1.0 - p))
    return np.where(keep, factor, wide.type(0)).reshape(shape)


def _drop(inputs: Sequence[Any], params: dict[str, Any]) -> np.ndarray | None:
    """The reference's dropout factors for the weights of q against k (None without dropout)."""
    (q, k, _v), _mask, draw, _ = _split(inputs, params)
    if draw is None:
        return None
    return dropout_factors(*draw, params["dropout"], (q.shape[0], q.shape[1], k.shape[1]), _wide(q.dtype))


def _composed_drop(q: Tensor, k: Tensor, draw: tuple[Tensor, Tensor] | None, p: float) -> Tensor | None:
    """The same factors as a lazy (N, t_q, t_k) tensor in q's dtype, from the graph's words (rng.words_at)."""
    if draw is None:
        return None
    seed, counter = draw
    shape = (q.shape[0], q.shape[1], k.shape[1])
    return sampling.dropout_factors(shape, q.dtype, p, lambda s: rng.words_at(seed, counter, s))


# ---- the three CustomOps: signature, reference, composition, gradient rule ----


def _split(inputs: Sequence[Any], params: dict[str, Any]) -> tuple[list[Any], Any, Any, list[Any]]:
    """(q, k, v), key_mask or None, dropout's (seed, counter) or None, and what follows them (O, L, dO in the
    backward ops)."""
    q, k, v = inputs[:3]
    rest = list(inputs[3:])
    key_mask = rest.pop(0) if params["masked"] else None
    draw = (rest.pop(0), rest.pop(0)) if params.get("dropout", 0.0) else None
    return [q, k, v], key_mask, draw, rest


def _lse_dtype(dtype: DType) -> DType:
    return dtypes.float64 if dtype == dtypes.float64 else dtypes.float32


def _forward_signature(specs: Sequence[tuple[DType, Shape]], params: dict[str, Any]) -> list[tuple[DType, Shape]]:
    (dtype, (n, t_q, _d)), _k, (_, (_n, _t_k, d_v)) = specs[:3]
    return [(dtype, (n, t_q, d_v)), (_lse_dtype(dtype), (n, t_q))]


def _forward_reference(inputs: Sequence[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    (q, k, v), key_mask, _, _ = _split(inputs, params)
    return list(forward(q, k, v, key_mask, params["causal"], params["scale"], drop=_drop(inputs, params)))


def _forward_compose(*inputs: Tensor, causal: bool, scale: float, masked: bool, dropout: float = 0.0) -> list[Tensor]:
    (q, k, v), key_mask, draw, _ = _split(inputs, {"masked": masked, "dropout": dropout})
    scores = attention.masked_scores(q, k, scale, causal=causal, key_mask=key_mask)  # (N, t_q, t_k)
    weights = attention.safe_softmax(scores)
    drop = _composed_drop(q, k, draw, dropout)
    out = (weights if drop is None else weights * drop) @ v  # (N, t_q, d_v)
    lse = scores.cast(_lse_dtype(q.dtype)).logsumexp(-1)  # (N, t_q); -inf for a row that sees no key
    return [out, lse]


def _sdpa_gradient(
    inputs: list[Tensor], output: int, outs: list[Tensor], grad: Tensor, params: dict[str, Any]
) -> list[Tensor | None]:
    """The gradient of O through the two backward kernels. Under create_graph=True they have inputs that
    require grad and no gradient rule, so custom_call.apply composes them (_backward_compose): the gradient is then
    spelled in primitives and differentiates again. L's gradient (the frontend never exposes L) is composed.
    The dropout's seed and counter go to both kernels, which draw the forward's mask again."""
    (q, k, v), key_mask, draw, _ = _split(inputs, params)
    extras = ([] if key_mask is None else [key_mask]) + ([] if draw is None else list(draw))
    out, lse = outs
    if output == 1:
        return [*_lse_grad(q, k, key_mask, grad, params), None, *[None for _ in extras]]
    (d_q,) = custom_call.apply("sdpa_bwd_q", q, k, v, *extras, out, lse, grad, **params)
    d_k, d_v = custom_call.apply("sdpa_bwd_kv", q, k, v, *extras, out, lse, grad, **params)
    return [d_q, d_k, d_v, *[None for _ in extras]]


def _lse_grad(q: Tensor, k: Tensor, key_mask: Tensor | None, grad: Tensor, params: dict[str, Any]) -> list[Tensor]:
    # dL/dS = P, so dS = P * dL, dQ = dS k scale, dK = dS^T q scale
    scale = params["scale"]
    scores = attention.masked_scores(q, k, scale, causal=params["causal"], key_mask=key_mask)
    d_s = attention.safe_softmax(scores) * grad.cast(q.dtype).unsqueeze(-1)  # (N, t_q, t_k)
    return [d_s @ k * scale, d_s.transpose(-2, -1) @ q * scale]


def _backward_q_signature(specs: Sequence[tuple[DType, Shape]], params: dict[str, Any]) -> list[tuple[DType, Shape]]:
    return [specs[0]]


def _backward_kv_signature(specs: Sequence[tuple[DType, Shape]], params: dict[str, Any]) -> list[tuple[DType, Shape]]:
    return [specs[1], specs[2]]


def _backward_q_reference(inputs: Sequence[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    (q, k, v), key_mask, _, (out, lse, d_out) = _split(inputs, params)
    drop = _drop(inputs, params)
    return [backward_q(q, k, v, key_mask, out, lse, d_out, params["causal"], params["scale"], drop=drop)]


def _backward_kv_reference(inputs: Sequence[np.ndarray], params: dict[str, Any]) -> list[np.ndarray]:
    (q, k, v), key_mask, _, (out, lse, d_out) = _split(inputs, params)
    drop = _drop(inputs, params)
    return list(backward_kv(q, k, v, key_mask, out, lse, d_out, params["causal"], params["scale"], drop=drop))


def _backward_compose(
    *inputs: Tensor, causal: bool, scale: float, masked: bool, dropout: float = 0.0
) -> tuple[Tensor, Tensor, Tensor]:
    """dQ, dK, dV spelled in primitives. P is recomputed from q and k by the softmax (not from O and L), so
    the result is a function of q, k, v and dO alone and its own gradient needs nothing of the fused forward."""
    (q, k, v), key_mask, draw, (_out, _lse, d_out) = _split(inputs, {"masked": masked, "dropout": dropout})
    p = attention.safe_softmax(attention.masked_scores(q, k, scale, causal=causal, key_mask=key_mask))
    drop = _composed_drop(q, k, draw, dropout)
    d_v = (p if drop is None else p * drop).transpose(-2, -1) @ d_out  # (N, t_k, d_v)
    d_p = d_out @ v.transpose(-2, -1)  # (N, t_q, t_k)
    if drop is not None:
        d_p = d_p * drop
    d_s = p * (d_p - (d_p * p).sum(-1, keepdim=True))  # dS = P (dP - D), D = rowsum(P dP) = rowsum(dO O)
    return d_s @ k * scale, d_s.transpose(-2, -1) @ q * scale, d_v


def _backward_q_compose(*inputs: Tensor, **params: Any) -> list[Tensor]:
    return [_backward_compose(*inputs, **params)[0]]


def _backward_kv_compose(*inputs: Tensor, **params: Any) -> list[Tensor]:
    return list(_backward_compose(*inputs, **params)[1:])


SDPA = custom.register(
    custom.CustomOp("sdpa", 2, _forward_signature, _forward_reference, _forward_compose, _sdpa_gradient)
)
SDPA_BWD_Q = custom.register(
    custom.CustomOp("sdpa_bwd_q", 1, _backward_q_signature, _backward_q_reference, _backward_q_compose)
)
SDPA_BWD_KV = custom.register(
    custom.CustomOp("sdpa_bwd_kv", 2, _backward_kv_signature, _backward_kv_reference, _backward_kv_compose)
)
