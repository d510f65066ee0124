"""A fused elementwise chain over 16M float32 values, and a row sum of 4096 x 4096, on the c device
beside numpy and torch (CPU), each library timed in a process of its own.

    uv run python examples/bench_elementwise.py

limn fuses the whole chain into one kernel (one read of x, one write of y); numpy evaluates it op by
op, a pass over memory each; torch eager does the same with its own kernels. Figures are GB/s of the
bytes the fused kernel must move (x in, y out), from the median of several runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from _bench import first_call_seconds, in_own_process, median_seconds, only_this, table
from _limits import measure, report, share

import limn
from limn.c.team import team_size
from limn.schedule import kernel_count


def chain(x, exp=lambda v: v.exp(), sqrt=lambda v: v.sqrt()):
    # y = sqrt(exp(x / 2 + 1) + x * x) / 4 - x: eight elementwise ops, exp and sqrt among them
    return sqrt(exp(x * 0.5 + 1.0) + x * x) * 0.25 - x


def chain_np(x):
    return chain(x, np.exp, np.sqrt)


WORK = {  # the table's row: (the figures' key, the machine limit it is held to)
    "chain, 16M": ("chain", "copy"),
    "row sum, 4096^2": ("row_sum", "read"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", choices=LIBRARIES, help=argparse.SUPPRESS)  # one library, in its own process
    args = parser.parse_args()
    if args.only is not None:
        return only_this(LIBRARIES[args.only](args.n, args.repeats))
    limits = measure(limn.get_device("c"))
    threads = team_size()
    argv = ["--n", str(args.n), "--repeats", str(args.repeats)]
    figures = {name: in_own_process(__file__, name, argv) for name in LIBRARIES}
    rows = []
    for name, (key, limit) in WORK.items():
        moved = figures["limn"][key]["bytes"]
        t = {lib: figures[lib][key]["seconds"] for lib in LIBRARIES}
        bound = limits.copy_gbs if limit == "copy" else limits.read_gbs
        rows.append(
            [
                name,
                *(f"{moved / t[lib] / 1e9:.1f}" for lib in LIBRARIES),
                share(moved / t["limn"] / 1e9, bound) + f" of {limit}",
                f"{t['numpy'] / t['limn']:.2f}x",
                f"{t['torch'] / t['limn']:.2f}x",
                f"{figures['limn'][key]['first'] * 1e3:.0f} ms",
                f"{figures['limn'][key]['error']:.1e}",
            ]
        )
    print(report(limits))
    print(
        f"GB/s (median of {args.repeats}), each library in a process of its own with {threads} threads; limn % "
        "limit: of the copy bandwidth for the chain (it reads and writes), of the read bandwidth for the row sum "
        "(it only reads)"
    )
    headers = ["work", "limn c", "numpy", "torch", "limn % limit", "vs numpy", "vs torch", "limn first call"]
    print(table([*headers, "max abs diff"], rows))
    print(
        f"the chain takes {figures['limn']['chain']['per_copy']:.2f}x the time of limn's copy of the same bytes "
        f"(x * 2), the median of {4 * args.repeats} pairs timed back to back in one process"
    )


def values(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal((4096, 4096)).astype(np.float32)


def time_limn(n: int, repeats: int) -> dict:
    limn.set_device("c")
    x_np, m_np = values(n)
    x, m = limn.Tensor(x_np), limn.Tensor(m_np)
    assert kernel_count([chain(x).node]) == 1, "the chain should fuse into one kernel"
    out = {}
    for key, run, want, moved in [
        ("chain", lambda: chain(x), lambda: chain_np(x_np), 2 * n * 4),
        ("row_sum", lambda: m.sum(1), lambda: m_np.astype(np.float64).sum(1), m_np.nbytes),
    ]:
        first = first_call_seconds(lambda run=run: run().realize())
        seconds = median_seconds(lambda run=run: run().realize(), repeats)
        error = float(np.abs(run().numpy() - want()).max())  # numpy after the timing, not beside it
        out[key] = {"seconds": seconds, "first": first, "error": error, "bytes": moved}
    out["chain"]["per_copy"] = chain_per_copy(x, repeats)
    return out


def chain_per_copy(x, repeats: int) -> float:
    """The chain's time over a limn copy's (x * 2, the same bytes in and out), the median of pairs timed
    back to back: the copy probe in the parent process runs minutes apart from the chain, and this
    machine's bandwidth moves that much between them."""

    def seconds(make) -> float:
        start = time.perf_counter()
        make().realize()
        return time.perf_counter() - start

    seconds(lambda: x * 2.0)  # compiles the copy
    ratios = [seconds(lambda: chain(x)) / seconds(lambda: x * 2.0) for _ in range(4 * repeats)]
    return statistics.median(ratios)


def time_numpy(n: int, repeats: int) -> dict:
    x, m = values(n)
    return {
        "chain": {"seconds": median_seconds(lambda: chain_np(x), repeats)},
        "row_sum": {"seconds": median_seconds(lambda: m.sum(1), repeats)},
    }


def time_torch(n: int, repeats: int) -> dict:
    torch.set_num_threads(team_size())
    x, m = (torch.from_numpy(a) for a in values(n))
    return {
        "chain": {"seconds": median_seconds(lambda: chain(x), repeats)},
        "row_sum": {"seconds": median_seconds(lambda: m.sum(1), repeats)},
    }


LIBRARIES = {"limn": time_limn, "numpy": time_numpy, "torch": time_torch}  # the table's order


if __name__ == "__main__":
    main()
