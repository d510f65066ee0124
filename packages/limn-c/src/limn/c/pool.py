"""The host block pool: big buffers the c device frees are kept, by size, for its next allocation.

A fresh block of tens of megabytes costs more to fault in than a fused kernel takes to fill it (a 64 MiB
output: about 8 ms of page faults against 4 ms of kernel on a 2-core machine), and a training or a
generation loop allocates the same sizes over and over. So a block of at least MIN_BYTES goes back to the
pool when the last numpy array over it goes, and the next alloc of that byte size takes it, already mapped.

Every handle, pooled or not, starts on a 64-byte boundary (ALIGN): a numpy array of more than a few
kilobytes starts 16 bytes past one, so each AVX-512 vector a kernel loads from it spans two cache lines (a
copy within L2 took 0.087 ns a float so, 0.072 aligned; memory-bound kernels and the tiles, which load
packed panels, do not notice).

Lifetime stays numpy's: a handle is a numpy array whose base is a `_Block`, every view of the handle keeps
the block alive, and only when the last of them is gone does the block's finalizer hand its bytes back.
Nothing can write into memory that something still reads. The pool keeps at most `limit` bytes
(LIMN_C_POOL_MB, default 1024); `release()` lets them all go.
Pipeline: tensor -> graph -> schedule -> IR -> C source -> cc -> ctypes; **this holds the bytes**.
"""

from __future__ import annotations

import math
import os
import threading

import numpy as np

from limn.dtypes import DType
from limn.graph.ops import Shape

MIN_BYTES = 1 << 20
"""Smaller blocks come from malloc, which already reuses them without faulting pages in."""

ALIGN = 64
"""Where every handle starts: a cache line, and an AVX-512 vector."""


def _aligned(nbytes: int) -> tuple[np.ndarray, int]:
    """(raw, skip): raw's bytes from `skip` on are nbytes that start on an ALIGN boundary."""
    raw = np.empty(nbytes + ALIGN, np.uint8)
    return raw, -raw.__array_interface__["data"][0] % ALIGN


def _limit_from_env() -> int:
    text = os.environ.get("LIMN_C_POOL_MB", "1024")
    try:
        mb = int(text)
    except ValueError:
        raise ValueError(f"LIMN_C_POOL_MB={text!r} is not a whole number of megabytes (0 turns the pool off)") from None
    if mb < 0:
        raise ValueError(f"LIMN_C_POOL_MB={mb} is negative; give a size in megabytes, or 0 to turn the pool off")
    return mb << 20


class _Block:
    """One pooled allocation. Arrays made from it (np.asarray reads __array_interface__) hold it as their
    base, so it is collected only after every view of it, and then gives its bytes back to the pool."""

    __slots__ = ("__array_interface__", "pool", "raw", "skip")

    def __init__(self, raw: np.ndarray, skip: int, pool: HostPool) -> None:
        self.raw, self.skip = raw, skip  # (nbytes + ALIGN,) uint8, owns the memory; the block starts at skip
        self.pool = pool
        self.__array_interface__ = raw[skip : skip + raw.nbytes - ALIGN].__array_interface__

    def __del__(self) -> None:
        self.pool.give_back(self.raw, self.skip)


class HostPool:
    """Free blocks by byte size, at most `limit` bytes in all (the newest frees are the ones kept)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = _limit_from_env() if limit is None else limit
        self.free: dict[int, list[tuple[np.ndarray, int]]] = {}
        self.free_bytes = 0
        self.reused = 0  # allocations served from the pool, for tests and LIMN_DEBUG
        # Re-entrant: a block's finalizer may run on this thread while it holds the lock (a collection
        # started by an allocation inside `take`).
        self._lock = threading.RLock()

    def alloc(self, dtype: DType, shape: Shape) -> np.ndarray:
        """An uninitialized C-contiguous array of `dtype` and `shape`; a pooled block when the size is big."""
        nbytes = math.prod(shape) * dtype.itemsize  # (np.prod costs 3 us a call: every run allocates)
        if nbytes < MIN_BYTES or self.limit == 0:
            raw, skip = _aligned(nbytes)
            return raw[skip : skip + nbytes].view(dtype.np).reshape(shape)
        kept = self._take(nbytes)
        raw, skip = kept if kept is not None else _aligned(nbytes)
        # (nbytes,) uint8 -> shape of dtype; the views' base is the block
        return np.asarray(_Block(raw, skip, self)).view(dtype.np).reshape(shape)

    def _take(self, nbytes: int) -> tuple[np.ndarray, int] | None:
        with self._lock:
            blocks = self.free.get(nbytes)
            if not blocks:
                return None
            kept = blocks.pop()
            self.free_bytes -= nbytes
            self.reused += 1
            return kept

    def give_back(self, raw: np.ndarray, skip: int) -> None:
        """Keeps a block nothing reads any more (raw, its aligned start at skip), unless that would hold more
        than `limit` bytes."""
        nbytes = raw.nbytes - ALIGN
        with self._lock:
            if self.free_bytes + nbytes > self.limit:
                return  # dropped: numpy frees it with the last reference
            self.free.setdefault(nbytes, []).append((raw, skip))
            self.free_bytes += nbytes

    def release(self) -> int:
        """Lets every kept block go back to the system; returns how many bytes that was."""
        with self._lock:
            dropped, self.free, self.free_bytes = self.free_bytes, {}, 0
        return dropped
