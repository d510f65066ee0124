"""Rule: a C-family language is the C-style base (limn.compiler.cstyle) with single entries replaced, and replacing one
entry changes the rendered source only where that entry is spelled. The oracle is the base's own rendering of
the same kernels, line by line (the function name is a hash of the rest, so it is compared as NAME).

This is how limn-cuda's renderer is meant to be written: the way tinygrad's CUDARenderer overrides
CStyleLanguage, naming what CUDA spells differently and nothing else.
"""

import re

import numpy as np

import limn
from limn import Tensor
from limn.c.source import CRenderer
from limn.compiler.codegen import ir
from limn.compiler.cstyle import C_BOOL_OPS, C_INT_OPS, C_OPS, MATH_FUNCS, TYPES, CStyle, CType
from limn.compiler.half_widths import HALF_WIDTHS
from limn.compiler.ir import KernelIR
from limn.graph.ops import Op


def kernels(dtype=limn.float32) -> tuple[KernelIR, ...]:
    """A fold (exp, mul, max into a register) over an input of `dtype`, and for a half width the cast back."""
    x = Tensor(np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8))
    y = Tensor(np.full((4, 8), 0.5), dtype=dtype)
    return ir((x.exp() * y).max(axis=1).cast(dtype)).kernels


def render(language: CStyle, program: tuple[KernelIR, ...]) -> list[str]:
    lines = []
    for kernel in program:
        _, source = language.render(kernel)
        lines += re.sub(r"limn_\w+_[0-9a-f]{16}", "NAME", source).splitlines()
    return lines


def changed(base: CStyle, language: CStyle, program: tuple[KernelIR, ...]) -> list[tuple[str, str]]:
    """The (base, language) pairs of lines that differ, unindented; all other lines must be the same."""
    ours, theirs = render(base, program), render(language, program)
    assert len(ours) == len(theirs), "an override of one spelling added or removed lines"
    return [(a.strip(), b.strip()) for a, b in zip(ours, theirs) if a != b]


def test_overriding_one_op_spelling_changes_only_the_lines_that_spell_it():
    class FmaxMax(CStyle):
        float_ops = {**CStyle.float_ops, Op.MAX: "fmaxf({a}, {b})"}

    diff = changed(CStyle(), FmaxMax(), kernels())
    assert diff, "the kernel folds with MAX, so its spelling must show"
    for base_line, line in diff:
        assert "fmaxf(acc0, v4)" in line and "fmaxf" not in base_line, (base_line, line)
        assert line.replace("fmaxf(acc0, v4)", "((acc0 != acc0 || acc0 > v4) ? acc0 : v4)") == base_line


def test_overriding_one_math_function_changes_only_its_calls():
    class FastExp(CStyle):
        math_funcs = {**MATH_FUNCS, "float": {**MATH_FUNCS["float"], "exp": "__expf"}}

    diff = changed(CStyle(), FastExp(), kernels())
    assert diff == [("const float v2 = expf(v1);", "const float v2 = __expf(v1);")]


def test_overriding_the_signature_spellings_changes_only_the_signature():
    class KernelSignature(CStyle):
        kernel_prefix = 'extern "C" __global__ '
        restrict = "__restrict__"

    diff = changed(CStyle(), KernelSignature(), kernels())
    assert [line for _, line in diff] == [
        'extern "C" __global__ void NAME(const float* __restrict__ in0, const float* __restrict__ in1, '
        "float* __restrict__ out) {"
    ]


def test_a_half_width_is_one_row_and_its_helpers_appear_only_where_it_is_loaded_stored_or_rounded():
    def with_float16(widen: str, narrow: str, round_: str) -> CStyle:
        class Language(CStyle):
            type_map = {**TYPES, limn.float16: CType("uint16_t", "float", widen, narrow, round_)}

        return Language()

    program = kernels(limn.float16)
    diff = changed(with_float16("w", "n", "r"), with_float16("widen", "narrow", "round"), program)
    assert diff == [
        (
            "const float v3 = w(in1[(int64_t)i0*8 + (int64_t)r1]);",
            "const float v3 = widen(in1[(int64_t)i0*8 + (int64_t)r1]);",
        ),
        ("const float v1 = r((float)(v0));", "const float v1 = round((float)(v0));"),
        ("out[(int64_t)i0] = n(v1);", "out[(int64_t)i0] = narrow(v1);"),
    ]


def test_the_c_renderer_overrides_only_what_is_cs_own():
    # C's own: the half widths' and float32 exp/log helpers of its prelude, WHERE as a blend of bits (the
    # pick helpers, c_prelude.SELECTS), and a body with its rewrites
    overrides = {name for name in vars(CRenderer) if name in vars(CStyle) and not name.startswith("__")}
    assert overrides == {"type_map", "math_funcs", "body", "float_ops", "int_ops", "bool_ops"}
    assert CRenderer.type_map == {**TYPES, **HALF_WIDTHS}
    for table, base in [(CRenderer.float_ops, C_OPS), (CRenderer.int_ops, C_INT_OPS), (CRenderer.bool_ops, C_BOOL_OPS)]:
        assert {op for op in base if table[op] != base[op]} == {Op.WHERE}, "only WHERE differs from the base"
    changed_funcs = {
        (ctype, name)
        for ctype, names in CRenderer.math_funcs.items()
        for name, spelling in names.items()
        if MATH_FUNCS[ctype].get(name) != spelling
    }
    assert changed_funcs == {("float", "exp"), ("float", "log"), ("float", "pick"), ("double", "pick")}
