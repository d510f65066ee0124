"""Indexing against torch, forward and backward, on the numpy device and on c: x[index] with steps, int
tensors, lists and masks (torch's result-shape rules), x[index] = value (written into a clone, so the
gradient reaches x and the value), and the index family: gather, scatter with every reduce, scatter_add,
scatter_reduce, index_select/add/fill/copy, take_along_dim, masked_fill/select/scatter, nonzero, argwhere.

Each row of a Table is one rule, named by its id. Out-of-range indices: a python or host index raises
IndexError at the call, a tensor index when the value is computed (the tests at the end).
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle import Table, case

import limn
from limn import Tensor

# torch deprecates scatter's reduce= with a tensor src; those rows test that spelling on purpose
pytestmark = pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter:UserWarning")

RNG = np.random.default_rng(1)
X = RNG.standard_normal((3, 4)).astype(np.float32)
X3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
X4 = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
E = np.zeros((0, 4), np.float32)
Z = np.array(1.5, np.float32)
I = np.arange(12, dtype=np.int32).reshape(3, 4)  # noqa: E741
M = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, False]])
ROWS = np.array([2, 0, 2], np.int32)  # repeated on purpose: gradients add
NEG = np.array([-1, 0, -3], np.int32)
GRID = np.array([[0, 1], [2, 0]], np.int32)
S = np.array([np.nan, -0.0, np.inf, -np.inf], np.float32)


def i32(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


GETITEM = Table(
    [
        case("x[1]", x=X, id="int"),
        case("x[-1, 2]", x=X, id="negative_int"),
        case("x[:, 1:3]", x=X, id="slice"),
        case("x[::2]", x=X, id="step_2"),
        case("x[1::3, ::2]", x=X, id="steps_on_two_dims"),
        case("x[:, 3:0:2]", x=X, id="step_on_an_empty_range"),
        case("x[..., ::3]", x=X3, id="ellipsis_and_step"),
        case("x[None, :, None]", x=X, id="none_adds_dims"),
        case("x[...]", x=Z, id="ellipsis_of_0d"),
        case("x[None]", x=Z, id="none_of_0d"),
        case("x[i]", x=X, i=ROWS, id="int_tensor_rows"),
        case("x[i]", x=X, i=NEG, id="negative_tensor_indices_wrap"),
        case("x[[0, 2]]", x=X, id="list"),
        case("x[[-1, 0], [1, -1]]", x=X, id="two_lists_pair_up"),
        case("x[:, [3, 0, 3]]", x=X, id="list_on_dim_1"),
        case("x[i]", x=X, i=GRID, id="index_of_2_dims"),
        case("x[i, j]", x=X, i=GRID, j=GRID, id="two_tensor_indices"),
        case("x[i, :2]", x=X, i=GRID, id="tensor_then_slice"),
        case("x[:, i, j]", x=X3, i=GRID, j=GRID + 1, id="adjacent_advanced_stay_in_place"),
        case("x[i, :, j]", x=X3, i=GRID % 2, j=GRID, id="separated_advanced_go_first"),
        case("x[0, :, [1, 2]]", x=X3, id="int_selects_first_as_torch"),
        case("x[[0, 1], 0, [1, 2]]", x=X3, id="int_between_advanced"),
        case("x[0, [0, 1], :, [1, 2]]", x=X4, id="int_then_separated_advanced"),
        case("x[[0, 1], None, [1, 2]]", x=X3, id="none_separates_advanced"),
        case("x[..., [0, 3]]", x=X3, id="ellipsis_then_list"),
        case("x[i[0, 0], 1]", x=X, i=GRID, id="0d_tensor_index"),
        case("x[[]]", "x[torch.tensor([], dtype=torch.long)]", x=X, id="empty_list"),
        case("x[m]", x=X, m=M, id="bool_mask"),
        case("x[m]", x=X3, m=M[:2, :3], id="mask_of_leading_dims"),
        case("x[:, m[0]]", x=X, m=M, id="mask_on_dim_1"),
        case("x[x > 0]", x=X, id="mask_from_a_comparison"),
        case("x[m]", x=X, m=np.zeros((3, 4), bool), id="mask_all_false"),
        case("x[i]", x=I, i=ROWS, id="int32_source"),
        case("x[i]", x=S, i=i32(3, 1, 0), signed_zeros=True, id="special_values"),
        case("x[:, [0, 1]]", x=E, id="zero_size_source"),
        case("x[:, 1:3][[1, 0]]", x=X, id="view_then_gather"),
    ]
)

SET = "(y := x.clone()).__setitem__({index}, v) or y"  # x[index] = v on a copy, as an expression


def setitem(index: str, **inputs: np.ndarray) -> dict:
    return {"limn_expr": SET.format(index=index), **inputs}


SETITEM = Table(
    [
        case(**setitem("np.s_[1]", x=X, v=X[0]), id="row"),
        case(**setitem("np.s_[:, 1:3]", x=X, v=X[:, :2]), id="box"),
        case(**setitem("np.s_[0, -1]", x=X, v=Z), id="element_0d_value"),
        case(SET.format(index="np.s_[:, 2]").replace("v)", "4.0)"), x=X, id="python_scalar"),
        case(**setitem("np.s_[...]", x=X, v=X[:1]), id="ellipsis_broadcasts_value"),
        case(**setitem("np.s_[::2]", x=X, v=X[:1]), id="step"),
        case(**setitem("np.s_[1:, ::3]", x=X, v=X[:2, :2]), id="steps_on_two_dims"),
        case(**setitem("i", x=X, v=X[:2], i=i32(2, 0)), id="tensor_rows"),
        case(**setitem("np.s_[[0, 2], [1, 3]]", x=X, v=X[0, :2]), id="two_lists"),
        case(**setitem("np.s_[0, :, [1, 2]]", x=X3, v=X3[0, :, :2]), id="int_selects_first_as_torch"),
        case(**setitem("i", x=X, v=X[:2], i=i32(-1, 0)), id="negative_tensor_indices"),
        case(**setitem("m", x=X, v=X[M], m=M), id="mask_with_values"),
        case(SET.format(index="m").replace("v)", "-1.0)"), x=X, m=M, id="mask_with_a_scalar"),
        case(SET.format(index="x > 0").replace("v)", "0.0)"), x=X, id="mask_from_a_comparison"),
        case(**setitem("i", x=X, v=X[:3], i=i32(1, 1, 0)), id="repeated_rows_last_write_wins"),
        case(**setitem("np.s_[[0, 0], [2, 2]]", x=X, v=X[0, :2]), id="repeated_element"),
        case(**setitem("np.s_[1]", x=I, v=I[0]), id="int32_target"),
        case(SET.format(index="np.s_[:, 0]").replace("v)", "2.9)"), x=I, id="float_into_int_truncates"),
        case(**setitem("np.s_[0]", x=S.reshape(2, 2), v=S[2:]), signed_zeros=True, id="special_values"),
        case(**setitem("np.s_[:, 1:1]", x=X, v=E.reshape(3, 0)), id="empty_box"),
    ]
)

SCATTERS = Table(
    [
        case("x.gather(1, i)", "x.gather(1, i.long())", x=X, i=GRID.repeat(2, 0)[:3], id="gather_torch_order"),
        case("x.gather(1, i)", "x.gather(1, i.long())", x=X, i=GRID, id="gather_smaller_index"),
        case("x.gather(dim=0, index=i)", "x.gather(0, i.long())", x=X, i=GRID, id="gather_keywords"),
        case(
            "x.take_along_dim(i, 1)", "x.take_along_dim(i.long(), 1)", x=X, i=GRID.repeat(2, 0)[:3], id="take_along_dim"
        ),
        case(
            "x.take_along_dim(i, 0)",
            "x.take_along_dim(i.long(), 0)",
            x=X,
            i=i32(2, 0, 1, 1).reshape(1, 4),
            id="take_along_dim_broadcasts",
        ),
        case("x.take_along_dim(i)", "x.take_along_dim(i.long())", x=X, i=i32(11, 0, 5), id="take_along_dim_flat"),
        case("x.index_select(0, i)", x=X, i=ROWS, id="index_select"),
        case("x.index_select(-1, i)", x=X3, i=i32(3, 0), id="index_select_negative_dim"),
        case("x.index_select(0, i)", x=X, i=i32(), id="index_select_nothing"),
        case(
            "x.scatter(0, i, s)",
            "x.scatter(0, i.long(), s)",
            x=X,
            i=i32(2, 0, 1, 0).reshape(1, 4),
            s=X[:1],
            id="scatter_overwrites",
        ),
        case(
            "x.scatter(1, i, s)",
            "x.scatter(1, i.long(), s)",
            x=X,
            i=np.array([[0, 0], [1, 1], [3, 3]], np.int32),
            s=X[:, :2],
            id="scatter_repeated_index_last_wins",
        ),
        case("x.scatter(1, i, 2.5)", "x.scatter(1, i.long(), 2.5)", x=X, i=GRID, id="scatter_value"),
        case(
            "x.scatter(1, i, s)", "x.scatter(1, i.long(), s)", x=X, i=GRID, s=X, grad=False, id="scatter_larger_source"
        ),
        case(
            "x.scatter(0, i, s, reduce='add')",
            "x.scatter(0, i.long(), s, reduce='add')",
            x=X,
            i=GRID,
            s=X[:2, :2],
            grad=False,  # torch has no derivative for scatter with reduce
            id="scatter_reduce_add",
        ),
        case(
            "x.scatter(0, i, s, reduce='multiply')",
            "x.scatter(0, i.long(), s, reduce='multiply')",
            x=X,
            i=GRID,
            s=X[:2, :2],
            grad=False,
            id="scatter_reduce_multiply",
        ),
        case("x.scatter_add(1, i, s)", "x.scatter_add(1, i.long(), s)", x=X, i=GRID, s=X[:2, :2], id="scatter_add"),
        case(
            "x.scatter_add(1, i, s)",
            "x.scatter_add(1, i.long(), s)",
            x=X,
            i=GRID,
            s=X3[0],
            grad=False,  # torch's backward refuses a source larger than the index
            id="scatter_add_larger_source",
        ),
        case("x.scatter_add(0, i, s)", "x.scatter_add(0, i.long(), s)", x=I, i=GRID, s=I, id="scatter_add_int32"),
    ]
    + [
        case(
            f"x.scatter_reduce(0, i, s, {r!r}, include_self={inc})",
            f"x.scatter_reduce(0, i.long(), s, {r!r}, include_self={inc})",
            x=X,
            i=np.array([[0, 1, 0, 2], [0, 1, 2, 2]], np.int32),
            s=X3[0, :2],
            id=f"scatter_reduce_{r}_include_self_{inc}",
        )
        for r in ("sum", "prod", "mean", "amax", "amin")
        for inc in (True, False)
    ]
    + [
        case(
            "x.scatter_reduce(0, i, s, 'amax')",
            "x.scatter_reduce(0, i.long(), s, 'amax')",
            x=np.zeros((3, 2), np.float32),
            i=np.array([[0, 0], [0, 1]], np.int32),
            s=np.zeros((2, 2), np.float32),
            id="scatter_reduce_amax_ties_share_the_gradient",
        ),
        case(
            "x.scatter_reduce(1, i, s, 'mean')",
            "x.scatter_reduce(1, i.long(), s, 'mean')",
            x=I,
            i=GRID,
            s=-I[:2, :2] - 1,
            id="scatter_reduce_mean_int_floors",
        ),
        case(
            "x.scatter_reduce(1, i, s, 'amin', include_self=False)",
            "x.scatter_reduce(1, i.long(), s, 'amin', include_self=False)",
            x=I,
            i=GRID,
            s=I[:2, :2],
            id="scatter_reduce_amin_int32",
        ),
        case(
            "x.scatter_reduce(2, i, s, 'mean', include_self=False)",
            "x.scatter_reduce(2, i.long(), s, 'mean', include_self=False)",
            x=X4[0, :, :, :4].copy(),
            i=np.random.default_rng(5).integers(0, 4, (3, 4, 4)).astype(np.int32),
            s=X4[1, :, :, :4].copy(),
            id="scatter_reduce_mean_exclude_self_3d",  # its count.maximum(1) form was miscompiled on c
        ),
        case("x.index_add(0, i, s)", x=X, i=ROWS, s=X, id="index_add_repeated_rows"),
        case("x.index_add(1, i, s, alpha=-2.0)", x=X, i=i32(3, 1), s=X[:, :2], id="index_add_alpha"),
        case("x.index_fill(1, i, -7.0)", "x.index_fill(1, i.long(), -7.0)", x=X, i=i32(0, 2, 0), id="index_fill"),
        case("x.index_fill(0, i, v)", "x.index_fill(0, i.long(), v)", x=X, i=i32(1), v=Z, id="index_fill_tensor_value"),
        case("x.index_copy(0, i, s)", "x.index_copy(0, i.long(), s)", x=X, i=i32(2, 0), s=X[:2], id="index_copy"),
        case("x.masked_fill(m, -1.0)", x=X, m=M, id="masked_fill"),
        case("x.masked_fill(m, v)", x=X, m=M[0], v=Z, id="masked_fill_broadcast_tensor_value"),
        case("x.masked_fill(m, 3.7)", x=I, m=M, id="masked_fill_int_keeps_dtype"),
        case("x.masked_fill(m, float('nan'))", x=X, m=M, id="masked_fill_nan"),
        case("x.masked_select(m)", x=X, m=M, id="masked_select"),
        case("x.masked_select(m)", x=X3, m=M, id="masked_select_broadcast_mask"),
        case("x.masked_scatter(m, s)", x=X, m=M, s=X3[0] * 10, id="masked_scatter"),
        case("x.nonzero()", x=X * M, grad=False, id="nonzero"),
        case("x.nonzero(as_tuple=True)[1]", x=X * M, grad=False, id="nonzero_as_tuple"),
        case("x.nonzero()", x=Z, grad=False, id="nonzero_0d"),
        case("x.nonzero()", x=E, grad=False, id="nonzero_zero_size"),
        case("x.argwhere()", x=M, id="argwhere_bool"),
    ]
)


IN_PLACE = Table(
    [
        case("x.clone().masked_fill_(m, -1.0)", x=X, m=M, id="masked_fill_"),
        case("x.clone().masked_scatter_(m, s)", x=X, m=M, s=X * 3, id="masked_scatter_"),
        case(
            "x.clone().index_fill_(1, i, 2.0)",
            "x.clone().index_fill_(1, i.long(), 2.0)",
            x=X,
            i=i32(0, 3),
            id="index_fill_",
        ),
        case(
            "x.clone().index_add_(0, i, s)", "x.clone().index_add_(0, i.long(), s)", x=X, i=ROWS, s=X, id="index_add_"
        ),
        case(
            "x.clone().index_copy_(0, i, s)",
            "x.clone().index_copy_(0, i.long(), s)",
            x=X,
            i=i32(2, 0),
            s=X[:2],
            id="index_copy_",
        ),
        case(
            "x.clone().scatter_(1, i, s)", "x.clone().scatter_(1, i.long(), s)", x=X, i=GRID, s=X[:2, :2], id="scatter_"
        ),
        case(
            "x.clone().scatter_add_(1, i, s)",
            "x.clone().scatter_add_(1, i.long(), s)",
            x=X,
            i=GRID,
            s=X[:2, :2],
            id="scatter_add_",
        ),
        case(
            "x.clone().scatter_reduce_(1, i, s, 'amax')",
            "x.clone().scatter_reduce_(1, i.long(), s, 'amax')",
            x=X,
            i=GRID,
            s=X[:2, :2],
            id="scatter_reduce_",
        ),
        case("x.clone().fill_(2.5)", x=X, id="fill_"),
        case("x.clone().fill_(v)", x=X, v=Z, id="fill_tensor_value"),
        case("x.clone().copy_(s)", x=X, s=X[:1] * 2, id="copy_broadcasts"),
        case("x.clone().copy_(s)", "x.clone().copy_(s)", x=I, s=X, id="copy_casts"),
        case("x.index_put((i,), s)", "x.index_put((i.long(),), s)", x=X, i=i32(2, 0), s=X[:2], id="index_put"),
        case(
            "x.index_put((i, j), s, accumulate=True)",
            "x.index_put((i.long(), j.long()), s, accumulate=True)",
            x=X,
            i=i32(0, 0, 2),
            j=i32(1, 1, 3),
            s=X[0, :3],
            id="index_put_accumulate_repeats_add",
        ),
        case(
            "x.clone().index_put_((i,), s)",
            "x.clone().index_put_((i.long(),), s)",
            x=X,
            i=i32(1),
            s=X[:1],
            id="index_put_",
        ),
        case("x.clone().tril_(1)", x=X, id="tril_"),
        case("x.clone().triu_()", x=X, id="triu_"),
        case("x.clone().add_(y).mul_(2)", x=X, y=X * 3, id="add_ then mul_"),  # torch's in-place chains too
        case("x.clone().sub_(y, alpha=2).div_(4)", x=X, y=X * 3, id="sub_ alpha then div_"),
        case("x.clone().clamp_(min=-0.5, max=0.5)", x=X, id="clamp_"),
        case("x.clone().exp_()", x=X, id="exp_"),
        case("(x.abs() + 1).log_()", x=X, id="log_"),
        case("x.clone().pow_(3)", x=X, id="pow_"),
        case("x.clone().relu_() + x.clone().tanh_() + x.clone().sigmoid_()", x=X, id="relu_ tanh_ sigmoid_"),
        case("x.clone().zero_() + x", x=X, id="zero_"),
        case("i.clone().add_(3).mul_(2)", i=np.array([1, -2, 7], np.int32), grad=False, id="int add_ keeps int"),
        case("x.take(i)", "x.take(i.long())", x=X, i=np.array([[0, -1], [5, 5]], np.int32), id="take"),
    ]
)


@pytest.mark.parametrize("name", IN_PLACE.ids)
def test_in_place_spellings_match_torch(device: str, name: str) -> None:
    IN_PLACE.assert_agrees(device, name)


@pytest.mark.parametrize("name", GETITEM.ids)
def test_getitem_matches_torch(device: str, name: str) -> None:
    GETITEM.assert_agrees(device, name)


@pytest.mark.parametrize("name", SETITEM.ids)
def test_setitem_matches_torch_with_gradients_to_x_and_the_value(device: str, name: str) -> None:
    SETITEM.assert_agrees(device, name)


@pytest.mark.parametrize("name", SCATTERS.ids)
def test_gather_scatter_and_index_family_match_torch(device: str, name: str) -> None:
    SCATTERS.assert_agrees(device, name)


# ---- setitem's value semantics and the ASSIGN it makes ----


def test_setitem_on_a_buffer_is_an_assign_and_earlier_values_keep_what_they_saw() -> None:
    x = Tensor(np.zeros((2, 3), np.float32))
    before = x * 1
    buffer = x.node.arg
    x[0, 1:] = 5.0
    assert x.node.op.name == "ASSIGN"
    np.testing.assert_array_equal(x.numpy(), [[0, 5, 5], [0, 0, 0]])
    assert x.node.arg is buffer, "x still holds its buffer after the assign"
    np.testing.assert_array_equal(before.numpy(), np.zeros((2, 3)))


def test_writes_in_a_row_each_read_the_last_and_values_built_between_keep_theirs(device: str) -> None:
    x = Tensor.zeros((3, 3))
    before = x * 1
    for k in range(3):
        x[k, k] = float(k + 1)
    x[[0, 2], 1] = Tensor([7.0, 8.0])
    x.masked_fill_(x > 7.5, -1.0)  # the mask reads x's pending writes
    x[x > 2.5] = 9.0
    between = x + 1
    x[Tensor(np.array([0], np.int32))] = x[1]
    np.testing.assert_array_equal(x.numpy(), [[0, 2, 0], [0, 2, 0], [0, -1, 9]])
    np.testing.assert_array_equal(between.numpy(), [[2, 10, 1], [1, 3, 1], [1, 0, 10]])
    np.testing.assert_array_equal(before.numpy(), np.zeros((3, 3)))


def test_setitem_of_a_box_is_one_where_over_views_with_no_gather_or_scatter() -> None:
    from limn.graph.ops import Op, toposort

    x = Tensor(np.zeros((4, 6), np.float32))
    x[1:3, 2:] = Tensor(np.ones((2, 4), np.float32))
    assign = x.node
    ops = [n.op for n in toposort([assign.srcs[1]])]
    assert Op.WHERE in ops and Op.GATHER not in ops and Op.SCATTER not in ops, ops


def test_setitem_into_a_temporary_does_not_write_through_unlike_torch() -> None:
    # torch's x[0] is a view, so x[0][1] = 5 writes x; limn's x[0] is a value of its own
    x = Tensor(np.zeros((2, 3), np.float32))
    x[0][1] = 5.0
    np.testing.assert_array_equal(x.numpy(), np.zeros((2, 3)))


def test_setitem_on_a_leaf_that_requires_grad_raises_as_torch_but_not_under_no_grad() -> None:
    w = Tensor(np.zeros(3, np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf that requires grad"):
        w[0] = 1.0
    with limn.no_grad():
        w[0] = 1.0
    np.testing.assert_array_equal(w.numpy(), [1, 0, 0])
    assert w.requires_grad


def test_setitem_value_of_the_wrong_shape_raises() -> None:
    x = Tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"value of shape \(2,\) cannot be written into x\[index\] of shape \(3,\)"):
        x[0] = Tensor([1.0, 2.0])


# ---- out-of-range indices ----

OUT_OF_RANGE_NOW = {
    "int": (lambda x: x[3], r"index 3 is out of bounds for dimension 0 with size 3"),
    "negative_int": (lambda x: x[:, -5], r"index -5 is out of bounds for dimension 1 with size 4"),
    "list": (lambda x: x[[0, 3]], r"index 3 is out of bounds for dimension 0 with size 3"),
    "negative_list": (lambda x: x[:, [-5]], r"index -5 is out of bounds for dimension 1 with size 4"),
    "mask_shape": (lambda x: x[Tensor(np.ones(4, bool))], r"mask of shape \(4,\) does not match the dims \(3,\)"),
    "too_many": (lambda x: x[0, 0, 0], r"too many indices \(3\)"),
    "float_tensor": (lambda x: x[Tensor([0.0])], r"must be int or bool tensors, got float32"),
    "setitem_list": (lambda x: x.__setitem__([5], 1.0), r"index 5 is out of bounds for dimension 0 with size 3"),
    "select": (lambda x: x.select(1, 4), r"index 4 is out of bounds for dimension 1"),
}


@pytest.mark.parametrize("what", OUT_OF_RANGE_NOW)
def test_an_out_of_range_python_or_host_index_raises_index_error_at_the_call(what: str) -> None:
    action, message = OUT_OF_RANGE_NOW[what]
    with pytest.raises(IndexError, match=message):
        action(Tensor(X))


OUT_OF_RANGE_AT_REALIZE = {
    "tensor_index": lambda x: x[Tensor(i32(0, 3))],
    "tensor_index_below": lambda x: x[Tensor(i32(-4))],
    "second_of_two_tensor_indices": lambda x: x[Tensor(i32(0)), Tensor(i32(4))],  # row-major it would be (1, 0)
    "gather": lambda x: x.gather(1, Tensor(i32(4).reshape(1, 1))),
    "scatter": lambda x: x.scatter(0, Tensor(i32(3).reshape(1, 1)), 1.0),
    "scatter_reduce": lambda x: x.scatter_reduce(0, Tensor(i32(5).reshape(1, 1)), Tensor(X[:1, :1]), "amax"),
    "index_select": lambda x: x.index_select(0, Tensor(i32(3))),
}


@pytest.mark.parametrize("what", OUT_OF_RANGE_AT_REALIZE)
def test_an_out_of_range_tensor_index_raises_index_error_when_computed(device: str, what: str) -> None:
    lazy = OUT_OF_RANGE_AT_REALIZE[what](Tensor(X))
    with pytest.raises(IndexError, match="out of range"):
        lazy.numpy()


MISTAKES = {
    "negative_step": (lambda x: x[::-1], ValueError, "steps must be positive"),
    "python_bool_index": (lambda x: x[True], TypeError, "python bool"),
    "two_ellipses": (lambda x: x[..., ...], IndexError, "single ellipsis"),
    "scatter_unknown_reduce": (lambda x: x.scatter(0, Tensor(GRID), 1.0, reduce="max"), ValueError, "'add' or"),
    "scatter_reduce_unknown": (
        lambda x: x.scatter_reduce(0, Tensor(GRID), Tensor(X), "max"),
        ValueError,
        "must be one of",
    ),
    "gather_rank": (lambda x: x.gather(0, Tensor(ROWS)), ValueError, "does not fit a source"),
    # one spelling, torch's: dim comes first, and an index there is named as the mistake, not guessed around
    "gather_index_first": (lambda x: x.gather(Tensor(GRID), 1), TypeError, "dim must be an int, got Tensor"),
    "scatter_add_index_first": (
        lambda x: x.scatter_add(Tensor(GRID), Tensor(X), 1),
        TypeError,
        r"scatter_add\(dim, index, src\): dim must be an int",
    ),
    "masked_fill_int_mask": (lambda x: x.masked_fill(Tensor(I), 0.0), TypeError, "must be a bool tensor"),
    "masked_scatter_short_source": (
        lambda x: x.masked_scatter(Tensor(M), Tensor([1.0])),
        ValueError,
        "6 True values, source only 1",
    ),
    "index_select_2d_index": (lambda x: x.index_select(0, Tensor(GRID)), ValueError, "0-d or 1-d"),
    "index_fill_vector_value": (lambda x: x.index_fill(0, Tensor(ROWS), Tensor([1.0])), ValueError, "0-d tensor"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_an_indexing_mistake_raises_a_typed_error(mistake: str) -> None:
    action, error, message = MISTAKES[mistake]
    with pytest.raises(error, match=message):
        action(Tensor(X))


def test_scatter_with_a_repeated_index_gives_every_write_its_cell_gradient_as_torch() -> None:
    # torch's scatter backward is grad.gather(index): a write that a later one overwrote still gets the
    # gradient of its cell, though the output holds the last write's value
    src = Tensor(np.array([[1.0, 2.0, 3.0]], np.float32), requires_grad=True)
    out = Tensor.zeros((1, 2)).scatter(1, Tensor(np.array([[0, 0, 1]], np.int32)), src)
    out.sum().backward()
    np.testing.assert_array_equal(out.numpy(), [[2.0, 3.0]])
    np.testing.assert_array_equal(src.grad.numpy(), [[1.0, 1.0, 1.0]])


def test_scatter_refuses_a_src_of_another_dtype_and_an_unknown_keyword_as_torch() -> None:
    import torch

    x, idx, src = Tensor.zeros(3, dtype=limn.float16), Tensor([0, 2]), Tensor([1.0, 2.0])
    with pytest.raises(RuntimeError):
        torch.zeros(3, dtype=torch.float16).scatter(0, torch.tensor([0, 2]), torch.tensor([1.0, 2.0]))
    for call in (
        lambda: x.scatter(0, idx, src),
        lambda: x.scatter_add(0, idx, src),
        lambda: x.scatter_reduce(0, idx, src, "sum"),
    ):
        with pytest.raises(RuntimeError, match="src is float32 and the tensor written into is float16"):
            call()
    with pytest.raises(TypeError, match="unexpected keyword argument 'mode'"):
        Tensor.zeros(3).scatter(0, idx, src, mode="typo")
    assert x.scatter(0, idx, 5.0).tolist() == [5.0, 0.0, 5.0]  # a number takes x's dtype, as torch's value=


def test_an_in_place_op_whose_result_the_dtype_cannot_hold_raises_as_torch() -> None:
    import torch

    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).add_(1.5)
    with pytest.raises(RuntimeError, match="the int32 tensor cannot hold in place"):
        Tensor([1, 2]).add_(1.5)
    with pytest.raises(RuntimeError, match="the bool tensor cannot hold"):
        Tensor([True, False]).mul_(3)


def test_requires_grad_makes_a_leaf_of_a_lazy_value_and_returns_it() -> None:
    w = Tensor.randn((3, 2)).requires_grad_()
    assert w.requires_grad and w.node.op is limn.graph.ops.Op.BUFFER  # realized: an optimizer can assign to it
    (w * 2).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((3, 2), 2.0, np.float32))
    assert w.requires_grad_(False) is w and not w.requires_grad
    with pytest.raises(RuntimeError, match="only leaves"):
        (Tensor([1.0], requires_grad=True) * 2).requires_grad_(False)
