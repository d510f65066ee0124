"""Pooling, composed from views and selects: max, avg and power-average pools in 1, 2 and 3 dims.

Takes (N, C, *in) or (C, *in) and gives (N, C, *out), as torch.nn.functional's pools. A window is a box, so
pools go one spatial dim at a time, the last first. A max pool finds each window's cell with torch's own loop
rule over its taps (views of a detached copy: a strided shrink, or a gather where the starts are uneven) and
gathers those cells; an average pool gathers every window's cells along a dim at once, adds and divides.
The adaptive pools (limn.composed.functional.adaptive_pooling) use the same windows.
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.composed.functional.convolution import as_tuple, tap_cells
from limn.errors import ArgumentError

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

IntOrSeq = int | Sequence[int]
OutputSize = int | None | Sequence[int | None]


@dataclass(frozen=True)
class Windows:
    """The windows of a pool along one dim of `size` cells: window i reads cells starts[i] + j * dilation for
    j < lengths[i], those inside [0, size); `taps` is the longest window's length."""

    size: int
    starts: np.ndarray  # (out,) int
    lengths: np.ndarray  # (out,) int
    dilation: int = 1

    @property
    def taps(self) -> int:
        return int(self.lengths.max()) if len(self.lengths) else 0

    def step(self) -> int | None:
        """The spacing of the starts when they are evenly spaced (so each tap is a strided view), else None."""
        gaps = np.diff(self.starts)
        if len(gaps) == 0:
            return 1
        return int(gaps[0]) if gaps[0] >= 1 and np.all(gaps == gaps[0]) else None


def sliding(size: int, kernel: int, stride: int, pad: tuple[int, int], dilation: int, ceil_mode: bool) -> Windows:
    """torch's windows for kernel, stride, (before, after) padding and dilation: window i starts at
    i stride - before, and the count is torch's pooling_output_shape (in ceil mode the last window must
    start inside the input or its left padding)."""
    before, after = pad
    reach = size + before + after - dilation * (kernel - 1) - 1
    out = (reach + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + before:
        out -= 1
    starts = np.arange(max(out, 0)) * stride - before
    return Windows(size, starts, np.full(max(out, 0), kernel), dilation)


def adaptive(size: int, out: int) -> Windows:
    """torch's adaptive windows: window i covers [floor(i size / out), ceil((i + 1) size / out))."""
    i = np.arange(out)
    starts = (i * size) // out
    ends = -((-(i + 1) * size) // out)  # ceil((i + 1) size / out)
    return Windows(size, starts, ends - starts)


# ---- the taps of one dim ----


def _tap(x: Tensor, axis: int, win: Windows, j: int) -> tuple[Tensor, Tensor | None]:
    """Tap j of every window along axis: its values (x's size along axis becomes the window count), and
    whether each window has that cell (a bool tensor broadcasting against the values; None when all do)."""
    out = len(win.starts)
    pos = win.starts + j * win.dilation
    has = (j < win.lengths) & (pos >= 0) & (pos < win.size)
    step = win.step()
    if step is not None:  # evenly spaced: a strided view of x, with the cells outside x padded in
        view, (lo, hi) = tap_cells(x, axis, int(pos[0]) if out else 0, step, out)
        widths = [(0, 0)] * x.ndim
        widths[axis] = (lo, hi)
        value = view.pad_constant(widths)
    else:  # adaptive windows: a gather of each window's cell (clamped; `has` masks the clamped ones)
        idx = limn.Tensor(_along(np.clip(pos, 0, win.size - 1).astype(np.int32), axis, x.ndim), device=x.device)
        full = list(x.shape)
        full[axis] = out
        value = x.gather(axis, idx.expand(tuple(full)))
    return value, None if has.all() else limn.Tensor(_along(has, axis, x.ndim), device=x.device)


def _along(a: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """A 1-D array shaped to lie along `axis` of an ndim-dim tensor (size 1 elsewhere)."""
    shape = [1] * ndim
    shape[axis] = len(a)
    return a.reshape(shape)


def _max_along(x: Tensor, axis: int, win: Windows, index: Tensor) -> tuple[Tensor, Tensor]:
    """The max over each window along axis, chosen as torch's loop chooses it: a tap replaces the best so far
    when it is larger or NaN, so ties keep the first and NaNs the last, and a window of -infs keeps its first
    cell. Gives the best values and the chosen cells' `index` entries (their flat positions in the input)."""
    best = chosen = started = None  # started: which windows have met a cell yet (None: all of them)
    for j in range(win.taps):
        value, has = _tap(x, axis, win, j)
        carried = _tap(index, axis, win, j)[0]
        if best is None:
            best, started, chosen = value, has, carried
            continue
        take = value.gt(best).logical_or(value.isnan())  # the loop's (val > max) || isnan(val)
        if started is not None:
            take = take.logical_or(started.logical_not())  # a window's first cell is taken whatever it holds
        if has is not None:
            take = take.logical_and(has)
        best = take.where(value, best)
        chosen = take.where(carried, chosen)
        if started is not None:
            started = None if has is None else started.logical_or(has)
    return best, chosen


def _sum_along(x: Tensor, axis: int, win: Windows) -> Tensor:
    """The sum over each window along axis (cells outside x add nothing). Every window's cells come from one
    gather, (.., L, ..) -> (.., out taps, ..), so the gradient is one scatter that adds what each cell fed."""
    out, taps = len(win.starts), win.taps
    pos = win.starts[:, None] + np.arange(taps)[None, :] * win.dilation  # (out, taps)
    has = (np.arange(taps)[None, :] < win.lengths[:, None]) & (pos >= 0) & (pos < win.size)
    idx = limn.Tensor(_along(np.clip(pos, 0, win.size - 1).reshape(-1).astype(np.int32), axis, x.ndim), device=x.device)
    full = list(x.shape)
    full[axis] = out * taps
    cells = x.gather(axis, idx.expand(tuple(full)))  # (.., out taps, ..)
    cells = cells.reshape(x.shape[:axis] + (out, taps) + x.shape[axis + 1 :])  # (.., out, taps, ..)
    if not has.all():
        mask = limn.Tensor(has.reshape((1,) * axis + (out, taps) + (1,) * (x.ndim - axis - 1)), device=x.device)
        cells = mask.where(cells, 0.0)
    return cells.sum(axis + 1)  # (.., out, ..)


# ---- checks shared by the pools ----


def _spatial(x: Tensor, n: int, what: str) -> Tensor:
    """x as (N, C, *in): an unbatched (C, *in) gains a batch dim. Empty dims other than the batch raise."""
    if x.ndim not in (n + 1, n + 2):
        raise ArgumentError(f"{what}: expects a {n + 1}-d (C, *in) or {n + 2}-d (N, C, *in) input, got shape {x.shape}")
    batched = x if x.ndim == n + 2 else x.unsqueeze(0)
    if 0 in batched.shape[1:]:
        raise ArgumentError(f"{what}: only the batch dim may be empty (torch's rule), got shape {x.shape}")
    return batched


def _pads(padding: IntOrSeq, kernel: Sequence[int], what: str) -> tuple[tuple[int, int], ...]:
    """(before, after) per dim from an int, one per dim, or 2 per dim (per side, the last dim first, as F.pad
    and tinygrad list them); each at most half its kernel, as torch requires."""
    n = len(kernel)
    if not isinstance(padding, int) and len(padding) == 2 * n:
        flat = as_tuple(padding, 2 * n, f"{what} padding")
        pairs = tuple(reversed([(flat[2 * i], flat[2 * i + 1]) for i in range(n)]))
    else:
        pairs = tuple((p, p) for p in as_tuple(padding, n, f"{what} padding"))
    for (b, a), k in zip(pairs, kernel):
        if min(b, a) < 0 or max(b, a) > k // 2:
            raise ArgumentError(f"{what}: padding {padding} must be >= 0 and at most half the kernel {tuple(kernel)}")
    return pairs


def _sliding_windows(
    x: Tensor, n: int, kernel_size, stride, padding, dilation, ceil_mode: bool, what: str
) -> list[Windows]:
    kernel = as_tuple(kernel_size, n, f"{what} kernel_size")
    strides = kernel if stride is None or stride == () or stride == [] else as_tuple(stride, n, f"{what} stride")
    dilations = as_tuple(dilation, n, f"{what} dilation")
    if min(kernel + strides + dilations) < 1:
        raise ArgumentError(f"{what}: kernel_size {kernel}, stride {strides} and dilation {dilations} must be >= 1")
    pads = _pads(padding, kernel, what)
    wins = [
        sliding(size, k, s, p, d, ceil_mode) for size, k, s, p, d in zip(x.shape[2:], kernel, strides, pads, dilations)
    ]
    outs = tuple(len(w.starts) for w in wins)
    if min(outs) < 1:
        raise ArgumentError(
            f"{what}: input {x.shape} with kernel {kernel}, stride {strides}, padding {padding} and dilation "
            f"{dilations} gives output size {outs}, which is too small (torch raises too)"
        )
    return wins


def _check_dtype(x: Tensor, floats_only: bool, what: str) -> None:
    if x.dtype == dtypes.bool_ or (floats_only and not x.dtype.is_float):
        allowed = "float" if floats_only else "float or int"
        raise TypeError(f"{what}: not defined for {x.dtype.name} tensors (torch's rule); pass a {allowed} tensor")


# ---- max pools ----


def _max_pool(x: Tensor, wins: list[Windows], return_indices: bool, unbatched: bool):
    """The max pool of (N, C, *in) over `wins`, one per spatial dim. The cells are chosen on a detached copy,
    and the output is a gather of them, so the gradient is one scatter into the chosen cells (torch's
    max_pool backward) and the value the cell itself (-0.0 and NaN included)."""
    spatial = x.shape[2:]
    flat = np.arange(int(np.prod(spatial))).reshape((1, 1) + spatial).astype(np.int32)
    best, index = x.detach(), limn.Tensor(flat, device=x.device).expand(x.shape)  # each cell's flat position
    for d in reversed(range(len(wins))):  # the last dim first: a row's first max, then the first row holding one
        best, index = _max_along(best, 2 + d, wins[d], index)
    n, c = x.shape[:2]
    cells, chosen = int(np.prod(spatial)), int(np.prod(index.shape[2:]))
    out = x.reshape(n, c, cells).gather(2, index.reshape(n, c, chosen)).reshape(index.shape)  # (N, C, *out)
    if unbatched:
        out, index = out.squeeze(0), index.squeeze(0)
    return (out, index) if return_indices else out


def max_pool(
    input: Tensor,
    n: int,
    kernel_size: IntOrSeq,
    stride: IntOrSeq | None = None,
    padding: IntOrSeq = 0,
    dilation: IntOrSeq = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """The max pool over n spatial dims (max_pool1d/2d/3d call it with n = 1, 2, 3)."""
    what = f"max_pool{n}d"
    _check_dtype(input, False, what)
    x = _spatial(input, n, what)
    wins = _sliding_windows(x, n, kernel_size, stride, padding, dilation, ceil_mode, what)
    return _max_pool(x, wins, return_indices, x is not input)


def max_pool2d(
    input: Tensor,
    kernel_size: IntOrSeq = (2, 2),
    stride: IntOrSeq | None = None,
    padding: IntOrSeq = 0,
    dilation: IntOrSeq = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """torch.nn.functional.max_pool2d (and Tensor.max_pool2d, whose kernel_size defaults to (2, 2) as
    tinygrad's): (N, C, H, W) -> (N, C, H_out, W_out) with H_out = (H + 2 padding - dilation (k - 1) - 1)
    // stride + 1 (rounded up with ceil_mode); stride defaults to the kernel. The padding reads as -inf.

    The gradient goes to one cell per window, the one torch's loop picks: the first maximum in row-major
    order, or the last NaN. return_indices also gives that cell's flat index in its (H, W) plane (int32:
    torch's are int64). Ints pool too; bools raise, as in torch.

    >>> Tensor([[[[1.0, 2.0], [4.0, 3.0]]]]).max_pool2d(kernel_size=2).tolist()
    [[[[4.0]]]]
    """
    return max_pool(input, 2, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _method_dims(kernel_size: IntOrSeq) -> int:
    """The spatial dims a pool method works over: kernel_size's length, 2 for an int (tinygrad's rule)."""
    return 2 if isinstance(kernel_size, int) else max(1, len(kernel_size))


# ---- average pools ----


def avg_pool(
    input: Tensor,
    n: int,
    kernel_size: IntOrSeq,
    stride: IntOrSeq | None = None,
    padding: IntOrSeq = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """The average pool over n spatial dims (avg_pool1d/2d/3d call it with n = 1, 2, 3)."""
    what = f"avg_pool{n}d"
    _check_dtype(input, True, what)
    if divisor_override is not None and (not isinstance(divisor_override, int) or divisor_override == 0):
        raise ArgumentError(f"{what}: divisor_override must be a nonzero int, got {divisor_override!r}")
    x = _spatial(input, n, what)
    wins = _sliding_windows(x, n, kernel_size, stride, padding, 1, ceil_mode, what)
    pads = _pads(padding, as_tuple(kernel_size, n, f"{what} kernel_size"), what)
    # the divisor, torch's: the window clipped to the padded input (count_include_pad) or to the input itself
    divisor = np.ones(())
    for win, (_, after) in zip(wins, pads):
        ends = win.starts + win.lengths
        if count_include_pad:
            counts = np.minimum(ends, win.size + after) - win.starts
        else:
            counts = np.minimum(ends, win.size) - np.maximum(win.starts, 0)
        divisor = np.multiply.outer(divisor, counts)
    if divisor_override is not None:
        divisor = np.full(divisor.shape, divisor_override)
    return _average(x, wins, divisor, x is not input)


def _average(x: Tensor, wins: list[Windows], divisor: np.ndarray, unbatched: bool) -> Tensor:
    """The windows' sums over `divisor` (an array of the output's spatial shape), summed in float32 for the
    half widths and rounded once, as torch accumulates."""
    dtype = x.dtype
    total = x.cast(dtype.compute)
    for d in reversed(range(len(wins))):
        total = _sum_along(total, 2 + d, wins[d])
    out = (total / limn.Tensor(divisor.astype(np.float64), dtype=dtype.compute, device=x.device)).cast(dtype)
    return out.squeeze(0) if unbatched else out


def avg_pool2d(
    input: Tensor,
    kernel_size: IntOrSeq = (2, 2),
    stride: IntOrSeq | None = None,
    padding: IntOrSeq = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """torch.nn.functional.avg_pool2d (and Tensor.avg_pool2d, kernel_size (2, 2) by default): each window's
    sum over its size, sized as in max_pool2d. The size counts the padding the window covers when
    count_include_pad (torch's default), but never the cells past it that ceil_mode adds; divisor_override
    replaces it. Floats only, as torch.

    >>> Tensor([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]]).avg_pool2d(kernel_size=2, ceil_mode=True).tolist()
    [[[[3.0, 4.5]]]]
    """
    return avg_pool(input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


class PoolingMixin:
    """Tensor's max and average pools, by conv2d's rules: max_pool2d and avg_pool2d take any number of spatial dims,
    read from kernel_size (tinygrad's rule); the module-level functions of the same names are torch's F
    functions, for 2 spatial dims exactly."""

    __slots__ = ()

    def max_pool1d(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        """torch.nn.functional.max_pool1d: (N, C, L) -> (N, C, L_out); see max_pool2d."""
        return max_pool(self, 1, kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    def max_pool3d(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        """torch.nn.functional.max_pool3d: (N, C, D, H, W) -> (N, C, D_out, H_out, W_out); see max_pool2d."""
        return max_pool(self, 3, kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    def max_pool2d(
        self,
        kernel_size: IntOrSeq = (2, 2),
        stride: IntOrSeq | None = None,
        padding: IntOrSeq = 0,
        dilation: IntOrSeq = 1,
        ceil_mode: bool = False,
        return_indices: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Tensor.max_pool2d, as tinygrad's: a max pool over as many spatial dims as kernel_size has ints (an int
        kernel is 2-d), so kernel_size=(3,) pools (N, C, L) and (2, 2, 2) pools (N, C, D, H, W); otherwise
        max_pool2d's arguments and rules (limn.nn.max_pool2d keeps torch's 2-d rank check).

        >>> Tensor.ones((1, 1, 6)).max_pool2d((3,)).shape
        (1, 1, 2)
        """
        return max_pool(
            self, _method_dims(kernel_size), kernel_size, stride, padding, dilation, ceil_mode, return_indices
        )

    def avg_pool1d(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        """torch.nn.functional.avg_pool1d: (N, C, L) -> (N, C, L_out); see avg_pool2d."""
        return avg_pool(self, 1, kernel_size, stride, padding, ceil_mode, count_include_pad)

    def avg_pool3d(
        self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
    ):
        """torch.nn.functional.avg_pool3d: (N, C, D, H, W) -> (N, C, D_out, H_out, W_out); see avg_pool2d."""
        return avg_pool(self, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)

    def avg_pool2d(
        self,
        kernel_size: IntOrSeq = (2, 2),
        stride: IntOrSeq | None = None,
        padding: IntOrSeq = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> Tensor:
        """Tensor.avg_pool2d, as tinygrad's: an average pool over as many spatial dims as kernel_size has ints
        (an int kernel is 2-d), so kernel_size=(8, 8, 8) pools (N, C, D, H, W); otherwise avg_pool2d's arguments
        and rules (limn.nn.avg_pool2d keeps torch's 2-d rank check).

        >>> Tensor.ones((1, 1, 4, 4, 4)).avg_pool2d((2, 2, 2)).shape
        (1, 1, 2, 2, 2)
        """
        n = _method_dims(kernel_size)
        return avg_pool(self, n, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


# ---- power-average pools ----


def lp_pool(input: Tensor, n: int, norm_type: float, kernel_size: IntOrSeq, stride=None, ceil_mode: bool = False):
    """The power-average pool over n spatial dims, torch's formula step for step (so its gradient is torch's):
    lp_pool: (sign(a) relu(|a|) prod(k)) ** (1 / p), a the average pool of x ** p without padding."""
    kernel = as_tuple(kernel_size, n, f"lp_pool{n}d kernel_size")
    out = avg_pool(input.pow(norm_type), n, kernel_size, stride, 0, ceil_mode)
    return (out.sign() * out.abs().relu() * int(np.prod(kernel))).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: IntOrSeq, stride=None, ceil_mode: bool = False):
    """torch.nn.functional.lp_pool1d: (N, C, L) -> (N, C, L_out), each window's p-norm."""
    return lp_pool(input, 1, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: IntOrSeq, stride=None, ceil_mode: bool = False):
    """torch.nn.functional.lp_pool2d: (N, C, H, W) -> (N, C, H_out, W_out), each window's p-norm
    (sum x ** p) ** (1 / p), sized as avg_pool2d without padding.

    >>> lp_pool2d(Tensor([[[[3.0, 4.0]]]]), 2, (1, 2)).tolist()
    [[[[5.0]]]]
    """
    return lp_pool(input, 2, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: IntOrSeq, stride=None, ceil_mode: bool = False):
    """torch.nn.functional.lp_pool3d: (N, C, D, H, W) -> (N, C, *out), each window's p-norm."""
    return lp_pool(input, 3, norm_type, kernel_size, stride, ceil_mode)
