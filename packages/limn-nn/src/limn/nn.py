"""Layers, activations and losses, and the walk that finds a model's parameters.

A module is a plain class: it keeps its parameters as Tensor attributes and computes in __call__. There is
no base class to inherit and nothing to register: parameters(obj) and named_parameters(obj) walk any
object's attributes (modules, lists, tuples, dicts) and find every Tensor that requires grad, named by the
path taken to it (`layers.0.attn.weight`) as torch names it. Weights use torch's layouts and inits, so a
state_dict moves between the two untransposed.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
import types
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

# the layers of their own modules (containers, conv_transpose, convolution, dropout, norms, padding, pooling,
# resample, spatial) are re-exported here, as torch.nn and torch.nn.functional hold them
from limn import dtypes
from limn.containers import Flatten, Identity, ModuleDict, ModuleList, Sequential, Unflatten
from limn.conv_transpose import conv_transpose, conv_transpose1d, conv_transpose2d
from limn.convolution import as_tuple, conv, conv1d, conv2d, padding_pairs
from limn.dropout import Dropout, Dropout1d, Dropout2d, dropout, dropout1d, dropout2d
from limn.dtypes import DType
from limn.norms import BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm1d, InstanceNorm2d, RMSNorm
from limn.ops import Op
from limn.padding import pad, pad_widths
from limn.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
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
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from limn.tensor import Tensor, realize

__all__ = [
    "Conv1d",
    "Conv2d",
    "Embedding",
    "LayerNorm",
    "Linear",
    "conv",
    "cross_entropy",
    "gelu",
    "load_state_dict",
    "log_softmax",
    "mse_loss",
    "named_parameters",
    "parameters",
    "relu",
    "softmax",
    "state_dict",
]
# the layers family's names (layers and their functions from limn.convolution, limn.pooling, limn.norms, ...)
__all__ += [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
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
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
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
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "dropout",
    "dropout1d",
    "dropout2d",
    "interpolate",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "pad",
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


class Linear:
    """y = x @ weight.T + bias, with weight (out_features, in_features) as torch stores it.

    >>> layer = Linear(3, 2)
    >>> layer(Tensor.ones((4, 3))).shape
    (4, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: DType = dtypes.float32):
        bound = 1 / math.sqrt(in_features) if in_features else 0.0
        self.weight = _uniform((out_features, in_features), bound, dtype)
        self.bias = _uniform((out_features,), bound, dtype) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        y = x @ self.weight.T  # (..., in) @ (in, out) -> (..., out)
        return y if self.bias is None else y + self.bias


class LayerNorm:
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

    def __call__(self, x: Tensor) -> Tensor:
        n = len(self.normalized_shape)
        trailing = x.shape[x.ndim - n :]
        if trailing != self.normalized_shape:
            raise ValueError(
                f"LayerNorm over {self.normalized_shape}: the input's trailing dims are {trailing} "
                f"(input shape {x.shape})"
            )
        axes = tuple(range(x.ndim - n, x.ndim))
        mean = x.mean(axes, keepdim=True)
        var = x.var(axes, keepdim=True, correction=0)
        y = (x - mean) * (var + self.eps).rsqrt()
        if self.weight is not None:
            y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y


class Embedding:
    """Rows of a (num_embeddings, embedding_dim) table picked by int ids: ids of shape S -> (*S, dim).
    The table starts N(0, 1), as torch's does."""

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype: DType = dtypes.float32):
        self.weight = Tensor.randn((num_embeddings, embedding_dim), dtype=dtype, requires_grad=True)

    def __call__(self, idx: Tensor) -> Tensor:
        return self.weight.embedding(idx)


class _ConvNd:
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

    def __call__(self, x: Tensor) -> Tensor:
        if self.padding_mode == "zeros":
            return conv(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        # the other modes pad first, as torch: F.pad(x, pads, mode), then a conv without padding
        lead = [(0, 0)] * (x.ndim - self.dims)
        x = pad_widths(x, lead + list(self._pads), PADDING_MODES[self.padding_mode])
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


class _ConvTransposeNd:
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

    def __call__(self, x: Tensor) -> Tensor:
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


# ---- activations and losses, as functions ----


def relu(x: Tensor) -> Tensor:
    return x.relu()


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """x Phi(x) with erf ('none', torch's default) or torch's tanh approximation ('tanh')."""
    return x.gelu(approximate)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    return x.softmax(axis)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    return x.log_softmax(axis)


def cross_entropy(
    logits: Tensor,
    target: Tensor,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> Tensor:
    """torch.nn.functional.cross_entropy: logits (N, C) or (N, C, ...) and int class targets (N, ...).
    Targets equal to ignore_index add nothing, and the mean is over the others."""
    return logits.cross_entropy(target, ignore_index, label_smoothing, reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """(input - target)**2, averaged ('mean'), summed ('sum') or kept ('none')."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"mse_loss: reduction must be 'mean', 'sum' or 'none', not {reduction!r}")
    if input.shape != target.shape:
        raise ValueError(f"mse_loss: input {input.shape} and target {target.shape} must have one shape")
    err = (input - target).square()
    if reduction == "none":
        return err
    return err.sum() if reduction == "sum" else err.mean()


# ---- finding parameters ----


def named_parameters(obj: Any) -> Iterator[tuple[str, Tensor]]:
    """Every Tensor with requires_grad reachable from `obj`, with the dotted path that reaches it.

    Attributes are walked in definition order, list and tuple items by index, dict values by key, so a
    model built like its torch twin gets torch's names (`layers.0.attn.weight`). Each tensor comes once,
    under the first path that meets it (tied weights keep the first name); a cycle is walked once. A tensor
    without requires_grad (a mask, a rotary table) is not a parameter and is skipped.

    >>> class MLP:
    ...     def __init__(self):
    ...         self.layers = [Linear(2, 4), Linear(4, 1)]
    >>> [name for name, _ in named_parameters(MLP())]
    ['layers.0.weight', 'layers.0.bias', 'layers.1.weight', 'layers.1.bias']
    """
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        path, value = stack.pop()
        if id(value) in seen:
            continue
        if isinstance(value, Tensor):
            if value.requires_grad:
                seen.add(id(value))
                yield path, value
            continue
        children = _children(value)
        if children is None:
            continue
        seen.add(id(value))
        prefix = f"{path}." if path else ""
        stack.extend((prefix + str(key), child) for key, child in reversed(children))


# values the walk never descends into: numbers, strings, arrays, and functions, classes and modules, whose
# attributes (globals, class variables) are not a model's parameters
_LEAVES = (
    str,
    bytes,
    int,
    float,
    bool,
    type(None),
    np.ndarray,
    type,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    types.ModuleType,
)


def _children(value: Any) -> list[tuple[Any, Any]] | None:
    """What the parameter walk descends into: containers' items and plain objects' attributes."""
    if isinstance(value, (list, tuple)):
        return list(enumerate(value))
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, _LEAVES):
        return None
    attrs = getattr(value, "__dict__", None)  # a module, or any object holding tensors
    return None if attrs is None else list(attrs.items())


def parameters(obj: Any) -> list[Tensor]:
    """The tensors named_parameters(obj) finds, in the same order, without their names."""
    return [t for _, t in named_parameters(obj)]


def state_dict(obj: Any) -> dict[str, Tensor]:
    """{path: tensor} for every parameter of obj: the tensors themselves (realized), not copies, so
    limn.serialize.save writes them and load_into writes into them."""
    named = dict(named_parameters(obj))
    lazy = [t for t in named.values() if t.node.op is not Op.BUFFER]
    if lazy:
        realize(*lazy)
    return named


def load_state_dict(obj: Any, values: dict[str, Any], strict: bool = True) -> None:
    """Writes `values` ({path: Tensor or array}) into obj's parameters' own buffers in one realize().

    Everything is checked first: every parameter needs a value of its shape (dtype is converted), and with
    strict=True no value may lack a parameter. On a mismatch a ValueError lists every problem and nothing
    is written."""
    named = dict(named_parameters(obj))
    assign_values(named, values, strict, "load_state_dict")


def assign_values(targets: dict[str, Tensor], values: dict[str, Any], strict: bool, what: str) -> None:
    """Assigns values[name] into targets[name] for every name, in one realize, after checking them all
    (load_state_dict here, and the optimizers' load_state_dict, share it). `what` opens the error."""
    problems = [f"missing: {name} {list(t.shape)}" for name, t in targets.items() if name not in values]
    for name, t in targets.items():
        if name in values and _shape(values[name]) != t.shape:
            problems.append(f"shape: {name} is {list(t.shape)}, the value is {list(_shape(values[name]))}")
    if strict:
        problems += [f"unexpected: {name}" for name in values if name not in targets]
    if problems:
        listed = "\n".join("  " + p for p in problems)
        raise ValueError(f"{what}: the values do not match, nothing was written:\n{listed}")
    lazy = [t for t in targets.values() if t.node.op is not Op.BUFFER]
    if lazy:
        realize(*lazy)
    for name, t in targets.items():
        value = values[name]
        value = value if isinstance(value, Tensor) else Tensor(np.asarray(value), dtype=t.dtype, device=t.device)
        t.assign(value.detach())
    realize(*targets.values())


def _shape(value: Any) -> tuple[int, ...]:
    return value.shape if isinstance(value, Tensor) else tuple(np.shape(value))
