"""Pad splitting: a loop whose variable has range checks inside it is cut at the mask's edges.

Takes a LOOP and the instructions inside it, gives the Pieces of its extent, each wholly inside or outside the
pad with those checks decided, so no conditional load is left for a compiler to vectorize with masks (gcc 12
gets that wrong). Held to the unsplit nest by tests/c/test_c_corpus.py::test_split_pads_equal_unsplit_bit_for_bit,
to numpy by tests/c/test_pad_split.py. Pipeline: IR -> C source (c/source.py cuts the loops it may) -> cc.
"""

from __future__ import annotations

from dataclasses import dataclass

from limn.compiler.cstyle import Decided
from limn.compiler.ir import Instr, Loop, Range


@dataclass(frozen=True)
class Piece:
    """Iterations [lo, hi) of a loop, and the range checks on its variable that hold (True) or fail
    (False) for every one of them."""

    lo: int
    hi: int
    decided: Decided


def whole(loop: Loop) -> list[Piece]:
    """The loop uncut: one piece, nothing decided."""
    return [Piece(0, loop.extent, {})]


def split_at_mask_edges(loop: Loop, inner: list[Instr]) -> list[Piece]:
    """The pieces of `loop` cut at every edge of a range check on its variable (anywhere in `inner`)."""
    ranges: dict[Range, None] = {}
    for ins in inner:
        for r in getattr(ins, "valid", ()):
            if r.var == loop.var:
                ranges[r] = None
    if not ranges:
        return whole(loop)
    cuts = {0, loop.extent}
    for r in ranges:
        cuts.update(min(max(edge, 0), loop.extent) for edge in (r.lo, r.hi))
    edges = sorted(cuts)
    return [Piece(lo, hi, {r: r.lo <= lo and hi <= r.hi for r in ranges}) for lo, hi in zip(edges, edges[1:])]
