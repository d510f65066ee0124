"""Edge values against torch, on the numpy device and on c: NaN, inf, -0.0 and the int limits meeting
comparisons, reductions, maximum/minimum, clip, relu, powers, var/std; empty axes and 0-d tensors.

Each test states one rule. `agree` runs one expression in limn and in torch from the same inputs and
compares values and gradients with NaN matched to NaN and inf to inf (and signs of zeros where the rule
is about them); a failure prints a standalone reproducer. Where torch raises, limn must raise a typed
error that says what was asked and what to do.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import limn
from limn import Tensor
from limn.ops import Op, toposort

nan, inf = math.nan, math.inf
F32 = np.finfo(np.float32)
TOLERANCE = 1e-5


@pytest.fixture(params=["numpy", "c"])
def device(request: pytest.FixtureRequest) -> str:
    try:
        limn.set_device(request.param)
    except limn.DeviceError as e:
        pytest.skip(f"device {request.param!r} cannot run here: {e}")
    return request.param


def _literal(a: np.ndarray) -> str:
    """A numpy array as python source that runs (nan and inf spelled out)."""
    body = repr(a.tolist()).replace("nan", "float('nan')").replace("inf", "float('inf')")
    return f"np.array({body}, np.{a.dtype})"


def _reproducer(device: str, limn_expr: str, torch_expr: str, inputs: dict[str, np.ndarray], grad: bool) -> str:
    lines = ["import math", "import numpy as np", "import torch", "import limn", "from limn import Tensor", ""]
    lines += [f"limn.set_device({device!r})"]
    for name, a in inputs.items():
        lines.append(f"{name} = Tensor({_literal(a)}, requires_grad={grad and a.dtype.kind == 'f'})")
    lines += [f"out = {limn_expr}", "print(out.numpy())"]
    if grad:
        lines += ["out.sum().backward()"] + [
            f"print({n}.grad.numpy())" for n, a in inputs.items() if a.dtype.kind == "f"
        ]
    lines.append("")
    for name, a in inputs.items():
        lines.append(f"{name} = torch.tensor({_literal(a)}, requires_grad={grad and a.dtype.kind == 'f'})")
    lines += [f"out = {torch_expr}", "print(out)"]
    if grad:
        lines += ["out.sum().backward()"] + [f"print({n}.grad)" for n, a in inputs.items() if a.dtype.kind == "f"]
    return "\n".join(lines)


def same(
    got: np.ndarray, want: np.ndarray, what: str, signed_zeros: bool = False, tol: float = TOLERANCE
) -> str | None:
    """None when got matches want: shape, dtype family, values (NaN for NaN, inf for inf), zero signs if asked."""
    if got.shape != want.shape:
        return f"{what}: shape {got.shape}, torch {want.shape}"
    if got.dtype.kind != want.dtype.kind or (got.dtype.kind == "f" and got.dtype != want.dtype):
        return f"{what}: dtype {got.dtype}, torch {want.dtype}"
    if got.dtype.kind != "f":
        return None if np.array_equal(got, want) else f"{what}: {got.tolist()}, torch {want.tolist()}"
    try:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    except AssertionError:
        return f"{what}: {got.tolist()}, torch {want.tolist()}"
    zeros = (got == 0) & (want == 0)
    if signed_zeros and not np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros])):
        return f"{what}: signs of zeros differ: {got.tolist()}, torch {want.tolist()}"
    return None


def agree(
    device: str,
    limn_expr: str,
    torch_expr: str | None = None,
    *,
    grad: bool = True,
    signed_zeros: bool = False,
    tol: float = TOLERANCE,
    **inputs: np.ndarray,
) -> None:
    """Runs limn_expr on limn tensors and torch_expr (default: the same text) on torch tensors made from
    `inputs`, and asserts the values agree; with grad, so do the gradients of out.sum() w.r.t. each float
    input. An input holding a python list becomes float32."""
    torch_expr = torch_expr or limn_expr
    inputs = {k: v if isinstance(v, np.ndarray) else np.array(v, np.float32) for k, v in inputs.items()}
    floats = [k for k, v in inputs.items() if v.dtype.kind == "f"]
    ours = {k: Tensor(v, requires_grad=grad and k in floats) for k, v in inputs.items()}
    theirs = {k: torch.tensor(v, requires_grad=grad and k in floats) for k, v in inputs.items()}
    repro = _reproducer(device, limn_expr, torch_expr, inputs, grad)
    out = eval(limn_expr, {"Tensor": Tensor, "limn": limn, "math": math, **ours})
    tout = eval(torch_expr, {"torch": torch, "math": math, **theirs})
    problems = [same(out.numpy(), tout.detach().numpy(), "value", signed_zeros, tol)]
    if grad:
        out.sum().backward()
        tout.sum().backward()
        for k in floats:
            if ours[k].grad is None:
                problems.append(
                    f"d/d{k}: limn has no gradient (the output is cut off from {k}), torch {theirs[k].grad}"
                )
            else:
                problems.append(same(ours[k].grad.numpy(), theirs[k].grad.numpy(), f"d/d{k}", signed_zeros, tol))
    problems = [p for p in problems if p]
    assert not problems, f"{limn_expr} on {device}: " + "; ".join(problems) + f"\n\n---- reproducer ----\n{repro}"


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
    for expr, texpr in [("x.max(1)", "x.amax(1)"), ("x.min(1)", "x.amin(1)"), ("x.max()", "x.amax()")]:
        agree(device, expr, texpr, grad=False, x=x)


def test_max_gradient_is_nan_over_a_slice_holding_nan_as_torch_amax(device: str) -> None:
    x = np.array([[1.0, nan, 3.0], [1.0, 3.0, 3.0], [inf, 2.0, inf]], np.float32)
    agree(device, "x.max(1)", "x.amax(1)", x=x)
    agree(device, "x.min(1)", "x.amin(1)", x=x)


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
