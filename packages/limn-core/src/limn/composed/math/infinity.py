"""Which elements are +inf or -inf: isposinf and isneginf, as torch's, beside elementwise.isinf.

Each takes a tensor of any dtype and gives a bool tensor of its shape (all False for ints and bools, which
hold no infinity). Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math

from limn.frontend.primitives import Tensor


def isposinf(x: Tensor) -> Tensor:
    """True where the value is +inf, as torch.isposinf (never for ints and bools, nor for NaN).

    >>> Tensor([float("inf"), float("-inf"), 1.0, float("nan")]).isposinf().tolist()
    [True, False, False, False]
    """
    if not x.dtype.is_float:
        return Tensor.full(x.shape, False, device=x.device)
    return x.eq(math.inf)  # isposinf(x) = (x == inf)


def isneginf(x: Tensor) -> Tensor:
    """True where the value is -inf, as torch.isneginf (never for ints and bools, nor for NaN).

    >>> Tensor([float("inf"), float("-inf"), 1.0, float("nan")]).isneginf().tolist()
    [False, True, False, False]
    """
    if not x.dtype.is_float:
        return Tensor.full(x.shape, False, device=x.device)
    return x.eq(-math.inf)  # isneginf(x) = (x == -inf)
