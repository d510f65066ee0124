"""Causal attention, forward and backward: limn's fused kernels against its composed form, and torch's SDPA
against torch's composed form, each in a process of its own.

    uv run python examples/bench_attention.py [--lengths 256 1024 4096] [--repeats 5] [--device c|cuda]
        [--dropout P]

6 heads of 32, 8192 tokens per step (batch = 8192 / T). A child process builds q, k, v, runs one warm-up
step, then `repeats` timed steps (forward, sum, backward) and reports the median ms and its peak resident
memory over what it held before the first step. glibc is told to give freed memory back
(MALLOC_MMAP_THRESHOLD_), so the peak is the step's working set, not the allocator's high-water mark.
With --device cuda, limn runs its CUDA kernels and torch runs on the GPU, each step timed to the end of its
stream; the MB column is then the host's, not the GPU's. With --dropout the attention weights are dropped, as
in training (nanoGPT's attn_dropout): limn's fused kernels draw the mask inside; the composed forms apply dropout to
the softmax's output.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

from _limits import limits_header

HEADS, HEAD_DIM, TOKENS = 6, 32, 8192
KINDS = ("limn fused", "limn composed", "torch sdpa", "torch composed")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def limn_step(t: int, fused: bool, device: str, dropout: float):
    import numpy as np

    import limn
    from limn import Tensor

    limn.set_device(device)
    rng = np.random.default_rng(0)
    shape = (TOKENS // t, HEADS, t, HEAD_DIM)  # (B, H, T, d)
    q, k, v = (
        Tensor(rng.standard_normal(shape).astype(np.float32), device=device, requires_grad=True) for _ in range(3)
    )
    causal = Tensor(np.tril(np.ones((t, t), dtype=bool)), device=device)

    def step() -> None:
        q.grad = k.grad = v.grad = None
        if fused:
            out = Tensor.scaled_dot_product_attention(q, k, v, causal=True, dropout_p=dropout)
        else:
            scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(HEAD_DIM))  # (B, H, T, T)
            out = causal.where(scores, float("-inf")).softmax(-1).dropout(dropout) @ v
        out.sum().backward()
        limn.realize(q.grad, k.grad, v.grad)  # a run ends waiting for its stream on cuda

    return step


def torch_step(t: int, fused: bool, device: str, dropout: float):
    import torch

    from limn.c.team import team_size

    torch.manual_seed(0)
    where = "cuda" if device == "cuda" else "cpu"
    torch.set_num_threads(team_size())  # limn's team: the same threads for both
    shape = (TOKENS // t, HEADS, t, HEAD_DIM)
    q, k, v = (torch.randn(shape, device=where, requires_grad=True) for _ in range(3))
    causal = torch.ones(t, t, dtype=torch.bool, device=where).tril()

    def step() -> None:
        q.grad = k.grad = v.grad = None
        if fused:
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
        else:
            scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(HEAD_DIM))
            weights = scores.masked_fill(~causal, float("-inf")).softmax(-1)
            out = torch.nn.functional.dropout(weights, dropout) @ v
        out.sum().backward()
        if where == "cuda":
            torch.cuda.synchronize()

    return step


def child(kind: str, t: int, repeats: int, device: str, dropout: float) -> None:
    make = limn_step if kind.startswith("limn") else torch_step
    step = make(t, fused=kind.endswith(("fused", "sdpa")), device=device, dropout=dropout)
    before = rss_mb()
    step()  # warm-up: limn compiles (or reads its kernel cache) here
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"ms": statistics.median(times) * 1e3, "peak_mb": peak - before}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="c", help="limn's device: c (the default), cuda or cuda-sim")
    parser.add_argument("--dropout", type=float, default=0.0, help="dropout_p of the attention weights")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "T"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.repeats, args.device, args.dropout)
        return
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    print(limits_header(args.device))
    torch_on = "the GPU" if args.device == "cuda" else "the CPU"
    print(
        f"causal attention, {HEADS} heads x {HEAD_DIM}, {TOKENS} tokens per step, forward + backward; "
        f"limn on {args.device}, torch on {torch_on}, dropout {args.dropout}"
    )
    print(f"{'T':>6}" + "".join(f"{k + ' ms':>20}{'MB':>7}" for k in KINDS))
    for t in args.lengths:
        cells = []
        for kind in KINDS:
            cmd = [sys.executable, __file__, "--child", kind, str(t), "--repeats", str(args.repeats)]
            cmd += ["--device", args.device, "--dropout", str(args.dropout)]
            done = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if done.returncode != 0:
                cells.append(f"{'failed':>20}{'':>7}")
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            cells.append(f"{r['ms']:>20.1f}{r['peak_mb']:>7.0f}")
        print(f"{t:>6}" + "".join(cells))


if __name__ == "__main__":
    main()
