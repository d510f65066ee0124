"""Jammed folds: several cells of a register fold computed side by side, as independent chains of adds.

Takes a LOOP over cells whose body opens a register total, folds into it over one reduce loop and stores it, and
the renderer; emits renamed copies of that body in one loop, as many as the ISA table's `jam` (limn.c.isa), each
spelled from the one copy it renders. Each cell still folds its own values in its own order from its own
identity: the same bits. Pipeline: IR -> C source (c/source.py) -> cc.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from limn.c.rewrites.threads import Pragma
from limn.compiler.cstyle import Decided
from limn.compiler.ir import Acc, Accum, Arith, ConstI, EndLoop, Index, Instr, LoadI, Loop, LoopVar, Range, Store, Value

if TYPE_CHECKING:
    from limn.c.source import CRenderer

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
    get = names.get
    if isinstance(ins, LoadI):
        return LoadI(get(ins.dst, ins.dst), ins.buf, _index(ins.index, names), ins.dtype, _ranges(ins.valid, names))
    if isinstance(ins, Arith):
        return Arith(get(ins.dst, ins.dst), ins.op, tuple([get(x, x) for x in ins.srcs]), ins.dtype)
    if isinstance(ins, ConstI):
        return ConstI(get(ins.dst, ins.dst), ins.value, ins.dtype, _ranges(ins.valid, names))
    if isinstance(ins, Acc):
        return Acc(get(ins.dst, ins.dst), ins.identity, ins.dtype)
    if isinstance(ins, Accum):
        index = None if ins.index is None else _index(ins.index, names)
        return Accum(get(ins.target, ins.target), index, ins.op, get(ins.src, ins.src))
    if isinstance(ins, Store):
        return Store(ins.buf, _index(ins.index, names), get(ins.src, ins.src))
    raise AssertionError(f"no renaming for {ins!r}")


def _index(ix: Index, names: Names) -> Index:
    return Index(tuple([(names.get(v, v), c) for v, c in ix.terms]), ix.const)


def _ranges(valid: tuple[Range, ...], names: Names) -> tuple[Range, ...]:
    if not valid:  # most loads and constants have no mask
        return valid
    return tuple([Range(names.get(r.var, r.var), r.lo, r.hi) for r in valid])


# Stands for the copy number in the names of the one copy of the body that is rendered (v3_\0, acc0_\0):
# each copy's lines are that copy's lines with it replaced by the number. No C source holds a NUL.
MARK = "\0"


def render_jammed(
    r: CRenderer, loop: Loop, inner: list[Instr], depth: int, decided: Decided, pragma: Pragma | None
) -> None:
    """Emits the row fold `loop` (see is_row_fold) `jam` cells at a time, then the cells left over one by one.
    Copy u of the body counts cell `var + u` and names its values v3_u, acc0_u.

    The copies differ only in those names, so one copy is rendered, its names marked with MARK, and every
    copy's lines are made from its lines: rendering each copy through the statements cost `jam` times as
    much. The cells left over are that copy again under the original names."""
    var = loop.var
    jam = r.options.isa.jam
    n_full = loop.extent // jam * jam
    if pragma is not None:
        r.emit(pragma.line(), depth, raw=True)
    r.emit(f"for (int64_t {var} = 0; {var} < {n_full}; {var} += {jam}) {{", depth)
    for u in range(jam):
        r.emit(f"const int64_t {var}_{u} = {var} + {u};", depth + 1)
    acc, reduce_block, store = _one_copy(r, loop, inner)
    # rewrites/chunk chunks a loop whose body is one fold: the copies side by side are `jam` folds
    chunk = jam == 1
    one_copy = [
        _rendered(r, lambda: r.straight(acc, depth + 1, decided)),
        _rendered(r, lambda: r.loop_block(reduce_block, depth + 1, decided, None, 0, chunk=chunk)),
        _rendered(r, lambda: r.straight(store, depth + 1, decided)),
    ]
    for lines in one_copy:
        _copies(r.lines, lines, jam)
    r.emit("}", depth)
    if n_full < loop.extent:  # the cells left over: one at a time, their fold chunked where rewrites/chunk says
        r.emit(r.loop_head(var, n_full, loop.extent), depth)
        # the one copy under the original names: its statements are spelled already (CStyle.statement)
        lines = _rendered(r, lambda: r.emit_seq([acc, *reduce_block, store], depth + 1, decided, 0))
        r.lines.append("\n".join(lines).replace(f"_{MARK}", ""))
        r.emit("}", depth)


def _one_copy(r: CRenderer, loop: Loop, inner: list[Instr]) -> tuple[Acc, list[Instr], Store]:
    """The row fold's body with the cell's variable and every value it defines named with MARK: its ACC, its
    reduce loop block (the loop itself is every copy's) and its STORE. Its fma pairs are the original's."""
    names: Names = {loop.var: LoopVar(f"{loop.var}_{MARK}")}
    for ins in inner:
        dst = getattr(ins, "dst", None)
        if dst is not None:
            names[dst] = Value(f"{dst}_{MARK}")
    copy = [ins if isinstance(ins, (Loop, EndLoop)) else renamed(ins, names) for ins in inner]
    copy_of = {id(old): new for old, new in zip(inner, copy)}
    for old, new in zip(inner, copy):
        mul = r.fma_of.get(old) if isinstance(old, Accum) else None
        if mul is not None:
            r.fma_of.pair(new, copy_of[id(mul)])
    return copy[0], copy[1:-1], copy[-1]


def _rendered(r: CRenderer, render: Callable[[], None]) -> list[str]:
    """The lines `render` emits, taken back out of the renderer's."""
    start = len(r.lines)
    render()
    lines = r.lines[start:]
    del r.lines[start:]
    return lines


def _copies(out: list[str], lines: list[str], jam: int) -> None:
    """Appends the lines of `jam` copies, given the one copy's: each run of lines that names the copy's values
    (a MARK in them) stands for copy 0's run, copy 1's, ...; the lines between runs (a loop's head and brace,
    LIMN_IVDEP) are the loop's, not a copy's, and appear once, as they do when the copies are rendered side by
    side. A copy's run is appended as one string of lines (the body joins them all with newlines anyway)."""
    run: list[str] = []
    for line in [*lines, None]:  # None ends the last run
        if line is not None and MARK in line:
            run.append(line)
            continue
        if run:
            block = "\n".join(run)
            out.extend(block.replace(MARK, str(u)) for u in range(jam))
            run = []
        if line is not None:
            out.append(line)
