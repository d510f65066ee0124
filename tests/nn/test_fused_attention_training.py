"""A small GPT trained 50 AdamW steps twice, once through the fused attention kernels (the CUSTOM ops of
limn.composed.functional.sdpa) and once through the composed masked softmax, from the same weights on the same batches:
the two loss curves agree within float32 tolerance at every step (issue 13's training check). On the numpy device,
whose CUSTOM kernels are the references, and on c (`-m ops`), whose kernels are limn-c's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import limn
from limn import Tensor, nn, optim

VOCAB, EMBD, HEADS, T, BATCH, STEPS = 32, 32, 2, 16, 4, 50


class Block:
    def __init__(self, fused: bool) -> None:
        self.fused = fused
        self.ln_1, self.ln_2 = nn.LayerNorm(EMBD), nn.LayerNorm(EMBD)
        self.qkv, self.proj = nn.Linear(EMBD, 3 * EMBD), nn.Linear(EMBD, EMBD)
        self.fc, self.out = nn.Linear(EMBD, 4 * EMBD), nn.Linear(4 * EMBD, EMBD)

    def __call__(self, x: Tensor, causal: Tensor) -> Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).reshape(b, t, 3, HEADS, c // HEADS).permute(2, 0, 3, 1, 4)  # (B, H, T, hs)
        if self.fused:
            y = Tensor.scaled_dot_product_attention(q, k, v, causal=True)
        else:
            scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(c // HEADS))  # (B, H, T, T)
            y = causal.where(scores, float("-inf")).softmax(-1) @ v
        x = x + self.proj(y.permute(0, 2, 1, 3).reshape(b, t, c))
        return x + self.out(self.fc(self.ln_2(x)).gelu())


class GPT:
    def __init__(self, fused: bool) -> None:
        self.wte, self.wpe = nn.Embedding(VOCAB, EMBD), nn.Embedding(T, EMBD)
        self.blocks = [Block(fused), Block(fused)]
        self.head = nn.Linear(EMBD, VOCAB, bias=False)
        self.positions = Tensor(np.arange(T, dtype=np.int32))
        self.causal = Tensor(np.tril(np.ones((T, T), dtype=bool)))

    def __call__(self, idx: Tensor) -> Tensor:
        x = self.wte(idx) + self.wpe(self.positions)  # (B, T, C)
        for block in self.blocks:
            x = block(x, self.causal)
        return self.head(x)  # (B, T, vocab)


def losses(device: str, fused: bool) -> list[float]:
    limn.set_device(device)
    limn.manual_seed(0)
    model = GPT(fused)
    opt = optim.AdamW(nn.named_parameters(model), lr=3e-3)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(STEPS):
        rows = rng.integers(0, VOCAB, (BATCH, T + 1)).astype(np.int32)
        logits = model(Tensor(rows[:, :-1]))
        loss = logits.reshape(BATCH * T, VOCAB).cross_entropy(Tensor(rows[:, 1:]).reshape(BATCH * T))
        opt.zero_grad()
        loss.backward()
        opt.step(loss)
        out.append(loss.item())
    return out


@pytest.mark.train  # 50 steps of a GPT twice over: nox -s train runs it (CI too), the default suite stays short
def test_a_gpt_trained_50_steps_with_fused_attention_follows_the_composed_run(device: str) -> None:
    fused, composed = losses(device, True), losses(device, False)
    # the kernels sum in another order than the composition: float32 rounding, compounded over 50 steps
    np.testing.assert_allclose(fused, composed, rtol=2e-4, err_msg="fused and composed loss curves part")
    assert fused[-1] < fused[0] - 0.3, f"the model did not train: {fused[0]:.3f} -> {fused[-1]:.3f}"
