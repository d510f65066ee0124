"""The loop-nest IR as a language: its grammar, its instructions, and their printout.

Lowering (codegen.py) writes one KernelIR per scheduled kernel; the renderers (limn-c's C, limn-cuda's CUDA C)
read it. Read on in checker.py (`check(kernel)`: whether a nest is well formed) and interpret.py (`execute`:
the executable definition of what each printed line means, the oracle the tests diff against the numpy device).
Pipeline: tensor -> graph -> schedule -> **IR** -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from limn.dtypes import DType
from limn.graph.ops import Op, Shape

if TYPE_CHECKING:
    from limn.compiler.schedule import Schedule

# ---- the grammar ----
#
# A kernel is a header, its buffers, and a flat body of instructions read top to bottom. There are eight
# opcodes; loops nest by LOOP ... ENDLOOP, and every index is explicit arithmetic on loop variables.
#
#   kernel   := name  OP  loop[shape]                 the scheduled kernel's op, and the shape its loops walk
#               param*                                one line per buffer
#               instr*                                none in a CUSTOM kernel: the device supplies it whole
#   param    := name = buf<slot>  dtype[shape]        in0, in1, ... are read; out (out0, out1, ...) written,
#                                                   and read back where a reduce's epilogue loads its totals
#
#   instr    := LOOP    loopvar < extent              loopvar counts 0, 1, ..., extent - 1 over what follows
#             | ENDLOOP loopvar                       closes the innermost open LOOP, which counts loopvar
#             | CONST   value = literal guard : dtype      a number; zero wherever the guard fails
#             | LOAD    value = buf[index] guard : dtype   a read of one element; zero (and no read) where it fails
#             | ARITH   value = OP value, ... : dtype      one elementwise primitive of ops.py (CAST converts)
#             | ACC     value = literal : dtype            opens a register total at the reduce's identity
#             | ACCUM   target = OP target, value          folds one more value in: target = OP(target, value)
#             | STORE   buf[index] = value                 writes a value to a cell of an output
#
#   target   := value                                 a register an ACC opened (ACCUM acc0 = ADD acc0, v3)
#             | buf[index]                            a cell of an output (ACCUM out[i0] = ADD out[i0], v3)
#   guard    := (nothing) | if range, range, ...      every range must hold
#   range    := lo<=var<hi                            one dim of a pad's mask: var is a term, or 0 (Fixed)
#   index    := term*coef + ... + const               a flat element offset (a coef of 1 is not printed)
#   term     := loopvar | value                       a value term is a loaded int: a gather's or scatter's index
#
# The operands are typed, not told apart by their spelling:
#   LoopVar  i<dim> or r<dim>: the counter of the loop over that dim of loop[shape] (r: a reduce dim)
#   Value    v<n> (CONST, LOAD, ARITH) or acc<n> (ACC): defined once, and alive until the ENDLOOP of the
#            loop it was defined in
#   Fixed    0: a dim the nest does not loop over (its size is 1), whose position is always 0
#   a buffer is named by its param (in0, out): a plain string
# A value computes in its dtype's compute type (the half widths in float32) and is rounded to its dtype once.


# ---- operands ----


@dataclass(frozen=True)
class LoopVar:
    """The counter of a LOOP: i1 walks dim 1 of the kernel's loop shape, r2 reduce dim 2."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Value:
    """A number one instruction defines: v3 (by CONST, LOAD or ARITH) or acc0 (a register total, by ACC)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Fixed:
    """The position of a dim the nest does not loop over (it has size 1): always 0. Only a range uses it."""

    def __str__(self) -> str:
        return "0"


Term = LoopVar | Value  # what an index multiplies by a coefficient
Literal = bool | int | float


@dataclass(frozen=True)
class Index:
    """const + sum(coef * term): a flat element offset into a buffer."""

    terms: tuple[tuple[Term, int], ...]
    const: int = 0

    def __str__(self) -> str:
        parts = [f"{term}" if coef == 1 else f"{term}*{coef}" for term, coef in self.terms]
        text = " + ".join(parts)
        if self.const or not parts:
            sign = "-" if self.const < 0 else "+"
            text = f"{text} {sign} {abs(self.const)}" if parts else str(self.const)
        return text


@dataclass(frozen=True)
class Range:
    """lo <= var < hi: one dim of a mask, checked before a load or const that a pad guards."""

    var: Term | Fixed
    lo: int
    hi: int

    def __str__(self) -> str:
        return f"{self.lo}<={self.var}<{self.hi}"


# ---- the instructions ----


@dataclass(frozen=True)
class Loop:
    """LOOP i0 < 4: runs what follows, up to ENDLOOP i0, for i0 = 0, 1, 2, 3."""

    var: LoopVar
    extent: int
    reduce: bool = False  # it walks a reduce dim: its iterations fold into one total, in order

    def __str__(self) -> str:
        return f"LOOP    {self.var} < {self.extent}"


@dataclass(frozen=True)
class EndLoop:
    """ENDLOOP i0: closes LOOP i0, the innermost open loop."""

    var: LoopVar

    def __str__(self) -> str:
        return f"ENDLOOP {self.var}"


@dataclass(frozen=True)
class ConstI:
    """CONST v0 = 0.0 : float32, zero wherever a range in `valid` fails."""

    dst: Value
    value: Literal
    dtype: DType
    valid: tuple[Range, ...] = ()

    def __str__(self) -> str:
        return f"CONST   {self.dst} = {_literal(self.value)}{_guard(self.valid)} : {self.dtype.name}"


@dataclass(frozen=True)
class LoadI:
    """LOAD v1 = in0[i0*5 + r2] : float32; zero, with no read at all, wherever a range in `valid` fails."""

    dst: Value
    buf: str
    index: Index
    dtype: DType
    valid: tuple[Range, ...] = ()

    def __str__(self) -> str:
        return f"LOAD    {self.dst} = {self.buf}[{self.index}]{_guard(self.valid)} : {self.dtype.name}"


@dataclass(frozen=True)
class Arith:
    """ARITH v3 = MUL v1, v2 : float32: one elementwise primitive on values."""

    dst: Value
    op: Op
    srcs: tuple[Value, ...]
    dtype: DType

    def __str__(self) -> str:
        return f"ARITH   {self.dst} = {self.op.name} {', '.join(str(s) for s in self.srcs)} : {self.dtype.name}"


@dataclass(frozen=True)
class Acc:
    """ACC acc0 = 0.0 : float32: a register accumulator, opened at the reduce identity."""

    dst: Value
    identity: Literal
    dtype: DType

    def __str__(self) -> str:
        return f"ACC     {self.dst} = {_literal(self.identity)} : {self.dtype.name}"


@dataclass(frozen=True)
class Accum:
    """target = op(target, src), where target is a register (a Value, index None) or an output's cell
    (a buffer name and an index)."""

    target: Value | str
    index: Index | None
    op: Op
    src: Value

    def __str__(self) -> str:
        where = f"{self.target}" if self.index is None else f"{self.target}[{self.index}]"
        return f"ACCUM   {where} = {self.op.name} {where}, {self.src}"


@dataclass(frozen=True)
class Store:
    """STORE out[i0*3 + i1] = v3: writes a value to a cell of an output."""

    buf: str
    index: Index
    src: Value

    def __str__(self) -> str:
        return f"STORE   {self.buf}[{self.index}] = {self.src}"


Instr = Loop | EndLoop | ConstI | LoadI | Arith | Acc | Accum | Store

# the instruction set: eight opcodes, each one class
OPCODES: dict[type, str] = {
    Loop: "LOOP",
    EndLoop: "ENDLOOP",
    ConstI: "CONST",
    LoadI: "LOAD",
    Arith: "ARITH",
    Acc: "ACC",
    Accum: "ACCUM",
    Store: "STORE",
}


def _literal(value: Literal) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _guard(valid: tuple[Range, ...]) -> str:
    return "" if not valid else " if " + ", ".join(str(r) for r in valid)


def defines(ins: Instr) -> Value | None:
    """The value an instruction defines, if any (CONST, LOAD, ARITH, ACC)."""
    return ins.dst if isinstance(ins, (ConstI, LoadI, Arith, Acc)) else None


def reads(ins: Instr) -> tuple[Value, ...]:
    """Every value an instruction reads: its sources, a register it folds into, and the values in its
    index and ranges (a gather's or scatter's loaded index)."""
    found: list[Value] = []
    if isinstance(ins, Arith):
        found += ins.srcs
    if isinstance(ins, (Accum, Store)):
        found.append(ins.src)
    if isinstance(ins, Accum) and isinstance(ins.target, Value):
        found.append(ins.target)
    index = getattr(ins, "index", None)
    if index is not None:
        found += [term for term, _ in index.terms if isinstance(term, Value)]
    found += [r.var for r in getattr(ins, "valid", ()) if isinstance(r.var, Value)]
    return tuple(dict.fromkeys(found))


# ---- kernels and programs, and their printout ----


def loop_ends(body: Sequence[Instr]) -> dict[int, int]:
    """Where each LOOP in `body` closes (the checker holds them balanced): its position -> its ENDLOOP's."""
    ends, open_loops = {}, []
    for pos, ins in enumerate(body):
        if isinstance(ins, Loop):
            open_loops.append(pos)
        elif isinstance(ins, EndLoop):
            ends[open_loops.pop()] = pos
    return ends


def top_level(body: Sequence[Instr]) -> list[tuple[int, list[Instr]]]:
    """`body` cut at depth 0, in order: each outermost LOOP ... ENDLOOP and each instruction outside every
    loop, with the position it starts at."""
    ends, pieces, pos = loop_ends(body), [], 0
    while pos < len(body):
        end = ends.get(pos, pos)  # a LOOP runs to its ENDLOOP; anything else is one instruction
        pieces.append((pos, list(body[pos : end + 1])))
        pos = end + 1
    return pieces


def is_scatter(ins: Instr) -> bool:
    """An ACCUM at an index read from memory: a scatter, whose adds may collide, so they keep their order."""
    return isinstance(ins, Accum) and ins.index is not None and any(isinstance(t, Value) for t, _ in ins.index.terms)


def leading_loops(nest: Sequence[Instr]) -> list[Loop]:
    """The non-reduce loops a nest opens first: its output cells' dims, which threads may split."""
    leading = []
    for ins in nest:
        if not isinstance(ins, Loop) or ins.reduce:
            break
        leading.append(ins)
    return leading


@dataclass(frozen=True)
class BufferArg:
    """A kernel parameter: its name in the nest (in0, out), the schedule slot, dtype and shape."""

    name: str
    slot: int
    dtype: DType
    shape: Shape


@dataclass(frozen=True)
class KernelIR:
    """One kernel's loop nests. A CUSTOM kernel has no body: the device supplies it whole. `nest` is the
    sha256 of the nest_key it was lowered from (limn.compiler.nest_memo), "" when it was built by hand: every kernel
    lowered from an equal key has this body and buffers, so a device may keep what it makes of the nest
    (the c device its C source) by it, across processes too. It takes no part in equality."""

    name: str
    op: Op
    loop_shape: Shape
    inputs: tuple[BufferArg, ...]
    outputs: tuple[BufferArg, ...]
    body: tuple[Instr, ...]
    custom: str | None = None
    params: tuple[tuple[str, Any], ...] = ()  # a CUSTOM kernel's parameters (limn.graph.ops.CustomArg's), sorted
    nest: str = field(default="", compare=False, repr=False)
    matmul: bool = False  # the schedule's Contraction: the graph states a matmul here (limn.compiler.matmul_form)

    def __str__(self) -> str:
        return "\n".join(self.header_lines() + self.body_lines())

    def header_lines(self) -> list[str]:
        """The kernel's name, op and loop shape, then one line per buffer (and the CUSTOM call)."""
        lines = [f"{self.name}  {self.op.name}  loop{list(self.loop_shape)}"]
        for b in self.inputs + self.outputs:
            lines.append(f"    {b.name} = buf{b.slot}  {b.dtype.name}{list(b.shape)}")
        if self.custom is not None:
            ins = ", ".join(b.name for b in self.inputs)
            outs = ", ".join(b.name for b in self.outputs)
            params = "".join(f", {name}={value!r}" for name, value in self.params)
            lines.append(f"  CUSTOM  {self.custom}({ins}{params}) -> {outs}")
        return lines

    def body_lines(self) -> list[str]:
        """One line per instruction, indented two spaces per open loop."""
        lines, depth = [], 1
        for ins in self.body:
            if isinstance(ins, EndLoop):
                depth -= 1
            lines.append("  " * depth + str(ins))
            if isinstance(ins, Loop):
                depth += 1
        return lines


@dataclass(frozen=True)
class Program:
    """Everything one realize() runs: the schedule and each kernel's IR, printable as a whole."""

    schedule: Schedule
    kernels: tuple[KernelIR, ...]

    def __str__(self) -> str:
        parts = [str(k) for k in self.kernels]
        sinks = []
        for i, sink in enumerate(self.schedule.sinks):
            dtype = self.schedule.slots[sink.slot].dtype
            sinks.append(f"sink {i} = buf{sink.slot}  {dtype.name}{list(sink.shape)}")
        return "\n\n".join(parts + ["\n".join(sinks)])
