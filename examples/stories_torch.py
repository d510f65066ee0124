"""examples/train_stories.py's GPT and its training written in torch, for the comparisons: the same layout and
parameter names (so a limn checkpoint's weights load with safetensors' loader), the same batches, the same
optimizers (torch.optim.Muon on the hidden matrices, AdamW on the rest), schedule and clip.

tests/nn/test_train_stories.py trains both from one set of weights and compares the losses;
examples/bench_stories.py times both (torch eager and torch.compile) against the limn run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from stories_data import Corpus
from stories_gpt import VOCAB, Config


class Block(torch.nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.heads = c.heads
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(c.width), torch.nn.LayerNorm(c.width)
        self.attn = torch.nn.Module()
        self.attn.c_attn, self.attn.c_proj = torch.nn.Linear(c.width, 3 * c.width), torch.nn.Linear(c.width, c.width)
        self.attn.resid_dropout = torch.nn.Dropout(c.dropout)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = torch.nn.Linear(c.width, 4 * c.width), torch.nn.Linear(4 * c.width, c.width)
        self.mlp.dropout = torch.nn.Dropout(c.dropout)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        x = x + self.attn.resid_dropout(self.attn.c_proj(y.transpose(1, 2).reshape(b, t, c)))
        return x + self.mlp.dropout(self.mlp.c_proj(torch.nn.functional.gelu(self.mlp.c_fc(self.ln_2(x)))))


class GPT(torch.nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.transformer = torch.nn.ModuleDict(
            dict(
                wte=torch.nn.Embedding(VOCAB, c.width),
                wpe=torch.nn.Embedding(c.context, c.width),
                drop=torch.nn.Dropout(c.dropout),
                h=torch.nn.ModuleList([Block(c) for _ in range(c.layers)]),
                ln_f=torch.nn.LayerNorm(c.width),
            )
        )
        self.lm_head = torch.nn.Linear(c.width, VOCAB, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as limn's

    def forward(self, idx):
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(torch.arange(idx.shape[1])))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))  # (B, T, 256)


def from_checkpoint(path: Path, config: Config) -> GPT:
    """The torch model with the weights of a limn checkpoint (safetensors' own loader, torch's names)."""
    from safetensors.torch import load_file

    model = GPT(config)
    saved = load_file(str(path))
    model.load_state_dict({name: saved[name] for name in model.state_dict()}, strict=True)
    return model


def loss_of(model, x, y) -> torch.Tensor:
    """The mean next-byte cross entropy of batch x (B, T) against y (B, T), numpy int32 both."""
    logits = model(torch.from_numpy(x).long())  # (B, T, 256)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), torch.from_numpy(y).long().reshape(-1))


def newton_schulz_float32(grad: torch.Tensor, ns_coefficients, ns_steps: int, eps: float) -> torch.Tensor:
    """Muon's orthogonalization, the quintic Newton-Schulz iteration torch.optim.Muon runs, in float32 matmuls as
    limn's Muon multiplies: torch's casts to bfloat16 first, whose matmuls a CPU without AVX512-BF16 emulates."""
    a, b, c = ns_coefficients
    x = grad.to(torch.float32, copy=True)
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)  # spectral norm at most 1
    for _ in range(ns_steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if tall else x


@contextlib.contextmanager
def muon_in_float32() -> Iterator[None]:
    """Within the block, torch.optim.Muon orthogonalizes with newton_schulz_float32."""
    from torch.optim import _muon

    own = _muon._zeropower_via_newtonschulz
    _muon._zeropower_via_newtonschulz = newton_schulz_float32
    try:
        yield
    finally:
        _muon._zeropower_via_newtonschulz = own


def train(model: GPT, settings, corpus: Corpus, lr_factor, steps: int, compiled: bool = False) -> dict:
    """`steps` steps of train_stories' recipe on `model` (settings: train_stories.Settings; lr_factor: its
    schedule). Returns each step's loss, the time of the first step and the steady seconds of the rest."""
    s = settings
    named = list(model.named_parameters())
    hidden = [p for n, p in named if p.ndim == 2 and n.startswith("transformer.h.")]
    rest = [p for n, p in named if not (p.ndim == 2 and n.startswith("transformer.h."))]
    muon = torch.optim.Muon(hidden, lr=s.muon_lr, weight_decay=0.0)
    adam = torch.optim.AdamW(rest, lr=s.adam_lr, betas=(0.9, 0.95), weight_decay=0.0)
    schedules = [torch.optim.lr_scheduler.LambdaLR(o, lr_factor) for o in (muon, adam)]
    forward = torch.compile(model) if compiled else model
    losses, first, steady = [], 0.0, 0.0
    for step in range(steps):
        t0 = time.perf_counter()
        x, y = corpus.batch("train", s.batch, s.config.context, s.seed, step)
        loss = loss_of(forward, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.clip)
        muon.step()
        adam.step()
        muon.zero_grad()
        adam.zero_grad()
        for schedule in schedules:
            schedule.step()
        losses.append(loss.item())
        if step == 0:
            first = time.perf_counter() - t0
        else:
            steady += time.perf_counter() - t0
    return {"losses": losses, "first_step_seconds": first, "steady_seconds": steady}


def validate(model: GPT, settings, corpus: Corpus) -> float:
    """The mean loss over train_stories' validation batches, as Run.validate measures it."""
    s = settings
    model.eval()
    losses = []
    with torch.no_grad():
        for k in range(s.eval_batches):
            x, y = corpus.batch("valid", s.batch, s.config.context, s.seed, k)
            logits = model(torch.from_numpy(x).long())
            losses.append(
                torch.nn.functional.cross_entropy(
                    logits.reshape(-1, VOCAB), torch.from_numpy(y).long().reshape(-1)
                ).item()
            )
    model.train()
    return sum(losses) / len(losses)
