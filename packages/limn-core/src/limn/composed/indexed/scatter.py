"""Reads and writes at int indices, torch's family: gather, scatter (with reduce), scatter_add, scatter_reduce,
index_select, index_add, index_fill, index_copy, take_along_dim, masked_fill/select/scatter, nonzero.

Each takes a tensor, a dim and int indices (a tensor, or host data that becomes one) and gives a tensor.
Sums are the SCATTER primitive; overwrites, products, maxima and means compare every index with every
position of the dim (a bool (..., positions, indices) grid) and reduce over the indices, so ties share
the gradient as torch's do. nonzero and the masked ops whose size depends on the data compute the mask now.
Pipeline: **tensor (composed ops)** -> graph (GATHER, SCATTER, WHERE, SUM, MAX) -> schedule -> IR -> device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.movement.rearrange import take_at
from limn.errors import ArgumentError
from limn.frontend.arguments import Scalar, broadcast_shape, normalize_axis
from limn.frontend.primitives import index_tensor

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _every_writer_gets_the_gradient(
    x: Tensor, idx: Tensor, src: Tensor, dim: int, grid: _Grid, taken: Tensor
) -> Tensor:
    """taken's value, with torch's gradient for scatter: every src element gets the gradient of the cell it
    wrote, overwritten or not (grad.gather(index)). taken - (S - S) is taken exactly (x - +0 is x, -0.0
    included) while its gradient flows through S, the sum of the writes; where S is not finite (S - S is
    NaN), taken keeps its own gradient, the last write's."""
    if not x.dtype.is_float:
        return taken
    total = limn.Tensor.zeros(x.shape, dtype=x.dtype, device=x.device).scatter_add(dim, idx, src)
    total = total.shrink(grid.box).movedim(dim, -1)  # (..., T), as taken
    zero = total.detach() - total  # +0 where finite; its gradient is -1 to every write
    return zero.isfinite().where(taken.detach() - zero, taken)


class _Grid:
    """The comparison of every index j with every position t of the dim, in a layout with the dim last:
    `mask` (..., T, J) is index[..., j] == t, over the region of x the index covers (x_moved (..., T))."""

    def __init__(self, x: Tensor, idx: Tensor, dim: int) -> None:
        self.x, self.dim, self.idx_shape = x, dim, idx.shape
        self.box = tuple((0, x.shape[d] if d == dim else i) for d, i in enumerate(idx.shape))
        self.x_moved = x.shrink(self.box).movedim(dim, -1)  # (..., T)
        rows = idx.movedim(dim, -1).unsqueeze(-2)  # (..., 1, J)
        ones = limn.Tensor.ones(rows.shape, dtype=dtypes.int32, device=x.device)
        zeros = limn.Tensor.zeros(rows.shape[:-2] + (x.shape[dim], rows.shape[-1]), dtype=dtypes.int32, device=x.device)
        # one-hot along T by a SCATTER (no compare): exact, and an index out of range raises when computed
        self.mask = zeros.scatter_add(-2, rows, ones).cast(dtypes.bool_)  # (..., T, J)

    def moved(self, src: Tensor) -> Tensor:
        return src.movedim(self.dim, -1)  # (..., J)

    def spread(self, src: Tensor) -> Tensor:
        return self.moved(src).unsqueeze(-2).expand(self.mask.shape)  # (..., T, J)

    def last_index(self) -> Tensor:
        """(..., T): 1 + the largest j whose index points at t, or 0 where none does."""
        j = self.mask.shape[-1]
        order = limn.Tensor.arange(1, j + 1, device=self.x.device)  # (J,)
        return self.mask.where(order, 0).amax(-1)

    def put(self, hit: Tensor, combined: Tensor) -> Tensor:
        """x with `combined` (..., T) where an index points (hit, of x's shape), x elsewhere."""
        region = combined.movedim(-1, self.dim)  # the index's shape, with T on dim
        widths = [(0, n - e) for (_, e), n in zip(self.box, self.x.shape)]
        if any(w != (0, 0) for w in widths):
            region = region.pad_constant(widths)
        return hit.where(region, self.x)


def _product(values: Tensor, also: Tensor | None) -> Tensor:
    """The product over the last dim, as a tree of multiplies (halves times halves), times `also`."""
    while values.shape[-1] > 1:
        n = values.shape[-1]
        if n % 2:
            values = values.pad_constant([(0, 0)] * (values.ndim - 1) + [(0, 1)], value=1)  # a factor 1 evens it
            n += 1
        low, high = values.split(n // 2, -1)
        values = low * high
    out = values.squeeze(-1) if values.shape[-1] == 1 else limn.Tensor.ones(values.shape[:-1], dtype=values.dtype)
    return out if also is None else out * also


def _hits(x: Tensor, idx: Tensor, dim: int) -> Tensor:
    """How many indices point at each position of x (int32, x's shape): a SCATTER, which also reports an
    index out of range as an IndexError when computed."""
    ones = limn.Tensor.ones(idx.shape, dtype=dtypes.int32, device=x.device)
    zeros = limn.Tensor.zeros(x.shape, dtype=dtypes.int32, device=x.device)
    return zeros.scatter_add(dim, idx, ones)


def _check_index(x: Tensor, idx: Tensor, dim: int, what: str) -> None:
    if idx.ndim != x.ndim or any(i > s for d, (i, s) in enumerate(zip(idx.shape, x.shape)) if d != dim):
        raise ArgumentError(
            f"{what}: index of shape {idx.shape} does not fit x of shape {x.shape} along dim {dim} "
            "(same rank, and no larger than x off that dim)"
        )


def _zero(x: Tensor) -> Scalar:
    return False if x.dtype == dtypes.bool_ else 0


def _lowest(dtype: dtypes.DType) -> Scalar:
    if dtype.is_float:
        return -math.inf
    return False if dtype == dtypes.bool_ else int(np.iinfo(dtype.np).min)


def _highest(dtype: dtypes.DType) -> Scalar:
    if dtype.is_float:
        return math.inf
    return True if dtype == dtypes.bool_ else int(np.iinfo(dtype.np).max)


def _floor_divide(a: Tensor, b: Tensor) -> Tensor:
    """a // b for ints, rounding toward -inf: the truncated quotient, less 1 where it was rounded up."""
    q = (a.cast(dtypes.float64) / b.cast(dtypes.float64)).cast(a.dtype)  # truncates toward zero
    return (q * b).gt(a).where(q - 1, q)


# ---- index_* : a 1-D index along one dim ----


def _line(index: Any, x: Tensor, dim: int, what: str) -> Tensor:
    idx = index_tensor(index, what)
    if idx.ndim > 1:
        raise ArgumentError(f"{what}: index must be 0-d or 1-d, got shape {idx.shape}")
    return idx.reshape(-1)


def _along(idx: Tensor, shape: tuple[int, ...], dim: int) -> Tensor:
    """A 1-D index stretched to `shape` along dim (the GATHER and SCATTER primitives take a full index)."""
    line = [1] * len(shape)
    line[dim] = idx.shape[0]
    return idx.reshape(line).expand(shape)


def _fill_value(x: Tensor, value: Scalar | Tensor) -> Tensor:
    if isinstance(value, limn.Tensor):
        if value.ndim:
            raise ArgumentError(f"fill value must be a number or a 0-d tensor, got shape {value.shape}")
        return value.cast(x.dtype)
    return limn.Tensor.full((), value, dtype=x.dtype, device=x.device)


def _bool_mask(mask: Any, what: str) -> Tensor:
    mask = mask if isinstance(mask, limn.Tensor) else limn.Tensor(mask)
    if mask.dtype != dtypes.bool_:
        raise TypeError(f"{what}: the mask must be a bool tensor, got {mask.dtype.name} (compare first: x > 0)")
    return mask


class ScatterMixin:
    """Tensor's indexed reads and writes with torch's names: scatter, index_select, index_add, masked_fill, nonzero,
    take."""

    __slots__ = ()

    def scatter(
        self,
        dim: int,
        index: Any,
        src: Tensor | Scalar | None = None,
        *,
        value: Scalar | None = None,
        reduce: str | None = None,
    ) -> Tensor:
        """A copy of x with src (a tensor or a number, torch's `value`) written at index along dim, as torch's
        x.scatter(dim, index, src, reduce=None): where an index repeats, the last write wins (torch's CPU order;
        its docs call it undefined). reduce="add" or "multiply" combines with x instead (scatter_reduce).

        >>> Tensor.zeros(3).scatter(0, Tensor([2, 0, 2]), Tensor([1.0, 2.0, 3.0])).tolist()
        [2.0, 0.0, 3.0]
        """
        if (src is None) == (value is None):
            raise TypeError("scatter(dim, index, src) or scatter(dim, index, value=v): give the values once")
        src = value if src is None else src
        dim = normalize_axis(dim, self.ndim, "scatter")
        idx = index_tensor(index, "scatter")
        _check_index(self, idx, dim, "scatter")
        if reduce is not None:
            named = {"add": "sum", "multiply": "prod"}
            if reduce not in named:
                raise ArgumentError(f"scatter: reduce must be 'add' or 'multiply', not {reduce!r}")
            if not isinstance(src, limn.Tensor):
                src = limn.Tensor.full(idx.shape, src, dtype=self.dtype, device=self.device)
            return self.scatter_reduce(dim, idx, src, named[reduce], include_self=True)
        hit = _hits(self, idx, dim) > 0
        if not isinstance(src, limn.Tensor):  # a number: written wherever an index points
            return hit.where(limn.Tensor.full((), src, dtype=self.dtype, device=self.device), self)
        src = self._source(src, idx.shape, "scatter")
        grid = _Grid(self, idx, dim)
        last = grid.last_index()  # (..., T): which j wrote each position last, plus 1
        taken = grid.moved(src).gather(-1, last.gt(0).where(last - 1, 0))  # (..., T): that j's value
        return grid.put(hit, _every_writer_gets_the_gradient(self, idx, src, dim, grid, taken))

    def scatter_reduce(self, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True) -> Tensor:
        """x with src combined in at index along dim by `reduce` ("sum", "prod", "mean", "amax", "amin"), as
        torch.scatter_reduce. include_self=False leaves x's own value out where an index points (positions no
        index points at keep x). mean divides by the count (plus one with x itself); for ints it floors, as
        torch. amax and amin share the gradient evenly among ties, x included, as torch's.

        >>> Tensor([0.0, 5.0]).scatter_reduce(0, Tensor([1, 1, 0]), Tensor([7.0, 1.0, 2.0]), "amax").tolist()
        [2.0, 7.0]
        """
        if reduce not in REDUCES:
            raise ArgumentError(
                f"scatter_reduce: reduce must be one of {', '.join(map(repr, REDUCES))}, not {reduce!r}"
            )
        dim = normalize_axis(dim, self.ndim, "scatter_reduce")
        idx = index_tensor(index, "scatter_reduce")
        _check_index(self, idx, dim, "scatter_reduce")
        src = self._source(src, idx.shape, "scatter_reduce")
        count = _hits(self, idx, dim)  # (x.shape) int32: how many indices point at each position
        hit = count > 0
        if reduce in ("sum", "mean"):
            base = self if include_self else hit.where(_zero(self), self)
            total = base.scatter_add(dim, idx, src)
            if reduce == "sum":
                return total
            # the count (plus x itself), 1 where nothing points; hit.where, not count.maximum(1), whose two int
            # compares of one pair the c device miscompiles in this graph (see tests/core/test_indexing.py)
            n = count + 1 if include_self else hit.where(count, 1)
            if self.dtype.is_float:
                return hit.where(total / n.cast(self.dtype), self)
            return hit.where(_floor_divide(total, n.cast(self.dtype)), self)
        grid = _Grid(self, idx, dim)
        values = grid.spread(src)  # (..., T, J): src where index j points at position t
        if reduce == "prod":
            combined = _product(grid.mask.where(values, 1), grid.x_moved if include_self else None)
        else:
            fill = _lowest(self.dtype) if reduce == "amax" else _highest(self.dtype)
            candidates = grid.mask.where(values, fill)
            if include_self:
                candidates = limn.Tensor.cat([candidates, grid.x_moved.unsqueeze(-1)], -1)  # x as one more candidate
            combined = candidates.amax(-1) if reduce == "amax" else candidates.amin(-1)
        return grid.put(hit, combined)

    def index_select(self, dim: int, index: Any) -> Tensor:
        """x's slices along dim at the positions in a 1-D index, as torch.index_select (a GATHER).

        >>> Tensor([[1, 2], [3, 4]]).index_select(1, Tensor([1, 1])).tolist()
        [[2, 2], [4, 4]]
        """
        x = self
        dim = normalize_axis(dim, x.ndim, "index_select")
        idx = _line(index, x, dim, "index_select")
        if x.ndim == 0:
            x = x.reshape(1)  # a 0-d tensor reads as one element, as torch gives it a dim of size 1
        shape = x.shape[:dim] + (idx.shape[0],) + x.shape[dim + 1 :]
        if 0 in shape:
            return take_at(x, dim, np.zeros(idx.shape[0], np.int64))  # an empty result of the shape
        return x.gather(dim, _along(idx, shape, dim))

    def index_add(self, dim: int, index: Any, source: Tensor, *, alpha: Scalar = 1) -> Tensor:
        """x with alpha * source[..., j, ...] added at x[..., index[j], ...], as torch.index_add (a SCATTER)."""
        dim = normalize_axis(dim, self.ndim, "index_add")
        idx = _line(index, self, dim, "index_add")
        source = (source if isinstance(source, limn.Tensor) else limn.Tensor(source)).cast(self.dtype)
        if alpha != 1:
            source = source * alpha
        return self.scatter_add(dim, _along(idx, source.shape, dim), source)

    def index_copy(self, dim: int, index: Any, source: Tensor) -> Tensor:
        """x with source[..., j, ...] written at x[..., index[j], ...], as torch.index_copy (the last write wins)."""
        dim = normalize_axis(dim, self.ndim, "index_copy")
        idx = _line(index, self, dim, "index_copy")
        source = source if isinstance(source, limn.Tensor) else limn.Tensor(source)
        return self.scatter(dim, _along(idx, source.shape, dim), source)

    def index_fill(self, dim: int, index: Any, value: Scalar | Tensor) -> Tensor:
        """x with `value` at every x[..., index[j], ...], as torch.index_fill."""
        dim = normalize_axis(dim, self.ndim, "index_fill")
        idx = _line(index, self, dim, "index_fill")
        n = self.shape[dim] if self.ndim else 1
        ones = limn.Tensor.ones(idx.shape, dtype=dtypes.int32, device=self.device)
        hit = limn.Tensor.zeros((n,), dtype=dtypes.int32, device=self.device).scatter_add(0, idx, ones) > 0
        line = [1] * self.ndim
        if self.ndim:
            line[dim] = n
        return hit.reshape(line).where(_fill_value(self, value), self)

    def take_along_dim(self, indices: Any, dim: int | None = None) -> Tensor:
        """x read at `indices` along dim, as torch.take_along_dim: x and indices broadcast off dim, then a
        GATHER. With dim None both are flattened."""
        x = self
        idx = index_tensor(indices, "take_along_dim")
        if dim is None:
            return x.reshape(-1).gather(0, idx.reshape(-1))
        dim = normalize_axis(dim, x.ndim, "take_along_dim")
        if idx.ndim != x.ndim:
            raise ArgumentError(f"take_along_dim: indices of shape {idx.shape} need x's {x.ndim} dims (x is {x.shape})")
        off_x = tuple(1 if d == dim else s for d, s in enumerate(x.shape))
        off_i = tuple(1 if d == dim else s for d, s in enumerate(idx.shape))
        common = broadcast_shape(off_x, off_i, "take_along_dim")
        x = x.broadcast_to(tuple(x.shape[d] if d == dim else s for d, s in enumerate(common)))
        idx = idx.broadcast_to(tuple(idx.shape[d] if d == dim else s for d, s in enumerate(common)))
        if idx.size == 0:
            return take_at(x, dim, np.zeros(idx.shape[dim], np.int64)).broadcast_to(idx.shape)
        return x.gather(dim, idx)

    def take(self, index: Any) -> Tensor:
        """x read as a flat tensor at `index` (any shape, negative counting from the end), as torch.take: the
        result has the index's shape. An index out of range raises IndexError when computed."""
        idx = index_tensor(index, "take")
        return self.reshape(-1)[idx]

    # ---- masks ----
    def masked_fill(self, mask: Tensor, value: Scalar | Tensor) -> Tensor:
        """x with `value` (a number or a 0-d tensor, cast to x's dtype) where the bool mask, broadcast to x,
        is True, as torch.masked_fill. The gradient of a tensor value is the sum over the mask.

        >>> Tensor([1.0, -2.0, 3.0]).masked_fill(Tensor([False, True, False]), 0.0).tolist()
        [1.0, 0.0, 3.0]
        """
        mask = _bool_mask(mask, "masked_fill")
        return mask.broadcast_to(self.shape).where(_fill_value(self, value), self)

    def masked_select(self, mask: Any) -> Tensor:
        """The values of x where the mask (broadcast with x) is True, as a 1-D tensor in row-major order, as
        torch.masked_select. Trap: the mask is computed at this call (the result's size is its count).

        >>> x = Tensor([[1, -2], [-3, 4]])
        >>> x.masked_select(x > 0).tolist()
        [1, 4]
        """
        mask = _bool_mask(mask, "masked_select")
        shape = broadcast_shape(self.shape, mask.shape, "masked_select")
        where = np.flatnonzero(mask.broadcast_to(shape).numpy())
        return take_at(self.broadcast_to(shape).reshape(-1), 0, where)

    def masked_scatter(self, mask: Any, source: Tensor) -> Tensor:
        """x with the True positions of the mask (broadcast to x) filled, in row-major order, by source's first
        values, as torch.masked_scatter. Trap: the mask is computed at this call."""
        mask = _bool_mask(mask, "masked_scatter")
        hits = mask.broadcast_to(self.shape).numpy().reshape(-1)
        source = source if isinstance(source, limn.Tensor) else limn.Tensor(source)
        count = int(hits.sum())
        if source.size < count:
            raise ArgumentError(f"masked_scatter: the mask has {count} True values, source only {source.size} elements")
        if count == 0:
            return self
        order = np.maximum(np.cumsum(hits) - 1, 0)  # the k-th True position reads source element k
        values = take_at(source.cast(self.dtype).reshape(-1), 0, order)
        return limn.Tensor(hits, device=self.device).where(values, self.reshape(-1)).reshape(self.shape)

    def nonzero(self, *, as_tuple: bool = False) -> Tensor | tuple[Tensor, ...]:
        """The indices of x's nonzero values, computed now: an int32 (count, ndim) tensor in row-major order,
        or with as_tuple one 1-D tensor per dim, as torch.nonzero (torch's are int64; limn's widest int is int32).

        >>> Tensor([[0, 3], [5, 0]]).nonzero().tolist()
        [[0, 1], [1, 0]]
        """
        values = self.numpy()
        if as_tuple:
            return tuple(limn.Tensor(p.astype(np.int32), device=self.device) for p in np.nonzero(np.atleast_1d(values)))
        return limn.Tensor(np.argwhere(values).astype(np.int32), device=self.device)

    def argwhere(self) -> Tensor:
        """nonzero(x): the (count, ndim) indices of x's nonzero values, computed now."""
        return self.nonzero()
