"""The IR's interpreter: what each printed line of a loop nest means, run one instruction at a time on numpy
scalars. Slow by design; the tests diff it against the numpy device (tests/compiler/ir_interpreter.py), so a
renderer that disagrees with it disagrees with the printout.
Pipeline: tensor -> graph -> schedule -> **IR (executed as printed)** -> numpy scalars.
"""

from __future__ import annotations

import numpy as np

from limn.compiler.ir import (
    Acc,
    Accum,
    Arith,
    ConstI,
    EndLoop,
    Fixed,
    Index,
    KernelIR,
    LoadI,
    Loop,
    Range,
    Store,
    Term,
    Value,
    loop_ends,
)
from limn.dtypes import DType
from limn.graph.ops import Op

# one row per elementwise op: how a value is computed from its (compute-dtype) sources
ARITH = {
    Op.NEG: lambda a: -a,
    Op.EXP: np.exp,
    Op.LOG: np.log,
    Op.SQRT: np.sqrt,
    Op.RECIP: lambda a: np.reciprocal(a),
    Op.ADD: lambda a, b: a + b,
    Op.MUL: lambda a, b: a * b,
    Op.CMPLT: lambda a, b: a < b,
    Op.WHERE: lambda c, a, b: a if c else b,
    Op.MAX: lambda a, b: a if a > b or np.isnan(a) else b,
}


def execute(kernel: KernelIR, handles: list[np.ndarray]) -> None:
    """Runs one kernel's instructions, one at a time on numpy scalars, over flat views of its buffers
    (handles: one array per param, inputs then outputs). Half widths compute in float32 and round once
    per value, as every device must. Slow, and the reference for what the printout means."""
    args = kernel.inputs + kernel.outputs
    bufs = {b.name: h.reshape(-1) for b, h in zip(args, handles)}
    dtypes_of = {b.name: b.dtype for b in args}
    body = kernel.body
    ends = loop_ends(body)
    env: dict[Term, object] = {}
    types: dict[Value, DType] = {}
    loops: list[int] = []  # pcs of the open LOOPs
    pc = 0
    while pc < len(body):
        ins = body[pc]
        if isinstance(ins, Loop):
            if ins.extent == 0:
                pc = ends[pc] + 1
                continue
            env[ins.var] = 0
            loops.append(pc)
        elif isinstance(ins, EndLoop):
            start = loops[-1]
            env[ins.var] = int(env[ins.var]) + 1
            if env[ins.var] < body[start].extent:
                pc = start + 1
                continue
            loops.pop()
        elif isinstance(ins, ConstI):
            value = ins.value if _valid(ins.valid, env) else 0
            env[ins.dst], types[ins.dst] = _cast(value, ins.dtype), ins.dtype
        elif isinstance(ins, LoadI):
            if _valid(ins.valid, env):
                value = bufs[ins.buf][_index(ins.index, env)]
            else:
                value = ins.dtype.np.type(0)
            env[ins.dst], types[ins.dst] = value, ins.dtype
        elif isinstance(ins, Arith):
            srcs = [_wide(env[s], types[s]) for s in ins.srcs]
            value = srcs[0] if ins.op is Op.CAST else ARITH[ins.op](*srcs)
            env[ins.dst], types[ins.dst] = _cast(value, ins.dtype), ins.dtype
        elif isinstance(ins, Acc):
            env[ins.dst], types[ins.dst] = _cast(ins.identity, ins.dtype), ins.dtype
        elif isinstance(ins, Accum):
            src = _wide(env[ins.src], types[ins.src])
            if ins.index is None:
                env[ins.target] = _cast(ARITH[ins.op](env[ins.target], src), types[ins.target])
            else:
                flat, i = bufs[ins.target], _index(ins.index, env)
                dtype = dtypes_of[ins.target]
                flat[i] = _cast(ARITH[ins.op](_wide(flat[i], dtype), src), dtype)
        elif isinstance(ins, Store):
            dtype = dtypes_of[ins.buf]
            bufs[ins.buf][_index(ins.index, env)] = _cast(_wide(env[ins.src], types[ins.src]), dtype)
        else:
            raise AssertionError(f"unknown instruction {ins!r}")
        pc += 1


def _wide(x, dtype: DType):
    return np.float32(x) if dtype.is_half else x


def _cast(value, dtype: DType):
    """value as a numpy scalar of dtype: to bool is != 0, a float to an int truncates and then wraps."""
    if dtype.kind == "b":
        return np.bool_(value)
    if dtype.is_int and isinstance(value, (float, np.floating)):
        return np.int64(np.trunc(np.float64(value))).astype(dtype.np)  # truncate, then wrap
    return np.array(value).astype(dtype.np)[()]


def _index(index: Index, env: dict) -> int:
    return index.const + sum(int(env[term]) * coef for term, coef in index.terms)


def _valid(valid: tuple[Range, ...], env: dict) -> bool:
    return all(r.lo <= (0 if isinstance(r.var, Fixed) else int(env[r.var])) < r.hi for r in valid)
