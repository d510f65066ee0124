"""CUSTOM: the one door out of the closed op set, for kernels a device supplies whole.

A CustomOp names a kernel and gives three things: the numpy reference (what the numpy device runs and
every backend's kernel is diffed against), the same computation composed from primitives (what runs on
a device that registers no kernel for the name), and optionally a gradient rule. A kernel with several
outputs becomes one CUSTOM node per output, sharing srcs; running it once per node is correct, and the
executor may merge the siblings into one call.
Pipeline: tensor (limn.frontend.custom_call) -> graph (**CUSTOM nodes**) -> device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from limn.dtypes import DType
from limn.graph.ops import CustomArg, Node, Op, Shape


@dataclass(frozen=True)
class CustomOp:
    """A kernel a device may supply whole, with its reference, its composition and its gradient (see above).
    register() makes it known by `name`; limn.frontend.custom_call.apply(name, ...) runs it."""

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
