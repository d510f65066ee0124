"""limn.nn.functional: torch.nn.functional's names, signatures and defaults, as functions over Tensors.

The work is in limn-core's composed catalogue (limn.composed.functional and the Tensor methods); this module is
torch's F spelling of it, so `import limn.nn.functional as F` reads as ported code expects. torch's inplace=True
has no lazy equivalent, so it raises rather than quietly computing out of place.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from limn.composed.functional import activations, losses
from limn.composed.functional.attention import scaled_dot_product_attention
from limn.composed.functional.conv_transpose import conv_transpose1d, conv_transpose2d, conv_transpose3d
from limn.composed.functional.convolution import conv1d, conv2d, conv3d
from limn.composed.functional.pooling import (
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
from limn.composed.functional.resample import interpolate
from limn.composed.functional.unpooling import max_unpool1d, max_unpool2d, max_unpool3d
from limn.composed.indexed import lookups
from limn.composed.movement.padding import pad
from limn.dtypes import DType
from limn.frontend.tensor import Tensor
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


# The work is in limn.composed.functional.activations and limn.composed.functional.losses (Tensor methods too); these
# are torch's F spellings. torch's inplace=True has no lazy equivalent, so it raises rather than quietly computing out
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
