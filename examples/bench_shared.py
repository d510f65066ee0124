"""bench_step's GPT training step, alone and beside busy processes, for limn and torch: how much each slows down
when the cores are shared.

    uv run python examples/bench_shared.py [--steps 20] [--busy 1 3] [--rounds 2]

Each row starts bench_step's child for one framework (limn with fused attention on the c device, captured;
torch eager with its SDPA), once with the machine to itself and once beside N processes that spin a core each
(pure Python loops, started just before and killed just after). Reported: the median ms per step of each run
and the slowdown, shared over alone, per framework. Runs alternate between the frameworks and the conditions,
and the medians of --rounds runs are shown. A thread team that spin-waits between kernels, or a barrier whose
thread lost its core, shows here as a slowdown well past what the lost cores explain.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _bench import table

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--busy", type=int, nargs="+", default=[1, 3], help="how many spinning processes beside")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
