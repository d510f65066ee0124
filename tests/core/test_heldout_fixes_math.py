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

from limn import Tensor

nan, inf = math.nan, math.inf
SIX = np.array([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0], np.float32)
EDGES = np.array([-inf, inf, -0.0, 0.0, nan, -1.5, 1.5], np.float32)
POWERS = (3.3, 2.5, -2.5, 2.0, 3.0, 0.5, -1.0, 0.0)
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
