"""Padding with torch's modes: constant, reflect, replicate and circular; negative widths crop.

pad takes a tensor and widths, either one (before, after) pair per dim from the first (limn's spelling,
which the movements and autograd use) or a flat list from the last dim, two per dim (torch's F.pad
spelling), and gives the padded tensor. constant is the PAD movement (a masked view) and a WHERE for a
nonzero value; the other modes read x through a GATHER per padded dim, with the index numpy.pad computes.
Pipeline: **tensor (composed ops)** -> graph (VIEW, WHERE, GATHER) -> schedule -> IR -> device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from limn import dtypes
from limn.composed.movement.rearrange import take_at
from limn.errors import ArgumentError
from limn.frontend.arguments import Scalar, aliases

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

MODES = {"constant": None, "reflect": "reflect", "replicate": "edge", "circular": "wrap"}  # -> numpy.pad's mode


class UnknownModeError(ArgumentError, NotImplementedError):
    """A pad mode limn does not know: an ArgumentError, and a NotImplementedError, which torch raises for it."""


class PaddingMixin:
    """Tensor.pad, torch's F.pad: widths from the last dim and the four modes."""

    __slots__ = ()

    @aliases(pad="widths", padding="widths")  # torch's keyword, tinygrad's
    def pad(
        self,
        widths: Sequence[int] | Sequence[tuple[int, int]] | None = None,
        mode: str = "constant",
        value: Scalar | None = None,
    ) -> Tensor:
        """x padded by `widths`, as torch.nn.functional.pad.

        widths is one (before, after) pair per dim, first dim first (limn's spelling), or torch's flat list,
        last dim first: (left, right) of the last dim, then (top, bottom) of the one before, and so on; dims it
        does not reach are not padded. A negative width crops (reflect and replicate, as torch's, pad x first
        and crop the result, so (-1, 2) mirrors x's own edge; circular crops first). mode is "constant" (filled
        with value, 0 by default, cast to x's dtype), "reflect" (mirrored, the edge not repeated), "replicate"
        (the edge repeated) or "circular" (wrapped around). The widths may also be passed as pad= (torch's
        keyword) or padding= (tinygrad's).

        >>> Tensor([1, 2, 3]).pad((2, 1), mode="reflect").tolist()
        [3, 2, 1, 2, 3, 2]
        >>> Tensor([[1, 2]]).pad(((0, 0), (1, 0)), value=9).tolist()
        [[9, 1, 2]]
        """
        x = self
        if widths is None:
            raise ArgumentError("pad: no widths were given; pass them positionally, as pad= or as padding=")
        if not isinstance(mode, str):
            raise TypeError(f"pad: mode is a string ({', '.join(map(repr, MODES))}), got {mode!r}; a fill is value=")
        pairs = _pairs(x, widths)
        if mode not in MODES:
            raise UnknownModeError(f"pad: mode {mode!r} is not one of {', '.join(map(repr, MODES))}")
        if mode != "constant" and value not in (None, 0):
            raise ArgumentError(f"pad: mode {mode!r} takes no value (got value={value})")
        if all(b >= 0 and a >= 0 for b, a in pairs) and mode == "constant":
            return x.pad_constant(pairs, _fill(x, value))  # the common case: one PAD movement
        if mode in ("reflect", "replicate"):
            return _pad_then_crop(x, pairs, mode)
        box = []
        for d, ((b, a), n) in enumerate(zip(pairs, x.shape)):
            start, end = max(-b, 0), n - max(-a, 0)
            if start > end:
                raise ArgumentError(f"pad: widths {pairs[d]} crop more than the {n} elements of dim {d} of {x.shape}")
            box.append((start, end))
        x = x.shrink(box)  # the negative widths: a crop
        grow = [(max(b, 0), max(a, 0)) for b, a in pairs]
        if mode == "constant":
            return x.pad_constant(grow, _fill(x, value))
        for d, (b, a) in enumerate(grow):
            if b or a:
                x = take_at(x, d, _source_positions(x.shape[d], b, a, mode, d))
        return x


def _pad_then_crop(x: Tensor, pairs: Sequence[tuple[int, int]], mode: str) -> Tensor:
    """reflect and replicate as torch computes them: out[o] reads x at the mode's source of o - before, so a
    negative width crops the padded dim (the other side mirrors x itself, and is checked against x's size)."""
    for d, ((b, a), n) in enumerate(zip(pairs, x.shape)):
        if (b, a) == (0, 0):
            continue
        if n + b + a < 1:
            raise ArgumentError(
                f"pad: widths {(b, a)} leave {n + b + a} cells of dim {d} of {x.shape} in mode {mode!r}; torch "
                f"requires the output of every padded dim to be >= 1 (it raises 'Calculated output ... must be >= 1')"
            )
        if b <= 0 and a <= 0:  # a crop alone: a view
            x = x.shrink(tuple((-b, n + a) if e == d else (0, s) for e, s in enumerate(x.shape)))
            continue
        cells = _source_positions(n, max(b, 0), max(a, 0), mode, d)  # the padded dim's sources
        x = take_at(x, d, cells[max(-b, 0) : len(cells) - max(-a, 0)])  # (.., n + b + a, ..)
    return x


def _pairs(x: Tensor, widths: Sequence) -> list[tuple[int, int]]:
    """The widths as one (before, after) pair per dim, first dim first, from either spelling."""
    widths = list(widths)
    if widths and all(isinstance(w, (int, np.integer)) and not isinstance(w, bool) for w in widths):
        if len(widths) % 2 or len(widths) > 2 * x.ndim:
            raise ArgumentError(
                f"pad: {len(widths)} widths {tuple(widths)} for a tensor of shape {x.shape}; torch's flat spelling "
                f"takes an even number of ints, two per dim from the last dim, at most {2 * x.ndim}"
            )
        pairs = [(0, 0)] * x.ndim
        for k in range(len(widths) // 2):
            pairs[x.ndim - 1 - k] = (int(widths[2 * k]), int(widths[2 * k + 1]))
        return pairs
    try:
        pairs = [(0, 0) if w is None else (int(w[0]), int(w[1])) for w in widths]  # None: that dim as it is
    except (TypeError, ValueError):
        raise TypeError(f"pad: widths {widths!r} must be ints (torch's order) or (before, after) pairs") from None
    if len(pairs) != x.ndim:
        raise ArgumentError(f"pad {pairs}: needs one (before, after) pair per dim of {x.shape}")
    return pairs


def _fill(x: Tensor, value: Scalar | None) -> Scalar:
    """The pad value in x's dtype, as torch casts it: an int tensor takes int(value), a bool one bool(value)."""
    if value is None:
        return 0
    if x.dtype == dtypes.bool_:
        return bool(value)
    if x.dtype.is_int:
        return int(value)
    return value


def _source_positions(n: int, before: int, after: int, mode: str, dim: int) -> np.ndarray:
    """Which element of a dim of n each cell of its padded version reads, for a mode other than constant."""
    if n == 0:
        raise ArgumentError(f"pad: mode {mode!r} cannot pad dim {dim}, which is empty")
    if mode == "reflect" and max(before, after) >= n:
        raise ArgumentError(
            f"pad: reflect widths ({before}, {after}) must be below the size {n} of dim {dim} (torch's rule: a "
            "reflection repeats no cell); use mode 'replicate' or 'circular', or pad in steps"
        )
    if mode == "circular" and max(before, after) > n:
        raise ArgumentError(
            f"pad: circular widths ({before}, {after}) must not exceed the size {n} of dim {dim} after its crop "
            "(a wrap goes around once; torch reads memory outside the input there)"
        )
    return np.pad(np.arange(n), (before, after), mode=MODES[mode])
