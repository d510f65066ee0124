"""Numerically careful building blocks the activations and losses share: expm1, log1p, log(1 + e**u).

Each takes a float tensor and gives one, composed from primitives, accurate where the plain formula
loses every digit (log(1 + 1e-10) is 0 in float32) or overflows (e**100), with the gradient of the exact
function. with_gradient_of pairs a value computed one way with the gradient of another expression.
Pipeline: **tensor (composed ops)** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def with_gradient_of(value: Tensor, surrogate: Tensor) -> Tensor:
    """value exactly (-0.0 included), with surrogate's gradient at every order. surrogate must be finite
    wherever the result is used: value - (s - s) is value, as s - s is +0 for a finite s (NaN otherwise).

    >>> x = Tensor([2.0], requires_grad=True)
    >>> with_gradient_of(Tensor([7.0]), x * x).sum().backward()
    >>> x.grad.tolist()
    [4.0]
    """
    return value.detach() - (surrogate.detach() - surrogate)


def expm1(u: Tensor) -> Tensor:
    """e**u - 1, accurate for small |u| (the plain form is 0 at u = -1e-10), for u <= 0 or NaN (e**u must
    not overflow, so its gradient e**u stays finite); -inf gives -1.

    >>> round(expm1(Tensor([-1e-10])).item() / 1e-10, 6)
    -1.0
    """
    # Kahan's expm1: (e - 1) * u / log(e) with e = e**u rounded cancels e's rounding error; e = 1 means
    # |u| is under half an ulp of 1, where expm1(u) = u (-0.0 included). Below u = -1/2, e - 1 has no
    # cancellation to repair (and log of a subnormal e would lose digits): there it is e - 1 itself
    e = u.exp()
    near = u.ge(-0.5)
    e_near = near.where(e, 0.5)
    ratio = (e_near - 1) * (u * e_near.eq(1).where(1.0, e_near).log().reciprocal())
    value = near.where(e_near.eq(1).where(u, ratio), e - 1)
    return with_gradient_of(value, e - 1)  # d/du = e**u


def log1p_value(v: Tensor) -> Tensor:
    """log(1 + v) accurate for small |v|, for v >= -1 (-1 gives -inf), as a value: its gradient is not
    log1p's (log1p gives that, for v > -1)."""
    # Goldberg's log1p: log(w) * v / (w - 1) with w = 1 + v rounded cancels w's rounding error; w = 1
    # means |v| is under half an ulp of 1, where log1p(v) = v
    w = 1 + v
    at_one = w.eq(1)
    return at_one.where(v, w.log() * (v * at_one.where(1.0, w - 1).reciprocal()))


def log1p(v: Tensor) -> Tensor:
    """log(1 + v), accurate for small |v| (the plain form is 0 at v = 1e-10), with gradient 1 / (1 + v),
    for v > -1 or NaN.

    >>> round(log1p(Tensor([1e-10])).item() / 1e-10, 6)
    1.0
    """
    return with_gradient_of(log1p_value(v), (1 + v).log())


def log1p_exp(u: Tensor) -> Tensor:
    """log(1 + e**u) for any u: u + log1p(e**-u) above 0, log1p(e**u) at and below, so e never overflows.
    Gradient sigmoid(u) everywhere (1/2 at 0), NaN at NaN; -inf gives +0.0 and inf gives inf.

    >>> round(log1p_exp(Tensor([0.0])).item(), 4)
    0.6931
    """
    positive = u.gt(0)
    tail = log1p(positive.where(-u, u).exp())  # log1p(e**-|u|), e**-|u| in [0, 1]
    return positive.where(u + tail, tail)
