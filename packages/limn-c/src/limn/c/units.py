"""Translation units: a new plan's kernels cut into groups of like size, each its own library, built side by side.

cc works one translation unit on one core, and a whole training step's kernels in one unit (a GPT step's 115
kernels, 554 KB of C) took 5.3 s of a 2-core machine's first step while its other core idled. Cut into as
many units as there are cores (each costing at least UNIT_COST, below which cc's own start and the prelude it
reads again cost more than the split saves), they compile at once. A kernel's cost is its length in bytes,
times TILE_WEIGHT for a register-tiled one (when each carried its own copy of the tiles, the unit that held 23
of that step's 26 took 4.6 s and the other 1.5 s). The cut depends only on the kernels' sources and the count
of cores, so the next process on this machine cuts the same units and finds each in the kernel cache (one
given other cores, by taskset or a cpuset, cuts others and compiles them once).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from limn.c.prelude import PRELUDE
from limn.c.rewrites.matmul import VECTOR_PRELUDE
from limn.compiler.jit import debug_level
from limn.compiler.progress import Progress

UNIT_COST = 16_000
"""The least cost worth a unit of its own, about what a unit's own start costs cc. It was 32,000 while every tiled
kernel carried its own tiles; once they became calls, a new sequence length's six kernels (34 KB of C) made one
unit and bench_plan's cold tokens went from 365 to 448 ms; at 16,000 they make two again (364-385 ms)."""

TILE_WEIGHT = 3
"""cc's seconds per byte of a register-tiled matmul's source over a plain loop's. Such a source carries the packed
matmul and tile folds of kernels/ (which a unit compiles once) and a call: weighed 3 times, that step's two
units took 1.7 and 1.9 s; weighed by bytes alone, 1.65 and 1.9-2.2 s."""

Library = TypeVar("Library")


def cores() -> int:
    """The cores this process may run cc on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cost(source: str) -> int:
    """What cc will spend on a kernel's source, in the bytes of a plain loop."""
    return len(source) * (TILE_WEIGHT if "LIMN_VEC" in source else 1)


def split(costs: list[int], workers: int) -> list[list[int]]:
    """The kernels (by index, each unit in their order) cut into at most `workers` units of like total cost:
    dearest first, each to the unit that costs least so far."""
    count = max(1, min(workers, len(costs), sum(costs) // UNIT_COST))
    units: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        lightest = loads.index(min(loads))
        units[lightest].append(i)
        loads[lightest] += costs[i]
    return [sorted(unit) for unit in units]


def build_all(sources: list[str], build: Callable[[str], Library], line: Progress) -> list[Library]:
    """`build(source)` for each unit's source, at once on as many threads (each waits on its cc), telling
    `line` of each unit's kernels as it is built."""

    def built(source: str) -> Library:
        library = build(source)
        line.advance(len(kernel_names(source)))
        return library

    if len(sources) == 1:
        return [built(sources[0])]
    with ThreadPoolExecutor(len(sources)) as pool:
        return list(pool.map(built, sources))


def source(kernels: list[str]) -> str:
    """One unit's C: the prelude (with the vector helpers where a tile needs them), then the kernels."""
    tiled = any("LIMN_VEC" in kernel for kernel in kernels)
    return PRELUDE + (VECTOR_PRELUDE if tiled else "") + "".join("\n" + kernel for kernel in kernels)


def kernel_names(source: str) -> list[str]:
    """The kernels a unit defines, in order: the functions limn names."""
    return [line[5 : line.index("(")] for line in source.splitlines() if line.startswith("void limn_")]


# the ctypes prototype `void f(void*, ...)` of each arity, shared by every kernel: setting argtypes on each
# function instead built a list and its converters per kernel, for the collector to walk as long as it lives
_PROTOTYPES: dict[int, Any] = {}


def function(lib: ctypes.CDLL, source: str, arity: int) -> Any:
    """The function a kernel's source exports, from the library its unit was built into."""
    (name,) = kernel_names(source)
    prototype = _PROTOTYPES.get(arity)
    if prototype is None:
        prototype = _PROTOTYPES[arity] = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * arity)
    return prototype((name, lib))


def report(source: str, seconds: float) -> None:
    """LIMN_DEBUG=1's line for a unit cc built: which kernels, how much C, how long, and why (a cache miss)."""
    if debug_level() < 1:
        return
    names = kernel_names(source)
    what = f"{len(names)} kernel{'s' if len(names) != 1 else ''}" if names else "a helper library"
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    line = f"[limn c] cc built {what} ({len(source) / 1e3:.0f} KB of C) in {seconds:.2f} s, not in the kernel cache"
    sys.stderr.write(line + (f": {shown}\n" if names else "\n"))  # one write: units report from threads at once
