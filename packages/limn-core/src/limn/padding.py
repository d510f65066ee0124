"""Padding by torch's modes: constant, reflect, replicate, circular (torch.nn.functional.pad).

Takes a tensor and widths, (before, after) cells per dim, and gives the padded tensor. A constant pad is the
PAD movement (Tensor.pad); the other modes read every cell of the result from a cell of the input, so each
padded dim is one GATHER with host-made indices, whose gradient (a SCATTER) adds up the cells a source feeds.
Pipeline: **tensor (composed ops)** -> graph (VIEW, GATHER) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from limn.primitives import Scalar, Tensor

MODES = ("constant", "reflect", "replicate", "circular")
Widths = Sequence[tuple[int, int]]  # (before, after) per dim, first dim first


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: Scalar | None = None) -> Tensor:
    """torch.nn.functional.pad: `pad` lists (before, after) widths from the last dim backwards, as torch
    ((left, right, top, bottom) pads W, then H). A negative width in constant mode crops, as torch.

    >>> x = Tensor([[1.0, 2.0, 3.0]])
    >>> pad(x, (2, 1), mode="reflect").tolist(), pad(x, (1, 1), value=9.0).tolist()
    ([[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]], [[9.0, 1.0, 2.0, 3.0, 9.0]])
    """
    pad = tuple(pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim or not all(isinstance(p, int) for p in pad):
        raise ValueError(
            f"pad: needs an even number of ints, two per dim for at most {input.ndim} dims (from the last), got {pad}"
        )
    pairs = [(pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]  # last dim first
    widths = [(0, 0)] * (input.ndim - len(pairs)) + list(reversed(pairs))
    return pad_widths(input, widths, mode, value)


def pad_widths(x: Tensor, widths: Widths, mode: str = "constant", value: Scalar | None = None) -> Tensor:
    """x padded by (before, after) cells per dim (first dim first) in torch's `mode`."""
    if mode not in MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode != "constant" and value not in (None, 0, 0.0):
        raise ValueError(f"pad: a fill value ({value}) only goes with mode='constant', not {mode!r}")
    if mode == "constant":
        crop = [(max(0, -b), n - max(0, -a)) for (b, a), n in zip(widths, x.shape)]
        if any(lo > hi for lo, hi in crop):
            raise ValueError(f"pad: negative widths {list(widths)} crop more than the shape {x.shape} holds")
        x = x.shrink(crop)
        return x.pad([(max(0, b), max(0, a)) for b, a in widths], 0 if value is None else value)
    for axis, (before, after) in enumerate(widths):
        if before or after:
            x = x.gather(_source_index(x, axis, before, after, mode), axis)
    return x


def _source_index(x: Tensor, axis: int, before: int, after: int, mode: str) -> Tensor:
    """The int indices, expanded to the padded shape, of the cell of x each padded cell along axis copies."""
    n = x.shape[axis]
    limit = n - 1 if mode == "reflect" else n  # reflect leaves the edge cell out, so it mirrors n - 1 cells
    if before < 0 or after < 0 or (mode != "replicate" and max(before, after) > limit) or n == 0:
        raise ValueError(
            f"pad: mode {mode!r} pads dim {axis} of size {n} by ({before}, {after}); each width must be "
            f"non-negative and {'below' if mode == 'reflect' else 'at most'} the size, as torch requires"
        )
    pos = np.arange(-before, n + after)  # the padded cells' positions in x's coordinates
    if mode == "reflect":
        period = 2 * (n - 1) if n > 1 else 1
        pos = np.abs(pos) % period
        pos = np.where(pos >= n, period - pos, pos)  # i -> |i| folded back at the far edge: ... 2 1 [0 1 2] 1 0 ...
    elif mode == "replicate":
        pos = np.clip(pos, 0, n - 1)
    else:
        pos = pos % n  # circular: the far edge continues from the near one
    shape = [1] * x.ndim
    shape[axis] = len(pos)
    idx = Tensor(pos.astype(np.int32).reshape(shape), device=x.device)
    full = list(x.shape)
    full[axis] = len(pos)
    return idx.expand(tuple(full))
