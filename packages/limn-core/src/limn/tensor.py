"""The user API: the Tensor class of limn.primitives with every composed op attached, the map of the API.

Tensor methods never compute. The primitives (limn.primitives) build one Node each; every other method is
a function of one module per idea, composed from primitives with its formula in a comment, and attached
here under its name, so a device that implements the 19 primitives runs all of it. "Where is
Tensor.softmax?" is answered below: limn.reductions. Bytes appear only at .numpy(), .item() or .realize().
Pipeline: **tensor** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from limn import bitwise, creation, elementwise, logexp, lookups, power, reductions, rounding, shaping, trig
from limn.creation import manual_seed
from limn.engine import observers, realize
from limn.primitives import Scalar, Tensor, TensorLike

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

# ---- shaping and indexing (limn.shaping) ----
Tensor.broadcast_to = shaping.broadcast_to
Tensor.transpose = shaping.transpose
Tensor.T = property(shaping.reverse_dims)
Tensor.flatten = shaping.flatten
Tensor.squeeze = shaping.squeeze
Tensor.unsqueeze = shaping.unsqueeze
Tensor.cat = staticmethod(shaping.cat)
Tensor.stack = staticmethod(shaping.stack)
Tensor.split = shaping.split
Tensor.chunk = shaping.chunk
Tensor.__getitem__ = shaping.getitem
Tensor.__iter__ = shaping.iterate

# ---- composed elementwise ops (limn.elementwise) ----
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
Tensor.clamp = elementwise.clip

# ---- powers (limn.power) ----
Tensor.pow = power.pow
Tensor.rpow = power.rpow

# ---- reductions and matmul (limn.reductions) ----
Tensor.sum = reductions.sum
Tensor.max = reductions.max
Tensor.min = reductions.min
Tensor.mean = reductions.mean
Tensor.var = reductions.var
Tensor.std = reductions.std
Tensor.logsumexp = reductions.logsumexp
Tensor.softmax = reductions.softmax
Tensor.log_softmax = reductions.log_softmax
Tensor.argmax = reductions.argmax
Tensor.argmin = reductions.argmin
Tensor.any = reductions.any
Tensor.all = reductions.all
Tensor.matmul = reductions.matmul
Tensor.dot = reductions.dot

# ---- lookups and losses (limn.lookups) ----
Tensor.embedding = lookups.embedding
Tensor.one_hot = lookups.one_hot
Tensor.cross_entropy = lookups.cross_entropy


# ---- elementwise math (limn.trig, limn.logexp, limn.rounding, limn.bitwise), with their operators ----
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
Tensor.add = elementwise.add  # with alpha=, as torch; __add__ below takes it
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


def _rfloordiv(x: Tensor, other: TensorLike) -> Tensor:
    return rounding.floor_divide(x, other, reverse=True)


def _rmod(x: Tensor, other: TensorLike) -> Tensor:
    return rounding.remainder(x, other, reverse=True)


def _rand(x: Tensor, other: TensorLike) -> Tensor:
    return bitwise.bitwise_and(x, other, reverse=True)


def _ror(x: Tensor, other: TensorLike) -> Tensor:
    return bitwise.bitwise_or(x, other, reverse=True)


def _rxor(x: Tensor, other: TensorLike) -> Tensor:
    return bitwise.bitwise_xor(x, other, reverse=True)


def _rlshift(x: Tensor, other: TensorLike) -> Tensor:
    return bitwise.left_shift(x, other, reverse=True)


def _rrshift(x: Tensor, other: TensorLike) -> Tensor:
    return bitwise.right_shift(x, other, reverse=True)


Tensor.__floordiv__ = rounding.floor_divide
Tensor.__rfloordiv__ = _rfloordiv
Tensor.__mod__ = rounding.remainder
Tensor.__rmod__ = _rmod
Tensor.__and__ = bitwise.bitwise_and
Tensor.__rand__ = _rand
Tensor.__or__ = bitwise.bitwise_or
Tensor.__ror__ = _ror
Tensor.__xor__ = bitwise.bitwise_xor
Tensor.__rxor__ = _rxor
Tensor.__invert__ = bitwise.bitwise_not
Tensor.__lshift__ = bitwise.left_shift
Tensor.__rlshift__ = _rlshift
Tensor.__rshift__ = bitwise.right_shift
Tensor.__rrshift__ = _rrshift


# ---- python operators: a @ b, 2 - x, x ** 3, x == y (elementwise, a bool tensor, as torch) ----


def _radd(x: Tensor, other: TensorLike) -> Tensor:
    return x.add(other, reverse=True)


def _rmul(x: Tensor, other: TensorLike) -> Tensor:
    return x.mul(other, reverse=True)


def _rsub(x: Tensor, other: TensorLike) -> Tensor:
    return x.sub(other, reverse=True)


def _rtruediv(x: Tensor, other: TensorLike) -> Tensor:
    return x.div(other, reverse=True)


def _rmatmul(x: Tensor, other: TensorLike) -> Tensor:
    return Tensor(other).matmul(x)


Tensor.__add__ = Tensor.add
Tensor.__radd__ = _radd
Tensor.__sub__ = elementwise.sub
Tensor.__rsub__ = _rsub
Tensor.__mul__ = Tensor.mul
Tensor.__rmul__ = _rmul
Tensor.__truediv__ = elementwise.div
Tensor.__rtruediv__ = _rtruediv
Tensor.__pow__ = power.pow
Tensor.__rpow__ = power.rpow
Tensor.__matmul__ = reductions.matmul
Tensor.__rmatmul__ = _rmatmul
Tensor.__neg__ = Tensor.neg
Tensor.__lt__ = Tensor.lt
Tensor.__gt__ = elementwise.gt
Tensor.__le__ = elementwise.le
Tensor.__ge__ = elementwise.ge
Tensor.__eq__ = elementwise.eq  # a tensor keeps object's hash: it is defined by identity, as a dict key
Tensor.__ne__ = elementwise.ne
