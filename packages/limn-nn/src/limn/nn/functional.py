"""limn.nn.functional: torch.nn.functional's names, signatures and defaults, as functions over Tensors.

The work is in limn-core's composed catalogue (limn.composed.functional and the Tensor methods); this module is
torch's F spelling of it, so `import limn.nn.functional as F` reads as ported code expects. torch's inplace=True
has no lazy equivalent, so it raises rather than quietly computing out of place.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from limn.composed.functional.adaptive_pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
)
from limn.composed.functional.conv_transpose import conv_transpose2d
from limn.composed.functional.convolution import conv2d
from limn.composed.functional.pooling import (
    avg_pool2d,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool2d,
)
from limn.composed.functional.resample import interpolate
from limn.composed.functional.unpooling import max_unpool2d
from limn.dtypes import DType
from limn.frontend.arguments import axis_is_dim
from limn.frontend.tensor import Tensor
from limn.graph import provenance
from limn.nn.dropout import dropout, dropout1d, dropout2d
from limn.nn.norms import group_norm, layer_norm

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "dropout1d",
    "dropout2d",
    "elu",
    "embedding",
    "gelu",
    "glu",
    "group_norm",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "huber_loss",
    "interpolate",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsigmoid",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "mish",
    "mse_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "prelu",
    "relu",
    "relu6",
    "scaled_dot_product_attention",
    "selu",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
]


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """torch.nn.functional.linear: input @ weight.T + bias, weight (out_features, in_features) as torch's."""
    y = input @ weight.T  # (..., in) @ (in, out) -> (..., out)
    return y if bias is None else y + bias


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
    The row padding_idx (negative counts from the end) reads as it is but gets no gradient, as torch's.
    max_norm (which rewrites the table's rows) and scale_grad_by_freq raise NotImplementedError; sparse (a
    gradient layout) is accepted and changes nothing."""
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError(
            "embedding: max_norm and scale_grad_by_freq are not implemented in limn; leave them unset"
        )
    if padding_idx is not None:
        rows = weight.shape[0]
        row = padding_index(padding_idx, rows)
        keep = Tensor.arange(rows, device=weight.device).ne(row).reshape(rows, 1)  # (rows, 1): False at the pad row
        weight = keep.where(weight, weight.detach())  # the same values; the pad row's gradient stops here
    return weight.embedding(input)


def padding_index(padding_idx: int, rows: int) -> int:
    """padding_idx as a row of a table of `rows`, counted from the end when negative, as torch takes it."""
    if not -rows <= padding_idx < rows:
        raise ValueError(
            f"embedding: padding_idx {padding_idx} is outside the table's {rows} rows (use -{rows} to {rows - 1})"
        )
    return padding_idx % rows


# The work is in Tensor's methods (limn.composed.functional.activations and .losses); these are torch's F
# spellings. torch's inplace=True has no lazy equivalent, so it raises rather than quietly computing out
# of place.


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
    return input.relu6()


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x if x > 0 else negative_slope * x; gradient negative_slope at 0, as torch."""
    _out_of_place(inplace, "leaky_relu")
    return input.leaky_relu(negative_slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x if x > 0 else alpha (e**x - 1); gradient alpha at 0, as torch."""
    _out_of_place(inplace, "elu")
    return input.elu(alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with torch's constants."""
    _out_of_place(inplace, "selu")
    return input.selu()


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x if x > 0 else alpha (e**(x / alpha) - 1), as torch."""
    _out_of_place(inplace, "celu")
    return input.celu(alpha)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x Phi(x) with erf ('none', torch's default) or torch's tanh approximation ('tanh')."""
    return input.gelu(approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x)."""
    _out_of_place(inplace, "silu")
    return input.silu()


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x)), stable for any |x|."""
    _out_of_place(inplace, "mish")
    return input.mish()


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """x clamped into [min_val, max_val]; gradient 1 strictly inside and at NaN, as torch."""
    _out_of_place(inplace, "hardtanh")
    return input.hardtanh(min_val, max_val)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """clamp(x / 6 + 1/2, 0, 1)."""
    _out_of_place(inplace, "hardsigmoid")
    return input.hardsigmoid()


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * hardsigmoid(x), with torch's gradient."""
    _out_of_place(inplace, "hardswish")
    return input.hardswish()


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """value where x <= threshold, else x."""
    _out_of_place(inplace, "threshold")
    return input.threshold(threshold, value)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + e**-x), stable for any |x|."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """The hyperbolic tangent."""
    return input.tanh()


@axis_is_dim
def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: DType | str | None = None) -> Tensor:
    """exp(x) / sum(exp(x)) along dim (the last when none is given: torch's deprecated implicit dim is not
    followed), computed in dtype if given. _stacklevel is torch's (for its warning), here only so that dtype
    sits where torch's does."""
    return input.softmax(dim, dtype)


@axis_is_dim
def log_softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: DType | str | None = None
) -> Tensor:
    """log(softmax(x)) along dim (the last when none is given), computed in dtype if given."""
    return input.log_softmax(dim, dtype)


@axis_is_dim
def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: DType | str | None = None) -> Tensor:
    """softmax(-x) along dim (the last when none is given)."""
    return input.softmin(dim, dtype)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """(*S) int ids -> (*S, num_classes) int32 one-hot rows; -1 infers max + 1 (and realizes the ids)."""
    return tensor.one_hot(num_classes)


def _torch_function(method: Callable[..., Any], first: str = "input") -> Callable[..., Any]:
    """Tensor.<name> as torch's F.<name>: the same function, with the tensor it works on named `first`, as
    torch names it (F.cross_entropy(input=x, target=y) works, and help() shows torch's signature)."""

    @functools.wraps(method)
    def function(*args: Any, **kwargs: Any) -> Any:
        if first in kwargs:
            args = (kwargs.pop(first), *args)
        return method(*args, **kwargs)

    self_param, *rest = inspect.signature(method).parameters.values()
    function.__signature__ = inspect.Signature([self_param.replace(name=first), *rest])
    provenance.forwards(function.__code__)  # limn.explain names the Tensor method this calls
    return function


# torch's F functions that are a Tensor method, the tensor first
softplus = _torch_function(Tensor.softplus)
logsigmoid = _torch_function(Tensor.logsigmoid)
softsign = _torch_function(Tensor.softsign)
tanhshrink = _torch_function(Tensor.tanhshrink)
softshrink = _torch_function(Tensor.softshrink)
hardshrink = _torch_function(Tensor.hardshrink)
glu = _torch_function(Tensor.glu)
prelu = _torch_function(Tensor.prelu)
normalize = _torch_function(Tensor.normalize)
nll_loss = _torch_function(Tensor.nll_loss)
cross_entropy = _torch_function(Tensor.cross_entropy)
binary_cross_entropy = _torch_function(Tensor.binary_cross_entropy)
binary_cross_entropy_with_logits = _torch_function(Tensor.binary_cross_entropy_with_logits)
l1_loss = _torch_function(Tensor.l1_loss)
mse_loss = _torch_function(Tensor.mse_loss)
smooth_l1_loss = _torch_function(Tensor.smooth_l1_loss)
huber_loss = _torch_function(Tensor.huber_loss)
kl_div = _torch_function(Tensor.kl_div)
cosine_similarity = _torch_function(Tensor.cosine_similarity, "x1")
conv1d = _torch_function(Tensor.conv1d)
conv3d = _torch_function(Tensor.conv3d)
conv_transpose1d = _torch_function(Tensor.conv_transpose1d)
conv_transpose3d = _torch_function(Tensor.conv_transpose3d)
max_pool1d = _torch_function(Tensor.max_pool1d)
max_pool3d = _torch_function(Tensor.max_pool3d)
avg_pool1d = _torch_function(Tensor.avg_pool1d)
avg_pool3d = _torch_function(Tensor.avg_pool3d)
max_unpool1d = _torch_function(Tensor.max_unpool1d)
max_unpool3d = _torch_function(Tensor.max_unpool3d)
pad = _torch_function(Tensor.pad)
scaled_dot_product_attention = _torch_function(Tensor.scaled_dot_product_attention, "query")
