"""limn.nn.utils: gradient clipping as torch.nn.utils computes it, on the parameters' lazy .grad tensors, and
skip_init, a module built without initializing its parameters.

clip_grad_norm_(params, max_norm) scales every gradient by min(1, max_norm / (total_norm + 1e-6)) and
gives the total norm (a 0-d tensor); clip_grad_value_ clamps each gradient to [-clip_value, clip_value].
Nothing is realized: the scaled gradients are lazy, so the norm, the clipping and the optimizer's update
run in the step's one realize() (and replay in a limn.capture'd step).
Pipeline: nn (loss.backward()) -> **nn.utils** (gradients rescaled) -> optim -> realize -> device.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TypeVar

from limn import dtypes
from limn.frontend.tensor import Tensor
from limn.nn import init

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm", "skip_init"]

M = TypeVar("M")


def skip_init(module_cls: type[M], *args: Any, **kwargs: Any) -> M:
    """torch.nn.utils.skip_init: module_cls(*args, **kwargs) with every parameter its layers make left
    uninitialized, for weights about to be loaded: limn's are zeros (Tensor.empty), which cost no random draws
    (torch's hold garbage). The layers built inside a model's own constructor skip theirs too. Buffers (a
    BatchNorm's running statistics) start as usual.

    >>> from limn.nn import Linear
    >>> skip_init(Linear, 1024, 1024).weight.sum().item()
    0.0
    """
    with init.skipped():
        return module_cls(*args, **kwargs)


Parameters = Tensor | Iterable[Tensor]


def _tensors(parameters: Parameters) -> list[Tensor]:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _grads(parameters: Parameters) -> list[Tensor]:
    return [p.grad for p in _tensors(parameters) if p.grad is not None]


def _vector_norm(x: Tensor, norm_type: float) -> Tensor:
    """torch.linalg.vector_norm of every entry of x, as a 0-d tensor of x's dtype."""
    if norm_type == math.inf:
        return x.abs().max()  # inf norm: max |x|
    if norm_type == -math.inf:
        return x.abs().min()  # -inf norm: min |x|
    if norm_type == 0:
        return x.ne(0).cast(x.dtype).sum()  # 0 "norm": how many entries are not zero
    if norm_type == 1:
        return x.abs().sum()
    if norm_type == 2:
        return x.square().sum().sqrt()
    return (x.abs() ** norm_type).sum() ** (1.0 / norm_type)  # (sum |x|^p)^(1/p)


def get_total_norm(
    tensors: Parameters, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach: bool | None = None
) -> Tensor:
    """The norm of the norms of `tensors` (torch.nn.utils.get_total_norm): a 0-d tensor in the widest
    float dtype among them, 0.0 when there are none. norm_type is any float, or math.inf / -math.inf.
    Trap: error_if_nonfinite=True reads the norm back to raise on NaN/inf, so it realizes the gradients
    now (and a limn.capture'd step that asks for it is refused). `foreach` is accepted and changes nothing.

    >>> w = Tensor([3.0, 4.0], requires_grad=True)
    >>> (w * Tensor([1.0, 1.0])).sum().backward()
    >>> get_total_norm([w.grad]).item()
    1.4142135381698608
    """
    norm_type = float(norm_type)
    tensors = _tensors(tensors)
    if not tensors:
        return Tensor(0.0)
    widest = dtypes.float64 if any(t.dtype == dtypes.float64 for t in tensors) else tensors[0].dtype
    norms = [_vector_norm(t, norm_type).cast(widest) for t in tensors]
    total = _vector_norm(Tensor.stack(norms), norm_type)  # (n,) -> ()
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(
            f"get_total_norm: the total norm of order {norm_type} of the gradients is {total.item()}, so they "
            "cannot be clipped; pass error_if_nonfinite=False to clip anyway (as torch, to NaN)"
        )
    return total


def clip_grads_with_norm_(
    parameters: Parameters, max_norm: float, total_norm: Tensor, foreach: bool | None = None
) -> None:
    """Scales each parameter's .grad by min(1, max_norm / (total_norm + 1e-6)), as torch's."""
    grads = _grads(parameters)
    if not grads:
        return
    coef = (float(max_norm) / (total_norm + 1e-6)).clip(hi=1.0)  # clip_coef, clamped to at most 1
    for p in _tensors(parameters):
        if p.grad is not None:
            p.grad = p.grad * coef.cast(p.grad.dtype)


def clip_grad_norm_(
    parameters: Parameters,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Rescales the gradients of `parameters` (a tensor or an iterable of them; those without .grad are
    skipped) so that their total norm is at most max_norm, and gives the total norm before clipping, as
    torch.nn.utils.clip_grad_norm_. The gradients are scaled by min(1, max_norm / (norm + 1e-6)): a NaN
    or inf norm makes them NaN (error_if_nonfinite=True raises instead; see get_total_norm's trap).

    >>> w = Tensor([1.0, 1.0], requires_grad=True)
    >>> (w * Tensor([3.0, 4.0])).sum().backward()
    >>> clip_grad_norm_([w], max_norm=1.0).item(), [round(g, 4) for g in w.grad.tolist()]
    (5.0, [0.6, 0.8])
    """
    params = _tensors(parameters)
    total = get_total_norm(_grads(params), norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters: Parameters, clip_value: float, foreach: bool | None = None) -> None:
    """Clamps each parameter's .grad into [-clip_value, clip_value], as torch.nn.utils.clip_grad_value_.

    >>> w = Tensor([1.0, 1.0], requires_grad=True)
    >>> (w * Tensor([-3.0, 0.5])).sum().backward()
    >>> clip_grad_value_(w, 1.0)
    >>> w.grad.tolist()
    [-1.0, 0.5]
    """
    clip_value = float(clip_value)
    for p in _tensors(parameters):
        if p.grad is not None:
            p.grad = p.grad.clip(lo=-clip_value, hi=clip_value)
