"""The C rendering of the loop-nest IR: one KernelIR in, one readable C function out.

CRenderer is the C-style base (limn.compiler.cstyle) plus C's own entries (the prelude's half-width and float32 math
helpers) and rewrites that change no bit of any result, each in a module of limn/c/rewrites/. Which of them a
loop takes is one table, limn.c.rewrites.table: a row per rewrite (tiles, threads, split_epilogue, jam,
pad_split, hoist, chunk) saying when it applies and what it keeps. Options turns each one off.
Pipeline: tensor -> graph -> schedule -> IR -> **C source** -> cc -> ctypes.
"""

from __future__ import annotations

from dataclasses import dataclass

from limn.c import isa as c_isa
from limn.c.prelude import MATH_FUNCS, SELECTS
from limn.c.rewrites.chunk import render_chunked
from limn.c.rewrites.jam import render_jammed
from limn.c.rewrites.matmul import epilogue_nest, fill_overwritten_by_tile, render_tiled
from limn.c.rewrites.pad_split import whole
from limn.c.rewrites.table import Block, plan
from limn.c.rewrites.threads import Pragma
from limn.compiler.cstyle import TYPES, CStyle, Decided
from limn.compiler.half_widths import HALF_WIDTHS
from limn.compiler.ir import Instr, KernelIR, Loop, is_scatter, top_level


@dataclass
class Options:
    """Which rewrites the renderer makes. Each is on by default and off only where a test holds it to the
    plain nest; nests with fewer than `parallel_work` iterations stay serial."""

    threads: int = 1  # the OpenMP team size; 1 emits no pragmas
    split_pads: bool = True
    tile_matmuls: bool = True
    chunk_folds: bool = True
    jam_folds: bool = True
    parallel_work: int = 32768  # a nest with fewer loop iterations than this runs serially
    hoist_invariants: bool = True
    split_epilogues: bool = True  # a register fold's loop, then its epilogue's loop (fold_then_epilogue)
    isa: c_isa.ISA = c_isa.TABLE[0]  # the target's row of the ISA table: tile, chunk and jam sizes


class CRenderer(CStyle):
    """Renders KernelIR as a C function `void NAME(const T* restrict in0, ..., T* restrict out)`, its nests
    rewritten as Options allows. The rewrite modules emit through `emit`, `emit_seq`, `loop_block` and
    `straight`."""

    type_map = {**TYPES, **HALF_WIDTHS}
    math_funcs = MATH_FUNCS
    float_ops = SELECTS["float"]
    int_ops = SELECTS["int"]
    bool_ops = SELECTS["bool"]

    def __init__(self, options: Options) -> None:
        self.options = options

    def body(self, kernel: KernelIR) -> str:
        """The function's body: each top-level nest (or straight-line instruction) in turn."""
        self.begin(kernel)
        self.lines: list[str] = []  # each a line, or several joined by newlines (rewrites/jam's copies)
        nests = [piece for _, piece in top_level(kernel.body)]
        looped = False  # a loop nest was emitted: the next one starts behind a barrier
        for k, nest in enumerate(nests):
            following = nests[k + 1] if k + 1 < len(nests) else None
            if self.options.tile_matmuls and following and fill_overwritten_by_tile(nest, following, kernel):
                continue  # the tiled matmul after it writes every cell this fill would
            if isinstance(nest[0], Loop):
                if looped:
                    self.barrier(depth=1)
                looped = True
                self.nest(nest, depth=1)
            else:
                self.straight(nest[0], depth=1, decided={})
        return "\n".join(self.lines) + "\n" if self.lines else ""

    def nest(self, nest: list[Instr], depth: int) -> None:
        """A top-level loop nest: tiled if it reads as a matmul, else emitted with its team's pragma."""
        block = Block(nest, top=True)
        m = plan(self, "tiles", block)
        if m is None:
            self.loop_block(nest, depth, {}, plan(self, "threads", block), collapsing=0)
            return
        self.lines.extend(render_tiled(m, self, depth))
        if m.epilogue:  # the register form's epilogue: a nest of its own, after the tiles
            after = epilogue_nest(m)
            self.barrier(depth)
            self.loop_block(after, depth, {}, plan(self, "threads", Block(after, top=True)), collapsing=0)

    def loop_block(
        self,
        block: list[Instr],
        depth: int,
        decided: Decided,
        pragma: Pragma | None,
        collapsing: int,
        chunk: bool = True,
    ) -> None:
        """Emits block = [LOOP, ..., ENDLOOP]. `decided` holds the range checks a pad split already decided,
        `pragma` the team a top-level nest opens, and `collapsing` counts the loops below an enclosing
        collapse clause still owes. `chunk` False keeps a fold plain that rewrites/chunk would chunk
        (rewrites/jam renders one copy of a body whose copies, side by side, are no single fold)."""
        b = Block(block, pragma, collapsing, chunk)
        loop, inner = b.loop, b.inner
        parts = plan(self, "split_epilogue", b)
        if parts is not None:  # two loops over the cells: the fold (jammed, say), then its epilogue (vectorized)
            fold, epilogue = parts
            self.loop_block([loop, *fold, block[-1]], depth, decided, pragma, collapsing, chunk)
            self.barrier(depth)
            self.loop_block([loop, *epilogue, block[-1]], depth, decided, pragma, collapsing, chunk)
            return
        if plan(self, "jam", b):
            render_jammed(self, loop, inner, depth, decided, pragma)
            return
        pieces = plan(self, "pad_split", b) or whole(loop)
        independent = b.innermost and not any(is_scatter(ins) for ins in inner)
        chunked = plan(self, "chunk", b)
        hoisted = plan(self, "hoist", b)
        if hoisted is not None:
            before, inner = hoisted
            for ins in before:
                self.straight(ins, depth, decided)
        collapse_here = b.collapse_here
        for piece in pieces:
            if piece.lo >= piece.hi:
                continue
            here = {**decided, **piece.decided}
            if chunked:
                render_chunked(self, loop, inner, piece.lo, piece.hi, depth, here)
                continue
            if pragma is not None:
                self.emit(pragma.line(simd=independent and collapse_here == 1), depth, raw=True)
            elif independent and collapsing == 0:
                self.emit("LIMN_IVDEP", depth)
            self.emit(self.loop_head(loop.var, piece.lo, piece.hi), depth)
            self.emit_seq(inner, depth + 1, here, max(collapse_here - 1, 0))
            self.emit("}", depth)

    def emit_seq(self, seq: list[Instr], depth: int, decided: Decided, collapsing: int) -> None:
        """Emits a sequence of instructions, each loop in it as a block."""
        for _, piece in top_level(seq):
            if isinstance(piece[0], Loop):
                self.loop_block(piece, depth, decided, None, collapsing)
            else:
                self.straight(piece[0], depth, decided)

    def barrier(self, depth: int) -> None:
        """Keeps the compiler from moving memory accesses from one nest into the next (c/prelude.py)."""
        self.emit("LIMN_NEST_BARRIER;", depth)

    def emit(self, text: str, depth: int, raw: bool = False) -> None:
        """One line, indented four spaces per depth (a `raw` line, a pragma, starts at column 0)."""
        self.lines.append(("" if raw else "    " * depth) + text)

    def straight(self, ins: Instr, depth: int, decided: Decided) -> None:
        """One non-loop instruction as its C statement (a MUL fused into the fma after it emits nothing)."""
        text = self.statement(ins, decided)
        if text is not None:
            self.emit(text, depth)
