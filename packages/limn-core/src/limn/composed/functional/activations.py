"""The activations torch.nn.functional has, composed from primitives: leaky_relu, elu, softplus, mish, hardswish...

Each takes a tensor (and torch's parameters, names and defaults) and gives a tensor with torch's values and
gradients, at the kinks too (each docstring names torch's choice there; at NaN, torch's vectorized CPU kernels',
where its scalar ones differ). softplus, logsigmoid, elu and mish never overflow: |x| to 3e38 stays finite.
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn.composed.math import derivative
from limn.composed.math.stable import expm1, log1p, log1p_exp
from limn.dtypes import DType
from limn.errors import ArgumentError
from limn.frontend.arguments import aliases, axis_is_dim, normalize_axis
from limn.graph.ops import Op

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

# torch's SELU constants (Klambauer et al. 2017), to the digits torch spells them
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _floats_only(x: Tensor, what: str) -> Tensor:
    """x itself when it is a float tensor: torch has no int kernel for `what`, and raises, so limn does too."""
    if not x.dtype.is_float:
        raise TypeError(
            f"{what}: torch defines it for float tensors only, and this one is {x.dtype.name}; "
            f"cast first, e.g. x.cast('float32').{what}()"
        )
    return x


# ---- helpers: the exponential family's kernel, softmax's shift, normalize's norms ----


def _elu(x: Tensor, alpha: float, scale: float, input_scale: float, what: str) -> Tensor:
    """torch's elu kernel: scale * x above 0, scale * alpha * expm1(input_scale * x) at and below 0 (and at
    NaN); so the gradient at 0 is scale * alpha * input_scale, and NaN at NaN."""
    x = _floats_only(x, what)
    positive = x.gt(0)
    curve = expm1(positive.where(0.0, x) * input_scale) * (alpha * scale)  # e**u - 1 for u <= 0 only
    return positive.where(x * scale, curve)


def silu(x: Tensor) -> Tensor:
    """x * sigmoid(x), as torch.nn.functional.silu (swish is its other name)."""
    return _floats_only(x, "silu").silu()


def _shifted(x: Tensor, dim: int | None, dtype: DType | str | None, what: str) -> tuple[Tensor, int]:
    """x cast to dtype (torch casts before the op) less its max along the one dim asked for (the last when
    None), and that dim. The shift keeps exp from overflowing and changes no softmax; the max is a constant
    to autograd, since the softmax's gradient does not depend on it."""
    x = x if dtype is None else x.cast(dtype)
    if not x.dtype.is_float:
        raise TypeError(f"{what} of a {x.dtype.name} tensor: torch has none; pass dtype='float32' or cast first")
    dim = normalize_axis(-1 if dim is None else dim, x.ndim, what)
    return x - x._reduce(Op.MAX, dim, keepdim=True).detach(), dim


def _norm(x: Tensor, p: float, dim: int) -> Tensor:
    """The p-norm over dim, kept as a size-1 dim, with gradient 0 where the norm is 0, as torch's."""
    if p == math.inf:
        return x.abs().amax(dim, keepdim=True)  # ties share the gradient, as torch's
    if p == 1:
        return x.abs().sum(dim, keepdim=True)
    if p == 2:
        total = (x * x).sum(dim, keepdim=True)
        nonzero = total.gt(0)
        # sqrt's gradient is inf at 0, where torch's is 0: the root takes 1 there, and the result is the 0
        return nonzero.where(nonzero.where(total, 1.0).sqrt(), total)
    # ||x||_p = m ||x / m||_p with m = max |x| (a constant to autograd, so the gradient is exact): the sum of
    # |x / m|**p is in [1, n], so its root's gradient (which divides by it) cannot overflow at a tiny x
    m = x.abs().amax(dim, keepdim=True).detach()
    nonzero = m.gt(0)
    scale = nonzero.where(m, 1.0)
    total = ((x / scale).abs() ** p).sum(dim, keepdim=True)
    return nonzero.where(scale * nonzero.where(total, 1.0) ** (1 / p), 0.0 * total)


def _norm_below_one(x: Tensor, p: float, dim: int) -> Tensor:
    """torch's vector_norm for p < 1 over dim, kept as a size-1 dim. p = 0 counts the nonzeros (gradient 0,
    as torch's), p = -inf is min |x|; any other p is (sum |x|**p) ** (1/p), carrying torch's gradient for
    p < 1, sgn(x) |x|**(p-1) norm**(1-p) with 0 where x = 0 (where |x|**(p-1) is inf: autograd's would be NaN)."""
    if p == 0:
        return x.ne(0).cast(x.dtype).sum(dim, keepdim=True).detach()  # ||x||_0 = the count of x != 0
    if p == -math.inf:
        return x.abs().amin(dim, keepdim=True)  # ||x||_-inf = min |x|; ties share the gradient, as torch's
    xd = x.detach()
    value = (xd.abs() ** p).sum(dim, keepdim=True) ** (1 / p)  # ||x||_p = (sum |x|**p) ** (1/p)

    def partial(x: Tensor, out: Tensor) -> tuple[Tensor]:
        return (x.eq(0).where(0.0, x.sign() * x.abs() ** (p - 1)) * out ** (1 - p),)

    return derivative.carry(value, (x,), partial)


class ActivationsMixin:
    """Tensor's activation functions beyond the common ones, softmax and its kin, and normalize."""

    __slots__ = ()

    # ---- the ReLU family: piecewise linear ----
    @aliases(neg_slope="negative_slope")  # tinygrad's name
    def leaky_relu(self, negative_slope: float = 0.01) -> Tensor:
        """x where x > 0, negative_slope * x elsewhere, as torch.

        Gradient: negative_slope at 0 and at NaN, as torch's. -0.0 stays -0.0.

        >>> Tensor([-2.0, 0.0, 3.0]).leaky_relu(0.5).tolist()
        [-1.0, 0.0, 3.0]
        """
        x = _floats_only(self, "leaky_relu")
        return x.gt(0).where(x, x * negative_slope)  # leaky_relu: x if x > 0 else slope * x

    def hardtanh(self, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
        """x clamped into [min_val, max_val], as torch: clamp's rule, gradient 1 strictly inside, 0 at and past
        the bounds and at NaN. Int tensors clamp as ints (integer-valued bounds stay ints).

        >>> Tensor([-2.0, 0.5, 3.0]).hardtanh().tolist()
        [-1.0, 0.5, 1.0]
        """
        if min_val > max_val:
            raise ArgumentError(f"hardtanh: min_val {min_val} is greater than max_val {max_val}; swap them")
        if not self.dtype.is_float and float(min_val).is_integer() and float(max_val).is_integer():
            return self.clip(int(min_val), int(max_val))
        return self.clip(min_val, max_val)  # hardtanh: clamp(x, min, max), gradient where min < x < max

    def relu6(self) -> Tensor:
        """min(max(x, 0), 6) = hardtanh(x, 0, 6), as torch: gradient 0 at 0, at 6 and at NaN.

        >>> Tensor([-1.0, 3.0, 7.0]).relu6().tolist()
        [0.0, 3.0, 6.0]
        """
        return self.hardtanh(0.0, 6.0)

    def hardsigmoid(self) -> Tensor:
        """x / 6 + 1/2 clamped into [0, 1], as torch. Gradient 1/6 strictly inside (-3, 3), 0 at -3 and 3
        and at NaN (torch's rule).

        >>> Tensor([-4.0, 0.0, 4.0]).hardsigmoid().tolist()
        [0.0, 0.5, 1.0]
        """
        x = _floats_only(self, "hardsigmoid")
        line = x * (1 / 6) + 0.5
        inside = x.gt(-3).logical_and(x.lt(3))
        return inside.where(line, line.detach().clip(0.0, 1.0))  # hardsigmoid: clamp(x/6 + 1/2, 0, 1)

    def hardswish(self) -> Tensor:
        """x * hardsigmoid(x), as torch: 0 (as x * 0) up to -3, x (x + 3) / 6 inside, x from 3 on.

        Gradient as torch's: 0 at and below -3, x/3 + 1/2 inside (-3, 3) (NaN at NaN), 1 at 3 and above. From
        3 on it is x * 6 / 6 as torch computes it, so 3e38 overflows to inf there as in torch.

        >>> Tensor([-4.0, 0.0, 1.5, 4.0]).hardswish().tolist()
        [-0.0, 0.0, 1.125, 4.0]
        """
        x = _floats_only(self, "hardswish")
        low, high = x.le(-3), x.ge(3)
        safe = low.logical_or(high).where(0.0, x)  # inside (-3, 3) or NaN: never a huge x, whose gradient is inf
        quadratic = safe * (safe + 3) * (1 / 6)
        return low.where(x * 0.0, high.where(x * 6.0 * (1 / 6), quadratic))  # hardswish: x * clamp(x + 3, 0, 6) / 6

    def threshold(self, threshold: float, value: float) -> Tensor:
        """value where x <= threshold, x elsewhere (NaN included), as torch.threshold; gradient 1 where x is
        kept, 0 where replaced. An int tensor stays int (the value is cast to it).

        >>> Tensor([0.5, 2.0]).threshold(1.0, -1.0).tolist()
        [-1.0, 2.0]
        """
        if not self.dtype.is_float:
            value = int(value)
        return self.le(threshold).where(value, self)  # threshold: value if x <= threshold else x

    def softshrink(self, lambd: float = 0.5) -> Tensor:
        """x - lambd above lambd, x + lambd below -lambd, +0.0 between, as torch. Gradient 1 outside, 0 in
        [-lambd, lambd] (its ends included) and at NaN.

        >>> Tensor([-2.0, 0.25, 2.0]).softshrink(1.0).tolist()
        [-1.0, 0.0, 1.0]
        """
        x = self
        if lambd < 0:
            raise ArgumentError(f"softshrink: lambd must be >= 0 (torch raises too), got {lambd}")
        x = _floats_only(x, "softshrink")
        outside = x.gt(lambd).logical_or(x.lt(-lambd))
        rest = x.detach() * 0.0 + 0.0  # +0.0 inside, NaN at NaN, both with gradient 0
        return outside.where(x.gt(0).where(x - lambd, x + lambd), rest)

    def hardshrink(self, lambd: float = 0.5) -> Tensor:
        """x outside [-lambd, lambd], +0.0 inside (its ends included), as torch; gradient 1 outside, 0 inside
        and at NaN.

        >>> Tensor([-2.0, 0.25, 2.0]).hardshrink(1.0).tolist()
        [-2.0, 0.0, 2.0]
        """
        x = _floats_only(self, "hardshrink")
        outside = x.gt(lambd).logical_or(x.lt(-lambd))
        return outside.where(x, x.detach() * 0.0 + 0.0)  # hardshrink: 0 if |x| <= lambd else x

    def prelu(self, weight: Tensor) -> Tensor:
        """x where x > 0, weight * x elsewhere, with one weight per channel (dim 1; a 0-d or 1-D input has one
        channel) or one for all, as torch. Gradient to x: weight at 0; to weight: x where x <= 0.

        >>> Tensor([[-2.0, 3.0]]).prelu(Tensor([0.5, 0.1])).tolist()
        [[-1.0, 3.0]]
        """
        x = _floats_only(self, "prelu")
        weight = weight if isinstance(weight, limn.Tensor) else limn.Tensor(weight, dtype=x.dtype)
        channels = x.shape[1] if x.ndim >= 2 else 1
        if weight.size not in (1, channels):
            raise ArgumentError(
                f"prelu: weight has {weight.size} values, but the input {x.shape} has {channels} channels "
                "(dim 1; one for an input of fewer than 2 dims); pass 1 weight or one per channel"
            )
        shape = (1,) * x.ndim if weight.size == 1 else (1, channels) + (1,) * (x.ndim - 2)
        w = weight.reshape(shape)  # (C,) -> (1, C, 1, ...), to broadcast over the batch and spatial dims
        positive = x.gt(0)
        return positive.where(x, w * positive.where(0.0, x))  # prelu: x if x > 0 else w x (w sees no x = inf)

    # ---- the exponential family ----
    def elu(self, alpha: float = 1.0) -> Tensor:
        """x above 0, alpha (e**x - 1) at and below, as torch. Gradient alpha at 0. elu(-0.0) is -0.0.

        >>> round(Tensor([-1.0]).elu().item(), 4)
        -0.6321
        """
        return _elu(self, alpha, 1.0, 1.0, "elu")

    def selu(self) -> Tensor:
        """scale * elu(x, alpha) with torch's constants (SELU_ALPHA, SELU_SCALE). Gradient scale * alpha at 0.

        >>> round(Tensor([1.0]).selu().item(), 4)
        1.0507
        """
        return _elu(self, SELU_ALPHA, SELU_SCALE, 1.0, "selu")

    def celu(self, alpha: float = 1.0) -> Tensor:
        """x above 0, alpha (e**(x / alpha) - 1) at and below, as torch. Gradient 1 at 0; alpha = 0 raises.

        >>> round(Tensor([-1.0]).celu(2.0).item(), 4)
        -0.7869
        """
        if alpha == 0:
            raise ArgumentError("celu: alpha cannot be 0 (it divides x; torch raises too)")
        return _elu(self, alpha, 1.0, 1.0 / alpha, "celu")

    def softplus(self, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
        """log(1 + e**(beta x)) / beta, and x itself where beta x > threshold, as torch.

        Gradient sigmoid(beta x) (1/2 at 0), 1 past the threshold, NaN at NaN. Stable for any |x|: 3e38 gives
        3e38 and -3e38 gives 0, where the plain formula gives inf and NaN.

        >>> round(Tensor([0.0]).softplus().item(), 4)
        0.6931
        """
        x = _floats_only(self, "softplus")
        bx = x * beta
        linear = bx.gt(threshold)
        curve = log1p_exp(linear.where(0.0, bx)) * (1 / beta if beta else math.inf)
        return linear.where(x, curve)  # softplus: log(1 + exp(beta x)) / beta, linear past threshold

    def logsigmoid(self) -> Tensor:
        """log(sigmoid(x)) = min(x, 0) - log1p(e**-|x|), as torch: stable for any |x| (-3e38 gives -3e38).
        Gradient sigmoid(-x) (1/2 at 0), NaN at NaN.

        >>> round(Tensor([0.0]).logsigmoid().item(), 4)
        -0.6931
        """
        x = _floats_only(self, "logsigmoid")
        negative = x.lt(0)
        tail = log1p(negative.where(x, -x).exp())  # log1p(e**-|x|)
        return negative.where(x - tail, 0.0 - tail)  # 0 - tail, so logsigmoid(inf) is +0.0 as torch's

    def mish(self) -> Tensor:
        """x * tanh(softplus(x)), as torch. tanh(softplus(x)) = n / (n + 2) with n = e**x (e**x + 2), taken
        as (1 + 2m) / (1 + 2m + 2m**2) with m = e**-x above 0, so no exp overflows: |x| up to 3e38 is finite
        (past 40 it is x itself).
        Gradient 0.6 at 0; at +-inf it is NaN, as torch's.

        >>> round(Tensor([1.0]).mish().item(), 4)
        0.8651
        """
        x = _floats_only(self, "mish")
        positive = x.gt(0)
        m = positive.where(-x, 0.0).exp()  # e**-x for x > 0, in (0, 1)
        e = positive.where(0.0, x).exp()  # e**x for x <= 0, in [0, 1]
        n = e * (e + 2)
        upper = (1 + 2 * m) / (1 + 2 * m + 2 * m * m)
        curve = x * positive.where(upper, n / (n + 2))  # mish: x tanh(log(1 + e**x))
        # past 40, tanh(softplus(x)) is 1 in float64 too: x itself, so a huge x (3e38) sends no 2x (inf) into
        # the curve's gradient; inf keeps the curve, whose gradient there is NaN as torch's
        return x.gt(40).logical_and(x.lt(math.inf)).where(x, curve)

    def quick_gelu(self) -> Tensor:
        """x * sigmoid(1.702 x), the sigmoid approximation of gelu (CLIP, tinygrad); torch has no function
        for it.

        >>> round(Tensor([1.0]).quick_gelu().item(), 4)
        0.8458
        """
        return self * (self * 1.702).sigmoid()

    # ---- the others: softsign, tanhshrink, glu ----
    def softsign(self) -> Tensor:
        """x / (1 + |x|), as torch (whose gradient through |x| is 1 at 0). An int tensor gives float32.

        >>> Tensor([-3.0, 1.0]).softsign().tolist()
        [-0.75, 0.5]
        """
        x = self
        x = x._float()
        return x / (1 + x.abs())

    def tanhshrink(self) -> Tensor:
        """x - tanh(x), as torch. An int tensor gives float32.

        >>> round(Tensor([1.0]).tanhshrink().item(), 4)
        0.2384
        """
        x = self
        x = x._float()
        return x - x.tanh() + 0.0  # + 0.0: tanhshrink(-0.0) is +0.0, as torch's -0.0 - tanh(-0.0)

    def glu(self, dim: int = -1) -> Tensor:
        """a * sigmoid(b), where a and b are the first and second halves of x along dim, as torch.

        >>> Tensor([[1.0, 0.0]]).glu().tolist()
        [[0.5]]
        """
        x = _floats_only(self, "glu")
        if x.ndim == 0:
            raise ArgumentError("glu: a 0-d tensor has no dim to halve (torch raises too); reshape it to (2,) or more")
        d = normalize_axis(dim, x.ndim, "glu")
        n = x.shape[d]
        if n % 2:
            raise ArgumentError(
                f"glu: dim {dim} of shape {x.shape} has odd size {n}, and glu halves it; it must be even"
            )
        box = [(0, s) for s in x.shape]
        first, second = list(box), list(box)
        first[d], second[d] = (0, n // 2), (n // 2, n)
        return x.shrink(first) * x.shrink(second).sigmoid()  # (..., n, ...) -> (..., n/2, ...)

    # ---- softmax with torch's dim= and dtype=, softmin, normalize ----
    @axis_is_dim
    def softmax(self, dim: int | None = None, dtype: DType | str | None = None) -> Tensor:
        """exp(x) / sum(exp(x)) along dim (the last when none is given), computed in dtype if given.

        Trap: torch.nn.functional.softmax without dim picks a dim from the rank (deprecated, with a warning);
        limn always takes the last.

        >>> Tensor([0.0, 0.0]).softmax(dim=0).tolist()
        [0.5, 0.5]
        """
        shifted, dim = _shifted(self, dim, dtype, "softmax")
        e = shifted.exp()
        return e / e.sum(dim, keepdim=True)  # softmax = exp(x - max) / sum exp(x - max)

    @axis_is_dim
    def log_softmax(self, dim: int | None = None, dtype: DType | str | None = None) -> Tensor:
        """log(softmax(x)) along dim (the last by default), computed in dtype if given, never as a log of 0."""
        shifted, dim = _shifted(self, dim, dtype, "log_softmax")
        return shifted - shifted.exp().sum(dim, keepdim=True).log()  # (x - max) - log sum exp(x - max)

    @axis_is_dim
    def softmin(self, dim: int | None = None, dtype: DType | str | None = None) -> Tensor:
        """softmax(-x) along dim (the last by default), as torch.nn.functional.softmin.

        >>> Tensor([0.0, 0.0]).softmin(0).tolist()
        [0.5, 0.5]
        """
        return (-self).softmax(dim, dtype)

    def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
        """x / max(||x||_p, eps) along dim, as torch.nn.functional.normalize, for every p torch takes: p > 0, inf,
        p = 0 (the norm is the count of nonzeros, with gradient 0) and p < 0 ((sum |x|**p) ** (1/p), 0 for a
        slice holding a zero, whose |0|**p is inf).

        Trap, as in torch: a zero slice (or, for p < 0, one holding a zero) gives x / eps with gradient 1 / eps
        (1e12 by default), not NaN.

        >>> Tensor([[3.0, 4.0]]).normalize().tolist()
        [[0.6000000238418579, 0.800000011920929]]
        >>> Tensor([[3.0, 0.0, -1.0]]).normalize(p=0).tolist()
        [[1.5, 0.0, -0.5]]
        """
        x = _floats_only(self, "normalize")
        if math.isnan(p):
            raise ArgumentError(f"normalize: p = {p}; give a number, e.g. p=2")
        d = normalize_axis(dim, x.ndim, "normalize")
        flat = x.reshape(1) if x.ndim == 0 else x
        norm = _norm(flat, p, d) if p >= 1 else _norm_below_one(flat, p, d)
        norm = norm.reshape(()) if x.ndim == 0 else norm
        return x / norm.clip(eps)  # normalize: x / max(norm, eps); the gradient stops below eps

    def swish(self) -> Tensor:
        """silu under its other name: x * sigmoid(x)."""
        return silu(self)


__all__ = ["ActivationsMixin", "SELU_ALPHA", "SELU_SCALE", "silu"]
