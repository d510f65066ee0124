"""Convolution, composed from movements and one matmul: conv, conv1d, conv2d, conv3d (and Tensor.conv2d).

Takes an input (B, C, *in) (or (C, *in) unbatched, as torch) and a weight (O, C / groups, *k) in torch's
layout, and gives (B, O, *out). Each kernel tap is a view of the input; one copy lays the taps out as
im2col rows and one matmul makes the output. Padding is torch's (an int, one per dim, "same", "valid")
or one (before, after) pair per side; limn.composed.functional.conv_transpose and limn.composed.functional.pooling cut
their taps with tap_cells. Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from limn import autograd, dtypes
from limn.errors import ArgumentError

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

IntOrSeq = int | Sequence[int]
# an int, one int per spatial dim, 2 per dim (per side, last dim first: (left, right, top, bottom), as
# torch's F.pad and tinygrad list them), or "same" / "valid"
Padding = int | Sequence[int] | str
Pairs = tuple[tuple[int, int], ...]  # (before, after) per spatial dim, first dim first


def as_tuple(value: IntOrSeq, n: int, what: str) -> tuple[int, ...]:
    """value as n ints: an int repeated, a sequence of n ints, or of one (repeated, as torch takes it);
    anything else is a ValueError."""
    out = (value,) * n if isinstance(value, int) else tuple(value)
    out = out * n if len(out) == 1 else out
    if len(out) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in out):
        raise ArgumentError(f"{what} must be an int or {n} ints, got {value!r}")
    return out


def padding_pairs(
    padding: Padding, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int], what: str
) -> Pairs:
    """(before, after) per spatial dim from torch's spellings of a conv's padding.

    "same" pads d (k - 1) in all, the odd cell after, as torch (stride 1 only); "valid" is no padding;
    2n ints are per side, the last dim first, as F.pad lists them.

    >>> padding_pairs("same", (4, 3), (1, 1), (1, 1), "conv2d")
    ((1, 2), (1, 1))
    >>> padding_pairs((1, 2, 3, 4), (3, 3), (1, 1), (1, 1), "conv2d")
    ((3, 4), (1, 2))
    """
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise ArgumentError(f"{what}: padding must be 'same', 'valid', an int or ints, not {padding!r}")
        if any(s != 1 for s in stride):
            raise ArgumentError(f"{what}: padding='same' needs stride 1 (torch's rule), got stride {tuple(stride)}")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in totals)
    if not isinstance(padding, int) and len(padding) == 2 * n and n > 0:
        flat = as_tuple(padding, 2 * n, f"{what} padding")
        pairs = tuple((flat[2 * i], flat[2 * i + 1]) for i in range(n))  # last dim first
        out = tuple(reversed(pairs))
    else:
        out = tuple((p, p) for p in as_tuple(padding, n, f"{what} padding"))
    if any(p < 0 for pair in out for p in pair):
        raise ArgumentError(
            f"{what}: padding must be >= 0, got {padding!r} (torch does not support negative padding); crop the "
            "input first instead, e.g. x[..., 1:-1] or x.pad with negative widths"
        )
    return out


def conv(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    groups: int = 1,
) -> Tensor:
    """N-d convolution as torch computes it: (B, C, *in) and weight (O, C / groups, *k) -> (B, O, *out).

    Each kernel tap's cells are a shifted (and for a stride, strided) view of the padded input; one copy
    lays them out as the rows of an im2col matrix (B, G, Cg k, P), and one matmul with the weight makes the
    output (B, G, Og, P) directly, register-tiled on the c device: a conv forward is that copy, the matmul and
    the bias add (with gradients wanted, one matmul over the batch: _one_matmul). Kernels of more than
    MAX_CAT_TAPS taps cut their windows with _windows instead.
    """
    n = weight.ndim - 2
    if x.ndim == n + 1 and n > 0:  # unbatched (C, *in), as torch takes it
        return conv(x.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    if x.ndim != n + 2 or groups < 1 or x.shape[1] != weight.shape[1] * groups or weight.shape[0] % groups:
        raise ArgumentError(
            f"conv: input {x.shape} does not fit weight {weight.shape} with groups={groups}: expected "
            f"(batch, {weight.shape[1] * groups}, {n} spatial dims) and out channels divisible by groups"
        )
    kernel = weight.shape[2:]
    stride, dilation = as_tuple(stride, n, "conv stride"), as_tuple(dilation, n, "conv dilation")
    if min(stride + dilation, default=1) < 1:
        raise ArgumentError(f"conv: stride {stride} and dilation {dilation} must be >= 1")
    pads = padding_pairs(padding, kernel, stride, dilation, "conv")
    padded = tuple(i + b + a for i, (b, a) in zip(x.shape[2:], pads))
    outs = tuple((i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(padded, kernel, stride, dilation))
    if min(outs) < 1:
        spans = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation))
        raise ArgumentError(
            f"conv: the padded input {padded} is smaller than the kernel {kernel} (with dilation {dilation} it "
            f"spans {spans}), so the output would be empty (torch raises too); pad the input or use a smaller kernel"
        )
    b, c, o, g = x.shape[0], x.shape[1], weight.shape[0], groups
    cg, og = c // g, o // g
    taps, cells = cg * math.prod(kernel), math.prod(outs)
    if 1 < math.prod(kernel) <= MAX_CAT_TAPS and g == 1 and _wants_gradients(x, weight):
        y = _one_matmul(x, weight, kernel, stride, pads, dilation, outs)  # (B, O, P): the same sums
    elif math.prod(kernel) <= MAX_CAT_TAPS:
        cols = _tap_rows(x, kernel, stride, pads, dilation, outs)  # (B, C, k1 ... kn, P): one copy
        cols = cols.reshape(b, g, taps, cells)  # (B, G, Cg k, P)
        y = weight.reshape(g, og, taps) @ cols  # (G, Og, Cg k) @ (B, G, Cg k, P) -> (B, G, Og, P)
    else:
        x = x.pad_constant(((0, 0), (0, 0), *pads))
        win = _windows(x, kernel, stride, dilation, outs)  # (B, C, k1, o1, ..., kn, on)
        win = win.reshape((b, g, cg) + win.shape[2:])  # (B, G, Cg, k1, o1, ..., kn, on)
        k_axes = tuple(3 + 2 * d for d in range(n))
        o_axes = tuple(4 + 2 * d for d in range(n))
        # im2col: every window as one row, so the product is a plain matmul, which the c device tiles
        cols = win.permute((0, 1) + o_axes + (2,) + k_axes).reshape(b, g, cells, taps)  # (B, G, P, Cg k): a copy
        y = weight.reshape(g, og, taps) @ cols.transpose(-1, -2)  # (G, Og, Cg k) @ (B, G, Cg k, P)
    y = y.reshape((b, o) + outs)  # (B, O, *out): a view, no copy
    if bias is not None:
        y = y + bias.reshape((o,) + (1,) * n)
    return y


def _wants_gradients(x: Tensor, weight: Tensor) -> bool:
    return autograd.is_grad_enabled() and (x.requires_grad or weight.requires_grad)


def _one_matmul(x, weight, kernel, stride, pads, dilation, outs) -> Tensor:
    """An ungrouped conv as one matmul over the whole batch: (O, C k) @ (C k, B P), from im2col rows copied
    as (C, k, B, P), for a conv whose gradients are wanted. Its weight gradient is then a matmul with one
    reduce axis of B P cells; with a (B, C k, P) im2col it reduced over the batch and the cells both, a nest
    the c device ran serially and untiled: a padded 3 x 3 conv of 8 x 32 x 32 x 32, forward and backward, took
    86 ms that way and 10.5 here. Its forward alone is about 25% slower than W @ cols per batch (the copy
    back to (B, O, P)), so a conv without gradients keeps that form; both add the same products in one order."""
    b, o, cells = x.shape[0], weight.shape[0], math.prod(outs)
    cols = _tap_rows(x.transpose(0, 1), kernel, stride, pads, dilation, outs, taps_axis=1)  # (C, T, B, P)
    taps = cols.shape[0] * cols.shape[1]
    dtype = dtypes.promote(weight.dtype, x.dtype)
    w, rows = weight.reshape(o, taps, 1).cast(dtype.compute), cols.reshape(1, taps, b * cells).cast(dtype.compute)
    # (O, C k, 1) * (1, C k, B P), summed over C k -> (O, B P): W @ cols, with the sum over the middle axis so
    # that the gradients come out in the operands' own layouts, (C k, B P) and (O, C k), not transposed (the
    # matmul's order, (O, B P, C k), gave cols' as (B P, C k), and the taps were then copied out of it across
    # its rows: 1.5 ms of a 3 x 3 conv's 8 ms forward and backward)
    y = (w * rows).sum(1).cast(dtype)
    return y.reshape(o, b, cells).transpose(0, 1)  # (O, B, P) -> (B, O, P): copied where it is read


# Up to this many taps (3 x 3 x 3) the im2col rows are one cat of shifted views, which the c device copies in
# one vectorized pass; the cat's kernel holds a load per tap per piece, so its source grows as taps**2, and
# larger kernels (7 x 7 and up) cut their windows with _windows instead.
MAX_CAT_TAPS = 27


def _tap_rows(
    x: Tensor,
    kernel: Sequence[int],
    stride: Sequence[int],
    pads: Pairs,
    dilation: Sequence[int],
    outs: Sequence[int],
    taps_axis: int = 2,
) -> Tensor:
    """(B, C, *i) -> (B, C, T, P), T = prod(kernel) taps in row-major order, P = prod(outs):
    [b, c, t, p] holds the cell of the padded x that tap t reads for output cell p. Each tap is a view
    of x (see tap_cells), and the cat of them is the one copy. taps_axis=1 puts the taps second instead:
    (B, T, C, P)."""
    b, c, n = x.shape[0], x.shape[1], len(kernel)
    taps = list(itertools.product(*(range(k) for k in kernel)))
    x = x.unsqueeze(taps_axis)  # (B, C, 1, *i) or (B, 1, C, *i): the taps' axis, each tap's pad stretching it to T
    cols = None
    for t, tap in enumerate(taps):
        # one pad per tap does the conv's padding and places the tap at row t of the T taps (what a cat of
        # the taps along that axis would pad them with), so the taps add up to the im2col rows
        view, widths = x, [(0, 0), (0, 0), (0, 0)]
        widths[taps_axis] = (t, len(taps) - 1 - t)
        for ax in range(n):
            first = tap[ax] * dilation[ax] - pads[ax][0]  # where the tap's first output cell reads in x
            view, width = tap_cells(view, 3 + ax, first, stride[ax], outs[ax])  # (.., o - padding, ..)
            widths.append(width)
        # padded last: a reshape of a padded view would be a copy, and each strided dim reshapes
        row = view.pad_constant(tuple(widths))  # (B, C, T, *o), zero off row t
        cols = row if cols is None else cols + row
    shape = (b, c, len(taps), math.prod(outs)) if taps_axis == 2 else (b, len(taps), c, math.prod(outs))
    if len(taps) == 1:  # a 1 x 1 kernel: the matmul reads x through the view, no copy
        return cols.reshape(shape)
    # stored, so the reshape to P cells is a view of the copy, not a reshape of each shifted view
    return cols.contiguous().reshape(shape)  # (B, C, T, P) or (B, T, C, P)


def tap_cells(x: Tensor, axis: int, first: int, step: int, count: int) -> tuple[Tensor, tuple[int, int]]:
    """Of cells first, first + step, ... (count of them) of x along axis, those inside x, and how many fall
    before and after it (the conv's padding: the caller pads them). The cells inside are a shrink of x, and
    for step > 1 one column of a reshape into rows of `step` cells, the column chosen so every row lies
    inside x: a view of x, where x is one."""
    size = x.shape[axis]
    lo = min(count, max(0, -(first // step)))  # the first output cell that reads inside x
    hi = max(lo, min(count, -((first - size) // step)))  # one past the last
    start, cells = first + lo * step, hi - lo
    box = [(0, d) for d in x.shape]
    if cells == 0:  # the tap reads only padding
        box[axis] = (0, 0)
        x = x.shrink(tuple(box))
    elif step == 1:
        box[axis] = (start, start + cells)
        x = x.shrink(tuple(box))  # (.., cells, ..)
    else:
        column = max(0, start + cells * step - size)  # the last row must end inside x
        if column > start:  # it cannot start inside x too: pad x's end (the reshape below then copies)
            widths = [(0, 0)] * x.ndim
            widths[axis] = (0, column - start)
            x, column = x.pad_constant(tuple(widths)), start
        box[axis] = (start - column, start - column + cells * step)
        x = _split(x.shrink(tuple(box)), axis, (cells, step))  # (.., cells, step, ..)
        box = [(0, d) for d in x.shape]
        box[axis + 1] = (column, column + 1)
        x = _split(x.shrink(tuple(box)), axis + 1, ())  # (.., cells, ..): each row's cell `column`
    return x, (lo, count - hi)


def _windows(
    x: Tensor, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int], outs: Sequence[int]
) -> Tensor:
    """(B, C, *i) -> (B, C, k1, o1, ..., kn, on): [b, c, .., kk, oo, ..] holds x[b, c, .., oo s + kk d, ..].

    A dim whose windows do not overlap (k d <= s) is cut as rows of length s: (o, s) keeps its first k d
    cells as (k, d), and each tap is column 0 of its d. Overlapping windows cannot be strides of x, so the
    input is repeated e times along that dim (one copy, made by a reshape no View can say) and read as k
    rows of length r = i + d: consecutive rows start d apart, and row kk read from oo s is x[oo s + kk d].
    """
    n = len(kernel)
    dilation = [1 if k == 1 else d for k, d in zip(kernel, dilation)]  # one tap: its spacing is moot
    overlap = [k * d > s for k, s, d in zip(kernel, stride, dilation)]
    # rows of length r = i + d, so each row starts d later in x; they hold the o s cells a tap walks, since
    # o s <= i - d (k - 1) - 1 + s, which is at most i + d when windows overlap (s < k d)
    rows = [i + d for i, d in zip(x.shape[2:], dilation)]
    # the non-overlapping dims need o s cells to cut rows from; the extra ones are never read
    extra = [0 if ov else max(0, o * s - i) for ov, o, s, i in zip(overlap, outs, stride, x.shape[2:])]
    if any(extra):
        x = x.pad_constant(((0, 0), (0, 0), *((0, e) for e in extra)))
    if any(overlap):
        lead, spatial = x.shape[:2], x.shape[2:]
        reps = [math.ceil(k * r / i) if ov else 1 for k, r, i, ov in zip(kernel, rows, spatial, overlap)]
        x = x.reshape(lead + _interleave([1] * n, spatial))  # (B, C, 1, i1, 1, i2, ...)
        x = x.expand(lead + _interleave(reps, spatial))  # (B, C, e1, i1, e2, i2, ...)
        x = x.reshape(lead + tuple(e * i for e, i in zip(reps, spatial)))  # (B, C, e1 i1, ...): the copy
    for ax in reversed(range(n)):  # from the last dim, so the dims before `ax` keep their positions
        p, k, s, d, o = 2 + ax, kernel[ax], stride[ax], dilation[ax], outs[ax]
        if overlap[ax]:
            x = _split(_take(x, p, k * rows[ax]), p, (k, rows[ax]))  # (.., k, r, ..)
            x = _split(_take(x, p + 1, o * s), p + 1, (o, s))  # (.., k, o, s, ..)
            x = _split(_take(x, p + 2, 1), p + 2, ())  # (.., k, o, ..): the cell at oo s
        else:
            x = _split(_take(x, p, o * s), p, (o, s))  # (.., o, s, ..)
            x = _split(_take(x, p + 1, k * d), p + 1, (k, d))  # (.., o, k, d, ..)
            x = _split(_take(x, p + 2, 1), p + 2, ())  # (.., o, k, ..): the cell at oo s + kk d
            x = x.transpose(p, p + 1)  # (.., k, o, ..)
    return x


def _interleave(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    return tuple(v for pair in zip(a, b) for v in pair)


def _take(x: Tensor, axis: int, length: int) -> Tensor:
    """The first `length` cells of `axis`."""
    return x.shrink(tuple((0, length) if d == axis else (0, s) for d, s in enumerate(x.shape)))


def _split(x: Tensor, axis: int, sizes: tuple[int, ...]) -> Tensor:
    """Reshapes dim `axis` into `sizes` (their product is its size; () drops a size-1 dim)."""
    return x.reshape(x.shape[:axis] + sizes + x.shape[axis + 1 :])


def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: Padding = 0,
    dilation: IntOrSeq = 1,
    groups: int = 1,
) -> Tensor:
    """torch.nn.functional.conv2d (and Tensor.conv2d): (B, C, H, W) and weight (O, C / groups, kH, kW) ->
    (B, O, H_out, W_out), H_out = (H + padding - dilation (kH - 1) - 1) // stride + 1. padding may also be 4
    ints, one per side (left, right, top, bottom), as tinygrad's conv2d takes it.

    >>> x = Tensor.ones((1, 2, 4, 4))
    >>> x.conv2d(Tensor.ones((3, 2, 3, 3)), padding=1).shape
    (1, 3, 4, 4)
    """
    _check_rank(weight, 4, "conv2d")
    return conv(input, weight, bias, stride, padding, dilation, groups)


class ConvolutionMixin:
    """Tensor's convolutions: conv2d takes any number of spatial dims (tinygrad's rule), and conv1d and conv3d are
    torch's; the module-level functions of the same names are torch's F functions, for 2 spatial dims exactly."""

    __slots__ = ()

    def conv1d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        stride: IntOrSeq = 1,
        padding: Padding = 0,
        dilation: IntOrSeq = 1,
        groups: int = 1,
    ) -> Tensor:
        """torch.nn.functional.conv1d: (B, C, L) and weight (O, C / groups, k) -> (B, O, L_out)."""
        _check_rank(weight, 3, "conv1d")
        return conv(self, weight, bias, stride, padding, dilation, groups)

    def conv3d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        stride: IntOrSeq = 1,
        padding: Padding = 0,
        dilation: IntOrSeq = 1,
        groups: int = 1,
    ) -> Tensor:
        """torch.nn.functional.conv3d: (B, C, D, H, W) and weight (O, C / groups, kD, kH, kW) -> (B, O, D_out,
        H_out, W_out), each dim sized as in conv2d."""
        _check_rank(weight, 5, "conv3d")
        return conv(self, weight, bias, stride, padding, dilation, groups)

    def conv2d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        stride: IntOrSeq = 1,
        padding: Padding = 0,
        dilation: IntOrSeq = 1,
        groups: int = 1,
    ) -> Tensor:
        """Tensor.conv2d, as tinygrad's: a conv over as many spatial dims as the weight has (weight.ndim - 2),
        so x (N, C, L) with a weight (O, C, k) is a conv1d and x (N, C, D, H, W) with (O, C, kD, kH, kW) a conv3d;
        torch's arguments and padding spellings otherwise (limn.nn.conv2d keeps torch's 4-d rank check).

        >>> Tensor.ones((1, 2, 5)).conv2d(Tensor.ones((3, 2, 3)), padding=1).shape
        (1, 3, 5)
        """
        if weight.ndim < 3:
            raise ArgumentError(
                f"conv2d: the weight must have 3 or more dims (out, in / groups, *kernel), got {weight.shape}"
            )
        return conv(self, weight, bias, stride, padding, dilation, groups)


def _check_rank(weight: Tensor, ndim: int, what: str) -> None:
    if weight.ndim != ndim:
        raise ArgumentError(f"{what}: the weight must have {ndim} dims (out, in / groups, *kernel), got {weight.shape}")
