"""Edge values against torch, on the numpy device and on c: NaN, inf, -0.0 and the int limits meeting
comparisons, reductions, maximum/minimum, clip, relu, powers, var/std; empty axes and 0-d tensors.

Each test states one rule. `agree` runs one expression in limn and in torch from the same inputs and
compares values and gradients with NaN matched to NaN and inf to inf (and signs of zeros where the rule
is about them); a failure prints a standalone reproducer. Where torch raises, limn must raise a typed
error that says what was asked and what to do.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from oracle import agree, literal, same

import limn
from limn import Tensor
from limn.graph.ops import Op, toposort

# torch warns when var's correction reaches n; those are the cases under test
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom:UserWarning")

nan, inf = math.nan, math.inf
F32 = np.finfo(np.float32)


def ops_in(t: Tensor) -> list[Op]:
    return [n.op for n in toposort([t.node])]


SPECIALS = np.array([nan, 1.0, -inf, inf, -0.0, 0.0, 2.0, nan, -1.0], np.float32)
PARTNERS = np.array([nan, nan, -inf, 1.0, 0.0, -0.0, 3.0, 2.0, -inf], np.float32)


# ---- comparisons with NaN follow IEEE (eq False, ne True, le/ge False), as torch ----

COMPARISONS = {"eq": "x == y", "ne": "x != y", "lt": "x < y", "le": "x <= y", "gt": "x > y", "ge": "x >= y"}


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_with_nan_inf_and_signed_zero_follows_ieee_as_in_torch(device: str, op: str) -> None:
    agree(device, COMPARISONS[op], grad=False, x=SPECIALS, y=PARTNERS)


@pytest.mark.parametrize("expr", ["x != x", "x == x", "x >= 1", "x <= 1", "1 <= x", "x == 2.0"])
def test_comparison_of_nan_with_itself_or_a_scalar_follows_ieee_as_in_torch(device: str, expr: str) -> None:
    agree(device, expr, grad=False, x=SPECIALS)


@pytest.mark.parametrize("dtype", ["int32", "int8", "bool"])
def test_int_and_bool_eq_stays_two_cmplts_with_no_nan_test(dtype: str) -> None:
    x = Tensor(np.array([1, 0, 1], dtype))
    assert ops_in(x == x).count(Op.CMPLT) == 2, f"Tensor(np.array([1, 0, 1], {dtype!r})) == itself"


@pytest.mark.parametrize("dtype", ["int32", "int16", "int8"])
def test_int_comparisons_at_the_limits_match_torch(device: str, dtype: str) -> None:
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max, info.min, 0, -1], dtype)
    y = np.array([info.max, info.max, info.min + 1, info.min, info.max], dtype)
    for expr in COMPARISONS.values():
        agree(device, expr, grad=False, x=x, y=y)


@pytest.mark.parametrize("op", ["isnan", "isinf", "isfinite"])
def test_isnan_isinf_isfinite_match_torch(device: str, op: str) -> None:
    agree(device, f"x.{op}()", grad=False, x=SPECIALS)


@pytest.mark.parametrize("op", ["isnan", "isinf", "isfinite"])
def test_isnan_isinf_isfinite_of_ints_and_bools_match_torch(device: str, op: str) -> None:
    agree(device, f"x.{op}()", grad=False, x=np.array([np.iinfo(np.int32).min, 0, np.iinfo(np.int32).max], np.int32))
    agree(device, f"x.{op}()", grad=False, x=np.array([True, False]))


def test_argmax_and_argmin_pick_the_first_nan_as_torch(device: str) -> None:
    x = np.array([[1.0, nan, 3.0, nan], [1.0, 2.0, 3.0, 3.0], [-inf, -inf, nan, inf]], np.float32)
    for expr in ["x.argmax(1)", "x.argmin(1)", "x.argmax()", "x.argmin()", "x.argmax(0)"]:
        agree(device, expr, grad=False, x=x)


def test_max_and_min_propagate_nan_as_torch(device: str) -> None:
    x = np.array([[1.0, nan, 3.0], [inf, 2.0, -inf], [nan, nan, nan]], np.float32)
    for expr, texpr in [("x.max(axis=1)", "x.amax(1)"), ("x.min(axis=1)", "x.amin(1)"), ("x.max()", "x.amax()")]:
        agree(device, expr, texpr, grad=False, x=x)


def test_max_gradient_is_nan_over_a_slice_holding_nan_as_torch_amax(device: str) -> None:
    x = np.array([[1.0, nan, 3.0], [1.0, 3.0, 3.0], [inf, 2.0, inf]], np.float32)
    agree(device, "x.max(axis=1)", "x.amax(1)", x=x)
    agree(device, "x.min(axis=1)", "x.amin(1)", x=x)


def test_sign_of_nan_and_signed_zero_matches_torch(device: str) -> None:
    agree(device, "x.sign()", signed_zeros=True, grad=False, x=SPECIALS)


def test_abs_of_negative_zero_is_positive_zero_as_torch(device: str) -> None:
    agree(device, "x.abs()", signed_zeros=True, grad=False, x=SPECIALS)


def test_abs_gradient_is_zero_at_zero_and_at_nan_as_torch(device: str) -> None:
    agree(device, "x.abs()", x=SPECIALS)


# ---- relu ----


def test_relu_passes_nan_and_negative_zero_through_as_torch(device: str) -> None:
    agree(device, "x.relu()", signed_zeros=True, grad=False, x=SPECIALS)


def test_relu_gradient_is_zero_at_zero_and_one_at_nan_as_torch(device: str) -> None:
    agree(device, "x.relu()", x=np.array([nan, -0.0, 0.0, -1.0, 1.0, inf, -inf], np.float32))


# ---- reductions over empty axes ----

EMPTY = np.zeros((3, 0), np.float32)


@pytest.mark.parametrize("expr", ["x.any(1)", "x.all(1)", "x.any()", "x.all()", "(x > 0).any(1)", "(x > 0).all()"])
def test_any_over_an_empty_axis_is_false_and_all_is_true_as_torch(device: str, expr: str) -> None:
    agree(device, expr, grad=False, x=EMPTY)


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("axis", [1, -1, None])
def test_an_empty_axis_makes_max_min_argmax_argmin_raise_index_error_naming_shape_and_axis(op: str, axis) -> None:
    with pytest.raises((IndexError, RuntimeError)):
        getattr(torch.tensor(EMPTY), op)(*(() if axis is None else (axis,)))
    with pytest.raises(IndexError, match=r"axis 1 of a tensor of shape \(3, 0\) is empty") as caught:
        getattr(Tensor(EMPTY), op)(axis)  # at graph-build time: nothing is realized
    assert op in str(caught.value), f"Tensor(np.zeros((3, 0))).{op}({axis}): {caught.value}"


@pytest.mark.parametrize(
    ("expr", "texpr"), [("x.max(axis=0)", "x.amax(0)"), ("x.min(axis=0)", "x.amin(0)"), ("x.argmax(0)", None)]
)
def test_a_reduce_over_a_nonempty_axis_of_an_empty_tensor_is_empty_as_torch(device: str, expr: str, texpr) -> None:
    agree(device, expr, texpr, grad=False, x=EMPTY)


@pytest.mark.parametrize(
    ("expr", "texpr"),
    [
        ("x.logsumexp(1)", "torch.logsumexp(x, 1)"),
        ("x.softmax(1)", None),
        ("x.log_softmax(1)", None),
        ("x.sum(1)", None),
    ],
)
def test_softmax_family_and_sum_over_an_empty_axis_match_torch(device: str, expr: str, texpr) -> None:
    agree(device, expr, texpr, grad=False, x=EMPTY)


# ---- bools ----

BOOLS = np.array([[True, False, True], [False, False, False]])


@pytest.mark.parametrize(
    ("expr", "texpr"),
    [("x.max()", None), ("x.max(axis=1)", "x.amax(1)"), ("x.min()", None), ("x.min(axis=1)", "x.amin(1)")],
)
def test_max_and_min_of_bools_are_bools_as_torch(device: str, expr: str, texpr) -> None:
    agree(device, expr, texpr, grad=False, x=BOOLS)


@pytest.mark.parametrize("expr", ["x.argmax()", "x.argmin()", "x.argmax(1)", "x.argmin(0, keepdim=True)"])
def test_argmax_and_argmin_of_bools_index_the_first_true_and_false_unlike_torch(device: str, expr: str) -> None:
    """The issue asks for them: torch raises NotImplementedError for bools; limn ranks False < True, so
    argmax is the first True (the first False when none is), as on the bools read as int32."""
    with pytest.raises(NotImplementedError):
        eval(expr, {"x": torch.tensor(BOOLS)})
    agree(device, expr, expr.replace("x.", "x.int()."), grad=False, x=BOOLS)


# ---- the softmax family with infinities ----

INFINITE_ROWS = np.array(
    [[inf, 1.0, 0.0], [-inf, -inf, -inf], [-inf, 1.0, 2.0], [inf, inf, 1.0], [nan, 1.0, 0.0]], np.float32
)


def test_logsumexp_with_infinite_values_matches_torch(device: str) -> None:
    agree(device, "x.logsumexp(1)", "torch.logsumexp(x, 1)", x=INFINITE_ROWS)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_and_log_softmax_with_infinite_values_match_torch(device: str, op: str) -> None:
    w = np.array([1.0, 2.0, -1.0], np.float32)  # weights, so the gradient of the sum is not the trivial 0
    agree(device, f"x.{op}(1) * w", x=INFINITE_ROWS, w=w)


# ---- var and std ----


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("correction", [0, 1, 2, 3, 4])
def test_var_and_std_divide_by_max_of_n_minus_correction_and_zero_as_torch(
    device: str, n: int, correction: int
) -> None:
    x = np.array([[1.0, 2.0, 4.0][:n], [2.0] * n], np.float32)  # the second row is constant: 0 / 0 is NaN
    for expr in [f"x.var(1, correction={correction})", f"x.std(1, correction={correction})"]:
        agree(device, expr, grad=False, x=x)
    agree(device, f"x[0].var(correction={correction})", grad=False, x=x)


def test_var_gradient_at_correction_equal_to_n_is_inf_per_axis_as_torch(device: str) -> None:
    agree(
        device,
        "x.var(1, correction=2) * w",
        x=np.array([[1.0, 2.0], [3.0, 3.0]], np.float32),
        w=np.array([1.0, -1.0], np.float32),
    )


@pytest.mark.parametrize("expr", ["x.var(1)", "x.std(1)", "x.var()", "x.std(correction=0)", "x.mean(1)"])
def test_var_std_and_mean_of_an_empty_slice_are_nan_as_torch(device: str, expr: str) -> None:
    agree(device, expr, grad=False, x=EMPTY)


def test_std_of_values_near_the_float32_limit_does_not_overflow_as_torch(device: str) -> None:
    big = np.array([[3e38, -3e38, 1e38], [F32.max, -F32.max, 0.0], [3e38, 3.1e38, 2.9e38]], np.float32)
    agree(device, "x.std(1)", grad=False, x=big)
    agree(device, "x.std(1, correction=0)", grad=False, x=big)


def test_std_gradient_near_the_float32_limit_is_the_float64_one(device: str) -> None:
    """torch's own float32 backward overflows here (2 * std is inf, so it gives 0), so its float64 answer
    is the oracle."""
    big = np.array([[3e38, -3e38, 1e38], [F32.max, -F32.max, 0.0], [-2e38, 0.0, 1e37]], np.float32)
    agree(device, "x.std(1)", x=big, torch_float64=True)


def test_std_gradient_of_huge_values_close_together_is_not_finite_a_known_limitation(device: str) -> None:
    """Values near the float limit but close together ([3e38, 3.1e38, 2.9e38]: std 1e37) have a finite value,
    but the backward passes m / std(x / m) = 3e38 / 0.03 (m = max|x|), which overflows: the gradient is NaN,
    as torch's float32 one is not finite either (-inf). The float64 gradient is [0, 0.5, -0.5]."""
    x = Tensor(np.array([[3e38, 3.1e38, 2.9e38]], np.float32), requires_grad=True)
    out = x.std(1)
    out.sum().backward()
    assert np.isfinite(out.numpy()).all(), "x = Tensor([[3e38, 3.1e38, 2.9e38]]); x.std(1)"
    assert not np.isfinite(x.grad.numpy()).any(), "this limitation is gone: compare with torch in float64 instead"


def test_std_of_tiny_and_subnormal_values_keeps_its_digits_as_torch(device: str) -> None:
    tiny = np.array([[1e-30, 2e-30, 4e-30], [1e-45, 0.0, 0.0], [1e-39, -1e-39, 3e-39]], np.float32)
    np.testing.assert_allclose(
        Tensor(tiny).std(1).numpy(), torch.tensor(tiny).std(1).numpy(), rtol=1e-5, atol=0, err_msg=f"x = {tiny!r}"
    )


def test_std_gradient_of_tiny_values_is_the_float64_one(device: str) -> None:
    """Slices whose largest |x| is normal; below that the gradient keeps few digits (it passes through
    a subnormal), which is where torch's float32 backward gives inf and NaN."""
    tiny = np.array([[1e-30, 2e-30, 4e-30], [1e-37, -3e-37, 2e-37]], np.float32)
    agree(device, "x.std(1)", x=tiny, torch_float64=True)


def test_std_gradient_is_zero_where_the_std_is_zero_as_torch(device: str) -> None:
    agree(device, "x.std(1)", x=np.array([[2.0, 2.0, 2.0], [0.0, 0.0, 0.0], [1.0, 2.0, 3.0]], np.float32))


def test_std_with_nan_or_inf_is_nan_as_torch(device: str) -> None:
    agree(device, "x.std(1)", grad=False, x=np.array([[inf, 1.0], [nan, 1.0], [-inf, inf]], np.float32))


# ---- 0-d tensors take dim 0 and -1, as in torch ----

ZERO_D = [
    ("x.sum(0)", None),
    ("x.sum(-1)", None),
    ("x.sum(0, keepdim=True)", None),
    ("x.mean(-1)", None),
    ("x.max(axis=0)", "x.amax(0)"),
    ("x.min(axis=-1)", "x.amin(-1)"),
    ("x.argmax(0)", None),
    ("x.argmin(-1)", None),
    ("x.softmax(-1)", None),
    ("x.log_softmax(-1)", None),
    ("x.logsumexp(0)", "torch.logsumexp(x, 0)"),
    ("x.squeeze(0)", None),
    ("x.squeeze(-1)", None),
    ("x.var(0, correction=0)", None),
    ("x.std(0, correction=0)", None),
]


@pytest.mark.parametrize(("expr", "texpr"), ZERO_D, ids=[e for e, _ in ZERO_D])
def test_a_0d_tensor_takes_dim_0_and_minus_1_as_torch(device: str, expr: str, texpr) -> None:
    grad = "arg" not in expr
    agree(device, expr, texpr, grad=grad, x=np.array(2.5, np.float32))


def test_a_0d_sum_node_over_dim_0_runs_on_the_numpy_device_as_on_c() -> None:
    x = Tensor(np.array(2.5, np.float32))
    node = limn.graph.ops.Node(Op.SUM, (x.node,), x.dtype, (), (0,))  # the graph a 0-d reduce built before
    assert Tensor._from_node(node, "numpy").numpy() == 2.5, "Node(Op.SUM, (Tensor(2.5).node,), float32, (), (0,))"


@pytest.mark.parametrize("axis", [1, -2])
def test_a_0d_tensor_refuses_other_dims_with_index_error_as_torch(axis: int) -> None:
    with pytest.raises(IndexError):
        torch.tensor(2.5).sum(axis)
    with pytest.raises(IndexError, match=r"axis .* is out of range for a tensor with 0 dims; use an axis from -1 to 0"):
        Tensor(2.5).sum(axis)


# ---- maximum and minimum ----

INT_LIMITS = {d: np.iinfo(d) for d in ("int32", "int16", "int8")}


@pytest.mark.parametrize(
    ("a_dtype", "b_dtype"),
    [
        ("int32", "int32"),
        ("int16", "int16"),
        ("int8", "int32"),
        ("bool", "bool"),
        ("int32", "float32"),
        ("float32", "float64"),
    ],
)
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_and_minimum_keep_the_promoted_dtype_as_torch(device: str, op: str, a_dtype: str, b_dtype: str) -> None:
    a = np.array([1, 0, 1, 0]).astype(a_dtype)
    b = np.array([0, 0, 1, 1]).astype(b_dtype)
    agree(device, f"a.{op}(b)", f"torch.{op}(a, b)", grad=False, a=a, b=b)


@pytest.mark.parametrize("dtype", INT_LIMITS)
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_and_minimum_are_exact_for_ints_at_their_limits(device: str, op: str, dtype: str) -> None:
    info = INT_LIMITS[dtype]
    a = np.array([info.max, info.min, info.max, info.min, -1, 0], dtype)
    b = np.array([info.max, info.min, info.min, info.max, info.max, info.min], dtype)
    agree(device, f"a.{op}(b)", f"torch.{op}(a, b)", grad=False, a=a, b=b)


FLOAT_TIES = np.array([inf, -inf, F32.max, -F32.max, F32.tiny, 1e-45, -1e-45, 3e-45, -0.0, 0.0, -0.0, 1.5], np.float32)
FLOAT_TIES_OTHER = np.array(
    [inf, -inf, F32.max, -F32.max, F32.tiny, 1e-45, -1e-45, 3e-45, 0.0, -0.0, -0.0, 1.5], np.float32
)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_and_minimum_are_exact_at_float_ties_at_the_limits_signed_zeros_too(device: str, op: str) -> None:
    agree(device, f"a.{op}(b)", f"torch.{op}(a, b)", signed_zeros=True, tol=0, a=FLOAT_TIES, b=FLOAT_TIES_OTHER)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_and_minimum_split_a_tie_gradient_in_half_and_give_nan_the_whole_as_torch(device: str, op: str) -> None:
    a = np.array([1.0, 2.0, nan, 3.0, nan, inf, -2.0, 5.0], np.float32)
    b = np.array([1.0, nan, 1.0, nan, nan, inf, 4.0, -1.0], np.float32)
    agree(device, f"a.{op}(b)", f"torch.{op}(a, b)", a=a, b=b)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_and_minimum_with_a_python_scalar_propagate_nan(device: str, op: str) -> None:
    agree(device, f"x.{op}(0.0)", f"torch.{op}(x, torch.tensor(0.0))", x=SPECIALS)


# ---- clip ----

CLIP_INPUT = np.array([-1.0, 2.0, 0.5, -3.0, 5.0, nan, inf, -inf, -0.0], np.float32)


@pytest.mark.parametrize("expr", ["x.clip(-1.0, 2.0)", "x.clip(lo=-1.0)", "x.clip(hi=2.0)", "x.clip(-1, 2)"])
def test_clip_gradient_is_zero_at_the_bounds_and_at_nan_as_torch(device: str, expr: str) -> None:
    texpr = expr.replace("clip", "clamp").replace("lo=", "min=").replace("hi=", "max=")
    agree(device, expr, texpr, x=CLIP_INPUT)


def test_clip_propagates_nan_as_torch(device: str) -> None:
    agree(device, "x.clip(-1.0, 2.0)", "x.clamp(-1.0, 2.0)", grad=False, x=CLIP_INPUT)


def test_clip_with_lo_above_hi_gives_hi_everywhere_as_torch(device: str) -> None:
    agree(device, "x.clip(2.0, 1.0)", "x.clamp(2.0, 1.0)", x=CLIP_INPUT)


@pytest.mark.parametrize("bounds", ["float('nan'), 1.0", "-1.0, float('nan')"])
def test_clip_with_a_nan_bound_is_nan_everywhere_as_torch(device: str, bounds: str) -> None:
    agree(device, f"x.clip({bounds})", f"x.clamp({bounds})", x=CLIP_INPUT)


@pytest.mark.parametrize(("expr", "texpr"), [("x.clip(lo=b)", "x.clamp(min=b)"), ("x.clip(hi=b)", "x.clamp(max=b)")])
def test_clip_with_one_tensor_bound_matches_torch_gradients_included(device: str, expr: str, texpr: str) -> None:
    x = np.array([-1.0, nan, -3.0, 0.0, 2.0, 1.0], np.float32)
    b = np.array([-1.0, 0.0, 0.0, nan, 2.0, -1.0], np.float32)
    agree(device, expr, texpr, x=x, b=b)


@pytest.mark.parametrize(("expr", "texpr"), [("x.clip(2, 3)", "x.clamp(2, 3)"), ("x.clip(0.5, 3)", "x.clamp(0.5, 3)")])
def test_clip_of_ints_stays_int_and_a_float_bound_gives_float32_as_torch(device: str, expr: str, texpr: str) -> None:
    info = INT_LIMITS["int32"]
    agree(device, expr, texpr, grad=False, x=np.array([info.min, 1, 2, 5, info.max], np.int32))


# ---- powers ----


def test_a_negative_base_to_an_integer_valued_tensor_power_is_real_odd_keeping_the_sign_as_torch(device: str) -> None:
    x = np.array([-2.0, -2.0, -2.0, -3.0, -0.5, 2.0], np.float32)
    y = np.array([2.0, 3.0, -1.0, 4.0, -3.0, 2.0], np.float32)
    agree(device, "x ** y", grad=False, x=x, y=y)
    agree(device, "(x ** y) * 1", grad=False, x=x, y=np.array([2.5, 0.5, -1.5, 0.1, 2.5, 1.5], np.float32))  # NaN


def test_a_negative_base_to_an_integer_valued_tensor_power_has_torchs_base_gradient(device: str) -> None:
    x = np.array([-2.0, -2.0, -2.0, -3.0, -0.5], np.float32)
    y = np.array([2.0, 3.0, -1.0, 4.0, -3.0], np.float32)
    agree(device, "x ** y.detach()", x=x, y=y)


# x ** y at C's pow rules (zeros, infinities, NaN, 1s): every value as torch
POW_BASES = np.array(
    [0.0, inf, 1.0, -inf, -inf, 0.0, -0.0, nan, -1.0, -1.0, 0.5, -0.0, 0.0, inf, -inf, -inf], np.float32
)
POW_EXPONENTS = np.array(
    [0.0, 0.0, nan, 2.5, 0.3, -1.0, -1.0, 0.0, inf, nan, -inf, 3.0, 0.3, -2.0, 3.0, -3.0], np.float32
)


def test_pow_of_zeros_infinities_nan_and_ones_follows_cs_pow_as_torch(device: str) -> None:
    agree(device, "x ** y", grad=False, signed_zeros=True, x=POW_BASES, y=POW_EXPONENTS)


def test_pow_gradients_at_zeros_infinities_nan_and_ones_match_torch_nan_for_nan(device: str) -> None:
    x, y = POW_BASES, POW_EXPONENTS
    limn_x, limn_y = Tensor(x, requires_grad=True), Tensor(y, requires_grad=True)
    torch_x, torch_y = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    (limn_x**limn_y).sum().backward()
    (torch_x**torch_y).sum().backward()
    for name, got, want in [
        ("d/dx", limn_x.grad.numpy(), torch_x.grad.numpy()),
        ("d/dy", limn_y.grad.numpy(), torch_y.grad.numpy()),
    ]:
        problem = same(got, want, name)
        assert problem is None, f"x ** y on {device}, x = {literal(x)}, y = {literal(y)}: {problem}"


@pytest.mark.parametrize(("base", "exponent"), [(0.0, 0.0), (inf, 0.0), (1.0, nan), (0.0, 2.0), (0.0, -1.0)])
def test_pow_at_zero_inf_and_one_has_torchs_gradients_for_both_sides(device: str, base: float, exponent: float) -> None:
    agree(device, "x ** y", x=np.array([base], np.float32), y=np.array([exponent], np.float32))


@pytest.mark.parametrize("p", [2.5, 0.3, -2.5, 1.5])
def test_minus_inf_to_a_fractional_power_is_its_magnitude_as_torch(device: str, p: float) -> None:
    agree(device, f"x ** {p}", grad=False, x=np.array([-inf, inf, -0.0, 0.0], np.float32))


@pytest.mark.parametrize("p", [0.3, 0.7, 1.5, 2.5, -0.3, -2.5])
def test_the_gradient_of_x_to_a_fractional_power_at_zero_and_inf_is_torchs(device: str, p: float) -> None:
    agree(device, f"x ** {p}", x=np.array([0.0, -0.0, inf, 1.0, 2.0], np.float32))


@pytest.mark.parametrize("n", [65, 64, 67, -65, 101, 2**40 + 1, 2**62])
def test_x_to_a_large_python_int_is_real_for_negative_x_by_squaring_as_torch(device: str, n: int) -> None:
    x = np.array([-1.0, -1.000001, 1.000001, -0.9999, 0.0, -0.0], np.float32)
    agree(device, f"x ** {n}", grad=False, signed_zeros=True, x=x, tol=1e-4)


@pytest.mark.parametrize("n", [2**62 + 1, -(2**62) - 1, 2**100 + 1, 3**70])
def test_x_to_a_python_int_past_float64_keeps_its_parity_as_python_ints_do(device: str, n: int) -> None:
    """torch takes n as a float64 (2**62 + 1 rounds to the even 2**62, so its (-1) ** n is 1); the oracle
    here is python's integer power of |n| (for a negative n python itself goes through floats)."""
    got = (Tensor(np.array([-1.0, 1.0], np.float32)) ** n).numpy()
    assert got.tolist() == [(-1) ** abs(n), 1], f"Tensor([-1.0, 1.0]) ** {n} on {device}: {got}"


@pytest.mark.parametrize("n", [65, 64, -65, 2**40 + 1])
def test_x_to_a_large_python_int_has_torchs_gradient(device: str, n: int) -> None:
    """n - 1 must be exact in float64 for torch's n * x ** (n - 1) to be the derivative: at n = 2**62 it
    rounds to n, and torch's sign at x = -1 is wrong where limn's is not."""
    agree(device, f"x ** {n}", x=np.array([-1.01, 1.01, -1.0, 0.0, -1.000001], np.float32), tol=1e-4)


@pytest.mark.parametrize("zero", ["0", "0.0"])
def test_x_to_the_zero_is_one_still_linked_to_x_with_gradient_zero_as_torch(device: str, zero: str) -> None:
    agree(device, f"x ** {zero}", x=np.array([0.0, -2.0, 3.0, nan, inf], np.float32))


@pytest.mark.parametrize("base", [-5.5, 0.0, -1.0, 2.0, 1.0, inf, -inf, -0.0])
def test_a_python_base_to_a_tensor_power_follows_cs_pow_as_torch(device: str, base: float) -> None:
    agree(
        device,
        f"{base!r} ** y".replace("inf", "float('inf')"),
        grad=False,
        y=np.array([2.0, 3.0, 2.5, 0.0, -1.0, inf, -inf, nan], np.float32),
    )


@pytest.mark.parametrize("base", [0.0, 2.0, 1.0, 0.5])
def test_a_python_base_to_a_tensor_power_has_torchs_exponent_gradient(device: str, base: float) -> None:
    agree(device, f"{base!r} ** y", y=np.array([2.0, 3.0, 2.5, 0.0, -1.0, inf, -inf, 0.5], np.float32))


@pytest.mark.parametrize("dtype", ["int32", "int8", "bool"])
def test_an_int_tensor_to_a_negative_int_power_raises_as_torch(dtype: str) -> None:
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        torch.tensor(np.array([2, 3]).astype(dtype)) ** -1
    with pytest.raises(RuntimeError, match=r"integers to negative integer powers are not allowed.*cast\('float32'\)"):
        Tensor(np.array([2, 3]).astype(dtype)) ** -1


@pytest.mark.parametrize("dtype", ["int32", "int8"])
def test_an_int_tensor_to_a_non_negative_int_power_wraps_in_its_dtype_as_torch(device: str, dtype: str) -> None:
    agree(device, "x ** 3", grad=False, x=np.array([7, -5, 2, 0], dtype))
    agree(device, "x ** 0", grad=False, x=np.array([7, -5, 2, 0], dtype))


def test_an_int_tensor_to_a_float_power_is_float32_as_torch(device: str) -> None:
    agree(device, "x ** 0.5", grad=False, x=np.array([4, 2, 0], np.int32))
    agree(device, "x ** 1.5", grad=False, x=np.array([4, 2, 0], np.int32))


@pytest.mark.parametrize("dtype", ["int32", "int8", "int16", "int64"])
def test_an_int_tensor_to_an_int_tensor_power_is_torchs_exact_wrapping_int_power(device: str, dtype: str) -> None:
    # torch's powi: by squaring, wrapping; for a negative power 1 ** y = 1, (-1) ** y = +-1, else 0
    x = np.array([1, 2, 3, -1, -2, 0, 0, 0, -3, 7, -1, 5, 3], dtype)
    y = np.array([-2, -3, -4, -3, -2, 0, 1, 2, 3, 11, -4, -1, 40], dtype)
    agree(device, "x ** y", grad=False, x=x, y=y)
    agree(device, "2 ** y", grad=False, y=np.array([3, 6, -1, 0, 1], dtype))


def test_a_bool_tensor_to_a_bool_tensor_power_raises_as_torch() -> None:
    with pytest.raises(NotImplementedError):
        torch.tensor([True]) ** torch.tensor([True])
    with pytest.raises(limn.ArgumentError, match="bool"):
        Tensor([True]) ** Tensor([True])


def test_pow_gradient_where_a_negative_base_rises_to_inf_is_torchs_inf(device: str) -> None:
    # torch's d/dx (-inf) ** 2.5 is 2.5 * (-inf) ** 1.5 = +inf, its formula carried as it is
    agree(device, "x ** 2.5", x=np.array([-inf, inf], np.float32))


def test_pow_keeps_the_half_width_dtype_rounding_once() -> None:
    # on the numpy device alone: the c device declines half widths, by design (tests/c say so)
    for dtype in ("float16", "bfloat16"):
        x = Tensor(np.array([1.5, -2.0, 0.3]), dtype=dtype)
        want = np.array([1.5, -2.0, 0.3]).astype(limn.dtypes.as_dtype(dtype).np).astype(np.float32) ** 3
        got = (x**3).numpy()
        assert (x**3).dtype.name == dtype and (x**2.5).dtype.name == dtype, (
            f"Tensor([1.5, -2.0, 0.3], dtype={dtype!r}) ** 3"
        )
        np.testing.assert_array_equal(
            got, want.astype(got.dtype), err_msg=f"Tensor([1.5, -2.0, 0.3], dtype={dtype!r}) ** 3"
        )


def test_var_gradient_over_a_slice_holding_inf_is_nan_only_where_x_minus_mean_is_as_torch(device: str) -> None:
    x = np.array([[-0.0, -inf, -0.0], [1.0, inf, 2.0], [1.0, 2.0, 4.0], [nan, 1.0, 2.0]], np.float32)
    agree(device, "x.var(1) * w", x=x, w=np.array([1.0, -2.0, 0.5, 1.0], np.float32))
    agree(device, "x.var(1, correction=0) * w", x=x, w=np.array([1.0, -2.0, 0.5, 1.0], np.float32))


# ---- clamp of an int tensor with bounds past its dtype's range, as torch ----


@pytest.mark.parametrize(
    ("dtype", "lo", "hi"), [("uint8", -5, 100), ("uint8", 2, 300), ("int8", -200, 50), ("int16", -70000, 70000)]
)
def test_an_int_clamp_bound_past_the_dtype_range_is_no_bound_as_torch(device: str, dtype: str, lo: int, hi: int):
    x = np.array([0, 5, 100, 120], dtype)
    agree(device, f"x.clamp({lo}, {hi})", grad=False, x=x)


@pytest.mark.parametrize(("lo", "hi"), [(300, 400), (-10, -5)])
def test_an_int_clamp_bound_past_the_range_on_the_other_side_raises_as_torch(lo: int, hi: int):
    with pytest.raises(ValueError, match="outside the range of uint8"):
        Tensor(np.array([0, 5, 200], np.uint8)).clamp(lo, hi)


def test_full_of_a_python_int_past_int32_raises_instead_of_wrapping():
    with pytest.raises(OverflowError, match="int64"):
        Tensor.full((), 2**40)
    assert Tensor.full((), 2**40, dtype="int64").item() == 2**40
    assert Tensor.full((), 300, dtype="int8").item() == 44  # an explicit narrow dtype wraps, by the spec


def test_gelu_at_infinities_and_past_the_overflow_is_torchs_in_float64(device: str) -> None:
    """gelu(+inf) = inf and gelu(3e38) = 3e38 (gradient NaN at +-inf, as torch's): torch's float64 kernel, the
    oracle here, gives these; its float32 kernels give NaN or inf up there depending on the CPU's ISA, so
    they are no oracle for the top of the range."""
    x = np.array([inf, -inf, 3e38, -3e38, 1e38, nan, 1.5, -0.0], np.float32)
    agree(device, "x.gelu()", "torch.nn.functional.gelu(x.double()).float()", signed_zeros=True, x=x)
    agree(device, "x.gelu()", "torch.nn.functional.gelu(x)", signed_zeros=True, x=x.astype(np.float64))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_half_width_gelu_and_its_gradient_compute_in_float32_and_round_once_as_torch(device, dtype, approximate):
    """torch computes a half-width gelu and its gradient in float32 and rounds once. Rounding each step to the
    half width instead made the tanh form's slope exactly 1 past |x| ~ 2.5 (1 - tanh**2 rounds to 0):
    float16 at x = 3.25 gave 1.0 where torch gives 1.0059."""
    x_np = np.concatenate([np.linspace(-6, 6, 97), [2.703125, 3.25, 3.2597656, 0.0]]).astype(np.float32)
    x = Tensor(x_np, dtype=dtype, requires_grad=True)
    y = x.gelu(approximate)
    y.backward(Tensor(np.ones_like(x_np), dtype=dtype))
    x_t = torch.tensor(x_np, dtype=getattr(torch, dtype), requires_grad=True)
    y_t = torch.nn.functional.gelu(x_t, approximate=approximate)
    y_t.backward(torch.ones_like(y_t))
    tol = {"float16": 2e-3, "bfloat16": 1.6e-2}[dtype]  # one rounding of either width, at the values' size
    got, want = y.cast("float32").numpy(), y_t.float().detach().numpy()
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"gelu {approximate} {dtype}")
    got, want = x.grad.cast("float32").numpy(), x_t.grad.float().numpy()
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"gelu {approximate} {dtype} gradient")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["sigmoid", "tanh", "silu"])
def test_half_width_sigmoid_tanh_and_silu_round_once_with_accurate_gradients(device, dtype, name):
    """Like gelu: computed in float32 and rounded once, so the values are torch's; the gradients are within one
    rounding of the true slope (torch's float64, the oracle). The difference this test names: torch's half-width
    tanh and sigmoid gradients take 1 - t**2 and s (1 - s) from the output rounded to the half width, up to 46%
    off near saturation; limn spells them from x (e / (1 + e)**2), so they stay within one rounding."""
    x_np = np.concatenate([np.linspace(-12, 12, 97), [0.0, -0.0, 0.19, 0.21, inf, -inf]]).astype(np.float32)
    x = Tensor(x_np, dtype=dtype, requires_grad=True)
    y = getattr(x, name)()
    y.backward(Tensor(np.ones_like(x_np), dtype=dtype))
    x_t = torch.tensor(x_np, dtype=getattr(torch, dtype), requires_grad=True)
    y_t = torch.nn.functional.silu(x_t) if name == "silu" else getattr(torch, name)(x_t)
    np.testing.assert_array_equal(y.cast("float32").numpy(), y_t.float().detach().numpy(), err_msg=name)
    x64 = x_t.detach().double().requires_grad_(True)  # the same half-width inputs, differentiated in float64
    y64 = torch.nn.functional.silu(x64) if name == "silu" else getattr(torch, name)(x64)
    y64.backward(torch.ones_like(y64))
    ulp, tiniest = {"float16": (2**-10, 2**-24), "bfloat16": (2**-7, 2**-133)}[dtype]  # float16's subnormal step
    got, want = x.grad.cast("float64").numpy(), x64.grad.numpy()
    np.testing.assert_allclose(got, want, rtol=ulp, atol=tiniest, err_msg=f"{name} {dtype} gradient")


def test_float32_tanh_and_sigmoid_gradients_keep_their_bits_near_saturation(device: str) -> None:
    """1 - t**2 from a float32 t near 1 keeps few bits (torch's tanh gradient at 6 is 0.08% off, and 0 from about
    9); limn's slope is e / (1 + e)**2 from x, within a few float32 roundings of the truth: 1 / cosh(x)**2 and
    s (1 - s) in float64 (whose own 1 - t**2 loses bits past 16, so the truth is not torch's float64 there)."""
    x_np = np.array([2.0, 4.327, 6.0, 8.4, 8.8, 12.0, 16.0, -6.0, -16.0], np.float32)
    x64 = x_np.astype(np.float64)
    s64 = 1 / (1 + np.exp(-x64))
    for name, truth in (("tanh", 1 / np.cosh(x64) ** 2), ("sigmoid", s64 * (1 - s64))):
        x = Tensor(x_np, requires_grad=True)
        getattr(x, name)().sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), truth, rtol=1e-6, err_msg=name)


def test_gelus_second_derivative_at_zero_is_torchs(device: str) -> None:
    """Phi(x) + x phi(x) differentiates to 2 phi(0) at 0: the erf approximation's sign(x) has no derivative
    there, so Phi carries phi as its own (it gave phi(0), half of torch's 0.798, before)."""
    for dtype in (np.float32, np.float64):
        x_np = np.array([0.0, -0.0, 1e-8, 0.5], dtype)
        x = Tensor(x_np, requires_grad=True)
        (first,) = limn.autograd.grad(x.gelu().sum(), [x], create_graph=True)
        (second,) = limn.autograd.grad(first.sum(), [x])
        x_t = torch.tensor(x_np, requires_grad=True)
        (first_t,) = torch.autograd.grad(torch.nn.functional.gelu(x_t).sum(), [x_t], create_graph=True)
        (second_t,) = torch.autograd.grad(first_t.sum(), [x_t])
        np.testing.assert_allclose(second.numpy(), second_t.numpy(), rtol=1e-6, err_msg=str(dtype))


def test_a_python_int_past_int64_rounds_into_bfloat16_as_torch(device: str) -> None:
    """bfloat16's numpy scalar refuses a python int past int64; the constant goes through a float first,
    as a cast of an array would, and 2**63 is then a bfloat16 like any other number (torch: 9.2234e18)."""
    x = Tensor(np.ones(2, np.float32), dtype="bfloat16")
    got = (x * 2**63).cast("float32").numpy()
    want = (torch.ones(2, dtype=torch.bfloat16) * 2**63).float().numpy()
    np.testing.assert_array_equal(got, want)
    assert Tensor.full((2,), 2**64 + 1, dtype="bfloat16").cast("float32").tolist() == [2.0**64] * 2


def test_logcumsumexp_gradient_at_nan_and_infinite_cells_is_torchs(device: str) -> None:
    """torch's gradient sums g_i e**(x_j - out_i): NaN at a NaN cell (and after it) and at an infinite cell
    equal to its running value, finite elsewhere."""
    x = np.array([[-inf, 1.0, -inf, 2.0], [1.0, nan, 2.0, -inf], [inf, 0.5, -1.0, 3.0]], np.float32)
    agree(device, "x.logcumsumexp(-1)", x=x)
    agree(device, "x.logcumsumexp(0)", x=x)
    agree(device, "x.logcumsumexp(-1)", x=x.reshape(12, 1))  # a length-1 axis: the value is x itself


POW_BASES = [-5.5, 3.0, 1.5, -2.25, 0.1, 7.0, 1.1, -3.0, 2.0, 1.0001, 10.0, 0.75]
POW_EXPONENTS = [2.0, 3.0, 4.0, 3.0, 2.0, 5.0, 3.0, -2.0, -3.0, 100.0, 22.0, 9.0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_at_integer_exponents_is_exact_where_torch_is_and_the_same_bits_on_numpy_and_c(dtype: str) -> None:
    """A tensor to an integer-valued tensor power multiplies by squaring: (-5.5) ** 2.0 is 30.25 and 3 ** 3.0 is
    27, exactly as torch's pow gives them, and the numpy and c devices give the same bits. float32 is within
    half an ulp of torch everywhere (it rounds a float64 power once); float64 within a few ulps."""
    x, y = np.array(POW_BASES, dtype), np.array(POW_EXPONENTS, dtype)
    expected = (torch.tensor(x) ** torch.tensor(y)).numpy()
    got = {}
    for name in ("numpy", "c"):
        try:
            limn.set_device(name)
        except limn.DeviceError as e:
            pytest.skip(f"device {name!r} cannot run here: {e}")
        got[name] = (Tensor(x) ** Tensor(y)).numpy()
    reproducer = f"Tensor(np.array({POW_BASES}, {dtype!r})) ** Tensor(np.array({POW_EXPONENTS}, {dtype!r}))"
    assert got["numpy"].tobytes() == got["c"].tobytes(), f"numpy {got['numpy']} != c {got['c']}\n{reproducer}"
    powers = [Fraction(float(b)) ** int(e) for b, e in zip(x, y)]  # the true powers of the stored bases
    exact = np.array([Fraction(float(np.asarray(float(p), dtype))) == p for p in powers])
    assert exact.sum() >= 6, "most cases must be representable powers for the test to mean anything"
    np.testing.assert_array_equal(got["numpy"][exact], expected[exact], err_msg=f"representable powers\n{reproducer}")
    np.testing.assert_allclose(got["numpy"], expected, rtol=6e-8 if dtype == "float32" else 4e-15, err_msg=reproducer)
