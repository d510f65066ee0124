"""The realize engine: where lazy tensors become bytes.

realize() takes tensors, groups them by device, swaps every node computed before for the buffer holding it
(so nothing runs twice), forks the buffers the batch assigns (limn.runtime.snapshot), runs each device once and
points each tensor at its result. It also turns host data into buffers, and tells the observers in this
thread (limn.capture records a step this way) what ran, what was created, assigned and read back.
Pipeline: tensor -> graph -> **realize** -> device (schedule -> IR -> renderer on compiled devices).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Protocol

import numpy as np

from limn import dtypes
from limn.graph.ops import Node, Op
from limn.runtime import snapshot
from limn.runtime.device import Buffer, current_device, get_device

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

# A node once realized is never computed again: later graphs that still hold it read its buffer.
_realized: weakref.WeakKeyDictionary[Node, Node] = weakref.WeakKeyDictionary()
_one_at_a_time = threading.RLock()  # realize() from two threads would race on _realized and the assigns' forks


class Observer(Protocol):
    """Whoever watches execution in a thread (limn.capture's recorder)."""

    def realized(self, device: str, sinks: list[Node], buffers: list[Buffer], forks: list[snapshot.Fork]) -> None:
        """After each device run: the sinks it ran, the buffers it gave, the assigned buffers it forked."""

    def created(self, buffer: Buffer) -> None:
        """When host data becomes a buffer."""

    def assigned(self, tensor: Tensor) -> None:
        """When an assign is made (before it is realized)."""

    def read_back(self, tensor: Tensor) -> None:
        """When a value is read into Python (.numpy(), .item(), ...)."""


class _Observers(threading.local):
    """The observers of this thread, in `active`. Per thread, so a capture in one thread never records
    another thread's work."""

    def __init__(self) -> None:
        self.active: list[Observer] = []


observers = _Observers()


class _Pending(threading.local):
    """The tensors assigned in this thread since the last realize_pending_assigns(), by id (weakly held:
    a tensor that goes needs no realize). What limn.capture realizes before it records or replays a step."""

    def __init__(self) -> None:
        self.assigns: weakref.WeakValueDictionary[int, Tensor] = weakref.WeakValueDictionary()


pending = _Pending()


def realize_pending_assigns(targets: set[int] | None = None) -> None:
    """Realizes the assigns made in this thread that still wait for a realize: all of them, or those
    writing a buffer in `targets` (by id). limn.capture runs it before it records a step (all) and before
    each replay (the buffers the recording reads): an assign made outside the step (a weight loaded, a
    caller's `t.assign(...)`) must land outside it and before the replay reads the bytes, as the eager step
    would have realized it by reading the tensor."""
    waiting = []
    for key, t in list(pending.assigns.items()):
        if t.node.op is not Op.ASSIGN:
            del pending.assigns[key]  # realized since
        elif targets is None or id(t.node.srcs[0].arg) in targets:
            waiting.append(t)
            del pending.assigns[key]
    if waiting:
        realize(*waiting)


def buffer_node(device: str, arr: np.ndarray) -> Node:
    """A BUFFER node holding a copy of `arr` on `device`, in memory the device allocates (the c device's starts
    on a cache line, as its kernels' vectors want)."""
    dev = get_device(device)
    dtype = dtypes.from_numpy(arr.dtype)
    handle = dev.alloc(dtype, arr.shape)
    dev.copyin(handle, arr)
    buf = Buffer(dev.name, dtype, arr.shape, handle)
    for observer in observers.active:
        observer.created(buf)
    return buf.node()


def remember(node: Node, buffer: Node) -> None:
    """Records that `node`'s value is in BUFFER node `buffer`, for every graph that still holds it."""
    _realized[node] = buffer


def _resolved(node: Node) -> Node:
    """The BUFFER node holding a realized node's value: one hop, or more when that buffer was then
    assigned and the node read its old bytes (limn.runtime.snapshot)."""
    while node in _realized:
        node = _realized[node]
    return node


def _realized_as(node: Node) -> Node | None:
    """The BUFFER node holding this node's value when it has been realized before, else None."""
    return _resolved(node) if node in _realized else None


def realize(*tensors: Tensor) -> None:
    """Computes the tensors in one batch per device: one graph, one run, so every ASSIGN in the batch
    reads pre-step values. Each tensor then holds a buffer.

    A tensor whose buffer an assign has since overwritten in place (optimizer state) raises
    limn.runtime.snapshot.StaleReadError instead of reading the new bytes."""
    for i, t in enumerate(tensors):
        if not isinstance(getattr(t, "node", None), Node):  # the runtime sits below Tensor's class: ask its node
            raise TypeError(
                f"limn.realize takes tensors; argument {i} is {type(t).__name__} ({t!r:.60}): pass Tensors only"
            )
    with _one_at_a_time:
        for t in tensors:
            if t.node.op is Op.BUFFER and t.node in _realized:
                t.node = snapshot.check_readable(_resolved(t.node))  # read before an assign: the old bytes
        # a tensor asked for twice is updated once (its node changes under it below)
        pending = list({id(t): t for t in tensors if t.node.op is not Op.BUFFER}.values())
        for name, group in _by_device(pending).items():
            _run(name, group)


def _by_device(tensors: list[Tensor]) -> dict[str, list[Tensor]]:
    """The tensors grouped by the device that runs them: host tensors run on the selected host device."""
    by_device: dict[str, list[Tensor]] = {}
    current = current_device()
    for t in tensors:
        name = current if get_device(t.device).host and get_device(current).host else t.device
        by_device.setdefault(name, []).append(t)
    return by_device


def _run(name: str, group: list[Tensor]) -> None:
    """One run of device `name` for `group`; afterwards each tensor holds its buffer."""
    unique: dict[int, Node] = {}  # the same node asked for twice is computed once
    for t in group:
        unique.setdefault(id(t.node), t.node)
    originals = list(unique.values())
    sinks, forks = snapshot.prepare(originals, _realized_as)
    try:
        buffers = get_device(name).run(sinks)
    except BaseException:
        snapshot.undo(forks)  # nothing was written: the targets keep their bytes
        raise
    for observer in observers.active:
        observer.realized(name, sinks, buffers, forks)
    done = {}
    for original, buf in zip(originals, buffers):
        node = buf.node()
        done[id(original)] = node
        _realized[original] = node
    assigned = {id(f.target): f for f in forks}
    for t in group:
        f = assigned.get(id(t.node.srcs[0].arg)) if t.node.op is Op.ASSIGN else None
        if f is not None:  # (an assign realized earlier through another tensor is no fork here)
            f.owners.append(weakref.ref(t))
        t.node = done[id(t.node)]
        t._device = name if not get_device(name).host else t._device
    snapshot.settle(forks, remember)
