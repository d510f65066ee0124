"""Adaptive pools, as torch.nn.functional's: the output size is given, and the windows follow from it.

Window i of a dim of size L covers [floor(i L / out), ceil((i + 1) L / out)), so the windows tile the input
and neighbours may share a cell. The windows are pooling's (limn.composed.functional.pooling), walked as a
max pool or an average pool walks them; (N, C, *in) or (C, *in) in, (N, C, *output_size) out.
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from limn import dtypes
from limn.composed.functional.pooling import (
    OutputSize,
    Windows,
    _average,
    _check_dtype,
    _max_pool,
    _spatial,
    adaptive,
)
from limn.errors import ArgumentError

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def _adaptive_windows(x: Tensor, n: int, output_size: OutputSize, what: str) -> list[Windows]:
    sizes = (output_size,) * n if isinstance(output_size, int) or output_size is None else tuple(output_size)
    if len(sizes) != n:
        raise ArgumentError(f"{what}: output_size must be an int or {n} ints (None keeps a dim), got {output_size!r}")
    sizes = tuple(i if o is None else o for o, i in zip(sizes, x.shape[2:]))
    if any(not isinstance(o, int) or o < 0 for o in sizes):
        raise ArgumentError(f"{what}: output_size must be non-negative ints, got {output_size!r}")
    return [adaptive(i, o) for i, o in zip(x.shape[2:], sizes)]


def _empty(x: Tensor, wins: list[Windows], unbatched: bool) -> Tensor:
    """The (N, C, *out) result of a pool with an output size of 0: an empty view of x (the gradient is 0)."""
    out = x.shrink([(0, 0 if d == 2 else s) for d, s in enumerate(x.shape)])
    out = out.reshape(x.shape[:2] + tuple(len(w.starts) for w in wins))
    return out.squeeze(0) if unbatched else out


def adaptive_avg_pool(input: Tensor, n: int, output_size: OutputSize) -> Tensor:
    """The adaptive average pool over n spatial dims: window i of a dim of size L covers
    [floor(i L / out), ceil((i + 1) L / out)), so the windows tile the input and may overlap by one cell."""
    what = f"adaptive_avg_pool{n}d"
    _check_dtype(input, True, what)
    x = _spatial(input, n, what)
    wins = _adaptive_windows(x, n, output_size, what)
    if any(len(w.starts) == 0 for w in wins):
        return _empty(x, wins, x is not input)
    divisor = np.ones(())
    for win in wins:
        divisor = np.multiply.outer(divisor, win.lengths)
    return _average(x, wins, divisor, x is not input)


def adaptive_avg_pool1d(input: Tensor, output_size: OutputSize) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool1d: (N, C, L) -> (N, C, output_size)."""
    return adaptive_avg_pool(input, 1, output_size)


def adaptive_avg_pool2d(input: Tensor, output_size: OutputSize) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool2d: (N, C, H, W) -> (N, C, *output_size), each output cell the
    mean of its window (see adaptive_avg_pool); None in output_size keeps that dim.

    >>> x = Tensor([[[[1.0, 2.0, 3.0, 4.0, 5.0]]]])
    >>> adaptive_avg_pool2d(x, (1, 3)).tolist()
    [[[[1.5, 3.0, 4.5]]]]
    """
    return adaptive_avg_pool(input, 2, output_size)


def adaptive_avg_pool3d(input: Tensor, output_size: OutputSize) -> Tensor:
    """torch.nn.functional.adaptive_avg_pool3d: (N, C, D, H, W) -> (N, C, *output_size)."""
    return adaptive_avg_pool(input, 3, output_size)


def adaptive_max_pool(input: Tensor, n: int, output_size: OutputSize, return_indices: bool = False):
    """The adaptive max pool over n spatial dims: adaptive_avg_pool's windows, max_pool2d's choice of cell.
    Floats only, as torch."""
    what = f"adaptive_max_pool{n}d"
    _check_dtype(input, True, what)
    x = _spatial(input, n, what)
    wins = _adaptive_windows(x, n, output_size, what)
    if any(len(w.starts) == 0 for w in wins):
        out = _empty(x, wins, x is not input)
        return (out, out.detach().cast(dtypes.int32)) if return_indices else out
    return _max_pool(x, wins, return_indices, x is not input)


def adaptive_max_pool1d(input: Tensor, output_size: OutputSize, return_indices: bool = False):
    """torch.nn.functional.adaptive_max_pool1d: (N, C, L) -> (N, C, output_size)."""
    return adaptive_max_pool(input, 1, output_size, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size: OutputSize, return_indices: bool = False):
    """torch.nn.functional.adaptive_max_pool2d: (N, C, H, W) -> (N, C, *output_size)."""
    return adaptive_max_pool(input, 2, output_size, return_indices)


def adaptive_max_pool3d(input: Tensor, output_size: OutputSize, return_indices: bool = False):
    """torch.nn.functional.adaptive_max_pool3d: (N, C, D, H, W) -> (N, C, *output_size)."""
    return adaptive_max_pool(input, 3, output_size, return_indices)
