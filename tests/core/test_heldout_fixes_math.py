"""Fixes from a run of tinygrad's op tests against torch: powers, creation sizes and dtypes, clip's bounds,
normalize's p <= 0, sort errors, isposinf/isneginf and meshgrid as a method; each rule against torch on numpy
and c (the `device` fixture), named after the rule.
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
SIX = np.array([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0], np.float32)
EDGES = np.array([-inf, inf, -0.0, 0.0, nan, -1.5, 1.5], np.float32)
POWERS = (3.3, 2.5, -2.5, 2.0, 3.0, 0.5, -1.0, 0.0, -0.5, 1.5, -2.0, 0.3)  # torch: c x**(c-1), rsqrt for -0.5
I4 = np.array([1, 2, 3, 4], np.int32)

# ---- powers ----

POW = Table(
    [
        case("(-2) ** x", x=SIX, id="a_negative_python_base_has_torchs_nan_exponent_gradient"),
        case("(-2.5) ** x", x=SIX, id="a_negative_float_python_base_has_torchs_nan_exponent_gradient"),
        case("0 ** x", x=SIX, signed_zeros=True, id="a_zero_python_base_has_torchs_values_and_minus_inf_gradient"),
        case("0.0 ** x", x=SIX, signed_zeros=True, id="a_zero_float_python_base_as_torch"),
        case(
            "a ** b",
            a=np.array([-2.0, -3.0, -0.5, 0.0, 0.0, 2.0, -0.0, -inf, -2.0], np.float32),
            b=np.array([2.0, 3.0, -1.0, 2.0, 0.0, 1.5, -1.0, 2.0, 0.0], np.float32),
            signed_zeros=True,
            id="a_negative_tensor_base_has_a_nan_exponent_gradient_and_a_finite_base_gradient",
        ),
        *[
            case(f"x ** {c}", x=EDGES, signed_zeros=True, id=f"x_to_the_float_{c}_at_inf_zeros_and_nan_as_torch")
            for c in POWERS
        ],
        case("x ** 2.0", x=I4, grad=False, id="an_int_tensor_to_an_integer_valued_float_is_float32"),
        case("x ** 0.0", x=I4, grad=False, id="an_int_tensor_to_a_float_zero_is_float32_ones"),
        case("x ** -1.0", x=I4, grad=False, id="an_int_tensor_to_a_float_minus_one_is_float32"),
        case("x ** 2", x=I4, grad=False, id="an_int_tensor_to_a_python_int_stays_int"),
        case("x ** 2.0", x=np.array([True, False]), grad=False, id="a_bool_tensor_to_a_float_is_float32"),
        case("0.7 ** x", x=I4, grad=False, id="a_float_python_base_to_an_int_tensor_is_float32"),
        case(
            "x ** 2.5",
            x=EDGES.astype(np.float64),
            signed_zeros=True,
            id="x_to_a_fractional_float_in_float64_at_inf_zeros_and_nan_as_torch",
        ),
        case(
            "a ** b",
            a=np.array([-inf, -inf, -0.0, -2.0, nan, 1.0, inf], np.float32),
            b=np.array([2.5, -3.0, 0.5, 0.5, 0.0, nan, -inf], np.float32),
            signed_zeros=True,
            id="a_tensor_power_at_inf_zeros_nan_and_fractions_has_torchs_gradients_for_both_sides",
        ),
    ]
)


@pytest.mark.parametrize("name", POW.ids)
def test_pow_as_torch(device: str, name: str) -> None:
    POW.assert_agrees(device, name)


def test_an_int_tensor_to_a_negative_python_int_still_raises_as_torch() -> None:
    with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
        torch.tensor(I4) ** -1
    with pytest.raises(RuntimeError, match="negative integer powers"):
        Tensor(I4) ** -1


def test_pow_second_derivative_is_torchs() -> None:
    x = Tensor(np.array([1.5, 2.0, 0.5], np.float32), requires_grad=True)
    t = torch.tensor([1.5, 2.0, 0.5], requires_grad=True)
    (g,) = torch.autograd.grad((t**2.5).sum(), t, create_graph=True)
    g.sum().backward()
    (x**2.5).sum().backward(create_graph=True)
    first, x.grad = x.grad, None
    first.sum().backward()
    np.testing.assert_allclose(first.numpy(), g.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5)


# ---- creation: arange past int32, torch's size forms, linspace's dtypes ----

ARANGE = Table(
    [
        case("Tensor.arange(2**31, 2**31 + 3)", "torch.arange(2**31, 2**31 + 3)", id="arange_past_int32_is_int64"),
        case("Tensor.arange(-(2**31) - 1, -(2**31) + 2)", "torch.arange(-(2**31) - 1, -(2**31) + 2)", id="below"),
        case("Tensor.arange(2**31 - 2, 2**32, 2**30)", "torch.arange(2**31 - 2, 2**32, 2**30)", id="last_past"),
        case("Tensor.arange(5, 10, 2)", "torch.arange(5, 10, 2).int()", id="arange_within_int32_keeps_int32"),
        case(
            "Tensor.arange(120, 130, dtype=limn.int8)",
            "torch.arange(120, 130, dtype=torch.int8)",
            id="arange_in_an_explicit_int8_wraps_as_torch",
        ),
    ]
)


@pytest.mark.parametrize("name", ARANGE.ids)
def test_arange_dtype_past_int32(device: str, name: str) -> None:
    ARANGE.assert_agrees(device, name)


def test_arange_keeps_int32_within_it_and_goes_int64_past_it() -> None:
    assert Tensor.arange(5).dtype == limn.int32
    assert Tensor.arange(2**31, 2**31 + 3).dtype == limn.int64
    assert Tensor.arange(2**31 - 1, 2**31).dtype == limn.int64  # the end is past int32 (torch: always int64)


def test_a_python_int_past_int32_raises_naming_int64_in_tensor_and_full_alike() -> None:
    # limn's python-int default is int32 and Tensor() and full() raise for one past it, naming the fix
    with pytest.raises(OverflowError, match="int64"):
        Tensor([2**40])
    with pytest.raises(OverflowError, match="int64"):
        Tensor.full((2,), 2**40)
    assert Tensor.full((2,), 2**40, dtype=limn.int64).tolist() == torch.full((2,), 2**40).tolist()


@pytest.mark.parametrize(
    "expr",
    [
        "{}.randn(2, 3)",
        "{}.randn((2, 3))",
        "{}.randn([2, 3])",
        "{}.randn(size=(2, 3))",
        "{}.rand(2, 3)",
        "{}.rand(size=(2, 3))",
        "{}.rand(4)",
        "{}.zeros(2, 3)",
        "{}.zeros(size=(2, 3))",
        "{}.ones(size=[2, 3])",
        "{}.empty(2, 3)",
        "{}.empty(size=(2, 3))",
        "{}.full((2, 3), 1.5)",
        "{}.full([2, 3], 1)",
        "{}.randint(0, 5, (2, 3))",
        "{}.randint(5, (2, 3))",
        "{}.randint(0, 5, size=(2, 3))",
        "{}.rand_like({}.zeros(2, 3))",
        "{}.randn_like({}.zeros(2, 3))",
        "{}.zeros(())",
    ],
)
def test_creation_takes_torchs_size_forms(expr: str) -> None:
    theirs = eval(expr.format("torch", "torch"), {"torch": torch})
    ours = eval(expr.format("Tensor", "Tensor"), {"Tensor": Tensor})
    assert ours.shape == tuple(theirs.shape), f"{expr}: shape {ours.shape}, torch {tuple(theirs.shape)}"
    assert ours.dtype.is_float == theirs.dtype.is_floating_point, f"{expr}: dtype {ours.dtype}, torch {theirs.dtype}"


@pytest.mark.parametrize("expr", ["{}.rand()", "{}.randn()", "{}.zeros()", "{}.zeros(2, size=(2, 3))"])
def test_creation_raises_type_error_where_torch_does(expr: str) -> None:
    with pytest.raises(TypeError):
        eval(expr.format("torch"), {"torch": torch})
    with pytest.raises(TypeError):
        eval(expr.format("Tensor"), {"Tensor": Tensor})


def test_linspace_of_a_bool_dtype_raises_as_torch() -> None:
    with pytest.raises(RuntimeError, match="Bool"):
        torch.linspace(5, 10, 3, dtype=torch.bool)
    with pytest.raises(limn.ArgumentError, match="bool dtype"):
        Tensor.linspace(5, 10, 3, dtype=limn.bool_)


# ---- clip / clamp with no bound ----


@pytest.mark.parametrize("expr", ["x.clip(None, None)", "x.clamp(None, None)", "x.clamp()", "x.clip()"])
def test_clip_with_neither_bound_raises_as_torch(expr: str) -> None:
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        eval(expr, {"x": torch.tensor([1.0, 2.0])})
    with pytest.raises(limn.ArgumentError, match="both bounds are None"):
        eval(expr, {"x": Tensor([1.0, 2.0])})


CLIP = Table(
    [
        case("x.clip(min=0.5)", x=EDGES, id="clip_takes_torchs_min_keyword"),
        case("x.clip(max=0.5)", x=EDGES, id="clip_takes_torchs_max_keyword"),
        case("x.clip(min=-1.0, max=1.0)", x=EDGES, id="clip_takes_both_keywords"),
    ]
)


@pytest.mark.parametrize("name", CLIP.ids)
def test_clip_keywords_as_torch(device: str, name: str) -> None:
    CLIP.assert_agrees(device, name)


def test_clip_with_a_bound_given_twice_raises_type_error() -> None:
    with pytest.raises(TypeError, match=r"clip\(\): got lo=0.0 and min=0.0, two names for one argument"):
        Tensor([1.0]).clip(0.0, min=0.0)


def test_clip_of_an_int_tensor_by_bounds_past_its_range_is_still_x() -> None:
    x = Tensor(np.array([-5, 7], np.int8))
    assert x.clip(-1000, 1000).tolist() == torch.tensor([-5, 7], dtype=torch.int8).clamp(-1000, 1000).tolist()


# ---- normalize with p <= 0 ----

NORM_X = np.array([[1.0, -2.0, 3.0], [0.0, 2.0, -4.0], [0.0, 0.0, 0.0], [0.5, 1e-3, 5.0]], np.float32)
NORMALIZE = Table(
    [
        *[
            case(
                f"x.normalize(p={p})",
                f"torch.nn.functional.normalize(x, p={p})",
                x=NORM_X,
                signed_zeros=True,
                tol=1e-4,
                id=f"normalize_p_{p}_as_torch",
            )
            for p in (0, -1, -2, -0.5, 0.5, 0.3, 1.5, "float('-inf')")
        ],
        case("x.normalize(p=-1, dim=0)", "torch.nn.functional.normalize(x, p=-1, dim=0)", x=NORM_X, tol=1e-4),
        case(
            "(x.normalize(p=-1) * Tensor.arange(3.0)).sum()",
            "(torch.nn.functional.normalize(x, p=-1) * torch.arange(3.0)).sum()",
            x=NORM_X,
            tol=1e-4,
            id="normalize_p_minus_one_weighted_gradient_as_torch",
        ),
        case("x.normalize(p=0, dim=0)", "torch.nn.functional.normalize(x, p=0, dim=0)", x=np.float32(3.0)),
        case("x.normalize(p=-2, dim=0)", "torch.nn.functional.normalize(x, p=-2, dim=0)", x=np.float32(-3.0)),
    ]
)


@pytest.mark.parametrize("name", NORMALIZE.ids)
def test_normalize_with_p_zero_and_negative_as_torch(device: str, name: str) -> None:
    NORMALIZE.assert_agrees(device, name)


# ---- isposinf / isneginf ----

INF_X = np.array([inf, -inf, 0.0, -0.0, nan, 1.5, -3.0], np.float32)
INFINITIES = Table(
    [
        case(f"x.{f}()", x=x, grad=False, id=f"{f}_{x.dtype}_as_torch")
        for f in ("isposinf", "isneginf")
        for x in (INF_X, INF_X.astype(np.float64), np.array([1, -2, 0], np.int32), np.array([True, False]))
    ]
)


@pytest.mark.parametrize("name", INFINITIES.ids)
def test_isposinf_and_isneginf_as_torch(device: str, name: str) -> None:
    INFINITIES.assert_agrees(device, name)


# ---- meshgrid as a method ----

MESH_X, MESH_Y = np.array([1.0, 2.0], np.float32), np.array([3.0, 4.0, 5.0], np.float32)
MESHGRID = Table(
    [
        case(
            "Tensor.stack(list(x.meshgrid(y)))",
            "torch.stack(torch.meshgrid(x, y, indexing='ij'))",
            x=MESH_X,
            y=MESH_Y,
            id="meshgrid_as_a_method_takes_self_as_the_first_tensor",
        ),
        case(
            "Tensor.stack(list(x.meshgrid(y, indexing='xy')))",
            "torch.stack(torch.meshgrid(x, y, indexing='xy'))",
            x=MESH_X,
            y=MESH_Y,
            id="meshgrid_method_xy",
        ),
        case(
            "Tensor.stack(list(Tensor.meshgrid(x, y, indexing='xy')))",
            "torch.stack(torch.meshgrid(x, y, indexing='xy'))",
            x=MESH_X,
            y=MESH_Y,
            id="meshgrid_called_on_the_class_is_unchanged",
        ),
        case(
            "Tensor.stack(list(Tensor.meshgrid([x, y])))",
            "torch.stack(torch.meshgrid([x, y], indexing='ij'))",
            x=MESH_X,
            y=MESH_Y,
            id="meshgrid_of_a_list",
        ),
    ]
)


@pytest.mark.parametrize("name", MESHGRID.ids)
def test_meshgrid_as_torch(device: str, name: str) -> None:
    MESHGRID.assert_agrees(device, name)
