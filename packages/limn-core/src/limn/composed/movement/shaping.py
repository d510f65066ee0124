"""Shaping, composed from the five movements: expand, transpose, movedim, squeeze, flatten, cat, split, narrow.

Each function takes a tensor (cat and stack a list of them) and gives a tensor whose View is the old one
moved (a reshape, permute, expand, pad or shrink, or several), so nothing is copied: cat pads each piece to
the full length and adds them, narrow and select are shrinks. Arguments are torch's (`dim=`, which numpy's
`axis=` also names).
Pipeline: **tensor (movement)** -> graph (VIEW nodes) -> schedule -> IR (index arithmetic) -> device.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn.errors import ArgumentError
from limn.frontend.arguments import axis_is_dim, normalize_axis
from limn.graph.view import prod

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def sizes_of(args: tuple, what: str) -> tuple[int, ...]:
    """Sizes given as varargs (2, 3) or as one sequence ((2, 3),), as torch takes them, as a tuple of ints."""
    if len(args) == 1 and not isinstance(args[0], int):
        args = tuple(args[0])
    if any(not isinstance(s, int) or isinstance(s, bool) for s in args):
        raise TypeError(f"{what}: sizes must be ints, got {args}")
    return tuple(args)


def joined(args: tuple, dim: int | None, what: str) -> tuple[list[Tensor], int]:
    """The tensors and the dim (0 by default) of a cat or stack, from torch's form `cat([a, b], dim)` or the
    varargs form `cat(a, b, dim)` (tinygrad's, and `a.cat(b)` as a method, where a is the first), the dim
    by position or as dim= (axis=), not both."""
    if args and isinstance(args[0], (list, tuple)):
        tensors, rest = list(args[0]), args[1:]
    else:
        count = next((i for i, a in enumerate(args) if not isinstance(a, limn.Tensor)), len(args))
        tensors, rest = list(args[:count]), args[count:]
    if any(not isinstance(t_, limn.Tensor) for t_ in tensors):
        kinds = sorted({type(t_).__name__ for t_ in tensors if not isinstance(t_, limn.Tensor)})
        raise TypeError(f"{what}: expected a sequence of tensors, got {', '.join(kinds)} among them")
    if len(rest) > 1 or (rest and (not isinstance(rest[0], int) or isinstance(rest[0], bool))):
        raise TypeError(f"{what}: after the tensors comes one int dim, got {rest!r}")
    if rest and dim is not None:
        raise TypeError(f"{what}(): got the dim twice, {rest[0]} and dim={dim} (axis= is dim's other name); pass one")
    return tensors, rest[0] if rest else (0 if dim is None else dim)


class ShapingMixin:
    """Tensor's reshapes and views with torch's names: transpose, flatten, squeeze, cat, stack, split, view, narrow."""

    __slots__ = ()

    def broadcast_to(self, *shape: int | Sequence[int]) -> Tensor:
        """x stretched to `shape` by numpy's rule (new dims on the left, size-1 dims grow), without copying;
        -1 keeps a dim, as in torch.expand."""
        if len(shape) == 1 and shape[0] == self.shape:  # every binary op asks; the common answer first
            return self
        return self.expand(*shape)

    def expand_as(self, other: Tensor) -> Tensor:
        """x expanded to other's shape."""
        return self.expand(other.shape)

    def view(self, *shape: int | Sequence[int]) -> Tensor:
        """x under a new shape, as torch.view; one dim may be -1.

        limn differs from torch here on purpose: torch's view raises where the strides cannot express the new
        shape (call .reshape); limn's is always reshape, a view where the strides allow it and a copy otherwise.
        A limn tensor never aliases another one's storage (assigns have value semantics), so the two cannot be
        told apart by their values. view(dtype), torch's bit reinterpretation, is a TypeError."""
        if len(shape) == 1 and (isinstance(shape[0], str) or not isinstance(shape[0], (int, Sequence))):
            raise TypeError(f"view: limn cannot reinterpret bits as another dtype ({shape[0]!r}); use .cast(dtype)")
        return self.reshape(*shape)

    def view_as(self, other: Tensor) -> Tensor:
        """x reshaped to other's shape (view, see its note on copies)."""
        return self.reshape(other.shape)

    def transpose(self, dim0: int = -2, dim1: int = -1) -> Tensor:
        """Dims dim0 and dim1 swapped (the last two by default). A tensor of fewer than 2 dims comes back as it is."""
        if self.ndim < 2:
            normalize_axis(dim0, self.ndim, "transpose")
            normalize_axis(dim1, self.ndim, "transpose")
            return self
        order = list(range(self.ndim))
        a, b = normalize_axis(dim0, self.ndim, "transpose"), normalize_axis(dim1, self.ndim, "transpose")
        order[a], order[b] = order[b], order[a]
        return self.permute(tuple(order))

    @property
    def mT(self) -> Tensor:
        """The last two dims swapped (Tensor.mT); x needs at least 2 dims, as in torch."""
        if self.ndim < 2:
            raise ArgumentError(f"mT: needs a tensor of at least 2 dims, got shape {self.shape}")
        return self.transpose(-2, -1)

    def t(self) -> Tensor:
        """The transpose of a matrix; a tensor of 0 or 1 dims as it is, as torch.t (more dims raise)."""
        if self.ndim > 2:
            raise ArgumentError(f"t: expects a tensor of at most 2 dims, got shape {self.shape}; use transpose(a, b)")
        return self.transpose(0, -1) if self.ndim == 2 else self

    @property
    def T(self) -> Tensor:
        """Every dim in reverse order (the property Tensor.T; for a matrix its transpose)."""
        return self.permute(tuple(reversed(range(self.ndim))))

    def movedim(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
        """The dims in `source` moved to the positions in `destination`; the others keep their order, as torch.

        >>> Tensor.zeros((2, 3, 4)).movedim(0, -1).shape
        (3, 4, 2)
        """
        src = (source,) if isinstance(source, int) else tuple(source)
        dst = (destination,) if isinstance(destination, int) else tuple(destination)
        if len(src) != len(dst):
            raise ArgumentError(f"movedim: source {src} and destination {dst} must name as many dims")
        src = tuple(normalize_axis(d, self.ndim, "movedim") for d in src)
        dst = tuple(normalize_axis(d, self.ndim, "movedim") for d in dst)
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise ArgumentError(f"movedim: repeated dim in source {source} or destination {destination}")
        if self.ndim == 0:
            return self
        order: list[int | None] = [None] * self.ndim
        for s, d in zip(src, dst):
            order[d] = s
        rest = iter(d for d in range(self.ndim) if d not in src)
        return self.permute(tuple(next(rest) if o is None else o for o in order))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Dims start_dim..end_dim (inclusive) merged into one. A 0-d tensor becomes shape (1,)."""
        if self.ndim == 0:
            return self.reshape(1)
        start, end = normalize_axis(start_dim, self.ndim, "flatten"), normalize_axis(end_dim, self.ndim, "flatten")
        if start > end:
            raise ArgumentError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} for shape {self.shape}")
        return self.reshape(self.shape[:start] + (prod(self.shape[start : end + 1]),) + self.shape[end + 1 :])

    def ravel(self) -> Tensor:
        """x as one dim, row-major (reshape(-1); a copy where the view cannot say it)."""
        return self.reshape(-1)

    def unflatten(self, dim: int, sizes: Sequence[int]) -> Tensor:
        """Dim `dim` split into `sizes` (one may be -1), as torch.unflatten.

        >>> Tensor.zeros((2, 12)).unflatten(1, (3, -1)).shape
        (2, 3, 4)
        """
        dim = normalize_axis(dim, self.ndim, "unflatten")
        sizes = tuple(sizes)
        if not sizes:
            raise ArgumentError("unflatten: sizes must hold at least one size")
        n = self.shape[dim]
        if sizes.count(-1) == 1:
            rest = prod([s for s in sizes if s != -1])
            if rest == 0 or n % rest:
                raise ArgumentError(f"unflatten: dim {dim} of size {n} does not split into {sizes}")
            sizes = tuple(n // rest if s == -1 else s for s in sizes)
        if prod(sizes) != n:
            raise ArgumentError(f"unflatten: sizes {sizes} multiply to {prod(sizes)}, dim {dim} has {n}")
        return self.reshape(self.shape[:dim] + sizes + self.shape[dim + 1 :])

    @axis_is_dim
    def squeeze(self, dim: int | Sequence[int] | None = None) -> Tensor:
        """x without its size-1 dims (dim None), or without those of the dims named (an int or a tuple) that
        have size 1; the others stay, as in torch.

        >>> Tensor.zeros((1, 3, 1)).squeeze((0, 1)).shape
        (3, 1)
        """
        if dim is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = {normalize_axis(d, self.ndim, "squeeze") for d in dims}
        if self.ndim == 0:  # a 0-d tensor has nothing to squeeze, as in torch
            return self
        return self.reshape(tuple(s for d, s in enumerate(self.shape) if not (d in dims and s == 1)))

    @axis_is_dim
    def unsqueeze(self, dim: int | None = None) -> Tensor:
        """x with a new size-1 dim at `dim` (-1 appends one)."""
        if dim is None:
            raise TypeError("unsqueeze: missing the dim to insert")
        dim = normalize_axis(dim, self.ndim + 1, "unsqueeze")
        return self.reshape(self.shape[:dim] + (1,) + self.shape[dim:])

    @axis_is_dim
    def cat(*args: Tensor | Sequence[Tensor] | int, dim: int | None = None) -> Tensor:
        """Joins tensors along dim (0 by default): each is padded to the full length there and the pads add up.
        They must match off that dim; their dtypes promote as in +. Takes torch's `cat([a, b], dim)`, and also
        `cat(a, b, dim=)` and `a.cat(b, dim=)`. A 0-d tensor has no dim to join along and raises, as torch.

        >>> Tensor.cat([Tensor([1, 2]), Tensor([3])]).tolist()
        [1, 2, 3]
        """
        tensors, at = joined(args, dim, "cat")
        if not tensors:
            raise ArgumentError("cat: needs at least one tensor")
        first = tensors[0]
        if any(t_.ndim == 0 for t_ in tensors):
            flat = next(i for i, t_ in enumerate(tensors) if t_.ndim == 0)
            raise ArgumentError(f"cat: the tensor at position {flat} is 0-d and cannot be joined; use stack")
        at = normalize_axis(at, first.ndim, "cat")
        for t_ in tensors[1:]:
            if t_.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(t_.shape, first.shape)) if d != at):
                raise ArgumentError(f"cat along dim {at}: shapes {first.shape} and {t_.shape} differ off that dim")
        if len(tensors) == 1:
            return first
        total = sum(t_.shape[at] for t_ in tensors)
        out, start = None, 0
        for t_ in tensors:
            widths = [(0, 0)] * first.ndim
            widths[at] = (start, total - start - t_.shape[at])
            piece = t_.pad_constant(widths)
            out = piece if out is None else out + piece
            start += t_.shape[at]
        return out

    @axis_is_dim
    def stack(*args: Tensor | Sequence[Tensor] | int, dim: int | None = None) -> Tensor:
        """Tensors of one shape joined along a new dim at `dim` (0 by default); takes the forms cat takes."""
        tensors, at = joined(args, dim, "stack")
        if not tensors:
            raise ArgumentError("stack: needs at least one tensor")
        if any(t_.shape != tensors[0].shape for t_ in tensors):
            raise ArgumentError(f"stack: the tensors must have one shape, got {[t_.shape for t_ in tensors]}")
        at = normalize_axis(at, tensors[0].ndim + 1, "stack")
        return limn.Tensor.cat([t_.unsqueeze(at) for t_ in tensors], at)

    @axis_is_dim
    def split(self, sizes: int | Sequence[int], dim: int = 0) -> list[Tensor]:
        """Pieces along dim: of `sizes` each (the last may be shorter), or of the listed sizes, which must add
        up to the dim. Each piece is a view (a shrink) of x."""
        at = normalize_axis(dim, self.ndim, "split")
        n = self.shape[at]
        if isinstance(sizes, int):
            if sizes <= 0:
                raise ArgumentError(f"split: piece size must be positive, got {sizes}")
            sizes = [min(sizes, n - s) for s in range(0, n, sizes)] or [0]
        if sum(sizes) != n:
            raise ArgumentError(f"split: sizes {list(sizes)} add to {sum(sizes)}, dim {at} has {n}")
        out, start = [], 0
        for s in sizes:
            box = [(0, d) for d in self.shape]
            box[at] = (start, start + s)
            out.append(self.shrink(box))
            start += s
        return out

    @axis_is_dim
    def chunk(self, chunks: int, dim: int = 0) -> list[Tensor]:
        """x split along dim into pieces of ceil(n / chunks). Trap, as in torch: that can be fewer than
        `chunks` pieces (6 in 4 chunks gives 3 pieces of 2)."""
        at = normalize_axis(dim, self.ndim, "chunk")
        if chunks <= 0:
            raise ArgumentError(f"chunk: the number of chunks must be positive, got {chunks}")
        return self.split(max(math.ceil(self.shape[at] / chunks), 1), at)

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        """x[..., start:start + length, ...] along dim (a shrink); a negative start counts from the end.

        >>> Tensor([1, 2, 3, 4]).narrow(0, -3, 2).tolist()
        [2, 3]
        """
        dim = normalize_axis(dim, self.ndim, "narrow")
        n = self.shape[dim]
        begin = start + n if start < 0 else start
        if not 0 <= begin <= n or length < 0 or begin + length > n:
            raise IndexError(f"narrow: start {start} and length {length} do not fit dim {dim} of size {n}")
        box = [(0, s) for s in self.shape]
        box[dim] = (begin, begin + length)
        return self.shrink(box)

    def select(self, dim: int, index: int) -> Tensor:
        """x[..., index, ...] along dim, that dim removed; a negative index counts from the end."""
        dim = normalize_axis(dim, self.ndim, "select")
        n = self.shape[dim]
        if not -n <= index < n:
            raise IndexError(f"select: index {index} is out of bounds for dimension {dim} with size {n}")
        return self.narrow(dim, index % n, 1).squeeze(dim)

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        """The slices along dim, each without it, as a tuple (x.unbind(0) of a (3, 4) tensor is three (4,) rows)."""
        dim = normalize_axis(dim, self.ndim, "unbind")
        if self.ndim == 0:
            raise IndexError("unbind: a 0-d tensor has no dim to unbind")
        return tuple(self.select(dim, i) for i in range(self.shape[dim]))

    def clone(self) -> Tensor:
        """A copy of x's value: its own node (a CONTIGUOUS), so an assign or x[...] = v on one of them leaves the
        other as it was; gradients flow through, as torch.clone."""
        return self.contiguous()

    def __iter__(self) -> Iterator[Tensor]:
        """x[0], x[1], ...: the slices along dim 0, so `q, k, v = qkv` unpacks. A 0-d tensor raises."""
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self.select(0, i) for i in range(self.shape[0]))

    swapaxes = transpose
    swapdims = transpose
    reshape_as = view_as
    moveaxis = movedim
