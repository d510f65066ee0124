"""Rule: every innermost loop the c device emits is vectorized, for AVX2 (x86-64-v3) and AVX-512 (x86-64-v4).

The kernels are the shared corpus's (tests/corpus.py), those of one training step of examples/bench_step.py's
GPT at tiny sizes (forward, backward, AdamW), and matmuls whose kernels apply a bias, gelu or residual epilogue.
Each set is rendered by a c device built for each target and compiled as one translation unit with that
device's flags plus gcc's -fopt-info report: gcc only, nothing runs.

A loop passes when gcc vectorized it, made it (or a loop around it) a memset or memcpy, or unrolled it completely
into vectorized code; the loops of a matmul tile over its vectors are vector code as written. A loop shorter than
two vectors, or one of at most 16 iterations that gcc unrolls completely before it vectorizes (its limit), leaves
no loop to vectorize, and a kernel with only such loops is not compiled at all. A loop gcc says nothing about
was removed as dead code. The loops that stay scalar for a reason are ALLOWED below, each recognised by its C
(and by gcc's words), with the reason. A failure prints the kernel's C and gcc's own words for the loop.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from corpus import CASES

import limn
from limn import Tensor
from limn.c import isa as c_isa
from limn.c.device import CDevice
from limn.c.prelude import PRELUDE
from limn.c.rewrites.matmul import VECTOR_PRELUDE
from limn.compiler.codegen import ir
from limn.compiler.ir import KernelIR

ISAS = ("x86-64-v3", "x86-64-v4")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _why_not_here() -> str | None:
    """Why this host cannot run these tests (they need gcc building x86-64 code), or None."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return f"needs an x86-64 host, where gcc builds x86-64-v3 and v4 code; this one is {platform.machine()}"
    cc = shutil.which(os.environ.get("CC") or "cc")
    if cc is None:
        return "needs gcc as cc; there is no cc on PATH"
    version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    if "Free Software Foundation" not in version:
        return f"needs gcc as cc (its -fopt-info report is what is read); cc is {version.splitlines()[0]}"
    return None


pytestmark = [
    pytest.mark.isa,  # slow: run by `nox -s isa` (and CI), not the default suite
    pytest.mark.skipif(_why_not_here() is not None, reason=str(_why_not_here())),
]


# ---- the kernels ----


def corpus_kernels() -> list[KernelIR]:
    """Every kernel of every corpus case, as realizing its outputs would run them."""
    limn.set_device("numpy")
    kernels = []
    for case in CASES:
        kernels += ir(*case.build(np.random.default_rng(0))).kernels
    return kernels


def gpt_step_kernels() -> list[KernelIR]:
    """One training step of bench_step's GPT at tiny sizes (d_model 64, 2 heads of 32, 1 layer, context 32,
    batch 2): the forward, the backward and AdamW's updates, as the step's one realize() would run them."""
    sys.path.insert(0, str(EXAMPLES))  # bench_step imports its neighbour _limits
    try:
        spec = importlib.util.spec_from_file_location("bench_step", EXAMPLES / "bench_step.py")
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(EXAMPLES))
    bench.D_MODEL, bench.LAYERS, bench.HEADS, bench.CONTEXT, bench.BATCH = 64, 1, 2, 32, 2
    from limn import nn, optim

    limn.set_device("numpy")
    limn.manual_seed(0)
    _, GPT = bench.limn_gpt()
    model = GPT()
    opt = optim.AdamW(nn.named_parameters(model), lr=3e-3, weight_decay=0.0)
    tokens = np.random.default_rng(0).integers(0, bench.VOCAB, (bench.BATCH, bench.CONTEXT + 1)).astype(np.int32)
    x, y = Tensor(tokens[:, :-1]), Tensor(tokens[:, 1:])
    n = bench.BATCH * bench.CONTEXT
    loss = model(x).reshape(n, bench.VOCAB).cross_entropy(y.reshape(n))  # (B, T, vocab) -> (B*T, vocab)
    loss.backward()
    return list(ir(loss, *opt.updates()).kernels)


def epilogue_kernels() -> list[KernelIR]:
    """Matmuls whose elementwise consumers fold into their kernel (limn.compiler.epilogue), which a loop over the
    cells applies after the tiles: a linear layer's bias and gelu over a batch of rows (the register form, the
    pre-activation kept too), a bias and a residual add at edge sizes (the memory form)."""
    limn.set_device("numpy")
    rng = np.random.default_rng(0)

    def t(*shape: int) -> Tensor:
        return Tensor(rng.standard_normal(shape).astype(np.float32))

    x, w, bias = t(2, 24, 40), t(300, 40), t(300)
    h = x @ w.T + bias  # (B, T, C) @ (C, N) -> (B, T, N)
    a, b, res = t(20, 40), t(40, 300), t(20, 300)
    return list(ir(h, h.gelu(), a @ b + bias, res + a @ b).kernels)


SETS = {
    "corpus": corpus_kernels,
    "gpt step": gpt_step_kernels,
    "matmul epilogues": epilogue_kernels,
}


# ---- the loops of the C ----


@dataclass
class ForLoop:
    """One `for` statement of a kernel: its text, the loop around it, and where it is, in the kernel and in
    the translation unit."""

    kernel: str  # the kernel's C source
    text: str  # the statement, from `for` to the end of its body
    line: int  # its first line in the kernel
    first: int  # its first and last line in the translation unit
    last: int
    parent: ForLoop | None
    innermost: bool = True

    @property
    def head(self) -> str:
        return self.text.split("\n", 1)[0].strip()

    @property
    def var(self) -> str:
        return re.match(r"for \((?:int64_t|int) (\w+)", self.head).group(1)


FOR = re.compile(r"\bfor\s*\(")
IF = re.compile(r"if\s*\(")
ELSE = re.compile(r"\s*else\b")
BOUNDS = re.compile(r"for \((?:int64_t|int) (\w+) = (-?\d+); \1 < (-?\d+); \1(?:\+\+| \+= (\d+))\)")


def _close(s: str, at: int) -> int:
    """The position of the bracket that closes the one at `at`."""
    depth = 0
    for pos in range(at, len(s)):
        if s[pos] in "({[":
            depth += 1
        elif s[pos] in ")}]":
            depth -= 1
            if depth == 0:
                return pos
    raise AssertionError(f"unbalanced C at {s[at : at + 60]!r}")


def _statement_end(s: str, pos: int) -> int:
    """The last position of the C statement that starts at or after `pos`."""
    while s[pos].isspace():
        pos += 1
    if s[pos] == "{":
        return _close(s, pos)
    if m := FOR.match(s, pos):
        return _statement_end(s, _close(s, m.end() - 1) + 1)
    if m := IF.match(s, pos):
        end = _statement_end(s, _close(s, m.end() - 1) + 1)
        if m := ELSE.match(s, end + 1):
            return _statement_end(s, m.end())
        return end
    depth = 0
    while not (s[pos] == ";" and depth == 0):
        if s[pos] in "({[":
            depth += 1
        elif s[pos] in ")}]":
            depth -= 1
        pos += 1
    return pos


def for_loops(kernel: str, first_line: int) -> list[ForLoop]:
    """The `for` statements of a kernel that starts at line `first_line` of the translation unit."""
    s = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), kernel, flags=re.S)  # no comments
    spans = [(m.start(), _statement_end(s, _close(s, m.end() - 1) + 1)) for m in FOR.finditer(s)]
    loops: list[ForLoop] = []
    for start, end in spans:
        around = [k for k, (a, b) in enumerate(spans) if a < start <= b]
        parent = loops[around[-1]] if around else None
        line = s.count("\n", 0, start) + 1
        first = first_line + line - 1
        loops.append(ForLoop(kernel, s[start : end + 1], line, first, first + s.count("\n", start, end), parent))
        if parent is not None:
            parent.innermost = False
    return loops


def extent(loop: ForLoop) -> int | None:
    """How many times a loop with constant bounds runs; None when its bounds are not constants."""
    m = BOUNDS.match(loop.head)
    if m is None:
        return None
    lo, hi, step = int(m.group(2)), int(m.group(3)), int(m.group(4) or 1)
    return max(0, -(-(hi - lo) // step))


def too_short(loop: ForLoop, isa: c_isa.ISA) -> bool:
    """Fewer iterations than two vectors of its values: one vector and a tail at most."""
    lanes = isa.vector_bytes // (8 if re.search(r"\bdouble\b", loop.text) else 4)
    n = extent(loop)
    return n is not None and n < 2 * lanes


# ---- what gcc says ----


@dataclass
class Report:
    """gcc's -fopt-info lines ('optimized: ...', 'missed: ...') for one translation unit, by line."""

    said: dict[int, list[str]]

    @classmethod
    def parse(cls, text: str, source: str) -> Report:
        said: dict[int, list[str]] = {}
        for line in text.splitlines():
            m = re.match(rf"{re.escape(source)}:(\d+):\d+: (optimized|missed): (.*)", line)
            if m:
                said.setdefault(int(m.group(1)), []).append(f"{m.group(2)}: {m.group(3)}")
        return cls(said)

    def at(self, line: int) -> list[str]:
        return self.said.get(line, [])

    def outcome(self, loop: ForLoop) -> str:
        """What became of a loop that is not too short: one of PASSES, or 'not vectorized'."""
        words = self.at(loop.first)
        inside = [w for line in range(loop.first, loop.last + 1) for w in self.at(line)]
        if any("loop vectorized" in w for w in words):
            return "vectorized"
        around = [loop]
        while around[-1].parent is not None:
            around.append(around[-1].parent)
        if any("library calls" in w for outer in around for w in self.at(outer.first)):
            return "library call"  # a fill or a copy that gcc made a memset or memcpy, here or around it
        if re.fullmatch(r"for \([^;]*;[^;]*;[^)]*\) memcpy\([^;]*\);", loop.text):
            return "library call"  # a matmul tile packs its panel row by row
        if "limn_vec_" in loop.text or "LIMN_VEC_FMA" in loop.text:
            return "vector types"  # a matmul tile's loops over its vectors
        if re.search(r"\blimn_(tile_\w+|matmul_\w+_(panel|sweep))\(", loop.text):
            return "tile calls"  # a loop over panels or tiles: each a call of the packing or the fold (kernels/)
        if not inside:
            return "removed"  # dead code: a partial panel's packing where every panel is full
        if any("completely unrolled" in w for w in words):
            if any("basic block part vectorized" in w for w in inside):
                return "unrolled into vectorized code"
            if loop.parent is not None and self.outcome(loop.parent) in VECTORIZED:
                return "unrolled into vectorized code"
            n = extent(loop)
            if n is not None and n <= 16:
                return "unrolled"  # gcc peels loops of up to 16 iterations before it vectorizes: no loop left
        return "not vectorized"


VECTORIZED = ("vectorized", "unrolled into vectorized code")
PASSES = (*VECTORIZED, "library call", "vector types", "tile calls", "removed", "unrolled")


# ---- the loops that stay scalar ----


@dataclass(frozen=True)
class Allowance:
    """A kind of loop that stays scalar, recognised by its C and, where given, by what gcc says of it."""

    name: str
    pattern: str  # searched in the loop's statement, line by line; {var} is the loop's variable
    reason: str
    gcc_says: str = ""  # words gcc's report for the loop must contain
    isas: tuple[str, ...] = ISAS  # the targets where it stays scalar

    def covers(self, loop: ForLoop, words: list[str], isa: c_isa.ISA) -> bool:
        if isa not in [c_isa.BY_NAME[name] for name in self.isas]:
            return False
        if self.gcc_says and not any(self.gcc_says in w for w in words):
            return False
        return re.search(self.pattern.replace("{var}", re.escape(loop.var)), loop.text, re.MULTILINE) is not None


ALLOWED = (
    Allowance(
        "an in-order float fold",
        r"^\s*(?P<t>acc\w*|total) = (\((?P=t) [+*] |fmaf?\([^;]*\b(?P=t)\)|\(\((?P=t) != (?P=t) \|\| )",
        "a float total adds (or maxes) its values in order, which is what makes the answer the same bits on "
        "every device and thread count; vectorizing the loop would regroup the rounding. c_chunk vectorizes "
        "the values of such a fold, and c_jam runs several cells' chains side by side",
    ),
    Allowance(
        "a scatter",
        r"^\s*\w+\[[^\]]*\(int64_t\)v\d+[^\]]*\] = ",
        "a scatter's adds land where its indices say, and two may land on one cell: they keep their order",
    ),
    Allowance(
        "a data-dependent gather",
        r"= \w+\[[^\]]*\(int64_t\)v\d+[^\]]*\];",
        "each load's address is a value just loaded, so consecutive iterations read scattered cells",
    ),
    Allowance(
        "a matmul tile's packing",
        r"\b(apack|bpack|panel)\[[^=;]*\] =\s",
        "a tile copies a's rows and b's columns into contiguous panels, once per block of r: where the copy "
        "reads across rows, or stops at a partial panel's edge, its loads are strided or masked (c_matmul)",
    ),
    Allowance(
        "a transposing copy",
        r"= \w+\[[^\]]*\(int64_t\){var}\*\d+[^\]]*\];",
        "consecutive iterations read cells a row apart (a permute that moves the stride-1 axis) and gcc's "
        "cost model declines the strided loads; a tiled transpose would vectorize it (the loop order is "
        "codegen's)",
        gcc_says="couldn't vectorize loop",
    ),
)


def allowance(loop: ForLoop, report: Report, isa: c_isa.ISA) -> Allowance | None:
    """The first allowance that covers a loop gcc did not vectorize for `isa`, or None."""
    return next((a for a in ALLOWED if a.covers(loop, report.at(loop.first), isa)), None)


# ---- compiling each set for each target ----

# what gcc is asked to say; -fno-ipa-icf keeps two kernels that compile alike from being folded into one, so
# each is optimized, and reported, on its own
REPORT_FLAGS = ["-fopt-info-vec-all", "-fopt-info-loop-optimized", "-fno-ipa-icf"]


@dataclass
class Compiled:
    """One set of kernels rendered and compiled for one target: its innermost loops and gcc's report."""

    isa: c_isa.ISA
    loops: list[ForLoop]  # the innermost loops long enough to vectorize
    short: int  # how many innermost loops were too short
    report: Report
    command: str

    def verdicts(self) -> list[tuple[ForLoop, str]]:
        """Each loop with its outcome, or 'allowed: NAME', or 'not vectorized'."""
        out = []
        for loop in self.loops:
            verdict = self.report.outcome(loop)
            if verdict not in PASSES and (allowed := allowance(loop, self.report, self.isa)) is not None:
                verdict = f"allowed: {allowed.name}"
            out.append((loop, verdict))
        return out

    def tally(self) -> Counter:
        return Counter({"too short": self.short}) + Counter(verdict for _, verdict in self.verdicts())


def translation_unit(kernels: list[KernelIR], device: CDevice) -> tuple[str, list[ForLoop], int]:
    """The prelude and every distinct kernel's C with a loop long enough to vectorize, as compile_batch joins
    them; those loops; and how many innermost loops were too short."""
    unit, loops, short = PRELUDE + VECTOR_PRELUDE, [], 0
    for source in dict.fromkeys(device.render(k) for k in kernels if k.custom is None):
        innermost = [loop for loop in for_loops(source, 1) if loop.innermost]
        long_enough = [loop for loop in innermost if not too_short(loop, device.options.isa)]
        short += len(innermost) - len(long_enough)
        if long_enough:
            unit += "\n"
            loops += [loop for loop in for_loops(source, unit.count("\n") + 1) if loop.innermost]
            unit += source
    return unit, [loop for loop in loops if not too_short(loop, device.options.isa)], short


@pytest.fixture(scope="module")
def compiled() -> dict[tuple[str, str], Compiled]:
    """Every set for every target: one cc run each, side by side."""
    kernels = {name: build() for name, build in SETS.items()}
    folder = Path(tempfile.mkdtemp(prefix="limn-vectorization-"))
    running = {}
    try:
        for isa_name in ISAS:
            device = CDevice(march=isa_name)
            flags = [f for f in device.toolchain.flags if f != "-shared"]
            for name, ks in kernels.items():
                unit, loops, short = translation_unit(ks, device)
                path = folder / f"{name.replace(' ', '_')}-{isa_name}.c"
                path.write_text(unit)
                cmd = [device.toolchain.cc, *flags, *REPORT_FLAGS, "-c", str(path), "-o", str(path.with_suffix(".o"))]
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                running[name, isa_name] = (proc, device.options.isa, loops, short, path, cmd)
        out = {}
        for key, (proc, isa, loops, short, path, cmd) in running.items():
            text, _ = proc.communicate()
            assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{text[-4000:]}"
            out[key] = Compiled(isa, loops, short, Report.parse(text, str(path)), " ".join(cmd))
        return out
    finally:
        for proc, *_ in running.values():
            proc.kill()
        shutil.rmtree(folder, ignore_errors=True)


# ---- the rules ----


def _explain(loop: ForLoop, compiled: Compiled) -> str:
    words = "\n".join(f"    {w}" for w in compiled.report.at(loop.first)) or "    (nothing)"
    return (
        f"line {loop.line} of this kernel, {loop.head}, is not vectorized for {compiled.isa.name}:\n"
        f"{loop.kernel}\ngcc says of it:\n{words}\n"
    )


@pytest.mark.parametrize("isa_name", ISAS)
@pytest.mark.parametrize("set_name", list(SETS))
def test_every_innermost_loop_is_vectorized_or_allowed(compiled, set_name: str, isa_name: str):
    c = compiled[set_name, isa_name]
    failing = [loop for loop, verdict in c.verdicts() if verdict == "not vectorized"]
    assert not failing, (
        f"{len(failing)} innermost loops of the {set_name} kernels are not vectorized for {isa_name} "
        f"(all loops: {dict(c.tally())}); each is shown with gcc's words. Fix the renderer, or, if the loop "
        f"cannot be vectorized without changing a bit of the answer, add an Allowance with the reason.\n"
        f"command: {c.command}\n\n" + "\n".join(_explain(loop, c) for loop in failing[:5])
    )


def test_every_allowance_covers_a_loop_here(compiled):
    # an allowance nothing needs any more is a gap closed: delete it, so the list stays the loops that are left
    used = {verdict.removeprefix("allowed: ") for c in compiled.values() for _, verdict in c.verdicts()}
    unused = [a.name for a in ALLOWED if a.name not in used]
    assert not unused, f"no loop in {list(SETS)} on {ISAS} needs these allowances any more: {unused}"
