"""bench_step's GPT training step, alone and beside busy processes, for limn and torch: how much each slows down
when the cores are shared; then limn sharing one process with numpy or torch.

    uv run python examples/bench_shared.py [--steps 20] [--busy 1 3] [--rounds 2]

Each row starts bench_step's child for one framework (limn with fused attention on the c device, captured;
torch eager with its SDPA), once with the machine to itself and once beside N processes that spin a core each
(pure Python loops, started just before and killed just after). Reported: the median ms per step of each run
and the slowdown, shared over alone, per framework. Runs alternate between the frameworks and the conditions,
and the medians of --rounds runs are shown. A thread team that spin-waits between kernels, or a barrier whose
thread lost its core, shows here as a slowdown well past what the lost cores explain.

The second table is one process that alternates limn's 256 matmul with numpy's (or torch's): each library's
median time right after the other's call, over its time in a loop of its own. A thread team that keeps
spinning after its call takes the cores the other library's next call needs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _bench import in_own_process, only_this, table
from _limits import limits_header

STEP = Path(__file__).with_name("bench_step.py")
FRAMEWORKS = ("limn-fused", "torch")
SPIN = "while True:\n    pass\n"


def one_run(framework: str, steps: int, busy: int) -> float:
    """The median ms per step of one bench_step child, beside `busy` spinning processes."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
    try:
        cmd = [sys.executable, str(STEP), "--child", framework, "--steps", str(steps)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    return json.loads(done.stdout.strip().splitlines()[-1])["median"] * 1e3


def alternating(other: str, n: int = 256, calls: int = 300) -> dict[str, float]:
    """In this process: limn's n x n matmul on the c device and `other`'s (numpy or torch), each timed in a loop
    of its own, then alternately, each timed right after the other's call. Medians, in seconds."""
    import limn

    limn.set_device("c")
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    x = limn.Tensor(a)
    if other == "torch":
        import torch

        t = torch.from_numpy(a)
        theirs = lambda: t @ t  # noqa: E731
    else:
        theirs = lambda: a @ a  # noqa: E731
    ours = lambda: (x @ x).realize()  # noqa: E731
    for _ in range(5):
        ours(), theirs()
    figures = {"limn alone": _median(ours, calls), f"{other} alone": _median(theirs, calls)}
    after_ours, after_theirs = [], []
    for _ in range(calls):
        after_theirs.append(_seconds(ours))
        after_ours.append(_seconds(theirs))
    figures["limn after"], figures[f"{other} after"] = statistics.median(after_theirs), statistics.median(after_ours)
    return figures


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _median(fn, calls: int) -> float:
    return statistics.median(_seconds(fn) for _ in range(calls))


def in_one_process(rounds: int) -> str:
    rows = []
    for other in ("numpy", "torch"):
        runs = [in_own_process(__file__, other, []) for _ in range(rounds)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for lib, after in (("limn", other), (other, "limn")):
            alone, shared = med[f"{lib} alone"], med[f"{lib} after"]
            rows.append([lib, after, f"{alone * 1e6:.0f}", f"{shared * 1e6:.0f}", f"{shared / alone:.2f}x"])
    headers = ["256 matmul of", "right after", "alone, us", "after, us", "slowdown"]
    return table(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--busy", type=int, nargs="+", default=[1, 3], help="how many spinning processes beside")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=("numpy", "torch"), help=argparse.SUPPRESS)  # the in-process child
    args = parser.parse_args()
    if args.only is not None:
        return only_this(alternating(args.only))
    print(limits_header("c"))
    conditions = [0, *args.busy]
    ms: dict[tuple[str, int], list[float]] = {(f, b): [] for f in FRAMEWORKS for b in conditions}
    for _ in range(args.rounds):
        for busy in conditions:
            for framework in FRAMEWORKS:
                ms[framework, busy].append(one_run(framework, args.steps, busy))
    rows = []
    for framework in FRAMEWORKS:
        alone = statistics.median(ms[framework, 0])
        row = [framework, f"{alone:.0f}"]
        for busy in args.busy:
            shared = statistics.median(ms[framework, busy])
            row += [f"{shared:.0f}", f"{shared / alone:.1f}x"]
        rows.append(row)
    print(
        f"bench_step's GPT step, ms (median of {args.rounds} runs of {args.steps} steps) on {os.cpu_count()} CPUs, "
        f"alone and beside {', '.join(map(str, args.busy))} spinning processes"
    )
    headers = ["framework", "alone"]
    for busy in args.busy:
        headers += [f"beside {busy}", "slowdown"]
    print(table(headers, rows))
    print(f"\nlimn and another library in one process, alternating calls (median of {args.rounds} processes)")
    print(in_one_process(args.rounds))


if __name__ == "__main__":
    main()
