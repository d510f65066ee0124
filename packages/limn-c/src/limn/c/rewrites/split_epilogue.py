"""Split epilogues: a register fold's loop over output cells, then its epilogue's loop over the same cells.

The fold keeps its total in a register and stores it; the epilogue (limn.compiler.epilogue) then reads the
stored totals. In two loops the fold stays a tight row fold (which rewrites/jam may take) and the epilogue a
plain elementwise loop the compiler vectorizes. Held to the one loop, bit for bit, by
tests/c/test_c_corpus.py::test_split_epilogues_equal_unsplit_bit_for_bit.
Pipeline: IR -> C source (c/source.py offers each loop block to the rewrites table) -> cc.
"""

from __future__ import annotations

from limn.compiler.ir import Acc, Accum, EndLoop, Instr, LoadI, Loop, Store, loop_ends


def fold_then_epilogue(loop: Loop, inner: list[Instr]) -> tuple[list[Instr], list[Instr]] | None:
    """A loop over output cells whose body folds a register total, stores it, then computes an epilogue from
    it (limn.compiler.epilogue), as two bodies for two loops over the same cells: the fold and its STORE, then the
    epilogue. The same instructions for each cell, so the same bits: the epilogue reads the totals from
    memory, at its own cell, and the fold reads nothing the epilogue writes. None for any other loop. Held
    to the one loop by tests/c/test_c_corpus.py::test_split_epilogues_equal_unsplit_bit_for_bit."""
    if loop.reduce or len(inner) < 4 or not isinstance(inner[0], Acc) or not isinstance(inner[1], Loop):
        return None
    end = loop_ends(inner)[1]
    fold, rest = inner[: end + 2], inner[end + 2 :]
    store = fold[-1]
    if not rest or not isinstance(store, Store) or store.src != inner[0].dst:
        return None
    if any(isinstance(i, (Loop, EndLoop, Acc, Accum)) for i in rest):
        return None
    written = {store.buf} | {i.buf for i in rest if isinstance(i, Store)}
    if any(isinstance(i, LoadI) and i.buf in written for i in fold):
        return None
    if any(isinstance(i, (LoadI, Store)) and i.buf in written and i.index != store.index for i in rest):
        return None
    return fold, rest
