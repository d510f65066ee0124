"""Sorting and what is built on it: sort, argsort, msort, topk, kthvalue, median, unique, searchsorted, bucketize.

Each takes a tensor and a dim (numpy's axis= names it too) and gives values and int32 indices (torch: int64) in
torch's order: stable, NaN last ascending and first descending. The sort counts, for each cell, the cells that
sort before it (a compare of every pair and a SUM) and SCATTERs each index to that rank, or runs a bitonic
network on long axes; the values are a GATHER at the sorted indices, so gradients flow to the picked cells, as
torch's. unique depends on the data: it computes its input now.
Pipeline: **tensor (composed ops)** -> graph (CMPLT, SUM, SCATTER, GATHER) -> schedule -> IR -> device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.reduce.reductions import ValuesIndices
from limn.errors import ArgumentError
from limn.frontend.arguments import TensorLike, axis_is_dim, normalize_axis

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

# Two compositions, both from one key per cell, (value, tiebreak): a total order, so the sort is exact and
# stable by construction. Up to RANK_SORT_MAX cells, rank[i] = #{j : cell j sorts before cell i}: n**2 compares
# in one reduce kernel, then perm[rank[i]] = i is one SCATTER. Longer axes (a vocabulary's top-k) take a
# bitonic network: padded to a power of two P, log2(P) (log2(P) + 1) / 2 compare-exchange steps of P cells,
# each a few movements and WHEREs materialized as a kernel of its own, O(P log2(P)**2) work. Measured on 16
# rows of 2048: on c the rank form runs in one fused kernel while the network's 66 steps cost 0.27 s warm (and
# seconds to compile once); on the numpy device the rank form builds (16, n, n) arrays and takes 0.9 s,
# the network 0.25 s. Past 2048 cells those arrays (and the n**2 work) grow too large.
RANK_SORT_MAX = 2048


def _sort_keys(x: Tensor, descending: bool, size: int) -> tuple[Tensor, Tensor]:
    """(value, tiebreak) keys whose ascending order is the sort's: descending sorts -x (~x for ints, which
    never wraps) and equal values keep their order (the tiebreak is the position). NaN sorts last ascending
    (the value inf, after a real inf: its tiebreak is size + position) and first descending (-inf, before a
    real inf: position - size), as torch. size is what the tiebreaks must stay apart by (the padded length
    for the network)."""
    if x.dtype == dtypes.bool_:
        x = x.cast(dtypes.int32)
    position = limn.Tensor.arange(x.shape[-1], device=x.device).broadcast_to(x.shape)
    if not x.dtype.is_float:
        return (-x - 1 if descending else x), position  # ~x = -x - 1 reverses the order of every int
    isnan = x.isnan()
    if descending:
        return isnan.where(-math.inf, -x), isnan.where(position - size, position)
    return isnan.where(math.inf, x), isnan.where(position + size, position)


def _position(tie: Tensor, size: int) -> Tensor:
    """The cell a real cell's tiebreak names: _sort_keys' NaN offsets of +-size undone."""
    return tie.lt(0).where(tie + size, tie.lt(size).where(tie, tie - size))


def _first(value_a: Tensor, tie_a: Tensor, value_b: Tensor, tie_b: Tensor) -> Tensor:
    """Whether cell a sorts before cell b: a smaller value, or an equal one and a smaller tiebreak."""
    return value_a.lt(value_b).logical_or(value_b.lt(value_a).logical_not().logical_and(tie_a.lt(tie_b)))


def _permutation(x: Tensor, descending: bool) -> Tensor:
    """The stable sort's indices along the last dim: (..., n) int32, perm[..., r] = the cell of rank r."""
    n = x.shape[-1]
    if n > RANK_SORT_MAX:
        return _bitonic_permutation(x, descending)
    value, tie = _sort_keys(x.detach(), descending, n)
    # before[..., i, j]: cell j sorts before cell i (j along the last dim)
    before = _first(value.unsqueeze(-2), tie.unsqueeze(-2), value.unsqueeze(-1), tie.unsqueeze(-1))  # (..., n, n)
    rank = before.cast(dtypes.int32).sum(-1)  # (..., n): how many cells come first
    zeros = limn.Tensor.zeros(x.shape, dtype=dtypes.int32, device=x.device)
    position = limn.Tensor.arange(n, device=x.device).broadcast_to(x.shape)
    return zeros.scatter_add(-1, rank, position)  # perm[rank[i]] = i


def _bitonic_permutation(x: Tensor, descending: bool) -> Tensor:
    """_permutation by a bitonic network over the last dim padded to a power of two P. Pad cells take the
    largest value and tiebreaks past every real cell's (3P + position), so they sort last and are cut off."""
    n = x.shape[-1]
    size = 1 << (n - 1).bit_length()  # P
    value, tie = _sort_keys(x.detach(), descending, size)
    widths = ((0, 0),) * (x.ndim - 1) + ((0, size - n),)
    top = math.inf if value.dtype.is_float else int(np.iinfo(value.dtype.np).max)
    value = value.pad_constant(widths, value=top)  # (..., n) -> (..., P)
    real = limn.Tensor.full(x.shape, True, device=x.device).pad_constant(widths)
    tie = real.where(tie.pad_constant(widths), limn.Tensor.arange(size, device=x.device) + 3 * size)
    block = 2
    while block <= size:
        span = block // 2
        while span >= 1:
            value, tie = _compare_exchange(value, tie, block, span)
            span //= 2
        block *= 2
    tie = tie.shrink(tuple((0, s) for s in x.shape))  # the first n cells: every real cell, in order
    return _position(tie, size)


def _compare_exchange(value: Tensor, tie: Tensor, block: int, span: int) -> tuple[Tensor, Tensor]:
    """One step of the network: cell i and cell i + span (i with bit `span` clear) trade places unless they
    are in order, ascending where bit `block` of i is clear and descending where it is set."""
    lead = value.shape[:-1]
    size = value.shape[-1]
    pairs = lead + (size // (2 * span), 2, span)  # (..., P) -> (..., P / 2span, 2, span): the two ends of a pair
    v, t = value.reshape(pairs), tie.reshape(pairs)
    va, vb, ta, tb = v[..., 0, :], v[..., 1, :], t[..., 0, :], t[..., 1, :]  # (..., P / 2span, span)
    starts = np.arange(size // (2 * span)) * 2 * span  # the first cell of each group
    ascending = limn.Tensor((starts & block) == 0, device=value.device).reshape(size // (2 * span), 1)
    b_first = _first(vb, tb, va, ta)
    swap = ascending.where(b_first, b_first.logical_not())
    value = limn.Tensor.stack([swap.where(vb, va), swap.where(va, vb)], dim=-2).reshape(lead + (size,))
    tie = limn.Tensor.stack([swap.where(tb, ta), swap.where(ta, tb)], dim=-2).reshape(lead + (size,))
    return value.contiguous(), tie.contiguous()


def _pick(pair: ValuesIndices, dim: int, start: int, stop: int) -> ValuesIndices:
    """Cells [start, stop) along dim of both tensors of the pair."""
    box = tuple((start, stop) if d == dim else (0, s) for d, s in enumerate(pair.values.shape))
    return ValuesIndices(pair.values.shrink(box), pair.indices.shrink(box))


class SortingMixin:
    """Tensor's sorts and order statistics: sort, argsort, topk, kthvalue, median, unique, searchsorted."""

    __slots__ = ()

    @axis_is_dim
    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices:
        """torch.sort: (values, indices) along dim, ascending unless descending. The order is always stable (equal
        values keep their order, -0.0 and 0.0 are equal), which torch's CPU sort gives too, so stable= changes
        nothing. NaN sorts last ascending and first descending, as torch. Gradients flow to the picked values.

        >>> Tensor([3.0, 1.0, 2.0]).sort().indices.tolist()
        [1, 2, 0]
        """
        at = normalize_axis(dim, self.ndim, "sort")
        if self.ndim == 0:
            return ValuesIndices(self, limn.Tensor.full((), 0, dtype=dtypes.int32, device=self.device))
        last = self.transpose(at, -1)  # the sorted dim last
        perm = _permutation(last, descending)
        values = last.gather(-1, perm)
        return ValuesIndices(values.transpose(at, -1), perm.transpose(at, -1))

    @axis_is_dim
    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
        """torch.argsort: the indices of sort (stable, as sort's).

        >>> Tensor([2, 1, 2, 0]).argsort(descending=True).tolist()
        [0, 2, 1, 3]
        """
        return self.sort(dim, descending, stable).indices

    def msort(self) -> Tensor:
        """torch.msort: the values of x sorted along dim 0.

        >>> Tensor([[2, 1], [0, 3]]).msort().tolist()
        [[0, 1], [2, 3]]
        """
        return self.sort(0).values

    @axis_is_dim
    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices:
        """torch.topk: the k largest (smallest, largest=False) values along dim and their indices, in sorted order
        (sorted=False gives the same order; torch leaves it unspecified). NaN counts as the largest.

        Trap: among equal values limn picks the lowest indices first (the stable order); torch's CPU topk picks
        ties in an order of its own, so with ties the indices (and which tie gets the gradient) can differ from
        torch's, while the values agree (tests/core/test_sorting.py names it).

        >>> Tensor([1.0, 5.0, 3.0]).topk(2).values.tolist()
        [5.0, 3.0]
        """
        at = normalize_axis(dim, self.ndim, "topk")
        n = self.shape[at] if self.ndim else 1
        if not 0 <= k <= n:
            raise ArgumentError(  # torch's RuntimeError "selected index k out of range"
                f"topk: k={k} is out of range for dim {dim} of size {n} in shape {self.shape}; use 0 <= k <= {n}"
            )
        if self.ndim == 0:
            return self.sort()
        return _pick(self.sort(at, descending=largest), at, 0, k)

    @axis_is_dim
    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> ValuesIndices:
        """torch.kthvalue: the k-th smallest value along dim (k from 1) and its index, NaN counting as the largest.

        Trap: among equal values the index is the stable order's (the k-th cell in position order); torch's
        quickselect picks a tied index of its own, so with ties the index can differ from torch's, the value not.

        >>> Tensor([3.0, 1.0, 2.0]).kthvalue(2).values.item()
        2.0
        """
        at = normalize_axis(dim, self.ndim, "kthvalue")
        n = self.shape[at] if self.ndim else 1
        if n == 0:  # torch: IndexError, a reduction over an empty dim
            raise IndexError(f"kthvalue: dim {dim} of shape {self.shape} is empty, and it has no k-th value")
        if not 1 <= k <= n:
            raise ArgumentError(  # torch's RuntimeError "selected number k out of range"
                f"kthvalue: k={k} is out of range for dim {dim} of size {n} in shape {self.shape}; use 1..{n}"
            )
        if self.ndim == 0:
            return self.sort()
        picked = _pick(self.sort(at), at, k - 1, k)
        if keepdim:
            return picked
        return ValuesIndices(picked.values.squeeze(at), picked.indices.squeeze(at))

    @axis_is_dim
    def median(self, dim: int | None = None, keepdim: bool = False) -> Tensor | ValuesIndices:
        """torch.median: the lower median (the ((n - 1) // 2)-th smallest, from 0). Without dim, the value over every
        element (NaN for an empty tensor), its gradient shared among the cells equal to it, as torch's; with dim,
        (values, indices) along it, the gradient to the index. A slice holding NaN has median NaN
        at the index of its first NaN, as torch (nanmedian is not here).

        >>> Tensor([4.0, 1.0, 3.0, 2.0]).median().item()
        2.0
        """
        if dim is None:
            if self.size == 0:
                return self._float().sum() * float("nan")  # NaN, still linked to x for its (empty) gradient, as torch's
            value = self.reshape(-1).median(0).values.detach()
            if not self.dtype.is_float:
                return value
            # torch shares the gradient of the all-elements median evenly among the cells equal to it (or among the
            # NaNs): value - sum(where(hit, value - x, 0)) / count is the value itself (minus a -0.0, which keeps
            # every sign) with gradient hit / count
            hit = self.eq(value).logical_or(self.isnan().logical_and(value.isnan()))
            count = hit.cast(self.dtype).sum()
            return value + -(hit.where(value - self, 0.0).sum() / count)
        d = normalize_axis(dim, self.ndim, "median")
        if self.ndim == 0:
            return self.sort()
        n = self.shape[d]
        if n == 0:
            raise IndexError(
                f"median: dim {dim} of shape {self.shape} is empty, and the median of no values is undefined"
            )
        ordered = self.sort(d)
        at = limn.Tensor.full(
            tuple(1 if i == d else s for i, s in enumerate(self.shape)), (n - 1) // 2, device=self.device
        )
        if self.dtype.is_float:
            nans = self.isnan().cast(dtypes.int32).sum(d, keepdim=True)
            at = nans.gt(0).where(n - nans, at)  # NaNs sort last in position order: the first sits at n - count
        at = at.cast(dtypes.int32)
        picked = ValuesIndices(ordered.values.gather(d, at), ordered.indices.gather(d, at))
        if keepdim:
            return picked
        return ValuesIndices(picked.values.squeeze(d), picked.indices.squeeze(d))

    def unique(
        self, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
    ) -> Tensor | tuple[Tensor, ...]:
        """torch.unique over the flattened tensor: the distinct values in ascending order (NaNs each their own, last),
        with the index of each input cell's value (return_inverse, x's shape) and each value's count (return_counts).

        Trap: how many values come out depends on the data, so x is computed now (unlike every other op here) and
        the results are new tensors with no gradient history. dim= is not supported (NotImplementedError).

        >>> Tensor([2, 1, 2]).unique().tolist()
        [1, 2]
        """
        if dim is not None:
            raise NotImplementedError("unique(dim=...): limn has unique over the flattened tensor only; omit dim")
        values, inverse, counts = np.unique(self.numpy(), return_inverse=True, return_counts=True, equal_nan=False)
        out = [limn.Tensor(values, dtype=self.dtype, device=self.device)]
        if return_inverse:
            out.append(limn.Tensor(inverse.reshape(self.shape), dtype=dtypes.int32, device=self.device))
        if return_counts:
            out.append(limn.Tensor(counts, dtype=dtypes.int32, device=self.device))
        return out[0] if len(out) == 1 else tuple(out)

    def searchsorted(
        self,
        values: TensorLike,
        *,
        out_int32: bool = False,
        right: bool = False,
        side: str | None = None,
    ) -> Tensor:
        """torch.searchsorted(sorted_sequence, values) as a method of the sequence: for each value, the index where it
        would be inserted to keep the innermost dim sorted, before equal values (after them with right=True or
        side="right"), int32 always (torch: int64 unless out_int32). A 1-D sequence serves values of any shape;
        otherwise the leading dims match.

        Trap: the sequence must be sorted and free of NaN (a NaN value goes last, as torch); each index counts the
        cells below the value, one compare per pair, rather than torch's binary search.

        >>> Tensor([1.0, 2.0, 3.0]).searchsorted(Tensor([2.0, 0.0])).tolist()
        [1, 0]
        """
        if side is not None:
            if side not in ("left", "right"):
                raise ArgumentError(f"searchsorted: side must be 'left' or 'right', not {side!r}")
            right = side == "right"
        scalar = not isinstance(values, limn.Tensor)
        values = values if isinstance(values, limn.Tensor) else limn.Tensor(values, device=self.device)
        seq = self
        if seq.ndim > 1 and (values.ndim != seq.ndim or values.shape[:-1] != seq.shape[:-1]):
            raise ArgumentError(
                f"searchsorted: a sequence of shape {seq.shape} needs values with its leading dims {seq.shape[:-1]}, "
                f"got {values.shape}; or pass a 1-D sequence"
            )
        v = values.reshape(-1) if seq.ndim == 1 else values
        v, s = v.unsqueeze(-1), seq.unsqueeze(-2)  # (..., m, 1) against (..., 1, n)
        # left: the cells with not (v <= s); right: those with not (v < s), so a NaN value counts every cell
        passed = v.lt(s).logical_not() if right else v.le(s).logical_not()
        out = passed.cast(dtypes.int32).sum(-1)  # (..., m)
        out = out.reshape(values.shape) if seq.ndim == 1 else out
        return out.reshape(()) if scalar and out.size == 1 else out

    def bucketize(self, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
        """torch.bucketize: for each value of x, the index of its bucket among the sorted 1-D boundaries (the
        insertion index of searchsorted, with torch's right= meaning the same).

        >>> Tensor([0.5, 1.0, 2.5]).bucketize(Tensor([1.0, 2.0])).tolist()
        [0, 0, 2]
        """
        if boundaries.ndim != 1:
            raise ArgumentError(f"bucketize: boundaries must be 1-D, got shape {boundaries.shape}")
        return boundaries.searchsorted(self, right=right)
