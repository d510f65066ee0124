"""Rules for fusion.compose, which lets a kernel read a value through two views as one (no copy between):
- wherever it returns a View, that View reads every cell the two views read in turn, valid where they are
  both valid and at the same place, checked cell by cell against reading through each (the oracle);
- a masked or scattered inner view composes with an outer view that only reorders its dims (a permute, size-1
  dims added or dropped), as a conv's backward reads its im2col gradient's shifted, padded taps transposed.
The kernels built on it are held to torch by value in tests/nn/test_layers.py (a conv's values and gradients)."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from limn.compiler.fusion import compose
from limn.graph.view import View


def read(view: View, index: tuple[int, ...]) -> int | None:
    """The buffer position `view` reads at `index`, None where it reads a pad."""
    return view.position(index) if view.valid(index) else None


def read_through(inner: View, outer: View, index: tuple[int, ...]) -> int | None:
    """Reading inner at the row-major position outer gives for `index`: the oracle."""
    at = read(outer, index)
    return None if at is None else read(inner, tuple(int(i) for i in np.unravel_index(at, inner.shape)))


@st.composite
def inner_views(draw) -> View:
    """A view of a buffer made by the movements a graph applies: shrinks, pads, permutes, size-1 dims."""
    view = View.contiguous(tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))))
    for _ in range(draw(st.integers(1, 4))):
        move = draw(st.sampled_from(["shrink", "pad", "permute", "unsqueeze"]))
        if move == "shrink":
            box = []
            for n in view.shape:
                start = draw(st.integers(0, n - 1))
                box.append((start, draw(st.integers(start + 1, n))))
            view = view.shrink(tuple(box))
        elif move == "pad":
            view = view.pad(tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in view.shape))
        elif move == "permute":
            view = view.permute(tuple(draw(st.permutations(range(len(view.shape))))))
        else:
            at = draw(st.integers(0, len(view.shape)))
            view = view.reshape(view.shape[:at] + (1,) + view.shape[at:]) or view
    return view


@st.composite
def reorders(draw, shape: tuple[int, ...]) -> View:
    """An outer view that reorders the dims of `shape` (a permute, size-1 dims dropped and added)."""
    kept = [n for n in shape if n != 1]
    order = draw(st.permutations(range(len(kept))))
    moved = View.contiguous(tuple(kept)).permute(tuple(order))
    ones = draw(st.lists(st.integers(0, len(moved.shape)), max_size=2))
    dims = list(moved.shape)
    for at in sorted(ones, reverse=True):
        dims.insert(at, 1)
    return moved.reshape(tuple(dims))


def assert_reads_the_same(inner: View, outer: View, composed: View) -> None:
    assert composed.shape == outer.shape
    for index in itertools.product(*(range(n) for n in outer.shape)):
        want, got = read_through(inner, outer, index), read(composed, index)
        assert got == want, f"compose({inner}, {outer}) = {composed} reads {got} at {index}, the two views read {want}"


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_composed_view_reads_what_the_two_views_read(data) -> None:
    inner = data.draw(inner_views())
    outer = data.draw(st.one_of(reorders(inner.shape), inner_views()))
    reads = [read(outer, i) for i in itertools.product(*(range(n) for n in outer.shape))]
    assume(all(at is None or 0 <= at < inner.size for at in reads))  # outer indexes inner's cells
    composed = compose(inner, outer)
    if composed is not None:
        assert_reads_the_same(inner, outer, composed)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_view_composes_with_a_reorder_of_its_dims(data) -> None:
    inner = data.draw(inner_views())
    # a size-1 dim that is all pad cannot be dropped: no mask of the other dims would say those cells are pads
    assume(inner.mask is None or not any(n == 1 and lo >= hi for n, (lo, hi) in zip(inner.shape, inner.mask)))
    outer = data.draw(reorders(inner.shape))
    composed = compose(inner, outer)
    assert composed is not None, f"compose({inner}, {outer}) found no view: outer only reorders inner's dims"
    assert_reads_the_same(inner, outer, composed)


def test_a_conv_taps_padded_view_composes_with_the_transpose_its_gradient_is_read_through() -> None:
    # dcol (C, T, B, H, W) = (32, 9, 8, 32, 32); tap 0's gradient is its slice, shifted by one cell and padded
    taps = View.contiguous((32, 9, 8, 32, 32)).shrink(((0, 32), (0, 1), (0, 8), (0, 31), (0, 31)))
    tap = taps.pad(((0, 0), (0, 0), (0, 0), (1, 0), (1, 0)))  # (32, 1, 8, 32, 32), zero on row 0 and column 0
    to_nchw = View.contiguous((32, 8, 32, 32)).permute((1, 0, 2, 3))  # (C, B, H, W) read as (B, C, H, W)
    composed = compose(tap, to_nchw)
    assert composed is not None and composed.mask is not None and math.prod(composed.shape) == tap.size
    assert_reads_the_same(tap, to_nchw, composed)
