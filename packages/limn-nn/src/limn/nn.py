"""Layers, activations and losses, and the walk that finds a model's parameters.

Each layer is a limn.module.Module (forward, parameters(), state_dict(), train()/eval(), as torch's) keeping
its parameters as Tensor attributes. Nothing is registered: parameters(obj) and named_parameters(obj) walk any
object's attributes (modules, lists, tuples, dicts) and find every Tensor that requires grad, named by the
path taken to it (`layers.0.attn.weight`) as torch names it. Weights use torch's layouts and inits, so a
state_dict moves between the two untransposed.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

import numpy as np

# the layers of their own modules (containers, conv_transpose, convolution, dropout, norms, padding, pooling,
# resample, spatial) are re-exported here, as torch.nn and torch.nn.functional hold them
from limn import activations, dtypes, lookups, losses
from limn.activation_layers import GELU, LeakyReLU, ReLU, Sigmoid, SiLU, Tanh
from limn.attention import scaled_dot_product_attention
from limn.containers import Flatten, Identity, ModuleDict, ModuleList, Sequential, Unflatten
from limn.conv_transpose import conv_transpose, conv_transpose1d, conv_transpose2d, conv_transpose3d
from limn.convolution import as_tuple, conv, conv1d, conv2d, conv3d, padding_pairs
from limn.dropout import Dropout, Dropout1d, Dropout2d, dropout, dropout1d, dropout2d
from limn.dtypes import DType
from limn.loss_layers import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from limn.norms import (
    BatchNorm1d,
    BatchNorm2d,
    GroupNorm,
    InstanceNorm1d,
    InstanceNorm2d,
    RMSNorm,
    group_norm,
    layer_norm,
)
from limn.padding import pad
from limn.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool1d,
    max_pool2d,
    max_pool3d,
)
from limn.resample import interpolate
from limn.spatial import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from limn.tensor import Tensor
from limn.unpooling import max_unpool1d, max_unpool2d, max_unpool3d

# isort: split
# the train family's names: the parameter walk, Module, limn.nn.init and limn.nn.utils (gradient clipping)
from limn import nn_init as init
from limn import nn_utils as utils
from limn.kv_cache import KVCache
from limn.module import Module, Parameter
from limn.nn_utils import clip_grad_norm_, clip_grad_value_
from limn.walk import load_state_dict, named_parameters, parameters, state_dict

sys.modules[f"{__name__}.init"], sys.modules[f"{__name__}.utils"] = init, utils  # from limn.nn.init import ...
# limn.nn holds torch.nn.functional's functions too: `import limn.nn.functional as F` is limn.nn itself
functional = sys.modules[f"{__name__}.functional"] = sys.modules[__name__]

__all__ = [
    "scaled_dot_product_attention",
    "Conv1d",
    "Conv2d",
    "Embedding",
    "LayerNorm",
    "Linear",
    "Parameter",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "conv",
    "cosine_similarity",
    "cross_entropy",
    "elu",
    "embedding",
    "gelu",
    "group_norm",
    "glu",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "load_state_dict",
    "log_softmax",
    "logsigmoid",
    "mish",
    "mse_loss",
    "named_parameters",
    "nll_loss",
    "normalize",
    "one_hot",
    "parameters",
    "prelu",
    "relu",
    "relu6",
    "selu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "state_dict",
    "tanh",
    "tanhshrink",
    "threshold",
]
# the layers family's names (layers and their functions from limn.convolution, limn.pooling, limn.norms, ...)
__all__ += [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "BatchNorm1d",
    "BatchNorm2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Flatten",
    "GroupNorm",
    "Identity",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "ModuleDict",
    "ModuleList",
    "RMSNorm",
    "Sequential",
    "Unflatten",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "dropout",
    "dropout1d",
    "dropout2d",
    "interpolate",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "pad",
]
# torch.nn's activation and loss layers (limn.activation_layers, limn.loss_layers)
__all__ += [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "GELU",
    "L1Loss",
    "LeakyReLU",
    "MSELoss",
    "NLLLoss",
    "ReLU",
    "SiLU",
    "Sigmoid",
    "Tanh",
]

IntOrPair = int | Sequence[int]


# ---- initialization: torch's defaults, drawn from the generator limn.manual_seed seeds ----


def _uniform(shape: tuple[int, ...], bound: float, dtype: DType) -> Tensor:
    """A trainable tensor uniform in [-bound, bound), as torch's kaiming_uniform_(a=sqrt(5)) gives a weight
    with fan_in inputs when bound = 1/sqrt(fan_in)."""
    u = Tensor.rand(shape, dtype=dtypes.float64).numpy()  # [0, 1); drawn on the host, so init compiles nothing
    return Tensor((2 * u - 1) * bound, dtype=dtype, requires_grad=True)


def _filled(shape: tuple[int, ...], value: float, dtype: DType) -> Tensor:
    return Tensor(np.full(shape, value), dtype=dtype, requires_grad=True)


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


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """torch.nn.functional.linear: input @ weight.T + bias, weight (out_features, in_features) as torch's."""
    y = input @ weight.T  # (..., in) @ (in, out) -> (..., out)
    return y if bias is None else y + bias


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
    The table starts N(0, 1), as torch's does."""

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype: DType = dtypes.float32):
        self.weight = Tensor.randn((num_embeddings, embedding_dim), dtype=dtype, requires_grad=True)

    def forward(self, idx: Tensor) -> Tensor:
        return embedding(idx, self.weight)


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """torch.nn.functional.embedding: the rows of weight (num_embeddings, dim) picked by int ids, S -> (*S, dim).
    padding_idx, max_norm and scale_grad_by_freq (which change the gradient or write the table) raise
    NotImplementedError; sparse (a gradient layout) is accepted and changes nothing."""
    if padding_idx is not None or max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError(
            "embedding: padding_idx, max_norm and scale_grad_by_freq are not implemented in limn; leave them unset"
        )
    return weight.embedding(input)


class _ConvNd(Module):
    """Conv1d and Conv2d share this: torch's layouts, init and padding modes; limn.convolution computes."""

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
        x = pad(x, lead + list(self._pads), PADDING_MODES[self.padding_mode])
        return conv(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)


# torch's padding_mode names -> limn.padding's (and F.pad's) mode names
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
    fan_in is weight.shape[1] * prod(k), as torch computes it from that layout); limn.conv_transpose computes."""

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


# ---- activations and losses, as functions: torch.nn.functional's names, signatures and defaults ----
#
# The work is in limn.activations and limn.losses (Tensor methods too); these are torch's F spellings. torch's
# inplace=True has no lazy equivalent, so it raises rather than quietly computing out of place.


def _out_of_place(inplace: bool, what: str) -> None:
    if inplace:
        raise NotImplementedError(
            f"{what}(inplace=True): limn tensors are values, not storage to overwrite; use y = {what}(x)"
        )


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0); gradient 0 at 0, as torch."""
    _out_of_place(inplace, "relu")
    return input.relu()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6); gradient 0 at 0 and 6, 1 at NaN, as torch."""
    _out_of_place(inplace, "relu6")
    return activations.relu6(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x if x > 0 else negative_slope * x; gradient negative_slope at 0, as torch."""
    _out_of_place(inplace, "leaky_relu")
    return activations.leaky_relu(input, negative_slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x if x > 0 else alpha (e**x - 1); gradient alpha at 0, as torch."""
    _out_of_place(inplace, "elu")
    return activations.elu(input, alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with torch's constants."""
    _out_of_place(inplace, "selu")
    return activations.selu(input)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x if x > 0 else alpha (e**(x / alpha) - 1), as torch."""
    _out_of_place(inplace, "celu")
    return activations.celu(input, alpha)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x Phi(x) with erf ('none', torch's default) or torch's tanh approximation ('tanh')."""
    return input.gelu(approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x)."""
    _out_of_place(inplace, "silu")
    return activations.silu(input)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x)), stable for any |x|."""
    _out_of_place(inplace, "mish")
    return activations.mish(input)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x clamped into [min_val, max_val]; gradient 1 strictly inside and at NaN, as torch."""
    _out_of_place(inplace, "hardtanh")
    return activations.hardtanh(input, min_val, max_val)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """clamp(x / 6 + 1/2, 0, 1)."""
    _out_of_place(inplace, "hardsigmoid")
    return activations.hardsigmoid(input)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * hardsigmoid(x), with torch's gradient."""
    _out_of_place(inplace, "hardswish")
    return activations.hardswish(input)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """value where x <= threshold, else x."""
    _out_of_place(inplace, "threshold")
    return activations.threshold(input, threshold, value)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + e**-x), stable for any |x|."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """The hyperbolic tangent."""
    return input.tanh()


def softmax(
    input: Tensor,
    dim: int | None = None,
    _stacklevel: int = 3,
    dtype: DType | str | None = None,
    *,
    axis: int | None = None,
) -> Tensor:
    """exp(x) / sum(exp(x)) along dim (the last when none is given: torch's deprecated implicit dim is not
    followed), computed in dtype if given. _stacklevel is torch's (for its warning), here only so that dtype
    sits where torch's does."""
    return activations.softmax(input, dim, dtype, axis=axis)


def log_softmax(
    input: Tensor,
    dim: int | None = None,
    _stacklevel: int = 3,
    dtype: DType | str | None = None,
    *,
    axis: int | None = None,
) -> Tensor:
    """log(softmax(x)) along dim (the last when none is given), computed in dtype if given."""
    return activations.log_softmax(input, dim, dtype, axis=axis)


def softmin(
    input: Tensor,
    dim: int | None = None,
    _stacklevel: int = 3,
    dtype: DType | str | None = None,
    *,
    axis: int | None = None,
) -> Tensor:
    """softmax(-x) along dim (the last when none is given)."""
    return activations.softmin(input, dim, dtype, axis=axis)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """(*S) int ids -> (*S, num_classes) int32 one-hot rows; -1 infers max + 1 (and realizes the ids)."""
    return lookups.one_hot(tensor, num_classes)


softplus = activations.softplus
logsigmoid = activations.logsigmoid
softsign = activations.softsign
tanhshrink = activations.tanhshrink
softshrink = activations.softshrink
hardshrink = activations.hardshrink
glu = activations.glu
prelu = activations.prelu
normalize = activations.normalize
nll_loss = losses.nll_loss
cross_entropy = losses.cross_entropy
binary_cross_entropy = losses.binary_cross_entropy
binary_cross_entropy_with_logits = losses.binary_cross_entropy_with_logits
l1_loss = losses.l1_loss
mse_loss = losses.mse_loss
smooth_l1_loss = losses.smooth_l1_loss
huber_loss = losses.huber_loss
kl_div = losses.kl_div
cosine_similarity = losses.cosine_similarity


# ---- the train family's names (defined in limn.walk, limn.module, limn.nn_init, limn.nn_utils) ----

__all__ += ["KVCache", "Module", "clip_grad_norm_", "clip_grad_value_", "init", "utils"]
