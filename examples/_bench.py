"""Shared helpers for the benchmark scripts: timing as medians, and the table they print.

Timings on shared machines are noisy, so every figure is the median of several runs, limn, numpy and
torch are measured side by side in one process, and results are compared as ratios.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

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
