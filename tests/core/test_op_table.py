"""Rule: the op table in limn.graph.ops is the source of truth, and every rule table keyed by op covers its group.

Each rule family lives in one table, one row per op: gradients (limn.autograd), numpy kernels
(limn.runtime.numpy_device), the IR interpreter's arithmetic, the C spellings and the reduce folds. A table that
misses an op of its group fails here, naming the op, instead of at the first graph that meets it. The ops a
table leaves out on purpose are listed below with the reason.

The compiler-side tables are being moved (issue 10); each test names where the table lives, so a move
shows up here as one line to update.
"""

from __future__ import annotations

import importlib
import string

import pytest

from limn import autograd, dtypes
from limn.graph.ops import (
    BARRIERS,
    BINARY,
    ELEMENTWISE,
    ESCAPE,
    INDEXED,
    MOVEMENT,
    PRIMITIVES,
    REDUCE,
    SOURCES,
    TERNARY,
    TRANSCENDENTAL,
    UNARY,
    Movement,
    Op,
)
from limn.graph.view import View
from limn.runtime import numpy_device


def test_every_op_is_in_exactly_one_group():
    groups = [SOURCES, MOVEMENT, UNARY, BINARY, TERNARY, REDUCE, INDEXED, BARRIERS, ESCAPE]
    for op in Op:
        homes = [g for g in groups if op in g]
        assert len(homes) == 1, f"{op!r} is in {len(homes)} groups; each op has one place in the table"
    assert PRIMITIVES | ESCAPE == set(Op)
    assert TRANSCENDENTAL <= UNARY


def test_every_movement_names_the_view_method_that_composes_it():
    for kind in Movement:
        assert callable(getattr(View, kind.value, None)), f"{kind!r}: View has no method {kind.value!r}"


# ---- gradients ----

# the ops with no row in GRADIENTS, and why
NO_GRADIENT = {
    Op.BUFFER: "a leaf: the gradient stops there (and lands in .grad when it requires grad)",
    Op.CONST: "a leaf: a constant has no inputs to pass a gradient to",
    Op.ASSIGN: "a write into a buffer: it records no history, so there is nothing to differentiate",
    Op.VIEW: "keyed by the Movement that made the view instead (a pad's gradient is a shrink)",
}


def test_gradients_have_a_row_for_every_op_that_carries_one():
    # and CARRIED: a value computed off the graph that carries a derivative formula
    # (limn.composed.math.derivative.carry)
    expected = (set(Op) - set(NO_GRADIENT)) | set(Movement) | {autograd.CARRIED}
    missing = expected - set(autograd.GRADIENTS)
    extra = set(autograd.GRADIENTS) - expected
    assert not missing, f"autograd.GRADIENTS has no rule for {sorted(map(repr, missing))}"
    assert not extra, f"autograd.GRADIENTS has rows for {sorted(map(repr, extra))}, which NO_GRADIENT says have none"


def test_a_context_for_an_op_without_a_rule_fails_when_it_is_made():
    with pytest.raises(AssertionError, match="no gradient rule"):
        autograd.Context(Op.ASSIGN, (), None)


# ---- the numpy device ----

# what NumpyDevice._eval computes itself instead of through KERNELS, and why
NUMPY_SPECIAL_CASES = {
    Op.BUFFER: "the buffer's own array",
    Op.CONST: "np.full of the value",
    Op.VIEW: "view_array reads the source through the View",
    Op.ASSIGN: "a write that lands after every value of the run is computed (the assign transaction)",
    Op.CUSTOM: "the registered op's numpy reference (limn.graph.custom.run_reference)",
}


def test_numpy_kernels_cover_every_op_the_device_does_not_special_case():
    expected = (ELEMENTWISE | REDUCE | INDEXED | BARRIERS) - set(NUMPY_SPECIAL_CASES)
    assert set(Op) == expected | set(NUMPY_SPECIAL_CASES)
    assert set(numpy_device.KERNELS) == expected, (
        f"numpy_device.KERNELS misses {sorted(map(repr, expected - set(numpy_device.KERNELS)))}, "
        f"and has {sorted(map(repr, set(numpy_device.KERNELS) - expected))} it should not"
    )


# ---- the compiler and the C renderer ----

# An ARITH instruction computes an elementwise op other than CAST (which lowers to its own conversion), or a
# reduce's fold (SUM folds with ADD, MAX with MAX).
FOLDS = {Op.SUM: Op.ADD, Op.MAX: Op.MAX}
ARITH_OPS = (ELEMENTWISE - {Op.CAST}) | set(FOLDS.values())


def _table(module: str, name: str) -> dict:
    """Table `name` of `module`, or a failure that says the table moved."""
    mod = importlib.import_module(module)
    assert hasattr(mod, name), f"{module} has no {name}: the table moved? point this test at its new home"
    return getattr(mod, name)


def test_the_reduce_folds_cover_every_reduce():
    fold = _table("limn.compiler.codegen", "FOLD")
    assert fold == FOLDS, (
        f"limn.compiler.codegen.FOLD is {fold}; every reduce needs its fold op (and this test its row)"
    )
    identity = importlib.import_module("limn.compiler.codegen").identity
    for op in REDUCE:
        for dtype in (dtypes.float32, dtypes.int32):
            assert identity(op, dtype) is not None, f"no identity for {op!r} over {dtype.name}"


def test_the_ir_interpreter_computes_every_arith_op():
    arith = _table("limn.compiler.interpret", "ARITH")
    assert set(arith) == ARITH_OPS, f"the interpreter's ARITH misses {sorted(map(repr, ARITH_OPS - set(arith)))}"


def test_the_c_spellings_cover_every_arith_op_of_their_dtype_family():
    c_ops = _table("limn.compiler.cstyle", "C_OPS")
    c_int_ops = _table("limn.compiler.cstyle", "C_INT_OPS")
    c_bool_ops = _table("limn.compiler.cstyle", "C_BOOL_OPS")
    # ints never meet the float-only unaries (Tensor casts them to float first); bools never meet NEG either
    # (Tensor.neg refuses a bool tensor)
    families = {
        "C_OPS (floats)": (c_ops, ARITH_OPS),
        "C_INT_OPS": (c_int_ops, ARITH_OPS - TRANSCENDENTAL),
        "C_BOOL_OPS": (c_bool_ops, ARITH_OPS - TRANSCENDENTAL - {Op.NEG}),
    }
    for name, (table, expected) in families.items():
        assert set(table) == expected, (
            f"limn.compiler.cstyle.{name} misses {sorted(map(repr, expected - set(table)))} "
            f"and has {sorted(map(repr, set(table) - expected))} beyond its family"
        )


def test_the_c_float_spellings_name_only_math_functions_c_provides():
    c_ops = _table("limn.compiler.cstyle", "C_OPS")
    math_funcs = _table("limn.c.prelude", "MATH_FUNCS")  # C's own: the C-style names with its exp and log
    for op, template in c_ops.items():
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f}
        for ctype, names in math_funcs.items():
            unknown = fields - set("abc") - set(names)
            assert not unknown, f"C_OPS[{op!r}] uses {sorted(unknown)}, which MATH_FUNCS[{ctype!r}] does not spell"
