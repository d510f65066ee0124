"""Hoisting: what an innermost loop does not change is computed once before it (a row's log-sum, say).

Takes an innermost LOOP and its body, gives the instructions that are the same on every iteration and the
rest, each in its original order: the same values, and a loop body without the branches a compiler makes of
them. Held to the unhoisted nest by tests/c/test_c_corpus.py::test_hoisted_invariants_equal_unhoisted_bit_for_bit.
Pipeline: IR -> C source (c/source.py hoists before each innermost loop it may) -> cc.
"""

from __future__ import annotations

from limn.compiler.ir import Accum, Arith, ConstI, Instr, LoadI, Loop, Store, Term


def hoist(loop: Loop, inner: list[Instr]) -> tuple[list[Instr], list[Instr]]:
    """(hoisted, rest): constants whose mask does not involve the loop variable, loads whose index and mask
    do not, from buffers the loop does not write, and arithmetic on those; everything else stays."""
    written = {i.buf for i in inner if isinstance(i, Store)}
    written |= {i.target for i in inner if isinstance(i, Accum) and i.index is not None}
    varying: set[Term] = {loop.var}
    hoisted, rest = [], []
    for ins in inner:
        if isinstance(ins, ConstI):
            moves = varying.isdisjoint([r.var for r in ins.valid])
        elif isinstance(ins, LoadI):
            moves = (
                ins.buf not in written
                and varying.isdisjoint([v for v, _ in ins.index.terms])
                and varying.isdisjoint([r.var for r in ins.valid])
            )
        elif isinstance(ins, Arith):
            moves = varying.isdisjoint(ins.srcs)
        else:
            moves = False
        if moves:
            hoisted.append(ins)
        else:
            rest.append(ins)
            if isinstance(ins, (ConstI, LoadI, Arith)):
                varying.add(ins.dst)
    return hoisted, rest
