"""CUSTOM: the one door out of the closed op set, for kernels a device supplies whole.

A CustomOp names a kernel and gives three things: the numpy reference (what the numpy device runs and
every backend's kernel is diffed against), the same computation composed from primitives (what runs on
a device that registers no kernel for the name), and optionally a gradient rule. A kernel with several
outputs becomes one CUSTOM node per output, sharing srcs; running it once per node is correct, and the
executor may merge the siblings into one call.
Pipeline: tensor -> **custom.apply** -> graph (CUSTOM nodes) -> device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from limn.autograd import is_grad_enabled
from limn.device import get_device
from limn.dtypes import DType
from limn.ops import CustomArg, Node, Op, Shape
from limn.primitives import Tensor  # not limn.tensor: it imports limn.attention, which imports this module


@dataclass(frozen=True)
class CustomOp:
    """A kernel a device may supply whole, with its reference, its composition and its gradient (see above).
    register() makes it known by `name`; custom.apply(name, ...) runs it."""

    name: str
    n_outputs: int
    # (input dtypes and shapes, params) -> the dtype and shape of each output
    signature: Callable[[Sequence[tuple[DType, Shape]], dict[str, Any]], list[tuple[DType, Shape]]]
    # numpy arrays in, numpy arrays out: the definition of the kernel
    reference: Callable[[Sequence[np.ndarray], dict[str, Any]], list[np.ndarray]]
    # Tensors in, Tensors out: the same op spelled in primitives
    compose: Callable[..., list[Any]]
    # (inputs, output index, all outputs, the grad of outputs[index], params) -> input grads as Tensors (None
    # where none flows); None: use compose. A backward that calls other custom ops gets them composed under
    # create_graph=True (apply's rule for ops without a backward), so its gradient differentiates again.
    backward: Callable[..., list[Any]] | None = None


REGISTRY: dict[str, CustomOp] = {}


def register(op: CustomOp) -> CustomOp:
    """Makes `op` known by its name (to apply, to the numpy device, to devices that supply kernels); returns it.
    A second op of the same name replaces the first."""
    REGISTRY[op.name] = op
    return op


def nodes(op: CustomOp, srcs: tuple[Node, ...], params: dict[str, Any]) -> list[Node]:
    """One CUSTOM node per output of `op` applied to srcs."""
    specs = op.signature([(s.dtype, s.shape) for s in srcs], params)
    frozen = tuple(sorted(params.items()))
    return [
        Node(Op.CUSTOM, srcs, dtype, tuple(shape), CustomArg(op.name, i, op.n_outputs, frozen))
        for i, (dtype, shape) in enumerate(specs)
    ]


def run_reference(node: Node, srcs: list[np.ndarray], cache: dict) -> np.ndarray:
    """The numpy device's evaluation of one CUSTOM node; siblings share one call through `cache`."""
    arg: CustomArg = node.arg
    if arg.name not in REGISTRY:
        raise RuntimeError(f"CUSTOM kernel {arg.name!r} is not registered; import the module that defines it")
    key = ("custom", arg.name, tuple(id(s) for s in node.srcs), arg.params)
    if key not in cache:
        outs = REGISTRY[arg.name].reference(srcs, dict(arg.params))
        cache[key] = [np.asarray(o) for o in outs]
    return cache[key][arg.output].astype(node.dtype.np).reshape(node.shape)


def apply(name: str, *inputs: Any, **params: Any) -> list[Tensor]:
    """Runs custom op `name` on tensors: as CUSTOM nodes where the current device supplies the kernel,
    composed from primitives otherwise. Returns one Tensor per output.

    Trap: an op without a backward rule is composed whenever an input requires grad, even where the device
    has the kernel (only the composition knows its gradient)."""
    op = REGISTRY[name]
    tensors = [x if isinstance(x, Tensor) else Tensor(x) for x in inputs]
    if name not in get_device(tensors[0].device).custom_kernels:
        return list(op.compose(*tensors, **params))
    needs_grad = is_grad_enabled() and any(t.requires_grad for t in tensors)
    if needs_grad and op.backward is None:
        return list(op.compose(*tensors, **params))  # only the composition knows its gradient
    out = tuple(nodes(op, tuple(t.node for t in tensors), params))
    # each output's context holds every sibling node, so the backward of one output sees all of them (the
    # same nodes, which the executor merges into the one call the forward made)
    return [tensors[0]._result(n, Op.CUSTOM, tuple(tensors), out) for n in out]
