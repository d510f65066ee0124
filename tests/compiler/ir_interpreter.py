"""An interpreter for the loop-nest IR, instruction by instruction, as a device.

It is the test oracle's other half: graphs run through the real scheduler, lowering and plan
executor, and then this interpreter walks each printed instruction with numpy scalars. Diffing it
against the numpy device checks that the printed nest means what it says (strides, masks, reduce
identities, loop order). Half widths compute in float32 and round once per value, as every device must.
"""

from __future__ import annotations

import numpy as np

from limn.codegen import Acc, Accum, Arith, ConstI, EndLoop, Index, KernelIR, LoadI, Loop, Range, Store
from limn.dtypes import DType
from limn.jit import CompiledDevice
from limn.ops import Op, Shape

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


def _wide(x, dtype: DType):
    return np.float32(x) if dtype.is_half else x


def _cast(value, src: DType | None, dtype: DType):
    if dtype.kind == "b":
        return np.bool_(value)
    if dtype.is_int and isinstance(value, (float, np.floating)):
        return np.int64(np.trunc(np.float64(value))).astype(dtype.np)  # truncate, then wrap
    return np.array(value).astype(dtype.np)[()]


class IRInterpreter(CompiledDevice):
    """A host device whose 'compiled program' is the KernelIR itself, run by `execute`."""

    name = "ir"
    host = True

    def render(self, kernel: KernelIR) -> str:
        return str(kernel)

    def compile(self, kernel: KernelIR, source: str) -> KernelIR:
        return kernel

    def launch(self, program: KernelIR, kernel: KernelIR, handles: list[np.ndarray]) -> None:
        with np.errstate(all="ignore"):
            execute(program, handles)

    def alloc(self, dtype: DType, shape: Shape) -> np.ndarray:
        # garbage, not zeros: a kernel that reads a cell before writing it must fail the diff
        return np.full(shape, 123, dtype.np) if dtype.kind != "b" else np.ones(shape, bool)

    def free(self, handle: np.ndarray) -> None:
        pass

    def copyin(self, handle: np.ndarray, array: np.ndarray) -> None:
        handle[...] = array

    def copyout(self, handle: np.ndarray, dtype: DType, shape: Shape) -> np.ndarray:
        return np.array(handle, copy=True).reshape(shape)

    def synchronize(self) -> None:
        pass


def execute(kernel: KernelIR, handles: list[np.ndarray]) -> None:
    """Runs one kernel's instructions over flat views of its buffers."""
    args = kernel.inputs + kernel.outputs
    bufs = {b.name: h.reshape(-1) for b, h in zip(args, handles)}
    dtypes_of = {b.name: b.dtype for b in args}
    body = kernel.body
    ends = _matching_ends(body)
    env: dict[str, object] = {}
    types: dict[str, DType] = {}
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
            env[ins.dst], types[ins.dst] = _cast(value, None, ins.dtype), ins.dtype
        elif isinstance(ins, LoadI):
            if _valid(ins.valid, env):
                value = bufs[ins.buf][_index(ins.index, env)]
            else:
                value = ins.dtype.np.type(0)
            env[ins.dst], types[ins.dst] = value, ins.dtype
        elif isinstance(ins, Arith):
            srcs = [_wide(env[s], types[s]) for s in ins.srcs]
            if ins.op is Op.CAST:
                value = _cast(srcs[0], types[ins.srcs[0]], ins.dtype)
            else:
                value = _cast(ARITH[ins.op](*srcs), None, ins.dtype)
            env[ins.dst], types[ins.dst] = value, ins.dtype
        elif isinstance(ins, Acc):
            env[ins.dst], types[ins.dst] = _cast(ins.identity, None, ins.dtype), ins.dtype
        elif isinstance(ins, Accum):
            src = _wide(env[ins.src], types[ins.src])
            if ins.index is None:
                acc_type = types[ins.target]
                env[ins.target] = _cast(ARITH[ins.op](env[ins.target], src), None, acc_type)
            else:
                flat, i = bufs[ins.target], _index(ins.index, env)
                dtype = dtypes_of[ins.target]
                flat[i] = _cast(ARITH[ins.op](_wide(flat[i], dtype), src), None, dtype)
        elif isinstance(ins, Store):
            dtype = dtypes_of[ins.buf]
            bufs[ins.buf][_index(ins.index, env)] = _cast(_wide(env[ins.src], types[ins.src]), None, dtype)
        else:
            raise AssertionError(f"unknown instruction {ins!r}")
        pc += 1


def _matching_ends(body) -> dict[int, int]:
    ends, stack = {}, []
    for pc, ins in enumerate(body):
        if isinstance(ins, Loop):
            stack.append(pc)
        elif isinstance(ins, EndLoop):
            ends[stack.pop()] = pc
    return ends


def _index(index: Index, env: dict) -> int:
    return index.const + sum(int(env[var]) * coef for var, coef in index.terms)


def _valid(valid: tuple[Range, ...], env: dict) -> bool:
    return all(r.lo <= (0 if r.var == "0" else int(env[r.var])) < r.hi for r in valid)
