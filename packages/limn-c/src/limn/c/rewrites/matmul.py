"""Matmul tiles: register-tiled C for nests that read as a matmul, bit-identical to the plain nest.

A patch of output cells (rows x vectors, sized for the target by limn.c.isa) stays in local accumulators while r
is walked in order over a packed, contiguous panel of b (R_BLOCK rows at a time, totals stored and reloaded
exactly), so each cell sees the plain nest's fma sequence from the same identity. That fold and the packed
matmul driving it are C texts (limn/c/kernels/tile.c, matmul.c) taking the sizes and strides as arguments,
which each kernel's source carries before it, guarded: a unit compiles one copy, not one per kernel. A kernel's
epilogue (limn.compiler.epilogue) runs after the tiles (epilogue_nest). Held to the plain nest by
tests/c/test_c_corpus.py::test_tiled_matmul_equals_plain_nest_bit_for_bit. Which nests are matmuls is
limn.compiler.matmul_form's rule. Pipeline: IR -> matmul form -> **C tiles** -> cc.
"""

from __future__ import annotations

import re
from dataclasses import replace
from importlib import resources

from limn.compiler.cstyle import TYPES
from limn.compiler.ir import EndLoop, Index, Instr, LoadI, Loop
from limn.compiler.matmul_form import Matmul, coef, fill_overwritten_by_tile, match_matmul

__all__ = ["Matmul", "fill_overwritten_by_tile", "match_matmul", "render_tiled", "VECTOR_PRELUDE"]

R_BLOCK = 512  # reduce steps per panel block: 512 x 32 floats, 64 KiB, stays near the core (L1/L2)


def _offset(index: Index, batch: tuple[Loop, ...]) -> str:
    """The part of an index that depends only on the batch loops (and the constant)."""
    parts = [f"(int64_t){v}*{c}" for v, c in index.terms if v in {b.var for b in batch}]
    parts.append(str(index.const))
    return " + ".join(parts)


def render_tiled(m: Matmul, renderer, depth: int) -> list[str]:
    """C lines for the tiled nest (see the module docstring): per batch and per panel of columns, b's
    panel is packed block by block of r, and every row tile folds that block from its stored totals."""
    rows, vectors = renderer.options.isa.tile_rows, renderer.options.isa.tile_vectors
    m = _batch_as_rows(m)
    if not m.batch and m.i.extent >= rows:
        return render_packed(m, renderer, depth)
    t = TYPES[m.dtype].value
    ni, nr, nj = m.i.extent, m.r.extent, m.j.extent
    a_i, a_r = coef(m.a.index, m.i.var), coef(m.a.index, m.r.var)
    b_r, b_j = coef(m.b.index, m.r.var), coef(m.b.index, m.j.var)
    o_i = coef(m.out_index, m.i.var)
    a, out, r = m.a.buf, m.out, m.r.var
    tj, kc = _panel_width(m, vectors), min(nr, R_BLOCK)
    threads = _team(m, renderer)
    lines = [f"/* matmul tile: {rows} rows x {vectors} vectors of cells in registers; {r} walked in order */", "{"]
    if threads > 1:
        lines.append("#pragma omp parallel")
    lines += [
        "{",
        f"{t}* panel = ({t}*)malloc(sizeof({t}) * {kc} * {tj}); /* b's columns [jt, jt + cols), rows [kb, ke) */",
    ]
    loops = [(bl.var, bl.extent, 1) for bl in m.batch] + [("jt", nj, tj)]
    if threads > 1:
        clause = f" collapse({len(loops)})" if len(loops) > 1 else ""
        lines.append(f"#pragma omp for{clause} schedule(static)")
    for var, extent, step in loops:
        inc = f"{var}++" if step == 1 else f"{var} += {step}"
        lines.append(f"for (int64_t {var} = 0; {var} < {extent}; {inc}) {{")
    a0, b0, o0 = _offset(m.a.index, m.batch), _offset(m.b.index, m.batch), _offset(m.out_index, m.batch)
    b_cell = f"bb[(int64_t){r}*{b_r} + (jt + c)*(int64_t){b_j}]"
    if b_j == 1:  # b's columns are contiguous already: copy each panel row in one go
        pack_full = f"memcpy(panel + ({r} - kb) * {tj}, bb + (int64_t){r}*{b_r} + jt, sizeof({t}) * {tj});"
    else:  # b is read across its rows (say a transposed weight): gather each panel row
        pack_full = f"for (int64_t c = 0; c < {tj}; c++) panel[({r} - kb) * {tj} + c] = {b_cell};"
    out_row = f"{out} + {o0} + it * (int64_t){o_i} + jt"
    a_tile = (f"{a} + {a0} + it * (int64_t){a_i} + kb * (int64_t){a_r}", str(a_i), str(a_r))
    lines += [
        f"const {t}* bb = {m.b.buf} + {b0};",
        f"const int64_t cols = {nj} - jt < {tj} ? {nj} - jt : {tj}; /* the last panel may be partial */",
        "if (panel == 0) { /* no memory for the panel: the plain fold, cell by cell */",
        *_indented(4, _plain_fold(m, f"{a}[{a0}", "bb[0", f"{out}[{o0}", ("0", str(ni)), ("jt", "jt + cols"))),
        "    continue;",
        "}",
        f"for (int64_t kb = 0; kb < {nr}; kb += {kc}) {{ /* a block of r whose panel stays in L1 */",
        f"const int64_t ke = kb + {kc} < {nr} ? kb + {kc} : {nr};",
        f"if (cols == {tj}) for (int64_t {r} = kb; {r} < ke; {r}++) {pack_full}",
        f"else for (int64_t {r} = kb; {r} < ke; {r}++) for (int64_t c = 0; c < {tj}; c++)",
        f"    panel[({r} - kb) * {tj} + c] = c < cols ? {b_cell} : 0; /* zeros past the edge: lanes never stored */",
        f"for (int64_t it = 0; it < {ni}; it += {rows}) {{",
        *_indented(4, _row_tile(m, renderer, ni % rows, f"{ni}", out_row, a_tile)),
        "}",
        "}",
    ]
    lines += ["}"] * len(loops)
    lines += ["free(panel);", "}", "}"]
    pad = "    " * depth
    return [line if line.startswith("#pragma") else pad + line for line in lines]


def _team(m: Matmul, renderer) -> int:
    """The OpenMP team a tiled nest runs on: the renderer's, where the nest's work is worth one; else 1."""
    work = m.i.extent * m.j.extent * m.r.extent
    for bl in m.batch:
        work *= bl.extent
    threads = renderer.options.threads
    return threads if threads > 1 and work >= renderer.options.parallel_work else 1


def _batch_as_rows(m: Matmul) -> Matmul:
    """The matmul with its batch loops folded into i where b does not depend on them and a and out step
    over them as over more rows (x @ w for x of shape (B, T, C): B T rows of one weight), so the packed
    form, which packs each panel of b once, takes it; else m as it is."""
    if not m.batch:
        return m
    a_i, o_i = coef(m.a.index, m.i.var), coef(m.out_index, m.i.var)
    extent = m.i.extent
    folded = sorted(m.batch, key=lambda bl: coef(m.a.index, bl.var))  # innermost first
    for loop in folded:
        if coef(m.b.index, loop.var) != 0:
            return m
        if coef(m.a.index, loop.var) != extent * a_i or coef(m.out_index, loop.var) != extent * o_i:
            return m
        extent *= loop.extent
    batch_vars = {bl.var for bl in m.batch}

    def rows_only(index: Index) -> Index:
        return Index(tuple((v, c) for v, c in index.terms if v not in batch_vars), index.const)

    a = LoadI(m.a.dst, m.a.buf, rows_only(m.a.index), m.a.dtype, m.a.valid)
    i = Loop(m.i.var, extent, m.i.reduce)
    return replace(m, batch=(), i=i, a=a, out_index=rows_only(m.out_index))


def _panel_width(m: Matmul, vectors: int) -> str:
    """The columns one panel (and one tile) spans, as a C constant expression."""
    return f"({vectors} * LIMN_VEC_{TYPES[m.dtype].value.upper()})"


def _row_tile(m: Matmul, renderer, rest: int, ni: str, out_row: str, a: tuple[str, str, str]) -> list[str]:
    """The tile at row `it`: a full one (fast when its panel is full too), or the `rest` rows left at the
    bottom edge. `cols` says how many of the panel's columns are the output's; out_row and a are
    _tile_fold's."""
    rows, vectors = renderer.options.isa.tile_rows, renderer.options.isa.tile_vectors
    lines = [
        f"if (it + {rows} <= {ni} && cols == {_panel_width(m, vectors)}) {{",
        *_indented(4, _tile_fold(m, renderer, out_row, a, rows, vectors, partial=False)),
        f"}} else if (it + {rows} <= {ni}) {{ /* the right edge: a partial panel */",
        *_indented(4, _tile_fold(m, renderer, out_row, a, rows, vectors, partial=True)),
        "}",
    ]
    if rest:
        lines[-1] = "} else { /* the bottom edge: the rows left over */"
        lines += [*_indented(4, _tile_fold(m, renderer, out_row, a, rest, vectors, partial=True)), "}"]
    return lines


def epilogue_nest(m: Matmul) -> list[Instr]:
    """The epilogue as the plain nest runs it after its fold: a nest over the output cells."""
    return [*m.cells, *m.epilogue, *(EndLoop(x.var) for x in reversed(m.cells))]


def _plain_fold(m: Matmul, a: str, b: str, out: str, i_range: tuple[str, str], j_range: tuple[str, str]) -> list[str]:
    """The plain nest's fold for the cells in i_range x j_range (C bounds), each over all of r: what runs
    when a panel could not be allocated. `a`, `b`, `out` open each buffer's subscript at its base."""
    t, i, r, j = TYPES[m.dtype].value, m.i.var, m.r.var, m.j.var
    fma = "fma" if t == "double" else "fmaf"
    a_i, a_r = coef(m.a.index, m.i.var), coef(m.a.index, m.r.var)
    b_r, b_j = coef(m.b.index, m.r.var), coef(m.b.index, m.j.var)
    o_i = coef(m.out_index, m.i.var)
    return [
        f"for (int64_t {i} = {i_range[0]}; {i} < {i_range[1]}; {i}++)",
        f"    for (int64_t {j} = {j_range[0]}; {j} < {j_range[1]}; {j}++) {{",
        f"        {t} total = 0;",
        f"        for (int64_t {r} = 0; {r} < {m.r.extent}; {r}++)",
        f"            total = {fma}({a} + {i} * (int64_t){a_i} + {r} * (int64_t){a_r}],",
        f"                          {b} + (int64_t){r}*{b_r} + {j}*(int64_t){b_j}], total);",
        f"        {out} + {i} * (int64_t){o_i} + {j}] = total;",
        "    }",
    ]


def _tile_fold(
    m: Matmul, renderer, out_row: str, a: tuple[str, str, str], rows: int, vectors: int, partial: bool
) -> list[str]:
    """One rows x vectors tile's fold over the r block [kb, ke): a call of its shape's (tile_function). `out_row`
    is the tile's first output row; `a` is (the tile's a[it, kb], a's step between rows, its step along r)."""
    name = _defined(renderer, *tile_function(TYPES[m.dtype].value, rows, vectors, partial))
    o_i = coef(m.out_index, m.i.var)
    return [f"{name}({out_row}, {o_i}, {a[0]}, {a[1]}, {a[2]}, panel, ke - kb, kb == 0, cols, {rows});"]


def _defined(renderer, name: str, text: str) -> str:
    """`name`, once its C is among the functions the kernel's source defines before it (CStyle.render)."""
    renderer.functions[name] = text
    return name


def _template(name: str) -> str:
    """A C text of limn/c/kernels/ without its opening comment, which documents it for a reader of the file."""
    return resources.files("limn.c").joinpath("kernels", name).read_text(encoding="utf-8").split("*/\n", 1)[1]


def _filled(template: str, name: str, words: dict[str, str]) -> str:
    """The template with each of its capitalized words that `words` names spelled as given, NAME as `name`."""
    words = {**words, "NAME": name, "GUARD": f"{name.upper()}_DEFINED"}
    return re.sub(r"\b[A-Z][A-Z0-9_]*\b", lambda w: words.get(w.group(0), w.group(0)), template)


TILE, MATMUL, VECTOR_PRELUDE = _template("tile.c"), _template("matmul.c"), _template("vectors.c")


def tile_function(t: str, rows: int, vectors: int, partial: bool, packed: bool = False) -> tuple[str, str]:
    """(name, C) of the fold the tiles of one shape call (limn/c/kernels/tile.c). `packed`: the fold the packed
    matmul inlines, a's rows packed (a step of 1 between rows, `rows` along r); else a's steps are arguments."""
    name = f"limn_tile_{t}_{rows}x{vectors}{'_edge' if partial else ''}{'_packed' if packed else ''}"
    lanes = f"LIMN_VEC_{t.upper()}"
    columns = f"cols - v * {lanes} < 0 ? 0 : cols - v * {lanes} > {lanes} ? {lanes} : cols - v * {lanes}"
    words = {"REAL": t, "VEC": f"limn_vec_{t}", "LANES": lanes, "ROWS": str(rows), "VECTORS": str(vectors)}
    words |= {"COLUMNS": columns, "HERE": "here"} if partial else {"COLUMNS": lanes, "HERE": str(rows)}
    if packed:  # inlined into the packed matmul, held once per unit, with a's steps known
        words |= {"AROW": "1", "ASTEP": str(rows), "CALLED": "inline __attribute__((always_inline))"}
    else:  # called per tile by kernels: one copy per unit
        words |= {"AROW": "a_row", "ASTEP": "a_step", "CALLED": "__attribute__((noinline))"}
    return name, _filled(TILE, name, words)


def _indented(spaces: int, lines: list[str]) -> list[str]:
    return [" " * spaces + line for line in lines]


PACKED_COLUMNS = 256  # b packed 256 columns at a time (512 KiB of float32) stays in L2; all of a wide b spilled


def render_packed(m: Matmul, renderer, depth: int) -> list[str]:
    """The tiled nest for an unbatched matmul: a call of the packed matmul of its dtype and tile shape
    (limn/c/kernels/matmul.c), blocked the way BLAS libraries block, which takes the sizes and strides as
    arguments, so one copy of it (and of the folds it calls) serves every such kernel of a unit. Every cell
    sees the plain nest's fmas in its order."""
    t = TYPES[m.dtype].value
    rows, vectors = renderer.options.isa.tile_rows, renderer.options.isa.tile_vectors
    tile = _defined(renderer, *tile_function(t, rows, vectors, partial=False, packed=True))
    edge = _defined(renderer, *tile_function(t, rows, vectors, partial=True, packed=True))
    name = f"limn_matmul_{t}_{rows}x{vectors}"
    words = {"REAL": t, "ROWS": str(rows), "VECTORS": str(vectors), "KC": str(R_BLOCK), "NC": str(PACKED_COLUMNS)}
    words |= {"TILE": tile, "EDGE": edge, "TJ": _panel_width(m, vectors), "FMA": "fma" if t == "double" else "fmaf"}
    words |= {"PANEL": f"{name}_panel", "SWEEP": f"{name}_sweep"}
    _defined(renderer, name, _filled(MATMUL, name, words))
    a, b = m.a.index, m.b.index
    args = [f"{m.out} + {m.out_index.const}", coef(m.out_index, m.i.var)]
    args += [f"{m.a.buf} + {a.const}", coef(a, m.i.var), coef(a, m.r.var), f"{m.b.buf} + {b.const}", coef(b, m.r.var)]
    args += [coef(b, m.j.var), m.i.extent, m.j.extent, m.r.extent, int(_team(m, renderer) > 1)]
    pad = "    " * depth
    return [
        f"{pad}/* matmul tile, blocked: {rows} x {vectors} vectors of cells in registers, packed panels; r in order */",
        f"{pad}{name}({', '.join(map(str, args))});",
    ]
