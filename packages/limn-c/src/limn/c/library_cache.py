"""The c device's kernel cache on disk: a shared library per kernel source, built once and found again.

A library is keyed by its source, the compiler's identity, the flags and the host. It is compiled to a temp
name in the cache folder, loaded from there, then renamed into place beside its checksum, so a reader finds a
whole library or none and two processes building one kernel do not collide. The checksum beside a library
names its slot: an entry that is corrupt, or another kernel's copied into the slot, does not verify and is
rebuilt with a warning; a directory in a slot is removed, with a warning, and the entry written. A folder
that cannot be written or run from (read-only, full, noexec) is replaced, with one warning, by a private
temp folder for the rest of the process (limn.compiler.cache_files holds where the folder is, and the
checksums).
Pipeline: C source -> **cc, through this cache** -> ctypes.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import hashlib
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from limn.compiler import cache_files
from limn.compiler.cache_files import KernelCacheWarning
from limn.runtime.device import DeviceError

# a build's compile step: (source, source file, library file) -> None, raising OSError where the folder fails
Compile = Callable[[str, str, str], None]


def cache_dir() -> Path:
    """Where compiled kernels are kept: $LIMN_CACHE_DIR/c, else $XDG_CACHE_HOME/limn/c, else ~/.cache/limn/c."""
    return cache_files.cache_dir("c")


class FolderUnusable(Exception):
    """A cache folder cannot hold or serve libraries (read-only, full, not a folder, mounted noexec)."""

    def __init__(self, folder: Path, cause: str) -> None:
        super().__init__(f"{folder}: {cause}")
        self.folder, self.cause = folder, cause


@dataclass
class CacheFallback:
    """This process's way around cache folders that failed: each failed folder with its cause, the
    private temp folder that serves instead (made on first need, removed at exit), and the cache slots
    found held by a directory. Each is reported by one KernelCacheWarning."""

    failed: dict[Path, str] = field(default_factory=dict)
    private: Path | None = None
    occupied: set[Path] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def private_folder(self) -> Path:
        if self.private is None:
            try:
                self.private = Path(tempfile.mkdtemp(prefix="limn-kernels-"))
            except OSError as e:
                raise FolderUnusable(Path(tempfile.gettempdir()), _reason(e)) from e
            atexit.register(shutil.rmtree, self.private, ignore_errors=True)
        return self.private


_fallback = CacheFallback()

# what cc says when the disk, not the source, is at fault: the folder is unusable, the kernel is fine
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def library(source: str, key: str, compile: Compile) -> ctypes.CDLL:
    """The shared library for `source`, from the cache folder or compiled into it by `compile`. A folder
    that fails is replaced by a private temp folder for the rest of the process, with one warning; if that
    fails too, DeviceError names both."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    folder = cache_dir()
    newly_failed = False
    if folder not in _fallback.failed:
        try:
            return _cached_or_built(source, digest, folder, compile)
        except FolderUnusable as e:
            with _fallback.lock:  # units build on threads of their own (c/units.py): one of them reports
                newly_failed = folder not in _fallback.failed
                _fallback.failed.setdefault(folder, e.cause)
    try:
        with _fallback.lock:
            private = _fallback.private_folder()
        lib = _cached_or_built(source, digest, private, compile)
    except FolderUnusable as e:
        raise DeviceError(
            f"the c device cannot keep compiled kernels anywhere: the cache {folder} failed "
            f"({_fallback.failed[folder]}) and so did the fallback {e.folder} ({e.cause}); set "
            "LIMN_CACHE_DIR to a writable folder on a filesystem that allows running code "
            "(not full, not mounted noexec)"
        ) from e
    if newly_failed:
        warnings.warn(
            f"limn: the c device cannot use its kernel cache {folder} ({_fallback.failed[folder]}); "
            f"kernels are cached in {private} for the rest of this process",
            KernelCacheWarning,
            stacklevel=3,
        )
    return lib


def _cached_or_built(source: str, digest: str, folder: Path, compile: Compile) -> ctypes.CDLL:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as e:
        raise FolderUnusable(folder, "it exists and is not a folder") from e
    except OSError as e:
        raise FolderUnusable(folder, _reason(e)) from e
    lib_path = folder / f"{digest}.so"
    sum_path = folder / f"{digest}.sha256"
    lib = _load_cached(lib_path, sum_path)
    return lib if lib is not None else _build(source, lib_path, sum_path, folder, compile)


def _load_cached(lib_path: Path, sum_path: Path) -> ctypes.CDLL | None:
    """A cached library whose bytes match the checksum recorded for its slot; anything else is a miss, and
    an entry there that does not verify is reported (cache_files.warn_rebuilt) before the rebuild replaces it."""
    verified = cache_files.check_entry(lib_path, sum_path)
    if verified is False:
        cache_files.warn_rebuilt("c", lib_path)
    if not verified:
        return None
    try:
        return ctypes.CDLL(str(lib_path))
    except OSError:
        return None  # a rebuild shows whether the folder itself cannot serve libraries


def _build(source: str, lib_path: Path, sum_path: Path, folder: Path, compile: Compile) -> ctypes.CDLL:
    """Compiles to a unique temp name in the cache folder, loads it from there, then renames it into place.
    Raises FolderUnusable when the folder cannot be written or a library in it cannot be loaded (noexec)."""
    try:
        fd, tmp_src = tempfile.mkstemp(suffix=".c", dir=folder)
    except OSError as e:
        raise FolderUnusable(folder, _reason(e)) from e
    tmp_lib = tmp_src[:-2] + ".so.tmp"
    tmp_sum = tmp_src[:-2] + ".sha256.tmp"
    try:
        try:
            with os.fdopen(fd, "w") as f:
                f.write(source)
            compile(source, tmp_src, tmp_lib)
            data = Path(tmp_lib).read_bytes()
            lib = ctypes.CDLL(tmp_lib)  # the mapping outlives the rename and any unlink
        except OSError as e:
            raise FolderUnusable(folder, _reason(e)) from e
        if _install(tmp_lib, lib_path, folder):
            try:
                with open(tmp_sum, "w") as f:
                    f.write(cache_files.checksum_line(lib_path, data))
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as e:
                raise FolderUnusable(folder, _reason(e)) from e
            _install(tmp_sum, sum_path, folder)
        return lib
    finally:
        for leftover in (tmp_src, tmp_lib, tmp_sum):
            if os.path.lexists(leftover):
                os.unlink(leftover)


def _install(tmp: str, slot: Path, folder: Path) -> bool:
    """Renames a finished temp file into its cache slot. A slot held by a directory is a poisoned entry: it is
    removed, reported once, and the file takes its place; if it cannot be removed the library is used from its
    temp name (False). Any other failure is the folder's."""
    try:
        os.replace(tmp, slot)
        return True
    except IsADirectoryError as e:
        cause = _reason(e)
    except OSError as e:
        raise FolderUnusable(folder, _reason(e)) from e
    removed = _heal(slot)
    with _fallback.lock:
        first = slot not in _fallback.occupied
        _fallback.occupied.add(slot)
    if first:
        outcome = "removed it" if removed else "cannot remove it: this kernel is rebuilt in each process"
        warnings.warn(
            f"limn: the c device's cache entry {slot} was a directory, not a file ({cause}); limn {outcome}",
            KernelCacheWarning,
            stacklevel=2,
        )
    if not removed:
        return False
    try:
        os.replace(tmp, slot)
        return True
    except OSError as e:
        raise FolderUnusable(folder, _reason(e)) from e


def _heal(slot: Path) -> bool:
    """Removes a directory that holds a cache slot; whether it is gone."""
    shutil.rmtree(slot, ignore_errors=True)
    return not slot.exists()


def _reason(e: OSError) -> str:
    """An OSError as its errno text and the path it names: 'Read-only file system: /x/y'."""
    if e.strerror is None:
        return str(e)  # ctypes' dlopen errors carry only a message
    where = e.filename2 or e.filename
    return f"{e.strerror}: {where}" if where else e.strerror
