"""The GPT that examples/train_stories.py trains: bytes in (vocabulary 256), next-byte logits out.

nanoGPT's layout and parameter names (transformer.wte, transformer.h.0.attn.c_attn, ..., lm_head), so a
checkpoint's weights load into the same model written in torch: token and position embeddings, pre-LayerNorm
blocks of fused causal attention (Tensor.scaled_dot_product_attention) and a GELU MLP, a final LayerNorm, and a
head tied to the token embedding (lm_head.weight is transformer.wte.weight). Dropout after the embeddings, the
attention projection and the MLP, off under eval(). GPT.step runs one position against a KVCache per layer:
the generation loop's captured one-token step.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from limn import Tensor, nn

VOCAB = 256  # bytes


@dataclass(frozen=True)
class Config:
    """The model's sizes: context (positions it sees), layers, heads and width, and its dropout rate."""

    context: int = 128
    layers: int = 4
    heads: int = 4
    width: int = 128
    dropout: float = 0.1

    def __post_init__(self) -> None:
        if self.width % self.heads:
            raise ValueError(f"Config: width {self.width} is not a multiple of heads {self.heads}")

    def as_metadata(self) -> dict[str, str]:
        """The fields as a checkpoint's metadata strings; train_stories.checkpoint_fields reads them back, each
        checked (limn.serialize.read_fields)."""
        return {key: str(value) for key, value in asdict(self).items()}


class CausalSelfAttention(nn.Module):
    def __init__(self, config: Config) -> None:
        self.c_attn = nn.Linear(config.width, 3 * config.width)
        self.c_proj = nn.Linear(config.width, config.width)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.heads = config.heads

    def forward(self, x: Tensor, cache: nn.KVCache | None = None, position: Tensor | None = None) -> Tensor:
        b, t, c = x.shape
        qkv = self.c_attn(x).reshape(b, t, 3, self.heads, c // self.heads)  # (B, T, 3, nh, hs)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (B, nh, T, hs)
        if cache is None:
            y = Tensor.scaled_dot_product_attention(q, k, v, causal=True)
        else:  # one position against every filled slot of the cache
            keys, values, filled = cache.update(k, v, position)  # (B, nh, L, hs) twice, (L,)
            y = Tensor.scaled_dot_product_attention(q, keys, values, key_mask=filled)
        y = y.permute(0, 2, 1, 3).reshape(b, t, c)  # (B, nh, T, hs) -> (B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: Config) -> None:
        self.c_fc = nn.Linear(config.width, 4 * config.width)
        self.c_proj = nn.Linear(4 * config.width, config.width)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.c_fc(x).gelu()))


class Block(nn.Module):
    def __init__(self, config: Config) -> None:
        self.ln_1, self.attn = nn.LayerNorm(config.width), CausalSelfAttention(config)
        self.ln_2, self.mlp = nn.LayerNorm(config.width), MLP(config)

    def forward(self, x: Tensor, cache: nn.KVCache | None = None, position: Tensor | None = None) -> Tensor:
        x = x + self.attn(self.ln_1(x), cache, position)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: Config) -> None:
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(VOCAB, config.width),
                wpe=nn.Embedding(config.context, config.width),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.layers)]),
                ln_f=nn.LayerNorm(config.width),
            )
        )
        self.lm_head = nn.Linear(config.width, VOCAB, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied: one matrix embeds and predicts
        for name, p in self.named_parameters():  # GPT-2's init: N(0, 0.02), residual projections scaled down
            if p.ndim == 2:
                std = 0.02 / math.sqrt(2 * config.layers) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, mean=0.0, std=std)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, idx: Tensor) -> Tensor:
        """Logits (B, T, 256) for byte indices idx (B, T), T at most the context."""
        t = idx.shape[1]
        pos = Tensor.arange(t, dtype="int32", device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))  # (B, T, C)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))

    def step(self, idx: Tensor, position: Tensor, caches: list[nn.KVCache]) -> Tensor:
        """Logits (B, 256) for one byte per sequence, idx (B, 1), at `position` (a 0-d int tensor), against
        the caches of the positions before it (one KVCache per layer, which this step fills at `position`)."""
        x = self.transformer.wte(idx) + self.transformer.wpe(position.reshape(1))  # (B, 1, C)
        for block, cache in zip(self.transformer.h, caches):
            x = block(x, cache, position)
        return self.lm_head(self.transformer.ln_f(x))[:, -1]  # (B, 1, 256) -> (B, 256)

    def caches(self, batch: int = 1) -> list[nn.KVCache]:
        c = self.config
        return [nn.KVCache(batch, c.heads, c.context, c.width // c.heads) for _ in range(c.layers)]

    def torch_state_dict(self) -> dict[str, Tensor]:
        """The weights under every name torch's state_dict of this model has, the tied matrix under both."""
        named = dict(self.named_parameters())
        named.setdefault("lm_head.weight", self.lm_head.weight)
        named.setdefault("transformer.wte.weight", self.transformer.wte.weight)
        return named
