"""Resizing by interpolation, as torch.nn.functional.interpolate: nearest(-exact), (bi/tri)linear, bicubic, area.

Takes (N, C, *in) and a size or a scale factor and gives (N, C, *out). Each spatial dim is resized on its
own, the last first, as torch's kernels nest them: the source cells of each output cell are found on the
host with torch's formulas (in its float precision), and read with one GATHER each, so the gradient is a
SCATTER that adds up what each source cell fed. "area" is limn.composed.functional.adaptive_pooling's average pool.
uint8 takes torch's fixed-point kernel (int16 weights, a rounded shift per dim, saturated back to uint8).
Pipeline: **tensor (composed ops)** -> graph (GATHER) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.functional import adaptive_pooling
from limn.errors import ArgumentError

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

# the linear modes and the spatial rank each belongs to, as torch pairs them
LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
RANKS = {**LINEAR, "bicubic": 2}  # the modes of one spatial rank
MODES = ("nearest", "nearest-exact", "area", *RANKS)
UINT8_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic")  # those torch's CPU kernels run on uint8
CUBIC_A = -0.75  # torch's bicubic convolution constant (Keys' kernel with a = -0.75)


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
    maps the corner cells onto each other, False (the default) maps cell edges, clamped at 0. bicubic
    blends four cells with Keys' cubic (a = -0.75), the edge cell standing in for those past it.
    antialias=True (bilinear and bicubic) filters as torch's separable kernel: a shrink by s widens the
    triangle (or Keys' cubic with a = -0.5) s times, so every input cell counts.

    Floats, and uint8 in the modes torch's CPU kernels take it (nearest, nearest-exact, bilinear, bicubic):
    uint8 resizes as torch's fixed-point kernel, with int16 weights and a rounded shift per dim, the last dim
    first, each pass saturated to [0, 255]. Other ints and bools raise, as torch.

    >>> x = Tensor([[[1.0, 2.0]]])
    >>> interpolate(x, scale_factor=2).tolist(), interpolate(x, size=3, mode="linear", align_corners=True).tolist()
    ([[[1.0, 1.0, 2.0, 2.0]]], [[[1.0, 1.5, 2.0]]])
    """
    n = input.ndim - 2
    if antialias and mode not in ("bilinear", "bicubic"):
        raise ArgumentError(
            f"interpolate: antialias=True goes only with 'bilinear' and 'bicubic' (torch's rule), not {mode!r}"
        )
    if mode not in MODES:
        raise ArgumentError(f"interpolate: mode must be one of {', '.join(MODES)}, not {mode!r}")
    _check_dtype(input.dtype, mode)
    if not 1 <= n <= 3 or (mode in RANKS and RANKS[mode] != n):
        need = f"a {RANKS[mode] + 2}-d input" if mode in RANKS else "a 3-d, 4-d or 5-d input"
        raise ArgumentError(f"interpolate: mode {mode!r} needs {need} (N, C, *spatial), got shape {input.shape}")
    if align_corners is not None and mode not in RANKS:
        raise ArgumentError(f"interpolate: align_corners goes only with the linear and bicubic modes, not {mode!r}")
    sizes, scales = _output_size(input, n, size, scale_factor, recompute_scale_factor)
    if mode == "area":
        return adaptive_pooling.adaptive_avg_pool(input, n, sizes)
    x = input
    for d in reversed(range(n)):
        axis, i, o = 2 + d, input.shape[2 + d], sizes[d]
        if mode in RANKS and (input.dtype == dtypes.uint8 or antialias):
            if i != o:  # torch's separable kernels skip a dim whose size stays
                along = _fixed_point_along if input.dtype == dtypes.uint8 else _filtered_along
                x = along(x, axis, i, o, scales[d], bool(align_corners), mode == "bicubic", antialias)
        elif mode in LINEAR:
            x = _linear_along(x, axis, i, o, scales[d], bool(align_corners))
        elif mode == "bicubic":
            x = _cubic_along(x, axis, i, o, scales[d], bool(align_corners))
        else:
            x = x.gather(axis, _index(x, axis, _nearest(i, o, scales[d], mode == "nearest-exact")))
    return x


def _check_dtype(dtype: dtypes.DType, mode: str) -> None:
    """Floats in every mode, uint8 in UINT8_MODES, as torch's CPU kernels; anything else a TypeError."""
    if dtype.is_float or (dtype == dtypes.uint8 and mode in UINT8_MODES):
        return
    if dtype == dtypes.uint8:
        raise TypeError(
            f"interpolate: mode {mode!r} is not defined for uint8 tensors (torch's CPU rule: uint8 takes "
            f"{', '.join(UINT8_MODES)}); cast to a float"
        )
    raise TypeError(f"interpolate: not defined for {dtype.name} tensors (torch's rule); cast to a float")


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
    w0 = limn.Tensor((1 - l1).reshape(shape), dtype=x.dtype, device=x.device)
    w1 = limn.Tensor(l1.reshape(shape), dtype=x.dtype, device=x.device)
    return x.gather(axis, _index(x, axis, i0)) * w0 + x.gather(axis, _index(x, axis, i1)) * w1


def _cubic_coefficients(t: np.ndarray) -> np.ndarray:
    """Keys' cubic weights of the taps at -1, 0, 1, 2 for an offset t in [0, 1), torch's
    get_cubic_upsample_coefficients: (len(t),) -> (len(t), 4)."""
    return _keys(np.stack([t + 1, t, 1 - t, 2 - t], axis=-1), CUBIC_A)


def _cubic_sources(i: int, o: int, factor: float | None, align_corners: bool, compute) -> tuple[np.ndarray, np.ndarray]:
    """The cell left of each output cell's source and the four taps' weights, torch's bicubic (the source is
    area_pixel_compute_source_index with cubic=True: not clamped at 0)."""
    dst = np.arange(o, dtype=compute)
    if align_corners:
        src = (compute(i - 1) / compute(o - 1) if o > 1 else compute(0)) * dst
    else:
        scale = compute(1.0 / factor) if factor is not None and factor > 0 else compute(i) / compute(o)
        src = scale * (dst + compute(0.5)) - compute(0.5)
    left = np.floor(src)
    return left.astype(np.int64), _cubic_coefficients((src - left).astype(compute))


def _cubic_along(x: Tensor, axis: int, i: int, o: int, factor: float | None, align_corners: bool) -> Tensor:
    """Bicubic interpolation along axis: out[o] = sum_j w_j x[clamp(i0 - 1 + j)], torch's taps and weights."""
    compute = np.float64 if x.dtype.np == np.float64 else np.float32  # torch's opmath type
    left, weights = _cubic_sources(i, o, factor, align_corners, compute)
    cells = np.clip(left[:, None] + np.arange(-1, 3)[None, :], 0, i - 1)  # the edge cell stands in past it
    return _blend(x, axis, cells, weights)


def _filtered_along(x: Tensor, axis: int, i: int, o: int, factor, align_corners: bool, cubic: bool, antialias: bool):
    """torch's antialiased float resize along axis: out = sum_j w_j x[start + j], the filter's weights (see
    _filter_weights) in x's precision."""
    compute = np.float64 if x.dtype.np == np.float64 else np.float32  # torch's scalar_t for the weights
    starts, weights = _filter_weights(i, o, factor, align_corners, cubic, antialias, compute)
    cells = np.minimum(starts[:, None] + np.arange(weights.shape[1])[None, :], i - 1)  # past the end: weight 0
    return _blend(x, axis, cells, weights)


def _blend(x: Tensor, axis: int, cells: np.ndarray, weights: np.ndarray) -> Tensor:
    """out[.., o, ..] = sum_j weights[o, j] x[.., cells[o, j], ..]: one gather per tap (a tap whose weights
    are all 0 is left out), the weights in x's dtype."""
    out = None
    for j in range(cells.shape[1]):
        if not weights[:, j].any():
            continue
        w = limn.Tensor(_along(weights[:, j], axis, x.ndim), dtype=x.dtype, device=x.device)
        term = x.gather(axis, _index(x, axis, cells[:, j])) * w
        out = term if out is None else out + term
    return out


def _fixed_point_along(
    x: Tensor, axis: int, i: int, o: int, factor, align_corners: bool, cubic: bool, antialias: bool
) -> Tensor:
    """torch's uint8 resize along axis: out = clamp((2^(p-1) + sum_j w16_j x[start + j]) >> p, 0, 255), with
    the weights rounded to int16 at p bits of precision (UpSampleKernel's compute_indices_int16_weights_aa)."""
    starts, weights, precision = _int16_weights(i, o, factor, align_corners, cubic, antialias)
    wide = x.cast(dtypes.int32)
    total = limn.Tensor.full((), 1 << (precision - 1), dtype=dtypes.int32, device=x.device)
    for j in range(weights.shape[1]):
        if not weights[:, j].any():
            continue
        cells = np.minimum(starts + j, i - 1)  # the taps past the end have weight 0
        w = limn.Tensor(_along(weights[:, j], axis, x.ndim).astype(np.int32), device=x.device)
        total = total + wide.gather(axis, _index(wide, axis, cells)) * w
    return (total >> precision).clamp(0, 255).cast(dtypes.uint8)


def _int16_weights(
    i: int, o: int, factor, align_corners: bool, cubic: bool, antialias: bool
) -> tuple[np.ndarray, np.ndarray, int]:
    """Each output cell's first source cell, its taps' weights as int16 at `precision` bits (rounded half away
    from zero), and the precision: the most bits, up to 22, that keep 2 * the largest weight under 2^15."""
    if cubic and not antialias:  # torch's bicubic taps, those past an edge added onto the edge cell
        left, coefficients = _cubic_sources(i, o, factor, align_corners, np.float64)
        taps = np.clip(left[:, None] + np.arange(-1, 3)[None, :], 0, i - 1)  # (o, 4)
        starts = taps.min(axis=1)
        weights = np.zeros((o, 5))
        np.add.at(weights, (np.arange(o)[:, None], taps - starts[:, None]), coefficients)
    else:
        starts, weights = _filter_weights(i, o, factor, align_corners, cubic, antialias, np.float64)
    largest = weights.max()
    precision = 0
    while precision < 22 and int(0.5 + largest * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    scaled = weights * (1 << precision)
    return starts, np.trunc(scaled + np.where(scaled < 0, -0.5, 0.5)).astype(np.int64), precision


def _filter_weights(
    i: int, o: int, factor, align_corners: bool, cubic: bool, antialias: bool, compute
) -> tuple[np.ndarray, np.ndarray]:
    """torch's separable-kernel taps (_compute_indices_min_size_weights_aa): each output cell's first source
    cell and the weights of the filter (the triangle 1 - |x|, or Keys' cubic with a = -0.5) over the cells
    within its support of the cell's center, normalized to sum to 1. Antialiasing a shrink by s widens the
    support and the filter s times, so every input cell counts."""
    taps = 4 if cubic else 2
    if align_corners:
        scale = compute(i - 1) / compute(o - 1) if o > 1 else compute(0)
    else:
        scale = compute(1.0 / factor) if factor is not None and factor > 0 else compute(i) / compute(o)
    wide = antialias and scale >= 1
    support = compute(taps * 0.5) * (scale if wide else compute(1))
    invscale = compute(1) / scale if wide else compute(1)
    delta = compute(0.5 if align_corners and not antialias else 0.0)
    size = int(np.ceil(support)) * 2 + 1
    center = scale * (np.arange(o, dtype=compute) + compute(0.5) - delta)
    starts = np.maximum(np.trunc(center - support + compute(0.5) + delta), 0).astype(np.int64)  # C's cast
    ends = np.minimum(np.trunc(center + support + compute(0.5) + delta).astype(np.int64), i)
    count = np.clip(ends - starts, 0, size)
    j = np.arange(size)[None, :]
    offsets = ((j + starts[:, None]).astype(compute) - center[:, None] + compute(0.5) - delta) * invscale
    weights = (_keys(np.abs(offsets), -0.5) if cubic else np.maximum(0, 1 - np.abs(offsets))).astype(compute)
    weights = np.where(j < count[:, None], weights, compute(0))  # (o, size)
    totals = weights.sum(axis=1, keepdims=True, dtype=compute)
    return starts, np.divide(weights, totals, out=np.zeros_like(weights), where=totals != 0)


def _keys(x: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel at |x|: (a + 2)|x|^3 - (a + 3)|x|^2 + 1 within 1, a|x|^3 - 5a|x|^2 + 8a|x|
    - 4a within 2, 0 past it."""
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0))


def _along(a: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """A 1-D array shaped to lie along `axis` of an ndim-dim tensor (size 1 elsewhere)."""
    shape = [1] * ndim
    shape[axis] = len(a)
    return a.reshape(shape)


def _index(x: Tensor, axis: int, cells: np.ndarray) -> Tensor:
    """Host cell numbers along axis as a gather index of x's shape with that dim resized."""
    shape = [1] * x.ndim
    shape[axis] = len(cells)
    full = list(x.shape)
    full[axis] = len(cells)
    return limn.Tensor(cells.astype(np.int32).reshape(shape), device=x.device).expand(tuple(full))


class ResampleMixin:
    """Tensor.interpolate, torch's F.interpolate."""

    __slots__ = ()

    def interpolate(self, size: Sequence[int], mode: str = "linear", align_corners: bool = False) -> Tensor:
        """Tensor.interpolate, as tinygrad's: to `size` (the spatial shape), where mode "linear" means the
        linear mode of x's rank (linear, bilinear or trilinear); align_corners applies to it alone.

        >>> Tensor.ones((1, 1, 2, 2)).interpolate((3, 3)).shape
        (1, 1, 3, 3)
        """
        n = self.ndim - 2
        if mode == "linear":
            mode = {1: "linear", 2: "bilinear", 3: "trilinear"}.get(n, mode)
        # the module's interpolate, torch's F.interpolate, takes the tensor first: not a call of this method
        return interpolate(self, tuple(size), None, mode, align_corners if mode in RANKS else None)
