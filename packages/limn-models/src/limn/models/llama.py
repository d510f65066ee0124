"""LLaMA as limn modules, named as Hugging Face's LlamaForCausalLM names them, so its checkpoints load by name.

RMSNorm before attention and before the MLP, rotary position embeddings on queries and keys, grouped-query
attention (fewer key and value heads than query heads, each shared by a group), and a SwiGLU MLP:
down(silu(gate(x)) * up(x)). The rotary tables are computed once on the host for every position the model serves,
in float32 as Hugging Face computes them (each angle one float32 product of position and frequency), their cosines
and sines in float64 and rounded once; Hugging Face's checkpoints already order q_proj's and k_proj's rows for the
rotate-half form used here.
Pipeline: **models** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from limn.errors import ArgumentError
from limn.frontend.tensor import Tensor
from limn.models import parts
from limn.nn.containers import ModuleList
from limn.nn.kv_cache import KVCache
from limn.nn.layers import Embedding, Linear
from limn.nn.module import Module
from limn.nn.norms import RMSNorm


@dataclass(frozen=True)
class LlamaConfig:
    """The fields of a LLaMA-family config.json that shape the model (Hugging Face's names and defaults).
    `rope` gathers the rotary settings, which configs spell as rope_theta and rope_scaling (transformers 4) or
    rope_parameters (transformers 5)."""

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None  # None: as many as the query heads
    head_dim: int | None = None  # None: hidden_size / num_attention_heads
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-6
    hidden_act: str = "silu"
    attention_bias: bool = False
    qkv_bias: bool = False  # biases on q, k and v but not o (Qwen2)
    mlp_bias: bool = False
    sliding_window: int | None = None  # Mistral's: the model then serves at most this many positions
    tie_word_embeddings: bool = False
    eos_token_id: int | list[int] | None = None  # where generation stops
    rope: dict[str, Any] = field(default_factory=lambda: {"rope_type": "default", "rope_theta": 10000.0})

    def __post_init__(self) -> None:
        sizes = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
        given = ("num_key_value_heads", "head_dim", "sliding_window")
        optional = tuple(name for name in given if getattr(self, name) is not None)
        parts.check_config(self, (*sizes, "max_position_embeddings", *optional), ("rms_norm_eps",))
        if self.num_attention_heads % self.kv_heads:
            raise ArgumentError(
                f"LlamaConfig: num_attention_heads {self.num_attention_heads} must be a multiple of "
                f"num_key_value_heads {self.kv_heads}"
            )
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ArgumentError(
                f"LlamaConfig: hidden_size {self.hidden_size} must be a multiple of num_attention_heads "
                f"{self.num_attention_heads} (or the config gives head_dim)"
            )
        parts.activation(self.hidden_act, "LlamaConfig.hidden_act")
        _rope_checked(self.rope)

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> LlamaConfig:
        """The config from a config.json's fields; the fields that do not shape the model are left out."""
        known = {name: fields[name] for name in cls.__dataclass_fields__ if name in fields and name != "rope"}
        if fields.get("use_sliding_window") is False:  # Qwen2 names a window it does not use
            known.pop("sliding_window", None)
        rope = dict(fields.get("rope_parameters") or fields.get("rope_scaling") or {})
        rope.setdefault("rope_theta", fields.get("rope_theta", 10000.0))
        rope["rope_type"] = rope.get("rope_type", rope.get("type", "default"))
        return cls(**known, rope=rope)

    @property
    def kv_heads(self) -> int:
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def head_width(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads


def _llama3_frequencies(inv_freq: np.ndarray, rope: dict[str, Any]) -> np.ndarray:
    """Llama 3.1's rescaling: long wavelengths slowed by `factor`, short ones kept, those between blended."""
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old_context = rope["original_max_position_embeddings"]
    wavelength = 2 * math.pi / inv_freq
    scaled = np.where(wavelength > old_context / low, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelength - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    between = (wavelength >= old_context / high) & (wavelength <= old_context / low)
    return np.where(between, blended, scaled).astype(np.float32)


# each rope_type limn computes: the frequencies from the plain ones and the config's rope settings, and the
# settings each needs beside rope_theta
ROPE_FIELDS = {
    "default": (),
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}
FREQUENCIES = {  # (the keys are ROPE_FIELDS')
    "default": lambda inv_freq, rope: inv_freq,
    "linear": lambda inv_freq, rope: (inv_freq / np.float32(rope["factor"])).astype(np.float32),
    "llama3": _llama3_frequencies,
}


def _rope_checked(rope: dict[str, Any]) -> None:
    """Refuses rotary settings limn cannot compute: another rope_type, or a setting missing or not a number."""
    kind = rope.get("rope_type")
    if kind not in ROPE_FIELDS:
        raise ArgumentError(f"LlamaConfig: rope_type {kind!r} is not one limn computes; it has {sorted(ROPE_FIELDS)}")
    for name in ("rope_theta", *ROPE_FIELDS[kind]):
        value = rope.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ArgumentError(f"LlamaConfig: the {kind} rope needs {name}, a number above 0; got {value!r}")


def rotary_tables(config: LlamaConfig, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(count, head_width) float32 cosines and sines of the rotary angles of positions 0 .. count - 1."""
    rope, d = config.rope, config.head_width
    exponents = np.arange(0, d, 2, dtype=np.float32) / np.float32(d)
    inv_freq = (np.float32(1.0) / np.float32(rope["rope_theta"]) ** exponents).astype(np.float32)  # (d/2,)
    inv_freq = FREQUENCIES[rope["rope_type"]](inv_freq, rope)
    angles = np.arange(count, dtype=np.float32)[:, None] * inv_freq[None, :]  # (P, d/2), float32 products
    angles = np.concatenate([angles, angles], axis=1).astype(np.float64)  # (P, d)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rotated(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x (B, H, T, d) turned by the angles whose cos and sin are (T, d): x cos + rotate_half(x) sin."""
    half = x.shape[-1] // 2
    turned = (-x[..., half:]).cat(x[..., :half], dim=-1)  # rotate_half: (-x2, x1)
    return x * cos + turned * sin


class Attention(Module):
    def __init__(self, config: LlamaConfig) -> None:
        width, heads, kv_heads, d = config.hidden_size, config.num_attention_heads, config.kv_heads, config.head_width
        bias = config.attention_bias or config.qkv_bias
        self.q_proj = Linear(width, heads * d, bias=bias)
        self.k_proj = Linear(width, kv_heads * d, bias=bias)
        self.v_proj = Linear(width, kv_heads * d, bias=bias)
        self.o_proj = Linear(heads * d, width, bias=config.attention_bias)
        self.heads, self.kv_heads, self.scale = heads, kv_heads, 1 / math.sqrt(d)

    def forward(self, x: Tensor, turn: tuple[Tensor, Tensor], position: Tensor | None, cache: KVCache | None):
        q = rotated(parts.heads(self.q_proj(x), self.heads), *turn)  # (B, H, T, d)
        k = rotated(parts.heads(self.k_proj(x), self.kv_heads), *turn)  # (B, Hkv, T, d)
        v = parts.heads(self.v_proj(x), self.kv_heads)
        return self.o_proj(parts.merged(parts.attend(q, k, v, self.scale, position, cache)))


class MLP(Module):
    def __init__(self, config: LlamaConfig) -> None:
        width, inner, bias = config.hidden_size, config.intermediate_size, config.mlp_bias
        self.gate_proj = Linear(width, inner, bias=bias)
        self.up_proj = Linear(width, inner, bias=bias)
        self.down_proj = Linear(inner, width, bias=bias)
        self.act = parts.activation(config.hidden_act, "LlamaConfig.hidden_act")

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(Module):
    def __init__(self, config: LlamaConfig) -> None:
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.mlp = MLP(config)

    def forward(self, x: Tensor, turn: tuple[Tensor, Tensor], position: Tensor | None, cache: KVCache | None):
        x = x + self.self_attn(self.input_layernorm(x), turn, position, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(Module):
    def __init__(self, config: LlamaConfig) -> None:
        self.embed_tokens = Embedding(config.vocab_size, config.hidden_size)
        self.layers = ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)


class Llama(parts.LanguageModel):
    """A LLaMA-family model with its language-model head: `model(ids)` gives (B, T, vocab) logits for (B, T)
    int token ids; with `caches` and `position`, a generation step, as limn.models.GPT2's. `context` caps the
    positions it serves (and so its rotary tables) below the config's max_position_embeddings; a sliding
    window (Mistral's) caps them at the window, where attention over all keys is the window's."""

    def __init__(self, config: LlamaConfig, context: int | None = None) -> None:
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        # within a sliding window attention is the plain kind: past it, keys would have to drop out
        count = parts.served(context, config.max_position_embeddings)
        count = min(count, config.sliding_window or count)
        cos, sin = rotary_tables(config, count)
        self.register_buffer("cos", Tensor(cos), persistent=False)  # (P, d)
        self.register_buffer("sin", Tensor(sin), persistent=False)
        self.serve(count, config.num_hidden_layers, config.kv_heads, config.head_width)

    def forward(self, ids: Tensor, position: Tensor | None = None, caches: list[KVCache] | None = None) -> Tensor:
        parts.check_ids(ids, self.config.vocab_size)
        where = parts.positions(ids.shape[1], position, self.slots)  # (T,)
        dtype = self.lm_head.weight.dtype
        turn = (self.cos[where].cast(dtype), self.sin[where].cast(dtype))  # (T, d) each
        x = self.model.embed_tokens(ids)  # (B, T, C)
        for layer, decoder in enumerate(self.model.layers):
            x = decoder(x, turn, position, None if caches is None else caches[layer])
        return self.lm_head(self.model.norm(x))  # (B, T, vocab)
