"""The matmul form: the rule that says a loop nest reads as a matmul, and the pieces it is made of.

A nest folds out[batch, i, j] = sum over r of a[batch, i, r] * b[batch, r, j], r in order from 0, in one of two
forms the scheduler writes: the memory form (an identity fill nest, then all loops opened at once and an ACCUM into
out) and the register form (the output loops, an ACC, the r loop, an ACCUM into the register, a STORE and perhaps
an epilogue). Which kernels are matmuls the schedule decides from the graph (limn.compiler.kernel.Contraction,
carried here as KernelIR.matmul); in such a kernel's nest `match_matmul` finds which load is a, which is b, which
loop is i, r and j, and whether the layout and dtypes let a device tile it. Every compiled device that tiles
matmuls (limn.c.rewrites.matmul's register tiles, limn.cuda.matmul's shared-memory tiles) starts from this
Matmul, so what a matmul is is decided in the compiler, once.
Pipeline: IR -> **matmul form** -> a device's tiled rendering of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from limn import dtypes
from limn.compiler.ir import (
    Acc,
    Accum,
    Arith,
    ConstI,
    EndLoop,
    Index,
    Instr,
    KernelIR,
    LoadI,
    Loop,
    LoopVar,
    Store,
    Term,
)
from limn.dtypes import DType
from limn.graph.ops import Op


@dataclass(frozen=True)
class Matmul:
    """The pieces of a matched nest: batch loops, the i / r / j extents, and each buffer's strides."""

    batch: tuple[Loop, ...]
    i: Loop
    r: Loop
    j: Loop
    a: LoadI  # indexed by batch, i, r
    b: LoadI  # indexed by batch, r, j (any strides: the panel copy makes its columns contiguous)
    out: str  # the output buffer's name
    out_index: Index  # indexed by batch, i, and j with stride 1
    dtype: DType  # float32 or float64: the operands', the total's and the output's
    registers: bool  # the register form (no fill in front of it)
    epilogue: tuple[Instr, ...] = ()  # straight-line, at one output cell once its total is final
    cells: tuple[Loop, ...] = ()  # the output loops (batch, i, j) in the nest's order


def coef(index: Index, var: LoopVar) -> int:
    """The stride an index takes over one loop counter (0 when it does not name it)."""
    return sum(c for v, c in index.terms if v == var)


def index_vars(index: Index) -> set[Term]:
    """The counters and loaded values an index names."""
    return {v for v, _ in index.terms}


def match_matmul(nest: list[Instr], kernel: KernelIR) -> Matmul | None:
    """The Matmul a nest is (in either form, the module docstring's), or None. In the register form its
    epilogue comes along: the instructions after the STORE."""
    loops = [ins for ins in nest if isinstance(ins, Loop)]
    if not kernel.matmul or len(loops) < 3 or len(nest) < 2 * len(loops) + 4 or min(x.extent for x in loops) == 0:
        return None  # (an empty sum or an empty output is no product to tile: the plain nest writes what there is)
    registers = isinstance(nest[len(loops) - 1], Acc)
    fold = register_form(nest, loops) if registers else memory_form(nest, loops)
    reduces = [x for x in loops if x.reduce]
    if fold is None or len(reduces) != 1 or (registers and reduces[0] is not loops[-1]):
        return None
    la, lb, dtype, out, out_index, epilogue = fold
    out_dtype = {b.name: b.dtype for b in kernel.outputs}.get(out)
    if dtype not in (dtypes.float32, dtypes.float64) or la.dtype != dtype or lb.dtype != dtype or out_dtype != dtype:
        return None
    if la.buf == out or lb.buf == out:
        return None  # an in-place write would let a tile read cells it already wrote
    outer = [x for x in loops if not x.reduce]
    roles = _roles(la, lb, outer, reduces[0], out_index)
    if roles is None:
        return None
    a, b, i, j, batch = roles
    m = Matmul(batch, i, reduces[0], j, a, b, out, out_index, dtype, registers, cells=tuple(outer))
    if registers:
        return replace(m, epilogue=epilogue) if epilogue_fits(m, epilogue) else None
    return m


Folded = tuple[LoadI, LoadI, DType, str, Index, tuple[Instr, ...]]  # a, b, the MUL's dtype, out, its index, epilogue


def _body(body: list[Instr]) -> tuple[LoadI, LoadI, Arith, Accum] | None:
    """The fold's four instructions when they are two unmasked loads, their MUL and its ADD into a total."""
    la, lb, mul, acc = body
    if not (isinstance(la, LoadI) and isinstance(lb, LoadI) and isinstance(mul, Arith) and isinstance(acc, Accum)):
        return None
    if mul.op is not Op.MUL or acc.op is not Op.ADD or acc.src != mul.dst:
        return None
    return (la, lb, mul, acc) if set(mul.srcs) == {la.dst, lb.dst} and not la.valid and not lb.valid else None


def memory_form(nest: list[Instr], loops: list[Loop]) -> Folded | None:
    """The fold of a nest LOOP.. body ENDLOOP.. adding into out in memory, or None."""
    n = len(loops)
    if nest[:n] != loops or len(nest) != 2 * n + 4 or not all(isinstance(e, EndLoop) for e in nest[n + 4 :]):
        return None
    parts = _body(nest[n : n + 4])
    if parts is None or parts[3].index is None:  # the total is added into out in memory
        return None
    return parts[0], parts[1], parts[2].dtype, parts[3].target, parts[3].index, ()


def register_form(nest: list[Instr], loops: list[Loop]) -> Folded | None:
    """The fold of a nest LOOP.. ACC LOOP r body ENDLOOP r STORE [epilogue] ENDLOOP.. (a register total), or None."""
    head = len(loops) - 1
    if nest[:head] != loops[:-1] or nest[head + 1] is not loops[-1]:
        return None
    acc: Acc = nest[head]
    after = nest[head + 6 :]
    if len(after) < head + 2 or not isinstance(after[1], Store) or acc.identity != 0:
        return None
    if not isinstance(after[0], EndLoop) or not all(isinstance(e, EndLoop) for e in after[len(after) - head :]):
        return None
    parts = _body(nest[head + 2 : head + 6])
    if after[1].src != acc.dst or parts is None or parts[3].index is not None or parts[3].target != acc.dst:
        return None
    return parts[0], parts[1], parts[2].dtype, after[1].buf, after[1].index, tuple(after[2 : len(after) - head])


def _roles(la: LoadI, lb: LoadI, outer: list[Loop], r: Loop, out_index: Index) -> tuple | None:
    """(a, b, i, j, batch): j read by b and stride-1 in out, i read by a, the rest batch; None if none fits."""
    for first, second in ((la, lb), (lb, la)):
        a_vars, b_vars = index_vars(first.index), index_vars(second.index)
        js = [x for x in outer if x.var in b_vars and x.var not in a_vars and coef(out_index, x.var) == 1]
        is_ = [x for x in outer if x.var in a_vars and x.var not in b_vars]
        if js and is_:
            a, b = first, second
            break
    else:
        return None
    j, i = js[-1], is_[-1]
    batch = tuple(x for x in outer if x is not i and x is not j)
    names = {x.var for x in batch}
    if index_vars(a.index) - names - {i.var, r.var} or index_vars(b.index) - names - {r.var, j.var}:
        return None
    return None if index_vars(out_index) - names - {i.var, j.var} else (a, b, i, j, batch)


def epilogue_fits(m: Matmul, epilogue: tuple[Instr, ...]) -> bool:
    """Whether instructions may run on a tile's cells as soon as the tile is done: straight-line, naming only
    the output loops, storing only other outputs than the total, at the total's cell, and reading any output
    only there (a cell another tile has not finished is never read)."""
    if not epilogue:
        return True
    cell_vars = {x.var for x in (*m.batch, m.i, m.j)}
    stored = {ins.buf for ins in epilogue if isinstance(ins, Store)} | {m.out}
    for ins in epilogue:
        if not isinstance(ins, (ConstI, LoadI, Arith, Store)):
            return False
        index = getattr(ins, "index", None)
        terms = [t for t, _ in index.terms] if index is not None else []
        terms += [r.var for r in getattr(ins, "valid", ())]
        if any(isinstance(t, LoopVar) and t not in cell_vars for t in terms):
            return False
        if isinstance(ins, Store) and (ins.buf == m.out or ins.index != m.out_index):
            return False
        if isinstance(ins, LoadI) and ins.buf in stored and ins.index != m.out_index:
            return False
    return True


def fill_overwritten_by_tile(nest: list[Instr], following: list[Instr], kernel: KernelIR) -> bool:
    """True for the identity fill in front of a nest that renders as a tiled matmul in the memory form, which
    stores every output cell itself (full tiles and edges alike) rather than adding to it."""
    if not isinstance(following[0], Loop):
        return False
    m = match_matmul(following, kernel)
    if m is None or m.registers:
        return False
    fills = [i for i in nest if not isinstance(i, (Loop, EndLoop))]
    return (
        len(fills) == 2
        and isinstance(fills[0], ConstI)
        and isinstance(fills[1], Store)
        and fills[1].buf == m.out
        and fills[0].value == 0
    )
