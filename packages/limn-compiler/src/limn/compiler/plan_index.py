"""The plan index: each graph structure's program (its schedule and loop nests) kept on disk, so a process that
plans a graph an earlier process planned loads the program instead of scheduling and lowering it again.

Scheduling and lowering were half of train_stories' first step with every library in the kernel cache (0.45 of
0.9 s); loading the step's program (653 kernels, 0.8 MB) takes 50 ms. A program is a function of the graph's
structure key (limn.compiler.jit.structure_key, plain data whose repr is the same in every process) and of the
code that schedules and lowers it, so an entry is named by the sha256 of the key's repr and a fingerprint of
limn-core's and limn-compiler's module files: a changed limn plans everything again. An entry is a checksum
line (the sha256 of what follows and the entry's name) and the pickled Program. It lives beside the devices'
kernel caches, whose libraries the devices load and run, and is trusted as they are; an entry that does not
match (damaged, or another entry's bytes in its slot) is planned again with a KernelCacheWarning and replaced.
Writes are atomic (a temp file renamed into place); a folder that cannot be written makes the index a no-op,
never an error.
Pipeline: graph -> **the plan index**, or schedule -> IR -> plan executor.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import pickle
import shutil
import socket
import warnings
from collections.abc import Iterator
from pathlib import Path

import limn.compiler.codegen
import limn.dtypes
from limn.compiler import cache_files
from limn.compiler.ir import Program

HEADER = b"limn plan index, sha256 "


def entry(key: tuple) -> Path:
    """Where the program of the structure `key` is kept."""
    folders = (Path(limn.dtypes.__file__).parent, Path(limn.compiler.codegen.__file__).parents[1])
    name = hashlib.sha256(f"{key!r}\n{cache_files.code_fingerprint(folders)}".encode()).hexdigest()
    return cache_files.cache_dir("plans") / name[:2] / f"{name}.plan"


def load(path: Path) -> Program | None:
    """The program an earlier process kept at `path` (entry(key)); None for a miss, and for an entry that does
    not match, which is then planned again (with a warning) and replaced."""
    data = cache_files.file_bytes(path)
    if data is None:
        return None
    program = _parse(data, path.name)
    if program is None:
        warnings.warn(
            f"limn: the plan index's entry {path} does not verify (damaged, or another entry's bytes in its "
            "slot); the graph is planned again and the entry replaced",
            cache_files.KernelCacheWarning,
            stacklevel=3,
        )
    return program


def _parse(data: bytes, name: str) -> Program | None:
    first, _, body = data.partition(b"\n")
    if first != HEADER + f"{hashlib.sha256(body).hexdigest()} for {name}".encode():
        return None
    try:
        with _collector_paused():
            program = pickle.loads(body)
    except Exception:  # noqa: BLE001 (bytes that match their checksum but do not unpickle: another limn's)
        return None
    return program if isinstance(program, Program) else None


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector held off while a program is unpickled: the objects it makes hold no cycles, and
    collecting while tens of thousands of them are made rescans them (a 0.8 MB program: 63 -> 34 ms median)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def store(path: Path, program: Program) -> None:
    """Keeps `program` at `path` (entry(key); atomically: a reader sees the whole entry or none; a folder in the
    slot is removed). Failures are ignored: the index only saves work."""
    try:
        body = pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL)
    except RecursionError:  # a chain of thousands of ops nests as deep in the schedule's expressions: not kept
        return
    line = HEADER + f"{hashlib.sha256(body).hexdigest()} for {path.name}\n".encode()
    tmp = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(line + body)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
