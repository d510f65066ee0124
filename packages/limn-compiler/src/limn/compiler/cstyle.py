"""What C and CUDA C spell alike: types, literals, casts, the op table, and each straight-line instruction.

`CStyle` takes a KernelIR and gives C-family source: the signature, then one statement per instruction from
tables keyed by op and dtype, in plain loops. A language subclasses it and replaces single entries, as
tinygrad's CUDARenderer overrides CStyleLanguage: limn-c's CRenderer adds its prelude's helpers and its loop
rewrites; limn-cuda's renderer will add its own. Pipeline: tensor -> graph -> schedule -> IR -> **renderer** -> device.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from limn import dtypes
from limn.compiler.ir import (
    Acc,
    Accum,
    Arith,
    BufferArg,
    ConstI,
    EndLoop,
    Fixed,
    Index,
    Instr,
    KernelIR,
    LoadI,
    Loop,
    LoopVar,
    Range,
    Store,
    Value,
    reads,
)
from limn.dtypes import DType
from limn.graph.ops import TERNARY, Op

# A range check a caller has already decided for the code it is emitting (a pad split knows a piece of a loop
# is wholly inside or outside the pad): True always holds there, False never does.
Decided = dict[Range, bool]


@dataclass(frozen=True)
class CType:
    """How one dtype is spelled: the C type of its elements in memory and of its values while they are
    computed on, and, where the two differ in width (the half widths), the helpers between them."""

    storage: str  # the element type of a buffer of this dtype
    value: str  # the type a value of this dtype is computed in
    widen: str | None = None  # storage -> value, exact: called on every load
    narrow: str | None = None  # value -> storage, rounding to nearest even: called on every store
    round: str | None = None  # value -> the nearest value the dtype can store: called on every result


# One row per dtype. A bool is a byte in memory but an int while computed: a 32-bit truth value vectorizes
# beside float32 math. The half widths have no C-family type of their own: each language adds their rows,
# naming the helpers its prelude defines (limn.compiler.half_widths.HALF_WIDTHS, which limn-c and limn-cuda both use).
TYPES: dict[DType, CType] = {
    dtypes.float64: CType("double", "double"),
    dtypes.float32: CType("float", "float"),
    dtypes.int64: CType("int64_t", "int64_t"),
    dtypes.int32: CType("int32_t", "int32_t"),
    dtypes.int16: CType("int16_t", "int16_t"),
    dtypes.int8: CType("int8_t", "int8_t"),
    dtypes.uint8: CType("uint8_t", "uint8_t"),
    dtypes.bool_: CType("uint8_t", "int"),
}

# How each elementwise op is spelled for float values (a, b, c are the C operands; exp, log, sqrt and one are
# MATH_FUNCS' entries for the operand's C type). Integers and bools have their own rows below, since C's
# signed overflow is undefined and limn's ints wrap.
C_OPS: dict[Op, str] = {
    Op.NEG: "(-{a})",
    Op.EXP: "{exp}({a})",
    Op.LOG: "{log}({a})",
    Op.SQRT: "{sqrt}({a})",
    Op.RECIP: "({one} / {a})",
    Op.ADD: "({a} + {b})",
    Op.MUL: "({a} * {b})",
    Op.CMPLT: "({a} < {b})",
    Op.WHERE: "({a} ? {b} : {c})",
    Op.MAX: "(({a} != {a} || {a} > {b}) ? {a} : {b})",  # keeps a nan, as numpy's max does
}

# ints wrap: compute in the unsigned type {u} (defined modulo 2**32, or 2**64 for int64: WRAP_TYPES) and
# narrow to the dtype ({t}; C narrows modulo)
C_INT_OPS: dict[Op, str] = {
    Op.NEG: "({t})(({u})0 - ({u}){a})",
    Op.ADD: "({t})(({u}){a} + ({u}){b})",
    Op.MUL: "({t})(({u}){a} * ({u}){b})",
    Op.CMPLT: "({a} < {b})",
    Op.WHERE: "({a} ? {b} : {c})",
    Op.MAX: "({a} > {b} ? {a} : {b})",
}

# the unsigned type each int's arithmetic wraps in: as wide as the int, and no narrower than an int, since a
# narrower one would be promoted back to a signed int before it is added or multiplied
WRAP_TYPES: dict[int, str] = {8: "uint32_t", 16: "uint32_t", 32: "uint32_t", 64: "uint64_t"}

C_BOOL_OPS: dict[Op, str] = {
    Op.ADD: "({a} | {b})",
    Op.MUL: "({a} & {b})",
    Op.CMPLT: "({a} < {b})",
    Op.WHERE: "({a} ? {b} : {c})",
    Op.MAX: "({a} | {b})",
}

# the math library's names per C value type (C99's <math.h>, which CUDA C also provides on the device);
# fma is the fused multiply-add an ADD-ACCUM of a MUL becomes
MATH_FUNCS: dict[str, dict[str, str]] = {
    "double": {"exp": "exp", "log": "log", "sqrt": "sqrt", "one": "1.0", "fma": "fma"},
    "float": {"exp": "expf", "log": "logf", "sqrt": "sqrtf", "one": "1.0f", "fma": "fmaf"},
}


class CStyle:
    """Renders a KernelIR as a C-family function `void NAME(const T* restrict in0, ..., T* restrict out)`
    whose loops are plain `for` loops. Every spelling is a class attribute or a small method, so a language
    overrides exactly what it spells differently:

        class Cuda(CStyle):
            kernel_prefix = 'extern "C" __global__ '
            restrict = "__restrict__"
            math_funcs = {**MATH_FUNCS, "float": {**MATH_FUNCS["float"], "exp": "__expf"}}

    The per-kernel state (`dtype_of`, `buf_dtype`, `fma_of`) is set by `begin` at the start of each render."""

    type_map: dict[DType, CType] = TYPES
    float_ops: dict[Op, str] = C_OPS
    int_ops: dict[Op, str] = C_INT_OPS
    bool_ops: dict[Op, str] = C_BOOL_OPS
    math_funcs: dict[str, dict[str, str]] = MATH_FUNCS
    infinity = "INFINITY"
    nan = "NAN"
    kernel_prefix = ""  # what precedes `void` (CUDA: extern "C" __global__)
    restrict = "restrict"

    # ---- the function ----

    def render(self, kernel: KernelIR) -> tuple[str, str]:
        """(function name, full source). The name is a hash of the rest, so two different sources never
        share a name and equal kernels do."""
        body = self.body(kernel)
        # the inputs are const: taken list by list, not by `b in kernel.inputs`, which compares every field
        args = [self.param(b, True) for b in kernel.inputs] + [self.param(b, False) for b in kernel.outputs]
        params = ", ".join(args)
        header = f"/* {kernel.op.name} over loop{list(kernel.loop_shape)} */\n"
        digest = hashlib.sha256((header + params + body).encode()).hexdigest()[:16]
        name = f"limn_{kernel.op.name.lower()}_{digest}"
        functions = "".join(self.functions.values())  # what the body calls, defined before it
        return name, f"{functions}{header}{self.kernel_prefix}void {name}({params}) {{\n{body}}}\n"

    def param(self, b: BufferArg, is_input: bool) -> str:
        const = "const " if is_input else ""
        return f"{const}{self.storage(b.dtype)}* {self.restrict} {b.name}"

    def begin(self, kernel: KernelIR) -> None:
        """Starts a kernel: the dtype of each value as it is defined, each buffer's, the fma pairs, the
        statements spelled so far (by instruction and decided checks; see `statement`), and the shared
        functions its body calls (a C matmul tile's fold), which render puts before the kernel."""
        self.kernel = kernel
        self.dtype_of: dict[Value, DType] = {}
        self.spelled: dict[int | tuple, tuple[Instr, str | None]] = {}
        self.buf_dtype = {b.name: b.dtype for b in kernel.inputs + kernel.outputs}
        self.fma_of = FmaPairs(kernel.body)
        self.functions: dict[str, str] = {}  # C functions the body calls, by name, each guarded to one definition

    def body(self, kernel: KernelIR) -> str:
        """The function's body: the nest as written, one `for` per LOOP, one statement per instruction."""
        self.begin(kernel)
        lines, depth = [], 1
        for ins in kernel.body:
            if isinstance(ins, Loop):
                lines.append("    " * depth + self.loop_head(ins.var, 0, ins.extent))
                depth += 1
            elif isinstance(ins, EndLoop):
                depth -= 1
                lines.append("    " * depth + "}")
            elif (text := self.statement(ins, {})) is not None:
                lines.append("    " * depth + text)
        return "".join(line + "\n" for line in lines)

    def loop_head(self, var: LoopVar | str, lo: int, hi: int) -> str:
        return f"for (int64_t {var} = {lo}; {var} < {hi}; {var}++) {{"

    # ---- types, literals, casts ----

    def ctype(self, dtype: DType) -> CType:
        row = self.type_map.get(dtype)
        assert row is not None, f"{type(self).__name__}.type_map has no row for {dtype.name}: add its CType"
        return row

    def storage(self, dtype: DType) -> str:
        return self.ctype(dtype).storage

    def value_type(self, dtype: DType) -> str:
        return self.ctype(dtype).value

    def literal(self, value: bool | int | float, dtype: DType) -> str:
        """A literal of the value in the C type of dtype's values."""
        if dtype.kind == "b":
            return "1" if value else "0"
        if dtype.is_int:
            v = int(value)
            # int32's lowest value is the negation of 2147483648, which is no int: it is written as a long long;
            # int64's is the negation of a number no long long holds, so it is written as a difference
            if v == -(2**63):
                return f"({-(2**63) + 1}LL - 1)"
            return f"{v}" if -(2**31) < v < 2**31 else f"{v}LL"
        v = float(value)
        if math.isnan(v):
            return self.nan
        if math.isinf(v):
            return self.infinity if v > 0 else f"(-{self.infinity})"
        return repr(v) if dtype == dtypes.float64 else f"{v!r}f"

    def cast(self, a: str, src: DType, dst: DType) -> str:
        """Converts value a from src to dst: floats to ints as float_to_int says, anything to bool is != 0,
        halves round once."""
        if dst.kind == "b":
            return f"({a} != 0)"
        if dst.is_int and src.is_float:
            return self.float_to_int(a, src, dst)
        if dst.is_int:
            return f"({self.storage(dst)})({a})"
        return self.round(f"({self.value_type(dst)})({a})", dst)

    def float_to_int(self, a: str, src: DType, dst: DType) -> str:
        """A float to an int as torch's on x86 (and the numpy device's): truncated toward zero into int64
        (dst int64) or int32 (every narrower dst, which then wraps); NaN, inf and values past that range give
        the range's lowest value. C leaves an out-of-range conversion undefined, so the value is replaced by
        that lowest value before it converts (a float select, which vectorizes as a blend)."""
        bits = 64 if dst == dtypes.int64 else 32
        via = "int64_t" if bits == 64 else "int32_t"
        suffix = "" if src == dtypes.float64 else "f"
        low, high = f"-{2.0 ** (bits - 1)!r}{suffix}", f"{2.0 ** (bits - 1)!r}{suffix}"
        # float64 holds values just below -2**31 that truncate into range; float32 and any wider bound do not
        above = f"({a}) > -2147483649.0" if bits == 32 and src == dtypes.float64 else f"({a}) >= {low}"
        guarded = f"(({above} && ({a}) < {high}) ? ({a}) : {low})"
        value = f"({via}){guarded}"
        return value if self.storage(dst) == via else f"({self.storage(dst)}){value}"

    def round(self, value: str, dtype: DType) -> str:
        """A half-width value is computed in float but must be a number its dtype can store: round it."""
        helper = self.ctype(dtype).round
        return f"{helper}({value})" if helper else value

    # ---- memory ----

    def index(self, index: Index) -> str:
        """A flat element offset, each term widened to int64 before it is scaled."""
        parts = [f"(int64_t){var}" if coef == 1 else f"(int64_t){var}*{coef}" for var, coef in index.terms]
        if index.const or not parts:
            parts.append(str(index.const) if index.const >= 0 else f"({index.const})")
        return " + ".join(parts)

    def load(self, buf: str, index: Index, dtype: DType) -> str:
        helper = self.ctype(dtype).widen
        raw = f"{buf}[{self.index(index)}]"
        return f"{helper}({raw})" if helper else raw

    def narrow(self, value: str, dtype: DType) -> str:
        """A value as the bits its buffer stores."""
        helper = self.ctype(dtype).narrow
        return f"{helper}({value})" if helper else value

    def masked(self, value: str, dtype: DType, valid: tuple[Range, ...], decided: Decided) -> str:
        """`value` where every range of the mask holds and zero elsewhere; a range in `decided` is not
        checked again (and one decided False makes the whole thing zero)."""
        conds = []
        for r in valid:
            if r in decided:
                if not decided[r]:
                    return self.literal(0, dtype)
                continue
            var = "0" if isinstance(r.var, Fixed) else f"(int64_t){r.var}"
            conds.append(f"({r.lo} <= {var} && {var} < {r.hi})")
        if not conds:
            return value
        return f"(({' && '.join(conds)}) ? {value} : {self.literal(0, dtype)})"

    # ---- the instructions ----

    def statement(self, ins: Instr, decided: Decided) -> str | None:
        """One straight-line instruction as a statement; None for a MUL spelled inside the fma after it. An
        instruction met again in this kernel (limn-c spells a jammed fold's body for its copies and again for
        the cells left over) is spelled once: its statement depends on nothing else but the checks decided
        on its ranges, since a value's dtype and a buffer's never change within a kernel."""
        valid = getattr(ins, "valid", ())
        key = (id(ins), *[decided.get(r) for r in valid]) if valid and decided else id(ins)
        known = self.spelled.get(key)
        if known is not None:
            assert known[0] is ins, "a spelled instruction is held by its entry, so no other has its id"
            return known[1]
        text = self.spell(ins, decided)
        self.spelled[key] = (ins, text)
        return text

    def spell(self, ins: Instr, decided: Decided) -> str | None:
        """The statement of `ins`, spelled anew (see `statement`)."""
        if isinstance(ins, (ConstI, LoadI, Arith, Acc)):
            return self.definition(ins, decided)
        if isinstance(ins, Accum):
            return self.accum(ins) + ";"
        if isinstance(ins, Store):
            src_t, buf_t = self.dtype_of[ins.src], self.buf_dtype[ins.buf]
            value = ins.src if src_t == buf_t else self.cast(ins.src, src_t, buf_t)
            return f"{ins.buf}[{self.index(ins.index)}] = {self.narrow(value, buf_t)};"
        raise AssertionError(f"{ins!r} is not a straight-line instruction: loops are the renderer's")

    def definition(self, ins: ConstI | LoadI | Arith | Acc, decided: Decided) -> str | None:
        """The declaration of the value a CONST, LOAD, ARITH or ACC defines (recording its dtype)."""
        self.dtype_of[ins.dst] = ins.dtype
        ctype = self.value_type(ins.dtype)
        if isinstance(ins, ConstI):
            value = self.masked(self.literal(ins.value, ins.dtype), ins.dtype, ins.valid, decided)
            return f"const {ctype} {ins.dst} = {value};"
        if isinstance(ins, LoadI):
            value = self.masked(self.load(ins.buf, ins.index, ins.dtype), ins.dtype, ins.valid, decided)
            return f"const {ctype} {ins.dst} = {value};"
        if isinstance(ins, Arith):
            if ins.dst in self.fma_of.fused:
                return None
            return f"const {ctype} {ins.dst} = {self.arith(ins)};"
        return f"{ctype} {ins.dst} = {self.literal(ins.identity, ins.dtype)};"

    def arith(self, ins: Arith) -> str:
        srcs = list(ins.srcs)
        if ins.op is Op.CAST:
            return self.cast(srcs[0], self.dtype_of[srcs[0]], ins.dtype)
        # a WHERE's dtype is its branches'; the condition is a bool
        operand = self.dtype_of[srcs[-1]] if ins.op in TERNARY else self.dtype_of[srcs[0]]
        return self.op(ins.op, srcs, operand, ins.dtype)

    def op(self, op: Op, srcs: list[Value | str], operand: DType, result: DType) -> str:
        """Elementwise `op` on C operands `srcs` of dtype `operand`, giving a value of dtype `result`."""
        names = dict(zip("abc", srcs))
        if operand.kind == "b" and op in self.bool_ops:
            return self.bool_ops[op].format(**names)
        if operand.is_int:
            assert op in self.int_ops, f"integer {op.name} reached the renderer; the frontend casts to float first"
            return self.int_ops[op].format(t=self.storage(result), u=WRAP_TYPES[operand.bits], **names)
        text = self.float_ops[op].format(**names, **self.math_funcs[self.value_type(operand)])
        return text if op is Op.CMPLT else self.round(text, result)

    def accum(self, ins: Accum, rename: dict[Value, str] | None = None) -> str:
        """An ACCUM as an assignment; `rename` reads some operands from elsewhere (a chunked fold's arrays)."""
        rename = rename or {}
        if ins.index is None:  # a register accumulator: its dtype is already the compute dtype
            acc_t = self.dtype_of[ins.target]
            target = current = ins.target
        else:
            acc_t = self.buf_dtype[ins.target]
            target = f"{ins.target}[{self.index(ins.index)}]"
            current = self.load(ins.target, ins.index, acc_t)
        compute = acc_t.compute
        src = rename.get(ins.src, ins.src)
        if self.value_type(self.dtype_of[ins.src]) != self.value_type(compute):
            src = self.cast(src, self.dtype_of[ins.src], compute)
        mul = self.fma_of.get(ins)
        if mul is not None:
            a, b = (rename.get(x, x) for x in mul.srcs)
            value = f"{self.math_funcs[self.value_type(compute)]['fma']}({a}, {b}, {current})"
        else:
            value = self.op(ins.op, [current, src], compute, compute)
        if ins.index is not None:
            value = self.narrow(value, acc_t)
        return f"{target} = {value}"


class FmaPairs:
    """Float MULs whose only reader is the ADD-ACCUM right after them: spelled as one fma there, which is
    both faster and what limn-c's tiled matmul does, so the two agree bit for bit."""

    def __init__(self, body: tuple[Instr, ...]) -> None:
        self.by_accum: dict[int, Arith] = {}
        self.fused: set[Value] = set()
        self.keep: list[Accum] = []
        pairs = [
            (prev, ins)
            for prev, ins in zip(body, body[1:])
            if isinstance(ins, Accum)
            and ins.op is Op.ADD
            and isinstance(prev, Arith)
            and prev.op is Op.MUL
            and prev.dst == ins.src
            and prev.dtype in (dtypes.float32, dtypes.float64)
        ]
        if not pairs:
            return  # most nests have none: their readers need no counting
        readers: dict[Value, int] = {}
        for ins in body:
            for value in reads(ins):
                readers[value] = readers.get(value, 0) + 1
        for prev, ins in pairs:
            if readers[prev.dst] == 1:
                self.by_accum[id(ins)] = prev
                self.fused.add(prev.dst)

    def get(self, accum: Accum) -> Arith | None:
        return self.by_accum.get(id(accum))

    def pair(self, accum: Accum, mul: Arith) -> None:
        """Records a renamed copy of a fused pair (limn-c's jammed folds copy a fold's body)."""
        self.by_accum[id(accum)] = mul
        self.fused.add(mul.dst)
        self.keep.append(accum)  # ids stay unique only while the objects live
