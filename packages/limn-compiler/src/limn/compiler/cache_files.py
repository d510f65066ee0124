"""The files of a compiled device's kernel cache: where they are kept, and how one is read without trusting it.

Every compiled device (limn-c's cc libraries, limn-cuda's CUBINs and its CPU simulator's libraries) keeps what
it built under one folder per device, and reads an entry as plain bytes that may be anything: missing, a folder,
a FIFO another process left in the slot. The devices check what they read (a checksum) and write atomically
(a temp file, then os.replace) themselves; an entry that does not verify is built again, with a
KernelCacheWarning.
Pipeline: IR -> renderer -> **the cache** -> device.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket
import stat
import warnings
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


class KernelCacheWarning(RuntimeWarning):
    """A compiled device's kernel cache could not be used as it stood (a folder that fails, an entry that
    does not verify); kernels still run, built anew or somewhere else."""


def checksum_line(slot: Path, data: bytes) -> str:
    """What an entry's checksum file holds: the sha256 of its bytes and the name of the slot it was written
    for, so an entry copied into another slot, checksum and all, does not verify there."""
    return f"{hashlib.sha256(data).hexdigest()} {slot.name}"


def check_entry(path: Path, sum_path: Path) -> bool | None:
    """Whether the entry at `path` verifies against `sum_path`: True when its bytes hash to the recorded sha256
    and the checksum names this slot; None when either file is missing or not a regular file (a plain miss);
    False when both are there and disagree (a damaged entry, or another entry's bytes in this slot)."""
    recorded, data = file_bytes(sum_path), file_bytes(path)
    if recorded is None or data is None:
        return None
    line = recorded.decode("ascii", "replace").strip()
    if " " not in line:
        return None  # a checksum from before entries named their slot: rebuilt quietly, as a miss
    return line == checksum_line(path, data)


def record_checksum(path: Path, sum_path: Path) -> None:
    """Writes `path`'s checksum line to `sum_path` atomically, so a reader finds a whole checksum or none.
    OSError propagates: the caller decides whether a folder that cannot take it is fatal."""
    atomic_write.write_atomically(sum_path, checksum_line(path, path.read_bytes()).encode("ascii"))


def warn_rebuilt(device: str, path: Path) -> None:
    """The one warning for an entry that did not verify: the device builds it again and replaces it."""
    warnings.warn(
        f"limn: the {device} device's cache entry {path} does not verify (damaged, or another kernel's entry "
        "in its slot); the kernel is built again and the entry replaced",
        KernelCacheWarning,
        stacklevel=3,
    )


CODE_SUFFIXES = (".py", ".c", ".cu")  # the files of a package that make what a cache keeps


@functools.lru_cache(maxsize=8)
def code_fingerprint(folders: tuple[Path, ...]) -> str:
    """The sha256 of every module file and C text (limn/c/kernels/tile.c, which kernels include) under
    `folders` (a package's limn/ folder, say), read once per process for each set: what a cache entry made by
    that code is keyed by, so a changed limn makes everything again."""
    digest = hashlib.sha256()
    try:
        for folder in sorted(set(folders)):
            for path in sorted(p for p in folder.rglob("*") if p.suffix in CODE_SUFFIXES):
                digest.update(path.relative_to(folder).as_posix().encode())
                digest.update(path.read_bytes())
    except OSError:  # code that cannot be read cannot be vouched for: this process's entries are its own
        digest.update(f"unreadable, process {os.getpid()} on {socket.gethostname()}".encode())
    return digest.hexdigest()
