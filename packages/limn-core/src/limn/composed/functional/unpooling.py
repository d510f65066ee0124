"""Max unpooling, the partial inverse of a max pool: max_unpool1d/2d/3d, as torch.nn.functional's.

Takes a max pool's output (N, C, *in) or (C, *in) and the indices it gave (return_indices=True: each cell's
flat position in its input plane) and gives (N, C, *out), zero but for each value written back at its index.
It is one scatter (limn.composed.indexed.scatter) into a zero plane; the gradient of a value is the output's at its
index. Pipeline: **tensor (composed ops)** -> graph (SCATTER, GATHER) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn.composed.functional.convolution import IntOrSeq, as_tuple
from limn.composed.math.derivative import carry
from limn.errors import ArgumentError

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def max_unpool(
    input: Tensor,
    indices: Tensor,
    n: int,
    kernel_size: IntOrSeq,
    stride: IntOrSeq | None = None,
    padding: IntOrSeq = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """The max unpool over n spatial dims (max_unpool1d/2d/3d call it with n = 1, 2, 3)."""
    what = f"max_unpool{n}d"
    if input.ndim not in (n + 1, n + 2):
        raise ArgumentError(f"{what}: expects a {n + 1}-d (C, *in) or {n + 2}-d (N, C, *in) input, got {input.shape}")
    if indices.shape != input.shape:
        raise ArgumentError(
            f"{what}: the indices {indices.shape} must have the input's shape {input.shape} (a max pool's "
            "return_indices=True gives them)"
        )
    if not input.dtype.is_float:
        raise TypeError(f"{what}: not defined for {input.dtype.name} tensors (torch's rule); pass a float tensor")
    if indices.dtype.is_float or indices.dtype.name == "bool":
        raise TypeError(f"{what}: the indices must be ints, got {indices.dtype.name}")
    if input.ndim == n + 1:  # unbatched (C, *in), as torch takes it
        out = max_unpool(input.unsqueeze(0), indices.unsqueeze(0), n, kernel_size, stride, padding, output_size)
        return out.squeeze(0)
    out = _output_size(input.shape[2:], kernel_size, stride, padding, output_size, what)
    b, c = input.shape[:2]
    cells = math.prod(input.shape[2:])
    values, index = input.reshape(b, c, cells), indices.reshape(b, c, cells)
    # unpool: zeros (N, C, prod(out)), each value written at its index (a repeated index: one of its writes)
    plane = limn.Tensor.zeros((b, c, math.prod(out)), dtype=input.dtype, device=input.device)
    flat = plane.scatter(2, index, values.detach())  # (N, C, prod(out))
    # torch's gradient, every write's value gets the output's gradient at its index (grad.gather(indices)),
    # is the gradient of the sum of the writes, whatever their values (inf and NaN too): carried from it
    writes = limn.Tensor.zeros(plane.shape, dtype=input.dtype, device=input.device).scatter_add(2, index, values)
    flat = carry(flat, (writes,), lambda writes, out: (1.0,))
    return flat.reshape((b, c) + out)  # (N, C, *out)


def _output_size(
    spatial: Sequence[int],
    kernel_size: IntOrSeq,
    stride: IntOrSeq | None,
    padding: IntOrSeq,
    output_size: Sequence[int] | None,
    what: str,
) -> tuple[int, ...]:
    """torch's _unpool_output_size: (in - 1) stride - 2 padding + kernel per dim, or output_size (n ints, or
    n + 2 whose first two are ignored) when it lies strictly within a stride of that."""
    n = len(spatial)
    kernel = as_tuple(kernel_size, n, f"{what} kernel_size")
    strides = kernel if stride is None or stride == () or stride == [] else as_tuple(stride, n, f"{what} stride")
    pads = as_tuple(padding, n, f"{what} padding")
    default = tuple((i - 1) * s + k - 2 * p for i, s, k, p in zip(spatial, strides, kernel, pads))
    if output_size is None:
        sizes = default
    else:
        sizes = tuple(output_size)
        sizes = sizes[2:] if len(sizes) == n + 2 else sizes
        if len(sizes) != n:
            raise ArgumentError(f"{what}: output_size must have {n} or {n + 2} entries, got {tuple(output_size)}")
        for d, (o, want, s) in enumerate(zip(sizes, default, strides)):
            if not want - s < o < want + s:
                raise ArgumentError(
                    f'{what}: invalid output_size "{tuple(output_size)}" (dim {d} must be between {want - s} and '
                    f"{want + s}, exclusive, for input {tuple(spatial)}, kernel {kernel}, stride {strides})"
                )
    if min(sizes) < 1:
        raise ArgumentError(f"{what}: the output size {sizes} must be positive")
    return tuple(int(o) for o in sizes)


def max_unpool2d(
    input: Tensor,
    indices: Tensor,
    kernel_size: IntOrSeq,
    stride: IntOrSeq | None = None,
    padding: IntOrSeq = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    """torch.nn.functional.max_unpool2d (and Tensor.max_unpool2d): (N, C, H, W) and the indices of
    max_pool2d(..., return_indices=True) -> (N, C, H_out, W_out), H_out = (H - 1) stride - 2 padding + kH
    (stride defaults to the kernel) or output_size's; every cell is 0 but those the indices name.

    The trap: the indices are not checked against the output's size (torch raises on one out of range;
    here that needs the data, which is lazy), so pass the indices of a pool of the same shape.

    >>> v, i = Tensor([[[[1.0, 2.0], [4.0, 3.0]]]]).max_pool2d(2, return_indices=True)
    >>> max_unpool2d(v, i, 2).tolist()
    [[[[0.0, 0.0], [4.0, 0.0]]]]
    """
    return max_unpool(input, indices, 2, kernel_size, stride, padding, output_size)


class UnpoolingMixin:
    """Tensor's max unpools, the inverse of a max pool with its indices, by conv2d's rules; the module-level functions
    of the same names are torch's F functions, for 2 spatial dims exactly."""

    __slots__ = ()

    def max_unpool1d(self, indices, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
        """torch.nn.functional.max_unpool1d: (N, C, L) and max_pool1d's indices -> (N, C, L_out); see max_unpool2d."""
        return max_unpool(self, indices, 1, kernel_size, stride, padding, output_size)

    def max_unpool3d(self, indices, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
        """torch.nn.functional.max_unpool3d: (N, C, D, H, W) and max_pool3d's indices -> (N, C, *out)."""
        return max_unpool(self, indices, 3, kernel_size, stride, padding, output_size)

    def max_unpool2d(
        self,
        indices: Tensor,
        kernel_size: IntOrSeq = (2, 2),
        stride: IntOrSeq | None = None,
        padding: IntOrSeq = 0,
        output_size: Sequence[int] | None = None,
    ) -> Tensor:
        """Tensor.max_unpool2d, as tinygrad's: over as many spatial dims as kernel_size has ints (an int kernel is
        2-d), so it undoes Tensor.max_pool2d of any rank; otherwise max_unpool2d's arguments."""
        n = 2 if isinstance(kernel_size, int) else len(kernel_size)
        return max_unpool(self, indices, n, kernel_size, stride, padding, output_size)
