"""Creation: tensors made from a shape (zeros, ones, arange, eye, rand, randn) and the seed of the random ones.

Each takes the shape or range it makes, and `dtype`, `device` and `requires_grad` as keyword-only
arguments, as torch's do; it gives a Tensor through one of the two sources in limn.primitives: a CONST
(zeros, ones: nothing is allocated until realized) or host data copied into a BUFFER (the rest but rand
and randn, which limn.sampling computes on the device from the generator limn.rng keeps there).
Pipeline: **tensor (sources)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from limn import dtypes, rng, sampling
from limn.dtypes import DType
from limn.primitives import Tensor


def manual_seed(seed: int) -> None:
    """Seeds rand/randn and every random draw (limn.rng's Squares generator, one per device, each restarting
    the seed's stream), so runs repeat and numpy and c give the same numbers. They are not torch's numbers
    for the same seed (torch's generator is another one)."""
    rng.manual_seed(seed)


def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def zeros(
    shape: Sequence[int] | int,
    *,
    dtype: DType | str = dtypes.float32,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of 0s (a CONST, see Tensor.full).

    >>> Tensor.zeros((2, 3)).shape, Tensor.zeros(2, dtype="int8").tolist()
    ((2, 3), [0, 0])
    """
    return Tensor.full(shape, 0, dtype=dtype, device=device, requires_grad=requires_grad)


def ones(
    shape: Sequence[int] | int,
    *,
    dtype: DType | str = dtypes.float32,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """A tensor of 1s (a CONST, see Tensor.full)."""
    return Tensor.full(shape, 1, dtype=dtype, device=device, requires_grad=requires_grad)


def zeros_like(
    x: Tensor, *, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool = False
) -> Tensor:
    """0s of x's shape, in x's dtype on x's device unless given. No gradient history of x comes along."""
    return zeros(x.shape, dtype=dtype or x.dtype, device=device or x.device, requires_grad=requires_grad)


def ones_like(
    x: Tensor, *, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool = False
) -> Tensor:
    """1s of x's shape, in x's dtype on x's device unless given. No gradient history of x comes along."""
    return ones(x.shape, dtype=dtype or x.dtype, device=device or x.device, requires_grad=requires_grad)


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

    >>> Tensor.arange(5).tolist(), Tensor.arange(1.0, 2.0, 0.25).tolist()
    ([0, 1, 2, 3, 4], [1.0, 1.25, 1.5, 1.75])
    """
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        ints = all(isinstance(v, int) for v in (start, stop, step))
        dtype = dtypes.int32 if ints else dtypes.float32
    return Tensor(np.arange(start, stop, step), dtype=dtype, device=device, requires_grad=requires_grad)


def eye(
    n: int,
    m: int | None = None,
    *,
    dtype: DType | str = dtypes.float32,
    device: str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """The (n, m) matrix with 1s on the diagonal and 0s elsewhere (m = n when None)."""
    return Tensor(np.eye(n, m), dtype=dtype, device=device, requires_grad=requires_grad)


def rand(
    shape: Sequence[int] | int,
    *,
    dtype: DType | str = dtypes.float32,
    device: str | None = None,
    requires_grad: bool = False,
    generator: rng.Generator | None = None,
) -> Tensor:
    """Uniform in [0, 1), made on the device by the generator limn.manual_seed seeds (limn.sampling.rand):
    realized at this call, and drawn afresh on each replay of a step captured with limn.capture."""
    return sampling.rand(shape, dtype=dtype, device=device, requires_grad=requires_grad, generator=generator)


def randn(
    shape: Sequence[int] | int,
    *,
    dtype: DType | str = dtypes.float32,
    device: str | None = None,
    requires_grad: bool = False,
    generator: rng.Generator | None = None,
) -> Tensor:
    """Standard normal, made on the device by the generator limn.manual_seed seeds (see rand)."""
    return sampling.randn(shape, dtype=dtype, device=device, requires_grad=requires_grad, generator=generator)
