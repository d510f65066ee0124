"""The user API: the Tensor class of limn.frontend.primitives with every composed op attached, the map of the API.

Tensor methods never compute. The primitives (limn.frontend.primitives) build one Node each; every other method is
a function of one module per idea, composed from primitives with its formula in a comment, and attached
here under its name, so a device that implements the 19 primitives runs all of it. "Where is
Tensor.softmax?" is answered below: limn.composed.reduce.reductions. Bytes appear only at .numpy(), .item() or
.realize(). Pipeline: **tensor** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from functools import partialmethod

from limn import dtypes
from limn.composed import conversions, creation
from limn.composed.creation import manual_seed
from limn.composed.functional import (
    activations,
    attention,
    conv_transpose,
    convolution,
    losses,
    pooling,
    resample,
    sdpa,  # noqa: F401 (registers the fused attention CUSTOM ops, which attention calls by name)
    unpooling,
)
from limn.composed.indexed import indexing, lookups, scatter
from limn.composed.math import bitwise, elementwise, infinity, logexp, power, rounding, trig
from limn.composed.movement import padding, rearrange, shaping, triangles
from limn.composed.random import sampling
from limn.composed.reduce import einsum, matmul, moments, reductions, scans, sorting
from limn.frontend.arguments import Scalar, TensorLike
from limn.frontend.primitives import Tensor
from limn.runtime.engine import observers, realize

__all__ = ["Scalar", "Tensor", "TensorLike", "manual_seed", "observers", "realize"]

# ---- creation (static methods, as torch's torch.zeros and friends) ----
Tensor.zeros = staticmethod(creation.zeros)
Tensor.ones = staticmethod(creation.ones)
Tensor.arange = staticmethod(creation.arange)
Tensor.eye = staticmethod(creation.eye)
Tensor.rand = staticmethod(creation.rand)
Tensor.randn = staticmethod(creation.randn)
Tensor.zeros_like = creation.zeros_like
Tensor.ones_like = creation.ones_like

# ---- shaping and indexing (limn.composed.movement.shaping) ----
Tensor.broadcast_to = shaping.broadcast_to
Tensor.transpose = shaping.transpose
Tensor.T = property(shaping.reverse_dims)
Tensor.flatten = shaping.flatten
Tensor.squeeze = shaping.squeeze
Tensor.unsqueeze = shaping.unsqueeze
Tensor.cat = shaping.cat  # not static: Tensor.cat([a, b]) and a.cat(b) both reach it with every tensor
Tensor.stack = shaping.stack
Tensor.split = shaping.split
Tensor.chunk = shaping.chunk
Tensor.__iter__ = shaping.iterate

# ---- composed elementwise ops (limn.composed.math.elementwise) ----
Tensor.sub = elementwise.sub
Tensor.div = elementwise.div
Tensor.eq = elementwise.eq
Tensor.ne = elementwise.ne
Tensor.gt = elementwise.gt
Tensor.le = elementwise.le
Tensor.ge = elementwise.ge
Tensor.isnan = elementwise.isnan
Tensor.isinf = elementwise.isinf
Tensor.isfinite = elementwise.isfinite
Tensor.logical_not = elementwise.logical_not
Tensor.logical_and = elementwise.logical_and
Tensor.logical_or = elementwise.logical_or
Tensor.relu = elementwise.relu
Tensor.sigmoid = elementwise.sigmoid
Tensor.tanh = elementwise.tanh
Tensor.erf = elementwise.erf
Tensor.gelu = elementwise.gelu
Tensor.silu = elementwise.silu
Tensor.sign = elementwise.sign
Tensor.abs = elementwise.abs
Tensor.square = elementwise.square
Tensor.rsqrt = elementwise.rsqrt
Tensor.maximum = elementwise.maximum
Tensor.minimum = elementwise.minimum
Tensor.clip = elementwise.clip

# ---- powers (limn.composed.math.power) ----
Tensor.pow = power.pow
Tensor.rpow = power.rpow

# ---- reductions and matmul (limn.composed.reduce.reductions) ----
Tensor.sum = reductions.sum
Tensor.max = reductions.max
Tensor.min = reductions.min
Tensor.mean = reductions.mean
Tensor.var = moments.var
Tensor.std = moments.std
Tensor.logsumexp = reductions.logsumexp
Tensor.argmax = reductions.argmax
Tensor.argmin = reductions.argmin
Tensor.any = reductions.any
Tensor.all = reductions.all
Tensor.matmul = matmul.matmul
Tensor.dot = matmul.dot

# ---- lookups (limn.composed.indexed.lookups) ----
Tensor.embedding = lookups.embedding
Tensor.one_hot = lookups.one_hot

# ---- activations and losses (limn.composed.functional.activations, limn.composed.functional.losses) ----
Tensor.leaky_relu = activations.leaky_relu
Tensor.elu = activations.elu
Tensor.selu = activations.selu
Tensor.celu = activations.celu
Tensor.softplus = activations.softplus
Tensor.logsigmoid = activations.logsigmoid
Tensor.mish = activations.mish
Tensor.swish = activations.swish
Tensor.quick_gelu = activations.quick_gelu
Tensor.softsign = activations.softsign
Tensor.tanhshrink = activations.tanhshrink
Tensor.hardtanh = activations.hardtanh
Tensor.relu6 = activations.relu6
Tensor.hardsigmoid = activations.hardsigmoid
Tensor.hardswish = activations.hardswish
Tensor.threshold = activations.threshold
Tensor.softshrink = activations.softshrink
Tensor.hardshrink = activations.hardshrink
Tensor.prelu = activations.prelu
Tensor.glu = activations.glu
Tensor.normalize = activations.normalize
Tensor.softmin = activations.softmin
Tensor.softmax = activations.softmax  # reductions.softmax with torch's dim= and dtype= beside axis=
Tensor.log_softmax = activations.log_softmax
Tensor.nll_loss = losses.nll_loss
Tensor.cross_entropy = losses.cross_entropy
Tensor.sparse_categorical_crossentropy = losses.sparse_categorical_crossentropy
Tensor.binary_cross_entropy = losses.binary_cross_entropy
Tensor.binary_cross_entropy_with_logits = losses.binary_cross_entropy_with_logits
Tensor.binary_crossentropy = losses.binary_crossentropy
Tensor.binary_crossentropy_logits = losses.binary_crossentropy_logits
Tensor.l1_loss = losses.l1_loss
Tensor.mse_loss = losses.mse_loss
Tensor.smooth_l1_loss = losses.smooth_l1_loss
Tensor.huber_loss = losses.huber_loss
Tensor.kl_div = losses.kl_div
Tensor.cosine_similarity = losses.cosine_similarity

# ---- dtypes: conversion methods and torch's small spellings (limn.composed.conversions) ----
Tensor.to = conversions.to
Tensor.type = conversions.type_
Tensor.type_as = conversions.type_as
Tensor.double = conversions.caster("double", dtypes.float64)
Tensor.float = conversions.caster("float", dtypes.float32)
Tensor.half = conversions.caster("half", dtypes.float16)
Tensor.bfloat16 = conversions.caster("bfloat16", dtypes.bfloat16)
Tensor.long = conversions.caster("long", dtypes.int64)
Tensor.int = conversions.caster("int", dtypes.int32)
Tensor.short = conversions.caster("short", dtypes.int16)
Tensor.char = conversions.caster("char", dtypes.int8)
Tensor.byte = conversions.caster("byte", dtypes.uint8)
Tensor.bool = conversions.caster("bool", dtypes.bool_)
Tensor.dim = conversions.dim
Tensor.ndimension = conversions.dim
Tensor.nelement = Tensor.numel
Tensor.element_size = conversions.element_size
Tensor.is_floating_point = conversions.is_floating_point
Tensor.is_signed = conversions.is_signed


# ---- reductions, scans and sorting ----
Tensor.prod = reductions.prod
Tensor.nansum = reductions.nansum
Tensor.nanmean = reductions.nanmean
Tensor.amax = reductions.amax
Tensor.amin = reductions.amin
Tensor.aminmax = reductions.aminmax
Tensor.std_mean = moments.std_mean
Tensor.var_mean = moments.var_mean
Tensor.count_nonzero = reductions.count_nonzero
Tensor.norm = reductions.norm
Tensor.vector_norm = reductions.vector_norm
Tensor.cumsum = scans.cumsum
Tensor.cumprod = scans.cumprod
Tensor.cummax = scans.cummax
Tensor.cummin = scans.cummin
Tensor.logcumsumexp = scans.logcumsumexp
Tensor.sort = sorting.sort
Tensor.argsort = sorting.argsort
Tensor.msort = sorting.msort
Tensor.topk = sorting.topk
Tensor.kthvalue = sorting.kthvalue
Tensor.median = sorting.median
Tensor.unique = sorting.unique
Tensor.searchsorted = sorting.searchsorted
Tensor.bucketize = sorting.bucketize

# ---- movement, indexing and creation: torch's spellings, dim= beside axis= ----
Tensor.expand_as = shaping.expand_as
Tensor.view = shaping.view
Tensor.view_as = shaping.view_as
Tensor.reshape_as = shaping.view_as
Tensor.swapaxes = shaping.transpose
Tensor.swapdims = shaping.transpose
Tensor.movedim = shaping.movedim
Tensor.moveaxis = shaping.movedim
Tensor.t = shaping.t
Tensor.mT = property(shaping.matrix_transpose)
Tensor.unflatten = shaping.unflatten
Tensor.narrow = shaping.narrow
Tensor.select = shaping.select
Tensor.unbind = shaping.unbind
Tensor.clone = shaping.clone
Tensor.flip = rearrange.flip
Tensor.roll = rearrange.roll
Tensor.repeat = rearrange.repeat
Tensor.tile = rearrange.tile
Tensor.repeat_interleave = rearrange.repeat_interleave
Tensor.unfold = rearrange.unfold
Tensor.pad = padding.pad  # limn's (before, after) per dim, or torch's flat F.pad order; modes
Tensor.tril = triangles.tril
Tensor.triu = triangles.triu
Tensor.diagonal = triangles.diagonal
Tensor.diag = triangles.diag
Tensor.diag_embed = triangles.diag_embed
Tensor.__getitem__ = indexing.getitem
Tensor.__setitem__ = indexing.setitem
Tensor.scatter = scatter.scatter
Tensor.scatter_reduce = scatter.scatter_reduce
Tensor.index_select = scatter.index_select
Tensor.index_add = scatter.index_add
Tensor.index_copy = scatter.index_copy
Tensor.index_fill = scatter.index_fill
Tensor.take_along_dim = scatter.take_along_dim
Tensor.masked_fill = scatter.masked_fill
Tensor.masked_select = scatter.masked_select
Tensor.masked_scatter = scatter.masked_scatter
Tensor.nonzero = scatter.nonzero
Tensor.argwhere = scatter.argwhere
Tensor.take = scatter.take
Tensor.index_put = indexing.index_put
Tensor.index_put_ = indexing.in_place(indexing.index_put)
Tensor.tril_ = indexing.in_place(triangles.tril)
Tensor.triu_ = indexing.in_place(triangles.triu)
Tensor.rot90 = rearrange.rot90
Tensor.ravel = shaping.ravel
Tensor.masked_fill_ = indexing.in_place(scatter.masked_fill)
Tensor.masked_scatter_ = indexing.in_place(scatter.masked_scatter)
Tensor.index_fill_ = indexing.in_place(scatter.index_fill)
Tensor.index_add_ = indexing.in_place(scatter.index_add)
Tensor.index_copy_ = indexing.in_place(scatter.index_copy)
Tensor.scatter_ = indexing.in_place(scatter.scatter)
Tensor.scatter_add_ = indexing.in_place(Tensor.scatter_add)
Tensor.scatter_reduce_ = indexing.in_place(scatter.scatter_reduce)
Tensor.fill_ = indexing.in_place(indexing.fill)
Tensor.copy_ = indexing.in_place(indexing.copy)
Tensor.zero_ = indexing.in_place(creation.zeros_like)
Tensor.full_like = creation.full_like
Tensor.empty = staticmethod(creation.empty)
Tensor.empty_like = creation.empty_like
Tensor.linspace = staticmethod(creation.linspace)
Tensor.logspace = staticmethod(creation.logspace)
Tensor.meshgrid = creation.meshgrid  # not static: x.meshgrid(y) takes self as the first tensor
Tensor.tril_indices = staticmethod(creation.tril_indices)
Tensor.triu_indices = staticmethod(creation.triu_indices)
Tensor.new_full = creation.new_full
Tensor.new_zeros = creation.new_zeros
Tensor.new_ones = creation.new_ones
Tensor.new_empty = creation.new_zeros
Tensor.einsum = staticmethod(einsum.einsum)

# ---- random numbers from the device generator ----
Tensor.randint = staticmethod(sampling.randint)
Tensor.randperm = staticmethod(sampling.randperm)
Tensor.rand_like = sampling.rand_like
Tensor.randn_like = sampling.randn_like
Tensor.randint_like = sampling.randint_like
Tensor.bernoulli = sampling.bernoulli
Tensor.dropout = sampling.dropout
Tensor.multinomial = sampling.multinomial

# ---- nn layers as methods, as tinygrad's ----
Tensor.scaled_dot_product_attention = attention.scaled_dot_product_attention
# the 2d names take any number of spatial dims, read from the weight or kernel_size (tinygrad's rule); the
# 1d and 3d names are torch's functions, rank checks included
Tensor.conv2d = convolution.conv_method
Tensor.conv1d = convolution.conv1d
Tensor.conv3d = convolution.conv3d
Tensor.conv_transpose2d = conv_transpose.conv_transpose_method
Tensor.conv_transpose1d = conv_transpose.conv_transpose1d
Tensor.conv_transpose3d = conv_transpose.conv_transpose3d
Tensor.max_pool2d = pooling.max_pool_method
Tensor.max_pool1d = pooling.max_pool1d
Tensor.max_pool3d = pooling.max_pool3d
Tensor.avg_pool2d = pooling.avg_pool_method
Tensor.avg_pool1d = pooling.avg_pool1d
Tensor.avg_pool3d = pooling.avg_pool3d
Tensor.max_unpool2d = unpooling.max_unpool_method
Tensor.max_unpool1d = unpooling.max_unpool1d
Tensor.max_unpool3d = unpooling.max_unpool3d
Tensor.interpolate = resample.interpolate_method


# ---- elementwise math, with its operators ----
Tensor.sin = trig.sin
Tensor.cos = trig.cos
Tensor.tan = trig.tan
Tensor.asin = trig.asin
Tensor.acos = trig.acos
Tensor.atan = trig.atan
Tensor.arcsin = trig.asin
Tensor.arccos = trig.acos
Tensor.arctan = trig.atan
Tensor.atan2 = trig.atan2
Tensor.arctan2 = trig.atan2
Tensor.sinh = trig.sinh
Tensor.cosh = trig.cosh
Tensor.asinh = trig.asinh
Tensor.acosh = trig.acosh
Tensor.atanh = trig.atanh
Tensor.arcsinh = trig.asinh
Tensor.arccosh = trig.acosh
Tensor.arctanh = trig.atanh
Tensor.exp2 = logexp.exp2
Tensor.log2 = logexp.log2
Tensor.log10 = logexp.log10
Tensor.log1p = logexp.log1p
Tensor.expm1 = logexp.expm1
Tensor.logaddexp = logexp.logaddexp
Tensor.logaddexp2 = logexp.logaddexp2
Tensor.hypot = logexp.hypot
Tensor.copysign = logexp.copysign
Tensor.lerp = logexp.lerp
Tensor.isclose = logexp.isclose
Tensor.allclose = logexp.allclose
Tensor.floor = rounding.floor
Tensor.ceil = rounding.ceil
Tensor.round = rounding.round
Tensor.trunc = rounding.trunc
Tensor.fix = rounding.trunc
Tensor.frac = rounding.frac
Tensor.signbit = rounding.signbit
Tensor.fmod = rounding.fmod
Tensor.remainder = rounding.remainder
Tensor.floor_divide = rounding.floor_divide
Tensor.subtract = elementwise.sub
Tensor.multiply = Tensor.mul
Tensor.true_divide = elementwise.div
Tensor.divide = elementwise.div
Tensor.negative = Tensor.neg
Tensor.absolute = elementwise.abs
Tensor.sgn = elementwise.sign
Tensor.clamp = elementwise.clamp
Tensor.clamp_min = elementwise.clamp_min
Tensor.clamp_max = elementwise.clamp_max
Tensor.nan_to_num = elementwise.nan_to_num
Tensor.bitwise_and = bitwise.bitwise_and
Tensor.bitwise_or = bitwise.bitwise_or
Tensor.bitwise_xor = bitwise.bitwise_xor
Tensor.bitwise_not = bitwise.bitwise_not
Tensor.bitwise_left_shift = bitwise.left_shift
Tensor.bitwise_right_shift = bitwise.right_shift


Tensor.__floordiv__ = rounding.floor_divide
Tensor.__rfloordiv__ = partialmethod(rounding.floor_divide, reverse=True)
Tensor.__mod__ = rounding.remainder
Tensor.__rmod__ = partialmethod(rounding.remainder, reverse=True)
Tensor.__and__ = bitwise.bitwise_and
Tensor.__rand__ = partialmethod(bitwise.bitwise_and, reverse=True)
Tensor.__or__ = bitwise.bitwise_or
Tensor.__ror__ = partialmethod(bitwise.bitwise_or, reverse=True)
Tensor.__xor__ = bitwise.bitwise_xor
Tensor.__rxor__ = partialmethod(bitwise.bitwise_xor, reverse=True)
Tensor.__invert__ = bitwise.bitwise_not
Tensor.__lshift__ = bitwise.left_shift
Tensor.__rlshift__ = partialmethod(bitwise.left_shift, reverse=True)
Tensor.__rshift__ = bitwise.right_shift
Tensor.__rrshift__ = partialmethod(bitwise.right_shift, reverse=True)


# ---- math fixes: isposinf, isneginf (limn.composed.math.infinity) ----
Tensor.isposinf = infinity.isposinf
Tensor.isneginf = infinity.isneginf


# ---- python operators: a @ b, 2 - x, x ** 3, x == y (elementwise, a bool tensor, as torch) ----


def _rmatmul(x: Tensor, other: TensorLike) -> Tensor:
    return Tensor(other).matmul(x)


Tensor.__add__ = Tensor.add
Tensor.__radd__ = partialmethod(Tensor.add, reverse=True)
Tensor.__sub__ = elementwise.sub
Tensor.__rsub__ = partialmethod(Tensor.sub, reverse=True)
Tensor.__mul__ = Tensor.mul
Tensor.__rmul__ = partialmethod(Tensor.mul, reverse=True)
Tensor.__truediv__ = elementwise.div
Tensor.__rtruediv__ = partialmethod(Tensor.div, reverse=True)
Tensor.__pow__ = power.pow
Tensor.__rpow__ = power.rpow
Tensor.__matmul__ = matmul.matmul
Tensor.__rmatmul__ = _rmatmul
Tensor.__neg__ = Tensor.neg
Tensor.__lt__ = Tensor.lt
Tensor.__gt__ = elementwise.gt
Tensor.__le__ = elementwise.le
Tensor.__ge__ = elementwise.ge
Tensor.__eq__ = elementwise.eq  # a tensor keeps object's hash: it is defined by identity, as a dict key
Tensor.__ne__ = elementwise.ne


# ---- torch's in-place spellings, last: they wrap the methods above ----
# x.add_(y) writes x.add(y) into x, by setitem's rules
for _name in (
    "add", "sub", "mul", "div", "pow", "clamp", "clip", "clamp_min", "clamp_max", "neg", "abs", "exp", "log",
    "sqrt", "reciprocal", "relu", "sigmoid", "tanh", "sin", "cos", "floor", "ceil", "round", "trunc", "frac",
    "sign", "square", "lerp", "fmod", "remainder", "maximum", "minimum", "nan_to_num", "logical_not", "erf",
    "expm1", "log1p", "rsqrt", "floor_divide",
):  # fmt: skip
    setattr(Tensor, f"{_name}_", indexing.in_place(getattr(Tensor, _name)))
