"""The safetensors header, read and written: the dtype tags, the JSON that names each tensor's dtype, shape and
byte range, and the checks a header passes before a byte of data is read (well-typed entries, byte ranges
that tile the data section exactly, no duplicate keys, metadata of strings). limn.serialize reads and writes
files through it.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from limn import dtypes
from limn.dtypes import DType

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


def header_bytes(arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> tuple[bytes, list[str]]:
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


def read_header(f: BinaryIO, path: str) -> Header:
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
