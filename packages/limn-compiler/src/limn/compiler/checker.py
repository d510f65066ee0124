"""The IR's checker: the rules of ir.py's grammar as one function each, and `check(kernel)`, which runs them
and prints the nest with the offending instruction marked. Lowering runs it under LIMN_DEBUG>=1; the tests
run it on every nest they lower.
Pipeline: tensor -> graph -> schedule -> **IR (checked)** -> renderer -> device.
"""

from __future__ import annotations

import math

from limn.compiler.ir import (
    OPCODES,
    Acc,
    Accum,
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
    Term,
    Value,
    defines,
    reads,
)


class IRError(ValueError):
    """A loop nest that breaks a rule of the grammar. The message names the rule and prints the nest with
    the offending instruction marked `-->`. Lowering wrote it, so the fix is in codegen.py (or in the
    pass that built the nest by hand)."""


def check(kernel: KernelIR) -> KernelIR:
    """The kernel itself if its nest is well formed, else IRError with the nest printed and marked.

    The rules, one function each below:
      defined before use  every value read is defined above it, in its loop or one around it; once only
      loops balanced      each ENDLOOP closes the innermost open LOOP, none is reopened inside itself,
                          and every LOOP is closed
      indices in range    every LOAD, STORE and ACCUM index is inside its buffer for every count of the
                          open loops (narrowed by the ranges guarding a load), and names only open loops;
                          a loaded value in an index (a gather's) spans the range guarding it, or counts as
                          0: its own bounds are data, which the executor checks before the kernel runs
      writes land         ACCUM folds into a register an ACC opened or into an output; STORE writes an output
    """
    if kernel.custom is not None:
        return kernel
    walk = _Walk(kernel)
    for pc, ins in enumerate(kernel.body):
        for rule, test in RULES.items():
            problem = test(walk, ins)
            if problem is not None:
                raise IRError(marked(kernel, pc, f'"{rule}": {problem}'))
        walk.step(pc, ins)
    if walk.loops:
        var = walk.loops[-1].var
        problem = f"LOOP {var} is never closed: the body ends before its ENDLOOP {var}"
        raise IRError(marked(kernel, walk.opened_at[-1], f'"loops balanced": {problem}'))
    return kernel


def marked(kernel: KernelIR, pc: int, note: str) -> str:
    """The checker's message: what is wrong, then the kernel printed with instruction `pc` marked."""
    lines = [f"{kernel.name} breaks {note}"]
    lines += ["    " + line for line in kernel.header_lines()]
    lines += [("--> " if i == pc else "    ") + line for i, line in enumerate(kernel.body_lines())]
    return "\n".join(lines)


class _Walk:
    """What the checker knows at one instruction: the open loops, the values defined in each open loop's
    body (scopes[0] is the top level), and every value defined so far."""

    def __init__(self, kernel: KernelIR) -> None:
        self.buffers = {b.name: b for b in kernel.inputs + kernel.outputs}
        self.outputs = [b.name for b in kernel.outputs]
        self.loops: list[Loop] = []  # the open loops, outermost first
        self.opened_at: list[int] = []  # the pc of each one's LOOP
        self.scopes: list[dict[Value, Instr]] = [{}]
        self.defined: set[Value] = set()

    def definition(self, value: Value) -> Instr | None:
        """The instruction that defined `value`, if it is still alive here."""
        for scope in reversed(self.scopes):
            if value in scope:
                return scope[value]
        return None

    def loop(self, var: LoopVar) -> Loop | None:
        """The open loop counting `var`, if any."""
        return next((loop for loop in self.loops if loop.var == var), None)

    def step(self, pc: int, ins: Instr) -> None:
        if isinstance(ins, Loop):
            self.loops.append(ins)
            self.opened_at.append(pc)
            self.scopes.append({})
        elif isinstance(ins, EndLoop):
            self.loops.pop()
            self.opened_at.pop()
            self.scopes.pop()
        elif (dst := defines(ins)) is not None:
            self.scopes[-1][dst] = ins
            self.defined.add(dst)


def defined_before_use(walk: _Walk, ins: Instr) -> str | None:
    op = OPCODES[type(ins)]
    for value in reads(ins):
        if walk.definition(value) is None and value in walk.defined:
            return f"{op} reads {value}, whose loop has closed: a value lives until the ENDLOOP of its loop"
        if walk.definition(value) is None:
            return f"{op} reads {value}, which no instruction above it defines"
    dst = defines(ins)
    if dst is not None and dst in walk.defined:
        return f"{op} defines {dst} a second time: every value is defined once, by one instruction"
    return None


def loops_balanced(walk: _Walk, ins: Instr) -> str | None:
    if isinstance(ins, Loop) and walk.loop(ins.var) is not None:
        return f"LOOP {ins.var} opens inside the open loop that already counts {ins.var}"
    if isinstance(ins, Loop) and ins.extent < 0:
        return f"LOOP {ins.var} has extent {ins.extent}: an extent counts iterations, 0 or more"
    if isinstance(ins, EndLoop) and not walk.loops:
        return f"ENDLOOP {ins.var} closes nothing: no LOOP is open"
    if isinstance(ins, EndLoop) and walk.loops[-1].var != ins.var:
        innermost = walk.loops[-1].var
        return f"ENDLOOP {ins.var} while the innermost open loop is {innermost}: ENDLOOP {innermost} comes first"
    return None


def indices_in_range(walk: _Walk, ins: Instr) -> str | None:
    op = OPCODES[type(ins)]
    valid: tuple[Range, ...] = getattr(ins, "valid", ())
    index: Index | None = getattr(ins, "index", None)
    terms = [term for term, _ in index.terms] if index is not None else []
    for var in terms + [r.var for r in valid]:
        if isinstance(var, LoopVar) and walk.loop(var) is None:
            return f"{op} uses {var}, which is not the counter of an open loop"
    if index is None:
        return None
    buf = ins.buf if isinstance(ins, (LoadI, Store)) else ins.target
    arg = walk.buffers.get(buf)
    if arg is None:
        return f"{op} addresses {buf}, which is not a buffer of this kernel ({', '.join(walk.buffers)})"
    spans = _spans(walk, index, valid)
    never = any(isinstance(r.var, Fixed) and not r.lo <= 0 < r.hi for r in valid)
    if never or any(lo >= hi for lo, hi in spans.values()):
        return None  # the access never happens
    low = high = index.const
    for term, coef in index.terms:
        lo, hi = spans[term]
        low += min(coef * lo, coef * (hi - 1))
        high += max(coef * lo, coef * (hi - 1))
    size = math.prod(arg.shape)
    if low < 0 or high >= size:
        counts = ", ".join(f"{lo}<={var}<{hi}" for var, (lo, hi) in spans.items())
        return (
            f"{op} reaches {buf}[{low}] to {buf}[{high}] over {counts or 'no loops'}, but {buf} holds "
            f"{size} elements ({arg.dtype.name}{list(arg.shape)})"
        )
    return None


def _spans(walk: _Walk, index: Index, valid: tuple[Range, ...]) -> dict[Term, tuple[int, int]]:
    """[lo, hi) for each term of an index, wherever the access happens: a loop variable counts over its
    extent and a loaded value over the range guarding it (unguarded, it counts as 0: its range is data),
    each narrowed by the ranges that guard the access."""
    spans = {}
    for term, _ in index.terms:
        guards = [r for r in valid if r.var == term]
        if isinstance(term, LoopVar):
            spans[term] = (0, walk.loop(term).extent)
        else:
            spans[term] = (guards[0].lo, guards[0].hi) if guards else (0, 1)
        for r in guards:
            lo, hi = spans[term]
            spans[term] = (max(lo, r.lo), min(hi, r.hi))
    return spans


def writes_land(walk: _Walk, ins: Instr) -> str | None:
    outputs = ", ".join(walk.outputs)
    if isinstance(ins, Store) and ins.buf not in walk.outputs:
        return f"STORE writes {ins.buf}, which is not an output ({outputs}): a kernel writes only its outputs"
    if isinstance(ins, Accum) and ins.index is None:
        opened = walk.definition(ins.target) if isinstance(ins.target, Value) else None
        if not isinstance(opened, Acc):
            return f"ACCUM folds into {ins.target}, which no ACC opened: fold into an ACC's register or an output"
    if isinstance(ins, Accum) and ins.index is not None and ins.target not in walk.outputs:
        return f"ACCUM folds into {ins.target}[{ins.index}], which is not an output ({outputs})"
    return None


# rule -> the function that finds, at one instruction, a reason the nest breaks it (None: it keeps it)
RULES = {
    "defined before use": defined_before_use,
    "loops balanced": loops_balanced,
    "indices in range": indices_in_range,
    "writes land": writes_land,
}
