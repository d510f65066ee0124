"""Data-parallel training on MPI: every process (rank) holds the whole model, and collectives keep them equal.

`init()` joins the processes `mpiexec -n N` (or srun, or any MPI launcher) started; a process started on its
own is a world of one. Ranks start from the same weights (`broadcast_parameters`), each computes gradients
on its own shard of the batch (`shard_rows`, `DistributedSampler`), and `all_reduce` (or a `DataParallel`,
which averages every gradient in a few flat buckets) makes them the gradients of the whole batch, so every
rank's optimizer takes the same step. Checkpoints are written once (`on_root`) and read by every rank.

The transport is MPI itself, through mpi4py: MPICH comes as a wheel (limn-dist[mpich]) with its mpiexec, and
a cluster's own MPI works the same. The numpy and c devices hold their buffers in host memory, which MPI
reads directly; the cuda device reduces them on the GPUs with NCCL when it can (limn.distributed.nccl), else
stages them through the host (limn.distributed.transport chooses, and says which and why).

What is guaranteed: a collective's result is the same on every rank, and the same from run to run for a
given world size and the same tensors: MPI fixes its reduction order by the communicator and the message
size, not by which rank arrives first (the tests hold MPICH to it, with ranks arriving in random order).
What is not: the same bits across world sizes (a sum of 2 parts and of 4 rounds differently), or across MPI
implementations and versions, which may choose other reduction algorithms.

A rank that raises aborts every rank (MPI_Abort, with the traceback and which rank it was), a rank that is
killed makes the launcher end the others, and every collective waits under limn.distributed.watchdog: a
deadline, and an abort naming the rank that ended while the others waited for it. A failed run never hangs.
Pipeline: nn/optim step -> **distributed** (buckets, MPI) -> tensor buffers -> device.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from limn.distributed import buckets as dist_buckets
from limn.distributed import transport, watchdog
from limn.distributed.buckets import DEFAULT_BUCKET_BYTES, DistributedError, agree, pack, signature, unpack
from limn.distributed.transport import host_arrays
from limn.dtypes import uint8
from limn.frontend.tensor import Tensor
from limn.graph.ops import Op
from limn.runtime.engine import realize

__all__ = [
    "DistributedError",
    "all_reduce",
    "barrier",
    "broadcast_parameters",
    "init",
    "is_initialized",
    "mpiexec",
    "on_root",
    "rank",
    "shard_rows",
    "world_size",
]


@dataclass
class _World:
    comm: Any  # mpi4py's COMM_WORLD
    rank: int
    size: int
    watch: watchdog.Watch  # how each collective waits (limn.distributed.watchdog)


_world: _World | None = None


def init(timeout: float | None = None) -> None:
    """Joins the MPI world (idempotent). From then on an uncaught exception on any rank prints its traceback
    with the rank and aborts every rank, a rank that ends tells the others (which abort if they wait for it),
    and a collective that waits `timeout` seconds (else $LIMN_DIST_TIMEOUT, else 300) for the other ranks
    aborts every rank, saying which collective it was."""
    global _world
    if _world is not None:
        return
    seconds = watchdog.timeout_from(timeout)
    try:
        from mpi4py import MPI
    except ImportError as e:  # mpi4py imports, but finds no MPI library
        raise DistributedError(
            f"limn.distributed needs an MPI library and mpi4py could not load one ({e}); install limn-dist[mpich] "
            "for MPICH as a wheel, or point mpi4py at the cluster's MPI"
        ) from e
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    _world = _World(comm, rank, size, watchdog.Watch(comm, comm.Dup(), rank, size, seconds))
    if _world.size > 1:
        sys.excepthook = _abort_all
        atexit.register(watchdog.say_farewell, _world.watch)


def _abort_all(kind: type, error: BaseException, tb: Any) -> None:
    """sys.excepthook on a rank of a world of several: the traceback, then MPI_Abort for the whole world."""
    world = _world
    text = "".join(traceback.format_exception(kind, error, tb))
    sys.stderr.write(f"[limn.distributed] rank {world.rank} of {world.size} failed:\n{text}")
    sys.stderr.write(f"[limn.distributed] rank {world.rank}: aborting all {world.size} ranks\n")
    sys.stderr.flush()
    # MPICH's launcher handles the abort and the rank's output in one event loop, and may tear the job down
    # before it has forwarded what this rank just wrote: give it a moment to pass the traceback on first.
    time.sleep(watchdog.ABORT_GRACE_S)
    world.comm.Abort(1)


def is_initialized() -> bool:
    """Whether init() has made this process a rank of a world (and shutdown() not ended it)."""
    return _world is not None


def _get() -> _World:
    if _world is None:
        raise DistributedError("limn.distributed is not initialized: call limn.distributed.init() first")
    return _world


def rank() -> int:
    """This process's number in the world, 0 to world_size() - 1."""
    return _get().rank


def world_size() -> int:
    """How many processes the world has (1 for a process started without a launcher)."""
    return _get().size


def barrier() -> None:
    """Returns once every rank has called it. It exchanges a signature as every collective here does, so a
    rank that calls barrier() where another calls all_reduce raises on both, naming the two."""
    world = _get()
    agree(watchdog.allgather_object(world.watch, signature([], [], [], "barrier()"), "barrier()"), "barrier")


# ---- collectives on tensors ----


def _mpi_ops() -> dict[str, Any]:
    from mpi4py import MPI

    return {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX}  # mean: a sum, divided after


OPS = ("sum", "mean", "max")


def _named(tensors: Iterable[Tensor] | Mapping[str, Tensor] | Iterable[tuple[str, Tensor]]) -> list[tuple[str, Tensor]]:
    """(name, tensor) pairs from a list of tensors (named by position), a dict, or named pairs."""
    if isinstance(tensors, Tensor):
        return [("0", tensors)]
    if isinstance(tensors, Mapping):
        pairs = list(tensors.items())
    else:
        pairs = []
        for i, item in enumerate(tensors):
            named = isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
            pairs.append(item if named else (str(i), item))
    for name, t in pairs:
        if not isinstance(t, Tensor):
            raise TypeError(f"limn.distributed: tensor {name} is a {type(t).__name__}, not a Tensor")
    return pairs


def _whole_buffers(pairs: list[tuple[str, Tensor]], what: str) -> None:
    """Realizes the tensors, after checking none is a view of a buffer: a view realizes to bytes of its own,
    so reducing it in place would leave the tensor it views as it was (torch's would change)."""
    for name, t in pairs:
        node = t.node
        while node.op is Op.VIEW:
            node = node.srcs[0]
        if t.node.op is Op.VIEW and node.op is Op.BUFFER:
            raise DistributedError(
                f"{what}: tensor {name} ({t.dtype.name}{list(t.shape)}) is a view of another tensor's buffer, and a "
                "collective writes whole buffers in place: pass the tensor it views, or t.contiguous()"
            )
    realize(*[t for _, t in pairs])


def all_reduce(
    tensors: Iterable[Tensor] | Mapping[str, Tensor], op: str = "sum", bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> list[Tensor]:
    """Reduces each tensor across ranks in place (op "sum", "mean" or "max") and returns them as a list.
    Lazy tensors are realized first. Every rank must pass the same tensors (names, dtypes, shapes, in order):
    that is checked before any data moves. Integer tensors take "sum" and "max", bools "max" (logical or)."""
    world = _get()
    if op not in OPS:
        raise ValueError(f"all_reduce(op={op!r}): op is one of {', '.join(OPS)}")
    pairs = _named(tensors)
    _whole_buffers(pairs, f"all_reduce({op!r})")
    for name, t in pairs:
        _check_op(op, name, t)
    names, ts = [n for n, _ in pairs], [t for _, t in pairs]
    dtypes, shapes = [t.dtype for t in ts], [t.shape for t in ts]
    what = f"all_reduce({op!r})"
    agree(watchdog.allgather_object(world.watch, signature(names, dtypes, shapes, what), what), "all_reduce")
    write_back(ts, reduce_tensors(ts, op, bucket_bytes))
    return ts


def _check_op(op: str, name: str, t: Tensor) -> None:
    if t.dtype.name == "bool" and op != "max":
        raise DistributedError(f"all_reduce({op!r}): tensor {name} is bool, which reduces with 'max' (logical or) only")
    if op == "mean" and not t.dtype.is_float:
        raise DistributedError(
            f"all_reduce('mean'): tensor {name} is {t.dtype.name}, and a mean of integers is not one; reduce with "
            "'sum' and divide in the dtype you want"
        )


def reduce_tensors(tensors: list[Tensor], op: str, bucket_bytes: int) -> dict[int, np.ndarray | Tensor]:
    """Each realized tensor reduced across ranks: index -> its reduced value, a host array (host buffers, or
    staged through the host) or a lazy device tensor (NCCL, limn.distributed.nccl), as limn.distributed.transport
    chose."""
    nccl = transport.device_path(tensors)
    if nccl is not None:
        return nccl.all_reduce(tensors, op, bucket_bytes)
    return reduce_arrays(host_arrays(tensors), [t.dtype for t in tensors], op, bucket_bytes)


def reduce_arrays(arrays: list[np.ndarray], dtypes: list, op: str, bucket_bytes: int) -> dict[int, np.ndarray]:
    """Each array reduced across ranks, bucket by bucket: index -> the reduced value in its own dtype. The
    arrays are the ranks' host copies (or the host buffers themselves, which are only read)."""
    world = _get()
    sizes = [int(a.size) for a in arrays]
    shapes = [a.shape for a in arrays]
    reduced: dict[int, np.ndarray] = {}
    for bucket in dist_buckets.plan(dtypes, sizes, bucket_bytes):
        flat = pack(bucket, arrays)
        if world.size > 1:
            watchdog.allreduce(world.watch, flat, _mpi_ops()[op], f"all_reduce({op!r})")
        if op == "mean":
            flat /= world.size
        reduced |= unpack(bucket, flat, dtypes, shapes)
    return reduced


def write_back(tensors: list[Tensor], values: dict[int, np.ndarray | Tensor]) -> None:
    """Each tensor's buffer overwritten with its new value, all in one realize (an assign each: a lazy value
    built from the old bytes still computes what it saw)."""
    realize(*[t.assign(values[i]) for i, t in enumerate(tensors) if i in values])


def broadcast_parameters(
    params: Iterable[Tensor] | Mapping[str, Tensor], root: int = 0, bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> list[Tensor]:
    """Every rank's tensors overwritten in place with root's (checked first to be the same tensors on every
    rank); returns them as a list. Bytes travel as they are, so any dtype goes."""
    world = _get()
    if not 0 <= root < world.size:
        raise ValueError(f"broadcast_parameters(root={root}): the world has ranks 0 to {world.size - 1}")
    pairs = _named(params)
    _whole_buffers(pairs, "broadcast_parameters")
    names, ts = [n for n, _ in pairs], [t for _, t in pairs]
    dtypes, shapes = [t.dtype for t in ts], [t.shape for t in ts]
    sig = signature(names, dtypes, shapes, "broadcast_parameters")
    agree(watchdog.allgather_object(world.watch, sig, "broadcast_parameters"), "broadcast_parameters")
    if world.size == 1:
        return ts
    nccl = transport.device_path(ts)
    if nccl is not None:
        write_back(ts, nccl.broadcast(ts, root, bucket_bytes))
        return ts
    raw = [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in host_arrays(ts)]
    byte_dtype = [uint8] * len(raw)  # the bytes as they are
    values: dict[int, np.ndarray] = {}
    for bucket in dist_buckets.plan(byte_dtype, [int(r.size) for r in raw], bucket_bytes):
        flat = pack(bucket, raw)
        watchdog.bcast(world.watch, flat, root, "broadcast_parameters")
        if world.rank != root:
            for slot in bucket.slots:
                piece = flat[slot.start : slot.start + slot.size]
                values[slot.index] = piece.view(dtypes[slot.index].np).reshape(shapes[slot.index]).copy()
    if world.rank != root:
        write_back(ts, values)
    return ts


# ---- data and files ----


def shard_rows(batch: np.ndarray | Tensor, axis: int = 0) -> np.ndarray | Tensor:
    """This rank's contiguous share of a global batch along `axis`: rows [r * n / N, (r + 1) * n / N) of n
    rows on rank r of N. Every rank builds the same global batch (the same seed), and the shares of all ranks
    together are that batch, so N ranks at batch n / N each compute what one process at batch n would."""
    world = _get()
    n = batch.shape[axis]
    if n % world.size:
        raise DistributedError(
            f"shard_rows: a batch of {n} rows does not split evenly over {world.size} ranks; use a global batch "
            f"that is a multiple of {world.size}"
        )
    per = n // world.size
    index = [slice(None)] * len(batch.shape)
    index[axis] = slice(world.rank * per, (world.rank + 1) * per)
    return batch[tuple(index)]


def on_root(fn: Callable[[], Any], root: int = 0) -> Any:
    """Runs fn() on rank `root` only (writing a checkpoint, a log) and returns its result there (None on the
    other ranks); every rank returns only after root has finished, and raises if fn raised on root."""
    world = _get()
    result, failure = None, None
    if world.rank == root:
        try:
            result = fn()
        except Exception as e:
            failure = e
    note = None if failure is None else f"{type(failure).__name__}: {failure}"
    message = watchdog.bcast_object(world.watch, note, root, f"on_root({getattr(fn, '__name__', fn)!r})")
    if failure is not None:
        raise failure
    if message is not None:
        raise DistributedError(f"rank {root} failed in on_root({getattr(fn, '__name__', fn)!r}): {message}")
    return result


def mpiexec() -> str:
    """The mpiexec to launch ranks with: the one beside this Python (limn-dist[mpich] installs it in the
    environment's bin), else the first on PATH; DistributedError when there is none."""
    beside = Path(sys.executable).with_name("mpiexec")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("mpiexec")
    if found is None:
        raise DistributedError("no mpiexec found beside this Python or on PATH; install limn-dist[mpich]")
    return found
