"""What a capture records of one call: its runs (a device, a plan or a graph with placeholder leaves), where
each run's leaf buffers come from on replay, and the buffers the recording keeps and writes. The data of
limn.capture: record.py fills it, replay.py runs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from limn.dtypes import DType
from limn.frontend.tensor import Tensor
from limn.graph.ops import Node, Op, rebuilt, substitute, toposort
from limn.runtime.device import Buffer


class CaptureError(RuntimeError):
    """The step cannot be captured or replayed as asked; the message says what changed and what to do."""


@dataclass(frozen=True)
class Leaf:
    """Where a recorded run's leaf buffer comes from on replay.

    kind: "arg" (argument `index`), "run" (result `index` of run `run`), "kept" (`buffer` itself, which
    lives across calls), "before" (the bytes `buffer` holds before this run assigns it: forked anew on
    each replay, as realize() does), or "const" (`buffer`, host data the step made, the same each call).
    """

    kind: str
    index: int = 0
    run: int = 0
    buffer: Buffer | None = None


@dataclass(frozen=True)
class Placeholder:
    """A leaf of a recorded numpy-device graph: which leaf of the run it is. The recording holds no
    BUFFER node of a live buffer, so it never keeps a tensor's bytes alive or looks like a reader."""

    index: int


@dataclass
class Run:
    device: str
    plan: Any  # a jit Plan on compiled devices, None on devices that interpret graphs
    template: list[Node] | None  # the graph with Placeholder leaves, for devices without plans
    leaves: list[Leaf]
    owners: dict[int, list[Any]]  # id(assigned buffer) -> weakrefs to the tensors whose assign it is
    in_place: list[Buffer]  # the buffers the run assigns in place (optimizer state)


@dataclass
class Recording:
    """What one call did: its runs, where its outputs are and the host data it made."""

    runs: list[Run]
    outputs: list[Leaf]  # where each returned tensor is: a run's result, or an argument returned as it is
    rebuild: Callable[[list[Tensor]], Any]
    constants: list[tuple[str, str]] = field(default_factory=list)  # (what, fingerprint) of each

    @functools.cached_property
    def kept(self) -> list[Buffer]:
        """The buffers the recording reads across calls: parameters, optimizer state, other tensors."""
        return self._buffers(("kept", "before"))

    @functools.cached_property
    def kept_ids(self) -> set[int]:
        return {id(b) for b in self.kept}

    @functools.cached_property
    def written(self) -> list[Buffer]:
        """The buffers the recorded step assigns."""
        in_place = {id(b): b for run in self.runs for b in run.in_place}
        return self._buffers(("before",)) + list(in_place.values())

    def _buffers(self, kinds: tuple[str, ...]) -> list[Buffer]:
        seen: dict[int, Buffer] = {}
        for run in self.runs:
            for leaf in run.leaves:
                if leaf.kind in kinds:
                    seen.setdefault(id(leaf.buffer), leaf.buffer)
        return list(seen.values())


def dtype_shape(dtype: DType, shape: tuple[int, ...]) -> str:
    return f"{dtype.name}{list(shape)}"


def graph_leaf_buffers(sinks: list[Node]) -> list[Buffer]:
    seen: dict[int, Buffer] = {}
    for n in toposort(sinks):
        if n.op is Op.BUFFER:
            seen.setdefault(id(n.arg), n.arg)
    return list(seen.values())


def graph_template(sinks: list[Node], leaf_buffers: list[Buffer]) -> list[Node]:
    """The graph with each leaf buffer swapped for a Placeholder naming its position (an ASSIGN's target
    too: the recording must hold no BUFFER node of a live buffer)."""
    position = {id(b): i for i, b in enumerate(leaf_buffers)}
    return swap_leaves(sinks, lambda n: Placeholder(position[id(n.arg)]))


def bind(template: list[Node], leaves: list[Buffer]) -> list[Node]:
    """A recorded graph with its placeholders bound to this call's leaf buffers."""
    return swap_leaves(template, lambda n: leaves[n.arg.index])


def swap_leaves(sinks: list[Node], arg: Callable[[Node], Any]) -> list[Node]:
    """The graph with every BUFFER node swapped for one holding arg(node) instead."""

    def swap(n: Node, srcs: tuple[Node, ...]) -> Node:
        if n.op is Op.BUFFER:
            return Node(Op.BUFFER, (), n.dtype, n.shape, arg(n))
        return rebuilt(n, srcs)

    return substitute(sinks, swap)
