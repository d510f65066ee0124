"""Resizing by interpolation, as torch.nn.functional.interpolate: nearest, nearest-exact, (bi/tri)linear, area.

Takes (N, C, *in) and a size or a scale factor and gives (N, C, *out). Each spatial dim is resized on its
own, the last first, as torch's kernels nest them: the source cells of each output cell are found on the
host with torch's formulas (in its float precision), and read with one GATHER each, so the gradient is a
SCATTER that adds up what each source cell fed. "area" is limn.pooling's adaptive average pool.
Pipeline: **tensor (composed ops)** -> graph (GATHER) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from limn import pooling
from limn.errors import ArgumentError
from limn.primitives import Tensor

# the linear modes and the spatial rank each belongs to, as torch pairs them
LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
MODES = ("nearest", "nearest-exact", "area", *LINEAR)


def interpolate(
    input: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | Sequence[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """torch.nn.functional.interpolate for (N, C, *in) with 1 to 3 spatial dims: give `size` (the output's
    spatial shape) or `scale_factor` (out = floor(in * scale)), not both.

    nearest reads cell floor(o * scale), nearest-exact floor((o + 0.5) * scale), with scale = in / out, or
    1 / scale_factor when that is given and recompute_scale_factor is not set (torch's rule, which can pick
    other cells than in / out would). The linear modes blend the two nearest cells: align_corners=True
    maps the corner cells onto each other, False (the default) maps cell edges, clamped at 0.
    Floats only, as torch's CPU kernels.

    >>> x = Tensor([[[1.0, 2.0]]])
    >>> interpolate(x, scale_factor=2).tolist(), interpolate(x, size=3, mode="linear", align_corners=True).tolist()
    ([[[1.0, 1.0, 2.0, 2.0]]], [[[1.0, 1.5, 2.0]]])
    """
    n = input.ndim - 2
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not in limn yet; resize without it")
    if mode == "bicubic":
        raise NotImplementedError("interpolate: mode 'bicubic' is not in limn yet; use 'bilinear' or 'nearest'")
    if mode not in MODES:
        raise ArgumentError(f"interpolate: mode must be one of {', '.join(MODES)}, not {mode!r}")
    if not input.dtype.is_float:
        raise TypeError(f"interpolate: not defined for {input.dtype.name} tensors (torch's rule); cast to a float")
    if not 1 <= n <= 3 or (mode in LINEAR and LINEAR[mode] != n):
        need = f"a {LINEAR[mode] + 2}-d input" if mode in LINEAR else "a 3-d, 4-d or 5-d input"
        raise ArgumentError(f"interpolate: mode {mode!r} needs {need} (N, C, *spatial), got shape {input.shape}")
    if align_corners is not None and mode not in LINEAR:
        raise ArgumentError(f"interpolate: align_corners goes only with the linear modes, not mode {mode!r}")
    sizes, scales = _output_size(input, n, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        return pooling.adaptive_avg_pool(input, n, sizes)
    x = input
    for d in reversed(range(n)):
        axis, i, o = 2 + d, input.shape[2 + d], sizes[d]
        if mode in LINEAR:
            x = _linear_along(x, axis, i, o, scales[d], bool(align_corners))
        else:
            x = x.gather(_index(x, axis, _nearest(i, o, scales[d], mode == "nearest-exact")), axis)
    return x


def _output_size(
    x: Tensor, n: int, size, scale_factor, recompute: bool | None
) -> tuple[tuple[int, ...], tuple[float | None, ...]]:
    """The output's spatial sizes and the scale factors the kernels use (None: in / out), torch's rules."""
    if (size is None) == (scale_factor is None):
        raise ArgumentError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        sizes = (size,) * n if isinstance(size, int) else tuple(size)
        if len(sizes) != n or any(not isinstance(s, int) or s < 1 for s in sizes):
            raise ArgumentError(f"interpolate: size must be {n} positive ints (or one), got {size!r}")
        return sizes, (None,) * n
    factors = (float(scale_factor),) * n if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
    if len(factors) != n or any(f <= 0 for f in factors):
        raise ArgumentError(f"interpolate: scale_factor must be {n} positive numbers (or one), got {scale_factor!r}")
    sizes = tuple(math.floor(i * f) for i, f in zip(x.shape[2:], factors))
    if min(sizes) < 1:
        raise ArgumentError(f"interpolate: scale_factor {scale_factor} shrinks {x.shape[2:]} to nothing: {sizes}")
    return sizes, ((None,) * n if recompute else tuple(float(f) for f in factors))


def _scale(i: int, o: int, factor: float | None) -> np.float32:
    """torch's compute_scales_value: 1 / scale_factor when one is given, else in / out, as a float."""
    return np.float32(1.0 / factor) if factor is not None and factor > 0 else np.float32(i) / np.float32(o)


def _nearest(i: int, o: int, factor: float | None, exact: bool) -> np.ndarray:
    """The source cell of each of o output cells, torch's nearest_idx (float32 arithmetic, as torch's)."""
    dst = np.arange(o, dtype=np.float32)
    if not exact and o == i:
        return np.arange(o)
    if not exact and o == 2 * i:
        return np.arange(o) // 2
    src = np.floor(((dst + np.float32(0.5)) if exact else dst) * _scale(i, o, factor))
    return np.minimum(src.astype(np.int64), i - 1)


def _linear_along(x: Tensor, axis: int, i: int, o: int, factor: float | None, align_corners: bool) -> Tensor:
    """Linear interpolation along axis: out[o] = l0 x[i0] + l1 x[i1], torch's indices and weights."""
    compute = np.float64 if x.dtype.np == np.float64 else np.float32  # torch's opmath type
    dst = np.arange(o, dtype=compute)
    if align_corners:
        scale = compute(i - 1) / compute(o - 1) if o > 1 else compute(0)
        src = scale * dst
    else:
        scale = compute(1.0 / factor) if factor is not None and factor > 0 else compute(i) / compute(o)
        src = np.maximum(scale * (dst + compute(0.5)) - compute(0.5), compute(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), i - 1)
    l1 = np.clip(src - i0, 0, 1).astype(compute)
    i1 = i0 + (i0 < i - 1)
    shape = [1] * x.ndim
    shape[axis] = o
    w0 = Tensor((1 - l1).reshape(shape), dtype=x.dtype, device=x.device)
    w1 = Tensor(l1.reshape(shape), dtype=x.dtype, device=x.device)
    return x.gather(_index(x, axis, i0), axis) * w0 + x.gather(_index(x, axis, i1), axis) * w1


def _index(x: Tensor, axis: int, cells: np.ndarray) -> Tensor:
    """Host cell numbers along axis as a gather index of x's shape with that dim resized."""
    shape = [1] * x.ndim
    shape[axis] = len(cells)
    full = list(x.shape)
    full[axis] = len(cells)
    return Tensor(cells.astype(np.int32).reshape(shape), device=x.device).expand(tuple(full))


def interpolate_method(x: Tensor, size: Sequence[int], mode: str = "linear", align_corners: bool = False) -> Tensor:
    """Tensor.interpolate, as tinygrad's: to `size` (the spatial shape), where mode "linear" means the
    linear mode of x's rank (linear, bilinear or trilinear); align_corners applies to it alone.

    >>> Tensor.ones((1, 1, 2, 2)).interpolate((3, 3)).shape
    (1, 1, 3, 3)
    """
    n = x.ndim - 2
    if mode == "linear":
        mode = {1: "linear", 2: "bilinear", 3: "trilinear"}.get(n, mode)
    return interpolate(x, tuple(size), None, mode, align_corners if mode in LINEAR else None)
