"""Register-tiled C for nests that read as a matmul, bit-identical to the plain nest.

The plain nest for out[i, j] += a[i, r] * b[r, j] walks i, r, j and folds into memory. The tiled form
keeps an 8 x (2 vectors) patch of output cells in local accumulators, copies the column panel of b it
needs into a contiguous per-thread buffer, and walks r in the same order, so every cell sees the same
fma sequence from the same identity: only where operands are read from changes, never the numbers.
Column panels go to the OpenMP team; edges that do not fill a whole tile use the scalar fold.
Pipeline: IR -> C source (c_source.py, which calls this for matching nests) -> cc.
"""

from __future__ import annotations

from dataclasses import dataclass

from limn import dtypes
from limn.codegen import Accum, Arith, EndLoop, Index, Instr, KernelIR, LoadI, Loop
from limn.ops import Op

ROWS = 8  # output rows per tile
VECTORS = 2  # vectors of output columns per tile row


@dataclass(frozen=True)
class Matmul:
    """The pieces of a matched nest: batch loops, the i / r / j loops, and each buffer's strides."""

    batch: tuple[Loop, ...]
    i: Loop
    r: Loop
    j: Loop
    a: LoadI  # indexed by batch, i, r
    b: LoadI  # indexed by batch, r, and j with stride 1
    out: Accum  # indexed by batch, i, and j with stride 1
    ctype: str


def _coef(index: Index, var: str) -> int:
    return sum(c for v, c in index.terms if v == var)


def _vars(index: Index) -> set[str]:
    return {v for v, _ in index.terms}


def match_matmul(nest: list[Instr], kernel: KernelIR) -> Matmul | None:
    """The Matmul a nest is, or None. It must be exactly: non-reduce batch loops, then LOOP i, LOOP r
    (reduce), LOOP j, two unmasked float loads, their MUL, and an ADD into out[..] with j stride 1."""
    loops = [ins for ins in nest if isinstance(ins, Loop)]
    if len(loops) < 3:
        return None
    *batch, i, r, j = loops
    head = len(loops)
    body, tail = nest[head:-head], nest[-head:]
    if any(b.reduce for b in batch) or i.reduce or not r.reduce or j.reduce:
        return None
    if nest[:head] != loops or not all(isinstance(t, EndLoop) for t in tail) or len(body) != 4:
        return None
    la, lb, mul, acc = body
    if not (isinstance(la, LoadI) and isinstance(lb, LoadI) and isinstance(mul, Arith) and isinstance(acc, Accum)):
        return None
    if mul.op is not Op.MUL or acc.op is not Op.ADD or acc.index is None or acc.src != mul.dst:
        return None
    if set(mul.srcs) != {la.dst, lb.dst} or la.valid or lb.valid:
        return None
    dtype = mul.dtype
    if dtype not in (dtypes.float32, dtypes.float64) or la.dtype != dtype or lb.dtype != dtype:
        return None
    out_dtype = {b.name: b.dtype for b in kernel.outputs}.get(acc.target)
    if out_dtype != dtype:
        return None
    if _coef(la.index, j.var) and not _coef(lb.index, j.var):
        la, lb = lb, la
    batch_vars = {b.var for b in batch}
    if _vars(la.index) - batch_vars - {i.var, r.var}:
        return None
    if _vars(lb.index) - batch_vars - {r.var, j.var} or _coef(lb.index, j.var) != 1:
        return None
    if _vars(acc.index) - batch_vars - {i.var, j.var} or _coef(acc.index, j.var) != 1:
        return None
    if la.buf == acc.target or lb.buf == acc.target:
        return None  # an in-place write would let a tile read cells it already wrote
    ctype = "double" if dtype == dtypes.float64 else "float"
    return Matmul(tuple(batch), i, r, j, la, lb, acc, ctype)


def _offset(index: Index, batch: tuple[Loop, ...]) -> str:
    """The part of an index that depends only on the batch loops (and the constant)."""
    parts = [f"(int64_t){v}*{c}" for v, c in index.terms if v in {b.var for b in batch}]
    parts.append(str(index.const))
    return " + ".join(parts)


def render_tiled(m: Matmul, renderer, depth: int) -> list[str]:
    """C lines for the tiled nest (see the module docstring)."""
    t, threads = m.ctype, renderer.options.threads
    fma = "fma" if t == "double" else "fmaf"
    vec = f"limn_vec_{t}"
    width = f"LIMN_VEC_{t.upper()}"
    ni, nr, nj = m.i.extent, m.r.extent, m.j.extent
    a_i, a_r = _coef(m.a.index, m.i.var), _coef(m.a.index, m.r.var)
    b_r = _coef(m.b.index, m.r.var)
    o_i = _coef(m.out.index, m.i.var)
    a, b, out = m.a.buf, m.b.buf, m.out.target
    i, r, j = m.i.var, m.r.var, m.j.var
    tj = f"({VECTORS} * {width})"
    lines = [
        f"/* matmul tile: {ROWS} rows x {VECTORS} vectors of cells in registers; {r} walked in order */",
        "{",
    ]
    work = ni * nj * nr
    for bl in m.batch:
        work *= bl.extent
    if threads > 1 and work >= renderer.options.parallel_work:
        lines.append(f"#pragma omp parallel num_threads({threads})")
    else:
        threads = 1
    lines += [
        "{",
        f"{t}* panel = ({t}*)malloc(sizeof({t}) * {nr} * {tj}); /* b's columns [jt, jt + TJ), row by row */",
    ]
    loops = [(bl.var, bl.extent, 1) for bl in m.batch] + [("jt", nj, tj)]
    if threads > 1:
        clause = f" collapse({len(loops)})" if len(loops) > 1 else ""
        lines.append(f"#pragma omp for{clause} schedule(static)")
    for var, extent, step in loops:
        inc = f"{var}++" if step == 1 else f"{var} += {step}"
        lines.append(f"for (int64_t {var} = 0; {var} < {extent}; {inc}) {{")
    a0, b0, o0 = _offset(m.a.index, m.batch), _offset(m.b.index, m.batch), _offset(m.out.index, m.batch)
    lines += [
        f"const {t}* bb = {b} + {b0};",
        f"const int full_cols = jt + {tj} <= {nj} && panel != 0;",
        f"if (full_cols) for (int64_t {r} = 0; {r} < {nr}; {r}++)"
        f" memcpy(panel + {r} * {tj}, bb + (int64_t){r}*{b_r} + jt, sizeof({t}) * {tj});",
        f"for (int64_t it = 0; it < {ni}; it += {ROWS}) {{",
        f"    if (full_cols && it + {ROWS} <= {ni}) {{",
        f"        {vec} acc[{ROWS}][{VECTORS}];",
        f"        for (int ii = 0; ii < {ROWS}; ii++) for (int v = 0; v < {VECTORS}; v++) acc[ii][v] = ({vec}){{0}};",
        f"        for (int64_t {r} = 0; {r} < {nr}; {r}++) {{",
        f"            {vec} row[{VECTORS}];",
        f"            for (int v = 0; v < {VECTORS}; v++) memcpy(&row[v], panel + {r} * {tj} + v * {width}, sizeof row[v]);",
        f"            for (int ii = 0; ii < {ROWS}; ii++) {{",
        f"                const {t} x = {a}[{a0} + (it + ii) * (int64_t){a_i} + {r} * (int64_t){a_r}];",
        f"                for (int v = 0; v < {VECTORS}; v++) acc[ii][v] = LIMN_VEC_FMA(x, row[v], acc[ii][v]);",
        "            }",
        "        }",
        f"        for (int ii = 0; ii < {ROWS}; ii++) for (int v = 0; v < {VECTORS}; v++)",
        f"            memcpy({out} + {o0} + (it + ii) * (int64_t){o_i} + jt + v * {width}, &acc[ii][v], sizeof acc[ii][v]);",
        "    } else { /* an edge tile: the plain fold, cell by cell */",
        f"        for (int64_t {i} = it; {i} < it + {ROWS} && {i} < {ni}; {i}++)",
        f"        for (int64_t {j} = jt; {j} < jt + {tj} && {j} < {nj}; {j}++) {{",
        f"            {t} total = 0;",
        f"            for (int64_t {r} = 0; {r} < {nr}; {r}++)",
        f"                total = {fma}({a}[{a0} + {i} * (int64_t){a_i} + {r} * (int64_t){a_r}], bb[(int64_t){r}*{b_r} + {j}], total);",
        f"            {out}[{o0} + {i} * (int64_t){o_i} + {j}] = total;",
        "        }",
        "    }",
        "}",
    ]
    lines += ["}"] * len(loops)
    lines += ["free(panel);", "}", "}"]
    pad = "    " * depth
    return [line if line.startswith("#pragma") else pad + line for line in lines]


# Vector types for the tiles, sized to the widest the target has. LIMN_VEC_FMA must be a true fused
# multiply-add in every lane, or a tile would round differently from the scalar fmaf fold: x86 gets the
# FMA intrinsics, anything else a per-lane fma loop that the compiler may vectorize.
VECTOR_PRELUDE = r"""
#include <stdlib.h>
#if defined(__AVX512F__)
#define LIMN_VEC_BYTES 64
#elif defined(__AVX__)
#define LIMN_VEC_BYTES 32
#else
#define LIMN_VEC_BYTES 16
#endif
#define LIMN_VEC_FLOAT (LIMN_VEC_BYTES / 4)
#define LIMN_VEC_DOUBLE (LIMN_VEC_BYTES / 8)
typedef float limn_vec_float __attribute__((vector_size(LIMN_VEC_BYTES)));
typedef double limn_vec_double __attribute__((vector_size(LIMN_VEC_BYTES)));
#if defined(__AVX512F__)
#include <immintrin.h>
static inline limn_vec_float limn_vfma_f(float x, limn_vec_float b, limn_vec_float c) {
    return (limn_vec_float)_mm512_fmadd_ps(_mm512_set1_ps(x), (__m512)b, (__m512)c);
}
static inline limn_vec_double limn_vfma_d(double x, limn_vec_double b, limn_vec_double c) {
    return (limn_vec_double)_mm512_fmadd_pd(_mm512_set1_pd(x), (__m512d)b, (__m512d)c);
}
#elif defined(__AVX__) && defined(__FMA__)
#include <immintrin.h>
static inline limn_vec_float limn_vfma_f(float x, limn_vec_float b, limn_vec_float c) {
    return (limn_vec_float)_mm256_fmadd_ps(_mm256_set1_ps(x), (__m256)b, (__m256)c);
}
static inline limn_vec_double limn_vfma_d(double x, limn_vec_double b, limn_vec_double c) {
    return (limn_vec_double)_mm256_fmadd_pd(_mm256_set1_pd(x), (__m256d)b, (__m256d)c);
}
#else
static inline limn_vec_float limn_vfma_f(float x, limn_vec_float b, limn_vec_float c) {
    for (int k = 0; k < LIMN_VEC_FLOAT; k++) c[k] = fmaf(x, b[k], c[k]);
    return c;
}
static inline limn_vec_double limn_vfma_d(double x, limn_vec_double b, limn_vec_double c) {
    for (int k = 0; k < LIMN_VEC_DOUBLE; k++) c[k] = fma(x, b[k], c[k]);
    return c;
}
#endif
#define LIMN_VEC_FMA(x, b, c) _Generic((x), float: limn_vfma_f, double: limn_vfma_d)(x, b, c)
"""
