"""Chunked folds: a register fold whose values are costly makes them a chunk at a time, then folds them.

Takes an innermost reduce LOOP ending in an ACCUM into a register, and the renderer; emits the values of a chunk
of iterations (its size from the ISA table, limn.c.isa) in a loop with no dependence (it vectorizes), then folds
them one by one in the same order: same bits, held to the plain fold by
tests/c/test_c_corpus.py::test_chunked_and_jammed_folds_equal_plain_folds_bit_for_bit.
Pipeline: IR -> C source (c/source.py chunks the folds worth it) -> cc.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from limn import dtypes
from limn.compiler.cstyle import Decided
from limn.compiler.ir import Acc, Accum, Arith, ConstI, EndLoop, Instr, LoadI, Loop, Store
from limn.graph.ops import TRANSCENDENTAL

if TYPE_CHECKING:
    from limn.c.source import CRenderer


def costly(instrs: list[Instr]) -> bool:
    """Whether any value costs an exp, log, sqrt or recip (a transcendental)."""
    return any(isinstance(i, Arith) and i.op in TRANSCENDENTAL for i in instrs)


def worth_chunking(inner: list[Instr]) -> bool:
    """A float register fold (the body ends in ACCUM into a register and writes nothing else) whose values
    cost a transcendental each, several ops, or a widened mask or float16: making them a chunk at a time
    pays. An integer or bool fold is left plain: its adds, maxes and ors regroup exactly, so gcc vectorizes
    the whole loop, fold and all."""
    if not inner or not isinstance(inner[-1], Accum) or inner[-1].index is not None:
        return False
    if any(isinstance(i, (Accum, Store, Acc, Loop, EndLoop)) for i in inner[:-1]):
        return False
    made = {i.dst: i.dtype for i in inner if isinstance(i, (ConstI, LoadI, Arith))}
    folded = made.get(inner[-1].src)
    if folded is not None and not folded.is_float:
        return False
    ariths = [i for i in inner if isinstance(i, Arith)]
    # a bool mask widened per element, or a float16 (a dozen integer ops each); a bfloat16 (a shift) or a
    # narrow int (a sign extension) alone is no cheaper a chunk at a time
    widened = any(isinstance(i, LoadI) and i.dtype in (dtypes.bool_, dtypes.float16) for i in inner)
    return costly(inner) or len(ariths) >= 3 or widened


def render_chunked(
    r: CRenderer, loop: Loop, inner: list[Instr], lo: int, hi: int, depth: int, decided: Decided
) -> None:
    """Emits iterations [lo, hi) of the fold `loop`: whole chunks, then the tail that does not fill one as
    the plain fold."""
    fold: Accum = inner[-1]
    mul = r.fma_of.get(fold)
    operands = list(dict.fromkeys(mul.srcs if mul is not None else (fold.src,)))  # x * x: one array
    # chunk_bytes of the widest values made (16 float32 for 64 bytes), more if the narrowest load (a bool
    # mask) would not fill a vector
    isa = r.options.isa
    narrowest = min((i.dtype.itemsize for i in inner if isinstance(i, LoadI)), default=4)
    chunk = max(isa.chunk_bytes // 4, isa.vector_bytes // narrowest)
    n_full = (hi - lo) // chunk * chunk
    var, base = loop.var, f"{loop.var}_chunk"
    if n_full > 0:
        r.emit(f"for (int64_t {base} = {lo}; {base} < {lo + n_full}; {base} += {chunk}) {{", depth)
        arrays = [f"{name}_of" for name in operands]
        for name, array in zip(operands, arrays):
            # the values are declared below, in the chunk loop; they share the total's C type
            ctype = r.value_type(r.dtype_of.get(name, r.dtype_of[fold.target]))
            r.emit(f"{ctype} {array}[{chunk}];", depth + 1)
        r.emit("LIMN_IVDEP", depth + 1)
        r.emit(f"for (int64_t k = 0; k < {chunk}; k++) {{", depth + 1)
        r.emit(f"const int64_t {var} = {base} + k;", depth + 2)
        r.emit_seq(inner[:-1], depth + 2, decided, 0)
        for name, array in zip(operands, arrays):
            r.emit(f"{array}[k] = {name};", depth + 2)
        r.emit("}", depth + 1)
        r.emit(f"for (int64_t k = 0; k < {chunk}; k++) {{", depth + 1)
        r.emit(r.accum(fold, {name: f"{array}[k]" for name, array in zip(operands, arrays)}) + ";", depth + 2)
        r.emit("}", depth + 1)
        r.emit("}", depth)
    if lo + n_full < hi:
        r.emit(r.loop_head(var, lo + n_full, hi), depth)
        r.emit_seq(inner, depth + 1, decided, 0)
        r.emit("}", depth)
