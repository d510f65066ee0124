"""Jammed folds: several cells of a register fold computed side by side, as independent chains of adds.

Takes a LOOP over cells whose body opens a register total, folds into it over one reduce loop and stores it, and
the renderer; emits renamed copies of that body in one loop, as many as the ISA table's `jam` (limn.c_isa). Each
cell still folds its own values in its own order from its own identity: the same bits, held to the plain fold
by tests/c/test_c_corpus.py::test_chunked_and_jammed_folds_equal_plain_folds_bit_for_bit.
Pipeline: IR -> C source (c_source.py) -> cc.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from limn.c_threads import Pragma
from limn.cstyle import Decided
from limn.ir import Acc, Accum, Arith, ConstI, EndLoop, Index, Instr, LoadI, Loop, LoopVar, Range, Store, Value

if TYPE_CHECKING:
    from limn.c_source import CRenderer

Names = dict[LoopVar | Value, LoopVar | Value]


def is_row_fold(loop: Loop, inner: list[Instr]) -> bool:
    """True when `loop` walks output cells and its body is exactly: open a register total, fold into it
    over one innermost reduce loop, store it."""
    if loop.reduce or len(inner) < 4 or not isinstance(inner[0], Acc) or not isinstance(inner[-1], Store):
        return False
    block = inner[1:-1]
    if not isinstance(block[0], Loop) or not block[0].reduce or not isinstance(block[-1], EndLoop):
        return False
    body = block[1:-1]
    if any(isinstance(i, (Loop, EndLoop, Acc, Store)) for i in body):
        return False
    folds = [i for i in body if isinstance(i, Accum)]
    return (
        len(folds) == 1
        and folds[0].index is None
        and folds[0].target == inner[0].dst
        and inner[-1].src == inner[0].dst
        and body[-1] is folds[0]
    )


def renamed(ins: Instr, names: Names) -> Instr:
    """A copy of an instruction with its value and loop-variable names mapped through `names`."""

    def name(x):
        return names.get(x, x)

    def index(ix: Index) -> Index:
        return Index(tuple((name(v), c) for v, c in ix.terms), ix.const)

    def ranges(rs: tuple[Range, ...]) -> tuple[Range, ...]:
        return tuple(Range(name(r.var), r.lo, r.hi) for r in rs)

    if isinstance(ins, ConstI):
        return ConstI(name(ins.dst), ins.value, ins.dtype, ranges(ins.valid))
    if isinstance(ins, LoadI):
        return LoadI(name(ins.dst), ins.buf, index(ins.index), ins.dtype, ranges(ins.valid))
    if isinstance(ins, Arith):
        return Arith(name(ins.dst), ins.op, tuple(name(x) for x in ins.srcs), ins.dtype)
    if isinstance(ins, Acc):
        return Acc(name(ins.dst), ins.identity, ins.dtype)
    if isinstance(ins, Accum):
        return Accum(name(ins.target), None if ins.index is None else index(ins.index), ins.op, name(ins.src))
    if isinstance(ins, Store):
        return Store(ins.buf, index(ins.index), name(ins.src))
    raise AssertionError(f"no renaming for {ins!r}")


def render_jammed(
    r: CRenderer, loop: Loop, inner: list[Instr], depth: int, decided: Decided, pragma: Pragma | None
) -> None:
    """Emits the row fold `loop` (see is_row_fold) `jam` cells at a time, then the cells left over one by one.
    Copy u of the body counts cell `var + u` and names its values v3_u, acc0_u."""
    var = loop.var
    jam = r.options.isa.jam
    n_full = loop.extent // jam * jam
    if pragma is not None:
        r.emit(pragma.line(), depth, raw=True)
    r.emit(f"for (int64_t {var} = 0; {var} < {n_full}; {var} += {jam}) {{", depth)
    acc: Acc = inner[0]
    reduce_block, store = inner[1:-1], inner[-1]
    copies: list[Names] = []
    for u in range(jam):
        names: Names = {var: LoopVar(f"{var}_{u}")}
        for ins in inner:
            dst = getattr(ins, "dst", None)
            if dst is not None:
                names[dst] = Value(f"{dst}_{u}")
        r.emit(f"const int64_t {var}_{u} = {var} + {u};", depth + 1)
        copies.append(names)
    for names in copies:
        r.straight(renamed(acc, names), depth + 1, decided)
    r_loop, body = reduce_block[0], reduce_block[1:-1]
    jammed: list[Instr] = []
    for names in copies:
        copy = [renamed(ins, names) for ins in body]
        for old, new in zip(body, copy):  # keep each copy's fma where the original had one
            mul = r.fma_of.get(old) if isinstance(old, Accum) else None
            if mul is not None:
                r.fma_of.pair(new, next(c for o, c in zip(body, copy) if o is mul))
        jammed += copy
    r.loop_block([r_loop, *jammed, reduce_block[-1]], depth + 1, decided, None, 0)
    for names in copies:
        r.straight(renamed(store, names), depth + 1, decided)
    r.emit("}", depth)
    if n_full < loop.extent:  # the cells left over: one at a time
        r.emit(r.loop_head(var, n_full, loop.extent), depth)
        r.emit_seq(inner, depth + 1, decided, 0)
        r.emit("}", depth)
