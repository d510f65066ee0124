"""x[index] and x[index] = value, with numpy's and torch's rules: basic, stepped and advanced indexing.

getitem takes a tensor and an index (ints, slices with any positive step, `...`, None, int tensors and
lists, bool masks) and gives a tensor: basic indexing is a view (shrinks, a pad and a reshape per stepped
dim); advanced indices become one GATHER over the indexed dims flattened. A bool mask's result size depends
on its values, so the mask is computed at the call (its nonzero positions are host ints). setitem writes a
new value into x: a WHERE over x (an ASSIGN into its buffer, or a new node when gradients flow), by
limn.composed.indexed.in_place's rules.
Pipeline: **tensor (composed ops)** -> graph (VIEW, GATHER, WHERE, ASSIGN) -> schedule -> IR -> device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.indexed.in_place import update
from limn.composed.movement.rearrange import take_at
from limn.errors import ArgumentError
from limn.frontend.arguments import broadcast_shape
from limn.graph.view import prod

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


@dataclass(frozen=True)
class Advanced:
    """One advanced index item: host ints (already wrapped and range-checked) or a lazy int tensor."""

    index: np.ndarray | Tensor

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.index.shape)


@dataclass(frozen=True)
class Mask:
    """A bool mask index item, before its True positions are computed: it covers mask.ndim dims of x."""

    values: np.ndarray | Tensor


# ---- parsing: every item of an index as an int, a slice, None or an Advanced, one per dim (plus Nones) ----


def _items(x: Tensor, index: Any) -> list:
    """The index as a list with `...` spelled out and masks turned into their nonzero positions (one
    Advanced per dim they cover). Each item but None consumes one dim of x."""
    raw = list(index) if isinstance(index, tuple) else [index]
    items: list = []
    for i in raw:
        items.extend(_parse(i))
    consumed = sum(_width(i) for i in items)
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can hold only a single ellipsis ('...'), as torch's")
    if consumed > x.ndim:
        raise IndexError(f"too many indices ({consumed}) for a tensor with {x.ndim} dims of shape {x.shape}")
    fill = [slice(None)] * (x.ndim - consumed)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        return items[:at] + fill + items[at + 1 :]
    return items + fill


def _width(i: Any) -> int:
    """How many dims of x an index item consumes: none for None and `...`, a mask's rank, else one."""
    if i is None or i is Ellipsis:
        return 0
    return i.values.ndim if isinstance(i, Mask) else 1


def _parse(i: Any) -> list:
    """One item of an index as an index item: an int, a slice, None, `...`, an Advanced or a Mask."""
    if i is None or i is Ellipsis or isinstance(i, slice):
        return [i]
    if isinstance(i, (bool, np.bool_)):
        raise TypeError("indexing with a python bool: limn does not add a dim for True/False; use None or a mask")
    if isinstance(i, (int, np.integer)):
        return [int(i)]
    if isinstance(i, limn.Tensor):
        if i.dtype == dtypes.bool_:
            return [Mask(i)]
        if not i.dtype.is_int:
            raise IndexError(f"tensors used as indices must be int or bool tensors, got {i.dtype.name}")
        return [Advanced(i)]
    if isinstance(i, (list, tuple, np.ndarray)):
        arr = np.asarray(i)
        if arr.size == 0 and arr.dtype.kind == "f":
            arr = arr.astype(np.int64)  # [] is an empty list of indices
        if arr.dtype == np.bool_:
            return [Mask(arr)]
        if arr.dtype.kind not in "iu":
            raise IndexError(f"indices must be ints or bools, got {arr.dtype} from {i!r}")
        return [Advanced(arr.astype(np.int64))]
    raise TypeError(f"index {i!r} of type {type(i).__name__} is not an int, slice, ..., None, list or tensor")


def _expand_masks(x: Tensor, items: list) -> list:
    """Each Mask as one Advanced per dim it covers: the positions where it is True (computed now)."""
    out, dim = [], 0
    for i in items:
        if isinstance(i, Mask):
            mask = i.values.numpy() if isinstance(i.values, limn.Tensor) else i.values
            covered = x.shape[dim : dim + mask.ndim]
            if mask.ndim == 0 or mask.shape != covered:
                raise IndexError(
                    f"the mask of shape {mask.shape} does not match the dims {covered} of x {x.shape} it indexes "
                    f"from dim {dim}"
                )
            out.extend(Advanced(p.astype(np.int64)) for p in np.nonzero(mask))
            dim += mask.ndim
            continue
        out.append(i)
        dim += i is not None
    return out


def _checked(adv: Advanced, size: int, dim: int) -> Advanced:
    """Host indices wrapped (negative count from the end) and checked now; a tensor's are checked when computed."""
    if isinstance(adv.index, limn.Tensor):
        return adv
    idx = adv.index
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        raise IndexError(f"index {int(idx[bad].reshape(-1)[0])} is out of bounds for dimension {dim} with size {size}")
    return Advanced(np.where(idx < 0, idx + size, idx))


def _index(x: Tensor, items: list) -> Tensor:
    """x read at parsed index items (one per dim, plus the Nones)."""
    if not any(isinstance(i, Advanced) for i in items):
        return _basic(x, items)
    dims = _dim_of_each(items)
    items = [_checked(i, x.shape[d], d) if isinstance(i, Advanced) else i for i, d in zip(items, dims)]
    return _advanced(x, items)


def _dim_of_each(items: list) -> list[int | None]:
    """The dim of x each item consumes (None for a None item)."""
    out, dim = [], 0
    for i in items:
        out.append(None if i is None else dim)
        dim += i is not None
    return out


def _basic(x: Tensor, items: list) -> Tensor:
    """Basic indexing: a shrink of every dim, a pad and reshape per stepped slice, then the ints dropped and
    the Nones added by one reshape."""
    box, shape, steps, dim = [], [], [], 0
    for i in items:
        if i is None:
            shape.append(1)
            continue
        size = x.shape[dim]
        if isinstance(i, int):
            j = i + size if i < 0 else i
            if not 0 <= j < size:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
            box.append((j, j + 1))
        else:
            start, stop, step = i.indices(size)
            if step <= 0:
                raise ArgumentError(f"slice step {step} on dim {dim}: steps must be positive, as in torch; use .flip")
            count = len(range(start, stop, step))
            end = start + (count - 1) * step + 1 if count else start
            box.append((start, end))
            shape.append(count)
            if step > 1 and count > 1:
                steps.append((dim, step, count))
        dim += 1
    out = x.shrink(box)
    for d, step, count in steps:
        out = _every(out, d, step, count)
    return out.reshape(tuple(shape))


def _every(x: Tensor, dim: int, step: int, count: int) -> Tensor:
    """Every step-th element of dim, which holds (count - 1) step + 1 of them: pad to count * step, view as
    (count, step) and keep column 0."""
    widths = [(0, 0)] * x.ndim
    widths[dim] = (0, count * step - x.shape[dim])
    grid = x.pad_constant(widths).reshape(x.shape[:dim] + (count, step) + x.shape[dim + 1 :])  # (.., count, step, ..)
    box = [(0, s) for s in grid.shape]
    box[dim + 1] = (0, 1)
    return grid.shrink(box).reshape(x.shape[:dim] + (count,) + x.shape[dim + 1 :])


def _advanced(x: Tensor, items: list) -> Tensor:
    """Advanced indexing: the basic items applied as a view, the advanced dims moved to the front and
    flattened into one, and one GATHER along it with the advanced indices' row-major position."""
    view = _basic(x, [slice(None) if isinstance(i, Advanced) else i for i in items])  # advanced dims kept whole
    kept = [i for i in items if not isinstance(i, int)]  # an int is a select, its dim gone (torch's rule)
    at = [p for p, i in enumerate(kept) if isinstance(i, Advanced)]  # the advanced dims in `view`
    adjacent = at == list(range(at[0], at[0] + len(at)))
    indices = [kept[p] for p in at]
    b_shape = ()
    for a in indices:
        b_shape = broadcast_shape(b_shape, a.shape, "indexing")
    sizes = [view.shape[p] for p in at]
    rest = [d for d in range(view.ndim) if d not in at]
    moved = view.permute(tuple(at + rest))  # (A1, ..., Ak, rest...)
    flat = moved.reshape((prod(sizes),) + tuple(view.shape[d] for d in rest))  # (A, rest...)
    linear = _linear(indices, sizes, b_shape, x.device)
    if isinstance(linear, np.ndarray):
        out = take_at(flat, 0, linear.reshape(-1))  # (N, rest...)
    else:
        n = prod(b_shape)
        idx = linear.reshape((n,) + (1,) * len(rest)).expand((n,) + flat.shape[1:])
        out = flat.gather(0, idx) if n and flat.size else take_at(flat, 0, np.zeros(n, np.int64))
    out = out.reshape(b_shape + flat.shape[1:])  # (B..., rest...)
    if adjacent and at[0] > 0:
        nb = len(b_shape)
        out = out.movedim(tuple(range(nb)), tuple(range(at[0], at[0] + nb)))  # B back where the indices stood
    return out


def _linear(indices: list[Advanced], sizes: list[int], b_shape: tuple, device: str) -> np.ndarray | Tensor:
    """The row-major position in (A1, ..., Ak) of each broadcast index tuple, host ints when every index is.
    A lazy index is wrapped where negative; where any index is out of range the position is -1, which the
    GATHER reports as an IndexError when computed (a position in range must not hide a bad index)."""
    if all(isinstance(a.index, np.ndarray) for a in indices):
        parts = [np.broadcast_to(a.index, b_shape) for a in indices]
        return np.ravel_multi_index(parts, sizes) if parts[0].size else np.zeros(b_shape, np.int64)
    linear, valid = None, None
    for a, size, stride in zip(indices, sizes, _strides(sizes)):
        i = a.index if isinstance(a.index, limn.Tensor) else limn.Tensor(a.index.astype(np.int32), device=device)
        i = i.cast(dtypes.int32)
        i = i.lt(0).where(i + size, i)  # negative indices count from the end
        ok = i.lt(size).logical_and(i.ge(0))
        term = i * stride
        linear = term if linear is None else linear + term
        valid = ok if valid is None else valid.logical_and(ok)
    linear = valid.where(linear, -1)
    return linear.broadcast_to(b_shape)


def _strides(sizes: list[int]) -> list[int]:
    strides, step = [], 1
    for s in reversed(sizes):
        strides.append(step)
        step *= s
    return list(reversed(strides))


def _written(x: Tensor, index: Any, value: Any) -> Tensor:
    """x with value written at x[index], a new tensor (setitem's value, before x takes it)."""
    value = _as_value(x, value)
    masked = _mask_where(x, index, value)
    if masked is not None:
        return masked
    items = _expand_masks(x, _items(x, index))
    simple = all(i is None or isinstance(i, int) or (isinstance(i, slice) and i.step in (None, 1)) for i in items)
    return _write_box(x, items, value) if simple else _write_positions(x, items, value)


def _mask_where(x: Tensor, index: Any, value: Tensor) -> Tensor | None:
    """x[mask] = value as a WHERE, when the index is one bool tensor over x's leading dims and value is one
    cell's (or one row's) worth, the same at every masked place: nothing is read back into Python, so the
    write records in a captured step. None for any other index (the general path computes positions)."""
    mask = index[0] if isinstance(index, tuple) and len(index) == 1 else index
    if not (isinstance(mask, limn.Tensor) and mask.dtype == dtypes.bool_ and mask.shape == x.shape[: mask.ndim]):
        return None
    rest = x.shape[mask.ndim :]  # what one masked place holds
    while value.ndim > len(rest) and value.shape[0] == 1:
        value = value.reshape(value.shape[1:])
    if value.ndim > len(rest) or any(v not in (1, r) for v, r in zip(reversed(value.shape), reversed(rest))):
        return None  # one value per masked place: positions are needed
    here = mask.reshape(mask.shape + (1,) * len(rest))  # (*mask, 1, ...) against x's (*mask, *rest)
    return here.where(value, x)


def _as_value(x: Tensor, value: Any) -> Tensor:
    if isinstance(value, limn.Tensor):
        return value.cast(x.dtype)
    if isinstance(value, (bool, int, float, np.generic)):
        return limn.Tensor.full(
            (), value.item() if isinstance(value, np.generic) else value, dtype=x.dtype, device=x.device
        )
    return limn.Tensor(value, dtype=x.dtype, device=x.device)


def _fitted(value: Tensor, shape: tuple[int, ...]) -> Tensor:
    """value broadcast to `shape`; leading size-1 dims beyond its rank may go, as torch allows."""
    while value.ndim > len(shape) and value.shape[0] == 1:
        value = value.reshape(value.shape[1:])
    fits = len(value.shape) <= len(shape) and all(v in (1, s) for v, s in zip(reversed(value.shape), reversed(shape)))
    if not fits:
        raise ArgumentError(f"setitem: a value of shape {value.shape} cannot be written into x[index] of shape {shape}")
    return value.broadcast_to(shape)


def _write_box(x: Tensor, items: list, value: Tensor) -> Tensor:
    """x with `value` written into a box (ints and step-1 slices): the value padded to x's shape, and a
    WHERE of a padded True over it. All views: it fuses into one kernel."""
    region = _basic(x, items)  # the shape x[index] has, and the index checks
    value = _fitted(value, region.shape)
    box, dim = [], 0
    for i in items:
        if i is None:
            continue
        size = x.shape[dim]
        if isinstance(i, int):
            j = i + size if i < 0 else i
            box.append((j, j + 1))
        else:
            start, stop, _ = i.indices(size)
            box.append((start, max(start, stop)))
        dim += 1
    extents = tuple(e - s for s, e in box)
    widths = [(s, n - e) for (s, e), n in zip(box, x.shape)]
    padded = value.reshape(extents).pad_constant(widths)  # the box's shape: ints as size-1 dims, no Nones
    inside = limn.Tensor.full(extents, True, device=x.device).pad_constant(widths)
    return inside.where(padded, x)


def _write_positions(x: Tensor, items: list, value: Tensor) -> Tensor:
    """x with `value` written at the positions x[index] reads (steps, advanced indices, masks), computed now:
    each written cell reads its value element through a GATHER, the last one written there when an index
    repeats."""
    grid = limn.Tensor(np.arange(x.size, dtype=np.int32).reshape(x.shape), device=x.device)
    positions = _index(grid, items).numpy()  # x[index] of x's flat positions: torch's shape and order
    flat_value = _fitted(value, positions.shape).reshape(-1)
    positions = positions.reshape(-1)
    if positions.size == 0:
        return x
    source = np.zeros(x.size, np.int64)  # which value element each cell of x reads
    source[positions] = np.arange(positions.size)  # numpy keeps the last write of a repeated position
    hit = np.zeros(x.size, bool)
    hit[positions] = True
    written = take_at(flat_value, 0, source)  # (x.size,)
    if x.dtype.is_float and len(np.unique(positions)) < positions.size:
        written = _every_write_gets_the_gradient(x, positions, flat_value, written)
    return limn.Tensor(hit, device=x.device).where(written, x.reshape(-1)).reshape(x.shape)


def _every_write_gets_the_gradient(x: Tensor, positions: np.ndarray, values: Tensor, written: Tensor) -> Tensor:
    """written's value, with torch's gradient where a position repeats: every value element gets its cell's
    gradient, overwritten or not. written - (S - S) is written exactly while the gradient flows through S,
    the sum of the writes (limn.composed.indexed.scatter's scatter does the same; where S is not finite, the last
    write's)."""
    idx = limn.Tensor(positions.astype(np.int32), device=x.device)
    total = limn.Tensor.zeros((x.size,), dtype=x.dtype, device=x.device).scatter_add(0, idx, values)
    zero = total.detach() - total  # +0 where finite
    return zero.isfinite().where(written.detach() - zero, written)


class IndexingMixin:
    """Tensor's x[index] and x[index] = value, index_put, fill_ and copy_."""

    __slots__ = ()

    # ---- getitem ----
    def __getitem__(self, index: Any) -> Tensor:
        """x[index], with torch's rules.

        Basic indexing (ints, slices with a positive step, `...`, None) is a view. Advanced indexing (int
        tensors, lists, numpy arrays, bool masks) gathers: the advanced indices broadcast to one shape B, which
        takes the place of the indexed dims when they are adjacent and goes first when something separates
        them. Ints select first, as in torch, so they neither separate advanced indices nor join them: torch's
        x[0, :, [1, 2]] of a (2, 3, 4) tensor is (3, 2), where numpy's is (2, 3). Negative indices wrap.
        Out of range: a python or host index raises IndexError here; a tensor index raises IndexError when
        the value is computed.
        Trap: a bool mask is computed at this call, since the result's size is how many values are True.

        >>> x = Tensor([[1, 2, 3], [4, 5, 6]])
        >>> x[1, ::2].tolist(), x[:, [2, 0]].tolist(), x[x > 3].tolist()
        ([4, 6], [[3, 1], [6, 4]], [4, 5, 6])
        """
        return _index(self, _expand_masks(self, _items(self, index)))

    # ---- setitem ----
    def __setitem__(self, index: Any, value: Any) -> None:
        """x[index] = value: value (cast to x's dtype) broadcast to the shape of x[index] and written there.

        limn has value semantics, so this changes x alone: a value built from x before still computes what x
        held then, and x[0][1] = v writes into the temporary x[0], not into x (torch's x[0] is a view that
        aliases x; write x[0, 1] = v). x becomes a WHERE over its old value: an ASSIGN into its buffer, or, when
        gradients flow (x or value requires grad), a new node of the graph, so the gradient reaches both. As in
        torch, a leaf that requires grad cannot be written while gradients are recorded (use limn.no_grad()).
        Repeated advanced indices: the last write wins. Advanced indices (and masks) are computed now.

        >>> x = Tensor.zeros((2, 3))
        >>> x[:, 1] = 5.0
        >>> x.tolist()
        [[0.0, 5.0, 0.0], [0.0, 5.0, 0.0]]
        """
        value = _as_value(self, value)
        index_tensors = [i for i in (index if isinstance(index, tuple) else (index,)) if isinstance(i, limn.Tensor)]
        update(self, lambda old: _written(old, index, value), [value, *index_tensors])

    def index_put(self, indices: tuple, values: Any, accumulate: bool = False) -> Tensor:
        """x with `values` written at x[indices] (a tuple of index tensors), as torch.index_put: overwritten
        (x[indices] = values), or with accumulate=True added, every repeat of an index adding (a SCATTER). The
        indices are computed now."""
        indices = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        if not accumulate:
            return _written(self, indices, values)
        items = _expand_masks(self, _items(self, indices))
        grid = limn.Tensor(np.arange(self.size, dtype=np.int32).reshape(self.shape), device=self.device)
        positions = _index(grid, items).numpy()  # the flat cell of x each value lands in
        flat = _fitted(_as_value(self, values), positions.shape).reshape(-1)
        idx = limn.Tensor(positions.reshape(-1).astype(np.int32), device=self.device)
        return self.reshape(-1).scatter_add(0, idx, flat).reshape(self.shape) if idx.size else self

    def fill_(self, value: Any) -> Tensor:
        """value (a number or a 0-d tensor) everywhere in x, in place, as torch's; x's old value gets a zero
        gradient."""
        return _overwrite(self, value)

    def copy_(self, src: Any) -> Tensor:
        """src, broadcast to x's shape and cast to its dtype, written into x in place, as torch's."""
        return _overwrite(self, src)


def _overwrite(x: Tensor, value: Any) -> Tensor:
    """x takes value (cast to x's dtype, broadcast to its shape) everywhere, in place, linked to x's old value
    with a zero gradient, as torch's fill_ and copy_ are."""

    def everywhere(old: Tensor) -> Tensor:
        return limn.Tensor.full(old.shape, True, device=old.device).where(
            _fitted(_as_value(old, value), old.shape), old
        )

    update(x, everywhere, [value])
    return x
