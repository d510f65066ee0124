"""The reductions, composed from SUM and MAX: sum, prod, max, min, mean, norm, argmax, any.

Each takes a tensor and `dim` (an int, a tuple of ints, or None for every dim; numpy's `axis=` names the same
argument, as torch allows) with `keepdim`, and gives a tensor; edge values follow torch (empty dims, NaN, inf,
0-d tensors; tests/core/test_edge_values.py, tests/core/test_reductions_torch.py). max and min are the one
place `axis=` means something else: tinygrad's reduce, the values alone (amax), where one int `dim` gives
torch's (values, indices). Named as Tensor's methods (sum, max, ... as numpy's are), so Python's builtins are
not used here.
var and std are limn.composed.reduce.moments, matmul limn.composed.reduce.matmul.
Pipeline: **tensor (composed ops)** -> graph (SUM, MAX) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.dtypes import DType
from limn.frontend.arguments import axis_is_dim, normalize_axis
from limn.graph.ops import Op
from limn.graph.view import prod as size_of

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

Axis = int | Sequence[int] | None  # a dim, several, or every dim
DTypeLike = DType | str | None  # torch's dtype= argument: cast the input first


def _check_nonempty(x: Tensor, axes: tuple[int, ...], what: str) -> None:
    """max, min, argmax and argmin of no values have no answer: torch and numpy raise, and so does limn."""
    empty = [d for d in axes if x.shape[d] == 0]
    if empty:
        raise IndexError(
            f"{what}: axis {empty[0]} of a tensor of shape {x.shape} is empty, and the {what} of no values "
            "is undefined (torch and numpy raise too); reduce over a non-empty axis, or check the size first"
        )


def _dropped(x: Tensor, out: Tensor, axes: tuple[int, ...], keepdim: bool) -> Tensor:
    """out, reduced over `axes` of x with its reduced dims kept, without them unless keepdim."""
    return out if keepdim else out.reshape(tuple(s for d, s in enumerate(x.shape) if d not in axes))


class ValuesIndices(NamedTuple):
    """What torch's max(dim)-like ops return (sort, topk, kthvalue, median, cummax): a pair that unpacks as
    `values, indices = x.sort()` and reads as `.values` and `.indices`. The indices are int32 (torch: int64)."""

    values: Tensor
    indices: Tensor


class MinMax(NamedTuple):
    """aminmax's pair, as torch's: `lo, hi = x.aminmax()`, or `.min` and `.max`."""

    min: Tensor
    max: Tensor


def _every_if_empty(dim: Axis) -> Axis:
    """torch's dim=() means every dim, as in torch.sum(x, dim=()) and x.amax(()): None, here."""
    return None if isinstance(dim, (tuple, list)) and len(dim) == 0 else dim


def _multiply_down(y: Tensor) -> Tensor:
    """The product along the last dim as a tree of pairwise multiplies (an odd level is padded with a 1):
    (..., n) -> (..., 1). Autograd's rule for MUL makes each value's gradient the product of the others, so
    zeros need no special case. Every 4 levels the partial products are materialized, so a fused kernel reads
    at most 16 values per output, whatever n is."""
    lead = y.shape[:-1]
    n = y.shape[-1]
    if n == 0:
        return y.sum(-1, keepdim=True) + 1  # the empty product is 1, still linked to y for its (empty) gradient
    level = 0
    while n > 1:
        if n % 2:
            y = y.pad_constant(((0, 0),) * len(lead) + ((0, 1),), value=1)
            n += 1
        pairs = y.reshape(lead + (n // 2, 2))  # (..., n) -> (..., n/2, 2)
        y = pairs[..., 0] * pairs[..., 1]  # (..., n/2)
        n //= 2
        level += 1
        if level % 4 == 0 and n > 1:
            y = y.contiguous()
    return y


def _one_dim(dim: Axis, axis: Axis, what: str) -> bool:
    """Whether max/min was asked torch's way, for one dim (so it returns values and indices)."""
    if dim is not None and axis is not None:
        raise TypeError(f"{what}: got dim={dim!r} and axis={axis!r}, which name one argument; pass one of them")
    return isinstance(dim, int) and not isinstance(dim, bool)


def _values_indices(x: Tensor, dim: int, keepdim: bool, what: str) -> ValuesIndices:
    """torch's x.max(dim) / x.min(dim): the values at the first extreme index, read through that index (so
    the gradient goes there alone), and the index, int32."""
    if x.ndim == 0:
        normalize_axis(dim, 1, what)  # a 0-d tensor's dim 0 (or -1), as torch allows
        return ValuesIndices(x, limn.Tensor.full((), 0, dtype=dtypes.int32, device=x.device))
    dim = normalize_axis(dim, x.ndim, what)
    _check_nonempty(x, (dim,), what)
    ranked = x.cast(dtypes.int32) if x.dtype == dtypes.bool_ else x
    index = ranked.argmax(dim, keepdim=True) if what == "max" else ranked.argmin(dim, keepdim=True)
    values = x.gather(dim, index)
    if not keepdim:
        values, index = values.squeeze(dim), index.squeeze(dim)
    return ValuesIndices(values, index)


# ---- norms: torch.norm and torch.linalg.vector_norm ----


def _sqrt_zero_grad(v: Tensor) -> Tensor:
    """sqrt(v), with gradient 0 (not 1/0) where v is 0: torch's rule for std and the 2-norm at 0."""
    positive = v.gt(0)
    return positive.where(positive.where(v, 1.0).sqrt(), v)


class ReductionsMixin:
    """Tensor's reductions over dims: sum, prod, max, min, mean, logsumexp, argmax, any, all, norms."""

    __slots__ = ()

    @axis_is_dim
    def sum(self, dim: Axis = None, keepdim: bool = False, *, dtype: DTypeLike = None) -> Tensor:
        """The sum over axis (or torch's dim=). Bools sum as int32; half widths keep the running total in float32
        and round once; dtype= casts the input first, as torch. The sum of no values is 0.

        Trap: an int8 or int16 tensor sums in its own dtype and wraps there (torch sums every int in int64);
        pass dtype="int32" for a wide total.

        >>> Tensor([[1, 2], [3, 4]]).sum(dim=0).tolist()
        [4, 6]
        """
        x = self
        x = x if dtype is None else x.cast(dtype)
        return x._reduce(Op.SUM, _every_if_empty(dim), keepdim)

    @axis_is_dim
    def nansum(self, dim: Axis = None, keepdim: bool = False, *, dtype: DTypeLike = None) -> Tensor:
        """torch.nansum: the sum over axis (or dim=) with NaNs counted as 0 (their gradient is 0), by sum's rules.

        >>> Tensor([1.0, float("nan"), 2.0]).nansum().item()
        3.0
        """
        x = self
        x = x if dtype is None else x.cast(dtype)
        return x.isnan().where(0, x).sum(_every_if_empty(dim), keepdim)  # nansum = sum(x if x == x else 0)

    @axis_is_dim
    def nanmean(self, dim: Axis = None, keepdim: bool = False, *, dtype: DTypeLike = None) -> Tensor:
        """torch.nanmean: the mean of the values that are not NaN over axis (or dim=); NaN where every one is.
        The gradient of a NaN cell is 0, also in a slice of NaNs alone, where torch's is NaN (its inf * 0).

        >>> Tensor([1.0, float("nan"), 2.0]).nanmean().item()
        1.5
        """
        x = self
        dim = _every_if_empty(dim)
        x = x._float() if dtype is None else x.cast(dtype)
        count = x.isnan().logical_not().cast(x.dtype).sum(dim, keepdim)
        return x.nansum(dim, keepdim) / count  # nanmean = nansum / #(not NaN); 0 / 0 is NaN

    @axis_is_dim
    def prod(self, dim: Axis = None, keepdim: bool = False, *, dtype: DTypeLike = None) -> Tensor:
        """The product over axis (or torch's dim=; every dim when None); 1 over an empty axis. Ints and bools
        multiply in int32 (torch: int64) and wrap exactly, so an int32 product is torch's truncated to 32 bits;
        dtype= casts the input first. The gradient is the product of the other values, exact with zeros in the
        slice (one zero or several), as torch's.

        >>> Tensor([[1.0, 2.0], [3.0, 0.0]]).prod(dim=1).tolist()
        [2.0, 0.0]
        """
        x = self
        axes = x._axes(_every_if_empty(dim), "prod")
        if dtype is not None:
            x = x.cast(dtype)
        elif not x.dtype.is_float:
            x = x.cast(dtypes.int32)
        out_dtype = x.dtype
        wide = x.cast(out_dtype.compute)
        kept = [d for d in range(x.ndim) if d not in axes]
        n = size_of([x.shape[d] for d in axes])
        flat = wide.permute(kept + list(axes)).reshape(tuple(x.shape[d] for d in kept) + (n,))  # (*kept, n)
        out = _multiply_down(flat)  # (*kept, 1)
        out = out.reshape(tuple(1 if d in axes else s for d, s in enumerate(x.shape))).cast(out_dtype)
        return _dropped(x, out, axes, keepdim)

    def max(self, dim: Axis | Tensor = None, keepdim: bool = False, *, axis: Axis = None) -> Tensor | ValuesIndices:
        """The largest value over a dim, as torch's x.max: with one dim (positional or dim=) it returns torch's
        (values, indices) pair, the whole gradient of a tie going to the index returned (the first); with limn's
        axis= (one dim or several) or a tuple of dims it returns the values alone, ties sharing the gradient evenly,
        as torch.amax; with none, the largest of all. NaN propagates and a bool tensor gives bool; an empty dim
        raises IndexError, as in torch. x.max(other_tensor) is the elementwise maximum, as torch.max(a, b).

        >>> t = Tensor([[1.0, 5.0], [3.0, 2.0]])
        >>> values, indices = t.max(1)
        >>> values.tolist(), indices.tolist(), t.max(axis=1).tolist()
        ([5.0, 3.0], [1, 0], [5.0, 3.0])
        """
        if isinstance(dim, limn.Tensor):
            return self.maximum(dim)
        if _one_dim(dim, axis, "max"):
            return _values_indices(self, dim, keepdim, "max")
        return self.amax(dim if axis is None else axis, keepdim)

    def min(self, dim: Axis | Tensor = None, keepdim: bool = False, *, axis: Axis = None) -> Tensor | ValuesIndices:
        """The smallest value over a dim, by the rules of max: one dim gives torch's (values, indices), axis= or
        a tuple the values alone (x.min(other_tensor) is the elementwise minimum)."""
        if isinstance(dim, limn.Tensor):
            return self.minimum(dim)
        if _one_dim(dim, axis, "min"):
            return _values_indices(self, dim, keepdim, "min")
        return self.amin(dim if axis is None else axis, keepdim)

    @axis_is_dim
    def amax(self, dim: Axis = None, keepdim: bool = False) -> Tensor:
        """torch.amax: the largest value over dim (every dim for None or ()); ties share the gradient evenly.
        NaN propagates and a bool tensor gives bool; an empty dim raises IndexError, as in torch.

        >>> Tensor([[1, 5], [3, 2]]).amax(dim=0).tolist()
        [3, 5]
        """
        dim = _every_if_empty(dim)
        _check_nonempty(self, self._axes(dim, "max"), "max")
        out = self._reduce(Op.MAX, dim, keepdim)
        return out.cast(dtypes.bool_) if self.dtype == dtypes.bool_ else out  # bools reduce as int32 0/1

    @axis_is_dim
    def amin(self, dim: Axis = None, keepdim: bool = False) -> Tensor:
        """torch.amin: the smallest value over dim (every dim for None or ()), by amax's rules.

        >>> Tensor([[1, 5], [3, 2]]).amin(dim=1).tolist()
        [1, 2]
        """
        dim = _every_if_empty(dim)
        _check_nonempty(self, self._axes(dim, "min"), "min")
        if self.dtype == dtypes.bool_:
            return self.logical_not().amax(dim, keepdim).logical_not()  # min b = not max(not b)
        if self.dtype.is_int:
            # -x overflows at the most negative int; ~x = -x - 1 never does, and min x = ~max(~x)
            return -((-self - 1).amax(dim, keepdim)) - 1
        return -((-self).amax(dim, keepdim))  # min x = -max(-x)

    def aminmax(self, *, dim: int | None = None, keepdim: bool = False) -> MinMax:
        """torch.aminmax: (amin, amax) over dim (every dim when None).

        >>> Tensor([3, 1, 2]).aminmax().max.item()
        3
        """
        return MinMax(self.amin(dim, keepdim), self.amax(dim, keepdim))

    @axis_is_dim
    def mean(self, dim: Axis = None, keepdim: bool = False, *, dtype: DTypeLike = None) -> Tensor:
        """The mean over axis (or dim=), in float32 for int and bool tensors (torch raises for those); dtype=
        casts the input first, as torch. NaN over an empty axis, as torch."""
        x = self
        dim = _every_if_empty(dim)
        x = x._float() if dtype is None else x.cast(dtype)
        n = size_of([x.shape[d] for d in x._axes(dim, "mean")])
        return x.sum(dim, keepdim) * (1.0 / n if n else float("nan"))

    @axis_is_dim
    def logsumexp(self, dim: Axis = None, keepdim: bool = False) -> Tensor:
        """log(sum(exp(x))) over axis (or dim=), shifted by the max so exp cannot overflow; -inf over an empty axis."""
        x = self
        axes = x._axes(_every_if_empty(dim), "logsumexp")
        x = x._float()
        m = x._reduce(Op.MAX, axes, keepdim=True).detach()  # shifting by the max keeps exp in range; it cancels
        m = m.isinf().where(0.0, m)  # an infinite max (or an empty slice's -inf) shifts by 0, as torch
        out = m + (x - m).exp().sum(axes, keepdim=True).log()  # logsumexp = m + log sum exp(x - m)
        return _dropped(x, out, axes, keepdim)

    @axis_is_dim
    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first maximum along axis or dim= (over the flattened tensor when None), int32 (torch:
        int64). NaN counts as the largest value, as in torch. An empty axis raises, as in torch; a bool tensor,
        which torch refuses, ranks False < True (the index of the first True). No gradient."""
        x = self
        dim = _every_if_empty(dim)
        if x.dtype == dtypes.bool_:
            x = x.cast(dtypes.int32)
        if dim is None:
            _check_nonempty(x, x._axes(None, "argmax"), "argmax")
            flat = x.reshape(-1).argmax(0, keepdim=False)
            return flat.reshape((1,) * x.ndim) if keepdim else flat  # keepdim keeps every dim, as size 1 (torch)
        dim = normalize_axis(dim, x.ndim, "argmax")
        if x.ndim == 0:
            return limn.Tensor.full((), 0, dtype=dtypes.int32, device=x.device)  # the one value sits at index 0
        _check_nonempty(x, (dim,), "argmax")
        n = x.shape[dim]
        hit = x.eq(x.amax(dim, keepdim=True))
        if x.dtype.is_float:
            hit = hit.logical_or(x.isnan())  # NaN counts as the largest value, as in torch.argmax
        shape = [1] * x.ndim
        shape[dim] = n
        # the first hit has the largest (n - index); an index that misses scores 0
        score = hit.where(limn.Tensor.arange(n, 0, -1, device=x.device).reshape(shape), 0)
        return (n - score.amax(dim, keepdim)).cast(dtypes.int32)

    @axis_is_dim
    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first minimum, by the rules of argmax (NaN counts as the smallest value here)."""
        x = self
        dim = _every_if_empty(dim)
        if x.dtype == dtypes.bool_:
            x = x.cast(dtypes.int32)
        _check_nonempty(x, x._axes(dim, "argmin"), "argmin")
        # the first minimum of x is the first maximum of -x; for ints of ~x = -x - 1, since -x wraps at -128
        flipped = -x - 1 if x.dtype.is_int else -x
        return flipped.argmax(dim, keepdim)

    @axis_is_dim
    def any(self, dim: Axis = None, keepdim: bool = False) -> Tensor:
        """Whether some value over axis (or dim=) is nonzero (NaN is); over an empty axis False, as in torch. Bool,
        except for a uint8 tensor, where it is uint8 0/1, as torch's (a leftover of torch's byte masks)."""
        # any = max of (x != 0) as 0/1, > 0; MAX of nothing is the lowest int, so any of nothing is False
        out = self.cast(dtypes.bool_).cast(dtypes.int32)._reduce(Op.MAX, _every_if_empty(dim), keepdim).gt(0)
        return out.cast(dtypes.uint8) if self.dtype == dtypes.uint8 else out

    @axis_is_dim
    def all(self, dim: Axis = None, keepdim: bool = False) -> Tensor:
        """Whether every value over axis (or dim=) is nonzero; over an empty axis True, as in torch (uint8 as in
        any)."""
        out = self.logical_not().any(_every_if_empty(dim), keepdim).logical_not()  # all x = not any(not x)
        return out.cast(dtypes.uint8) if self.dtype == dtypes.uint8 else out

    @axis_is_dim
    def count_nonzero(self, dim: Axis = None) -> Tensor:
        """The number of nonzero values (NaN counts) over axis or dim= (every dim when None), int32 (torch: int64).

        >>> Tensor([[1.0, 0.0], [2.0, 3.0]]).count_nonzero(dim=1).tolist()
        [1, 2]
        """
        return self.cast(dtypes.bool_).cast(dtypes.int32).sum(_every_if_empty(dim))

    @axis_is_dim
    def norm(
        self,
        p: float | str | None = "fro",
        dim: Axis = None,
        keepdim: bool = False,
        *,
        dtype: DTypeLike = None,
    ) -> Tensor:
        """torch.norm: the vector p-norm over axis or dim= (every dim when None): "fro" and 2 are sqrt(sum x**2),
        1 sum |x|, inf max |x|, -inf min |x|, 0 the count of nonzeros, any other p (sum |x|**p)**(1/p). Floats
        only, as torch; dtype= casts the input first. Gradients are torch's: 0 where the norm is 0 (none for p=0),
        and inf's and -inf's shared evenly among the tied largest (smallest) |x|. "nuc" (a matrix norm) raises.

        >>> Tensor([3.0, -4.0]).norm().item(), Tensor([3.0, -4.0]).norm(1).item()
        (5.0, 7.0)
        """
        if p is None or p == "fro":
            p = 2
        if isinstance(p, str):
            raise NotImplementedError(f"norm: p={p!r} is a matrix norm limn does not compose; use 'fro' or a number")
        return self.vector_norm(p, _every_if_empty(dim), keepdim, dtype=dtype)

    def vector_norm(
        self, ord: float = 2, dim: Axis = None, keepdim: bool = False, *, dtype: DTypeLike = None
    ) -> Tensor:
        """torch.linalg.vector_norm: the ord-norm over dim (every dim when None), by the rules of norm.

        >>> Tensor([[3.0, 4.0], [1.0, 1.0]]).vector_norm(ord=float("inf"), dim=1).tolist()
        [4.0, 1.0]
        """
        x = self
        if dtype is not None:
            x = x.cast(dtype)
        if not x.dtype.is_float:
            raise TypeError(
                f"norm of a {x.dtype.name} tensor: torch defines norms for floats only; cast first, x.cast('float32')"
            )
        out_dtype = x.dtype
        x = x.cast(x.dtype.compute)
        magnitude = x.abs()
        if ord == math.inf:
            out = magnitude.amax(dim, keepdim)  # the largest |x|; ties share the gradient, as torch
        elif ord == -math.inf:
            out = magnitude.amin(dim, keepdim)
        elif ord == 0:
            out = x.ne(0).cast(x.dtype).sum(dim, keepdim)  # the count of nonzeros, no gradient (as torch's)
        elif ord == 1:
            out = magnitude.sum(dim, keepdim)
        elif ord == 2:
            out = _sqrt_zero_grad((x * x).sum(dim, keepdim))  # sqrt(sum x**2); gradient x / norm, 0 at norm 0
        else:
            total = (magnitude**ord).sum(dim, keepdim)
            positive = total.gt(0)
            out = positive.where(positive.where(total, 1.0) ** (1.0 / ord), total)  # total ** (1/p), gradient 0 at 0
        return out.cast(out_dtype)
