"""Variance and standard deviation: var, std and torch's var_mean and std_mean, with `correction`.

Each takes a tensor, `dim` (numpy's `axis=` names it too) and `keepdim`, and gives float tensors. var
centres on the mean and divides by n - correction; std scales each slice by its largest magnitude first, so
squares of values near the float limits do not overflow. Gradients follow torch's, at a zero std and at
n <= correction too (tests/core/test_reductions_torch.py, tests/core/test_edge_values.py).
Pipeline: **tensor (composed ops)** -> graph (SUM, MAX) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from limn.composed.reduce.reductions import Axis, _dropped, _every_if_empty, _sqrt_zero_grad
from limn.frontend.arguments import axis_is_dim
from limn.graph.ops import Op
from limn.graph.view import prod as size_of

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def _correction(correction: float | None, unbiased: bool | None, what: str) -> float:
    """var's divisor offset from torch's two spellings: correction= (default 1) or the older unbiased=."""
    if unbiased is None:
        return 1 if correction is None else correction
    if correction is not None:
        raise TypeError(f"{what}: got correction={correction} and unbiased={unbiased}; pass one of them")
    return 1 if unbiased else 0


class MomentsMixin:
    """Tensor's variance and standard deviation, with torch's correction."""

    __slots__ = ()

    @axis_is_dim
    def var(
        self,
        dim: Axis = None,
        keepdim: bool = False,
        correction: float | None = None,
        *,
        unbiased: bool | None = None,
    ) -> Tensor:
        """sum((x - mean)**2) / (n - correction); correction=1 is torch's default, 0 the biased form (torch's
        unbiased=False).

        Once correction reaches n, torch divides by zero and so does limn: inf, or NaN where every value is
        the mean (and NaN for an empty slice). The gradient there is 2 (x - mean) / 0, so +-inf, which is
        torch's rule for a dim; torch's all-dims form instead gives +inf throughout."""
        x = self
        dim = _every_if_empty(dim)
        correction = _correction(correction, unbiased, "var")
        x = x._float()
        n = size_of([x.shape[d] for d in x._axes(dim, "var")])
        mean = x.mean(dim, keepdim=True)
        if n <= correction:
            centered = x - mean.detach()  # the mean's path would add inf * 0 = NaN to the gradient
            return (centered * centered).sum(dim, keepdim) * math.inf  # sum / 0
        # the mean's path adds sum(2 (x - mean)) / n = 0 to the gradient (it matters to second derivatives), but
        # a slice holding inf or NaN makes that sum NaN for every element; torch's gradient, 2 (x - mean) / (n - c),
        # is NaN only where x - mean is, so those slices (their mean is not finite) cut the mean's path
        mean = mean.isfinite().where(mean, mean.detach())
        centered = x - mean
        return (centered * centered).sum(dim, keepdim) * (1.0 / (n - correction))

    @axis_is_dim
    def std(
        self,
        dim: Axis = None,
        keepdim: bool = False,
        correction: float | None = None,
        *,
        unbiased: bool | None = None,
    ) -> Tensor:
        """sqrt(var(x)), as torch, whose gradient is 0 where the std is 0; correction= or unbiased=.

        It is computed as m * sqrt(var(x / m)) with m = max|x| over each slice, so values near the float limits
        do not overflow when squared (torch accumulates in float64; x ~ 3e38 has a std of about 3e38, not inf).
        m is a constant to autograd, which leaves the gradient exact: std(x) = m std(x / m) for every m > 0."""
        x = self
        axes = x._axes(_every_if_empty(dim), "std")
        correction = _correction(correction, unbiased, "std")
        x = x._float()
        wide = x.cast(x.dtype.compute)
        m = wide.abs()._reduce(Op.MAX, axes, keepdim=True).detach()
        # 1/m overflows for a subnormal m, so those slices are lifted by 2**64 first (exact: a power of two)
        lift = m.lt(2.0**-64).where(2.0**64, 1.0)
        lifted = m * lift
        unit = (wide * lift) * lifted.eq(0).where(1.0, lifted).reciprocal()  # x / m, and 0 where every x is 0
        v = unit.var(axes, keepdim=True, correction=correction)
        return _dropped(x, (_sqrt_zero_grad(v) * m).cast(x.dtype), axes, keepdim)

    @axis_is_dim
    def std_mean(
        self,
        dim: Axis = None,
        keepdim: bool = False,
        correction: float | None = None,
        *,
        unbiased: bool | None = None,
    ) -> tuple[Tensor, Tensor]:
        """torch.std_mean: (std, mean) over dim, with correction= or unbiased= as std.

        >>> [t.item() for t in Tensor([2.0, 4.0]).std_mean(correction=0)]
        [1.0, 3.0]
        """

        correction = _correction(correction, unbiased, "std_mean")
        return self.std(dim, keepdim, correction), self.mean(dim, keepdim)

    @axis_is_dim
    def var_mean(
        self,
        dim: Axis = None,
        keepdim: bool = False,
        correction: float | None = None,
        *,
        unbiased: bool | None = None,
    ) -> tuple[Tensor, Tensor]:
        """torch.var_mean: (var, mean) over dim, with correction= or unbiased= as var.

        >>> [t.item() for t in Tensor([1.0, 3.0]).var_mean()]
        [2.0, 2.0]
        """

        correction = _correction(correction, unbiased, "var_mean")
        return self.var(dim, keepdim, correction), self.mean(dim, keepdim)
