"""Transports: how a device's buffers reach the collective, which way each device goes, and why.

The numpy and c devices keep every buffer in host memory as a numpy array, so MPI reads them where they are
(the buckets copy them out; nothing is staged): "host". The cuda device goes through NCCL (limn.distributed.nccl)
when libnccl loads and every rank has a GPU that can reach the others': "nccl". Otherwise its buffers are
copied to the host for MPI and back after it: "staged", with the reason. `choose(device)` decides, the same
on every rank (each rank's findings are gathered, so one rank without NCCL sends every rank to staging rather
than leaving the others waiting in NCCL), and `describe(device)` says it in a sentence for a log line.
Pipeline: tensor buffers -> **transport** -> buckets -> MPI or NCCL.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

import numpy as np

from limn.distributed import watchdog
from limn.frontend.tensor import Tensor
from limn.runtime.device import DeviceError, get_device

HOST = "MPI reads the host buffers directly"
STAGED = "MPI with host staging (each bucket copied to the host and back)"
NCCL = "NCCL between the GPUs (device buckets on the device's stream)"


@dataclass(frozen=True)
class Transport:
    """The way one device's collectives go: `name` is "host", "nccl" or "staged", `reason` why, in a phrase."""

    name: str
    reason: str
    device: str

    @property
    def sentence(self) -> str:
        what = {"host": HOST, "nccl": NCCL, "staged": STAGED}[self.name]
        return f"{self.device}: {what}" + ("" if self.reason == HOST else f": {self.reason}")


_chosen: dict[tuple[str, bool], Transport] = {}  # (device, initialized) -> its transport: choosing is collective
_communicators: dict[str, Any] = {}  # device name -> its NcclTransport, made on the first collective


def choose(device: str) -> Transport:
    """The transport for a device's collectives (see the module docstring), chosen once per device. Once
    limn.distributed is initialized in a world of several it is collective: every rank must call it (the
    collectives do, for the device of their tensors), and every rank's tensors must be on the same device.

    What is checked for "nccl", in order, each rank for itself then gathered: libnccl loads and is 2.20 or
    newer; the device is a GPU (it has a CUDA stream); in a world of several, no two ranks on one host share
    a GPU (NCCL refuses that), and two ranks on one host whose GPUs this process can see can access each
    other's memory (cuDeviceCanAccessPeer both ways). Ranks on different hosts reach each other through the
    network NCCL finds (InfiniBand, or sockets): NCCL decides, and its error says when it cannot."""
    world = _world()
    key = (device, world is not None)  # a choice made before init() asked no other rank: made again after it
    if key not in _chosen:
        _chosen[key] = _decide(device, world)
    return _chosen[key]


def describe(device: str) -> str:
    """How collectives move a device's buffers, in a sentence for a log line ("cuda: MPI with host staging
    ...: NCCL not installed (limn-dist[nccl]) ...")."""
    return choose(device).sentence


def _decide(device: str, world: Any) -> Transport:
    try:
        dev = get_device(device)
    except DeviceError as e:
        dev, problem = None, f"no GPU: device {device!r} did not start ({e})"
    else:
        if dev.host:
            return Transport("host", HOST, device)  # a property of the device's kind: the same on every rank
        problem = _nccl_problem() or _gpu_problem(dev)
    if world is not None and world.size > 1:
        mine = (problem, socket.gethostname(), None if problem else _bus_id(dev))
        records = watchdog.allgather_object(world.watch, mine, "choosing the transport")
        problem = _first(records, 0) or _shared_gpu(records)
        if problem is None:
            peers = (_peer_problem(dev, records, world.rank),)
            problem = _first(watchdog.allgather_object(world.watch, peers, "choosing the transport"), 0)
    if problem is not None:
        return Transport("staged", problem, device)
    return Transport("nccl", "every rank's GPU reaches the others'", device)


def _world() -> Any:
    """limn.distributed's world, or None before init() (a world of one: no peers to ask)."""
    from limn.distributed import world as distributed  # imported here: world imports this module

    return distributed._world


def _first(records: list[tuple], at: int) -> str | None:
    """The first rank's problem among gathered records (field `at`), named by its rank, or None."""
    for rank, record in enumerate(records):
        if record[at] is not None:
            return f"rank {rank}: {record[at]}" if len(records) > 1 else record[at]
    return None


def _nccl_problem() -> str | None:
    """Why NCCL cannot be used on this rank (not installed, not loadable, too old), or None."""
    from limn.distributed import nccl

    try:
        found = nccl.version()
    except nccl.NcclUnavailable as e:
        return str(e)
    if found < nccl.MIN_VERSION:
        need = ".".join(map(str, nccl.MIN_VERSION[:2]))
        return f"NCCL {'.'.join(map(str, found))} is older than {need}; pip install 'limn-dist[nccl]' for a newer one"
    return None


def _gpu_problem(dev: Any) -> str | None:
    """Why the device is not a GPU NCCL can run on (it has no CUDA stream), or None."""
    if getattr(dev, "stream", None) is None or getattr(dev, "driver", None) is None:
        return f"no GPU: device {dev.name!r} keeps its buffers off the host but has no CUDA stream for NCCL"
    return None


def _bus_id(dev: Any) -> str:
    """The GPU's PCI bus id ("0000:1B:00.0"): what names one GPU across processes, whatever their
    CUDA_VISIBLE_DEVICES makes of its ordinal."""
    from limn.distributed.nccl import cuda_call

    return cuda_call(dev.driver.cuDeviceGetPCIBusId(32, dev.device), "cuDeviceGetPCIBusId").split(b"\0")[0].decode()


def _shared_gpu(records: list[tuple]) -> str | None:
    """Two ranks on one host with one GPU between them, or None."""
    seen: dict[tuple[str, str], int] = {}
    for rank, (_, host, bus) in enumerate(records):
        other = seen.setdefault((host, bus), rank)
        if other != rank:
            return f"ranks {other} and {rank} share the GPU at {bus} on {host}, and NCCL needs one GPU per rank"
    return None


def _peer_problem(dev: Any, records: list[tuple], rank: int) -> str | None:
    """Whether this rank's GPU and each other same-host rank's GPU that this process can see can access
    each other's memory (a GPU this process cannot see is NCCL's to reach: it finds the way itself)."""
    host, mine = records[rank][1], records[rank][2]
    for other, (_, their_host, bus) in enumerate(records):
        if other == rank or their_host != host:
            continue
        peer = _device_by_bus(dev, bus)
        if peer is not None and not (_can_access(dev, dev.device, peer) and _can_access(dev, peer, dev.device)):
            return f"GPUs cannot reach each other: {mine} and rank {other}'s {bus} on {host} (cuDeviceCanAccessPeer)"
    return None


def _device_by_bus(dev: Any, bus: str) -> Any:
    """The CUdevice at that PCI bus id, or None when this process cannot see it."""
    err, peer = dev.driver.cuDeviceGetByPCIBusId(bus.encode())
    return peer if err == dev.driver.CUresult.CUDA_SUCCESS else None


def _can_access(dev: Any, a: Any, b: Any) -> bool:
    from limn.distributed.nccl import cuda_call

    return bool(cuda_call(dev.driver.cuDeviceCanAccessPeer(a, b), "cuDeviceCanAccessPeer"))


# ---- the host path's side: bytes as host arrays ----


def host_arrays(tensors: list[Tensor]) -> list[np.ndarray]:
    """Each realized tensor's bytes as a host array: the buffer itself on host devices (read, never written
    through), a copy from the device otherwise."""
    arrays = []
    for t in tensors:
        buffer = t.node.arg
        if isinstance(buffer.handle, np.ndarray):
            arrays.append(buffer.handle.reshape(t.shape))
        else:
            arrays.append(buffer.numpy().reshape(t.shape))
    return arrays


def device_path(tensors: list[Tensor]) -> Any:
    """The NcclTransport that reduces these tensors where they are, or None for the host path (host
    buffers, or staging): the one seam between the two ways, which the collectives call. Its communicator is
    made on the first call for a device (collective, as the collectives calling this are)."""
    devices = {t.device for t in tensors}
    if len(devices) != 1 or choose(next(iter(devices))).name != "nccl":
        return None
    device = devices.pop()
    if device not in _communicators:
        from limn.distributed import world as distributed  # imported here: world imports this module
        from limn.distributed.nccl import NcclTransport

        world = distributed._get()
        _communicators[device] = NcclTransport(get_device(device), world.comm, world.rank, world.size)
    return _communicators[device]
