"""The layers with weights, as torch.nn's: Linear, LayerNorm, Embedding, Conv1d/2d and ConvTranspose1d/2d.

Each is a limn.nn.module.Module keeping its parameters as Tensor attributes, in torch's layouts and with torch's
initializations, so a state_dict moves between the two untransposed. The arithmetic is limn.nn.functional's.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from limn import dtypes
from limn.composed.functional.conv_transpose import conv_transpose
from limn.composed.functional.convolution import as_tuple, conv, padding_pairs
from limn.dtypes import DType
from limn.frontend.tensor import Tensor
from limn.nn import init
from limn.nn.functional import embedding, linear, padding_index
from limn.nn.module import Module
from limn.nn.norms import layer_norm

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "Embedding", "LayerNorm", "Linear"]

IntOrPair = int | Sequence[int]


# ---- initialization: torch's defaults, drawn from the generator limn.manual_seed seeds ----


def _uniform(shape: tuple[int, ...], bound: float, dtype: DType) -> Tensor:
    """A trainable tensor uniform in [-bound, bound), as torch's kaiming_uniform_(a=sqrt(5)) gives a weight
    with fan_in inputs when bound = 1/sqrt(fan_in)."""

    def values() -> Tensor:
        u = Tensor.rand(shape, dtype=dtypes.float64).numpy()  # [0, 1); drawn on the host, so init compiles nothing
        return Tensor((2 * u - 1) * bound, dtype=dtype)

    return init.parameter(shape, dtype, values)


def _filled(shape: tuple[int, ...], value: float, dtype: DType) -> Tensor:
    return init.parameter(shape, dtype, lambda: Tensor(np.full(shape, value), dtype=dtype))


# ---- layers ----


class Linear(Module):
    """y = x @ weight.T + bias, with weight (out_features, in_features) as torch stores it.

    >>> layer = Linear(3, 2)
    >>> layer(Tensor.ones((4, 3))).shape
    (4, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: DType = dtypes.float32):
        bound = 1 / math.sqrt(in_features) if in_features else 0.0
        self.weight = _uniform((out_features, in_features), bound, dtype)
        self.bias = _uniform((out_features,), bound, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)


class LayerNorm(Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing `normalized_shape` dims, with the
    biased variance (divided by n, not n - 1) as torch uses."""

    def __init__(
        self,
        normalized_shape: IntOrPair,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        dtype: DType = dtypes.float32,
    ):
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = shape
        self.eps = eps
        self.weight = _filled(shape, 1.0, dtype) if elementwise_affine else None
        self.bias = _filled(shape, 0.0, dtype) if elementwise_affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class Embedding(Module):
    """Rows of a (num_embeddings, embedding_dim) table picked by int ids: ids of shape S -> (*S, dim).
    The table starts N(0, 1), as torch's does; with padding_idx that row starts at zero and gets no gradient."""

    def __init__(
        self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None, dtype: DType = dtypes.float32
    ):
        if padding_idx is not None:
            padding_idx = padding_index(padding_idx, num_embeddings)

        def values() -> Tensor:
            table = Tensor.randn((num_embeddings, embedding_dim), dtype=dtype)
            if padding_idx is not None:
                table[padding_idx] = 0.0
            return table

        self.weight = init.parameter((num_embeddings, embedding_dim), dtype, values)
        self.padding_idx = padding_idx

    def forward(self, idx: Tensor) -> Tensor:
        return embedding(idx, self.weight, self.padding_idx)


class _ConvNd(Module):
    """Conv1d and Conv2d share torch's layouts, init and padding modes; convolution computes."""

    dims = 0  # spatial dims: 1 or 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrPair,
        stride: IntOrPair = 1,
        padding: IntOrPair | str = 0,
        dilation: IntOrPair = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        dtype: DType = dtypes.float32,
    ):
        name = type(self).__name__
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both divide "
                f"by groups ({groups})"
            )
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {', '.join(PADDING_MODES)}, not {padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = as_tuple(kernel_size, self.dims, f"{name} kernel_size")
        self.stride = as_tuple(stride, self.dims, f"{name} stride")
        self.dilation = as_tuple(dilation, self.dims, f"{name} dilation")
        if min(self.kernel_size + self.stride + self.dilation) < 1:
            raise ValueError(f"{name}: kernel_size, stride and dilation must be >= 1")
        self.padding = padding if isinstance(padding, str) else as_tuple(padding, self.dims, f"{name} padding")
        self.padding_mode = padding_mode
        # checked now, as torch does: "same" with a stride, a negative padding
        self._pads = padding_pairs(self.padding, self.kernel_size, self.stride, self.dilation, name)
        fan_in = in_channels // groups * math.prod(self.kernel_size)
        bound = 1 / math.sqrt(fan_in)
        self.weight = _uniform((out_channels, in_channels // groups, *self.kernel_size), bound, dtype)
        self.bias = _uniform((out_channels,), bound, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        if self.padding_mode == "zeros":
            return conv(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        # the other modes pad first, as torch: F.pad(x, pads, mode), then a conv without padding
        lead = [(0, 0)] * (x.ndim - self.dims)
        x = x.pad(lead + list(self._pads), PADDING_MODES[self.padding_mode])
        return conv(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


# torch's padding_mode names -> limn.composed.movement.padding's (and F.pad's) mode names
PADDING_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}


class Conv1d(_ConvNd):
    """1-D convolution (cross-correlation, as torch): (B, C_in, L) -> (B, C_out, L_out), weight
    (C_out, C_in / groups, k). L_out = (L + 2 padding - dilation (k - 1) - 1) // stride + 1."""

    dims = 1


class Conv2d(_ConvNd):
    """2-D convolution (cross-correlation, as torch): (B, C_in, H, W) -> (B, C_out, H_out, W_out), weight
    (C_out, C_in / groups, kH, kW); each spatial dim sized as in Conv1d.

    >>> conv = Conv2d(4, 8, kernel_size=3, padding=1, groups=2)
    >>> conv(Tensor.ones((1, 4, 5, 5))).shape
    (1, 8, 5, 5)
    """

    dims = 2


class _ConvTransposeNd(Module):
    """ConvTranspose1d and 2d share this: torch's weight layout (C_in, C_out / groups, *k) and init (its
    fan_in is weight.shape[1] * prod(k), as torch computes it from that layout); limn.composed.functional.conv_transpose
    computes."""

    dims = 0

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrPair,
        stride: IntOrPair = 1,
        padding: IntOrPair = 0,
        output_padding: IntOrPair = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: IntOrPair = 1,
        padding_mode: str = "zeros",
        dtype: DType = dtypes.float32,
    ):
        name = type(self).__name__
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both divide "
                f"by groups ({groups})"
            )
        if padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode='zeros' is supported, as torch's, not {padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = as_tuple(kernel_size, self.dims, f"{name} kernel_size")
        self.stride = as_tuple(stride, self.dims, f"{name} stride")
        self.padding = as_tuple(padding, self.dims, f"{name} padding")
        self.output_padding = as_tuple(output_padding, self.dims, f"{name} output_padding")
        self.dilation = as_tuple(dilation, self.dims, f"{name} dilation")
        self.padding_mode = padding_mode
        fan_in = out_channels // groups * math.prod(self.kernel_size)
        bound = 1 / math.sqrt(fan_in)
        self.weight = _uniform((in_channels, out_channels // groups, *self.kernel_size), bound, dtype)
        self.bias = _uniform((out_channels,), bound, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return conv_transpose(
            x, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups, self.dilation
        )


class ConvTranspose1d(_ConvTransposeNd):
    """torch.nn.ConvTranspose1d: (B, C_in, L) -> (B, C_out, L_out), weight (C_in, C_out / groups, k),
    L_out = (L - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1."""

    dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    """torch.nn.ConvTranspose2d: (B, C_in, H, W) -> (B, C_out, H_out, W_out), weight (C_in, C_out / groups,
    kH, kW), each dim sized as in ConvTranspose1d.

    >>> ConvTranspose2d(4, 2, kernel_size=2, stride=2)(Tensor.ones((1, 4, 3, 3))).shape
    (1, 2, 6, 6)
    """

    dims = 2
