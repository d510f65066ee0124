"""A fused elementwise chain over 16M float32 values, and a row sum of 4096 x 4096, on the c device
beside numpy and torch (CPU) in one run.

    uv run python examples/bench_elementwise.py

limn fuses the whole chain into one kernel (one read of x, one write of y); numpy evaluates it op by
op, a pass over memory each; torch eager does the same with its own kernels. Figures are GB/s of the
bytes the fused kernel must move (x in, y out), from the median of several runs.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from _bench import first_call_seconds, median_seconds, table
from _limits import measure, report, share

import limn
from limn.c.toolchain import team_size
from limn.schedule import kernel_count


def chain(x, exp=lambda v: v.exp(), sqrt=lambda v: v.sqrt()):
    # y = sqrt(exp(x / 2 + 1) + x * x) / 4 - x: eight elementwise ops, exp and sqrt among them
    return sqrt(exp(x * 0.5 + 1.0) + x * x) * 0.25 - x


def chain_np(x):
    return chain(x, np.exp, np.sqrt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    limn.set_device("c")
    limits = measure(limn.get_device())
    threads = team_size()
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    rows = []

    x_np = rng.standard_normal(args.n).astype(np.float32)
    x, x_t = limn.Tensor(x_np), torch.from_numpy(x_np)
    assert kernel_count([chain(x).node]) == 1, "the chain should fuse into one kernel"
    first = first_call_seconds(lambda: chain(x).realize())
    times = {
        "limn c": median_seconds(lambda: chain(x).realize(), args.repeats),
        "numpy": median_seconds(lambda: chain_np(x_np), args.repeats),
        "torch": median_seconds(lambda: chain(x_t), args.repeats),
    }
    err = np.abs(chain(x).numpy() - chain_np(x_np)).max()
    moved = 2 * args.n * 4
    rows.append(
        [
            "chain, 16M",
            *(f"{moved / t / 1e9:.1f}" for t in times.values()),
            share(moved / times["limn c"] / 1e9, limits.copy_gbs) + " of copy",
            f"{times['numpy'] / times['limn c']:.2f}x",
            f"{times['torch'] / times['limn c']:.2f}x",
            f"{first * 1e3:.0f} ms",
            f"{err:.1e}",
        ]
    )

    m_np = rng.standard_normal((4096, 4096)).astype(np.float32)
    m, m_t = limn.Tensor(m_np), torch.from_numpy(m_np)
    first = first_call_seconds(lambda: m.sum(1).realize())
    times = {
        "limn c": median_seconds(lambda: m.sum(1).realize(), args.repeats),
        "numpy": median_seconds(lambda: m_np.sum(1), args.repeats),
        "torch": median_seconds(lambda: m_t.sum(1), args.repeats),
    }
    err = np.abs(m.sum(1).numpy() - m_np.astype(np.float64).sum(1)).max()
    moved = m_np.nbytes
    rows.append(
        [
            "row sum, 4096^2",
            *(f"{moved / t / 1e9:.1f}" for t in times.values()),
            share(moved / times["limn c"] / 1e9, limits.read_gbs) + " of read",
            f"{times['numpy'] / times['limn c']:.2f}x",
            f"{times['torch'] / times['limn c']:.2f}x",
            f"{first * 1e3:.0f} ms",
            f"{err:.1e}",
        ]
    )

    print(report(limits))
    print(
        f"GB/s (median of {args.repeats}); limn c device with {threads} threads; limn % limit: of the copy "
        "bandwidth for the chain (it reads and writes), of the read bandwidth for the row sum (it only reads)"
    )
    headers = ["work", "limn c", "numpy", "torch", "limn % limit", "vs numpy", "vs torch", "limn first call"]
    print(table([*headers, "max abs diff"], rows))


if __name__ == "__main__":
    main()
