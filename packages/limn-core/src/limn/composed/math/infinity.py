"""Which elements are +inf or -inf: isposinf and isneginf, as torch's, beside elementwise.isinf.

Each takes a tensor of any dtype and gives a bool tensor of its shape (all False for ints and bools, which
hold no infinity). Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


class InfinityMixin:
    """Tensor's tests for +inf and -inf."""

    __slots__ = ()

    def isposinf(self) -> Tensor:
        """True where the value is +inf, as torch.isposinf (never for ints and bools, nor for NaN).

        >>> Tensor([float("inf"), float("-inf"), 1.0, float("nan")]).isposinf().tolist()
        [True, False, False, False]
        """
        if not self.dtype.is_float:
            return limn.Tensor.full(self.shape, False, device=self.device)
        return self.eq(math.inf)  # isposinf(x) = (x == inf)

    def isneginf(self) -> Tensor:
        """True where the value is -inf, as torch.isneginf (never for ints and bools, nor for NaN).

        >>> Tensor([float("inf"), float("-inf"), 1.0, float("nan")]).isneginf().tolist()
        [False, True, False, False]
        """
        if not self.dtype.is_float:
            return limn.Tensor.full(self.shape, False, device=self.device)
        return self.eq(-math.inf)  # isneginf(x) = (x == -inf)
