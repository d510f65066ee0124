"""One training step of a small GPT, in limn (c device, captured) and in torch (CPU), side by side.

    uv run python examples/bench_step.py [--steps 20] [--device c|cuda] [--dropout P]

The model: byte vocabulary 256, d_model 128, 4 layers of 4 heads, context 128, batch 16, AdamW. limn runs it
twice, with fused attention (Tensor.scaled_dot_product_attention: the device's CUSTOM kernels) and with the
masked softmax composed from primitives; torch uses its SDPA. Each run is a child process (so peak memory is
its own), trains on the same TinyStories bytes, and reports the median ms per step after the first, the
time to the first step (limn: tracing, scheduling, compiling and capturing), the loss after the last step and
the peak resident memory. With --device cuda, limn runs on its cuda device and torch on the GPU (each step
ends with a read of the loss, which waits for the GPU).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _limits import Limits, measure, report

VOCAB, D_MODEL, LAYERS, HEADS, CONTEXT, BATCH = 256, 128, 4, 4, 128, 16
FRAMEWORKS = ("limn-fused", "limn-composed", "torch")  # each in its own child process
DATA = Path(__file__).resolve().parent / "data" / "tinystories-sample.txt"  # see data/README.md


def batches(steps: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """(inputs, next-byte targets), each (BATCH, CONTEXT) int32, cut at random from the sample text."""
    text = np.frombuffer(DATA.read_bytes(), dtype=np.uint8)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        starts = rng.integers(0, len(text) - CONTEXT - 1, size=BATCH)
        rows = np.stack([text[s : s + CONTEXT + 1] for s in starts]).astype(np.int32)
        out.append((rows[:, :-1], rows[:, 1:]))
    return out


def matmul_flops() -> float:
    """The matmul FLOPs of one step: 2 m k n per product in the forward, three times over (the backward
    computes a gradient for each of a product's two inputs, each costing what the forward product did)."""
    rows = BATCH * CONTEXT
    per_layer = 2 * rows * D_MODEL * (3 + 1 + 4 + 4) * D_MODEL  # attn, proj, fc, fc_proj
    per_layer += 2 * 2 * rows * CONTEXT * D_MODEL  # q @ k^T and att @ v, over all heads: (B, nh, T, T) each
    forward = LAYERS * per_layer + 2 * rows * D_MODEL * VOCAB  # the blocks, then the head
    return 3 * forward


def machine_limits() -> Limits | None:
    """The c device's limits, measured in this (parent) process before the children run."""
    import limn

    try:
        return measure(limn.get_device("c"))
    except limn.DeviceError as e:
        print(f"machine limits not measured: {e}")
        return None


# ---- limn ----


def limn_gpt(attention: str = "composed", dropout: float = 0.0):
    """limn, and the GPT in limn.nn; attention "fused" takes Tensor.scaled_dot_product_attention (the c and numpy
    devices run its CUSTOM kernels), "composed" writes the masked softmax out (the default, as bench_plan and the
    vectorization test read it). `dropout` drops attention weights, as nanoGPT's attn_dropout in training."""
    import limn
    from limn import Tensor, nn

    class Block:
        def __init__(self) -> None:
            self.ln_1, self.ln_2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
            self.attn = nn.Linear(D_MODEL, 3 * D_MODEL)
            self.proj = nn.Linear(D_MODEL, D_MODEL)
            self.fc = nn.Linear(D_MODEL, 4 * D_MODEL)
            self.fc_proj = nn.Linear(4 * D_MODEL, D_MODEL)

        def __call__(self, x: Tensor, causal: Tensor) -> Tensor:
            b, t, c = x.shape
            hs = c // HEADS
            qkv = self.attn(self.ln_1(x))  # (B, T, 3C)
            q, k, v = qkv.reshape(b, t, 3, HEADS, hs).permute(2, 0, 3, 1, 4)  # each (B, nh, T, hs)
            if attention == "fused":
                y = Tensor.scaled_dot_product_attention(q, k, v, causal=True, dropout_p=dropout)  # (B, nh, T, hs)
            else:
                scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
                y = causal.where(scores, float("-inf")).softmax(-1).dropout(dropout) @ v
            y = y.permute(0, 2, 1, 3).reshape(b, t, c)  # (B, nh, T, hs) -> (B, T, C)
            x = x + self.proj(y)
            return x + self.fc_proj(self.fc(self.ln_2(x)).gelu())

    class GPT:
        def __init__(self) -> None:
            self.wte, self.wpe = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(CONTEXT, D_MODEL)
            self.blocks = [Block() for _ in range(LAYERS)]
            self.ln_f = nn.LayerNorm(D_MODEL)
            self.head = nn.Linear(D_MODEL, VOCAB, bias=False)
            self.positions = Tensor(np.arange(CONTEXT, dtype=np.int32))
            self.causal = Tensor(np.tril(np.ones((CONTEXT, CONTEXT), dtype=bool)))

        def __call__(self, idx: Tensor) -> Tensor:
            x = self.wte(idx) + self.wpe(self.positions)  # (B, T, C)
            for block in self.blocks:
                x = block(x, self.causal)
            return self.head(self.ln_f(x))  # (B, T, vocab)

    return limn, GPT


def run_limn(steps: int, device: str, attention: str, dropout: float) -> dict:
    limn, GPT = limn_gpt(attention, dropout)
    from limn import Tensor, nn, optim
    from limn.capture import capture

    limn.set_device(device)
    limn.manual_seed(0)
    model = GPT()
    opt = optim.AdamW(nn.named_parameters(model), lr=3e-3, weight_decay=0.0)

    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        logits = model(x)
        loss = logits.reshape(BATCH * CONTEXT, VOCAB).cross_entropy(y.reshape(BATCH * CONTEXT))
        loss.backward()
        opt.step(loss)
        return loss

    step = capture(step)
    data = batches(steps)
    times = []
    start = time.perf_counter()
    for i, (x, y) in enumerate(data):
        t0 = time.perf_counter()
        loss = step(Tensor(x), Tensor(y)).item()
        times.append(time.perf_counter() - t0)
        if i == 0:
            first = time.perf_counter() - start
    return {"first": first, "median": statistics.median(times[1:]), "loss": loss}


# ---- torch ----


def torch_gpt(dropout: float = 0.0):
    """torch, and the same GPT written in torch.nn (what both benchmarks compare limn's with)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
            self.attn = nn.Linear(D_MODEL, 3 * D_MODEL)
            self.proj = nn.Linear(D_MODEL, D_MODEL)
            self.fc = nn.Linear(D_MODEL, 4 * D_MODEL)
            self.fc_proj = nn.Linear(4 * D_MODEL, D_MODEL)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.attn(self.ln_1(x)).view(b, t, 3, HEADS, c // HEADS).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, D_MODEL), nn.Embedding(CONTEXT, D_MODEL)
            self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(D_MODEL)
            self.head = nn.Linear(D_MODEL, VOCAB, bias=False)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return torch, GPT


def run_torch(steps: int, threads: int, device: str, dropout: float) -> dict:
    torch, GPT = torch_gpt(dropout)
    import torch.nn.functional as F

    where = "cuda" if device == "cuda" else "cpu"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    torch.set_default_device(where)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    times = []
    start = time.perf_counter()
    for i, (x, y) in enumerate(batches(steps)):
        t0 = time.perf_counter()
        opt.zero_grad()
        logits = model(torch.from_numpy(x).long().to(where))
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), torch.from_numpy(y).long().to(where).reshape(-1))
        loss.backward()
        opt.step()
        value = loss.item()
        times.append(time.perf_counter() - t0)
        if i == 0:
            first = time.perf_counter() - start
    return {"first": first, "median": statistics.median(times[1:]), "loss": value}


def child(framework: str, steps: int, device: str, threads: int, dropout: float) -> None:
    if framework.startswith("limn"):
        result = run_limn(steps, device, framework.removeprefix("limn-"), dropout)
    else:
        result = run_torch(steps, threads, device, dropout)
    result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each; medians are reported")
    parser.add_argument("--device", default="c")
    parser.add_argument("--dropout", type=float, default=0.0, help="dropout_p of the attention weights")
    parser.add_argument("--child", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    from limn.c.team import team_size

    threads = team_size()
    if args.child:
        child(args.child, args.steps, args.device, threads, args.dropout)
        return
    limits = machine_limits()
    # the two alternate for a few rounds, so a noisy stretch of the machine lands on both
    runs: dict[str, list[dict]] = {f: [] for f in FRAMEWORKS}
    for _ in range(args.rounds):
        for framework in FRAMEWORKS:
            cmd = [sys.executable, __file__, "--child", framework, "--steps", str(args.steps), "--device", args.device]
            cmd += ["--dropout", str(args.dropout)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[framework].append(json.loads(done.stdout.strip().splitlines()[-1]))
    fused, composed, torch_r = ({k: statistics.median(r[k] for r in rs) for k in rs[0]} for rs in runs.values())
    if limits is not None:
        print(report(limits))
    print(
        f"GPT training step: vocab {VOCAB}, d_model {D_MODEL}, {LAYERS} layers x {HEADS} heads, context {CONTEXT}, "
        f"batch {BATCH}, AdamW, attention dropout {args.dropout}; {args.steps} steps x {args.rounds} alternating "
        f"rounds, {threads} threads"
    )
    torch_on = "GPU" if args.device == "cuda" else "CPU"
    cols = [f"limn {args.device} fused", f"limn {args.device} composed", f"torch {torch_on} (SDPA)"]
    print(f"{'(limn captured)':22}" + "".join(f"{c:>22}" for c in cols))
    rows = [("ms per step (median)", "median", 1e3, ".1f"), ("first step (s)", "first", 1, ".2f")]
    rows += [("peak memory (MB)", "peak_mb", 1, ".0f"), ("loss after last step", "loss", 1, ".3f")]
    for label, key, unit, spec in rows:
        print(f"{label:22}" + "".join(f"{r[key] * unit:>22{spec}}" for r in (fused, composed, torch_r)))
    print(
        f"limn / torch step time: fused {fused['median'] / torch_r['median']:.2f}x, "
        f"composed {composed['median'] / torch_r['median']:.2f}x"
    )
    limn_r = fused
    if limits is not None and limits.fma_gflops is not None and args.device == "c":
        flops = matmul_flops()
        at_peak = flops / (limits.fma_gflops * 1e9)
        print(
            f"matmul FLOPs per step: {flops / 1e9:.1f} GFLOP (forward x 3), {at_peak * 1e3:.1f} ms at the fma peak; "
            f"limn's step takes {limn_r['median'] / at_peak:.1f}x that"
        )


if __name__ == "__main__":
    main()
