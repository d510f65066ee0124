"""Layers, activations and losses, and the walk that finds a model's parameters.

A module is a plain class: it keeps its parameters as Tensor attributes and computes in __call__. There is
no base class to inherit and nothing to register: parameters(obj) and named_parameters(obj) walk any
object's attributes (modules, lists, tuples, dicts) and find every Tensor that requires grad, named by the
path taken to it (`layers.0.attn.weight`) as torch names it. Weights use torch's layouts and inits, so a
state_dict moves between the two untransposed.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Sequence

import numpy as np

from limn import activations, dtypes, lookups, losses
from limn.dtypes import DType
from limn.tensor import Tensor

# isort: split
# the train family's names: the parameter walk, Module, limn.nn.init and limn.nn.utils (gradient clipping)
from limn import nn_init as init
from limn import nn_utils as utils
from limn.module import Dropout, Module
from limn.nn_utils import clip_grad_norm_, clip_grad_value_
from limn.walk import load_state_dict, named_parameters, parameters, state_dict

sys.modules[f"{__name__}.init"], sys.modules[f"{__name__}.utils"] = init, utils  # from limn.nn.init import ...

__all__ = [
    "Conv1d",
    "Conv2d",
    "Embedding",
    "LayerNorm",
    "Linear",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "conv",
    "cosine_similarity",
    "cross_entropy",
    "elu",
    "gelu",
    "glu",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "leaky_relu",
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


def _tuple(value: IntOrPair, n: int, what: str) -> tuple[int, ...]:
    out = (value,) * n if isinstance(value, int) else tuple(value)
    if len(out) != n or not all(isinstance(v, int) for v in out):
        raise ValueError(f"{what} must be an int or {n} ints, got {value!r}")
    return out


class _ConvNd:
    """Conv1d and Conv2d share this: torch's layouts and init, and the computation in _conv."""

    dims = 0  # spatial dims: 1 or 2

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrPair,
        stride: IntOrPair = 1,
        padding: IntOrPair = 0,
        dilation: IntOrPair = 1,
        groups: int = 1,
        bias: bool = True,
        dtype: DType = dtypes.float32,
    ):
        name = type(self).__name__
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both divide "
                f"by groups ({groups})"
            )
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, self.dims, f"{name} kernel_size")
        self.stride = _tuple(stride, self.dims, f"{name} stride")
        self.padding = _tuple(padding, self.dims, f"{name} padding")
        self.dilation = _tuple(dilation, self.dims, f"{name} dilation")
        if min(self.kernel_size + self.stride + self.dilation) < 1 or min(self.padding) < 0:
            raise ValueError(f"{name}: kernel_size, stride and dilation must be >= 1 and padding >= 0")
        fan_in = in_channels // groups * math.prod(self.kernel_size)
        bound = 1 / math.sqrt(fan_in)
        self.weight = _uniform((out_channels, in_channels // groups, *self.kernel_size), bound, dtype)
        self.bias = _uniform((out_channels,), bound, dtype) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return conv(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


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


def conv(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    groups: int,
) -> Tensor:
    """N-d convolution as torch computes it: (B, C, *in) and weight (O, C / groups, *k) -> (B, O, *out).

    Each kernel tap's cells are a shifted (and for a stride, strided) view of the padded input; one copy
    lays them out as the rows of an im2col matrix (B, G, Cg k, P), whose columns are contiguous, and one
    matmul with the weight makes the output (B, G, Og, P) directly, which the c device runs as a
    register-tiled nest: a conv forward is that copy, the matmul and the bias add. Kernels of more than
    MAX_CAT_TAPS taps cut their windows with _windows instead.
    """
    n = weight.ndim - 2
    if x.ndim != n + 2 or x.shape[1] != weight.shape[1] * groups:
        raise ValueError(
            f"conv: input {x.shape} does not fit weight {weight.shape} with groups={groups}: expected "
            f"(batch, {weight.shape[1] * groups}, {n} spatial dims)"
        )
    kernel = weight.shape[2:]
    padded = tuple(i + 2 * p for i, p in zip(x.shape[2:], padding))
    outs = tuple((i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(padded, kernel, stride, dilation))
    if min(outs) < 1:
        raise ValueError(
            f"conv: input {padded} (padded) is smaller than the dilated kernel {kernel} "
            f"(dilation {tuple(dilation)}); the output would be empty"
        )
    b, c, o, g = x.shape[0], x.shape[1], weight.shape[0], groups
    cg, og = c // g, o // g
    taps, cells = cg * math.prod(kernel), math.prod(outs)
    if math.prod(kernel) <= MAX_CAT_TAPS:
        cols = _tap_rows(x, kernel, stride, padding, dilation, outs)  # (B, C, k1 ... kn, P): one copy
        cols = cols.reshape(b, g, taps, cells)  # (B, G, Cg k, P)
        y = weight.reshape(g, og, taps) @ cols  # (G, Og, Cg k) @ (B, G, Cg k, P) -> (B, G, Og, P)
    else:
        x = x.pad(((0, 0), (0, 0), *((p, p) for p in padding)))
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


# Up to this many taps (3 x 3 x 3) the im2col rows are one cat of shifted views, which the c device copies in
# one vectorized pass; the cat's kernel holds a load per tap per piece, so its source grows as taps**2, and
# larger kernels (7 x 7 and up) cut their windows with _windows instead.
MAX_CAT_TAPS = 27


def _tap_rows(
    x: Tensor,
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    outs: Sequence[int],
) -> Tensor:
    """(B, C, *i) -> (B, C, T, P), T = prod(kernel) taps in row-major order, P = prod(outs):
    [b, c, t, p] holds the cell of the padded x that tap t reads for output cell p. Each tap is a view
    of x (see _tap_cells), and the cat of them is the one copy."""
    b, c, n = x.shape[0], x.shape[1], len(kernel)
    taps = list(itertools.product(*(range(k) for k in kernel)))
    x = x.unsqueeze(2)  # (B, C, 1, *i): the taps' axis, which each tap's pad stretches to T
    cols = None
    for t, tap in enumerate(taps):
        # one pad per tap does the conv's padding and places the tap at row t of the T taps (what a cat of
        # the taps along axis 2 would pad them with), so the taps add up to the im2col rows
        view, widths = x, [(0, 0), (0, 0), (t, len(taps) - 1 - t)]
        for ax in range(n):
            first = tap[ax] * dilation[ax] - padding[ax]  # where the tap's first output cell reads in x
            view, width = _tap_cells(view, 3 + ax, first, stride[ax], outs[ax])  # (.., o - padding, ..)
            widths.append(width)
        # padded last: a reshape of a padded view would be a copy, and each strided dim reshapes
        row = view.pad(tuple(widths))  # (B, C, T, *o), zero off row t
        cols = row if cols is None else cols + row
    if len(taps) == 1:  # a 1 x 1 kernel: the matmul reads x through the view, no copy
        return cols.reshape(b, c, 1, math.prod(outs))
    # stored, so the reshape to P cells is a view of the copy, not a reshape of each shifted view
    return cols.contiguous().reshape(b, c, len(taps), math.prod(outs))  # (B, C, T, P)


def _tap_cells(x: Tensor, axis: int, first: int, step: int, count: int) -> tuple[Tensor, tuple[int, int]]:
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
            x, column = x.pad(tuple(widths)), start
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
        x = x.pad(((0, 0), (0, 0), *((0, e) for e in extra)))
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

__all__ += ["Dropout", "Module", "clip_grad_norm_", "clip_grad_value_", "init", "utils"]
