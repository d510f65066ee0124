"""Shaping and indexing, composed from the five movements: broadcast, transpose, squeeze, cat, split, x[i].

Each function takes a tensor (cat and stack a list of them) and gives a tensor whose View is the old one
moved (a reshape, permute, expand, pad or shrink, or several), so nothing is copied: cat pads each piece
to the full length and adds them, basic indexing is a shrink and a reshape. limn.tensor attaches each as a
Tensor method (cat and stack as static methods, __getitem__ and __iter__ as the operators).
Pipeline: **tensor (movement)** -> graph (VIEW nodes) -> schedule -> IR (index arithmetic) -> device.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from limn.ops import Shape
from limn.primitives import Tensor, normalize_axis
from limn.view import prod


def broadcast_to(x: Tensor, shape: Shape) -> Tensor:
    """x stretched to `shape` by numpy's rule (new dims on the left, size-1 dims grow), without copying."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    if len(shape) < x.ndim:
        raise ValueError(f"broadcast {x.shape} -> {shape}: the target has fewer dims")
    x = x.reshape((1,) * (len(shape) - x.ndim) + x.shape)
    return x.expand(shape)


def transpose(x: Tensor, a: int = -2, b: int = -1) -> Tensor:
    """Dims a and b swapped (the last two by default). A tensor of fewer than 2 dims comes back as it is."""
    if x.ndim < 2:
        return x
    order = list(range(x.ndim))
    a, b = normalize_axis(a, x.ndim, "transpose"), normalize_axis(b, x.ndim, "transpose")
    order[a], order[b] = order[b], order[a]
    return x.permute(tuple(order))


def reverse_dims(x: Tensor) -> Tensor:
    """Every dim in reverse order (the property Tensor.T; for a matrix its transpose)."""
    return x.permute(tuple(reversed(range(x.ndim))))


def flatten(x: Tensor, start: int = 0, end: int = -1) -> Tensor:
    """Dims start..end (inclusive) merged into one. A 0-d tensor becomes shape (1,)."""
    if x.ndim == 0:
        return x.reshape(1)
    start, end = normalize_axis(start, x.ndim, "flatten"), normalize_axis(end, x.ndim, "flatten")
    return x.reshape(x.shape[:start] + (prod(x.shape[start : end + 1]),) + x.shape[end + 1 :])


def squeeze(x: Tensor, axis: int | None = None) -> Tensor:
    """x without its size-1 dims (axis None), or without dim `axis` if that has size 1 (else x as it is)."""
    if axis is None:
        return x.reshape(tuple(s for s in x.shape if s != 1))
    axis = normalize_axis(axis, x.ndim, "squeeze")
    if x.ndim == 0 or x.shape[axis] != 1:  # a 0-d tensor has nothing to squeeze, as in torch
        return x
    return x.reshape(x.shape[:axis] + x.shape[axis + 1 :])


def unsqueeze(x: Tensor, axis: int) -> Tensor:
    """x with a new size-1 dim at `axis` (-1 appends one)."""
    axis = normalize_axis(axis, x.ndim + 1, "unsqueeze")
    return x.reshape(x.shape[:axis] + (1,) + x.shape[axis:])


def cat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Joins tensors along axis: each is padded to the full length there and the pads add up. They must
    match off that axis; their dtypes promote as in +.

    >>> Tensor.cat([Tensor([1, 2]), Tensor([3])]).tolist()
    [1, 2, 3]
    """
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: needs at least one tensor")
    first = tensors[0]
    axis = normalize_axis(axis, first.ndim, "cat")
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis):
            raise ValueError(f"cat along axis {axis}: shapes {first.shape} and {t.shape} differ off that axis")
    total = sum(t.shape[axis] for t in tensors)
    out, start = None, 0
    for t in tensors:
        widths = [(0, 0)] * first.ndim
        widths[axis] = (start, total - start - t.shape[axis])
        piece = t.pad(widths)
        out = piece if out is None else out + piece
        start += t.shape[axis]
    return out


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Tensors of one shape joined along a new dim at `axis`."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: needs at least one tensor")
    axis = normalize_axis(axis, tensors[0].ndim + 1, "stack")
    return cat([t.unsqueeze(axis) for t in tensors], axis)


def split(x: Tensor, sizes: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """Pieces along axis: of `sizes` each (the last may be shorter), or of the listed sizes, which must add
    up to the axis. Each piece is a view (a shrink) of x."""
    axis = normalize_axis(axis, x.ndim, "split")
    n = x.shape[axis]
    if isinstance(sizes, int):
        if sizes <= 0:
            raise ValueError(f"split: piece size must be positive, got {sizes}")
        sizes = [min(sizes, n - s) for s in range(0, n, sizes)]
    if sum(sizes) != n:
        raise ValueError(f"split: sizes {list(sizes)} add to {sum(sizes)}, axis {axis} has {n}")
    out, start = [], 0
    for s in sizes:
        box = [(0, d) for d in x.shape]
        box[axis] = (start, start + s)
        out.append(x.shrink(box))
        start += s
    return out


def chunk(x: Tensor, chunks: int, axis: int = 0) -> list[Tensor]:
    """x split along axis into pieces of ceil(n / chunks). Trap, as in torch: that can be fewer than
    `chunks` pieces (6 in 4 chunks gives 3 pieces of 2)."""
    axis = normalize_axis(axis, x.ndim, "chunk")
    if chunks <= 0:
        raise ValueError(f"chunk: the number of chunks must be positive, got {chunks}")
    return x.split(math.ceil(x.shape[axis] / chunks), axis)


# ---- indexing and iteration ----


def getitem(x: Tensor, index: Any) -> Tensor:
    """x[index], basic indexing: ints (negative count from the end), slices with step 1, `...` and None.
    It is a shrink and a reshape. Tensors and lists as indices raise (use gather or embedding), and so does
    a step other than 1, which no View can say.

    >>> Tensor([[1, 2, 3], [4, 5, 6]])[1, 1:].tolist()
    [5, 6]
    """
    index = index if isinstance(index, tuple) else (index,)
    for i in index:
        if isinstance(i, Tensor) or isinstance(i, (list, np.ndarray)):
            raise TypeError(
                "indexing with a tensor or list: limn has basic indexing only; use "
                ".gather(idx, axis) or .embedding(idx) for lookups"
            )
    box, shape, dim = [], [], 0
    for i in _one_item_per_dim(index, x.ndim):
        if i is None:
            shape.append(1)
            continue
        size = x.shape[dim]
        if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            j = int(i) + size if i < 0 else int(i)
            if not 0 <= j < size:
                raise IndexError(f"index {i} is out of range for dim {dim} of size {size}")
            box.append((j, j + 1))
        elif isinstance(i, slice):
            if i.step not in (None, 1):
                raise ValueError(
                    f"slice step {i.step} on dim {dim}: a View has no stride for a step other than 1; "
                    "reshape and index instead (x.reshape(..., n, k)[..., 0] takes every k-th)"
                )
            start, stop, _ = i.indices(size)
            box.append((start, max(start, stop)))
            shape.append(max(stop - start, 0))
        else:
            raise TypeError(f"index {i!r} of type {type(i).__name__} is not an int, slice, ... or None")
        dim += 1
    return x.shrink(box).reshape(tuple(shape))


def _one_item_per_dim(index: tuple, ndim: int) -> tuple:
    """The index with `...` (or the missing trailing dims) spelled out as `:`, one item per dim plus the Nones."""
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can hold only one `...`")
    if n_real > ndim:
        raise IndexError(f"too many indices ({n_real}) for a tensor with {ndim} dims")
    if Ellipsis in index:
        at = index.index(Ellipsis)
        return index[:at] + (slice(None),) * (ndim - n_real) + index[at + 1 :]
    return index + (slice(None),) * (ndim - n_real)


def iterate(x: Tensor) -> Iterator[Tensor]:
    """x[0], x[1], ...: the slices along dim 0, so `q, k, v = qkv` unpacks. A 0-d tensor raises."""
    if not x.shape:
        raise TypeError("iteration over a 0-d tensor")
    return (x[i] for i in range(x.shape[0]))
