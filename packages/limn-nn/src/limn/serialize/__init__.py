"""Checkpoints as safetensors files, read and written with numpy and ml_dtypes alone.

A file is an 8-byte little-endian header length, a JSON header naming each tensor's dtype, shape and byte
range, then the tensors' row-major little-endian bytes; nothing in it executes. save() writes one atomically
(clearing temps of killed saves), load() reads a regular file into Tensors, load_into() writes one into
existing tensors' own buffers in one realize() (which a limn.capture recording goes on replaying). It sits
beside the pipeline, not in it: it realizes tensors (tensor -> device) and creates or assigns buffers.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import socket
import stat
import sys
import tempfile
import time
from typing import BinaryIO

import numpy as np

from limn import dtypes
from limn.frontend.tensor import Tensor, realize
from limn.graph.ops import Op
from limn.serialize.fields import CheckpointError, read_fields
from limn.serialize.header import LENGTH_BYTES, METADATA_KEY, SafetensorsError, header_bytes, read_header

__all__ = [
    "CheckpointError",
    "SafetensorsError",
    "load",
    "load_into",
    "load_numpy",
    "read_fields",
    "read_metadata",
    "save",
]

STALE_AGE_S = 3600  # a leftover temp whose writer cannot be asked is stale after an hour untouched

# ---- writing ----


def save(
    path: str | os.PathLike, tensors: dict[str, Tensor | np.ndarray], metadata: dict[str, str] | None = None
) -> None:
    """Writes `tensors` to `path` as one safetensors file, with optional string `metadata`.

    Tensors are realized in one batch first. The write is atomic: the bytes go to a temp file beside `path`,
    which is flushed, fsynced and renamed over `path`, so a save that dies halfway leaves the previous file
    as it was. The temp file is named `.{basename}.{pid}-{host}-{random}.tmp`; a save first removes the
    temps of that pattern that earlier saves to `path` left behind when they were killed (see
    _remove_stale_temps). Numpy arrays may be non-contiguous or broadcast views; their values are written.
    Trap: names are the only link between a file and a model; save under named_parameters() paths.

    >>> save("/tmp/ckpt.safetensors", {"w": Tensor([[1.0, 2.0]])}, metadata={"step": "10"})
    >>> load_numpy("/tmp/ckpt.safetensors")["w"]
    array([[1., 2.]], dtype=float32)
    """
    _check_byte_order()
    arrays = _host_arrays(tensors)
    meta = _checked_metadata(metadata)
    header, order = header_bytes(arrays, meta)
    path = os.fspath(path)
    folder, base = os.path.split(os.path.abspath(path))
    _remove_stale_temps(folder, base)
    fd, tmp_path = tempfile.mkstemp(dir=folder, prefix=f".{base}.{os.getpid()}-{_host_tag()}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(len(header).to_bytes(LENGTH_BYTES, "little"))
            f.write(header)
            for name in order:
                f.write(arrays[name].reshape(-1).view(np.uint8))  # row-major bytes; native is little-endian
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_path, _file_mode(path))
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
        raise
    _fsync_folder(folder)


def _host_arrays(tensors: dict[str, Tensor | np.ndarray]) -> dict[str, np.ndarray]:
    """Contiguous numpy arrays of every value, the Tensors realized together in one batch."""
    if not isinstance(tensors, dict):
        raise TypeError(f"save: tensors must be a dict of name -> Tensor or numpy array, got {type(tensors).__name__}")
    for name, value in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"save: tensor names must be str, got {name!r} ({type(name).__name__})")
        if name == METADATA_KEY:
            raise ValueError(f"save: {METADATA_KEY!r} is reserved by the format for metadata; rename that tensor")
        if not isinstance(value, (Tensor, np.ndarray, np.generic)):
            raise TypeError(f"save: {name!r} is a {type(value).__name__}; pass a limn Tensor or a numpy array")
        if not isinstance(value, Tensor):
            try:
                dtypes.from_numpy(value.dtype.newbyteorder("="))
            except TypeError as e:
                raise TypeError(f"save: {name!r}: {e}") from None
    realize(*[v for v in tensors.values() if isinstance(v, Tensor)])
    arrays = {}
    for name, value in tensors.items():
        arr = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
        # a broadcast or strided view becomes a fresh row-major copy; big-endian input is made native
        arrays[name] = arr.astype(arr.dtype.newbyteorder("="), order="C", copy=False)
    return arrays


def _checked_metadata(metadata: dict[str, str] | None) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise TypeError(f"save: metadata must be a dict of str -> str, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(
                f"save: metadata must map str -> str, got {key!r}: {value!r}; convert values with str() first"
            )
    return dict(metadata)


def _file_mode(path: str) -> int:
    """The permissions the saved file gets: the old file's, or what a plain open() would give a new one
    (mkstemp makes its temp file private, 0o600)."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _host_tag() -> str:
    """Eight hex digits naming this machine and pid namespace, so a pid in a temp name is only judged
    where it means the same process: a folder may be shared with other machines or containers."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return hashlib.sha256(f"{socket.gethostname()} {namespace}".encode()).hexdigest()[:8]


def _remove_stale_temps(folder: str, base: str) -> None:
    """Removes the temp files that earlier saves to `base` left in `folder` when they were killed (SIGKILL,
    a power cut): each up to a whole checkpoint. Only regular files named by save()'s pattern for exactly
    this basename are candidates. One that names a pid of this host is stale once no process has that pid
    (a live one is another save still writing); one from another host, or from limn 0.1.0 (whose names
    carry no pid: `.{basename}.{random}.tmp`), is stale once untouched for STALE_AGE_S. Best effort:
    a temp that cannot be examined or removed is left where it is."""
    # .{base}.{pid}-{host}-{random}.tmp, or 0.1.0's .{base}.{random8}.tmp; no other basename's temp matches,
    # since what follows ".{base}." holds exactly one dot, the one before "tmp"
    pattern = re.compile(re.escape(f".{base}.") + r"(?:(\d+)-([0-9a-f]{8})-[a-z0-9_]+|[a-z0-9_]{8})\.tmp")
    here = _host_tag()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        named = pattern.fullmatch(entry.name)
        if named is None:
            continue
        pid, host = named.group(1), named.group(2)
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode):
                continue
            if pid is not None and host == here:
                stale = not _process_exists(int(pid))
            else:
                stale = time.time() - info.st_mtime > STALE_AGE_S
            if stale:
                os.remove(entry.path)
        except OSError:
            continue  # removed meanwhile by another save, or not ours to remove


def _process_exists(pid: int) -> bool:
    if os.name == "nt":
        return True  # os.kill(pid, 0) would send CTRL_C there; such temps are left alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except OverflowError:
        return False  # no process has a pid that large
    return True


def _fsync_folder(folder: str) -> None:
    """Makes the rename itself durable. Windows cannot open a folder for fsync; there the rename stands."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _check_byte_order() -> None:
    # limn's buffers are native-endian and the format is little-endian: the bytes go through unswapped
    if sys.byteorder != "little":
        raise NotImplementedError("limn.serialize reads and writes on little-endian hosts only")


# ---- reading ----


def load(path: str | os.PathLike, device: str | None = None) -> dict[str, Tensor]:
    """Every tensor in the file, as realized Tensors on `device` (the current device by default), in the
    header's order. A malformed file raises SafetensorsError before any tensor is made.

    >>> save("/tmp/ckpt.safetensors", {"w": Tensor([1, 2, 3])})
    >>> load("/tmp/ckpt.safetensors")["w"].tolist()
    [1, 2, 3]
    """
    return {name: Tensor(arr, device=device) for name, arr in _read(path).items()}


def load_numpy(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every tensor in the file as a writable numpy array that owns its memory, in the header's order."""
    return {name: arr.copy() for name, arr in _read(path).items()}


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The file's `__metadata__` (empty if it has none). The whole header is checked; no tensor is read."""
    path = os.fspath(path)
    with _open_checkpoint(path) as f:
        return read_header(f, path).metadata


def load_into(path: str | os.PathLike, tensors: dict[str, Tensor], strict: bool = True) -> None:
    """Writes the file's values into `tensors`' own buffers: the Tensor objects (and the buffers a
    limn.capture recording replays) stay the same, only their values change, all in one realize().

    Everything is checked before anything is written: each name in `tensors` must be in the file with the
    same shape and dtype, and with strict=True the file may hold no names `tensors` lacks (strict=False
    skips them, e.g. to load only the weights out of a checkpoint that also holds optimizer state). On any
    mismatch a ValueError lists every problem and no tensor changes. There is no implicit cast.

    >>> w = Tensor([[0.0, 0.0]])
    >>> save("/tmp/ckpt.safetensors", {"w": Tensor([[1.0, 2.0]])})
    >>> load_into("/tmp/ckpt.safetensors", {"w": w})
    >>> w.tolist()
    [[1.0, 2.0]]
    """
    if not isinstance(tensors, dict):
        raise TypeError(f"load_into: tensors must be a dict of name -> limn Tensor, got {type(tensors).__name__}")
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"load_into: {name!r} is a {type(t).__name__}; it needs a limn Tensor to write into")
    path = os.fspath(path)
    arrays = _read(path)
    problems = _mismatches(arrays, tensors, strict)
    if problems:
        listed = "\n".join("  " + p for p in problems)
        raise ValueError(f"load_into {path!r}: the file does not match the tensors, nothing was loaded:\n{listed}")
    # one tensor under several names (tied weights) is written once; _mismatches checked the values agree
    targets = {id(t): (t, arrays[name]) for name, t in tensors.items()}
    lazy = [t for t, _ in targets.values() if t.node.op is not Op.BUFFER]
    if lazy:
        realize(*lazy)  # a tensor still computing needs its buffer before a value can be written into it
    for t, arr in targets.values():
        t.assign(Tensor(arr, device=t.device))
    realize(*[t for t, _ in targets.values()])


def _mismatches(arrays: dict[str, np.ndarray], tensors: dict[str, Tensor], strict: bool) -> list[str]:
    """Every way the file and the tensors disagree, one line each, naming the key, expected and found."""
    problems = []
    for name, t in tensors.items():
        if name not in arrays:
            problems.append(f"missing: {name!r} ({t.dtype.name} {t.shape}) is not in the file")
            continue
        found, found_dtype = arrays[name], dtypes.from_numpy(arrays[name].dtype)
        if found.shape != t.shape:
            problems.append(f"shape: {name!r} is {t.shape} here but {found.shape} in the file")
        if found_dtype != t.dtype:
            problems.append(
                f"dtype: {name!r} is {t.dtype.name} here but {found_dtype.name} in the file; "
                f"load it with load() and .cast() it if the change is meant"
            )
    if strict:
        for name in sorted(arrays.keys() - tensors.keys()):
            problems.append(f"extra: {name!r} is in the file but not in tensors (pass strict=False to skip it)")
    first_name: dict[int, str] = {}
    for name, t in tensors.items():
        other = first_name.setdefault(id(t), name)
        if other != name and name in arrays and other in arrays and not _same_bytes(arrays[name], arrays[other]):
            problems.append(f"tied: {other!r} and {name!r} are one tensor here but hold different values in the file")
    return problems


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _read(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """The file's tensors as read-only numpy arrays over the bytes read, after the header checks out."""
    _check_byte_order()
    path = os.fspath(path)
    with _open_checkpoint(path) as f:
        header = read_header(f, path)
        f.seek(header.data_start)
        arrays = {}
        for entry in sorted(header.entries, key=lambda e: (e.begin, e.end)):
            raw = f.read(entry.end - entry.begin)
            if len(raw) != entry.end - entry.begin:
                raise SafetensorsError(f"{path}: tensor {entry.name!r}: the file ended while reading it (truncated?)")
            if entry.dtype == dtypes.bool_ and not _all_zero_or_one(raw):
                raise SafetensorsError(f"{path}: tensor {entry.name!r}: BOOL bytes must be 0 or 1")
            arrays[entry.name] = np.frombuffer(raw, entry.dtype.np).reshape(entry.shape)
    return {entry.name: arrays[entry.name] for entry in header.entries}


# what a path that is not a regular file is, as its error names it
FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _open_checkpoint(path: str) -> BinaryIO:
    """Opens a checkpoint for reading once it is known to be a regular file (a symlink to one is fine).
    Checked before opening: opening a FIFO with no writer blocks forever, and a device never ends."""
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        message = f"{path}: is a directory, not a regular file; a checkpoint must be a file"
        raise IsADirectoryError(errno.EISDIR, message)
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in FILE_KINDS if test(mode)), "a special file")
        raise ValueError(f"{path}: is {kind}, not a regular file; a checkpoint must be a file")
    return open(path, "rb")


def _all_zero_or_one(raw: bytes) -> bool:
    return not raw.translate(None, b"\x00\x01")  # deleting every 0 and 1 byte leaves nothing
