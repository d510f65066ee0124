"""Threads: a nest's leading non-reduce loops become one OpenMP `parallel for collapse(k)`.

Takes a top-level nest and the renderer's Options, gives the Pragma for it, or None where it stays serial.
Each output cell is still computed start to finish by one thread in the serial fold order, so a threaded
nest equals the serial one bit for bit. Pipeline: IR -> C source (c/source.py asks this for each nest) -> cc -fopenmp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from limn.compiler.ir import Instr, Loop, is_scatter, leading_loops

if TYPE_CHECKING:
    from limn.c.source import Options


@dataclass(frozen=True)
class Pragma:
    """An OpenMP team over the first `collapse` loops of a nest, as many as the c device sets (c/team.py)."""

    collapse: int

    def line(self, simd: bool = False) -> str:
        """The pragma; `simd` when the team's loop is also the innermost one, so OpenMP vectorizes it too."""
        clause = f" collapse({self.collapse})" if self.collapse > 1 else ""
        kind = "parallel for simd" if simd else "parallel for"
        return f"#pragma omp {kind}{clause} schedule(static)"


def team_pragma(nest: list[Instr], options: Options) -> Pragma | None:
    """The team for a nest's leading non-reduce loops, or None (serial): one thread, a scatter, a nest
    whose outermost loop is a reduce (splitting it would regroup the sum), or too little work."""
    if options.threads <= 1 or any(is_scatter(ins) for ins in nest):
        return None
    leading = leading_loops(nest)
    if not leading:
        return None
    if math.prod(ins.extent for ins in nest if isinstance(ins, Loop)) < options.parallel_work:
        return None
    collapse, cells = 0, 1
    for loop in leading:  # fuse leading loops until every thread has several cells of work
        collapse += 1
        cells *= loop.extent
        if cells >= 4 * options.threads:
            break
    return Pragma(collapse)
