"""NCCL, the collectives library GPUs use between them, through ctypes: the few calls limn needs, each checked.

Takes libnccl.so.2 from the nvidia-nccl wheel (limn-dist[nccl]) or the loader's path, and a cuda device
(buffers are device pointers, kernels run on one stream); gives an `NcclTransport`: one communicator for
limn.distributed's world (its id made on rank 0 and sent to the others with MPI) that reduces or broadcasts
tensors on the device, in flat device buckets packed and unpacked by limn's own kernels, with the collective
queued on the device's stream between them. Every NCCL call's result is checked (`check`): NcclError names
the call, NCCL's result and its message. The enums are nccl.h's (the wheel ships the header; a test reads it).
A collective's call returns once it is queued; an error inside it on the GPU, or a peer that went away, shows
at the next wait for the stream (the unpacking realize), and a killed rank makes mpiexec end the others.
Buckets use the host path's wire dtypes (half widths in float32), so both paths round alike.
Pipeline: tensor buffers -> transport (limn.distributed.transport chose **NCCL**) -> device buckets -> GPUs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from typing import Any

from limn.distributed import buckets as dist_buckets
from limn.distributed.buckets import DistributedError
from limn.frontend.tensor import Tensor

# ncclDataType_t, keyed by the numpy name of the wire dtype (limn.distributed.buckets.wire_dtype): nccl.h's values
DATA_TYPES = {
    "int8": 0,
    "uint8": 1,
    "int32": 2,
    "uint32": 3,
    "int64": 4,
    "uint64": 5,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
}

# ncclRedOp_t, keyed by limn.distributed's op names; "mean" is ncclAvg (the sum divided by the world size)
RED_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "mean": 4}

# ncclResult_t, by value
RESULTS = {
    0: "ncclSuccess",
    1: "ncclUnhandledCudaError",
    2: "ncclSystemError",
    3: "ncclInternalError",
    4: "ncclInvalidArgument",
    5: "ncclInvalidUsage",
    6: "ncclRemoteError",
    7: "ncclInProgress",
    8: "ncclTimeout",
}

UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES
MIN_VERSION = (2, 20, 0)  # ncclAvg, bfloat16 and ncclGetLastError are all older; 2.20 is what the extra asks


class NcclError(DistributedError):
    """An NCCL call failed: the message names the call, NCCL's result and its description."""


class NcclUnavailable(DistributedError):
    """libnccl could not be found or loaded: the message says where it looked and what to install."""


class UniqueId(ctypes.Structure):
    """ncclUniqueId: 128 opaque bytes naming one communicator (bytes(uid) are what ranks exchange)."""

    _fields_ = [("internal", ctypes.c_ubyte * UNIQUE_ID_BYTES)]


def library_path() -> str:
    """Where libnccl.so.2 is: in the nvidia-nccl wheel's package directory (nvidia/nccl/lib), else the name
    the loader finds on its path (LD_LIBRARY_PATH, ldconfig); NcclUnavailable when neither has it."""
    try:
        import nvidia.nccl  # a namespace package: its directory is in __path__, it has no __file__

        for folder in nvidia.nccl.__path__:
            candidate = os.path.join(folder, "lib", "libnccl.so.2")
            if os.path.isfile(candidate):
                return candidate
    except ImportError:
        pass
    found = ctypes.util.find_library("nccl")
    if found is None:
        raise NcclUnavailable(
            "NCCL not installed (limn-dist[nccl]): no nvidia/nccl/lib/libnccl.so.2 in this Python's packages and "
            "no libnccl on the loader's path; pip install 'limn-dist[nccl]' (the nvidia-nccl-cu13 wheel)"
        )
    return found


@functools.cache
def load() -> ctypes.CDLL:
    """libnccl, loaded once, with the argument and result types of the calls limn makes declared."""
    path = library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise NcclUnavailable(f"NCCL not loadable: {path} did not load ({e}); reinstall limn-dist[nccl]") from e
    result, pointer, size = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
    signatures = {  # name: (argtypes, restype), as nccl.h declares them (enums are ints)
        "ncclGetVersion": ([ctypes.POINTER(ctypes.c_int)], result),
        "ncclGetUniqueId": ([ctypes.POINTER(UniqueId)], result),
        "ncclCommInitRank": ([ctypes.POINTER(pointer), ctypes.c_int, UniqueId, ctypes.c_int], result),
        "ncclAllReduce": ([pointer, pointer, size, ctypes.c_int, ctypes.c_int, pointer, pointer], result),
        "ncclBroadcast": ([pointer, pointer, size, ctypes.c_int, ctypes.c_int, pointer, pointer], result),
        "ncclCommDestroy": ([pointer], result),
        "ncclGetErrorString": ([ctypes.c_int], ctypes.c_char_p),
        "ncclGetLastError": ([pointer], ctypes.c_char_p),
    }
    for name, (args, res) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def error_string(code: int) -> str:
    """NCCL's description of a result code ("invalid argument (run with NCCL_DEBUG=WARN for details)")."""
    text = load().ncclGetErrorString(code)
    return text.decode(errors="replace") if text else f"unknown result code {code}"


def check(code: int, call: str, comm: Any = None) -> None:
    """NcclError naming the call, the result and NCCL's messages when `code` is not ncclSuccess."""
    if code == 0:
        return
    message = f"NCCL's {call} failed with {RESULTS.get(code, 'result')} ({code}): {error_string(code)}"
    last = load().ncclGetLastError(comm)
    if last:
        message += f"; NCCL's last error: {last.decode(errors='replace')}"
    raise NcclError(message)


def decode_version(code: int) -> tuple[int, int, int]:
    """(major, minor, patch) from NCCL_VERSION_CODE, which nccl.h spells X*1000 + Y*100 + Z up to 2.8 and
    X*10000 + Y*100 + Z from 2.9 on.

    >>> decode_version(23007), decode_version(2804)
    ((2, 30, 7), (2, 8, 4))
    """
    if code < 10000:
        return (code // 1000, code % 1000 // 100, code % 100)
    return (code // 10000, code % 10000 // 100, code % 100)


def version() -> tuple[int, int, int]:
    """The loaded library's version, from ncclGetVersion."""
    code = ctypes.c_int()
    check(load().ncclGetVersion(ctypes.byref(code)), "ncclGetVersion")
    return decode_version(code.value)


def unique_id() -> bytes:
    """A fresh ncclUniqueId's 128 bytes (ncclGetUniqueId; it opens the bootstrap socket, and needs no GPU)."""
    uid = UniqueId()
    check(load().ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
    return bytes(uid)


def cuda_call(result: tuple, call: str) -> Any:
    """The value of a cuda.bindings driver call, whose result is (CUresult, value), or NcclError naming the
    call and the driver's error (the probes limn.distributed.transport makes before choosing NCCL)."""
    err, *values = result
    if err.name != "CUDA_SUCCESS":
        raise NcclError(f"the CUDA driver's {call} failed with {err.name}")
    return values[0] if len(values) == 1 else tuple(values)


def nccl_type(wire: Any, what: str) -> int:
    """The ncclDataType_t of a wire dtype (numpy), or DistributedError naming the tensor's dtype."""
    code = DATA_TYPES.get(wire.name)
    if code is None:
        raise DistributedError(
            f"{what}: NCCL has no type for {wire.name} (it has {', '.join(DATA_TYPES)}); cast the tensor, or run "
            "the collective on the host path (limn.distributed.transport)"
        )
    return code


class NcclTransport:
    """One NCCL communicator over limn.distributed's world, on one cuda device (see the module docstring).

    `device` is the cuda device object (limn.get_device("cuda")): what this reads of it is its `stream` (a
    cuda.bindings CUstream), `synchronize()` (which also makes its context current in this thread) and each
    realized buffer's `handle.pointer` (a CUdeviceptr). Making one is collective: every rank must make it."""

    name = "nccl"

    def __init__(self, device: Any, comm: Any, rank: int, size: int) -> None:
        lib = load()
        self.device, self.rank, self.size = device, rank, size
        uid = unique_id() if rank == 0 else None
        uid = comm.bcast(uid, root=0)  # rank 0's id, through MPI: the one thing NCCL needs to find the others
        device.synchronize()  # the device's context current in this thread: NCCL binds the communicator to it
        handle = ctypes.c_void_p()
        uid = UniqueId.from_buffer_copy(uid)
        check(lib.ncclCommInitRank(ctypes.byref(handle), size, uid, rank), f"ncclCommInitRank(rank {rank} of {size})")
        self.comm = handle

    @property
    def _stream(self) -> int:
        return int(self.device.stream)  # a CUstream's int is the cudaStream_t NCCL takes

    def all_reduce(self, tensors: list[Tensor], op: str, bucket_bytes: int) -> dict[int, Tensor]:
        """Tensor index -> its value reduced across ranks, as a lazy tensor reading a reduced device bucket.
        Each bucket: packed by a limn kernel, reduced in place with ncclAllReduce on the device's stream."""
        reduced: dict[int, Tensor] = {}
        for bucket, kind in plan(tensors, bucket_bytes, f"all_reduce({op!r})"):
            flat = pack(bucket, tensors)
            pointer = flat.node.arg.handle.pointer
            call = f"ncclAllReduce({bucket.size} x {bucket.wire.name}, {op})"
            check(
                load().ncclAllReduce(pointer, pointer, bucket.size, kind, RED_OPS[op], self.comm, self._stream),
                call,
                self.comm,
            )
            reduced |= unpack(bucket, flat, tensors)
        return reduced

    def broadcast(self, tensors: list[Tensor], root: int, bucket_bytes: int) -> dict[int, Tensor]:
        """Tensor index -> root's value, as a lazy tensor reading a device bucket (ncclBroadcast in place)."""
        values: dict[int, Tensor] = {}
        for bucket, kind in plan(tensors, bucket_bytes, "broadcast_parameters"):
            flat = pack(bucket, tensors)
            pointer = flat.node.arg.handle.pointer
            call = f"ncclBroadcast({bucket.size} x {bucket.wire.name}, root={root})"
            check(
                load().ncclBroadcast(pointer, pointer, bucket.size, kind, root, self.comm, self._stream),
                call,
                self.comm,
            )
            values |= unpack(bucket, flat, tensors)
        return values

    def close(self) -> None:
        """Destroys the communicator (collective: every rank closes it)."""
        if self.comm:
            check(load().ncclCommDestroy(self.comm), "ncclCommDestroy")
            self.comm = ctypes.c_void_p()


def plan(tensors: list[Tensor], bucket_bytes: int, what: str) -> list[tuple[dist_buckets.Bucket, int]]:
    """The host path's buckets (limn.distributed.buckets.plan: the same wire dtypes, so both paths round alike),
    each with its ncclDataType_t, all checked before the first one moves."""
    buckets = dist_buckets.plan([t.dtype for t in tensors], [t.numel() for t in tensors], bucket_bytes)
    return [(bucket, nccl_type(bucket.wire, what)) for bucket in buckets]


def pack(bucket: dist_buckets.Bucket, tensors: list[Tensor]) -> Tensor:
    """The bucket as one realized flat tensor on the tensors' device, its own fresh buffer (a CONTIGUOUS, so
    the collective writes in place into nothing but it): each tensor flattened, cast to the wire dtype, and
    laid at its slot."""
    wire = bucket.wire.name
    pieces = [tensors[slot.index].reshape(-1).cast(wire) for slot in bucket.slots]  # each (size,)
    flat = Tensor.cat(pieces) if len(pieces) > 1 else pieces[0]
    return flat.contiguous().realize()  # (bucket.size,)


def unpack(bucket: dist_buckets.Bucket, flat: Tensor, tensors: list[Tensor]) -> dict[int, Tensor]:
    """Tensor index -> its slot of the flat tensor, shaped and cast back to its own dtype (lazy: the caller
    writes them with assigns, as the host path writes its arrays)."""
    out = {}
    for slot in bucket.slots:
        t = tensors[slot.index]
        out[slot.index] = flat[slot.start : slot.start + slot.size].reshape(t.shape).cast(t.dtype)
    return out
