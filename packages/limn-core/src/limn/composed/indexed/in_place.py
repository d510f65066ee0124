"""torch's in-place spellings: x.add_(y), x.masked_fill_(m, v), x.tril_() and the rest.

A limn tensor is a value, so "in place" means x takes a new value: x.add_(y) computes x.add(y) and x
becomes it, by the rule setitem follows too (update below). While gradients flow, the new value is a new
node of the graph, so the gradient reaches x's old value and the operands; otherwise x's buffer takes an
ASSIGN. As in torch, a result x's dtype cannot hold (a float into an int tensor) is refused. fill_ and
copy_, which write a value rather than an op's result, are IndexingMixin's (limn.composed.indexed.indexing).
Pipeline: **tensor (composed ops)** -> graph (ASSIGN) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import autograd, dtypes
from limn.errors import ArgumentError
from limn.graph.ops import Op
from limn.runtime.engine import realize

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def update(x: Tensor, build: Callable[[Tensor], Tensor], inputs: list) -> None:
    """x takes build(x's value now). When gradients flow (x or a tensor among `inputs` requires grad) that is
    a new node of the graph, so the gradient reaches both. Otherwise a lazy x (not computed yet) takes the new
    value as its node, and a computed x is realized first and the value is an ASSIGN into its buffer (built
    after, so one run holds one assign to the buffer)."""
    flows = x.requires_grad or any(isinstance(t, limn.Tensor) and t.requires_grad for t in inputs)
    if autograd.is_grad_enabled() and flows:
        if x.requires_grad and x._ctx is None:
            raise RuntimeError(
                f"setitem: x ({x.dtype.name}{list(x.shape)}) is a leaf that requires grad, and writing into it "
                "while gradients are recorded would lose its history (torch raises too); write under "
                "`with limn.no_grad():`, or into a copy (x = x.clone())"
            )
        new = build(_previous(x))
        x.node, x._ctx, x.requires_grad = new.node, new._ctx, True
        return
    if x.node.op not in (Op.BUFFER, Op.ASSIGN):  # a value not computed yet has no buffer to write: x takes
        x.node = build(_previous(x)).node  # the new value, still lazy (a captured step records it as it is)
        return
    # x and the tensors the write reads are computed first, in one run: an earlier assign to x lands, and
    # the write's graph holds buffers only, so the run that makes it holds one assign to x's buffer
    realize(x, *[t for t in inputs if isinstance(t, limn.Tensor)])
    x.assign(build(_previous(x)))


def _previous(x: Tensor) -> Tensor:
    """x's value now, as a tensor of its own: the parent of the value that replaces it."""
    old = limn.Tensor._from_node(x.node, x.device, x._ctx)
    old.requires_grad = x.requires_grad
    return old


def _kind(dtype: dtypes.DType) -> int:
    return 0 if dtype == dtypes.bool_ else (1 if dtype.is_int else 2)


def in_place(name: str) -> Callable[..., Tensor]:
    """torch's in-place spelling of the method `name` (x.masked_fill_(m, v) of x.masked_fill(m, v)): x takes
    the method's result, by update's rules, and is returned."""

    def new_value(x: Tensor, old: Tensor, args: tuple, kwargs: dict) -> Tensor:
        out = getattr(old, name)(*args, **kwargs)
        if _kind(out.dtype) > _kind(x.dtype):  # torch's can_cast: no float into an int, no number into a bool
            raise ArgumentError(
                f"{name}_: the result is {out.dtype.name}, which the {x.dtype.name} tensor cannot hold in "
                f"place (torch refuses too); write x = x.{name}(...) for a new tensor"
            )
        return out

    def method(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        update(x, lambda old: new_value(x, old, args, kwargs), [*args, *kwargs.values()])
        return x

    method.__name__ = method.__qualname__ = f"{name}_"
    method.__doc__ = f"In place: x becomes x.{name}(...) (limn.composed.indexed.in_place)."
    return method


class InPlaceMixin:
    """Each method x.<op>_(...) is x.<op>(...) written into x (in_place)."""

    __slots__ = ()

    # arithmetic and elementwise math
    add_ = in_place("add")
    sub_ = in_place("sub")
    mul_ = in_place("mul")
    div_ = in_place("div")
    pow_ = in_place("pow")
    neg_ = in_place("neg")
    abs_ = in_place("abs")
    exp_ = in_place("exp")
    log_ = in_place("log")
    sqrt_ = in_place("sqrt")
    rsqrt_ = in_place("rsqrt")
    reciprocal_ = in_place("reciprocal")
    square_ = in_place("square")
    sign_ = in_place("sign")
    sin_ = in_place("sin")
    cos_ = in_place("cos")
    erf_ = in_place("erf")
    expm1_ = in_place("expm1")
    log1p_ = in_place("log1p")
    lerp_ = in_place("lerp")
    maximum_ = in_place("maximum")
    minimum_ = in_place("minimum")
    nan_to_num_ = in_place("nan_to_num")
    logical_not_ = in_place("logical_not")
    # clamping and rounding
    clamp_ = in_place("clamp")
    clip_ = in_place("clip")
    clamp_min_ = in_place("clamp_min")
    clamp_max_ = in_place("clamp_max")
    floor_ = in_place("floor")
    ceil_ = in_place("ceil")
    round_ = in_place("round")
    trunc_ = in_place("trunc")
    frac_ = in_place("frac")
    fmod_ = in_place("fmod")
    remainder_ = in_place("remainder")
    floor_divide_ = in_place("floor_divide")
    # activations
    relu_ = in_place("relu")
    sigmoid_ = in_place("sigmoid")
    tanh_ = in_place("tanh")
    # indexed writes and triangles
    index_put_ = in_place("index_put")
    masked_fill_ = in_place("masked_fill")
    masked_scatter_ = in_place("masked_scatter")
    index_fill_ = in_place("index_fill")
    index_add_ = in_place("index_add")
    index_copy_ = in_place("index_copy")
    scatter_ = in_place("scatter")
    scatter_add_ = in_place("scatter_add")
    scatter_reduce_ = in_place("scatter_reduce")
    tril_ = in_place("tril")
    triu_ = in_place("triu")
    zero_ = in_place("zeros_like")
