"""Rounding and division with rounding against torch, on numpy and on c: floor, ceil, round, trunc, frac, fmod,
remainder, floor_divide, div's rounding modes and the // and % operators, on floats and ints, with the
signs of zeros, huge floats (already integers), infinities and NaN as named cases; exact fmod over the range.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracle import Table, case

import limn
from limn import Tensor
from limn.composed.math import exact

nan, inf = math.nan, math.inf


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def i32(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


X = f32(-2.5, -1.5, -0.7, -0.5, -0.3, 0.3, 0.5, 1.5, 2.5, 3.7)
SPECIAL = f32(-0.0, 0.0, inf, -inf, nan, 1e-45, -1e-45)
HUGE = f32(2.0**23, 2.0**23 + 1, -(2.0**24) - 2, 8388607.5, -8388607.5, 1e30, -3e38, 16777217.0)
INT_LIMITS = np.array([-(2**31), 2**31 - 1, 0, -7, 7], np.int32)
X64 = np.array([-2.5, -0.5, 0.5, 2.5, 2.0**52 + 1, -(2.0**52) - 0.5, 4503599627370495.5, 1e300], np.float64)

CASES = []
for fn in ["floor", "ceil", "round", "trunc", "fix"]:
    torch_fn = "trunc" if fn == "fix" else fn
    CASES += [
        case(f"x.{fn}()", f"x.{torch_fn}()", x=X, signed_zeros=True, id=fn),
        case(f"x.{fn}()", f"x.{torch_fn}()", x=SPECIAL, signed_zeros=True, id=f"{fn}_signed_zeros_inf_nan"),
        case(f"x.{fn}()", f"x.{torch_fn}()", x=HUGE, id=f"{fn}_huge_floats_are_integers_already"),
        case(f"x.{fn}()", f"x.{torch_fn}()", x=X64, signed_zeros=True, tol=0, id=f"{fn}_float64"),
        case(f"x.{fn}()", f"x.{torch_fn}()", x=INT_LIMITS, id=f"{fn}_of_int32_is_itself"),
        case(f"x.{fn}()", f"x.{torch_fn}()", x=np.zeros((2, 0), np.float32), id=f"{fn}_empty"),
        case(f"x.{fn}()", f"x.{torch_fn}()", x=np.array(-0.5, np.float32), signed_zeros=True, id=f"{fn}_0d"),
    ]
CASES += [
    case("x.round()", x=f32(0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5), signed_zeros=True, id="round_half_to_even"),
    case("x.round(decimals=1)", x=f32(1.25, 2.35, -0.05, 1234.5678), id="round_decimals_1"),
    case("x.round(decimals=3)", x=f32(2.5, 0.0005, -2.0005, 1e30), id="round_decimals_3"),
    case(
        "x.round(decimals=-2)", x=f32(1250.0, 1350.0, -49.0, 12345.0), signed_zeros=True, id="round_decimals_negative"
    ),
    case("x.frac()", x=X, id="frac"),
    case("x.frac()", x=f32(-0.0, inf, -inf, nan, 2.0**30, -1.75), id="frac_signed_zero_inf_nan"),
    case("x.frac()", x=X64, tol=0, id="frac_float64"),
]

# ---- division with rounding ----
A = f32(7.0, -7.0, 7.0, -7.0, 5.5, -5.5, 0.0, -0.0, 3.0, -3.0, 1.0, 6.0)
B = f32(3.0, 3.0, -3.0, -3.0, 2.0, 2.0, 1.0, 1.0, -3.0, 3.0, 0.25, 0.1)
A_SPECIAL = f32(5.0, -5.0, 0.0, inf, -inf, 5.0, -5.0, nan, 5.0, 1e30, -1e30, 3e38, 1e-45)
B_SPECIAL = f32(0.0, 0.0, 0.0, 2.0, 2.0, inf, inf, 1.0, nan, 3.0, 7.0, 1e-45, 3e38)
# (torch's int32 kernels trap on -2**31 / -1 in the CPU's divide: test_int_min_over_minus_one_wraps holds it)
IA = i32(7, -7, 7, -7, 0, -(2**31), -(2**31), 2**31 - 1, 5)
IB = i32(3, 3, -3, -3, 5, 2, 7, -2, 1)
A_ALL, B_ALL = np.concatenate([A, A_SPECIAL]), np.concatenate([B, B_SPECIAL])
for expr, theirs, name in [
    ("x.fmod(y)", "torch.fmod(x, y)", "fmod"),
    ("x.remainder(y)", "torch.remainder(x, y)", "remainder"),
]:
    CASES += [
        case(expr, theirs, x=A_ALL, y=B_ALL, id=name),  # with inf, NaN and 0 (gradients included)
        case(expr, theirs, x=A_ALL, y=B_ALL, signed_zeros=True, grad=False, id=f"{name}_signed_zeros_inf_nan"),
        case(expr, theirs, x=IA, y=IB, id=f"{name}_int32_limits"),
        case(expr, theirs, x=A.astype(np.float64), y=B.astype(np.float64), tol=0, id=f"{name}_float64"),
    ]
CASES += [
    case("x % y", "x % y", x=A_ALL, y=B_ALL, signed_zeros=True, grad=False, id="mod_operator"),
    case("x % y", "x % y", x=IA, y=IB, id="mod_operator_int32"),
    case("x % y", "x % y", x=A.reshape(3, 4), y=f32(3.0, -2.0, 0.5, 7.0), id="mod_operator_broadcasts"),
]
for expr, theirs, name in [
    ("x // y", "x // y", "floordiv_operator"),
    ("x.floor_divide(y)", "torch.floor_divide(x, y)", "floor_divide"),
    ("x.div(y, rounding_mode='floor')", "torch.div(x, y, rounding_mode='floor')", "div_floor"),
    ("x.div(y, rounding_mode='trunc')", "torch.div(x, y, rounding_mode='trunc')", "div_trunc"),
]:
    grad = "div(" in expr  # torch has no derivative for floor_divide; div's rounding modes have 0
    CASES += [
        case(expr, theirs, x=A_ALL, y=B_ALL, signed_zeros=True, grad=grad, id=name),
        case(expr, theirs, x=IA, y=IB, id=f"{name}_int32_limits"),
    ]
CASES += [
    case("x.div(y, rounding_mode='floor')", "torch.div(x, y, rounding_mode='floor')", x=A.astype(np.float64),
         y=B.astype(np.float64), tol=0, id="div_floor_float64"),
    case("x.div(y, rounding_mode='trunc')", "torch.div(x, y, rounding_mode='trunc')", x=A.astype(np.float64),
         y=B.astype(np.float64), tol=0, id="div_trunc_float64"),
]  # fmt: skip
CASES += [
    case("x // 2", "x // 2", x=i32(7, -7, 0, -1), id="floordiv_int_by_python_int"),
    case("x // 2.5", "x // 2.5", x=i32(5, -5), id="floordiv_int_by_python_float_is_float32"),
    case("7 // x", "7 // x", x=i32(2, -2, 3), id="rfloordiv"),
    case("7.5 % x", "7.5 % x", x=i32(2, -2), id="rmod_python_float_over_ints"),
    case("x % 3", "x % 3", x=np.array([5, -5, -128, 127], np.int8), id="mod_int8"),
    case("x // y", "x // y", x=np.array([-128, 100], np.int8), y=np.array([-1, -3], np.int8), id="floordiv_int8_wraps"),
    case("x % 0.5", "x % 0.5", x=X, id="mod_by_python_float"),
    case("-x % 3.0", "-x % 3.0", x=X, id="rmod_of_negated"),
]  # fmt: skip

TABLE = Table(CASES)


@pytest.mark.parametrize("name", TABLE.ids)
def test_rounding_matches_torch(device: str, name: str) -> None:
    TABLE.assert_agrees(device, name)


@pytest.mark.parametrize("expr", ["x // y", "x % y", "x.fmod(y)", "x.div(y, rounding_mode='trunc')"])
def test_int_division_by_zero_raises_zero_division_error_as_torch(expr: str) -> None:
    x, y = Tensor(i32(1, 2)), Tensor(i32(1, 0))
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        eval(expr, {"x": x, "y": y})
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        eval(expr, {"x": x, "y": 0})


@pytest.mark.parametrize("expr", ["x // x", "x % x", "x.floor()", "x.round()"])
def test_bool_rounding_raises_as_torch(expr: str) -> None:
    x = Tensor(np.array([True, False]))
    with pytest.raises(TypeError, match="bool"):
        eval(expr, {"x": x})


def test_frac_and_round_decimals_of_ints_raise_as_torch() -> None:
    with pytest.raises(TypeError, match="frac: a int32 tensor"):
        Tensor(i32(1)).frac()
    with pytest.raises(TypeError, match="round: decimals=1 on a int32 tensor"):
        Tensor(i32(1)).round(decimals=1)


def test_int_min_over_minus_one_wraps_as_torch_int64_does(device: str) -> None:
    # torch wraps -2**31 // -1 to -2**31 (int64 kernels; its int32 ones trap in the CPU's divide)
    x = Tensor(i32(-(2**31)))
    assert (x // -1).tolist() == [-(2**31)]
    assert (x % -1).tolist() == [0]
    assert x.fmod(-1).tolist() == [0]
    assert x.div(-1, rounding_mode="trunc").tolist() == [-(2**31)]


def test_div_rejects_an_unknown_rounding_mode() -> None:
    with pytest.raises(ValueError, match="rounding_mode must be None, 'trunc' or 'floor', not 'ceil'"):
        Tensor(f32(1.0)).div(2.0, rounding_mode="ceil")


def test_fmod_is_exact_over_the_float32_range_and_float64_to_2_300(device: str) -> None:
    rng = np.random.default_rng(7)
    n = 4000
    a32 = (10.0 ** rng.uniform(-45, 38.5, n) * rng.choice([-1, 1], n)).astype(np.float32).astype(np.float64)
    b32 = (10.0 ** rng.uniform(-45, 38.5, n) * rng.choice([-1, 1], n)).astype(np.float32).astype(np.float64)
    a64 = 10.0 ** rng.uniform(-300, 308, n) * rng.choice([-1, 1], n)
    b64 = a64 / 10.0 ** rng.uniform(-10, 85, n)  # quotients up to 1e85 < 2**300
    got32, got64 = exact.fmod(Tensor(a32), Tensor(b32)), exact.fmod(Tensor(a64), Tensor(b64))
    limn.realize(got32, got64)
    np.testing.assert_array_equal(got32.numpy(), np.fmod(a32, b32))
    np.testing.assert_array_equal(got64.numpy(), np.fmod(a64, b64))


def test_float64_fmod_past_2_300_is_nan_not_a_wrong_number(device: str) -> None:
    # the named difference from torch: limn's long division stops at 12 steps of 25 bits
    a = np.array([1e300, 1e200, 1e80], np.float64)
    b = np.array([1e-300, 1e-150, 3.0], np.float64)
    got = Tensor(a).fmod(Tensor(b)).numpy()
    assert np.isnan(got[:2]).all(), got
    assert got[2] == np.fmod(a[2], b[2])


def test_exact_divide_is_correctly_rounded(device: str) -> None:
    rng = np.random.default_rng(3)
    y = np.round(rng.uniform(-100, 100, 3000))
    y[y == 0] = 7.0
    x = np.concatenate([np.round(rng.uniform(-1e6, 1e6, 3000)) * y, rng.uniform(-1e6, 1e6, 3000)])
    y = np.concatenate([y, rng.uniform(0.001, 100, 3000)])
    np.testing.assert_array_equal(exact.divide(Tensor(x), Tensor(y)).numpy(), x / y)
