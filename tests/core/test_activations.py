"""The activations (limn.composed.functional.activations, as Tensor methods and as limn.nn functions) against torch, on
numpy and c.

Each row runs one expression in limn and in torch from the same inputs and compares values and the gradients
of their sum (tests/oracle.py). The rules: torch's gradient at each kink and at NaN (the KINKS rows), torch's
signs of zeros (the SIGNED rows), torch's finite answers for |x| up to 3e38 where the plain formulas overflow
(the HUGE rows), float64, zero-size and 0-d inputs, the int dtypes torch accepts, and torch's errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from oracle import Table, case
from test_higher_order import check_hvp

import limn
import limn.nn
from limn import Tensor

nan, inf = math.nan, math.inf
F = "torch.nn.functional"

# every activation: its limn expression and torch's, over an input x
ACTIVATIONS = {
    "relu": ("x.relu()", f"{F}.relu(x)"),
    "leaky_relu": ("x.leaky_relu(0.1)", f"{F}.leaky_relu(x, 0.1)"),
    "leaky_relu_default": ("x.leaky_relu()", f"{F}.leaky_relu(x)"),
    "elu": ("x.elu()", f"{F}.elu(x)"),
    "elu_alpha": ("x.elu(alpha=2.0)", f"{F}.elu(x, alpha=2.0)"),
    "selu": ("x.selu()", f"{F}.selu(x)"),
    "celu": ("x.celu(0.5)", f"{F}.celu(x, 0.5)"),
    "softplus": ("x.softplus()", f"{F}.softplus(x)"),
    "softplus_beta": ("x.softplus(beta=2.0, threshold=10.0)", f"{F}.softplus(x, beta=2.0, threshold=10.0)"),
    "softplus_beta_half": ("x.softplus(0.5)", f"{F}.softplus(x, 0.5)"),
    "logsigmoid": ("x.logsigmoid()", f"{F}.logsigmoid(x)"),
    "mish": ("x.mish()", f"{F}.mish(x)"),
    "silu": ("x.silu()", f"{F}.silu(x)"),
    "swish": ("x.swish()", f"{F}.silu(x)"),
    "quick_gelu": ("x.quick_gelu()", "x * torch.sigmoid(1.702 * x)"),
    "gelu_tanh": ("x.gelu(approximate='tanh')", f"{F}.gelu(x, approximate='tanh')"),
    "sigmoid": ("x.sigmoid()", "torch.sigmoid(x)"),
    "softsign": ("x.softsign()", f"{F}.softsign(x)"),
    "tanhshrink": ("x.tanhshrink()", f"{F}.tanhshrink(x)"),
    "hardtanh": ("x.hardtanh()", f"{F}.hardtanh(x)"),
    "hardtanh_bounds": ("x.hardtanh(-0.5, 3.0)", f"{F}.hardtanh(x, -0.5, 3.0)"),
    "relu6": ("x.relu6()", f"{F}.relu6(x)"),
    "hardsigmoid": ("x.hardsigmoid()", f"{F}.hardsigmoid(x)"),
    "hardswish": ("x.hardswish()", f"{F}.hardswish(x)"),
    "threshold": ("x.threshold(1.0, -2.0)", f"{F}.threshold(x, 1.0, -2.0)"),
    "softshrink": ("x.softshrink()", f"{F}.softshrink(x)"),
    "softshrink_lambd": ("x.softshrink(1.0)", f"{F}.softshrink(x, 1.0)"),
    "hardshrink": ("x.hardshrink()", f"{F}.hardshrink(x)"),
    "hardshrink_lambd": ("x.hardshrink(lambd=1.0)", f"{F}.hardshrink(x, lambd=1.0)"),
}

# the kinks of every activation above (0, +-0.5, +-1, +-3, 6, the thresholds), the infinities, and points
# between them
KINK_VALUES = np.array(
    [-inf, -6.0, -3.0, -2.5, -1.0, -0.5, -0.25, -0.0, 0.0, 0.3, 0.5, 1.0, 2.2, 3.0, 5.0, 6.0, 10.0, 20.0]
    + [21.0, 41.0, inf, -20.0, -41.0, 1e-10, -1e-10, -4.0, -1.5, -0.75, 0.75, 1.5, 2.5, 4.0],
    np.float32,
)  # 32 values: torch runs all of them through its vectorized kernels (see NANS)
# NaN, 64 times: at NaN torch's vectorized CPU kernels (on float32 runs of 16 or 32, depending on the op) and
# its scalar ones (shorter tensors, and the tail past the last full run) give different gradients for hardtanh,
# relu6, hardshrink, softshrink, hardswish and elu, and softshrink different signs of zero; limn follows the
# vectorized ones
NANS = np.full(64, nan, np.float32)
HUGE_VALUES = np.array([-3e38, -1e30, -1e10, -100.0, -30.0, 30.0, 100.0, 1e10, 1e30, 3e38], np.float32)
SMOOTH_F64 = np.random.default_rng(0).normal(0, 3, (4, 5))  # float64
EMPTY = np.zeros((0, 3), np.float32)
SCALAR = np.array(-0.75, np.float32)


def _kink_cases() -> list:
    rows = []
    for name, (ours, theirs) in ACTIVATIONS.items():
        rows.append(case(ours, theirs, x=KINK_VALUES, id=f"{name}-gradient-at-kinks-and-inf"))
        rows.append(case(ours, theirs, x=KINK_VALUES, grad=False, signed_zeros=True, id=f"{name}-value-signed-zeros"))
        rows.append(case(ours, theirs, x=NANS, id=f"{name}-nan-as-torchs-vectorized-kernel"))
    return rows


KINKS = Table(_kink_cases())


@pytest.mark.parametrize("name", KINKS.ids)
def test_value_and_gradient_at_the_kinks_nan_and_inf_match_torch(device: str, name: str) -> None:
    KINKS.assert_agrees(device, name)


STABLE = ["softplus", "softplus_beta", "logsigmoid", "elu", "elu_alpha", "selu", "celu", "mish", "silu", "sigmoid"]
HUGE = Table(
    [case(*ACTIVATIONS[name], x=HUGE_VALUES, id=f"{name}-finite-for-huge-magnitudes") for name in STABLE]
    + [case(*ACTIVATIONS[name], x=HUGE_VALUES, id=f"{name}-huge") for name in ACTIVATIONS if name not in STABLE]
)


@pytest.mark.parametrize("name", HUGE.ids)
def test_huge_magnitudes_give_torchs_finite_answer_not_inf_or_nan(device: str, name: str) -> None:
    HUGE.assert_agrees(device, name)


def test_the_stable_activations_are_finite_at_three_e38() -> None:
    x = Tensor(HUGE_VALUES, requires_grad=True)
    for name in STABLE:
        out = eval(ACTIVATIONS[name][0], {"x": x})
        x.grad = None
        out.sum().backward()
        assert np.isfinite(out.numpy()).all() and np.isfinite(x.grad.numpy()).all(), f"{name}: {out.numpy()}"


SHAPES = Table(
    [case(ours, theirs, x=SMOOTH_F64, id=f"{name}-float64") for name, (ours, theirs) in ACTIVATIONS.items()]
    + [case(ours, theirs, x=EMPTY, id=f"{name}-zero-size") for name, (ours, theirs) in ACTIVATIONS.items()]
    + [case(ours, theirs, x=SCALAR, id=f"{name}-0d") for name, (ours, theirs) in ACTIVATIONS.items()]
)


@pytest.mark.parametrize("name", SHAPES.ids)
def test_float64_zero_size_and_0d_inputs_match_torch(device: str, name: str) -> None:
    SHAPES.assert_agrees(device, name)


HALF = Table(
    [
        case(ours, theirs, x=KINK_VALUES[np.abs(KINK_VALUES) < 60].astype(np.float16), tol=2e-3, id=f"{name}-float16")
        for name, (ours, theirs) in ACTIVATIONS.items()
    ]
)


@pytest.mark.parametrize("name", HALF.ids)
def test_float16_matches_torch_on_the_numpy_device(name: str) -> None:
    HALF.assert_agrees("numpy", name)  # the c device declines half widths


# second derivatives (backward with create_graph=True), against torch's, for the activations that compose
# exp, log1p and expm1 with a gradient of their own (limn.composed.math.stable.with_gradient_of keeps every order)
SECOND_ORDER = {
    "softplus": (lambda x: (x * 3).softplus().sum(), lambda x: torch.nn.functional.softplus(x * 3).sum()),
    "logsigmoid": (lambda x: (x * 3).logsigmoid().sum(), lambda x: torch.nn.functional.logsigmoid(x * 3).sum()),
    "elu": (lambda x: x.elu().sum(), lambda x: torch.nn.functional.elu(x).sum()),
    "celu": (lambda x: x.celu(0.5).sum(), lambda x: torch.nn.functional.celu(x, 0.5).sum()),
    "mish": (lambda x: x.mish().sum(), lambda x: torch.nn.functional.mish(x).sum()),
    "hardswish": (lambda x: (x * 3).hardswish().sum(), lambda x: torch.nn.functional.hardswish(x * 3).sum()),
    "glu": (lambda x: x.glu().sum(), lambda x: torch.nn.functional.glu(x).sum()),
    "normalize": (
        lambda x: (x.normalize() * Tensor(np.arange(4, dtype=np.float32))).sum(),
        lambda x: (torch.nn.functional.normalize(x) * torch.arange(4.0)).sum(),
    ),
}


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_derivatives_match_torch(name: str) -> None:
    ours, theirs = SECOND_ORDER[name]
    check_hvp(ours, theirs, [(3, 4)])


# ---- the rest: glu, prelu, softmax with dim= and dtype=, softmin, normalize, the limn.nn spellings ----

X23 = np.random.default_rng(1).normal(0, 2, (2, 3, 4)).astype(np.float32)
W3 = np.array([0.25, -0.5, 2.0], np.float32)
ZERO_ROW = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0], [1e-13, 0.0, 0.0]], np.float32)
TIES = np.array([[1.0, -1.0, 0.5], [2.0, 2.0, -2.0]], np.float32)
INT_VALUES = np.array([-7, -1, 0, 1, 2, 7], np.int32)

OTHERS = Table(
    [
        case("x.glu()", f"{F}.glu(x)", x=X23, id="glu-last-dim"),
        case("x.glu(dim=1)", f"{F}.glu(x[:, :2], dim=1)", x=X23[:, :2].copy(), id="glu-dim-1"),
        case("x.glu(0)", f"{F}.glu(x, 0)", x=np.zeros((0, 4), np.float32), id="glu-zero-size"),
        case("x.prelu(w)", f"{F}.prelu(x, w)", x=X23, w=W3, id="prelu-per-channel"),
        case("x.prelu(w)", f"{F}.prelu(x, w)", x=KINK_VALUES, w=np.array([0.2], np.float32), id="prelu-one-weight"),
        case("x.prelu(w)", f"{F}.prelu(x, w)", x=SCALAR, w=np.array([0.2], np.float32), id="prelu-0d"),
        case("x.softmax(dim=1)", "x.softmax(dim=1)", x=X23, id="softmax-dim"),
        case("x.softmax(axis=0)", "x.softmax(dim=0)", x=X23, id="softmax-axis-is-limns-name-for-dim"),
        case("x.softmax(-1, dtype='float64')", "x.softmax(-1, dtype=torch.float64)", x=X23, id="softmax-dtype"),
        case("x.softmax(0)", "x.softmax(0)", x=SCALAR, id="softmax-0d"),
        case("x.log_softmax(dim=1)", "x.log_softmax(dim=1)", x=X23, id="log_softmax-dim"),
        case("x.log_softmax(2, 'float64')", "x.log_softmax(2, torch.float64)", x=X23, id="log_softmax-dtype"),
        case("x.log_softmax(dim=0)", "x.log_softmax(dim=0)", x=SCALAR, id="log_softmax-0d"),
        case("x.softmin(1)", f"{F}.softmin(x, 1)", x=X23, id="softmin"),
        case(
            "x.softmin(dim=0, dtype='float64')",
            f"{F}.softmin(x, dim=0, dtype=torch.float64)",
            x=X23,
            id="softmin-dtype",
        ),
        case("x.normalize()", f"{F}.normalize(x)", x=X23, id="normalize-default-p2-dim1"),
        case("x.normalize(p=1.0, dim=-1)", f"{F}.normalize(x, p=1.0, dim=-1)", x=X23, id="normalize-p1"),
        case("x.normalize(p=3.0, dim=0)", f"{F}.normalize(x, p=3.0, dim=0)", x=X23, id="normalize-p3"),
        case("x.normalize(p=math.inf)", f"{F}.normalize(x, p=math.inf)", x=TIES, id="normalize-pinf-ties-share"),
        case("x.normalize()", f"{F}.normalize(x)", x=ZERO_ROW, id="normalize-zero-row-gradient-is-one-over-eps"),
        case("x.normalize(p=1.0)", f"{F}.normalize(x, p=1.0)", x=ZERO_ROW, id="normalize-p1-zero-row"),
        case("x.normalize(p=3.0)", f"{F}.normalize(x, p=3.0)", x=ZERO_ROW, id="normalize-p3-zero-row"),
        case("x.normalize(eps=0.5)", f"{F}.normalize(x, eps=0.5)", x=TIES, id="normalize-eps"),
        case("x.normalize(dim=0)", f"{F}.normalize(x, dim=0)", x=EMPTY, id="normalize-zero-size"),
        case("x.normalize(dim=0)", f"{F}.normalize(x, dim=0)", x=SMOOTH_F64, id="normalize-float64"),
        case("x.relu6()", f"{F}.relu6(x)", x=INT_VALUES, grad=False, id="relu6-int32-stays-int"),
        case("x.hardtanh(-2, 2)", f"{F}.hardtanh(x, -2, 2)", x=INT_VALUES, grad=False, id="hardtanh-int32"),
        case("x.threshold(1, 5)", f"{F}.threshold(x, 1, 5)", x=INT_VALUES, grad=False, id="threshold-int32"),
        case("x.softsign()", f"{F}.softsign(x)", x=INT_VALUES, grad=False, id="softsign-int32-gives-float"),
        case("x.tanhshrink()", f"{F}.tanhshrink(x)", x=INT_VALUES, grad=False, id="tanhshrink-int32-gives-float"),
        # the limn.nn spellings take torch.nn.functional's signatures
        case("limn.nn.leaky_relu(x, negative_slope=0.2)", f"{F}.leaky_relu(x, negative_slope=0.2)", x=KINK_VALUES),
        case("limn.nn.elu(x, 0.5)", f"{F}.elu(x, 0.5)", x=KINK_VALUES),
        case("limn.nn.celu(x, alpha=3.0)", f"{F}.celu(x, alpha=3.0)", x=KINK_VALUES),
        case("limn.nn.selu(x)", f"{F}.selu(x)", x=KINK_VALUES),
        case("limn.nn.softplus(x, 3.0, 5.0)", f"{F}.softplus(x, 3.0, 5.0)", x=KINK_VALUES),
        case(
            "limn.nn.hardtanh(x, min_val=-2.0, max_val=2.0)",
            f"{F}.hardtanh(x, min_val=-2.0, max_val=2.0)",
            x=KINK_VALUES,
        ),
        case("limn.nn.threshold(x, 0.5, 9.0)", f"{F}.threshold(x, 0.5, 9.0)", x=KINK_VALUES),
        case("limn.nn.relu(x)", f"{F}.relu(x)", x=KINK_VALUES),
        case("limn.nn.relu6(x)", f"{F}.relu6(x)", x=KINK_VALUES),
        case("limn.nn.silu(x)", f"{F}.silu(x)", x=X23),
        case("limn.nn.mish(x)", f"{F}.mish(x)", x=X23),
        case("limn.nn.gelu(x, approximate='tanh')", f"{F}.gelu(x, approximate='tanh')", x=X23),
        case("limn.nn.hardsigmoid(x)", f"{F}.hardsigmoid(x)", x=X23),
        case("limn.nn.hardswish(x)", f"{F}.hardswish(x)", x=X23),
        case("limn.nn.sigmoid(x)", "torch.sigmoid(x)", x=X23),
        case("limn.nn.tanh(x)", "torch.tanh(x)", x=X23),
        case("limn.nn.logsigmoid(x)", f"{F}.logsigmoid(x)", x=X23),
        case("limn.nn.softsign(x)", f"{F}.softsign(x)", x=X23),
        case("limn.nn.tanhshrink(x)", f"{F}.tanhshrink(x)", x=X23),
        case("limn.nn.softshrink(x, 0.75)", f"{F}.softshrink(x, 0.75)", x=X23),
        case("limn.nn.hardshrink(x, 0.75)", f"{F}.hardshrink(x, 0.75)", x=X23),
        case("limn.nn.glu(x, 1)", f"{F}.glu(x, 1)", x=X23[:, :2].copy()),
        case("limn.nn.prelu(x, w)", f"{F}.prelu(x, w)", x=X23, w=W3),
        case("limn.nn.normalize(x, 2.0, 2)", f"{F}.normalize(x, 2.0, 2)", x=X23),
        case("limn.nn.softmax(x, 1)", f"{F}.softmax(x, 1)", x=X23),
        case("limn.nn.softmax(x, dim=0, dtype=limn.float64)", f"{F}.softmax(x, dim=0, dtype=torch.float64)", x=X23),
        case("limn.nn.log_softmax(x, dim=2)", f"{F}.log_softmax(x, dim=2)", x=X23),
        case("limn.nn.softmin(x, dim=1)", f"{F}.softmin(x, dim=1)", x=X23),
    ]
)


@pytest.mark.parametrize("name", OTHERS.ids)
def test_glu_prelu_softmax_normalize_and_the_nn_spellings_match_torch(device: str, name: str) -> None:
    OTHERS.assert_agrees(device, name)


# ---- errors: where torch raises, limn raises a typed error ----

ERRORS = {
    "glu-odd-size": (
        lambda: Tensor.ones((2, 3)).glu(),
        lambda: torch.nn.functional.glu(torch.ones(2, 3)),
        ValueError,
        "odd size 3",
    ),
    "glu-0d": (lambda: Tensor.ones(()).glu(), lambda: torch.nn.functional.glu(torch.ones(())), ValueError, "0-d"),
    "hardtanh-min-above-max": (
        lambda: Tensor.ones(3).hardtanh(2.0, 1.0),
        lambda: torch.nn.functional.hardtanh(torch.ones(3), 2.0, 1.0),
        ValueError,
        "min_val 2.0 is greater than max_val 1.0",
    ),
    "softshrink-negative-lambd": (
        lambda: Tensor.ones(3).softshrink(-1.0),
        lambda: torch.nn.functional.softshrink(torch.ones(3), -1.0),
        ValueError,
        "lambd must be >= 0",
    ),
    "celu-alpha-0": (
        lambda: Tensor.ones(3).celu(0.0),
        lambda: torch.nn.functional.celu(torch.ones(3), 0.0),
        ValueError,
        "alpha cannot be 0",
    ),
    "prelu-weight-count": (
        lambda: Tensor.ones((2, 3)).prelu(Tensor.ones(2)),
        lambda: torch.nn.functional.prelu(torch.ones(2, 3), torch.ones(2)),
        ValueError,
        "weight has 2 values, but the input",
    ),
    "elu-of-int": (
        lambda: Tensor([1, 2]).elu(),
        lambda: torch.nn.functional.elu(torch.tensor([1, 2])),
        TypeError,
        "elu",
    ),
    "softplus-of-int": (
        lambda: Tensor([1, 2]).softplus(),
        lambda: torch.nn.functional.softplus(torch.tensor([1, 2])),
        TypeError,
        "float tensors only",
    ),
    "softmax-of-int": (
        lambda: Tensor([1, 2]).softmax(0),
        lambda: torch.nn.functional.softmax(torch.tensor([1, 2]), 0),
        TypeError,
        "softmax of a int32 tensor",
    ),
    "softmax-dim-out-of-range": (
        lambda: Tensor.ones((2, 3)).softmax(dim=2),
        lambda: torch.ones(2, 3).softmax(dim=2),
        IndexError,
        "axis 2 is out of range",
    ),
}


@pytest.mark.parametrize("mistake", ERRORS)
def test_where_torch_raises_limn_raises_a_typed_error(mistake: str) -> None:
    ours, theirs, error, message = ERRORS[mistake]
    with pytest.raises((RuntimeError, ValueError, IndexError, NotImplementedError, TypeError)):
        theirs()
    with pytest.raises(error, match=message):
        ours()


def test_inplace_true_raises_rather_than_computing_out_of_place() -> None:
    with pytest.raises(NotImplementedError, match=r"relu\(inplace=True\)"):
        limn.nn.relu(Tensor.ones(2), inplace=True)
