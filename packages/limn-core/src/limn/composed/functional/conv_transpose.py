"""Transposed convolution (the gradient of a conv with respect to its input, as a layer): conv_transpose1d/2d/3d.

Takes (B, C_in, *in) and a weight (C_in, C_out / groups, *k) in torch's layout, and gives (B, C_out, *out)
with out = (in - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1. It is a plain conv
(limn.composed.functional.convolution) of the input spread out by the stride (stride - 1 zeros between cells) and padded
by dilation (k - 1) - padding, with the weight's channel axes swapped per group and its taps reversed.
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn.composed.functional.convolution import IntOrSeq, as_tuple, conv
from limn.errors import ArgumentError

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def conv_transpose(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: IntOrSeq = 0,
    output_padding: IntOrSeq = 0,
    groups: int = 1,
    dilation: IntOrSeq = 1,
) -> Tensor:
    """The n-d transposed conv, n = weight.ndim - 2 (conv_transpose1d and 2d check the rank first)."""
    n = weight.ndim - 2
    if input.ndim == n + 1 and n > 0:  # unbatched (C, *in), as torch takes it
        out = conv_transpose(input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups, dilation)
        return out.squeeze(0)
    c_in = weight.shape[0]
    if input.ndim != n + 2 or groups < 1 or input.shape[1] != c_in or c_in % groups:
        raise ArgumentError(
            f"conv_transpose: input {input.shape} does not fit weight {weight.shape} (in, out / groups, *k) with "
            f"groups={groups}: expected (batch, {c_in}, {n} spatial dims), in channels divisible by groups"
        )
    kernel = weight.shape[2:]
    stride, dilation = as_tuple(stride, n, "conv_transpose stride"), as_tuple(dilation, n, "conv_transpose dilation")
    padding = as_tuple(padding, n, "conv_transpose padding")
    output_padding = as_tuple(output_padding, n, "conv_transpose output_padding")
    if min(stride + dilation) < 1:
        raise ArgumentError(f"conv_transpose: stride {stride} and dilation {dilation} must be >= 1")
    if min(padding + output_padding) < 0:
        raise ArgumentError(
            f"conv_transpose: padding {padding} and output_padding {output_padding} must be >= 0 (torch does "
            "not support negative padding)"
        )
    for op, s, d in zip(output_padding, stride, dilation):
        if op >= max(s, d):
            raise ArgumentError(
                f"conv_transpose: output_padding {output_padding} must be smaller than the stride {stride} or the "
                f"dilation {dilation} (torch's rule)"
            )
    x = input
    for ax, s in enumerate(stride):
        x = _spread(x, 2 + ax, s)  # (.., i, ..) -> (.., (i - 1) s + 1, ..)
    # the full conv's padding d (k - 1), less `padding` (a negative width crops), plus output_padding after
    widths = [(d * (k - 1) - p, d * (k - 1) - p + op) for k, p, op, d in zip(kernel, padding, output_padding, dilation)]
    x = x.pad([(0, 0), (0, 0), *widths])
    c_out = weight.shape[1] * groups
    w = weight.reshape((groups, c_in // groups, weight.shape[1]) + kernel)  # (G, Cin/G, Cout/G, *k)
    w = w.transpose(1, 2).reshape((c_out, c_in // groups) + kernel)  # (Cout, Cin/G, *k)
    for ax in range(n):
        w = _flip(w, 2 + ax)
    return conv(x, w, bias, 1, 0, dilation, groups)


def _spread(x: Tensor, axis: int, stride: int) -> Tensor:
    """stride - 1 zeros between the cells along axis: (.., i, ..) -> (.., (i - 1) stride + 1, ..)."""
    if stride == 1 or x.shape[axis] == 0:
        return x
    size = x.shape[axis]
    x = x.unsqueeze(axis + 1)  # (.., i, 1, ..)
    widths = [(0, 0)] * x.ndim
    widths[axis + 1] = (0, stride - 1)
    x = x.pad_constant(widths)  # (.., i, s, ..): each cell, then its zeros
    x = x.reshape(x.shape[:axis] + (size * stride,) + x.shape[axis + 2 :])  # (.., i s, ..): a copy
    box = [(0, s) for s in x.shape]
    box[axis] = (0, (size - 1) * stride + 1)
    return x.shrink(box)  # the last cell's zeros dropped


def _flip(w: Tensor, axis: int) -> Tensor:
    """w with the cells along axis in reverse order: a gather by host indices n - 1, ..., 0."""
    n = w.shape[axis]
    shape = [1] * w.ndim
    shape[axis] = n
    idx = limn.Tensor(np.arange(n - 1, -1, -1, dtype=np.int32).reshape(shape), device=w.device)
    return w.gather(axis, idx.expand(w.shape))


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntOrSeq = 1,
    padding: IntOrSeq = 0,
    output_padding: IntOrSeq = 0,
    groups: int = 1,
    dilation: IntOrSeq = 1,
) -> Tensor:
    """torch.nn.functional.conv_transpose2d (and Tensor.conv_transpose2d): (B, C_in, H, W) and weight
    (C_in, C_out / groups, kH, kW) -> (B, C_out, H_out, W_out), each dim sized as in conv_transpose1d.

    >>> Tensor.ones((1, 2, 3, 3)).conv_transpose2d(Tensor.ones((2, 4, 3, 3)), stride=2).shape
    (1, 4, 7, 7)
    """
    _check_rank(weight, 4, "conv_transpose2d")
    return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation)


class ConvTransposeMixin:
    """Tensor's transposed convolutions, by conv2d's rules; the module-level functions of the same names are torch's F
    functions, for 2 spatial dims exactly."""

    __slots__ = ()

    def conv_transpose1d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        stride: IntOrSeq = 1,
        padding: IntOrSeq = 0,
        output_padding: IntOrSeq = 0,
        groups: int = 1,
        dilation: IntOrSeq = 1,
    ) -> Tensor:
        """torch.nn.functional.conv_transpose1d: (B, C_in, L) and weight (C_in, C_out / groups, k) -> (B, C_out,
        L_out), L_out = (L - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1."""
        _check_rank(weight, 3, "conv_transpose1d")
        return conv_transpose(self, weight, bias, stride, padding, output_padding, groups, dilation)

    def conv_transpose3d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        stride: IntOrSeq = 1,
        padding: IntOrSeq = 0,
        output_padding: IntOrSeq = 0,
        groups: int = 1,
        dilation: IntOrSeq = 1,
    ) -> Tensor:
        """torch.nn.functional.conv_transpose3d: (B, C_in, D, H, W) and weight (C_in, C_out / groups, kD, kH, kW)
        -> (B, C_out, D_out, H_out, W_out), each dim sized as in conv_transpose1d."""
        _check_rank(weight, 5, "conv_transpose3d")
        return conv_transpose(self, weight, bias, stride, padding, output_padding, groups, dilation)

    def conv_transpose2d(
        self,
        weight: Tensor,
        bias: Tensor | None = None,
        stride: IntOrSeq = 1,
        padding: IntOrSeq = 0,
        output_padding: IntOrSeq = 0,
        groups: int = 1,
        dilation: IntOrSeq = 1,
    ) -> Tensor:
        """Tensor.conv_transpose2d, as tinygrad's: a transposed conv over as many spatial dims as the weight has
        (weight.ndim - 2), so a weight (C_in, C_out, k) makes it a conv_transpose1d and (C_in, C_out, kD, kH, kW)
        a conv_transpose3d (limn.nn.conv_transpose2d keeps torch's 4-d rank check).

        >>> Tensor.ones((1, 2, 3)).conv_transpose2d(Tensor.ones((2, 4, 3)), stride=2).shape
        (1, 4, 7)
        """
        if weight.ndim < 3:
            raise ArgumentError(
                f"conv_transpose2d: the weight must have 3 or more dims (in, out / groups, *kernel), got {weight.shape}"
            )
        return conv_transpose(self, weight, bias, stride, padding, output_padding, groups, dilation)


def _check_rank(weight: Tensor, ndim: int, what: str) -> None:
    if weight.ndim != ndim:
        raise ArgumentError(f"{what}: the weight must have {ndim} dims (in, out / groups, *kernel), got {weight.shape}")
