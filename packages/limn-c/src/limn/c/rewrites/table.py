"""Which rewrites a loop takes: a row per rewrite, with when it applies and the test holding it bit-identical.

limn.c.source offers each top-level nest to `tiles` and `threads`, then each LOOP ... ENDLOOP to the rest, in
the table's order: `split_epilogue` and `jam` replace the block; `pad_split`, `hoist` and `chunk` shape the
plain loop it otherwise becomes. A row's condition gives the rewrite's plan (the Matmul, the team, the
pieces, ...) or None/False; its Options switch turns it off; each rewrite's module says what it keeps.
Pipeline: IR -> **C source** (these choices) -> cc.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limn.c.rewrites.chunk import costly, worth_chunking
from limn.c.rewrites.hoist import hoist
from limn.c.rewrites.jam import is_row_fold
from limn.c.rewrites.matmul import match_matmul
from limn.c.rewrites.pad_split import split_at_mask_edges
from limn.c.rewrites.split_epilogue import fold_then_epilogue
from limn.c.rewrites.threads import Pragma, team_pragma
from limn.compiler.ir import Instr, Loop

if TYPE_CHECKING:
    from limn.c.source import CRenderer


@dataclass
class Block:
    """A LOOP ... ENDLOOP about to be rendered, and where it sits: what the conditions read."""

    nest: list[Instr]  # LOOP, its body, ENDLOOP
    pragma: Pragma | None = None  # the team a top-level nest opens here
    collapsing: int = 0  # loops below an enclosing collapse clause that this block still owes it
    chunk: bool = True  # False keeps plain a fold `chunk` would take (jam renders one copy of a body)
    top: bool = False  # a nest of the kernel's body, not a loop inside one

    def __post_init__(self) -> None:
        self.loop: Loop = self.nest[0]
        self.inner = self.nest[1:-1]
        self.innermost = not any(isinstance(i, Loop) for i in self.inner)
        self.whole = self.collapsing == 0 and (self.pragma is None or self.pragma.collapse == 1)  # no collapse inside
        self.collapse_here = self.pragma.collapse if self.pragma is not None else self.collapsing


def _jams(r: CRenderer, b: Block) -> bool:
    # a vectorized exp beats eight scalar ones: a fold costly enough to chunk is not jammed
    costly_to_jam = r.options.chunk_folds and costly(b.inner)
    return (
        b.collapsing == 0 and b.loop.extent >= r.options.isa.jam and is_row_fold(b.loop, b.inner) and not costly_to_jam
    )


def _splits_pads(r: CRenderer, b: Block) -> Any:
    # inside a collapse a loop keeps plain bounds, and an innermost one split under a collapse would leave the
    # collapse nothing to fuse: those keep their range checks
    may = b.collapsing == 0 and (b.collapse_here <= 1 or not b.innermost)
    return split_at_mask_edges(b.loop, b.inner) if may else None


def _chunks(r: CRenderer, b: Block) -> bool:
    serial = b.pragma is None and b.collapsing == 0
    return b.chunk and b.innermost and b.loop.reduce and serial and worth_chunking(b.inner)


# name: (the Options switch that turns it off, when it applies -> its plan, the test holding it to the plain nest)
REWRITES: dict[str, tuple[str, Callable[[CRenderer, Block], Any], str]] = {
    "tiles": (
        "tile_matmuls",
        lambda r, b: match_matmul(b.nest, r.kernel) if b.top else None,
        "test_tiled_matmul_equals_plain_nest_bit_for_bit",
    ),
    "threads": (
        "threads",  # a team of 1 is none
        lambda r, b: team_pragma(b.nest, r.options) if b.top else None,
        "test_threaded_nests_equal_serial_bit_for_bit",
    ),
    "split_epilogue": (
        "split_epilogues",
        lambda r, b: fold_then_epilogue(b.loop, b.inner) if b.whole else None,
        "test_split_epilogues_equal_unsplit_bit_for_bit",
    ),
    "jam": ("jam_folds", _jams, "test_chunked_and_jammed_folds_equal_plain_folds_bit_for_bit"),
    "pad_split": ("split_pads", _splits_pads, "test_split_pads_equal_unsplit_bit_for_bit"),
    "hoist": (
        "hoist_invariants",
        lambda r, b: hoist(b.loop, b.inner) if b.innermost and b.whole else None,
        "test_hoisted_invariants_equal_unhoisted_bit_for_bit",
    ),
    "chunk": ("chunk_folds", _chunks, "test_chunked_and_jammed_folds_equal_plain_folds_bit_for_bit"),
}


def plan(renderer: CRenderer, name: str, block: Block) -> Any:
    """The plan of rewrite `name` for `block`, or None where its switch is off or it does not apply."""
    switch, applies, _ = REWRITES[name]
    return applies(renderer, block) if getattr(renderer.options, switch) else None
