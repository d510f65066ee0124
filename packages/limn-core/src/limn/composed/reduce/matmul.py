"""matmul: (..., n, k) @ (..., k, m) as a broadcast multiply and a SUM over k, which the scheduler fuses into one
loop nest and the compiled devices recognise as a matmul (limn.compiler.matmul_form).
Pipeline: **tensor (composed ops)** -> graph (MUL, SUM) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.errors import ArgumentError
from limn.frontend.arguments import TensorLike

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


class MatmulMixin:
    """Tensor's matmul and @."""

    __slots__ = ()

    def matmul(self, other: Tensor) -> Tensor:
        """(..., n, k) @ (..., k, m) -> (..., n, m) as a broadcast multiply and a sum over k, which the
        scheduler fuses into one kernel. 1-D operands act as a row or a column, as in numpy; batch dims
        broadcast. Half widths multiply and sum in float32 and round once.

        Trap: the numpy device builds the whole (..., n, m, k) product before summing it, so a large matmul
        runs out of memory there rather than slowly; the compiled devices walk it in one loop nest."""
        a, b = self, other if isinstance(other, limn.Tensor) else limn.Tensor(other)
        b_shape = b.shape
        if a.ndim == 0 or b.ndim == 0:
            raise ArgumentError("matmul: both operands need at least one dim; use * for scalars")
        squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
        if squeeze_a:
            a = a.reshape(1, a.shape[0])
        if squeeze_b:
            b = b.reshape(b.shape[0], 1)
        if a.shape[-1] != b.shape[-2]:
            raise ArgumentError(f"matmul {self.shape} @ {b_shape}: inner sizes {a.shape[-1]} and {b.shape[-2]} differ")
        dtype = dtypes.promote(a.dtype, b.dtype)
        compute = dtype.compute  # half widths: multiply and sum in float32, round once at the end
        a, b = a.cast(compute), b.cast(compute)
        prod_ = a.unsqueeze(-2) * b.transpose(-1, -2).unsqueeze(-3)  # (..., n, 1, k) * (..., 1, m, k)
        out = prod_.sum(-1).cast(dtype)  # (..., n, m, k) -> (..., n, m)
        if squeeze_a:
            out = out.squeeze(-2)
        if squeeze_b:
            out = out.squeeze(-1)
        return out

    def dot(self, other: Tensor) -> Tensor:
        """x @ other (matmul). Unlike torch.dot it is not limited to 1-D operands."""
        return self.matmul(other)

    def outer(self, vec2: Tensor) -> Tensor:
        """The outer product of two 1-D tensors, out[i, j] = x[i] * vec2[j] (torch.outer, torch.ger)."""
        other = vec2 if isinstance(vec2, limn.Tensor) else limn.Tensor(vec2)
        if self.ndim != 1 or other.ndim != 1:
            raise ArgumentError(
                f"outer takes two 1-D tensors, got shapes {self.shape} and {other.shape}: flatten them first"
            )
        return self.unsqueeze(1) * other.unsqueeze(0)  # (n, 1) * (1, m) -> (n, m)

    ger = outer
    __matmul__ = matmul

    def __rmatmul__(self, other: TensorLike) -> Tensor:
        """other @ x, where other is host data (a numpy array or nested lists)."""
        return limn.Tensor(other).matmul(self)
