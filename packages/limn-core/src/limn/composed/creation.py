"""Creation: tensors made from a shape (zeros, ones, arange, eye, rand, randn) and the seed of the random ones.

Each takes the shape or range it makes, and `dtype`, `device` and `requires_grad` as keyword-only
arguments, as torch's do; it gives a Tensor through one of the two sources in limn.frontend.primitives: a CONST
(zeros, ones: nothing is allocated until realized) or host data copied into a BUFFER (the rest but rand
and randn, which limn.composed.random.sampling computes on the device from the generator limn.composed.random.rng keeps
there). Pipeline: **tensor (sources)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.random import rng, sampling
from limn.dtypes import DType
from limn.errors import ArgumentError

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def manual_seed(seed: int) -> None:
    """Seeds rand/randn and every random draw (limn.composed.random.rng's Squares generator, one per device, each
    restarting the seed's stream), so runs repeat and numpy and c give the same numbers. They are not torch's numbers
    for the same seed (torch's generator is another one)."""
    rng.manual_seed(seed)


def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


# ---- torch's creation functions: full, empty, linspace, logspace, meshgrid, triangle indices ----


def given_size(shape: tuple, size: Sequence[int] | None, what: str) -> tuple[int, ...]:
    """The shape of a creation call as torch takes it: varargs (2, 3), one sequence ((2, 3),), or size=."""
    if size is not None and shape:
        raise TypeError(f"{what}(): the shape given twice, as {shape} and as size={size!r}; give one of them")
    if not shape and size is None:
        raise TypeError(f"{what}(): needs a shape, e.g. {what}(2, 3), {what}((2, 3)) or {what}(size=(2, 3))")
    return sizes(shape if size is None else (size,))


def sizes(shape: tuple) -> tuple[int, ...]:
    """A shape given as torch's varargs (2, 3), as one sequence ((2, 3),) or as one int, as a tuple of ints."""
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    if any(not isinstance(s, (int, np.integer)) or isinstance(s, bool) for s in shape):
        raise TypeError(
            f"a shape must be ints, got {shape}; dtype, device and requires_grad are keyword-only, not positional"
        )
    return tuple(int(s) for s in shape)


def full(
    size: Sequence[int] | int,
    fill_value: bool | int | float,
    *,
    dtype: DType | str | None = None,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of `size` holding fill_value, as torch.full (Tensor.full: bool, int32 or float32 by the value)."""
    return limn.Tensor.full(size, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


class CreationMixin:
    """Tensor's constructors, as torch's torch.zeros and friends: static methods, and the *_like and new_* methods that
    copy a tensor's dtype and device."""

    __slots__ = ()

    @staticmethod
    def zeros(
        *shape: int | Sequence[int],
        size: Sequence[int] | None = None,
        dtype: DType | str = dtypes.float32,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """A tensor of 0s (a CONST, see Tensor.full); the shape as torch takes it: varargs, a sequence or size=.

        >>> Tensor.zeros((2, 3)).shape, Tensor.zeros(2, dtype="int8").tolist()
        ((2, 3), [0, 0])
        """
        return limn.Tensor.full(
            given_size(shape, size, "zeros"), 0, dtype=dtype, device=device, requires_grad=requires_grad
        )

    @staticmethod
    def ones(
        *shape: int | Sequence[int],
        size: Sequence[int] | None = None,
        dtype: DType | str = dtypes.float32,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """A tensor of 1s (a CONST, see Tensor.full); the shape as varargs, a sequence or size=, as zeros."""
        return limn.Tensor.full(
            given_size(shape, size, "ones"), 1, dtype=dtype, device=device, requires_grad=requires_grad
        )

    def zeros_like(
        self, *, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool = False
    ) -> Tensor:
        """0s of x's shape, in x's dtype on x's device unless given. No gradient history of x comes along."""
        return limn.Tensor.zeros(
            self.shape, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
        )

    def ones_like(
        self, *, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool = False
    ) -> Tensor:
        """1s of x's shape, in x's dtype on x's device unless given. No gradient history of x comes along."""
        return limn.Tensor.ones(
            self.shape, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
        )

    @staticmethod
    def arange(
        start: int | float,
        stop: int | float | None = None,
        step: int | float = 1,
        *,
        dtype: DType | str | None = None,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """Evenly spaced values in [start, stop) (in [0, start) with one argument), as numpy.arange: int32 for
        int arguments, float32 otherwise. A float step accumulates rounding as numpy's does.

        Trap: torch's int arange is always int64; limn's is int32 (its int default) while start, stop and the
        last value fit, and int64 once one does not, so arange(2**31, 2**31 + 3) is int64 and does not wrap. An
        explicit int dtype the values pass wraps, as torch's (arange(120, 130, dtype=int8) reaches -128).

        >>> Tensor.arange(5).tolist(), Tensor.arange(1.0, 2.0, 0.25).tolist()
        ([0, 1, 2, 3, 4], [1.0, 1.25, 1.5, 1.75])
        >>> Tensor.arange(2**31, 2**31 + 2).dtype.name
        'int64'
        """
        if stop is None:
            start, stop = 0, start
        values = np.arange(start, stop, step)
        if dtype is None:
            ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, stop, step))
            ends = (start, stop, values[-1] if values.size else start)
            fits = all(-(2**31) <= int(v) < 2**31 for v in ends) if ints else True
            dtype = (dtypes.int32 if fits else dtypes.int64) if ints else dtypes.float32
        return limn.Tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)

    @staticmethod
    def eye(
        n: int,
        m: int | None = None,
        *,
        dtype: DType | str = dtypes.float32,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """The (n, m) matrix with 1s on the diagonal and 0s elsewhere (m = n when None)."""
        return limn.Tensor(np.eye(n, m), dtype=dtype, device=device, requires_grad=requires_grad)

    @staticmethod
    def rand(
        *shape: int | Sequence[int],
        size: Sequence[int] | None = None,
        dtype: DType | str = dtypes.float32,
        device: str | None = None,
        requires_grad: bool = False,
        generator: rng.Generator | None = None,
    ) -> Tensor:
        """Uniform in [0, 1), made on the device by the generator limn.manual_seed seeds
        (limn.composed.random.sampling.rand): realized at this call, and drawn afresh on each replay of a step
        captured with limn.capture. The shape as torch takes it: rand(2, 3), rand((2, 3)) or rand(size=(2, 3)).

        >>> Tensor.rand(2, 3).shape == Tensor.rand((2, 3)).shape == (2, 3)
        True
        """
        shape = given_size(shape, size, "rand")
        return sampling.rand(shape, dtype=dtype, device=device, requires_grad=requires_grad, generator=generator)

    @staticmethod
    def randn(
        *shape: int | Sequence[int],
        size: Sequence[int] | None = None,
        dtype: DType | str = dtypes.float32,
        device: str | None = None,
        requires_grad: bool = False,
        generator: rng.Generator | None = None,
    ) -> Tensor:
        """Standard normal, made on the device by the generator limn.manual_seed seeds; the shape as rand's."""
        shape = given_size(shape, size, "randn")
        return sampling.randn(shape, dtype=dtype, device=device, requires_grad=requires_grad, generator=generator)

    def full_like(
        self,
        fill_value: bool | int | float,
        *,
        dtype: DType | str | None = None,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """fill_value in x's shape, in x's dtype on x's device unless given, as torch.full_like."""
        return limn.Tensor.full(
            self.shape, fill_value, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad
        )

    @staticmethod
    def empty(
        *shape: int | Sequence[int],
        size: Sequence[int] | None = None,
        dtype: DType | str = dtypes.float32,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """A tensor whose values do not matter, as torch.empty. Trap: limn's are 0s (zeros), not torch's garbage,
        so nothing may read them as anything else."""
        return limn.Tensor.zeros(
            given_size(shape, size, "empty"), dtype=dtype, device=device, requires_grad=requires_grad
        )

    def empty_like(
        self, *, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool = False
    ) -> Tensor:
        """empty in x's shape (0s, see empty), in x's dtype on x's device unless given."""
        return self.zeros_like(dtype=dtype, device=device, requires_grad=requires_grad)

    @staticmethod
    def linspace(
        start: float,
        end: float,
        steps: int,
        *,
        dtype: DType | str = dtypes.float32,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """`steps` values evenly spaced from start to end, both included, as torch.linspace, computed as torch
        does: the first half as start + i step, the second as end - (steps - 1 - i) step, so end is exact.

        >>> Tensor.linspace(0, 1, 5).tolist()
        [0.0, 0.25, 0.5, 0.75, 1.0]
        """
        if steps < 0:
            raise ArgumentError(f"linspace: steps must be non-negative, got {steps}")
        dtype = dtypes.as_dtype(dtype)
        if dtype == dtypes.bool_:
            raise ArgumentError(
                f"linspace({start}, {end}, {steps}): a bool dtype has no evenly spaced values (torch raises too); "
                "pass a float or int dtype and compare, e.g. linspace(...) != 0"
            )
        wide = np.float64 if dtype == dtypes.float64 else np.float32  # torch computes in the dtype (halves in float32)
        i = np.arange(steps).astype(wide)
        first, last = wide(start), wide(end)
        step = (last - first) / wide(steps - 1) if steps > 1 else wide(0)
        values = np.where(i < steps // 2, first + step * i, last - step * (wide(steps - 1) - i))  # torch's two halves
        if steps == 1:
            values = np.array([first], wide)
        return limn.Tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)

    @staticmethod
    def logspace(
        start: float,
        end: float,
        steps: int,
        base: float = 10.0,
        *,
        dtype: DType | str = dtypes.float32,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """base ** linspace(start, end, steps), as torch.logspace."""
        exponents = limn.Tensor.linspace(start, end, steps, dtype=dtypes.float64).numpy()
        return limn.Tensor(np.power(float(base), exponents), dtype=dtype, device=device, requires_grad=requires_grad)

    def meshgrid(*tensors: Tensor | Sequence[Tensor], indexing: str = "ij") -> tuple[Tensor, ...]:
        """Coordinate grids from 1-D tensors, as torch.meshgrid: each tensor expanded over the grid of all their
        sizes (views). indexing "ij" puts tensor k's size at dim k; "xy" swaps the first two (x across columns).
        As a method, x.meshgrid(y) is meshgrid(x, y): self is the first tensor.

        >>> [g.tolist() for g in Tensor.meshgrid(Tensor([1, 2]), Tensor([3, 4, 5]))][1]
        [[3, 4, 5], [3, 4, 5]]
        """
        # torch.meshgrid(x, y) or meshgrid([x, y]); as a method x.meshgrid(y), self is the first tensor
        tensors = tuple(t for arg in tensors for t in ((arg,) if isinstance(arg, limn.Tensor) else tuple(arg)))
        if indexing not in ("ij", "xy"):
            raise ArgumentError(f"meshgrid: indexing must be 'ij' or 'xy', not {indexing!r}")
        if any(t.ndim > 1 for t in tensors):
            raise ArgumentError(f"meshgrid: takes 0-d or 1-d tensors, got shapes {[t.shape for t in tensors]}")
        lines = [t.reshape(-1) for t in tensors]
        order = list(range(len(lines)))
        if indexing == "xy" and len(lines) > 1:
            order[0], order[1] = 1, 0  # the grid's dim 0 walks the second tensor
        shape = tuple(lines[k].shape[0] for k in order)
        grids = []
        for k, line in enumerate(lines):
            at = order.index(k)  # the grid dim this tensor runs along
            grids.append(line.reshape(tuple(-1 if d == at else 1 for d in range(len(shape)))).expand(shape))
        return tuple(grids)

    @staticmethod
    def tril_indices(
        row: int, col: int, offset: int = 0, *, dtype: DType | str = dtypes.int32, device: str | None = None
    ) -> Tensor:
        """The (2, N) row and column indices of the lower triangle of a (row, col) matrix, row by row, as
        torch.tril_indices (int32: limn's widest int)."""
        return limn.Tensor(np.stack(np.tril_indices(row, offset, col)).reshape(2, -1), dtype=dtype, device=device)

    @staticmethod
    def triu_indices(
        row: int, col: int, offset: int = 0, *, dtype: DType | str = dtypes.int32, device: str | None = None
    ) -> Tensor:
        """The (2, N) indices of the upper triangle of a (row, col) matrix, as torch.triu_indices."""
        return limn.Tensor(np.stack(np.triu_indices(row, offset, col)).reshape(2, -1), dtype=dtype, device=device)

    def new_full(
        self, size: Sequence[int] | int, fill_value: bool | int | float, *, dtype: DType | str | None = None
    ) -> Tensor:
        """fill_value in a new shape, in x's dtype (unless given) on x's device, as torch's x.new_full."""
        return limn.Tensor.full(size, fill_value, dtype=dtype or self.dtype, device=self.device)

    def new_zeros(self, *size: int | Sequence[int], dtype: DType | str | None = None) -> Tensor:
        """0s in a new shape, in x's dtype (unless given) on x's device, as torch's x.new_zeros."""
        return limn.Tensor.full(sizes(size), 0, dtype=dtype or self.dtype, device=self.device)

    def new_ones(self, *size: int | Sequence[int], dtype: DType | str | None = None) -> Tensor:
        """1s in a new shape, in x's dtype (unless given) on x's device, as torch's x.new_ones."""
        return limn.Tensor.full(sizes(size), 1, dtype=dtype or self.dtype, device=self.device)

    new_empty = new_zeros
