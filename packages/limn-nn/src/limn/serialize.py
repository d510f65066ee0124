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
import json
import math
import os
import re
import socket
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from limn import dtypes
from limn.dtypes import DType
from limn.frontend.tensor import Tensor, realize
from limn.graph.ops import Op

__all__ = ["SafetensorsError", "load", "load_into", "load_numpy", "read_metadata", "save"]

Shape = tuple[int, ...]

# The safetensors dtype tags limn has a twin for, and that twin.
TAGS: dict[str, DType] = {
    "F64": dtypes.float64,
    "F32": dtypes.float32,
    "F16": dtypes.float16,
    "BF16": dtypes.bfloat16,
    "I64": dtypes.int64,
    "I32": dtypes.int32,
    "I16": dtypes.int16,
    "I8": dtypes.int8,
    "U8": dtypes.uint8,
    "BOOL": dtypes.bool_,
}
TAG_OF: dict[DType, str] = {dtype: tag for tag, dtype in TAGS.items()}
# Tags the safetensors format defines that limn has no dtype for: named in the error, with a way out.
FOREIGN_TAGS = frozenset({"U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"})

# The order the library writes tensors' bytes in (widest first; ties in its own dtype order): following it
# makes a file here byte-identical to the library's for the same tensors.
LAYOUT_ORDER = ("I64", "F64", "F32", "I32", "BF16", "F16", "I16", "I8", "U8", "BOOL")

LENGTH_BYTES = 8  # the header length: one unsigned 64-bit little-endian int
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit; a larger length is corruption
HEADER_ALIGN = 8  # the header is padded with spaces so the data section starts 8-byte aligned
MAX_DIMS = 32  # the most dims numpy 1.26 (limn's oldest) gives an array
METADATA_KEY = "__metadata__"
STALE_AGE_S = 3600  # a leftover temp whose writer cannot be asked is stale after an hour untouched


class SafetensorsError(ValueError):
    """A file that is not a well-formed safetensors file. The message says what is wrong and where."""


@dataclass(frozen=True)
class Entry:
    """One tensor as the header describes it: [begin, end) are byte offsets into the data section."""

    name: str
    dtype: DType
    shape: Shape
    begin: int
    end: int


@dataclass(frozen=True)
class Header:
    """A checked header: its tensors, its metadata, and where the data section starts."""

    entries: list[Entry]  # in the header's own order
    metadata: dict[str, str]
    data_start: int  # the file offset of the data section: 8 + the header length


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
    header, order = _header_bytes(arrays, meta)
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


def _header_bytes(arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> tuple[bytes, list[str]]:
    """The padded JSON header, and the order the tensors' bytes follow it in: by LAYOUT_ORDER, then by
    name, as the safetensors library lays them out, so every tensor starts aligned to its itemsize."""
    rank = {tag: i for i, tag in enumerate(LAYOUT_ORDER)}
    order = sorted(arrays, key=lambda name: (rank[TAG_OF[dtypes.from_numpy(arrays[name].dtype)]], name))
    header: dict[str, Any] = {METADATA_KEY: metadata} if metadata else {}
    offset = 0
    for name in order:
        arr = arrays[name]
        dtype = dtypes.from_numpy(arr.dtype)
        header[name] = {
            "dtype": TAG_OF[dtype],
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + arr.nbytes],
        }
        offset += arr.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    padding = (HEADER_ALIGN - len(text) % HEADER_ALIGN) % HEADER_ALIGN
    return text + b" " * padding, order


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
        return _read_header(f, path).metadata


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
        header = _read_header(f, path)
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


def _read_header(f: BinaryIO, path: str) -> Header:
    """Reads and checks the length field and the header: every entry well-typed, and the byte ranges
    tiling the data section exactly, from its first byte to the file's last, in some order."""
    size = os.fstat(f.fileno()).st_size
    if size < LENGTH_BYTES:
        raise SafetensorsError(f"{path}: the file is {size} bytes, too short to hold the 8-byte header length")
    length = int.from_bytes(f.read(LENGTH_BYTES), "little")
    if length > MAX_HEADER_BYTES:
        raise SafetensorsError(
            f"{path}: the header length field says {length} bytes, over the {MAX_HEADER_BYTES}-byte limit; "
            f"the file is corrupt or not a safetensors file"
        )
    if LENGTH_BYTES + length > size:
        raise SafetensorsError(
            f"{path}: the header length field says {length} bytes, past the end of the file "
            f"({size - LENGTH_BYTES} bytes follow it; truncated?)"
        )
    raw = f.read(length)
    if len(raw) != length:
        raise SafetensorsError(f"{path}: the file ended inside the header (truncated while reading?)")
    parsed = _parse_json(raw, path)
    metadata = _checked_file_metadata(parsed.pop(METADATA_KEY, {}), path)
    entries = [_entry(name, info, path) for name, info in parsed.items()]
    data_start = LENGTH_BYTES + length
    _check_tiling(entries, size - data_start, path)
    return Header(entries, metadata, data_start)


def _parse_json(raw: bytes, path: str) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SafetensorsError(f"{path}: the header is not valid UTF-8 (byte {e.start} of the header)") from None
    try:
        parsed = json.loads(text, object_pairs_hook=_object_without_duplicates)
    except RecursionError:
        raise SafetensorsError(f"{path}: the header JSON is nested too deeply to be a safetensors header") from None
    except ValueError as e:  # JSONDecodeError, a duplicate key, an int too long to convert
        raise SafetensorsError(f"{path}: the header is not valid JSON: {e}") from None
    if not isinstance(parsed, dict):
        raise SafetensorsError(f"{path}: the header must be a JSON object, got a {type(parsed).__name__}")
    return parsed


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {key!r} (a name may appear once)")
        obj[key] = value
    return obj


def _checked_file_metadata(metadata: Any, path: str) -> dict[str, str]:
    if metadata is None:
        return {}  # the library reads `"__metadata__": null` as no metadata, and so does limn
    if not isinstance(metadata, dict):
        raise SafetensorsError(f"{path}: {METADATA_KEY} must be a JSON object, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise SafetensorsError(
                f"{path}: {METADATA_KEY}[{key!r}] must be a string, got {type(value).__name__} {value!r}"
            )
    return metadata


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)  # JSON true is a python bool, and bool is an int


def _entry(name: str, info: Any, path: str) -> Entry:
    """One header entry, checked field by field: dtype, shape, data_offsets, and that they agree."""
    where = f"{path}: tensor {name!r}"
    if not isinstance(info, dict):
        raise SafetensorsError(f"{where}: its entry must be a JSON object, got {type(info).__name__}")
    for field in ("dtype", "shape", "data_offsets"):
        if field not in info:
            raise SafetensorsError(f"{where}: its entry has no {field!r}")
    tag = info["dtype"]
    if not isinstance(tag, str):
        raise SafetensorsError(f"{where}: dtype must be a string, got {tag!r}")
    if tag not in TAGS:
        known = ", ".join(TAGS)
        hint = " (a safetensors dtype limn has no twin for; convert it first)" if tag in FOREIGN_TAGS else ""
        raise SafetensorsError(f"{where}: unknown dtype {tag!r}{hint}; limn reads {known}")
    dtype = TAGS[tag]
    shape = info["shape"]
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise SafetensorsError(f"{where}: shape must be a list of non-negative ints, got {shape!r}")
    if len(shape) > MAX_DIMS:
        raise SafetensorsError(f"{where}: shape has {len(shape)} dims, more than the {MAX_DIMS} limn supports")
    if math.prod(d for d in shape if d) * dtype.itemsize > sys.maxsize:
        raise SafetensorsError(f"{where}: shape {shape} is too large for any array on this machine")
    offsets = info["data_offsets"]
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) and o >= 0 for o in offsets):
        raise SafetensorsError(f"{where}: data_offsets must be [begin, end], two non-negative ints, got {offsets!r}")
    begin, end = offsets
    if end < begin:
        raise SafetensorsError(f"{where}: data_offsets {offsets} end before they begin")
    needed = math.prod(shape) * dtype.itemsize
    if end - begin != needed:
        raise SafetensorsError(
            f"{where}: data_offsets {offsets} hold {end - begin} bytes, but {tag} of shape {shape} needs {needed} bytes"
        )
    return Entry(name, dtype, tuple(shape), begin, end)


def _check_tiling(entries: list[Entry], data_bytes: int, path: str) -> None:
    """The byte ranges, sorted, must follow one another with no gap and no overlap, starting at the data
    section's first byte and ending at the file's last."""
    covered = 0  # the data section is covered up to here by the ranges walked so far
    previous: Entry | None = None
    for e in sorted(entries, key=lambda e: (e.begin, e.end)):
        span = f"tensor {e.name!r} [{e.begin}, {e.end})"
        if e.begin > covered and previous is None:
            raise SafetensorsError(
                f"{path}: the data section does not start right after the header: the first {span} "
                f"leaves {e.begin} unclaimed bytes before it"
            )
        if e.begin > covered:
            raise SafetensorsError(
                f"{path}: a gap of {e.begin - covered} bytes between tensor {previous.name!r} "
                f"[{previous.begin}, {previous.end}) and {span}"
            )
        if e.begin < covered:
            raise SafetensorsError(
                f"{path}: {span} overlaps tensor {previous.name!r} [{previous.begin}, {previous.end})"
            )
        if e.end > data_bytes:
            raise SafetensorsError(
                f"{path}: {span} runs past the end of the file: the data section holds {data_bytes} bytes (truncated?)"
            )
        covered, previous = e.end, e
    if covered < data_bytes:
        raise SafetensorsError(
            f"{path}: {data_bytes - covered} trailing bytes after the last tensor (the data section holds "
            f"{data_bytes} bytes, the tensors claim {covered})"
        )
