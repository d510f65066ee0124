"""Calling a CUSTOM op from Tensors: as CUSTOM nodes where the current device supplies the kernel, composed from
primitives where it does not (limn.graph.custom holds the ops and their numpy references).
Pipeline: tensor -> **custom_call.apply** -> graph (CUSTOM nodes) -> device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import limn
from limn.autograd import is_grad_enabled
from limn.graph.custom import REGISTRY, nodes
from limn.graph.ops import Op
from limn.runtime.device import get_device

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def apply(name: str, *inputs: Any, **params: Any) -> list[Tensor]:
    """Runs custom op `name` on tensors: as CUSTOM nodes where the current device supplies the kernel,
    composed from primitives otherwise. Returns one Tensor per output.

    Trap: an op without a backward rule is composed whenever an input requires grad, even where the device
    has the kernel (only the composition knows its gradient)."""
    op = REGISTRY[name]
    tensors = [x if isinstance(x, limn.Tensor) else limn.Tensor(x) for x in inputs]
    if name not in get_device(tensors[0].device).custom_kernels:
        return list(op.compose(*tensors, **params))
    needs_grad = is_grad_enabled() and any(t.requires_grad for t in tensors)
    if needs_grad and op.backward is None:
        return list(op.compose(*tensors, **params))  # only the composition knows its gradient
    out = tuple(nodes(op, tuple(t.node for t in tensors), params))
    # each output's context holds every sibling node, so the backward of one output sees all of them (the
    # same nodes, which the executor merges into the one call the forward made)
    return [tensors[0]._result(n, Op.CUSTOM, tuple(tensors), out) for n in out]
