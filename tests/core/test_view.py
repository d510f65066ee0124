"""The View algebra against numpy: reshape, permute, expand, pad and shrink compose into one View whose
index arithmetic reads the same numbers numpy's own reshape, transpose, broadcast_to, np.pad and slicing
give, and View.reshape declines (returns None) exactly where numpy would have to copy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import limn
from limn import Tensor
from limn.graph.ops import Op, toposort
from limn.graph.view import View
from limn.runtime.numpy_device import view_array

MAX_SIZE = 400  # elements; pads stop growing a shape past this

# ---- random movement programs: (kind, arg) pairs, drawn one at a time so each fits the shape it meets ----


def prime_factors(n: int) -> list[int]:
    factors, p = [], 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    return factors


@st.composite
def reshape_target(draw: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Any shape of shape's element count: its prime factors grouped into dims, size-1 dims strewn in."""
    factors = draw(st.permutations(prime_factors(math.prod(shape))))
    dims: list[int] = []
    for f in factors:
        if dims and draw(st.booleans()):
            dims[-1] *= f
        else:
            dims.append(f)
    for _ in range(draw(st.integers(0, 2))):
        dims.insert(draw(st.integers(0, len(dims))), 1)
    return tuple(dims)


def applicable(shape: tuple[int, ...], kind: str) -> bool:
    if kind == "permute":
        return len(shape) >= 2
    if kind == "expand":
        return 1 in shape
    if kind == "pad":
        return len(shape) > 0 and math.prod(s + 4 for s in shape) <= MAX_SIZE
    if kind == "shrink":
        return len(shape) > 0
    return True  # reshape


@st.composite
def movement(draw: Any, shape: tuple[int, ...], kinds: tuple[str, ...]) -> tuple[str, Any]:
    """One movement, of a kind that fits `shape`, with its argument."""
    kind = draw(st.sampled_from([k for k in kinds if applicable(shape, k)]))
    if kind == "permute":
        return kind, tuple(draw(st.permutations(range(len(shape)))))
    if kind == "expand":
        return kind, tuple(draw(st.integers(1, 4)) if s == 1 else s for s in shape)
    if kind == "pad":
        return kind, tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape)
    if kind == "shrink":
        box = []
        for s in shape:
            start = draw(st.integers(0, s - 1))
            box.append((start, draw(st.integers(start + 1, s))))
        return kind, tuple(box)
    return kind, draw(reshape_target(shape))


def shape_after(shape: tuple[int, ...], kind: str, arg: Any) -> tuple[int, ...]:
    if kind == "permute":
        return tuple(shape[d] for d in arg)
    if kind == "pad":
        return tuple(s + before + after for s, (before, after) in zip(shape, arg))
    if kind == "shrink":
        return tuple(end - start for start, end in arg)
    return tuple(arg)  # reshape, expand


@st.composite
def programs(draw: Any, kinds: tuple[str, ...] = ("reshape", "permute", "expand", "pad", "shrink")) -> tuple:
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    ops, current = [], shape
    for _ in range(draw(st.integers(1, 6))):
        kind, arg = draw(movement(current, kinds))
        ops.append((kind, arg))
        current = shape_after(current, kind, arg)
    return shape, ops


def numpy_movement(a: np.ndarray, kind: str, arg: Any) -> np.ndarray:
    """The numpy oracle for each movement; every one but pad (and a reshape that must copy) is a view."""
    if kind == "reshape":
        return a.reshape(arg)
    if kind == "permute":
        return a.transpose(arg)
    if kind == "expand":
        return np.broadcast_to(a, arg)
    if kind == "pad":
        return np.pad(a, arg)
    return a[tuple(slice(start, end) for start, end in arg)]


def tensor_movement(t: Tensor, kind: str, arg: Any) -> Tensor:
    return getattr(t, kind)(arg)


def view_movement(v: View, kind: str, arg: Any) -> View | None:
    return getattr(v, kind)(arg)


def base_array(shape: tuple[int, ...]) -> np.ndarray:
    """1, 2, 3, ...: no element is zero, so a zero read through a view can only be a masked cell."""
    return np.arange(1, math.prod(shape) + 1, dtype=np.float32).reshape(shape)


def describe(shape: tuple[int, ...], ops: list) -> str:
    steps = "".join(f".{kind}({arg!r})" for kind, arg in ops)
    return f"Tensor(np.arange(1, {math.prod(shape) + 1}, dtype=np.float32).reshape({shape})){steps}"


# ---- Tensor level: random compositions read the numbers numpy gives ----


@settings(max_examples=150, deadline=None)
@given(programs())
def test_composed_movement_reads_what_numpy_reads(program: tuple) -> None:
    shape, ops = program
    t, a = Tensor(base_array(shape)), base_array(shape)
    for kind, arg in ops:
        t, a = tensor_movement(t, kind, arg), numpy_movement(a, kind, arg)
    assert t.shape == a.shape, describe(shape, ops)
    np.testing.assert_array_equal(t.numpy(), a, err_msg=describe(shape, ops))


@settings(max_examples=100, deadline=None)
@given(programs())
def test_movement_never_chains_views(program: tuple) -> None:
    """Each VIEW reads a node that is not a VIEW: movements fold into one View over their base."""
    shape, ops = program
    t = Tensor(base_array(shape))
    for kind, arg in ops:
        t = tensor_movement(t, kind, arg)
    for node in toposort([t.node]):
        if node.op is Op.VIEW:
            assert node.srcs[0].op is not Op.VIEW, f"a VIEW of a VIEW: {describe(shape, ops)}"


@settings(max_examples=100, deadline=None)
@given(programs(kinds=("permute", "expand", "shrink", "pad")))
def test_movement_without_reshape_is_one_view_over_the_buffer(program: tuple) -> None:
    shape, ops = program
    t = Tensor(base_array(shape))
    for kind, arg in ops:
        t = tensor_movement(t, kind, arg)
    ops_in_graph = [n.op for n in toposort([t.node])]
    assert ops_in_graph in ([Op.BUFFER], [Op.BUFFER, Op.VIEW]), f"{ops_in_graph}: {describe(shape, ops)}"


# ---- View level: the index arithmetic itself ----


@settings(max_examples=150, deadline=None)
@given(programs())
def test_view_algebra_matches_numpy_through_view_array(program: tuple) -> None:
    """Apply the program to a View directly; where reshape declines, materialize (as CONTIGUOUS does) and
    go on from a contiguous View of the copy. view_array must read what numpy computed after every step."""
    shape, ops = program
    base, view, a = base_array(shape), View.contiguous(shape), base_array(shape)
    for kind, arg in ops:
        new = view_movement(view, kind, arg)
        if new is None:
            base, new = view_array(base, view), View.contiguous(view.shape).reshape(arg)
        view, a = new, numpy_movement(a, kind, arg)
        np.testing.assert_array_equal(view_array(base, view), a, err_msg=f"after {kind} {arg}: {view}")


@settings(max_examples=100, deadline=None)
@given(programs())
def test_position_and_valid_give_each_element(program: tuple) -> None:
    """The index expression a kernel uses: element i is base.flat[position(i)] where valid(i), else zero."""
    shape, ops = program
    base, view, a = base_array(shape), View.contiguous(shape), base_array(shape)
    for kind, arg in ops:
        new = view_movement(view, kind, arg)
        if new is None:
            base, new = view_array(base, view), View.contiguous(view.shape).reshape(arg)
        view, a = new, numpy_movement(a, kind, arg)
    flat = base.reshape(-1)
    for index in np.ndindex(*view.shape):
        got = flat[view.position(index)] if view.valid(index) else 0
        assert got == a[index], f"{view} at {index}: read {got}, numpy has {a[index]}"


@st.composite
def strided_views(draw: Any) -> tuple[View, np.ndarray, np.ndarray]:
    """An unmasked View and the numpy view that mirrors it (transpose, broadcast_to, slicing, no-copy
    reshape), with the base both read."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    base = base_array(shape)
    view, a = View.contiguous(shape), base
    for _ in range(draw(st.integers(1, 5))):
        kind, arg = draw(movement(view.shape, ("reshape", "permute", "expand", "shrink")))
        new = view_movement(view, kind, arg)
        if new is None:
            continue  # would need a copy; the test below is about where that line falls
        view, a = new, np.reshape(a, arg, copy=False) if kind == "reshape" else numpy_movement(a, kind, arg)
    return view, a, base


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_reshape_declines_exactly_where_numpy_must_copy(data: Any) -> None:
    view, a, base = data.draw(strided_views())
    target = data.draw(reshape_target(view.shape))
    try:
        np.reshape(a, target, copy=False)
        numpy_copies = False
    except ValueError:
        numpy_copies = True
    new = view.reshape(target)
    assert (new is None) == numpy_copies, (
        f"{view}.reshape({target}) gave {new}; numpy {'must' if numpy_copies else 'need not'} copy "
        f"(numpy strides {tuple(s // a.itemsize for s in a.strides)})"
    )
    if new is not None:
        np.testing.assert_array_equal(view_array(base, new), a.reshape(target))


# ---- the rules the algebra promises, one each ----


def test_view_array_equals_numpy_indexing() -> None:
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = View.contiguous((4, 6)).shrink(((1, 3), (2, 6))).permute((1, 0))
    np.testing.assert_array_equal(view_array(base, view), base[1:3, 2:6].T)
    assert view.strides == (1, 6) and view.offset == 8


def test_view_array_reads_masked_cells_as_zero() -> None:
    base = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    view = View.contiguous((2, 3)).pad(((1, 0), (0, 2)))
    np.testing.assert_array_equal(view_array(base, view), np.pad(base, ((1, 0), (0, 2))))
    assert view.mask == ((1, 3), (0, 3))


def test_shrinking_a_pad_away_drops_the_mask() -> None:
    view = View.contiguous((2, 3)).pad(((1, 1), (2, 0))).shrink(((1, 3), (2, 5)))
    assert view == View.contiguous((2, 3))


def test_expand_reads_one_element_with_stride_zero() -> None:
    view = View.contiguous((3, 1)).expand((3, 4))
    assert view.strides == (1, 0)
    np.testing.assert_array_equal(view_array(np.array([7.0, 8.0, 9.0]), view), np.repeat([[7.0], [8.0], [9.0]], 4, 1))


def test_a_masked_view_keeps_a_view_only_when_reshape_adds_or_drops_unit_dims() -> None:
    padded = View.contiguous((2, 3)).pad(((0, 1), (1, 0)))  # (3, 4), masked
    assert padded.reshape((1, 3, 1, 4)) is not None
    assert padded.reshape((1, 3, 1, 4)).reshape((3, 4)) == padded
    assert padded.reshape((12,)) is None
    assert padded.reshape((4, 3)) is None


def test_reshape_of_a_transposed_tensor_copies_and_is_right() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = Tensor(a).permute(1, 0).reshape(6)
    assert [n.op for n in toposort([t.node])] == [Op.BUFFER, Op.VIEW, Op.CONTIGUOUS, Op.VIEW]
    np.testing.assert_array_equal(t.numpy(), a.T.reshape(6))


def test_reshape_that_a_view_can_express_adds_no_copy() -> None:
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = Tensor(a).permute(2, 0, 1).reshape(4, 6)  # (4, 2, 3): dims 1 and 2 are still one strided line
    assert [n.op for n in toposort([t.node])] == [Op.BUFFER, Op.VIEW]
    np.testing.assert_array_equal(t.numpy(), a.transpose(2, 0, 1).reshape(4, 6))


def test_reshape_of_a_padded_tensor_copies_and_is_right() -> None:
    a = base_array((2, 3))
    t = Tensor(a).pad(((1, 0), (0, 1))).reshape(12)
    assert Op.CONTIGUOUS in [n.op for n in toposort([t.node])]
    np.testing.assert_array_equal(t.numpy(), np.pad(a, ((1, 0), (0, 1))).reshape(12))


def test_five_movements_compose_into_one_view_over_the_buffer() -> None:
    a = base_array((2, 3, 4))
    t = Tensor(a).reshape(6, 4).permute(1, 0).pad(((1, 1), (0, 2))).shrink(((0, 5), (1, 8))).reshape(5, 1, 7)
    t = t.expand(5, 3, 7)
    assert t.node.op is Op.VIEW and t.node.srcs[0].op is Op.BUFFER
    want = np.broadcast_to(np.pad(a.reshape(6, 4).T, ((1, 1), (0, 2)))[0:5, 1:8].reshape(5, 1, 7), (5, 3, 7))
    np.testing.assert_array_equal(t.numpy(), want)


def test_movements_that_cancel_leave_the_buffer_itself() -> None:
    t = Tensor(base_array((2, 3)))
    assert t.permute(1, 0).permute(1, 0).node is t.node
    assert t.reshape(3, 2).reshape(2, 3).node is t.node


def test_building_views_runs_nothing() -> None:
    device = limn.get_device("numpy")
    t = Tensor(base_array((4, 5)))
    before = device.nodes_run
    t.permute(1, 0).pad(((1, 1), (0, 0))).shrink(((0, 3), (1, 4))).reshape(1, 9).expand(2, 9)
    assert device.nodes_run == before


def test_an_empty_shrink_reads_nothing() -> None:
    t = Tensor(base_array((3, 4))).shrink(((1, 1), (0, 4)))
    assert t.shape == (0, 4)
    assert t.numpy().shape == (0, 4)
    assert t.reshape(0, 2, 2).numpy().shape == (0, 2, 2)


def test_a_unit_dim_padded_from_nothing_reads_zero_through_reshape_and_pad() -> None:
    # the empty shrink leaves mask (1, 1) on a unit dim after the pad: empty, though not (0, 0); a reshape
    # that drops that dim once kept a view that read x[1, 0] there (a conv tap wholly in the padding)
    x = base_array((5, 5))

    def tap() -> Tensor:  # a fresh graph each time: numpy() realizes what it reads
        return Tensor(x).shrink(((1, 2), (0, 0))).pad(((0, 0), (1, 0)))  # (1, 1): only padding

    expected = np.pad(x[1:2, 0:0], ((0, 0), (1, 0)))
    np.testing.assert_array_equal(tap().numpy(), expected)
    np.testing.assert_array_equal(tap().reshape(1).pad(((2, 1),)).numpy(), np.pad(expected.reshape(1), (2, 1)))
    got = tap().reshape(1, 1, 1).pad(((0, 0), (3, 5), (0, 0))).numpy()
    np.testing.assert_array_equal(got, np.pad(expected.reshape(1, 1, 1), ((0, 0), (3, 5), (0, 0))))


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 4), (1, 5, 1)])
def test_contiguous_views_report_row_major_strides(shape: tuple[int, ...]) -> None:
    view = View.contiguous(shape)
    assert view.is_contiguous
    expected = np.empty(shape, np.float32).strides
    assert all(st * 4 == want or size == 1 for st, want, size in zip(view.strides, expected, shape))
