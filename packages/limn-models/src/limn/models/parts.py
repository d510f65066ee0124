"""What GPT-2 and LLaMA share: their activations by the names configs use, and attention with or without a KV cache.

A forward without caches sees a whole sequence at once, causal. A forward with them writes its keys and values
into the caches at `position` (a 0-d int tensor, so every generated token has one graph and a captured step
replays it) and attends over every slot filled so far: one new token through the fused kernels' key_mask, a
prompt of several positions through a causal mask over the cache's slots.
Pipeline: **models** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from limn import dtypes
from limn.errors import ArgumentError
from limn.frontend.tensor import Tensor
from limn.nn.kv_cache import KVCache
from limn.nn.module import Module


def gelu_tanh(x: Tensor) -> Tensor:
    return x.gelu(approximate="tanh")


# the `activation_function` (GPT-2) and `hidden_act` (LLaMA) names of Hugging Face's configs; gelu_new and
# gelu_pytorch_tanh are the tanh approximation, gelu the exact one
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": Tensor.gelu,
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": Tensor.relu,
    "silu": Tensor.silu,
    "swish": Tensor.silu,
}


def check_config(config: Any, positive: tuple[str, ...], numbers: tuple[str, ...]) -> None:
    """Refuses a config whose `positive` fields are not ints of at least 1 or whose `numbers` are not finite
    numbers above 0, naming the field and its value (a config.json typed by hand, or of another family)."""
    where = type(config).__name__
    for name in positive:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ArgumentError(f"{where}: {name} must be an int of at least 1, got {value!r}")
    for name in numbers:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ArgumentError(f"{where}: {name} must be a number above 0, got {value!r}")


def check_ids(ids: Tensor, vocab: int) -> None:
    """Refuses token ids that are not a (B, T) int tensor."""
    if ids.ndim != 2 or not ids.dtype.is_int:
        raise ArgumentError(
            f"a forward takes (B, T) int token ids of a vocabulary of {vocab}, got {ids.dtype.name}{list(ids.shape)}"
        )


def activation(name: str, where: str) -> Callable[[Tensor], Tensor]:
    """The activation a config names, or an error listing those limn has."""
    if name not in ACTIVATIONS:
        raise ArgumentError(f"{where}: activation {name!r} is not one limn knows; it has {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def heads(x: Tensor, count: int) -> Tensor:
    """(B, T, count hs) -> (B, count, T, hs)."""
    b, t, width = x.shape
    return x.reshape(b, t, count, width // count).transpose(1, 2)


def merged(y: Tensor) -> Tensor:
    """(B, H, T, hs) -> (B, T, H hs): the heads side by side again."""
    b, h, t, hs = y.shape
    return y.transpose(1, 2).reshape(b, t, h * hs)


def attend(q: Tensor, k: Tensor, v: Tensor, scale: float, position: Tensor | None, cache: KVCache | None) -> Tensor:
    """Causal attention of q (B, H, T, hs) over k and v (B, Hkv, T, hs), Hkv dividing H (grouped-query attention
    when fewer): over the T positions given, or, with a cache, over every position it holds up to these."""
    gqa = k.shape[1] != q.shape[1]
    if cache is None:
        return q.scaled_dot_product_attention(k, v, is_causal=True, scale=scale, enable_gqa=gqa)
    if position is None:
        raise ArgumentError("attention with a KV cache needs the position of its first token (a 0-d int tensor)")
    keys, values, filled = cache.update(k, v, position)  # (B, Hkv, L, hs), (L,)
    t = q.shape[2]
    if t == 1:  # one new token sees every filled slot: the fused kernels' key mask
        return q.scaled_dot_product_attention(keys, values, scale=scale, enable_gqa=gqa, key_mask=filled)
    visible = cache.visible(position, t)  # (T, L): each query sees the slots up to its own position
    return q.scaled_dot_product_attention(keys, values, attn_mask=visible, scale=scale, enable_gqa=gqa)


def served(context: int | None, most: int) -> int:
    """How many positions a model built with `context` serves: `most` when None, else at most that."""
    if context is None:
        return most
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise ArgumentError(f"context must be an int of at least 1 (the positions to serve), got {context!r}")
    return min(context, most)


def positions(count: int, position: Tensor | None, slots: Tensor) -> Tensor:
    """(T,) int32: the positions of `count` tokens starting at `position` (0 when None), from `slots`, the
    model's (P,) arange of every position it serves (on the device already: no host data in a captured step)."""
    if count > slots.shape[0]:
        raise ArgumentError(
            f"a forward of {count} tokens: the model has positions for {slots.shape[0]}; feed at most that many"
        )
    if position is None:
        return slots[:count]
    return slots[:count] + position.cast(slots.dtype)


class LanguageModel(Module):
    """What GPT2 and Llama share beyond their layers: the positions they serve (a (P,) arange on the device,
    `slots`), and a KV cache per layer for generation, shaped as `serve` was told."""

    def serve(self, count: int, layers: int, heads: int, width: int) -> None:
        """Serves `count` positions, with caches of `layers` layers of `heads` key and value heads `width` wide."""
        self.register_buffer("slots", Tensor.arange(count, dtype=dtypes.int32), persistent=False)
        self.cache_shape = (layers, heads, width)

    @property
    def context(self) -> int:
        """How many positions the model serves (its embeddings' or rotary tables' length, or a cap below it)."""
        return self.slots.shape[0]

    def caches(self, batch: int = 1, length: int | None = None) -> list[KVCache]:
        """A KVCache per layer for `batch` sequences of up to `length` positions (the whole context when None)."""
        layers, heads, width = self.cache_shape
        dtype = self.lm_head.weight.dtype
        return [KVCache(batch, heads, length or self.context, width, dtype) for _ in range(layers)]
