"""Shared helpers for the benchmark scripts: timing as medians, each library in a process of its own, and
the table they print.

Timings on shared machines are noisy, so every figure is the median of several runs and results are compared
as ratios. Each library is timed in a process of its own (`in_own_process`): numpy's OpenBLAS team, torch's
OpenMP team and limn's spin-wait after their work, and in one process each would be timed while the others'
threads still burn the cores.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

SETTLE_SECONDS = 0.05
"""A pause between the warm-up and the timed runs: the thread pool of the framework measured just before
(torch's OpenMP team, or limn's) spins for a while after its last call, and would hold a core the timed
runs need. Measured without it, one of a pair of equal convs ran at a third of its twin's speed."""


def median_seconds(fn: Callable[[], object], repeats: int = 7, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    time.sleep(SETTLE_SECONDS)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def first_call_seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def in_own_process(script: str, library: str, argv: list[str]) -> dict[str, Any]:
    """Runs `python script --only LIBRARY ARGV...` in a fresh process and returns the JSON object the last line
    of its output holds: that library's figures, with no other library's threads in the process."""
    cmd = [sys.executable, script, "--only", library, *argv]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def only_this(figures: dict[str, Any]) -> None:
    """What a `--only LIBRARY` process prints: its figures, as the last line of its output."""
    print(json.dumps(figures))
