"""The files of a compiled device's kernel cache: where they are kept, and how one is read without trusting it.

Every compiled device (limn-c's cc libraries, limn-cuda's CUBINs and its CPU simulator's libraries) keeps what
it built under one folder per device, and reads an entry as plain bytes that may be anything: missing, a folder,
a FIFO another process left in the slot. The devices check what they read (a checksum) and write atomically
(a temp file, then os.replace) themselves.
Pipeline: IR -> renderer -> **the cache** -> device.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from limn import atomic_write


def cache_dir(device: str) -> Path:
    """Where `device` keeps what it compiles: $LIMN_CACHE_DIR/<device>, else $XDG_CACHE_HOME/limn/<device>, else
    ~/.cache/limn/<device>."""
    if os.environ.get("LIMN_CACHE_DIR"):
        return Path(os.environ["LIMN_CACHE_DIR"]) / device
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "limn" / device


def file_bytes(path: Path) -> bytes | None:
    """The bytes of a regular file; None for anything else (missing, unreadable, a directory, a FIFO).
    It is opened without blocking, so a FIFO in a cache slot cannot hang the run."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            return f.read()
    except OSError:
        return None


def matches_checksum(path: Path, sum_path: Path) -> bool:
    """Whether the file at `path` is a regular file whose bytes hash to the sha256 recorded in `sum_path`
    (False when either is missing, not a regular file, or they disagree: a truncated or foreign entry)."""
    recorded, data = file_bytes(sum_path), file_bytes(path)
    if recorded is None or data is None:
        return False
    return hashlib.sha256(data).hexdigest() == recorded.decode("ascii", "replace").strip()


def record_checksum(path: Path, sum_path: Path) -> None:
    """Writes the sha256 of `path`'s bytes to `sum_path` atomically, so a reader finds a whole checksum or none.
    OSError propagates: the caller decides whether a folder that cannot take it is fatal."""
    atomic_write.write_atomically(sum_path, hashlib.sha256(path.read_bytes()).hexdigest().encode("ascii"))
