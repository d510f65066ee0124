"""matmul: (..., n, k) @ (..., k, m) as a broadcast multiply and a SUM over k, which the scheduler fuses into one
loop nest and the compiled devices recognise as a matmul (limn.compiler.matmul_form).
Pipeline: **tensor (composed ops)** -> graph (MUL, SUM) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from limn import dtypes
from limn.errors import ArgumentError
from limn.frontend.primitives import Tensor


def matmul(x: Tensor, other: Tensor) -> Tensor:
    """(..., n, k) @ (..., k, m) -> (..., n, m) as a broadcast multiply and a sum over k, which the
    scheduler fuses into one kernel. 1-D operands act as a row or a column, as in numpy; batch dims
    broadcast. Half widths multiply and sum in float32 and round once.

    Trap: the numpy device builds the whole (..., n, m, k) product before summing it, so a large matmul
    runs out of memory there rather than slowly; the compiled devices walk it in one loop nest."""
    a, b = x, other if isinstance(other, Tensor) else Tensor(other)
    b_shape = b.shape
    if a.ndim == 0 or b.ndim == 0:
        raise ArgumentError("matmul: both operands need at least one dim; use * for scalars")
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    if squeeze_a:
        a = a.reshape(1, a.shape[0])
    if squeeze_b:
        b = b.reshape(b.shape[0], 1)
    if a.shape[-1] != b.shape[-2]:
        raise ArgumentError(f"matmul {x.shape} @ {b_shape}: inner sizes {a.shape[-1]} and {b.shape[-2]} differ")
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


def dot(x: Tensor, other: Tensor) -> Tensor:
    """x @ other (matmul). Unlike torch.dot it is not limited to 1-D operands."""
    return x.matmul(other)
