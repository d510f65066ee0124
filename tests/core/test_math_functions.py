"""The elementwise math functions against torch, on numpy and on c: trig (limn.composed.math.trig), the exp/log family
(limn.composed.math.logexp), values and gradients, with each special point a named case.

TABLE holds forward and backward rows (torch in float64 and rounded where the point is a precision test);
test_accuracy_sweep runs every function over the whole float32 range and a float64 range in one realize and
asserts the relative error against torch's float64 (the report of each function's worst error).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from oracle import Table, case

import limn
from limn import Tensor

nan, inf = math.nan, math.inf
F32 = np.float32


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


X = f32(-3.0, -1.2, -0.5, 0.3, 0.9, 2.5, 7.0)
UNIT = f32(-0.9, -0.5, 0.0, 0.3, 0.7, 0.99)
POSITIVE = f32(0.1, 0.5, 1.0, 2.0, 10.0, 1000.0)
ABOVE_ONE = f32(1.0001, 1.5, 2.0, 3.0, 100.0, 1e5)
HALF_PI_MULTIPLES = np.array([k * math.pi / 2 for k in (1, 2, 3, 4, 7, 10, 100, 1001, 12345, 2**20 + 1)], np.float32)
LARGE = f32(1e4, -1e4, 1e10, 1e20, -1e30, 3e38, -3.4028235e38, 2.0**100)
SUBNORMAL = f32(1e-45, -1e-40, 1.1754944e-38, -3e-39)
SIGNED_ZEROS = f32(-0.0, 0.0)
NON_FINITE = f32(inf, -inf, nan)
F64 = np.array([-7.5, -1.0, -0.25, 1e-8, 0.4, 1.3, 3.0], np.float64)
UNIT64 = np.array([-0.99, -0.5, 1e-9, 0.3, 0.75], np.float64)

UNARY_ALL = ["sin", "cos", "tan", "atan", "sinh", "cosh", "asinh", "exp2", "expm1", "tanh", "erf"]
ODD = ["sin", "tan", "asin", "atan", "sinh", "asinh", "atanh", "expm1", "log1p", "tanh", "erf"]

CASES = []
for fn in UNARY_ALL:
    CASES += [
        case(f"x.{fn}()", x=X, id=f"{fn}"),
        # (tanh: torch's 1 - tanh**2 cancels to 1e-10 where tanh nears 1, so its gradient row asks 1e-9)
        case(f"x.{fn}()", x=F64, tol=1e-9 if fn == "tanh" else 1e-12, id=f"{fn}_float64"),
        case(f"x.{fn}()", x=NON_FINITE, id=f"{fn}_inf_nan"),
    ]
# dtypes and shapes go through limn.composed.math.derivative alike: one function of each module stands for its module
for fn in ["sin", "atan", "asinh", "expm1"]:
    CASES += [
        case(f"x.{fn}()", x=np.array([1, -2, 3], np.int32), id=f"{fn}_of_int32_is_float32"),
        case(f"x.{fn}()", x=np.array([True, False]), id=f"{fn}_of_bool_is_float32"),
        case(f"x.{fn}()", x=np.array(0.5, np.float32), id=f"{fn}_0d"),
        case(f"x.{fn}()", x=np.zeros((0, 3), np.float32), id=f"{fn}_empty"),
    ]
for fn in ["asin", "acos", "atanh"]:
    CASES += [
        case(f"x.{fn}()", x=UNIT, id=fn),
        case(f"x.{fn}()", x=UNIT64, tol=1e-12, id=f"{fn}_float64"),
        case(f"x.{fn}()", x=NON_FINITE, id=f"{fn}_inf_nan"),
    ]
for fn in ["log2", "log10", "log1p"]:
    CASES += [
        case(f"x.{fn}()", x=POSITIVE, id=fn),
        case(f"x.{fn}()", x=np.abs(F64) + 0.5, tol=1e-12, id=f"{fn}_float64"),
        case(f"x.{fn}()", x=NON_FINITE, id=f"{fn}_inf_nan"),
    ]
CASES += [
    case("x.acosh()", x=ABOVE_ONE, torch_float64=True, id="acosh"),  # torch float32 loses x**2 - 1 near 1
    case("x.acosh()", x=np.array([1.0, 1.5, 20.0, 1e10], np.float64), tol=1e-12, id="acosh_float64"),
    case("x.acosh()", x=NON_FINITE, id="acosh_inf_nan"),
]
for fn in ODD:
    CASES.append(case(f"x.{fn}()", x=SIGNED_ZEROS, signed_zeros=True, id=f"{fn}_keeps_the_sign_of_zero"))
HARD_ARGUMENTS = np.concatenate([LARGE, HALF_PI_MULTIPLES, SUBNORMAL])
for fn in ["sin", "cos", "tan"]:
    # huge arguments, near multiples of pi/2 and subnormals: the reduction is exact (one row keeps one kernel)
    CASES.append(case(f"x.{fn}()", x=HARD_ARGUMENTS, torch_float64=True, id=f"{fn}_reduces_huge_and_near_pi_halves"))
    CASES.append(case(f"x.{fn}()", x=LARGE.astype(np.float64) * 1e200, tol=1e-12, id=f"{fn}_of_huge_float64"))
CASES += [
    # domain edges: torch's values and its formula's gradients (inf at the edge, NaN outside)
    case("x.asin()", x=f32(1.0, -1.0, 1.0000001, -1.0000001, 2.0), id="asin_at_and_past_the_domain_edge"),
    case("x.acos()", x=f32(1.0, -1.0, 1.0000001, -1.0000001, 2.0), id="acos_at_and_past_the_domain_edge"),
    case("x.acosh()", x=f32(1.0, 0.999, 0.0, -1.0, -1e20), id="acosh_is_0_at_1_and_nan_below"),
    case("x.atanh()", x=f32(1.0, -1.0, 1.0000001, -2.0), id="atanh_is_inf_at_plus_minus_1"),
    case("x.log1p()", x=f32(-1.0, -1.5, 1e-30, -1e-30, 3e38), id="log1p_is_minus_inf_at_minus_1_and_keeps_tiny_x"),
    case("x.expm1()", x=f32(1e-30, -1e-30, 1e-10, 100.0, -100.0), id="expm1_keeps_tiny_x_and_saturates"),
    case(
        "x.expm1()",
        x=np.array([709.5, 709.78, -745.0, 0.999, -0.999], np.float64),
        tol=1e-12,
        id="expm1_float64_near_overflow",
    ),
    case("x.exp2()", x=f32(128.0, 127.5, -149.0, -150.0, -0.0, 0.5), id="exp2_at_the_float32_limits"),
    case("x.log2()", x=f32(0.0, -0.0, -1.0, 1e-45, 8.0, 1024.0), id="log2_of_zero_is_minus_inf"),
    case("x.log10()", x=f32(0.0, -1.0, 1e-45, 1000.0), id="log10_of_zero_is_minus_inf"),
    case("x.atan()", x=f32(inf, -inf, 1e30, -1e30, 0.4375, 2.4375), id="atan_at_infinity_and_band_edges"),
    case("x.sinh()", x=f32(89.0, -89.0, 90.0, 710.0, -1000.0), torch_float64=True, id="sinh_overflows_to_inf"),
    case("x.cosh()", x=f32(89.0, -89.0, 90.0, 710.0, -1000.0), torch_float64=True, id="cosh_overflows_to_inf"),
    case("x.sinh()", x=np.array([22.5, -700.0, 709.5, 710.4, 711.0], np.float64), tol=1e-12, id="sinh_float64_large"),
    case("x.cosh()", x=np.array([22.5, -700.0, 709.5, 710.4, 711.0], np.float64), tol=1e-12, id="cosh_float64_large"),
    case(
        "x.tanh()",
        x=f32(1e-8, -1e-20, 0.19, 0.2, -0.21, 20.0, -100.0),
        torch_float64=True,
        id="tanh_near_zero_and_saturated",
    ),
    case("x.tanh()", x=np.array([1e-10, -0.1999, 0.2, 0.05, 19.0], np.float64), tol=1e-12, id="tanh_float64_near_zero"),
    case("x.asinh()", x=f32(1e20, -3e38, 2.0, 2.0001, 1e-20), id="asinh_large_and_small"),
    case("x.acosh()", x=f32(1e20, 3e38, 2.0, 2.0001), id="acosh_large"),
]

# ---- two-input functions ----
Y = f32(1.0, -2.0, 0.5, -0.7, 3.0, 0.25, -5.0)
ATAN2_Y = f32(0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.0, -0.0, inf, -inf, inf, -inf, 2.0, -2.0, 1.0, nan, 3.0)
ATAN2_X = f32(0.0, 0.0, -0.0, -0.0, 0.0, -0.0, -2.0, -2.0, inf, inf, -inf, -inf, inf, -inf, 3.0, 1.0, nan)
CASES += [
    case("x.atan2(y)", "torch.atan2(x, y)", x=X, y=Y, id="atan2"),
    case(
        "x.atan2(y)",
        "torch.atan2(x, y)",
        x=ATAN2_Y,
        y=ATAN2_X,
        signed_zeros=True,
        grad=False,
        id="atan2_signed_zeros_and_inf",
    ),
    # torch's gradient there: 0 where x**2 + y**2 is 0 (the signs of those zeros are not limn's promise), NaN at inf
    case("x.atan2(y)", "torch.atan2(x, y)", x=ATAN2_Y, y=ATAN2_X, id="atan2_gradient_at_the_origin_and_inf"),
    case("x.atan2(y)", "torch.atan2(x, y)", x=F64, y=F64[::-1].copy(), tol=1e-12, id="atan2_float64"),
    case("x.atan2(y)", "torch.atan2(x, y)", x=X.reshape(7, 1), y=Y, id="atan2_broadcasts"),
    case("x.atan2(1.5)", "torch.atan2(x, torch.tensor(1.5))", x=X, id="atan2_python_scalar"),
    case("x.hypot(y)", "torch.hypot(x, y)", x=X, y=Y, id="hypot"),
    case(
        "x.hypot(y)",
        "torch.hypot(x, y)",
        x=f32(3e30, 1e-30, 0.0, -0.0),
        y=f32(4e30, 1e-30, 0.0, 2.0),
        id="hypot_no_overflow",
    ),
    case(
        "x.hypot(y)",
        "torch.hypot(x, y)",
        x=f32(inf, nan, -inf, nan),
        y=f32(nan, inf, 1.0, 1.0),
        grad=False,
        id="hypot_inf_beats_nan",
    ),
    case("x.hypot(y)", "torch.hypot(x, y)", x=F64, y=F64[::-1].copy(), tol=1e-12, id="hypot_float64"),
    case("x.logaddexp(y)", "torch.logaddexp(x, y)", x=X, y=Y, id="logaddexp"),
    case(
        "x.logaddexp(y)",
        "torch.logaddexp(x, y)",
        x=f32(1000.0, -1000.0, 88.0, 30.0),
        y=f32(1000.0, -1001.0, 89.0, -30.0),
        id="logaddexp_large",
    ),
    case(
        "x.logaddexp(y)",
        "torch.logaddexp(x, y)",
        x=f32(-inf, inf, inf, nan, -inf),
        y=f32(-inf, inf, -inf, 1.0, 2.0),
        grad=False,
        id="logaddexp_infinities",
    ),
    case("x.logaddexp2(y)", "torch.logaddexp2(x, y)", x=X, y=Y, id="logaddexp2"),
    case("x.logaddexp2(y)", "torch.logaddexp2(x, y)", x=F64, y=F64[::-1].copy(), tol=1e-12, id="logaddexp2_float64"),
    case("x.copysign(y)", "torch.copysign(x, y)", x=X, y=Y, id="copysign"),
    case(
        "x.copysign(y)",
        "torch.copysign(x, y)",
        x=f32(1.0, 2.0, 0.0, -0.0, inf, -3.0),
        y=f32(-0.0, 0.0, -1.0, 1.0, -inf, 0.0),
        signed_zeros=True,
        id="copysign_signed_zeros",
    ),
    case(
        "x.copysign(y)",
        "torch.copysign(x, y)",
        x=np.array([1, -2], np.int32),
        y=np.array([-1, 3], np.int32),
        id="copysign_of_ints_is_float32",
    ),
    case("x.lerp(y, 0.3)", "torch.lerp(x, y, 0.3)", x=X, y=Y, id="lerp_scalar_weight"),
    case("x.lerp(y, 1.0)", "torch.lerp(x, y, 1.0)", x=X, y=Y, id="lerp_weight_1_is_end_exactly"),
    case(
        "x.lerp(y, w)",
        "torch.lerp(x, y, w)",
        x=X,
        y=Y,
        w=f32(0.0, 0.2, 0.5, 0.7, 1.0, -0.5, 2.0),
        id="lerp_tensor_weight",
    ),
]
# isclose: bool outputs
CASES += [
    case(
        "x.isclose(y)",
        "torch.isclose(x, y)",
        x=f32(1.0, 1.0, inf, inf, nan, 1e-9, 100.0),
        y=f32(1.000001, 1.1, inf, -inf, nan, 0.0, 100.001),
        grad=False,
        id="isclose_defaults",
    ),
    case(
        "x.isclose(y, equal_nan=True)",
        "torch.isclose(x, y, equal_nan=True)",
        x=f32(nan, nan, 1.0),
        y=f32(nan, 1.0, 1.0),
        grad=False,
        id="isclose_equal_nan",
    ),
    case(
        "x.isclose(y, rtol=0.1, atol=0.0)",
        "torch.isclose(x, y, rtol=0.1, atol=0.0)",
        x=f32(1.0, 1.0, -1.0),
        y=f32(1.09, 1.2, -1.05),
        grad=False,
        id="isclose_rtol",
    ),
    case(
        "x.isclose(y, rtol=0, atol=0)",
        "torch.isclose(x, y, rtol=0, atol=0)",
        x=f32(1.0, 1.0),
        y=f32(1.0, 1.0000001),
        grad=False,
        id="isclose_exact",
    ),
    case(
        "x.isclose(y)",
        "torch.isclose(x, y)",
        x=np.array([1, 2, 100000000], np.int32),
        y=np.array([1, 3, 100000001], np.int32),
        grad=False,
        id="isclose_ints",
    ),
]

# ---- signs, NaN tests, clamp, nan_to_num and torch's aliases ----
SIGNS = f32(-2.0, -0.0, 0.0, 3.0, inf, -inf, nan, 1e-45)
CASES += [
    # (torch's gradient of sign is a ZeroTensor the oracle cannot read: test_sign_has_gradient_zero holds it)
    case("x.sign()", x=SIGNS, grad=False, id="sign"),
    case("x.sgn()", x=SIGNS, grad=False, id="sgn"),
    case("x.sign()", x=np.array([-5, 0, 7], np.int32), id="sign_int32"),
    case("x.signbit()", x=f32(-2.0, -0.0, 0.0, 3.0, inf, -inf, 1e-45, -1e-45), id="signbit"),
    case("x.signbit()", x=np.array([-5, 0, 7], np.int32), id="signbit_int32"),
    case("x.isnan()", x=SIGNS, id="isnan"),
    case("x.isinf()", x=SIGNS, id="isinf"),
    case("x.isfinite()", x=SIGNS, id="isfinite"),
    case("x.isnan()", x=np.array([1, 2], np.int8), id="isnan_int8"),
    case("x.reciprocal()", x=f32(-2.0, -0.0, 0.0, 4.0, inf), signed_zeros=True, id="reciprocal"),
    case("x.rsqrt()", x=f32(0.0, -0.0, 4.0, inf, -1.0), id="rsqrt"),
    case("x.nan_to_num()", "torch.nan_to_num(x)", x=SIGNS, id="nan_to_num_defaults"),
    case("x.nan_to_num(nan=1.0, posinf=2.0, neginf=-3.0)", "torch.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-3.0)",
         x=SIGNS, id="nan_to_num_values"),
    case("x.nan_to_num()", "torch.nan_to_num(x)", x=SIGNS.astype(np.float64), id="nan_to_num_float64"),
    case("x.nan_to_num(nan=3.0)", "torch.nan_to_num(x, nan=3.0)", x=np.array([1, 2], np.int32), id="nan_to_num_int"),
    case("x.clamp(lo, hi)", "torch.clamp(x, lo, hi)", x=f32(1.0, nan, 3.0, 0.2, -1.0),
         lo=f32(2.0, 0.0, nan, 0.0, 0.0), hi=f32(0.5, 1.0, 4.0, 1.0, 1.0), id="clamp_tensor_bounds_nan"),
    case("x.clamp(lo, hi)", "torch.clamp(x, lo, hi)", x=f32(0.0, 1.0, 0.5, 2.0, nan, -1.0, 0.5, 3.0, -inf),
         lo=f32(0.0, 0.0, 0.0, 0.0, 0.0, nan, 2.0, 0.0, -inf), hi=f32(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, nan, 0.0),
         id="clamp_tensor_bounds_ties_split_and_nan_goes_to_x"),
    case("x.clamp(min=lo)", "torch.clamp(x, min=lo)", x=f32(1.0, 3.0, 0.2, -1.0), lo=f32(2.0, 0.0, 0.5, -1.5),
         id="clamp_tensor_min"),
    case("x.clamp(max=hi)", "torch.clamp(x, max=hi)", x=f32(1.0, 3.0, 0.2, -1.0), hi=f32(2.0, 0.0, 0.5, -1.5),
         id="clamp_tensor_max"),
    case("x.clamp(min=0.0, max=1.0)", "torch.clamp(x, min=0.0, max=1.0)", x=f32(0.0, 1.0, 0.5, 2.0, nan, -3.0),
         id="clamp_scalar_bounds_gradient_0_at_bounds"),
    case("x.clamp_min(0.5)", "torch.clamp_min(x, 0.5)", x=X, id="clamp_min"),
    case("x.clamp_max(0.5)", "torch.clamp_max(x, 0.5)", x=X, id="clamp_max"),
    case("x.add(y, alpha=2.5)", "torch.add(x, y, alpha=2.5)", x=X, y=Y, id="add_alpha"),
    case("x.sub(y, alpha=-2)", "torch.sub(x, y, alpha=-2)", x=X, y=Y, id="sub_alpha"),
    case("x.add(y, alpha=3)", "torch.add(x, y, alpha=3)", x=np.array([1, 2], np.int32), y=np.array([5, -7], np.int32),
         id="add_alpha_int"),
    case("x.subtract(y)", "torch.subtract(x, y)", x=X, y=Y, id="subtract"),
    case("x.multiply(y)", "torch.multiply(x, y)", x=X, y=Y, id="multiply"),
    case("x.true_divide(y)", "torch.true_divide(x, y)", x=X, y=Y, id="true_divide"),
    case("x.divide(y)", "torch.divide(x, y)", x=X, y=Y, id="divide"),
    case("x.negative()", "torch.negative(x)", x=X, id="negative"),
    case("x.absolute()", "torch.absolute(x)", x=SIGNS, signed_zeros=True, id="absolute"),
]  # fmt: skip

TABLE = Table(CASES)


@pytest.mark.parametrize("name", TABLE.ids)
def test_math_function_matches_torch(device: str, name: str) -> None:
    TABLE.assert_agrees(device, name)


def test_numpy_style_aliases_are_the_same_functions() -> None:
    pairs = [("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"), ("arctan2", "atan2"), ("arcsinh", "asinh")]
    pairs += [("arccosh", "acosh"), ("arctanh", "atanh"), ("fix", "trunc"), ("sgn", "sign"), ("absolute", "abs")]
    for alias, name in pairs:
        assert getattr(Tensor, alias) is getattr(Tensor, name), alias


def test_allclose_is_a_python_bool(device: str) -> None:
    x = Tensor(f32(1.0, 2.0, nan))
    assert x.allclose(Tensor(f32(1.0, 2.0 + 1e-6, nan)), equal_nan=True) is True
    assert x.allclose(Tensor(f32(1.0, 2.1, nan)), equal_nan=True) is False
    assert x.allclose(Tensor(f32(1.0, 2.0, nan))) is False  # NaN is not close to NaN by default, as torch


def test_isclose_of_two_dtypes_raises_as_torch() -> None:
    with pytest.raises(TypeError, match="isclose: x is float32 and other float64"):
        Tensor(f32(1.0)).isclose(Tensor(np.array([1.0])))


def test_sign_has_gradient_zero_as_torch(device: str) -> None:
    x = Tensor(SIGNS, requires_grad=True)
    (x.sign() * 3.0 + x.sgn()).sum().backward()
    assert x.grad.tolist() == [0.0] * len(SIGNS)


def test_add_with_a_float_alpha_on_ints_raises_as_torch() -> None:
    with pytest.raises(TypeError, match="add: alpha=2.5 is a float and the operands are ints"):
        Tensor([1, 2]).add(Tensor([1, 2]), alpha=2.5)


def test_lerp_of_int_start_raises_as_torch() -> None:
    with pytest.raises(TypeError, match="lerp: a int32 start"):
        Tensor([1, 2]).lerp(Tensor([3, 4]), 0.5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_widths_round_once_from_float64_on_numpy(dtype: str) -> None:
    # the c device declines half widths; on numpy they compute in float64 and round once, as torch's float32
    x = np.array([-3.0, -0.5, 0.0, 0.7, 2.0, 100.0], np.float32)
    for fn in ["sin", "atan", "expm1", "log1p", "asinh"]:
        got = getattr(Tensor(x).cast(dtype), fn)()
        narrow = torch.tensor(x).to(getattr(torch, dtype)).double()  # the same half-width input
        want = getattr(torch, fn)(narrow).to(getattr(torch, dtype)).float().numpy()
        assert got.dtype.name == dtype
        np.testing.assert_array_equal(got.cast("float32").numpy(), want, err_msg=f"{fn} {dtype}")


def test_two_over_pi_bits_match_fdlibm_table() -> None:
    from limn.composed.math.trig import two_over_pi_bits

    # fdlibm's ipio2 table opens with these 24-bit chunks of 2/pi
    assert two_over_pi_bits(24 * 6) == int("A2F9836E4E441529FC2757D1F534DDC0DB629599"[:36], 16)


# ---- the accuracy sweep: every function over the whole range, against torch's float64 ----

SWEEP_FUNCTIONS = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]
SWEEP_FUNCTIONS += ["exp2", "log2", "log10", "log1p", "expm1", "tanh"]


def _sweep_inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1234)
    decades32 = 10.0 ** rng.uniform(-30, 38.5, 3000)
    near = np.array([k * math.pi / 2 for k in range(1, 200)] + [k * math.pi / 2 for k in (1e6, 1e9, 3e12)])
    x32 = np.concatenate(
        [decades32, -decades32, rng.uniform(-2, 2, 1000), near, -near, [0.0, -0.0, 1.0, -1.0, 3.4028235e38]]
    ).astype(np.float32)
    x32 = np.concatenate([x32, np.nextafter(x32[-5:-1], np.float32(2)), SUBNORMAL, NON_FINITE])
    decades64 = 10.0 ** rng.uniform(-300, 308, 3000)
    x64 = np.concatenate([decades64, -decades64, rng.uniform(-2, 2, 1000), near, [6381956970095103 * 2.0**797]])
    return x32, x64


def _relative_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| / |want| elementwise (0 where both are NaN or one infinity; inf where one is NaN alone)."""
    got, want64 = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.abs(got - want64) / np.maximum(np.abs(want64), np.finfo(want.dtype).smallest_subnormal)
    err[(np.isnan(got) & np.isnan(want64)) | (got == want64)] = 0.0
    err[np.isnan(err)] = np.inf
    return err


SWEEP_BINARY = ["atan2", "hypot", "logaddexp", "logaddexp2"]


def test_erf_is_within_a_few_float64_ulps_across_its_range_and_gelu_float64_with_it() -> None:
    # the series below 2.5 and the continued fraction past it, both sides of the seam, tiny and large values
    x = np.concatenate([np.linspace(-7.0, 7.0, 4001), [2.4999999999, 2.5, 2.5000000001, 1e-300, -1e-20, 27.0]])
    want = torch.erf(torch.tensor(x)).numpy()
    got = Tensor(x).erf().numpy()
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-300)
    assert rel.max() < 4e-15, f"erf float64 off by {rel.max():.3g} relative at x = {x[rel.argmax()]!r}"
    # gelu is x (1 + erf(x / sqrt 2)) / 2 in both: for x < 0 the 1 + erf cancels, so an ulp of 1 times |x|
    gelu = Tensor(x).gelu().numpy()
    np.testing.assert_allclose(gelu, torch.nn.functional.gelu(torch.tensor(x)).numpy(), rtol=1e-14, atol=2e-15)


def test_accuracy_sweep_over_the_whole_float_range(device: str) -> None:
    x32, x64 = _sweep_inputs()
    y32, y64 = np.random.default_rng(9).permutation(x32), np.random.default_rng(9).permutation(x64)
    a32, a64, b32, b64 = Tensor(x32), Tensor(x64), Tensor(y32), Tensor(y64)
    outs = {fn: (getattr(a32, fn)(), getattr(a64, fn)()) for fn in SWEEP_FUNCTIONS}
    outs |= {fn: (getattr(a32, fn)(b32), getattr(a64, fn)(b64)) for fn in SWEEP_BINARY}
    limn.realize(*[t for pair in outs.values() for t in pair])
    worst = {}
    for fn, (o32, o64) in outs.items():
        torch_fn = getattr(torch, fn)
        with np.errstate(all="ignore"):
            if fn in SWEEP_BINARY:
                want32 = torch_fn(torch.tensor(x32, dtype=torch.float64), torch.tensor(y32, dtype=torch.float64))
                want32, want64 = want32.numpy().astype(np.float32), torch_fn(torch.tensor(x64), torch.tensor(y64))
                want64 = want64.numpy()
            else:
                want32 = torch_fn(torch.tensor(x32.astype(np.float64))).numpy().astype(np.float32)
                want64 = torch_fn(torch.tensor(x64)).numpy()
        e32, e64 = _relative_error(o32.numpy(), want32), _relative_error(o64.numpy(), want64)
        worst[fn] = (float(e32.max()), float(e64.max()))
        assert e32.max() <= 1e-5, f"{fn} float32: {e32.max():.3g} at x = {x32[e32.argmax()]!r}"
        assert e64.max() <= 1e-12, f"{fn} float64: {e64.max():.3g} at x = {x64[e64.argmax()]!r}"
        zeros = (o32.numpy() == 0) & (want32 == 0)
        assert np.array_equal(np.signbit(o32.numpy()[zeros]), np.signbit(want32[zeros])), f"{fn}: signs of zeros"
    print("worst relative error (float32, float64):", worst)
