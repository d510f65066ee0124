"""The C rendering of the loop-nest IR: one KernelIR in, one readable C function out.

Values keep the IR's names (in0, out, v3, acc0) and index arithmetic is printed as the IR prints it.
Five things are added on the way, none of which changes a single bit of any result:
 - threads: the leading non-reduce loops of a nest become one OpenMP `parallel for collapse(k)`, so each
   output cell is still computed start to finish by one thread in the serial fold order;
 - pad splitting: a loop with range checks on its variable is cut at the mask's edges, so every piece
   is wholly inside or outside the pad and the check folds to a literal; no conditional load is left
   for the compiler to vectorize with masks (which gcc 12 at -O3 gets wrong for small fixed loops:
   tests/c/test_c_corpus.py's pad_outer_axis_of_narrow_rows);
 - matmul tiling: a nest that reads as a matmul keeps a patch of output cells in local accumulators,
   walking the reduce axis in the same order, so each cell's number is exactly the plain nest's;
 - folds: JAM cells' register folds run side by side as independent chains, and a fold whose values
   are costly makes them a chunk at a time in a loop that vectorizes, then folds them in the same order;
 - hoisting: what an innermost loop does not change is computed once before it.
The C spellings of the ops live in one table (C_OPS) that a CUDA renderer can override entry by entry.
Pipeline: tensor -> graph -> schedule -> IR -> **C source** -> cc -> ctypes.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from limn import dtypes
from limn.dtypes import DType
from limn.ir import (
    Acc,
    Accum,
    Arith,
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
)
from limn.ops import Op

# storage type of each dtype in memory
C_STORAGE = {
    dtypes.float64: "double",
    dtypes.float32: "float",
    dtypes.float16: "uint16_t",
    dtypes.bfloat16: "uint16_t",
    dtypes.int32: "int32_t",
    dtypes.int16: "int16_t",
    dtypes.int8: "int8_t",
    dtypes.bool_: "uint8_t",
}


def c_value_type(dtype: DType) -> str:
    """The C type a value of this dtype lives in while it is computed on: float for the half widths,
    and int for bools (stored as one byte, but a 32-bit truth value vectorizes beside float32 math)."""
    if dtype.kind == "b":
        return "int"
    return "float" if dtype.is_half else C_STORAGE[dtype]


# How each elementwise op is spelled for float values (a, b, c are the C operands). Integers and
# bools have their own rows below, since C's signed overflow is undefined and limn's ints wrap.
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

# ints wrap: compute in uint32_t (defined modulo 2**32) and narrow to the dtype (gcc narrows modulo)
C_INT_OPS: dict[Op, str] = {
    Op.NEG: "({t})(0u - (uint32_t){a})",
    Op.ADD: "({t})((uint32_t){a} + (uint32_t){b})",
    Op.MUL: "({t})((uint32_t){a} * (uint32_t){b})",
    Op.CMPLT: "({a} < {b})",
    Op.WHERE: "({a} ? {b} : {c})",
    Op.MAX: "({a} > {b} ? {a} : {b})",
}

C_BOOL_OPS: dict[Op, str] = {
    Op.ADD: "({a} | {b})",
    Op.MUL: "({a} & {b})",
    Op.CMPLT: "({a} < {b})",
    Op.WHERE: "({a} ? {b} : {c})",
    Op.MAX: "({a} | {b})",
}

MATH_FUNCS = {
    "double": {"exp": "exp", "log": "log", "sqrt": "sqrt", "one": "1.0"},
    "float": {"exp": "limn_expf", "log": "limn_logf", "sqrt": "sqrtf", "one": "1.0f"},
}


def literal(value: bool | int | float, dtype: DType) -> str:
    """A C literal of the value in the C type of dtype's values."""
    if dtype.kind == "b":
        return "1" if value else "0"
    if dtype.is_int:
        v = int(value)
        return f"({v + 1}LL - 1)" if v == -(2**63) else f"{v}" if -(2**31) < v < 2**31 else f"{v}LL"
    v = float(value)
    suffix = "" if dtype == dtypes.float64 else "f"
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    text = repr(v)
    return f"{text}{suffix}"


def index_expr(index: Index) -> str:
    parts = [f"(int64_t){var}" if coef == 1 else f"(int64_t){var}*{coef}" for var, coef in index.terms]
    if index.const or not parts:
        parts.append(str(index.const) if index.const >= 0 else f"({index.const})")
    return " + ".join(parts)


def load_expr(buf: str, index: Index, dtype: DType) -> str:
    raw = f"{buf}[{index_expr(index)}]"
    if dtype == dtypes.float16:
        return f"limn_f16_to_f32({raw})"
    if dtype == dtypes.bfloat16:
        return f"limn_bf16_to_f32({raw})"
    return raw


def store_value(value: str, dtype: DType) -> str:
    if dtype == dtypes.float16:
        return f"limn_f32_to_f16({value})"
    if dtype == dtypes.bfloat16:
        return f"limn_f32_to_bf16({value})"
    return value


def round_value(value: str, dtype: DType) -> str:
    """A half-width value is held as float but must be a number its dtype can store: round it."""
    if dtype == dtypes.float16:
        return f"limn_round_f16({value})"
    if dtype == dtypes.bfloat16:
        return f"limn_round_bf16({value})"
    return value


def cast_expr(a: str, src: DType, dst: DType) -> str:
    """Converts value a from src to dst: floats to ints truncate toward zero through int64 (then wrap,
    as numpy's astype does), anything to bool is != 0, halves round once."""
    if dst.kind == "b":
        return f"({a} != 0)"
    if dst.is_int and src.is_float:
        return f"({C_STORAGE[dst]})(int64_t)({a})"
    if dst.is_int:
        return f"({C_STORAGE[dst]})({a})"
    return round_value(f"({c_value_type(dst)})({a})", dst)


@dataclass
class Options:
    threads: int = 1  # the OpenMP team size; 1 emits no pragmas
    split_pads: bool = True
    tile_matmuls: bool = True
    chunk_folds: bool = True
    jam_folds: bool = True
    parallel_work: int = 32768  # a nest with fewer loop iterations than this runs serially


class CRenderer:
    """Renders KernelIR as a C function `void NAME(const T* restrict in0, ..., T* restrict out)`."""

    def __init__(self, options: Options) -> None:
        self.options = options

    def render(self, kernel: KernelIR) -> tuple[str, str]:
        """(function name, full C source). The name is a hash of the body, so equal kernels share it."""
        body = self._function_body(kernel)
        params = ", ".join(self._param(b, kernel) for b in kernel.inputs + kernel.outputs)
        header = f"/* {kernel.op.name} over loop{list(kernel.loop_shape)} */\n"
        # the name is a hash of everything else, so two sources never share a name and equal ones do
        digest = hashlib.sha256((header + params + body).encode()).hexdigest()[:16]
        name = f"limn_{kernel.op.name.lower()}_{digest}"
        source = f"{header}void {name}({params}) {{\n{body}}}\n"
        return name, source

    def _param(self, b, kernel: KernelIR) -> str:
        const = "const " if b in kernel.inputs else ""
        return f"{const}{C_STORAGE[b.dtype]}* restrict {b.name}"

    # ---- the body ----

    def _function_body(self, kernel: KernelIR) -> str:
        self.lines: list[str] = []
        self.types: dict[Value, DType] = {}
        self.buf_types = {b.name: b.dtype for b in kernel.inputs + kernel.outputs}
        self.kernel = kernel
        self.fma_of = _FmaPairs(kernel.body)
        body = list(kernel.body)
        nests: list[list[Instr]] = []
        pos = 0
        while pos < len(body):
            end = _matching_end(body, pos) if isinstance(body[pos], Loop) else pos
            nests.append(body[pos : end + 1])
            pos = end + 1
        for k, nest in enumerate(nests):
            if k + 1 < len(nests) and self._fill_overwritten_by_tile(nest, nests[k + 1]):
                continue  # the tiled matmul after it writes every cell this fill would
            if isinstance(nest[0], Loop):
                self._nest(nest, depth=1)
            else:
                self._straight(nest[0], depth=1, fixed={})
        return "".join(line + "\n" for line in self.lines)

    def _fill_overwritten_by_tile(self, nest: list[Instr], following: list[Instr]) -> bool:
        """True for the identity fill in front of a nest that renders as a tiled matmul, which stores
        every output cell itself (full tiles and edges alike) rather than adding to it."""
        if not self.options.tile_matmuls or not isinstance(following[0], Loop):
            return False
        from limn.c_matmul import match_matmul

        m = match_matmul(following, self.kernel)
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

    def _nest(self, nest: list[Instr], depth: int) -> None:
        """A top-level loop nest: tiled if it reads as a matmul, else emitted with its pragma."""
        if self.options.tile_matmuls:
            from limn.c_matmul import match_matmul, render_tiled

            m = match_matmul(nest, self.kernel)
            if m is not None:
                self.lines.extend(render_tiled(m, self, depth))
                return
        self._loop_block(nest, depth, fixed={}, pragma=self._pragma(nest), collapsing=0)

    def _pragma(self, nest: list[Instr]) -> tuple[int, str] | None:
        """(loops to collapse, pragma line) for a nest's leading non-reduce loops, or None (serial)."""
        if self.options.threads <= 1:
            return None
        if any(isinstance(i, Accum) and i.index is not None and _has_value_var(i.index) for i in nest):
            return None  # a scatter's colliding adds keep their serial order
        leading = []
        for ins in nest:
            if not isinstance(ins, Loop) or ins.reduce:
                break
            leading.append(ins)
        if not leading:
            return None  # the outermost loop is a reduce axis: splitting it would regroup the sum
        work = math.prod(ins.extent for ins in nest if isinstance(ins, Loop))
        if work < self.options.parallel_work:
            return None
        collapse, cells = 0, 1
        for loop in leading:  # fuse leading loops until every thread has several cells of work
            collapse += 1
            cells *= loop.extent
            if cells >= 4 * self.options.threads:
                break
        clause = f" collapse({collapse})" if collapse > 1 else ""
        return (
            collapse,
            f"#pragma omp parallel for{clause} schedule(static) num_threads({self.options.threads})",
        )

    def _loop_block(
        self,
        block: list[Instr],
        depth: int,
        fixed: dict[str, bool],
        pragma: tuple[int, str] | None,
        collapsing: int,
    ) -> None:
        """Emits block = [LOOP, ..., ENDLOOP]. `fixed` holds the range checks a pad split already
        decided; `collapsing` counts the loops below an enclosing collapse clause still owes."""
        loop: Loop = block[0]
        inner = block[1:-1]
        if (
            self.options.jam_folds
            and collapsing == 0
            and _row_fold(loop, inner)
            and loop.extent >= JAM
            and not (self.options.chunk_folds and _costly(inner))  # a vectorized exp beats eight scalar ones
        ):
            self._jammed_folds(loop, inner, depth, fixed, pragma)
            return
        innermost = not any(isinstance(i, Loop) for i in inner)
        collapse_here = pragma[0] if pragma is not None else collapsing
        # a loop inside a collapse must keep plain bounds, and an innermost one split under a collapse
        # would leave its collapse nothing to fuse: those keep their checks
        may_split = self.options.split_pads and collapsing == 0 and (collapse_here <= 1 or not innermost)
        pieces = _split_at_mask_edges(loop, inner) if may_split else [(0, loop.extent, {})]
        independent = innermost and not any(
            isinstance(i, Accum) and i.index is not None and _has_value_var(i.index) for i in inner
        )
        chunked = (
            self.options.chunk_folds
            and innermost
            and loop.reduce
            and pragma is None
            and collapsing == 0
            and _worth_chunking(inner)
        )
        if innermost and collapsing == 0 and (pragma is None or pragma[0] == 1):
            # what does not change along the loop is computed once before it (a row's log-sum, say):
            # the same values, and a loop body without the branches a compiler makes of them
            hoisted, inner = _hoist(loop, inner)
            for ins in hoisted:
                self._straight(ins, depth, fixed)
        for lo, hi, decided in pieces:
            if lo >= hi:
                continue
            if chunked:
                self._chunked_fold(loop, inner, lo, hi, depth, {**fixed, **decided})
                continue
            if pragma is not None:
                # the team's loop is also the innermost one: let OpenMP vectorize it too
                simd = " simd" if independent and collapse_here == 1 else ""
                self._emit(pragma[1].replace("parallel for", "parallel for" + simd, 1), depth, raw=True)
            elif independent and collapsing == 0:
                self._emit("LIMN_IVDEP", depth)
            self._emit(f"for (int64_t {loop.var} = {lo}; {loop.var} < {hi}; {loop.var}++) {{", depth)
            self._emit_seq(inner, depth + 1, {**fixed, **decided}, max(collapse_here - 1, 0))
            self._emit("}", depth)

    def _jammed_folds(
        self, loop: Loop, inner: list[Instr], depth: int, fixed: dict[str, bool], pragma: tuple[int, str] | None
    ) -> None:
        """JAM cells of a register fold at once: `loop` walks the cells, and its body opens a total,
        folds over the reduce loop and stores it. Folding one cell is a chain of dependent adds, as slow
        as the add's latency; JAM independent chains side by side keep the adder busy. Each cell still
        folds its own values, in its own order, from its own identity: the same bits."""
        n_full = loop.extent // JAM * JAM
        if pragma is not None:
            self._emit(pragma[1], depth, raw=True)
        var = loop.var
        self._emit(f"for (int64_t {var} = 0; {var} < {n_full}; {var} += {JAM}) {{", depth)
        acc: Acc = inner[0]
        reduce_block, store = inner[1:-1], inner[-1]
        copies = []
        for u in range(JAM):
            names: dict[LoopVar | Value, LoopVar | Value] = {var: LoopVar(f"{var}_{u}")}
            for ins in inner:
                dst = getattr(ins, "dst", None)
                if dst is not None:
                    names[dst] = Value(f"{dst}_{u}")
            self._emit(f"const int64_t {var}_{u} = {var} + {u};", depth + 1)
            copies.append(names)
        for names in copies:
            self._straight(_renamed_instr(acc, names), depth + 1, fixed)
        r_loop: Loop = reduce_block[0]
        body = reduce_block[1:-1]
        jammed: list[Instr] = []
        for names in copies:
            renamed = [_renamed_instr(ins, names) for ins in body]
            for old_ins, new_ins in zip(body, renamed):  # keep each copy's fma where the original had one
                if isinstance(old_ins, Accum) and self.fma_of.get(old_ins) is not None:
                    mul = next(r for o, r in zip(body, renamed) if o is self.fma_of.get(old_ins))
                    self.fma_of.pair(new_ins, mul)
            jammed += renamed
        self._loop_block([r_loop, *jammed, reduce_block[-1]], depth + 1, fixed, None, 0)
        for names in copies:
            self._straight(_renamed_instr(store, names), depth + 1, fixed)
        self._emit("}", depth)
        if n_full < loop.extent:  # the cells left over: one at a time
            tail = Loop(var, loop.extent, loop.reduce)
            self._emit(f"for (int64_t {var} = {n_full}; {var} < {loop.extent}; {var}++) {{", depth)
            self._emit_seq(inner, depth + 1, fixed, 0)
            self._emit("}", depth)
            del tail

    def _chunked_fold(
        self, loop: Loop, inner: list[Instr], lo: int, hi: int, depth: int, fixed: dict[str, bool]
    ) -> None:
        """A register fold whose values are costly to make (an exp per element, say): the values of
        CHUNK iterations are made first, in a loop with no dependence that vectorizes, then folded into
        the register one by one in the same order. Same additions, same order, same bits."""
        fold: Accum = inner[-1]
        mul = self.fma_of.get(fold)
        operands = list(dict.fromkeys(mul.srcs if mul is not None else (fold.src,)))  # x * x: one array
        # a vector of the narrowest type read must fill: 16 floats, but 64 one-byte bools
        narrowest = min((i.dtype.itemsize for i in inner if isinstance(i, LoadI)), default=4)
        chunk = max(CHUNK, 64 // narrowest)
        n_full = (hi - lo) // chunk * chunk
        var, base = loop.var, f"{loop.var}_chunk"
        for start, stop, step in ((lo, lo + n_full, chunk), (lo + n_full, hi, None)):
            if start >= stop:
                continue
            if step is None:  # the tail that does not fill a chunk: the plain fold
                self._emit(f"for (int64_t {var} = {start}; {var} < {stop}; {var}++) {{", depth)
                self._emit_seq(inner, depth + 1, fixed, 0)
                self._emit("}", depth)
                continue
            self._emit(f"for (int64_t {base} = {start}; {base} < {stop}; {base} += {chunk}) {{", depth)
            arrays = [f"{name}_of" for name in operands]
            for name, array in zip(operands, arrays):
                # the values are declared below, in the chunk loop; they share the total's C type
                ctype = c_value_type(self.types.get(name, self.types[fold.target]))
                self._emit(f"{ctype} {array}[{chunk}];", depth + 1)
            self._emit("LIMN_IVDEP", depth + 1)
            self._emit(f"for (int64_t k = 0; k < {chunk}; k++) {{", depth + 1)
            self._emit(f"const int64_t {var} = {base} + k;", depth + 2)
            self._emit_seq(inner[:-1], depth + 2, fixed, 0)
            for name, array in zip(operands, arrays):
                self._emit(f"{array}[k] = {name};", depth + 2)
            self._emit("}", depth + 1)
            self._emit(f"for (int64_t k = 0; k < {chunk}; k++) {{", depth + 1)
            self._emit(
                self.accum(fold, {name: f"{array}[k]" for name, array in zip(operands, arrays)}) + ";", depth + 2
            )
            self._emit("}", depth + 1)
            self._emit("}", depth)

    def _emit_seq(self, seq: list[Instr], depth: int, fixed: dict[str, bool], collapsing: int) -> None:
        pos = 0
        while pos < len(seq):
            ins = seq[pos]
            if isinstance(ins, Loop):
                end = _matching_end(seq, pos)
                self._loop_block(seq[pos : end + 1], depth, fixed, None, collapsing)
                pos = end + 1
            else:
                self._straight(ins, depth, fixed)
                pos += 1

    def _emit(self, text: str, depth: int, raw: bool = False) -> None:
        self.lines.append(("" if raw else "    " * depth) + text)

    def _guard(self, valid: tuple[Range, ...], fixed: dict[str, bool]) -> str | None:
        """The C condition for a mask, with already-decided checks folded; None means always true,
        'false' means never."""
        conds = []
        for r in valid:
            key = str(r)
            if key in fixed:
                if not fixed[key]:
                    return "false"
                continue
            var = "0" if isinstance(r.var, Fixed) else f"(int64_t){r.var}"
            conds.append(f"({r.lo} <= {var} && {var} < {r.hi})")
        return " && ".join(conds) if conds else None

    def _straight(self, ins: Instr, depth: int, fixed: dict[str, bool]) -> None:
        """One non-loop instruction as C."""
        if isinstance(ins, ConstI):
            self.types[ins.dst] = ins.dtype
            value = literal(ins.value, ins.dtype)
            guard = self._guard(ins.valid, fixed)
            zero = literal(0, ins.dtype)
            expr = value if guard is None else zero if guard == "false" else f"(({guard}) ? {value} : {zero})"
            self._emit(f"const {c_value_type(ins.dtype)} {ins.dst} = {expr};", depth)
        elif isinstance(ins, LoadI):
            self.types[ins.dst] = ins.dtype
            load = load_expr(ins.buf, ins.index, ins.dtype)
            guard = self._guard(ins.valid, fixed)
            zero = literal(0, ins.dtype)
            expr = load if guard is None else zero if guard == "false" else f"(({guard}) ? {load} : {zero})"
            self._emit(f"const {c_value_type(ins.dtype)} {ins.dst} = {expr};", depth)
        elif isinstance(ins, Arith):
            self.types[ins.dst] = ins.dtype
            if self._fused_into_accum(ins):
                return  # rendered as part of the fma that consumes it
            self._emit(f"const {c_value_type(ins.dtype)} {ins.dst} = {self.arith(ins)};", depth)
        elif isinstance(ins, Acc):
            self.types[ins.dst] = ins.dtype
            self._emit(f"{c_value_type(ins.dtype)} {ins.dst} = {literal(ins.identity, ins.dtype)};", depth)
        elif isinstance(ins, Accum):
            self._emit(self.accum(ins) + ";", depth)
        elif isinstance(ins, Store):
            value = (
                cast_expr(ins.src, self.types[ins.src], self.buf_types[ins.buf])
                if self.types[ins.src] != self.buf_types[ins.buf]
                else ins.src
            )
            self._emit(f"{ins.buf}[{index_expr(ins.index)}] = {store_value(value, self.buf_types[ins.buf])};", depth)
        elif isinstance(ins, EndLoop):
            raise AssertionError("ENDLOOP outside a loop block")
        else:
            raise AssertionError(f"no C rendering for {ins!r}")

    def arith(self, ins: Arith) -> str:
        srcs = list(ins.srcs)
        if ins.op is Op.CAST:
            return cast_expr(srcs[0], self.types[srcs[0]], ins.dtype)
        # a WHERE's dtype is its branches'; the condition is a bool
        operand_dtype = self.types[srcs[-1]] if ins.op is Op.WHERE else self.types[srcs[0]]
        return self.op_expr(ins.op, srcs, operand_dtype, ins.dtype)

    def op_expr(self, op: Op, srcs: list[Value | str], operand: DType, result: DType) -> str:
        names = dict(zip("abc", srcs))
        if operand.kind == "b" and op in C_BOOL_OPS:
            return C_BOOL_OPS[op].format(**names)
        if operand.is_int:
            assert op in C_INT_OPS, f"integer {op.name} reached the C renderer; the frontend casts to float first"
            return C_INT_OPS[op].format(t=C_STORAGE[result], **names)
        text = C_OPS[op].format(**names, **MATH_FUNCS[c_value_type(operand)])
        return text if op is Op.CMPLT else round_value(text, result)

    def _fused_into_accum(self, ins: Arith) -> bool:
        return ins.dst in self.fma_of.fused

    def accum(self, ins: Accum, rename: dict[Value, str] | None = None) -> str:
        """The C for an ACCUM; `rename` reads some operands from elsewhere (a chunked fold's arrays)."""
        rename = rename or {}
        if ins.index is None:  # a register accumulator: its dtype is already the compute dtype
            acc_t = self.types[ins.target]
            target = current = ins.target
        else:
            acc_t = self.buf_types[ins.target]
            target = f"{ins.target}[{index_expr(ins.index)}]"
            current = load_expr(ins.target, ins.index, acc_t)
        compute = acc_t.compute
        src = rename.get(ins.src, ins.src)
        if c_value_type(self.types[ins.src]) != c_value_type(compute):
            src = cast_expr(src, self.types[ins.src], compute)
        mul = self.fma_of.get(ins)
        if mul is not None:
            fma = "fma" if compute == dtypes.float64 else "fmaf"
            a, b = (rename.get(x, x) for x in mul.srcs)
            value = f"{fma}({a}, {b}, {current})"
        else:
            value = self.op_expr(ins.op, [current, src], compute, compute)
        if ins.index is not None:
            value = store_value(value, acc_t)
        return f"{target} = {value}"


CHUNK = 16  # values made ahead of a chunked fold: a 64-byte vector of float32 (more for narrower loads)


def _worth_chunking(inner: list[Instr]) -> bool:
    """A register fold (the body ends in ACCUM into a register and writes nothing else) whose values
    cost an exp, log, sqrt or recip each, several ops, or a widened mask: making them a chunk at a time
    pays."""
    if not inner or not isinstance(inner[-1], Accum) or inner[-1].index is not None:
        return False
    if any(isinstance(i, (Accum, Store, Acc, Loop, EndLoop)) for i in inner[:-1]):
        return False
    ariths = [i for i in inner if isinstance(i, Arith)]
    narrow = any(isinstance(i, LoadI) and i.dtype.itemsize < 4 for i in inner)  # a mask widened per element
    return any(a.op in (Op.EXP, Op.LOG, Op.SQRT, Op.RECIP) for a in ariths) or len(ariths) >= 3 or narrow


JAM = 8  # cells of a register fold computed side by side (independent add chains)


def _costly(instrs: list[Instr]) -> bool:
    """Whether any value costs an exp, log, sqrt or recip."""
    return any(isinstance(i, Arith) and i.op in (Op.EXP, Op.LOG, Op.SQRT, Op.RECIP) for i in instrs)


def _row_fold(loop: Loop, inner: list[Instr]) -> bool:
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


def _renamed_instr(ins: Instr, names: dict[LoopVar | Value, LoopVar | Value]) -> Instr:
    """A copy of an instruction with its value and loop-variable names mapped through `names`."""
    n = lambda name: names.get(name, name)  # noqa: E731
    index = lambda ix: Index(tuple((n(v), c) for v, c in ix.terms), ix.const)  # noqa: E731
    ranges = lambda rs: tuple(Range(n(r.var), r.lo, r.hi) for r in rs)  # noqa: E731
    if isinstance(ins, ConstI):
        return ConstI(n(ins.dst), ins.value, ins.dtype, ranges(ins.valid))
    if isinstance(ins, LoadI):
        return LoadI(n(ins.dst), ins.buf, index(ins.index), ins.dtype, ranges(ins.valid))
    if isinstance(ins, Arith):
        return Arith(n(ins.dst), ins.op, tuple(n(x) for x in ins.srcs), ins.dtype)
    if isinstance(ins, Acc):
        return Acc(n(ins.dst), ins.identity, ins.dtype)
    if isinstance(ins, Accum):
        return Accum(n(ins.target), None if ins.index is None else index(ins.index), ins.op, n(ins.src))
    if isinstance(ins, Store):
        return Store(ins.buf, index(ins.index), n(ins.src))
    raise AssertionError(f"no renaming for {ins!r}")


class _FmaPairs:
    """Float MULs whose only reader is the ADD-ACCUM right after them: rendered as one fma there,
    which is both faster and what the tiled matmul does, so the two agree bit for bit."""

    def __init__(self, body: tuple[Instr, ...]) -> None:
        reads: dict[Value, int] = {}
        for ins in body:
            for r in _reads(ins):
                reads[r] = reads.get(r, 0) + 1
        self.by_accum: dict[int, Arith] = {}
        self.fused: set[Value] = set()
        self.keep: list[Accum] = []
        for prev, ins in zip(body, body[1:]):
            if (
                isinstance(ins, Accum)
                and ins.op is Op.ADD
                and isinstance(prev, Arith)
                and prev.op is Op.MUL
                and prev.dst == ins.src
                and reads[prev.dst] == 1
                and prev.dtype in (dtypes.float32, dtypes.float64)
            ):
                self.by_accum[id(ins)] = prev
                self.fused.add(prev.dst)

    def get(self, accum: Accum) -> Arith | None:
        return self.by_accum.get(id(accum))

    def pair(self, accum: Accum, mul: Arith) -> None:
        """Records a renamed copy of a fused pair (see CRenderer._jammed_folds)."""
        self.by_accum[id(accum)] = mul
        self.fused.add(mul.dst)
        self.keep.append(accum)  # ids stay unique only while the objects live


def _reads(ins: Instr) -> tuple[Value, ...]:
    if isinstance(ins, Arith):
        return ins.srcs
    if isinstance(ins, (Accum, Store)):
        return (ins.src,)
    return ()


def _hoist(loop: Loop, inner: list[Instr]) -> tuple[list[Instr], list[Instr]]:
    """Splits an innermost loop's body into what is the same on every iteration (constants, loads whose
    index and mask do not involve the loop variable from buffers the loop does not write, and arithmetic
    on those) and the rest, each in its original order."""
    written = {i.buf for i in inner if isinstance(i, Store)}
    written |= {i.target for i in inner if isinstance(i, Accum) and i.index is not None}
    varying = {loop.var}
    hoisted, rest = [], []
    for ins in inner:
        if isinstance(ins, ConstI):
            moves = all(r.var not in varying for r in ins.valid)
        elif isinstance(ins, LoadI):
            names = {v for v, _ in ins.index.terms} | {r.var for r in ins.valid}
            moves = not (names & varying) and ins.buf not in written
        elif isinstance(ins, Arith):
            moves = not (set(ins.srcs) & varying)
        else:
            moves = False
        if moves:
            hoisted.append(ins)
        else:
            rest.append(ins)
            if isinstance(ins, (ConstI, LoadI, Arith)):
                varying.add(ins.dst)
    return hoisted, rest


def _matching_end(seq, start: int) -> int:
    depth = 0
    for pos in range(start, len(seq)):
        if isinstance(seq[pos], Loop):
            depth += 1
        elif isinstance(seq[pos], EndLoop):
            depth -= 1
            if depth == 0:
                return pos
    raise AssertionError("LOOP without ENDLOOP")


def _has_value_var(index: Index) -> bool:
    return any(isinstance(term, Value) for term, _ in index.terms)


def _split_at_mask_edges(loop: Loop, inner: list[Instr]) -> list[tuple[int, int, dict[str, bool]]]:
    """The pieces [lo, hi) of a loop cut at every edge of a range check on its variable (anywhere in the
    nest inside it), each with those checks decided (True inside the range, False outside)."""
    ranges = {}
    for ins in inner:
        for r in getattr(ins, "valid", ()):
            if r.var == loop.var:
                ranges[str(r)] = r
    if not ranges:
        return [(0, loop.extent, {})]
    cuts = {0, loop.extent}
    for r in ranges.values():
        cuts.update(min(max(edge, 0), loop.extent) for edge in (r.lo, r.hi))
    edges = sorted(cuts)
    pieces = []
    for lo, hi in zip(edges, edges[1:]):
        decided = {key: r.lo <= lo and hi <= r.hi for key, r in ranges.items()}
        pieces.append((lo, hi, decided))
    return pieces
