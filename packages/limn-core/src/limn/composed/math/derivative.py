"""Values computed off the gradient graph, with torch's derivative formula attached: the math functions' glue.

A function such as sin reduces its argument with tables and rounding tricks whose own gradient means nothing,
so limn.composed.math.trig and limn.composed.math.logexp compute the value from detached inputs in float64 and `carry`
it: a context (autograd.CARRIED) links it to the inputs with torch's formula (cos x for sin) as its gradient rule.
`unary` and `binary` are that pattern for a one- and a two-input function, dtypes as torch (ints give float32).
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import limn
from limn import autograd, dtypes
from limn.frontend.arguments import TensorLike

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def carry(value: Tensor, inputs: tuple[Tensor, ...], partials: Callable[..., tuple[Tensor | None, ...]]) -> Tensor:
    """`value` itself, every bit (-0.0, inf and NaN included), whose gradient w.r.t. inputs[i] is
    g * partials(*inputs, out)[i]: torch's formula (cos x for sin), with the inf and NaN it gives. partials is
    called only when a gradient flows, on the live inputs and output, so the gradient is itself differentiable
    and a second derivative is the formula's own derivative (autograd.CARRIED).

    >>> x = Tensor([0.5], requires_grad=True)
    >>> y = carry(x.detach() * x.detach(), (x,), lambda x, out: (2 * x,))  # x**2, computed off the graph
    >>> y.sum().backward(create_graph=True)
    >>> first, x.grad = x.grad, None
    >>> first.sum().backward()
    >>> first.tolist(), x.grad.tolist()
    ([1.0], [2.0])
    """
    if not (autograd.is_grad_enabled() and any(t.requires_grad for t in inputs)):
        return value
    ctx = autograd.Context(autograd.CARRIED, tuple(inputs), value.node, partials)
    return limn.Tensor._from_node(value.node, value.device, ctx)


def unary(x: Tensor, value: Callable[[Tensor], Tensor], derivative: Callable[[Tensor, Tensor], Tensor]) -> Tensor:
    """f(x) for a float function computed in float64: value(x64) from the detached input, and the gradient
    derivative(x64, value) (both float64 tensors, live, so it differentiates again). An int or bool x gives
    float32, a float x its own dtype."""
    x = x._float()
    wide = x.cast(dtypes.float64)
    out = value(wide.detach())
    out = carry(out, (wide,), lambda x64, y: (derivative(x64, _as_torch_sees_it(y, x.dtype)),))
    return out.cast(x.dtype)


def _as_torch_sees_it(out: Tensor, dtype: dtypes.DType) -> Tensor:
    """The float64 value rounded to the result's dtype (and widened back): torch's formulas that use the
    result (exp2's 2**x ln 2, tan's 1 + tan**2) see it so, inf where it overflows."""
    return out if dtype == dtypes.float64 else out.cast(dtype).cast(dtypes.float64)


def binary(
    x: Tensor,
    other: TensorLike,
    what: str,
    value: Callable[[Tensor, Tensor], Tensor],
    dx: Callable[[Tensor, Tensor, Tensor, dtypes.DType], Tensor],
    dy: Callable[[Tensor, Tensor, Tensor, dtypes.DType], Tensor],
    reverse: bool = False,
) -> Tensor:
    """f(x, other) for a float function of two inputs, promoted and broadcast as in + (ints and bools give
    float32) and computed in float64; dx and dy take (x64, y64, value) and give the partial derivatives."""
    a, b = x._operands(other, what, reverse)
    a, b = a._float(), b._float()
    wa, wb = a.cast(dtypes.float64), b.cast(dtypes.float64)
    out = value(wa.detach(), wb.detach())

    def partials(x64: Tensor, y64: Tensor, out: Tensor) -> tuple[Tensor, Tensor]:
        seen = _as_torch_sees_it(out, a.dtype)
        return dx(x64, y64, seen, a.dtype), dy(x64, y64, seen, a.dtype)

    return carry(out, (wa, wb), partials).cast(a.dtype)
