"""Rearranging elements: flip, roll, repeat, tile, repeat_interleave and unfold, with torch's arguments.

Each takes a tensor and gives one whose elements are x's moved or repeated: roll and repeat are movements
(shrinks, pads, expands and reshapes), flip, unfold and repeat_interleave with a tensor of counts read x
through a GATHER with an index limn computes on the host (a View has no negative or overlapping stride),
so the gradient is a SCATTER that adds where an element was read twice.
Pipeline: **tensor (composed ops)** -> graph (VIEW, GATHER) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn.composed.movement.shaping import sizes_of
from limn.errors import ArgumentError
from limn.frontend.arguments import normalize_axis
from limn.graph.view import prod

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def take_at(x: Tensor, dim: int, positions: np.ndarray) -> Tensor:
    """x read at `positions` (host ints, each in range) along dim: out[..., j, ...] = x[..., positions[j], ...].
    One GATHER, whose gradient adds where a position repeats."""
    dim = normalize_axis(dim, x.ndim, "take")
    positions = np.asarray(positions, np.int64).reshape(-1)
    shape = x.shape[:dim] + (len(positions),) + x.shape[dim + 1 :]
    if prod(shape) == 0:  # nothing to read: an empty tensor of the shape, still x's descendant
        box = [(0, s) for s in x.shape]
        box[dim] = (0, 0)
        widths = [(0, 0)] * x.ndim
        widths[dim] = (0, len(positions))
        return x.shrink(box).pad_constant(widths)
    line = [1] * x.ndim
    line[dim] = len(positions)
    idx = limn.Tensor(positions.astype(np.int32), device=x.device).reshape(line).expand(shape)  # (L,) -> shape
    return x.gather(dim, idx)


def _dims_argument(dims: tuple, kwargs: dict, what: str) -> tuple:
    """The dims given as varargs, one sequence, or torch's `dims=` keyword."""
    if set(kwargs) - {"dims"}:
        raise TypeError(f"{what}: unexpected arguments {sorted(set(kwargs) - {'dims'})}")
    if "dims" in kwargs:
        if dims:
            raise TypeError(f"{what}: got dims both positionally and as dims=")
        return (kwargs["dims"],)
    if not dims:
        raise TypeError(f"{what}: missing the dims")
    return dims


def _counts(repeats: Tensor | Sequence[int], n: int | None) -> np.ndarray:
    """The per-element repeat counts as host ints, checked: non-negative, one per element (or one for all)."""
    counts = repeats.numpy() if isinstance(repeats, limn.Tensor) else np.asarray(repeats)
    if counts.dtype.kind not in "iu" or counts.ndim > 1:
        raise TypeError(f"repeat_interleave: repeats must be ints, 0-d or 1-d, got {counts.dtype} of {counts.shape}")
    counts = counts.reshape(-1).astype(np.int64)
    if n is not None and len(counts) == 1:
        counts = np.repeat(counts, n)
    if n is not None and len(counts) != n:
        raise ArgumentError(f"repeat_interleave: {len(counts)} repeats for a dim of {n} elements; give one per element")
    if (counts < 0).any():
        raise ArgumentError(f"repeat_interleave: repeats must be non-negative, got {counts.tolist()}")
    return counts


class RearrangeMixin:
    """Tensor's rearrangements: flip, roll, repeat, tile, repeat_interleave, unfold, rot90."""

    __slots__ = ()

    def flip(self, *dims: int | Sequence[int], **kwargs: Sequence[int]) -> Tensor:
        """x with the order of the elements along each of `dims` reversed, as torch.flip (a GATHER per dim).

        >>> Tensor([[1, 2], [3, 4]]).flip(1).tolist()
        [[2, 1], [4, 3]]
        """
        x = self
        dims = sizes_of(_dims_argument(dims, kwargs, "flip"), "flip")
        normalized = [normalize_axis(d, x.ndim, "flip") for d in dims]
        if len(set(normalized)) != len(normalized):
            raise ArgumentError(f"flip: dim listed twice in {dims}")
        if x.ndim == 0:
            return x
        for d in normalized:
            n = x.shape[d]
            if n > 1:
                x = take_at(x, d, np.arange(n - 1, -1, -1))
        return x

    def roll(self, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
        """x with its elements shifted by `shifts` along `dims`, wrapping around, as torch.roll: the last
        `shift` elements come first. With dims None, the flattened tensor is rolled and reshaped back. Two
        shrinks joined (a cat) per dim: a view, nothing is gathered.

        >>> Tensor([1, 2, 3, 4]).roll(1).tolist()
        [4, 1, 2, 3]
        """
        x = self
        shifts_t = (shifts,) if isinstance(shifts, int) else tuple(shifts)
        if dims is None:
            if len(shifts_t) != 1:
                raise ArgumentError(f"roll: {len(shifts_t)} shifts need as many dims; got dims=None")
            return x.reshape(-1).roll(shifts_t, 0).reshape(x.shape)
        dims_t = (dims,) if isinstance(dims, int) else tuple(dims)
        if len(dims_t) != len(shifts_t):
            raise ArgumentError(f"roll: shifts {shifts_t} and dims {dims_t} must have the same length")
        for shift, d in zip(shifts_t, dims_t):
            d = normalize_axis(d, x.ndim, "roll")
            if x.ndim == 0:
                continue
            n = x.shape[d]
            s = shift % n if n else 0
            if s:
                tail, head = x.split([n - s, s], d)
                x = limn.Tensor.cat([head, tail], d)  # roll by s: the last s elements first
        return x

    def repeat(self, *sizes: int | Sequence[int]) -> Tensor:
        """x repeated sizes[d] times along each dim, as torch.repeat (numpy's tile): sizes may be longer than
        x's dims, which adds leading dims. An expand and a reshape (a copy where the view cannot say it).

        >>> Tensor([1, 2]).repeat(2, 2).tolist()
        [[1, 2, 1, 2], [1, 2, 1, 2]]
        """
        reps = sizes_of(sizes, "repeat")
        if len(reps) < self.ndim:
            raise ArgumentError(
                f"repeat: {len(reps)} sizes {reps} for a tensor of {self.ndim} dims; give one per dim (or more)"
            )
        if any(r < 0 for r in reps):
            raise ArgumentError(f"repeat: sizes must be non-negative, got {reps}")
        shape = (1,) * (len(reps) - self.ndim) + self.shape
        interleaved = tuple(v for s in shape for v in (1, s))  # (1, s0, 1, s1, ...)
        grown = tuple(v for r, s in zip(reps, shape) for v in (r, s))  # (r0, s0, r1, s1, ...)
        out = self.reshape(interleaved).expand(grown)
        return out.reshape(tuple(r * s for r, s in zip(reps, shape)))  # (r0 s0, r1 s1, ...)

    def tile(self, *dims: int | Sequence[int], **kwargs: Sequence[int]) -> Tensor:
        """x repeated along each dim as torch.tile: like repeat, but fewer sizes than dims count from the
        last dim (the missing leading ones are 1)."""
        reps = sizes_of(_dims_argument(dims, kwargs, "tile"), "tile")
        return self.repeat((1,) * (self.ndim - len(reps)) + reps)

    def repeat_interleave(
        self,
        repeats: int | Tensor | Sequence[int] | None = None,
        dim: int | None = None,
        *,
        output_size: int | None = None,
    ) -> Tensor:
        """Each element of x repeated `repeats` times along dim (over the flattened x when dim is None), as
        torch.repeat_interleave. repeats is an int (an expand and a reshape), or one count per element (a
        tensor or a list): then the counts are computed now (the output's size depends on them) and x is read
        through a GATHER. With no repeats, x itself holds the counts and the result is the repeated indices.

        >>> Tensor([1, 2]).repeat_interleave(2).tolist()
        [1, 1, 2, 2]
        """
        x = self
        if repeats is None:
            counts = _counts(x, None)
            return limn.Tensor(np.repeat(np.arange(len(counts)), counts).astype(np.int32), device=x.device)
        if dim is None:
            x, dim = x.reshape(-1), 0
        dim = normalize_axis(dim, x.ndim, "repeat_interleave")
        if x.ndim == 0:
            x = x.reshape(1)
        n = x.shape[dim]
        if isinstance(repeats, int) or (isinstance(repeats, limn.Tensor) and repeats.ndim == 0):
            r = int(repeats.item()) if isinstance(repeats, limn.Tensor) else repeats
            if r < 0:
                raise ArgumentError(f"repeat_interleave: repeats must be non-negative, got {r}")
            grown = x.unsqueeze(dim + 1).expand(x.shape[: dim + 1] + (r,) + x.shape[dim + 1 :])  # (.., n, r, ..)
            out = grown.reshape(x.shape[:dim] + (n * r,) + x.shape[dim + 1 :])
        else:
            counts = _counts(repeats, n)
            out = take_at(x, dim, np.repeat(np.arange(n), counts))
        if output_size is not None and out.shape[dim] != output_size:
            raise ArgumentError(f"repeat_interleave: output_size={output_size}, but the repeats give {out.shape[dim]}")
        return out

    def unfold(self, dimension: int, size: int, step: int) -> Tensor:
        """Every window of `size` elements along `dimension`, `step` apart, as torch.Tensor.unfold: that dim
        becomes the number of windows, (n - size) // step + 1, and a new last dim of `size` holds each window.
        One GATHER; windows that overlap add their gradients.

        >>> Tensor([1, 2, 3, 4, 5]).unfold(0, 2, 2).tolist()
        [[1, 2], [3, 4]]
        """
        x = self
        if x.ndim == 0:
            x = x.reshape(1)
        dim = normalize_axis(dimension, x.ndim, "unfold")
        n = x.shape[dim]
        if size < 0 or size > n:
            raise ArgumentError(f"unfold: window size {size} does not fit dim {dim} of size {n}")
        if step <= 0:
            raise ArgumentError(f"unfold: step must be positive, got {step}")
        count = (n - size) // step + 1
        starts = np.arange(count) * step
        positions = (starts[:, None] + np.arange(size)[None, :]).reshape(-1)  # window w, element e: w*step + e
        windows = take_at(x, dim, positions)  # (.., count * size, ..)
        windows = windows.reshape(x.shape[:dim] + (count, size) + x.shape[dim + 1 :])
        return windows.movedim(dim + 1, -1)  # (.., count, .., size)

    def rot90(self, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
        """x rotated by k quarter turns in the plane of `dims`, from the first dim towards the second, as
        torch.rot90: a flip and a transpose (k = 1: flip dims[1], then swap; 2: flip both; 3: flip dims[0], swap)."""
        dims = tuple(dims)
        if len(dims) != 2:
            raise ArgumentError(f"rot90: dims must name two dims, got {dims}")
        d0, d1 = (normalize_axis(d, self.ndim, "rot90") for d in dims)
        if d0 == d1 or self.ndim < 2:
            raise ArgumentError(
                f"rot90: dims {dims} must be two different dims of a tensor of 2 dims or more ({self.shape})"
            )
        k %= 4
        if k == 1:
            return self.flip(d1).transpose(d0, d1)
        if k == 2:
            return self.flip(d0, d1)
        if k == 3:
            return self.flip(d0).transpose(d0, d1)
        return self
