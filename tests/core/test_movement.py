"""Movement ops against torch, forward and backward, on the numpy device and on c: flip, roll, repeat, tile,
repeat_interleave, unfold, tril/triu, diag/diagonal/diag_embed, pad with every mode, and torch's spellings of
the view movements (expand with -1, view, movedim, swapaxes, narrow, select, unbind, squeeze over a tuple).

Each row of a Table is one rule, named by its id; a table runs in one realize and one backward per device.
Where torch raises, limn raises a typed error (the pytest.raises tests at the end).
"""

from __future__ import annotations

import numpy as np
import pytest
from oracle import Table, case

from limn import Tensor
from limn.graph.ops import Op, toposort

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype(np.float32)
X3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
X4 = RNG.standard_normal((2, 2, 3, 4)).astype(np.float32)
V = RNG.standard_normal(5).astype(np.float32)
E = np.zeros((0, 3), np.float32)  # a zero-size dim
Z = np.array(2.5, np.float32)  # 0-d
I = np.arange(12, dtype=np.int32).reshape(3, 4)  # noqa: E741
B = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, False]])
F64 = RNG.standard_normal((3, 4))
# reflect and replicate with negative widths: torch pads x, then crops (the mirrored side is checked against x)
P3 = RNG.standard_normal((3, 3, 3, 3)).astype(np.float32)
P5 = RNG.standard_normal((1, 1, 5, 5)).astype(np.float32)
SPECIAL = np.array([[np.nan, -0.0, np.inf], [-np.inf, 1.0, np.nan]], np.float32)

FLIP_ROLL = Table(
    [
        case("x.flip(0)", x=X, id="flip_dim0"),
        case("x.flip(-1)", x=X, id="flip_negative_dim"),
        case("x.flip((0, 2))", x=X3, id="flip_two_dims"),
        case("x.flip(0, 1)", "x.flip((0, 1))", x=X, id="flip_varargs"),
        case("x.flip(1)", x=E, id="flip_zero_size"),
        case("x.flip(dims=(1,))", x=X, id="flip_dims_keyword"),
        case("x.flip(0)", x=Z, id="flip_0d"),
        case("x.flip(1)", x=I, id="flip_int32"),
        case("x.flip(0)", x=B, id="flip_bool"),
        case("x.flip(1)", x=SPECIAL, signed_zeros=True, id="flip_special_values"),
        case("x.roll(1)", x=X, id="roll_flat"),
        case("x.roll(-2, 1)", x=X, id="roll_negative_shift"),
        case("x.roll(5, 1)", x=X, id="roll_past_the_size"),
        case("x.roll((1, 2), (0, -1))", x=X3, id="roll_shifts_and_dims_tuples"),
        case("x.roll(2, 0)", x=E, id="roll_zero_size"),
        case("x.roll(1, 1)", x=I, id="roll_int32"),
        case("x.roll(0, 0)", x=X, id="roll_zero"),
        case("x.rot90()", x=X, id="rot90"),
        case("x.rot90(2)", x=X, id="rot90_twice"),
        case("x.rot90(-1, (2, 0))", x=X3, id="rot90_negative_k_dims"),
        case("x.rot90(7, [1, 2])", x=X3, id="rot90_k_past_four"),
        case("x.ravel()", x=X3, id="ravel"),
    ]
)

REPEATS = Table(
    [
        case("x.repeat(2, 3)", x=X, id="repeat_each_dim"),
        case("x.repeat((2, 1, 1))", x=X, id="repeat_adds_a_leading_dim"),
        case("x.repeat(2, 0)", x=X, id="repeat_zero_times"),
        case("x.repeat(3)", x=Z, id="repeat_0d"),
        case("x.repeat(2, 2)", x=I, id="repeat_int32"),
        case("x.repeat(1, 2)", x=E, id="repeat_zero_size"),
        case("x.tile(2)", x=X, id="tile_fewer_dims_count_from_the_last"),
        case("x.tile((2, 1, 2))", x=X, id="tile_adds_leading_dims"),
        case("x.tile(dims=(2, 1))", x=X, id="tile_dims_keyword"),
        case("x.repeat_interleave(2)", x=X, id="repeat_interleave_flat"),
        case("x.repeat_interleave(3, 1)", x=X, id="repeat_interleave_int_dim"),
        case("x.repeat_interleave(2, dim=-1)", x=X3, id="repeat_interleave_negative_dim"),
        case(
            "x.repeat_interleave(Tensor([1, 0, 2]), dim=0)",
            "x.repeat_interleave(torch.tensor([1, 0, 2]), dim=0)",
            x=X,
            id="repeat_interleave_tensor_counts",
        ),
        case(
            "x.repeat_interleave([2, 1, 0, 3], 1)",
            "x.repeat_interleave(torch.tensor([2, 1, 0, 3]), 1)",
            x=X,
            id="repeat_interleave_list_counts",
        ),
        case("x.repeat_interleave(2)", x=Z, id="repeat_interleave_0d"),
        case("x.repeat_interleave(2, 0)", x=E, id="repeat_interleave_zero_size"),
        case("x.repeat_interleave(2, 0)", x=I, id="repeat_interleave_int32"),
        case(
            "x.repeat_interleave()",
            "torch.repeat_interleave(x)",
            x=np.array([1, 0, 3], np.int32),
            id="repeat_interleave_of_counts_alone",
        ),
        case("x.unfold(0, 2, 1)", x=V, id="unfold_overlapping_windows"),
        case("x.unfold(1, 2, 2)", x=X, id="unfold_disjoint_windows"),
        case("x.unfold(-1, 3, 2)", x=X3, id="unfold_negative_dim_with_leftover"),
        case("x.unfold(1, 4, 1)", x=X, id="unfold_one_window"),
        case("x.unfold(0, 2, 1)", x=I, id="unfold_int32"),
        case("x.unfold(1, 2, 1)", x=E, id="unfold_zero_size"),
    ]
)

TRIANGLES = Table(
    [
        case("x.tril()", x=X, id="tril"),
        case("x.tril(1)", x=X, id="tril_above"),
        case("x.tril(diagonal=-1)", x=X, id="tril_below"),
        case("x.triu()", x=X3, id="triu_batched"),
        case("x.triu(2)", x=X, id="triu_above"),
        case("x.triu(-5)", x=X, id="triu_past_the_matrix"),
        case("x.tril()", x=I, id="tril_int32"),
        case("x.triu()", x=B, id="triu_bool"),
        case("x.tril()", x=E, id="tril_zero_size"),
        case("x.tril()", x=SPECIAL, signed_zeros=True, id="tril_special_values"),
        case("x.diagonal()", x=X, id="diagonal"),
        case("x.diagonal(1)", x=X, id="diagonal_above"),
        case("x.diagonal(-2)", x=X, id="diagonal_below"),
        case("x.diagonal(offset=9)", x=X, id="diagonal_past_the_matrix"),
        case("x.diagonal(0, 0, 2)", x=X3, id="diagonal_dims_0_2"),
        case("x.diagonal(1, -1, 0)", x=X3, id="diagonal_reversed_dims"),
        case("x.diagonal(dim1=1, dim2=2)", x=X4, id="diagonal_keywords"),
        case("x.diagonal()", x=I, id="diagonal_int32"),
        case("x.diagonal()", x=E, id="diagonal_zero_size"),
        case("x.diag()", x=V, id="diag_vector_to_matrix"),
        case("x.diag(2)", x=V, id="diag_vector_above"),
        case("x.diag(-1)", x=V, id="diag_vector_below"),
        case("x.diag()", x=X, id="diag_matrix_to_vector"),
        case("x.diag(1)", x=X, id="diag_matrix_above"),
        case("x.diag()", x=np.arange(3, dtype=np.int32), id="diag_int32"),
        case("x.diag_embed()", x=X, id="diag_embed"),
        case("x.diag_embed(1)", x=X, id="diag_embed_offset"),
        case("x.diag_embed(-1, 0, 2)", x=X, id="diag_embed_dims"),
        case("x.diag_embed()", x=E, id="diag_embed_zero_size"),
    ]
)

PADS = Table(
    [
        case("x.pad((1, 2))", "torch.nn.functional.pad(x, (1, 2))", x=X, id="pad_torch_order_last_dim"),
        case("x.pad((1, 2, 0, 1))", "torch.nn.functional.pad(x, (1, 2, 0, 1))", x=X, id="pad_torch_order_two_dims"),
        case("x.pad(((1, 0), (2, 1)))", "torch.nn.functional.pad(x, (2, 1, 1, 0))", x=X, id="pad_limn_pairs"),
        case("x.pad((1, 1), value=-3.5)", "torch.nn.functional.pad(x, (1, 1), value=-3.5)", x=X, id="pad_value"),
        case("x.pad((-1, 2))", "torch.nn.functional.pad(x, (-1, 2))", x=X, id="pad_negative_crops"),
        case("x.pad((-1, -1, -1, 0))", "torch.nn.functional.pad(x, (-1, -1, -1, 0))", x=X, id="pad_crop_both"),
        case(
            "x.pad((1, 1), value=2.7)",
            "torch.nn.functional.pad(x, (1, 1), value=2.7)",
            x=I,
            id="pad_int_value_truncates",
        ),
        case("x.pad((1, 0))", "torch.nn.functional.pad(x, (1, 0))", x=B, id="pad_bool"),
        case(
            "x.pad((2, 1), mode='reflect')",
            "torch.nn.functional.pad(x, (2, 1), mode='reflect')",
            x=X3,
            id="pad_reflect",
        ),
        case(
            "x.pad((1, 2, 2, 1), mode='reflect')",
            "torch.nn.functional.pad(x, (1, 2, 2, 1), mode='reflect')",
            x=X4,
            id="pad_reflect_2d",
        ),
        case(
            "x.pad((2, 3), mode='replicate')",
            "torch.nn.functional.pad(x, (2, 3), mode='replicate')",
            x=X3,
            id="pad_replicate",
        ),
        case(
            "x.pad((1, 1, 2, 0), mode='replicate')",
            "torch.nn.functional.pad(x, (1, 1, 2, 0), mode='replicate')",
            x=X4,
            id="pad_replicate_2d",
        ),
        case(
            "x.pad((3, 4), mode='circular')",
            "torch.nn.functional.pad(x, (3, 4), mode='circular')",
            x=X3,
            id="pad_circular",
        ),
        case(
            "x.pad((1, 2, 2, 1), mode='circular')",
            "torch.nn.functional.pad(x, (1, 2, 2, 1), mode='circular')",
            x=X4,
            id="pad_circular_2d",
        ),
        case("x.pad((1, 1))", "torch.nn.functional.pad(x, (1, 1))", x=E, id="pad_zero_size"),
        case("x.pad((None, (2, 0)))", "torch.nn.functional.pad(x, (2, 0))", x=X, id="pad_none_pair_keeps_a_dim"),
        case("x.pad(padding=(1, 2))", "torch.nn.functional.pad(x, pad=(1, 2))", x=X, id="pad_tinygrads_keyword"),
        case(
            "x.pad(pad=(1, 2), value=3.0)",
            "torch.nn.functional.pad(x, pad=(1, 2), value=3.0)",
            x=X,
            id="pad_torchs_keyword",
        ),
        case(
            "x.pad((-1, 2, 2, -1), mode='reflect')",
            "torch.nn.functional.pad(x, (-1, 2, 2, -1), mode='reflect')",
            x=P3,
            id="pad_reflect_negative_m1_2_2_m1",
        ),
        case(
            "x.pad((-1, 2, 2, -1), mode='replicate')",
            "torch.nn.functional.pad(x, (-1, 2, 2, -1), mode='replicate')",
            x=P3,
            id="pad_replicate_negative_m1_2_2_m1",
        ),
        case(
            "x.pad((3, -3, 0, -3), mode='reflect')",
            "torch.nn.functional.pad(x, (3, -3, 0, -3), mode='reflect')",
            x=P5,
            id="pad_reflect_negative_3_m3_0_m3",
        ),
        case(
            "x.pad((3, -3, 0, -3), mode='replicate')",
            "torch.nn.functional.pad(x, (3, -3, 0, -3), mode='replicate')",
            x=P5,
            id="pad_replicate_negative_3_m3_0_m3",
        ),
        case(
            "x.pad((3, -5, 1, -5), mode='reflect')",
            "torch.nn.functional.pad(x, (3, -5, 1, -5), mode='reflect')",
            x=P5,
            id="pad_reflect_negative_3_m5_1_m5",
        ),
        case(
            "x.pad((3, -5, 1, -5), mode='replicate')",
            "torch.nn.functional.pad(x, (3, -5, 1, -5), mode='replicate')",
            x=P5,
            id="pad_replicate_negative_3_m5_1_m5",
        ),
        case(
            "x.pad((-6, 2, 0, 0), mode='reflect')",
            "torch.nn.functional.pad(x, (-6, 2, 0, 0), mode='reflect')",
            x=P5,
            id="pad_reflect_negative_m6_2_0_0",
        ),
        case(
            "x.pad((-6, 2, 0, 0), mode='replicate')",
            "torch.nn.functional.pad(x, (-6, 2, 0, 0), mode='replicate')",
            x=P5,
            id="pad_replicate_negative_m6_2_0_0",
        ),
        case(
            "x.pad((5, -1, 0, 0), mode='replicate')",
            "torch.nn.functional.pad(x, (5, -1, 0, 0), mode='replicate')",
            x=P5,
            id="pad_replicate_negative_5_m1_0_0",
        ),
        case(
            "x.pad((-1, 2, 2, -1), mode='circular')",
            "torch.nn.functional.pad(x, (-1, 2, 2, -1), mode='circular')",
            x=P3,
            id="pad_circular_negative_m1_2_2_m1",
        ),
        case(
            "x.pad((1, -2, 2, -1), mode='circular')",
            "torch.nn.functional.pad(x, (1, -2, 2, -1), mode='circular')",
            x=P5,
            id="pad_circular_negative_1_m2_2_m1",
        ),
    ]
)

VIEWS = Table(
    [
        case("x.expand(2, -1, -1)", x=X, id="expand_adds_a_leading_dim"),
        case("x[:, :1].expand(-1, 5)", x=X, id="expand_minus_one_keeps"),
        case("x.expand(3, 2)", x=Z, id="expand_0d"),
        case("x.expand_as(y)", x=X[:1], y=X, id="expand_as"),
        case("x.broadcast_to((2, 3, 4))", x=X, id="broadcast_to"),
        case("x.view(4, 3)", x=X, id="view"),
        case("x.view(-1)", x=X, id="view_minus_one"),
        case("x.T.view(12)", "x.T.reshape(12)", x=X, id="view_of_a_transpose_copies"),
        case("x.view_as(y)", x=X, y=X.reshape(2, 6), id="view_as"),
        case("x.reshape(2, -1, 2)", x=X, id="reshape_minus_one"),
        case("x.permute(2, 0, 1)", x=X3, id="permute"),
        case("x.permute(-1, 0, 1)", x=X3, id="permute_negative_dims"),
        case("x.movedim(0, -1)", x=X3, id="movedim"),
        case("x.movedim((0, 1), (2, 0))", x=X3, id="movedim_tuples"),
        case("x.moveaxis(1, 0)", x=X3, id="moveaxis"),
        case("x.swapaxes(0, 2)", x=X3, id="swapaxes"),
        case("x.swapdims(-1, 1)", x=X3, id="swapdims"),
        case("x.transpose(0, 1)", x=X3, id="transpose"),
        case("x.t()", x=X, id="t"),
        case("x.t()", x=V, id="t_of_a_vector"),
        case("x.mT", x=X3, id="mT"),
        case("x.T", x=X, id="T"),
        case("x.narrow(1, 1, 2)", x=X, id="narrow"),
        case("x.narrow(0, -2, 2)", x=X, id="narrow_negative_start"),
        case("x.narrow(1, 0, 0)", x=X, id="narrow_to_nothing"),
        case("x.select(1, -1)", x=X, id="select"),
        case("x.select(0, 1)", x=I, id="select_int32"),
        case("x.unbind(1)[2]", x=X, id="unbind"),
        case("Tensor.stack(x.unbind(0), 1)", "torch.stack(x.unbind(0), 1)", x=X, id="unbind_and_stack_back"),
        case("x.squeeze((0, 2))", x=X.reshape(1, 3, 1, 4), id="squeeze_tuple"),
        case("x.squeeze(dim=(0, 1))", x=X.reshape(1, 3, 4), id="squeeze_tuple_skips_non_unit_dims"),
        case("x.squeeze(-2)", x=X.reshape(3, 1, 4), id="squeeze_negative_dim"),
        case("x.squeeze()", x=X.reshape(1, 3, 1, 4), id="squeeze_all"),
        case("x.squeeze(0)", x=Z, id="squeeze_0d"),
        case("x.unsqueeze(-1)", x=X, id="unsqueeze_negative"),
        case("x.unsqueeze(dim=0)", x=Z, id="unsqueeze_0d"),
        case("x.flatten()", x=X3, id="flatten"),
        case("x.flatten(start_dim=1)", x=X4, id="flatten_start_dim"),
        case("x.flatten(0, -2)", x=X4, id="flatten_end_dim"),
        case("x.flatten()", x=Z, id="flatten_0d"),
        case("x.unflatten(1, (2, 2))", x=X, id="unflatten"),
        case("x.unflatten(-1, (-1, 2))", x=X3, id="unflatten_minus_one"),
        case("x.contiguous()", x=X, id="contiguous"),
        case("x.clone() * 2", x=X, id="clone"),
        case("x.detach() * x", x=X, id="detach_cuts_the_gradient"),
        case("Tensor.cat([x, y], dim=1)", "torch.cat([x, y], dim=1)", x=X, y=X, id="cat_dim_keyword"),
        case("Tensor.stack([x, y], dim=-1)", "torch.stack([x, y], dim=-1)", x=X, y=X, id="stack_dim_keyword"),
        case("x.split(2, dim=1)[1]", x=X, id="split_dim_keyword"),
        case("x.chunk(2, dim=-1)[0]", x=X, id="chunk_dim_keyword"),
        case("x.view(2, 6)", x=F64, id="view_float64"),
    ]
)

TABLES = {"flip_roll": FLIP_ROLL, "repeats": REPEATS, "triangles": TRIANGLES, "pads": PADS, "views": VIEWS}


@pytest.mark.parametrize("name", FLIP_ROLL.ids)
def test_flip_and_roll_match_torch(device: str, name: str) -> None:
    FLIP_ROLL.assert_agrees(device, name)


@pytest.mark.parametrize("name", REPEATS.ids)
def test_repeat_tile_repeat_interleave_and_unfold_match_torch(device: str, name: str) -> None:
    REPEATS.assert_agrees(device, name)


@pytest.mark.parametrize("name", TRIANGLES.ids)
def test_triangles_and_diagonals_match_torch(device: str, name: str) -> None:
    TRIANGLES.assert_agrees(device, name)


@pytest.mark.parametrize("name", PADS.ids)
def test_pad_in_both_spellings_and_every_mode_matches_torch(device: str, name: str) -> None:
    PADS.assert_agrees(device, name)


@pytest.mark.parametrize("name", VIEWS.ids)
def test_torch_spellings_of_the_view_movements_match_torch(device: str, name: str) -> None:
    VIEWS.assert_agrees(device, name)


# ---- structure: what the movements build ----


def ops_in(t: Tensor) -> list[Op]:
    return [n.op for n in toposort([t.node])]


def test_roll_repeat_diagonal_and_constant_pad_are_views_with_no_gather() -> None:
    x = Tensor(X)
    for made in (x.roll(1, 1), x.repeat(2, 1), x.diagonal(), x.pad((1, 1, -1, 0)), x.narrow(1, 1, 2)):
        assert Op.GATHER not in ops_in(made), f"{made} gathers"


def test_view_is_reshape_and_copies_where_strides_cannot_say_it_unlike_torch() -> None:
    # torch's x.T.view(12) raises; limn's view is reshape, which copies (a CONTIGUOUS) there (VIEWS row
    # view_of_a_transpose_copies holds the values)
    out = Tensor(X).T.view(12)
    assert Op.CONTIGUOUS in ops_in(out)


def test_view_with_a_dtype_raises_type_error() -> None:
    with pytest.raises(TypeError, match="cannot reinterpret bits"):
        Tensor(X).view("int32")


MISTAKES = {
    "expand_a_non_unit_dim": (lambda: Tensor(X).expand(2, 5, 4), ValueError, "only size-1 dims can grow"),
    "pad_number_as_mode": (lambda: Tensor(X).pad(((0, 0), (1, 1)), 2.0), TypeError, "mode is a string"),
    "expand_new_dim_minus_one": (lambda: Tensor(X).expand(-1, 3, 4), ValueError, "new leading dim cannot be -1"),
    "repeat_fewer_sizes_than_dims": (lambda: Tensor(X).repeat(2), ValueError, "1 sizes .* of 2 dims"),
    "unfold_window_too_large": (lambda: Tensor(X).unfold(1, 5, 1), ValueError, "window size 5 does not fit"),
    "unfold_zero_step": (lambda: Tensor(X).unfold(1, 2, 0), ValueError, "step must be positive"),
    "pad_odd_flat_list": (lambda: Tensor(X).pad((1, 2, 3)), ValueError, "two per dim"),
    "pad_unknown_mode": (lambda: Tensor(X).pad((1, 1), mode="mirror"), ValueError, "mode 'mirror'"),
    "pad_unknown_mode_not_implemented_as_torch": (
        lambda: Tensor(X).pad((3, 0), mode="typo"),
        NotImplementedError,
        "mode 'typo'",
    ),
    "pad_widths_twice": (lambda: Tensor(X).pad((1, 1), padding=(1, 1)), TypeError, "got widths=.* and padding="),
    "pad_reflect_too_wide": (lambda: Tensor(X).pad((4, 0), mode="reflect"), ValueError, "below the size 4"),
    "pad_crop_too_much": (lambda: Tensor(X).pad((-3, -2)), ValueError, "crop more than the 4"),
    "pad_reflect_too_wide_before_its_crop": (
        lambda: Tensor(P5).pad((5, -1), mode="reflect"),
        RuntimeError,
        r"reflect widths \(5, 0\) must be below the size 5",
    ),
    "pad_reflect_output_empty": (
        lambda: Tensor(P5).pad((0, 0, 0, -5), mode="reflect"),
        RuntimeError,
        "leave 0 cells of dim 2",
    ),
    "pad_replicate_output_negative": (
        lambda: Tensor(P5).pad((-3, -3), mode="replicate"),
        RuntimeError,
        "leave -1 cells of dim 3",
    ),
    # torch wraps past the cropped dim into memory outside the input (its values are garbage): limn raises
    "pad_circular_wrap_past_the_crop": (
        lambda: Tensor(P5).pad((4, -2), mode="circular"),
        RuntimeError,
        "must not exceed the size 3 of dim 3 after its crop",
    ),
    "narrow_past_the_end": (lambda: Tensor(X).narrow(1, 3, 2), IndexError, "do not fit dim 1 of size 4"),
    "select_out_of_range": (lambda: Tensor(X).select(0, 3), IndexError, "index 3 is out of bounds for dimension 0"),
    "movedim_repeated": (lambda: Tensor(X3).movedim((0, 0), (1, 2)), ValueError, "repeated dim"),
    "flip_repeated_dim": (lambda: Tensor(X).flip(0, 0), ValueError, "listed twice"),
    "tril_of_a_vector": (lambda: Tensor(V).tril(), ValueError, "at least 2 dims"),
    "diagonal_same_dims": (lambda: Tensor(X).diagonal(0, 1, 1), ValueError, "name one dim"),
    "diag_of_3d": (lambda: Tensor(X3).diag(), ValueError, "1-D or 2-D"),
    "unflatten_wrong_sizes": (lambda: Tensor(X).unflatten(1, (3, 2)), ValueError, "multiply to 6"),
    "flatten_start_after_end": (lambda: Tensor(X3).flatten(2, 1), ValueError, "comes after end_dim"),
    "repeat_interleave_wrong_count": (
        lambda: Tensor(X).repeat_interleave([1, 2], 0),
        ValueError,
        "2 repeats for a dim of 3",
    ),
    "roll_shift_dim_mismatch": (lambda: Tensor(X).roll((1, 2), 0), ValueError, "same length"),
    "t_of_3d": (lambda: Tensor(X3).t(), ValueError, "at most 2 dims"),
    "squeeze_dim_out_of_range": (lambda: Tensor(X).squeeze((0, 5)), IndexError, "axis 5 is out of range"),
    "cat_dim_and_axis": (lambda: Tensor.cat([Tensor(X)], dim=0, axis=1), TypeError, "got dim=0 and axis=1"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_movement_mistake_raises_a_typed_error_where_torch_raises(mistake: str) -> None:
    action, error, message = MISTAKES[mistake]
    with pytest.raises(error, match=message):
        action()
