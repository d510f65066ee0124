"""Reverse-mode autograd: one gradient rule per primitive, written in Tensor operations.

Every Tensor made by an op while gradients are on keeps a Context: the rule to apply, its parent
tensors, the op's argument and its output node. backward() walks those contexts in reverse topological
order and sums each parent's incoming gradients. The gradients are lazy Tensors like any other; with
create_graph=True they carry Contexts of their own, so they can be differentiated again.
Pipeline: **tensor + autograd** -> graph -> schedule -> IR -> device.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from limn.errors import ArgumentError
from limn.graph import ops, provenance
from limn.graph.ops import Movement, Node, Op, postorder

if TYPE_CHECKING:
    from limn.frontend.arguments import TensorLike
    from limn.frontend.tensor import Tensor


class _GradMode(threading.local):
    """Whether ops record gradient history, per thread as in torch: a thread starts with it on, and one
    thread's no_grad never strips another thread's graph."""

    enabled = True


_mode = _GradMode()


class no_grad:
    """Context manager (or decorator, bare or called, as torch's): ops inside record no gradient history, in
    this thread."""

    _sets = False

    def __new__(cls, func: Callable | None = None) -> Any:
        self = super().__new__(cls)
        return self if func is None else self(func)  # `@no_grad` bare: the function comes back wrapped

    def __enter__(self) -> None:
        # a stack of previous modes, so one no_grad object can be entered again while it is active
        self._prev = [*getattr(self, "_prev", []), _mode.enabled]
        _mode.enabled = self._sets

    def __exit__(self, *exc: object) -> None:
        _mode.enabled = self._prev.pop()

    def _again(self) -> no_grad:
        return type(self)()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._again():  # a fresh one per call: two threads may run the function at once
                return fn(*args, **kwargs)

        return wrapper


class enable_grad(no_grad):
    """Turns gradient recording back on inside a no_grad block, in this thread."""

    _sets = True


class inference_mode(no_grad):
    """torch.inference_mode: here no_grad (limn keeps no version counters for it to skip); with mode=False
    it leaves the mode as it is, as torch's does."""

    def __new__(cls, mode: bool | Callable = True) -> Any:
        return super().__new__(cls) if isinstance(mode, bool) else inference_mode(True)(mode)  # bare: wraps

    def __init__(self, mode: bool | Callable = True) -> None:
        self.mode = mode is not False

    def __enter__(self) -> None:
        self._sets = False if self.mode else _mode.enabled
        super().__enter__()

    def _again(self) -> no_grad:
        return inference_mode(self.mode)


def is_grad_enabled() -> bool:
    """Whether ops made now in this thread record gradient history."""
    return _mode.enabled


class Carried:
    """The rule of a value computed off the gradient graph (an argument reduction, a table, rounding tricks
    whose own gradient means nothing) and linked to its inputs by a derivative formula
    (limn.composed.math.derivative.carry). Its context's arg gives the partials: arg(*parents, output) is one tensor (or
    None) per parent, built from the live parents and output, so the gradient it makes differentiates again, to any
    order."""

    def __repr__(self) -> str:
        return "CARRIED"


CARRIED = Carried()


@dataclass(frozen=True, eq=False)
class Context:
    """How a tensor was made: `rule` names a row of GRADIENTS (an Op, or for a VIEW the Movement that made
    it), `parents` are the input tensors."""

    rule: Op | Movement | Carried
    parents: tuple[Tensor, ...]
    out: Node
    arg: Any = None

    def __post_init__(self) -> None:
        assert self.rule in GRADIENTS, f"{self.rule!r} has no gradient rule, so nothing made by it may record one"

    def output(self) -> Tensor:
        """The op's output as a tensor that still differentiates through this context."""
        from limn.frontend.tensor import Tensor

        return Tensor._from_node(self.out, self.parents[0].device, ctx=self)


# ---- the gradient rules: (ctx, grad of the output) -> grad of each parent (None where none flows) ----


def _reduce_max_grad(ctx: Context, g: Tensor) -> tuple:
    # ties share the gradient evenly, as torch.amax does
    (x,) = ctx.parents
    out = ctx.output().expand(x.shape)
    hit = x.eq(out).cast(g.dtype)
    share = hit / hit.sum(ctx.arg, keepdim=True).expand(x.shape)
    return (share * g.expand(x.shape),)


def _expand_grad(ctx: Context, g: Tensor) -> tuple:
    (x,) = ctx.parents
    axes = tuple(d for d, (a, b) in enumerate(zip(x.shape, g.shape)) if a != b)
    return (g.sum(axes, keepdim=True) if axes else g,)


def _permute_grad(ctx: Context, g: Tensor) -> tuple:
    inverse = [0] * len(ctx.arg)
    for i, d in enumerate(ctx.arg):
        inverse[d] = i
    return (g.permute(tuple(inverse)),)


def _pad_grad(ctx: Context, g: Tensor) -> tuple:
    box = tuple((before, before + s) for (before, _), s in zip(ctx.arg, ctx.parents[0].shape))
    return (g.shrink(box),)


def _shrink_grad(ctx: Context, g: Tensor) -> tuple:
    widths = tuple((start, s - end) for (start, end), s in zip(ctx.arg, ctx.parents[0].shape))
    return (g.pad_constant(widths),)


def _cast_grad(ctx: Context, g: Tensor) -> tuple:
    (x,) = ctx.parents
    return (g.cast(x.dtype) if x.dtype.is_float else None,)


def _gather_grad(ctx: Context, g: Tensor) -> tuple:
    src, idx = ctx.parents
    from limn.frontend.tensor import Tensor

    zeros = Tensor.zeros(src.shape, dtype=g.dtype)
    return (zeros.scatter_add(ctx.arg, idx, g), None)


def _custom_grad(ctx: Context, g: Tensor) -> tuple:
    # ctx.arg: every output node of the call (limn.frontend.custom_call.apply); the rule gets them all as live tensors
    from limn.frontend.tensor import Tensor
    from limn.graph import custom

    arg = ctx.out.arg
    op = custom.REGISTRY[arg.name]
    assert op.backward is not None, f"CUSTOM {op.name!r} was recorded for autograd without a backward rule"
    device = ctx.parents[0].device
    outs = [Tensor._from_node(n, device, ctx=Context(Op.CUSTOM, ctx.parents, n, ctx.arg)) for n in ctx.arg]
    return tuple(op.backward(list(ctx.parents), arg.output, outs, g, dict(arg.params)))


def _carried_grad(ctx: Context, g: Tensor) -> tuple:
    # d/dparent = g * the formula's partial, as torch's backward computes it (inf * 0 is NaN there too)
    partials = ctx.arg(*ctx.parents, ctx.output())
    return tuple(None if d is None else g * d for d in partials)


# No row for the sources (BUFFER and CONST are leaves: a gradient stops there) or ASSIGN (a write into a buffer,
# which records no history); VIEW has one row per Movement instead, and CARRIED one for values that carry a
# derivative formula (tests/core/test_op_table.py holds this).
GRADIENTS: dict[Op | Movement | Carried, Callable[[Context, Any], tuple]] = {
    CARRIED: _carried_grad,
    Op.NEG: lambda ctx, g: (-g,),
    Op.EXP: lambda ctx, g: (g * ctx.output(),),  # d e**x = e**x
    Op.LOG: lambda ctx, g: (g / ctx.parents[0],),  # d log x = 1/x
    Op.SQRT: lambda ctx, g: (g * 0.5 / ctx.output(),),  # d sqrt x = 1 / (2 sqrt x)
    Op.RECIP: lambda ctx, g: (-g * ctx.output() * ctx.output(),),  # d 1/x = -1/x**2
    Op.CAST: _cast_grad,
    Op.ADD: lambda ctx, g: (g, g),
    Op.MUL: lambda ctx, g: (g * ctx.parents[1], g * ctx.parents[0]),
    Op.CMPLT: lambda ctx, g: (None, None),
    Op.WHERE: lambda ctx, g: (None, ctx.parents[0].where(g, 0.0), ctx.parents[0].where(0.0, g)),
    Op.SUM: lambda ctx, g: (g.expand(ctx.parents[0].shape),),
    Op.MAX: _reduce_max_grad,
    Op.GATHER: _gather_grad,
    Op.SCATTER: lambda ctx, g: (g, None, g.gather(ctx.arg, ctx.parents[1])),
    Op.CONTIGUOUS: lambda ctx, g: (g,),
    Op.CUSTOM: _custom_grad,
    # movement: VIEW nodes carry a View, but the gradient needs to know which movement made it
    Movement.RESHAPE: lambda ctx, g: (g.reshape(ctx.parents[0].shape),),
    Movement.PERMUTE: _permute_grad,
    Movement.EXPAND: _expand_grad,
    Movement.PAD: _pad_grad,
    Movement.SHRINK: _shrink_grad,
}


def _tensor_toposort(root: Tensor) -> list[Tensor]:
    """Tensors reachable from root through contexts (parents that require grad), each after its parents."""
    return postorder([root], lambda t: [p for p in t._ctx.parents if p.requires_grad] if t._ctx is not None else [])


def backward(root: Tensor, gradient: Tensor | None, create_graph: bool) -> None:
    """Accumulates d(root)/d(leaf) into leaf.grad for every leaf that requires grad (see Tensor.backward)."""
    for t, g in _walk(root, _seed(root, gradient, "backward()"), create_graph):
        if t._ctx is None:
            g = g if create_graph else g.detach()
            t.grad = g if t.grad is None else t.grad + g


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple[Tensor | None, ...]:
    """torch.autograd.grad: the gradients of the outputs (each weighted by its grad_output, 1 for a
    single-element output) with respect to each input, leaf or not, returned rather than added into any .grad.
    create_graph=True keeps them differentiable (a gradient penalty, a Hessian-vector product). An input the
    outputs do not reach raises unless allow_unused, which gives None for it, as torch. retain_graph is
    accepted for torch's signature: limn's graphs are never freed by a backward.

    >>> from limn import Tensor
    >>> x = Tensor([1.0, 2.0], requires_grad=True)
    >>> grad((x * x).sum(), x)[0].tolist()
    [2.0, 4.0]
    """
    from limn.frontend.tensor import Tensor

    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs] * len(outputs)
    if len(grad_outputs) != len(outputs):
        raise ArgumentError(f"grad(): {len(outputs)} outputs but {len(grad_outputs)} grad_outputs; give one each")
    wanted = {id(t): i for i, t in enumerate(inputs)}
    totals: list[Tensor | None] = [None] * len(inputs)
    for out, g_out in zip(outputs, grad_outputs):
        for t, g in _walk(out, _seed(out, g_out, "grad()"), create_graph):
            i = wanted.get(id(t))
            if i is not None:
                g = g if create_graph else g.detach()
                totals[i] = g if totals[i] is None else totals[i] + g
    unused = [i for i, g in enumerate(totals) if g is None]
    if unused and not allow_unused:
        raise RuntimeError(
            f"grad(): inputs {unused} are not reached from the outputs (or do not require grad); "
            "pass allow_unused=True to get None for them"
        )
    return tuple(totals)


def _seed(root: Tensor, gradient: TensorLike | None, what: str) -> Tensor:
    """The gradient a backward from root starts with, checked: 1 for a single-element root, else `gradient`."""
    from limn.frontend.tensor import Tensor

    if not root.requires_grad:
        raise RuntimeError(
            f"{what} on a tensor that does not require grad: no input of it was created with "
            "requires_grad=True (or it was computed under no_grad / from .detach())"
        )
    if gradient is None:
        if root.size != 1:
            raise RuntimeError(
                f"{what} on a tensor of shape {root.shape} needs `gradient=` of that shape; "
                "only a single-element output has an implied gradient of 1 (did you forget .sum()?)"
            )
        return Tensor.ones(root.shape, dtype=root.dtype)
    if not isinstance(gradient, Tensor):
        gradient = Tensor(gradient, dtype=root.dtype)
    if gradient.shape != root.shape:
        raise ArgumentError(f"{what}: gradient has shape {gradient.shape}, the output has {root.shape}")
    return gradient


def _walk(root: Tensor, gradient: Tensor, create_graph: bool) -> Iterator[tuple[Tensor, Tensor]]:
    """Each tensor that requires grad and that root reaches, with its whole gradient (every path's share
    added), children before parents."""
    guard = enable_grad() if create_graph else no_grad()
    with guard:
        grads: dict[int, Tensor] = {id(root): gradient}
        for t in reversed(_tensor_toposort(root)):
            g = grads.pop(id(t), None)
            if g is None:
                continue
            if t.requires_grad:
                yield t, g
            if t._ctx is None:
                continue
            # while provenance records, the gradient's nodes come from the line that made the forward value
            recording = ops.on_create is not None
            with provenance.gradient_of(t._ctx.out) if recording else contextlib.nullcontext():
                parent_grads = GRADIENTS[t._ctx.rule](t._ctx, g)
                for p, pg in zip(t._ctx.parents, parent_grads):
                    if pg is None or not p.requires_grad:
                        continue
                    if pg.dtype != p.dtype:
                        pg = pg.cast(p.dtype)
                    grads[id(p)] = grads[id(p)] + pg if id(p) in grads else pg
