"""GPT-2 as limn modules, named as Hugging Face's GPT2LMHeadModel names them, so its checkpoints load by name.

Learned position embeddings, pre-norm blocks (LayerNorm, attention, LayerNorm, MLP), the head tied to the token
embedding. Hugging Face stores each block's projections as Conv1D, (in, out); limn's Linear keeps torch's
(out, in), so limn.models.hub transposes them once as the weights load.
Pipeline: **models** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from limn.errors import ArgumentError
from limn.frontend.tensor import Tensor
from limn.models import parts
from limn.nn.containers import ModuleList
from limn.nn.kv_cache import KVCache
from limn.nn.layers import Embedding, LayerNorm, Linear
from limn.nn.module import Module


@dataclass(frozen=True)
class GPT2Config:
    """The fields of a GPT-2 config.json that shape the model (Hugging Face's names and defaults)."""

    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int | None = None  # the MLP's width; None is 4 n_embd
    activation_function: str = "gelu_new"
    layer_norm_epsilon: float = 1e-5
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    tie_word_embeddings: bool = True  # the head is the token embedding (every GPT-2 checkpoint published)
    eos_token_id: int | list[int] | None = None  # where generation stops

    def __post_init__(self) -> None:
        parts.check_config(self, ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"), ("layer_norm_epsilon",))
        if self.n_embd % self.n_head:
            raise ArgumentError(f"GPT2Config: n_embd {self.n_embd} must be a multiple of n_head {self.n_head}")
        if self.n_inner is not None:
            parts.check_config(self, ("n_inner",), ())
        parts.activation(self.activation_function, "GPT2Config.activation_function")

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> GPT2Config:
        """The config from a config.json's fields; the fields that do not shape the model (dropout, token ids)
        are left out."""
        return cls(**{name: fields[name] for name in cls.__dataclass_fields__ if name in fields})


class Attention(Module):
    def __init__(self, config: GPT2Config, layer: int) -> None:
        width = config.n_embd
        self.c_attn = Linear(width, 3 * width)
        self.c_proj = Linear(width, width)
        self.n_head = config.n_head
        scale = 1 / math.sqrt(width // config.n_head) if config.scale_attn_weights else 1.0
        self.scale = scale / (layer + 1) if config.scale_attn_by_inverse_layer_idx else scale

    def forward(self, x: Tensor, position: Tensor | None, cache: KVCache | None) -> Tensor:
        q, k, v = self.c_attn(x).split(x.shape[-1], dim=-1)  # each (B, T, C)
        q, k, v = (parts.heads(t, self.n_head) for t in (q, k, v))  # (B, H, T, hs)
        return self.c_proj(parts.merged(parts.attend(q, k, v, self.scale, position, cache)))


class MLP(Module):
    def __init__(self, config: GPT2Config) -> None:
        inner = config.n_inner or 4 * config.n_embd
        self.c_fc = Linear(config.n_embd, inner)
        self.c_proj = Linear(inner, config.n_embd)
        self.act = parts.activation(config.activation_function, "GPT2Config.activation_function")

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(self.act(self.c_fc(x)))


class Block(Module):
    def __init__(self, config: GPT2Config, layer: int) -> None:
        self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = Attention(config, layer)
        self.ln_2 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = MLP(config)

    def forward(self, x: Tensor, position: Tensor | None, cache: KVCache | None) -> Tensor:
        x = x + self.attn(self.ln_1(x), position, cache)
        return x + self.mlp(self.ln_2(x))


class GPT2Model(Module):
    def __init__(self, config: GPT2Config) -> None:
        self.wte = Embedding(config.vocab_size, config.n_embd)
        self.wpe = Embedding(config.n_positions, config.n_embd)
        self.h = ModuleList(Block(config, layer) for layer in range(config.n_layer))
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)


class GPT2(parts.LanguageModel):
    """GPT-2 with its language-model head: `model(ids)` gives (B, T, vocab) logits for (B, T) int token ids.
    With `caches` (one KVCache per block, from `caches()`) and `position` (a 0-d int tensor), the ids are the
    tokens at position, position + 1, ...: a generation step (limn.models.generation). `context` caps the
    positions it serves below n_positions (and so its caches)."""

    def __init__(self, config: GPT2Config, context: int | None = None) -> None:
        self.config = config
        self.transformer = GPT2Model(config)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.transformer.wte.weight
        count = parts.served(context, config.n_positions)
        self.serve(count, config.n_layer, config.n_head, config.n_embd // config.n_head)

    def forward(self, ids: Tensor, position: Tensor | None = None, caches: list[KVCache] | None = None) -> Tensor:
        t = self.transformer
        parts.check_ids(ids, self.config.vocab_size)
        where = parts.positions(ids.shape[1], position, self.slots)  # (T,)
        x = t.wte(ids) + t.wpe(where)  # (B, T, C)
        for layer, block in enumerate(t.h):
            x = block(x, position, None if caches is None else caches[layer])
        return self.lm_head(t.ln_f(x))  # (B, T, vocab)
