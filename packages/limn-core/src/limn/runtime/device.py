"""The device protocol, the buffers devices own, and the registry that finds devices by name.

A device is whatever runs a graph: it takes the sink Nodes of one realize() and returns a Buffer for each.
Besides `run`, it implements five hooks for moving bytes (alloc, free, copyin, copyout, synchronize).
Devices are found through the entry-point group `limn.devices` (name -> a Device or a zero-argument
factory), loaded on first use: `import limn` imports no backend. `set_device(name)` picks the executor.
Pipeline: tensor -> graph -> [schedule -> IR -> renderer] -> **device**.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Protocol, runtime_checkable

import numpy as np

from limn.dtypes import DType
from limn.graph.ops import Node, Op, Shape

ENTRY_POINT_GROUP = "limn.devices"

# First-party device names and the distribution that provides each, for "pip install ..." hints.
KNOWN_PACKAGES = {"numpy": "limn-core", "c": "limn-c", "cuda": "limn-cuda"}


class DeviceError(RuntimeError):
    """A device could not be found, loaded or used; the message names the device and the cause."""


@runtime_checkable
class Device(Protocol):
    """What a backend implements. `host` devices keep buffers as numpy arrays in host memory, so
    tensors move freely between them; `custom_kernels` names the CUSTOM kernels the device supplies."""

    name: str
    host: bool
    custom_kernels: frozenset[str]

    def alloc(self, dtype: DType, shape: Shape) -> Any:
        """A handle to new memory for a row-major array of `shape` and `dtype` (its contents unwritten)."""

    def free(self, handle: Any) -> None:
        """Gives a handle's memory back (the last reference to its Buffer went)."""

    def copyin(self, handle: Any, array: np.ndarray) -> None:
        """Writes a host array, of the handle's dtype and shape, into the handle's memory."""

    def copyout(self, handle: Any, dtype: DType, shape: Shape) -> np.ndarray:
        """A fresh host array holding the handle's bytes as `dtype` values of `shape`."""

    def synchronize(self) -> None:
        """Returns once every kernel launched so far has finished."""

    def run(self, sinks: Sequence[Node]) -> list[Buffer]:
        """Computes the sinks' values (their graph's leaves are this device's buffers): a new Buffer each."""


@dataclass(eq=False)
class Buffer:
    """Row-major bytes of one dtype and shape, owned by a device. `handle` is the device's own (a numpy
    array on host devices). The device's free hook runs when the last reference goes away.

    `nodes` holds (weakly) every BUFFER node made by `node()`: the graph's readers of the bytes the
    buffer holds now. An assign gives the buffer fresh memory (`swap_out`) and hands the old bytes to
    those readers (limn.runtime.snapshot), so a value built before an assign never sees it."""

    device: str
    dtype: DType
    shape: Shape
    handle: Any
    nodes: weakref.WeakSet = field(default_factory=weakref.WeakSet, repr=False)
    in_place: bool = field(default=False, repr=False)  # assigns write it where it is (limn.runtime.snapshot)
    # the device memory this buffer frees when it goes (its handle, and its spare), read by a finalizer
    _owned: list = field(default_factory=list, repr=False)
    _spare: Any = field(default=None, repr=False)  # memory an older version of the bytes gave back
    _retire: Any = field(default=None, repr=False)  # on a swapped-out Buffer: gives its memory back

    def __post_init__(self) -> None:
        dev = _loaded.get(self.device)
        self._owned.append(self.handle)
        if dev is not None and not dev.host:
            weakref.finalize(self, _free_all, dev.free, self._owned)

    def node(self) -> Node:
        """A BUFFER node reading these bytes, registered in `nodes`."""
        n = Node(Op.BUFFER, (), self.dtype, self.shape, self)
        with _nodes_lock:
            self.nodes.add(n)
        return n

    def take_nodes(self) -> list[weakref.ref[Node]]:
        """Weak references to the nodes registered so far, which are forgotten here."""
        with _nodes_lock:
            refs = [weakref.ref(n) for n in self.nodes]
            self.nodes.clear()
        return refs

    def swap_out(self) -> Buffer:
        """Moves the bytes held now into a new Buffer, which is returned, and gives this one unwritten
        memory of the same dtype and shape. Nothing is copied. The memory is the spare when there is one
        (the bytes of an older swap_out, given back when their last reader went), else fresh from the
        device: a training loop's assigns alternate between two blocks instead of allocating each step."""
        handle = self.handle
        old = Buffer(self.device, self.dtype, self.shape, handle)
        old._owned.clear()  # not old's to free: it gives the memory back to this buffer instead
        dev = get_device(self.device)
        free = None if dev.host else dev.free
        old._retire = weakref.finalize(old, _give_back, weakref.ref(self), handle, free)
        self._owned[:] = [h for h in self._owned if h is not handle]
        if self._spare is not None:
            self.handle, self._spare = self._spare, None
        else:
            self.handle = dev.alloc(self.dtype, self.shape)
            self._owned.append(self.handle)
        return old

    def swap_back(self, old: Buffer) -> None:
        """Undoes swap_out: takes the bytes of `old` (the Buffer it returned) back; the unwritten memory
        becomes the spare."""
        old._retire.detach()
        self._spare, self.handle = self.handle, old.handle
        self._owned.append(old.handle)

    def numpy(self) -> np.ndarray:
        """A fresh host copy of the bytes (changing it never changes the buffer)."""
        dev = get_device(self.device)
        return np.array(self.handle, copy=True) if dev.host else dev.copyout(self.handle, self.dtype, self.shape)

    def __repr__(self) -> str:
        return f"Buffer({self.device}, {self.dtype.name}{list(self.shape)})"


def _free_all(free: Callable[[Any], None], handles: list) -> None:
    for handle in handles:
        free(handle)


def _give_back(target: weakref.ref[Buffer], handle: Any, free: Callable[[Any], None] | None) -> None:
    """An old version of a buffer's bytes has no reader left: it becomes the buffer's spare (or is freed)."""
    buffer = target()
    if buffer is not None and buffer._spare is None:
        buffer._spare = handle
        buffer._owned.append(handle)
    elif free is not None:
        free(handle)


_nodes_lock = threading.Lock()  # threads may read and assign one buffer's nodes at once

# ---- the registry ----

_lock = threading.Lock()
_registered: dict[str, Callable[[], Device] | Device] = {}
_loaded: dict[str, Device] = {}
_current = "numpy"


def register_device(name: str, target: Callable[[], Device] | Device) -> None:
    """Makes a device available under `name` at runtime, beside those found through entry points."""
    with _lock:
        _registered[name] = target
        _loaded.pop(name, None)


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def devices() -> list[str]:
    """Names of every device installed (the numpy reference first). Nothing is imported to list them,
    so a broken device package still leaves the others listed."""
    return sorted(set(_entry_points()) | set(_registered) | {"numpy"}, key=lambda n: (n != "numpy", n))


def _load(name: str) -> Device:
    if name in _registered:
        target: Any = _registered[name]
        origin = f"registered device {name!r}"
    else:
        eps = _entry_points()
        if name not in eps:
            if name == "numpy":  # core's own, also when limn-core runs from a source tree
                from limn.runtime.numpy_device import NumpyDevice

                return NumpyDevice()
            installed = ", ".join(devices())
            package = KNOWN_PACKAGES.get(name)
            hint = f" Install it with: pip install {package}." if package else ""
            raise DeviceError(f"no device named {name!r} is installed (installed: {installed}).{hint}")
        ep = eps[name]
        dist = getattr(ep, "dist", None)
        origin = f"device {name!r} (entry point {ep.value}" + (f" from {dist.name})" if dist else ")")
        try:
            target = ep.load()
        except Exception as e:
            raise DeviceError(f"{origin} failed to load: {type(e).__name__}: {e}") from e
    try:
        # a class or a factory function is called; an object that already is a Device is used as it is
        is_instance = isinstance(target, Device) and not isinstance(target, type)
        dev = target if is_instance else target()
    except DeviceError:
        raise
    except Exception as e:
        raise DeviceError(f"{origin} cannot be used here: {type(e).__name__}: {e}") from e
    if not isinstance(dev, Device):
        raise DeviceError(f"{origin} gave {type(dev).__name__}, which does not implement limn.runtime.device.Device")
    return dev


def get_device(name: str | None = None) -> Device:
    """The device object for `name` (the current device when None), loading it on first use."""
    name = _current if name is None else name
    dev = _loaded.get(name)
    if dev is None:
        dev = _load(name)
        with _lock:
            dev = _loaded.setdefault(name, dev)
    return dev


def set_device(name: str) -> None:
    """Selects the device that realizes graphs from now on. Fails here, with the reason, when the
    device is not installed or its toolchain is missing."""
    global _current
    if not isinstance(name, str):
        raise TypeError(f"set_device takes a device name such as 'numpy' or 'c', not {type(name).__name__}")
    get_device(name)
    _current = name


def current_device() -> str:
    """The name of the device set_device() selected ("numpy" until then): where new tensors are made and
    host tensors run. It is one setting for the process, not per thread."""
    return _current
