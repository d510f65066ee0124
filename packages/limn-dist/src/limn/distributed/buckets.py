"""Buckets: many tensors reduced as a few flat arrays, one collective each, and the check that every rank agrees.

A model has hundreds of parameters, and a collective per parameter pays MPI's latency hundreds of times. So
the tensors of one collective are laid end to end in flat host arrays of one wire dtype, cut every
`bucket_bytes`, each reduced with one call, then cut back into the tensors' shapes. The layout depends only
on the list of tensors (names, dtypes, shapes), which `agree` has checked is the same on every rank before
any data moves: a rank passing something else gets an error naming itself and the tensor, on every rank at
once, rather than a hang or a silently wrong sum.

A wire dtype is what MPI reduces: the tensor's own, except the half widths (float16 and bfloat16, which
MPI has no type for), reduced in float32 and rounded back, and bool, reduced as uint8.
Pipeline: tensors (realized) -> **buckets** -> MPI collective -> buckets -> the tensors' buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from limn.dtypes import DType

DEFAULT_BUCKET_BYTES = 25 * 2**20
"""How much one collective carries at most: big enough that MPI's per-call latency is paid a few times per
step, small enough that a bucket's flat copy stays a small share of memory (torch's DDP uses 25 MiB too)."""

WIRE: dict[str, np.dtype] = {
    "float16": np.dtype(np.float32),
    "bfloat16": np.dtype(np.float32),
    "bool": np.dtype(np.uint8),
}
"""The dtype a tensor travels in when it is not its own (see the module docstring)."""


class DistributedError(RuntimeError):
    """A collective cannot run as asked: the message names the rank, the tensor and what differs."""


def wire_dtype(dtype: DType) -> np.dtype:
    return WIRE.get(dtype.name, np.dtype(dtype.np))


@dataclass(frozen=True)
class Slot:
    """Where one tensor sits in its bucket: elements [start, start + size)."""

    index: int  # the tensor's position in the collective's list
    start: int
    size: int


@dataclass
class Bucket:
    """One flat array of one wire dtype and the tensors laid in it."""

    wire: np.dtype
    slots: list[Slot]
    size: int = 0

    @property
    def nbytes(self) -> int:
        return self.size * self.wire.itemsize


def plan(dtypes: list[DType], sizes: list[int], bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> list[Bucket]:
    """Buckets for tensors of these dtypes and element counts, in order: grouped by wire dtype (in order of
    first appearance), a new bucket begun when the next tensor would pass bucket_bytes (a bigger tensor has a
    bucket to itself)."""
    if bucket_bytes <= 0:
        raise ValueError(f"bucket_bytes={bucket_bytes}: a bucket must hold at least one byte")
    buckets: list[Bucket] = []
    open_bucket: dict[np.dtype, Bucket] = {}
    for i, (dtype, size) in enumerate(zip(dtypes, sizes)):
        wire = wire_dtype(dtype)
        bucket = open_bucket.get(wire)
        if bucket is None or (bucket.size and (bucket.size + size) * wire.itemsize > bucket_bytes):
            bucket = open_bucket[wire] = Bucket(wire, [])
            buckets.append(bucket)
        bucket.slots.append(Slot(i, bucket.size, size))
        bucket.size += size
    return buckets


def pack(bucket: Bucket, arrays: list[np.ndarray]) -> np.ndarray:
    """The bucket's flat array, each tensor's elements copied in at its slot (converted to the wire dtype)."""
    flat = np.empty(bucket.size, bucket.wire)
    for slot in bucket.slots:
        flat[slot.start : slot.start + slot.size] = arrays[slot.index].reshape(-1)
    return flat


def unpack(
    bucket: Bucket, flat: np.ndarray, dtypes: list[DType], shapes: list[tuple[int, ...]]
) -> dict[int, np.ndarray]:
    """Tensor index -> its reduced value, cut from the flat array and converted back to its own dtype."""
    out = {}
    for slot in bucket.slots:
        piece = flat[slot.start : slot.start + slot.size]
        out[slot.index] = piece.astype(dtypes[slot.index].np, copy=True).reshape(shapes[slot.index])
    return out


def signature(names: list[str], dtypes: list[DType], shapes: list[tuple[int, ...]], what: str) -> tuple:
    """What every rank must agree on before a collective moves data: its kind and each tensor's name,
    dtype and shape, in order."""
    return (what, tuple((n, d.name, tuple(s)) for n, d, s in zip(names, dtypes, shapes)))


def agree(signatures: list[tuple], what: str) -> None:
    """Raises DistributedError on every rank alike when any rank's signature (gathered from all of them)
    differs from rank 0's, naming the first rank and tensor that differ."""
    first = signatures[0]
    for rank, sig in enumerate(signatures[1:], start=1):
        if sig == first:
            continue
        if sig[0] != first[0]:
            raise DistributedError(f"{what}: rank {rank} called {sig[0]} where rank 0 called {first[0]}")
        ours, theirs = first[1], sig[1]
        for k, (a, b) in enumerate(zip(ours, theirs)):
            if a != b:
                raise DistributedError(
                    f"{what}: rank {rank}'s tensor {k} ({b[0]}) is {b[1]}{list(b[2])}, rank 0's ({a[0]}) is "
                    f"{a[1]}{list(a[2])}: every rank must pass the same tensors, in the same order, with the same "
                    "dtypes and shapes; nothing was reduced"
                )
        raise DistributedError(
            f"{what}: rank {rank} passed {len(theirs)} tensors, rank 0 passed {len(ours)}: every rank must pass "
            "the same tensors; nothing was reduced"
        )
