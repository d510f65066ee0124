"""The source index: each nest's C source kept on disk under the nest it was rendered from.

A process that plans a graph an earlier one planned (generation at context lengths seen before, a training
script run again) schedules and lowers it anew, but it need not render it: rendering was a third of the
cost of planning a GPT forward of a new shape with every library in the disk cache. A kernel's source is
a function of three things: its nest (KernelIR.nest, the digest of the nest_key every kernel lowered to
that body shares), the renderer's options, and the code of limn that lowers and renders. So an entry is
named by a hash of the three, and the third is a fingerprint of every module file of the installed
packages: a changed limn renders everything again. An entry is the source with its own sha256 and the entry's
name on a first line; an entry that does not match (damaged, or another nest's copied into its place) is a
miss and is written again (a folder in its place is removed). Entries are written to a temp file and renamed
into place; a folder that cannot be read or written makes the index a no-op, never an error.
Pipeline: IR -> C source (c/source.py, **or this index**) -> cc -> ctypes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
from pathlib import Path

import limn.c.source
import limn.compiler.codegen
import limn.dtypes
from limn.compiler import cache_files

HEADER = "/* limn source index, sha256 "


def code_fingerprint() -> str:
    """The sha256 of every module file of the packages that lower and render a kernel (limn-core,
    limn-compiler, limn-c: each one's limn/ folder and the folders below it, one folder when installed from
    wheels), read once per process."""
    tops = [Path(limn.dtypes.__file__).parent, Path(limn.compiler.codegen.__file__).parents[1]]
    return cache_files.code_fingerprint(tuple(sorted({*tops, Path(limn.c.source.__file__).parents[1]})))


def entry(folder: Path, nest: str, options: str) -> Path:
    """Where the source of nest `nest` rendered with `options` (their repr) is kept."""
    name = hashlib.sha256(f"{nest}\n{options}\n{code_fingerprint()}".encode()).hexdigest()
    return folder / name[:2] / f"{name}.c"


def parse(data: bytes | None, name: str) -> str | None:
    """The source in the bytes of entry `name` (None: no entry, or not a regular file); None again when the
    entry is not what was written for that name (its checksum line does not match, names another entry, or
    it is not UTF-8)."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    first, _, source = text.partition("\n")
    if not first.startswith(HEADER) or not first.endswith(" */"):
        return None
    if first[len(HEADER) : -len(" */")] != f"{hashlib.sha256(source.encode()).hexdigest()} for {name}":
        return None
    return source


def write(path: Path, source: str) -> None:
    """Keeps source at path (atomically: a reader sees the whole entry or none). Failures are ignored:
    the index only saves work."""
    tmp = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{HEADER}{hashlib.sha256(source.encode()).hexdigest()} for {path.name} */\n{source}")
        if path.is_dir() and not path.is_symlink():  # a folder in the slot would poison it for good
            shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
