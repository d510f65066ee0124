"""torch's creation functions against torch: full, full_like, empty (limn's are zeros), zeros/ones with
varargs, linspace (torch's two-halves formula, bit for bit), logspace, meshgrid in both indexings, arange with
float steps (torch's count), tril_indices/triu_indices and the new_* methods; on the numpy device and on c.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle import Table, case, same

import limn
from limn import Tensor

X = np.arange(12, dtype=np.float32).reshape(3, 4)
I = np.arange(6, dtype=np.int32)  # noqa: E741

CREATION = Table(
    [
        case("Tensor.full((2, 3), 1.5)", "torch.full((2, 3), 1.5)", id="full_float"),
        case("Tensor.full((2,), 7)", "torch.full((2,), 7)", id="full_int"),
        case("Tensor.full((2,), True)", "torch.full((2,), True)", id="full_bool"),
        case("Tensor.full((), -0.0)", "torch.full((), -0.0)", signed_zeros=True, id="full_0d_negative_zero"),
        case("Tensor.full((0, 2), 1.0)", "torch.full((0, 2), 1.0)", id="full_zero_size"),
        case("Tensor.full((2,), float('nan'))", "torch.full((2,), float('nan'))", id="full_nan"),
        case("x.full_like(3.0)", "torch.full_like(x, 3.0)", x=X, grad=False, id="full_like"),
        case("x.full_like(2.7)", "torch.full_like(x, 2.7)", x=I, id="full_like_int_truncates"),
        case("Tensor.zeros(2, 3)", "torch.zeros(2, 3)", id="zeros_varargs"),
        case("Tensor.ones([2, 3], dtype='int32')", "torch.ones([2, 3], dtype=torch.int32)", id="ones_list"),
        # torch's empty holds whatever memory held (NaN too, so even * 0 is no oracle): its shape and dtype are
        # the rule, and zeros_like has both
        case("Tensor.empty(2, 3)", "torch.zeros(2, 3)", id="empty_shape"),
        case("x.empty_like()", "torch.zeros_like(x)", x=X, grad=False, id="empty_like_shape_and_dtype"),
        case("x.new_zeros(2, 2)", "x.new_zeros(2, 2)", x=I, id="new_zeros_keeps_dtype"),
        case("x.new_ones((3,))", "x.new_ones((3,))", x=X, grad=False, id="new_ones"),
        case("x.new_full((2,), 4)", "x.new_full((2,), 4)", x=X, grad=False, id="new_full"),
        case("Tensor.linspace(0, 1, 5)", "torch.linspace(0, 1, 5)", id="linspace"),
        case("Tensor.linspace(-3.0, 7.0, 10)", "torch.linspace(-3.0, 7.0, 10)", id="linspace_torch_rounding"),
        case("Tensor.linspace(1.0, 0.0, 7)", "torch.linspace(1.0, 0.0, 7)", id="linspace_descending"),
        case("Tensor.linspace(2.0, 5.0, 1)", "torch.linspace(2.0, 5.0, 1)", id="linspace_one_step"),
        case("Tensor.linspace(2.0, 5.0, 0)", "torch.linspace(2.0, 5.0, 0)", id="linspace_no_steps"),
        case(
            "Tensor.linspace(0, 1, 9, dtype='float64')",
            "torch.linspace(0, 1, 9, dtype=torch.float64)",
            id="linspace_float64",
        ),
        case("Tensor.logspace(0, 3, 4)", "torch.logspace(0, 3, 4)", id="logspace"),
        case("Tensor.logspace(-1, 1, 5, base=2.0)", "torch.logspace(-1, 1, 5, base=2.0)", id="logspace_base"),
        case("Tensor.arange(0, 1, 0.1)", "torch.arange(0, 1, 0.1)", id="arange_float_step_count"),
        case("Tensor.arange(0.0, 2.0, 0.3)", "torch.arange(0.0, 2.0, 0.3)", id="arange_float_step"),
        case("Tensor.arange(1.0, 0.3, -0.1)", "torch.arange(1.0, 0.3, -0.1)", id="arange_negative_float_step"),
        case("Tensor.arange(5)", "torch.arange(5)", id="arange_int"),
        case("Tensor.arange(2, 2)", "torch.arange(2, 2)", id="arange_empty"),
        case("Tensor.tril_indices(3, 4)", "torch.tril_indices(3, 4)", id="tril_indices"),
        case("Tensor.tril_indices(4, 3, -1)", "torch.tril_indices(4, 3, -1)", id="tril_indices_offset"),
        case("Tensor.triu_indices(3, 4, 1)", "torch.triu_indices(3, 4, 1)", id="triu_indices"),
        case("Tensor.triu_indices(0, 0)", "torch.triu_indices(0, 0)", id="triu_indices_empty"),
    ]
    + [
        case(
            f"Tensor.meshgrid(x, y, indexing={ix!r})[{k}]",
            f"torch.meshgrid(x, y, indexing={ix!r})[{k}]",
            x=np.array([1.0, 2.0, 3.0], np.float32),
            y=np.array([4.0, 5.0], np.float32),
            id=f"meshgrid_{ix}_{k}",
        )
        for ix in ("ij", "xy")
        for k in (0, 1)
    ]
    + [
        case(
            "Tensor.meshgrid([x, y, z], indexing='xy')[2]",
            "torch.meshgrid([x, y, z], indexing='xy')[2]",
            x=np.array([1.0, 2.0], np.float32),
            y=np.array([3.0, 4.0, 5.0], np.float32),
            z=np.array([6.0, 7.0, 8.0, 9.0], np.float32),
            id="meshgrid_three_as_a_list",
        ),
        case(
            "Tensor.meshgrid(x, y)[0]",
            "torch.meshgrid(x, y, indexing='ij')[0]",
            x=np.zeros(0, np.float32),
            y=np.ones(2, np.float32),
            id="meshgrid_zero_size",
        ),
    ]
)


@pytest.mark.parametrize("name", CREATION.ids)
def test_creation_matches_torch(device: str, name: str) -> None:
    CREATION.assert_agrees(device, name)


def test_linspace_is_bit_for_bit_torch_where_its_two_halves_formula_rounds() -> None:
    for args in [(-3.0, 7.0, 10), (0.0, 1.0, 7), (1.0, -1.0, 6)]:
        got, want = Tensor.linspace(*args).numpy(), torch.linspace(*args).numpy()
        assert np.array_equal(got, want), f"linspace{args}: {got.tolist()} != {want.tolist()}"


def test_empty_is_zeros_in_limn() -> None:
    # torch.empty holds whatever memory held; limn's is a CONST 0, which nothing may rely on either way
    assert Tensor.empty(2, 2).tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_full_with_requires_grad_is_a_leaf() -> None:
    t = limn.composed.creation.full((2,), 1.5, requires_grad=True)
    (t * t).sum().backward()
    assert same(t.grad.numpy(), np.array([3.0, 3.0], np.float32), "d/dt") is None


MISTAKES = {
    "linspace_negative_steps": (lambda: Tensor.linspace(0, 1, -1), ValueError, "steps must be non-negative"),
    "meshgrid_indexing": (lambda: Tensor.meshgrid(Tensor(I), indexing="ji"), ValueError, "'ij' or 'xy'"),
    "meshgrid_2d": (lambda: Tensor.meshgrid(Tensor(X)), ValueError, "0-d or 1-d tensors"),
    "zeros_positional_dtype": (lambda: Tensor.zeros(2, limn.float64), TypeError, "keyword-only, not positional"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_creation_mistake_raises_a_typed_error(mistake: str) -> None:
    action, error, message = MISTAKES[mistake]
    with pytest.raises(error, match=message):
        action()
