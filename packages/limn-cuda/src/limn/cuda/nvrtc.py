"""NVRTC: CUDA C to CUBIN or PTX, with ptxas's resource report and a disk cache of compiled programs.

Takes the translation unit a CudaProgram holds and an architecture; gives the image the driver loads, NVRTC's
log and, for a CUBIN, each function's registers, spills and static shared memory. `choose_target` picks CUBIN
for the GPU's own architecture or PTX the driver JITs forward. Compiled images are kept on disk under
$LIMN_CACHE_DIR/cuda, written atomically, an entry whose checksum fails being a miss.
Pipeline: IR -> CUDA C (cuda/source.py) -> CudaProgram -> **NVRTC** -> driver (cuda/driver.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from limn import atomic_write
from limn.compiler import cache_files
from limn.compiler.cache_files import KernelCacheWarning
from limn.runtime.device import DeviceError

INSTALL_HINT = "pip install 'limn-cuda[nvrtc]' (or, in limn's checkout, uv sync --extra cuda)"

# --fmad=false: each op rounds as the IR says, so a * b + c is two roundings unless the source writes fma.
# -default-device: functions without __device__/__global__ compile for the GPU (the prelude's helpers).
# --ptxas-options=-v: ptxas reports each function's registers, spills and shared memory in the log.
BASE_OPTIONS = ("-std=c++17", "-default-device", "--fmad=false", "-lineinfo")
PTXAS_VERBOSE = "--ptxas-options=-v"


class NvrtcError(RuntimeError):
    """NVRTC rejected a program: the message holds the options, NVRTC's log and the source lines it names."""


@dataclass(frozen=True)
class Resources:
    """One function's line of ptxas's report. `entry` is False for a non-inlined __device__ function,
    which ptxas reports only a stack frame and spills for (registers and shared memory stay 0)."""

    name: str  # the symbol: an extern "C" kernel's own name, a mangled one otherwise
    entry: bool
    registers: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    stack_bytes: int = 0
    shared_bytes: int = 0  # static __shared__ memory; dynamic shared memory is the launch's


@dataclass(frozen=True)
class Compiled:
    """What NVRTC made of one program: the CUBIN or PTX bytes (`cubin` says which; PTX ends in the NUL
    cuModuleLoadData needs), its log and, for a CUBIN, ptxas's report by function name (empty for PTX,
    which ptxas sees only when the driver loads it)."""

    image: bytes
    cubin: bool
    arch: int  # 90: sm_90 for a CUBIN, compute_90 for PTX
    log: str
    resources: dict[str, Resources]


@functools.cache
def _nvrtc() -> Any:
    """The cuda.bindings nvrtc module, once its library has answered nvrtcVersion; DeviceError otherwise."""
    try:
        from cuda.bindings import nvrtc

        err, _, _ = nvrtc.nvrtcVersion()
    except Exception as e:  # ImportError, or the loader's own error when libnvrtc is not found
        raise DeviceError(f"the cuda device cannot load NVRTC ({type(e).__name__}: {e}); {INSTALL_HINT}") from e
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise DeviceError(f"NVRTC loaded but nvrtcVersion failed with {err.name}; {INSTALL_HINT}")
    return nvrtc


def _check(result: Any, what: str) -> None:
    nvrtc = _nvrtc()
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcError(f"{what} failed: {nvrtc.nvrtcGetErrorString(result)[1].decode()}")


def nvrtc_version() -> tuple[int, int]:
    """The loaded NVRTC's (major, minor), e.g. (13, 2). DeviceError when NVRTC cannot load."""
    _, major, minor = _nvrtc().nvrtcVersion()
    return (major, minor)


def supported_archs() -> list[int]:
    """The architectures the loaded NVRTC compiles for, ascending: [75, 80, 86, ..., 120, 121] for 13.2."""
    err, archs = _nvrtc().nvrtcGetSupportedArchs()
    _check(err, "nvrtcGetSupportedArchs")
    return sorted(archs)


def choose_target(gpu_arch: int) -> tuple[int, bool]:
    """(arch, cubin) for a GPU of compute capability `gpu_arch` (90 for 9.0): a CUBIN for the GPU's own
    architecture when NVRTC supports it, else PTX for the newest supported one below it, which the driver
    JIT-compiles for the GPU. A GPU older than every architecture NVRTC supports raises DeviceError.
    With NVRTC 13.2: an H100 (90) gets (90, True), a GPU of a later family such as 130 gets (121, False).
    """
    archs = supported_archs()
    if gpu_arch in archs:
        return gpu_arch, True
    below = [a for a in archs if a <= gpu_arch]
    if below:
        return below[-1], False
    major, minor = nvrtc_version()
    raise DeviceError(
        f"NVRTC {major}.{minor} compiles for sm_{archs[0]} to sm_{archs[-1]}, and the GPU is sm_{gpu_arch}, "
        f"older than any of them, so no CUBIN or PTX it makes can run there; install an NVRTC that still "
        f"targets sm_{gpu_arch} (an older CUDA toolkit, or pip install 'nvidia-cuda-nvrtc-cu12')"
    )


def compile(source: str, name: str, arch: int, cubin: bool) -> Compiled:
    """Compiles one translation unit: `name` is its file name in the log ("kernel.cu"), `arch` 80 for
    sm_80 / compute_80, `cubin` True for a CUBIN (with ptxas's report), False for PTX. NvrtcError on
    a compile error, with NVRTC's log and the offending source lines; ValueError for an arch NVRTC lacks.
    `compile('extern "C" __global__ void k(float* x) { x[0] = 1; }', "k.cu", 80, True).resources["k"]`
    is Resources(name='k', entry=True, registers=8, ...).
    """
    archs = supported_archs()
    if arch not in archs:
        major, minor = nvrtc_version()
        raise ValueError(f"NVRTC {major}.{minor} cannot compile for arch {arch}: it supports {archs}")
    nvrtc = _nvrtc()
    target = f"--gpu-architecture={'sm' if cubin else 'compute'}_{arch}"
    options = [*BASE_OPTIONS, target, *([PTXAS_VERBOSE] if cubin else [])]
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(err, "nvrtcCreateProgram")
    try:
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        log = _log(prog)
        if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NvrtcError(_error_report(options, log, source, name))
        image = _image(prog, cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return Compiled(image, cubin, arch, log, parse_resources(log) if cubin else {})


def _log(prog: Any) -> str:
    nvrtc = _nvrtc()
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    _check(err, "nvrtcGetProgramLogSize")
    buf = bytearray(size)  # NVRTC writes into it: never a bytes object (b" " * 1 is CPython's cached b" ")
    _check(nvrtc.nvrtcGetProgramLog(prog, buf)[0], "nvrtcGetProgramLog")
    return bytes(buf).rstrip(b"\0").decode(errors="replace")


def _image(prog: Any, cubin: bool) -> bytes:
    nvrtc = _nvrtc()
    get_size, get = (
        (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if cubin else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX)
    )
    err, size = get_size(prog)
    _check(err, get_size.__name__)
    buf = bytearray(size)  # written by NVRTC, so mutable (see _log)
    _check(get(prog, buf)[0], get.__name__)
    return bytes(buf)  # PTX keeps its closing NUL: cuModuleLoadData reads PTX as a C string


# ---- ptxas's report: "Compiling entry function 'k'", then "Function properties for k", a spill line and a usage line

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USAGE = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_resources(log: str) -> dict[str, Resources]:
    r"""ptxas's `-v` report, one Resources per function it names, in the order it names them.

    >>> log = "\n".join([
    ...     "ptxas info    : Compiling entry function 'k' for 'sm_90'",
    ...     "ptxas info    : Function properties for k",
    ...     "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
    ...     "ptxas info    : Used 16 registers, used 1 barriers, 1024 bytes smem",
    ... ])
    >>> k = parse_resources(log)["k"]
    >>> k.registers, k.spill_store_bytes, k.spill_load_bytes, k.shared_bytes
    (16, 0, 0, 1024)
    """
    found: dict[str, dict[str, Any]] = {}
    current = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
            found.setdefault(current, {"name": current})["entry"] = True
        elif m := _PROPERTIES.search(line):
            current = m.group(1)
            found.setdefault(current, {"name": current, "entry": False})
        elif current is not None and (m := _SPILLS.search(line)):
            stack, stores, loads = (int(g) for g in m.groups())
            found[current].update(stack_bytes=stack, spill_store_bytes=stores, spill_load_bytes=loads)
        elif current is not None and (m := _USAGE.search(line)):
            smem = _SMEM.search(line)
            found[current].update(registers=int(m.group(1)), shared_bytes=int(smem.group(1)) if smem else 0)
    return {name: Resources(**fields) for name, fields in found.items()}


# ---- compile errors: NVRTC's log with the source lines it points at

_LOCATION = re.compile(r"^(.*)\((\d+)\): (?:error|catastrophic error)", re.MULTILINE)
_LINE_MARKER = re.compile(r'^\s*#\s*line\s+(\d+)(?:\s+"([^"]*)")?')
CONTEXT_LINES = 2  # shown either side of each line the log names
MAX_LOCATIONS = 8


def _error_report(options: list[str], log: str, source: str, name: str) -> str:
    lines = source.splitlines()
    where = _logical_locations(lines, name)
    shown: dict[int, str] = {}
    for file, line in list(dict.fromkeys(_LOCATION.findall(log)))[:MAX_LOCATIONS]:
        for hit in (i for i, loc in enumerate(where) if loc == (file, int(line))):
            for i in range(max(hit - CONTEXT_LINES, 0), min(hit + CONTEXT_LINES + 1, len(lines))):
                mark = ">" if i == hit else " "
                shown[i] = f"{mark}{i + 1:5d} | {lines[i]}"
    excerpt = "\n".join(shown[i] for i in sorted(shown)) or "\n".join(lines[-20:])
    return (
        f"NVRTC could not compile {name}\noptions: {' '.join(options)}\n{log.strip()}\n"
        f"source lines (numbered as in the source; > marks the lines the log names):\n{excerpt}"
    )


def _logical_locations(lines: list[str], name: str) -> list[tuple[str, int]]:
    """(file, line) as the log names each physical line, following `#line N "file"` markers, so an error
    reported against a marker's IR location still finds its CUDA C line."""
    file, number, where = name, 1, []
    for text in lines:
        where.append((file, number))
        if m := _LINE_MARKER.match(text):
            number, file = int(m.group(1)), m.group(2) or file
        else:
            number += 1
    return where


# ---- the disk cache: one file per program, "<sha256 of the body>\n<meta json>\n<image>", replaced atomically


def cache_dir() -> Path:
    """Where compiled programs are kept (limn.compiler.cache_files): $LIMN_CACHE_DIR/cuda, else under ~/.cache/limn."""
    return cache_files.cache_dir("cuda")


def cache_key(source: str, name: str, arch: int, cubin: bool, driver_version: int) -> str:
    """The sha256 naming a program's cache entry: everything that changes the image or whether it loads."""
    major, minor = nvrtc_version()
    fields = {"source": source, "name": name, "nvrtc": [major, minor], "arch": arch, "cubin": cubin}
    fields |= {"driver": driver_version, "options": list(BASE_OPTIONS)}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def cached_compile(source: str, name: str, arch: int, cubin: bool, driver_version: int) -> Compiled:
    """`compile`, through the disk cache: an entry that is missing, unreadable or fails its checksum is a
    miss, compiled and stored again. A folder that cannot be written warns (KernelCacheWarning) and the
    program is returned uncached. `driver_version` is cuDriverGetVersion's (13020), part of the key."""
    path = cache_dir() / f"{cache_key(source, name, arch, cubin, driver_version)}.bin"
    hit = _read_entry(path)
    if hit is None and cache_files.file_bytes(path) is not None:
        cache_files.warn_rebuilt("cuda", path)  # an entry there that does not verify: compiled again, replaced
    if hit is not None:
        return hit
    compiled = compile(source, name, arch, cubin)
    try:
        _write_entry(path, compiled)
    except OSError as e:
        warnings.warn(
            f"limn: the cuda kernel cache cannot store {path.name} in {path.parent} ({e}); the program runs "
            "and is compiled again next process. Set LIMN_CACHE_DIR to a writable folder to keep it.",
            KernelCacheWarning,
            stacklevel=2,
        )
    return compiled


def _encode(compiled: Compiled, slot: str) -> bytes:
    """The entry's bytes; its meta names the slot it is written for, so a copy in another slot does not verify."""
    meta = {"cubin": compiled.cubin, "arch": compiled.arch, "log": compiled.log, "slot": slot}
    meta["resources"] = [asdict(r) for r in compiled.resources.values()]
    body = json.dumps(meta).encode() + b"\n" + compiled.image
    return hashlib.sha256(body).hexdigest().encode() + b"\n" + body


def _decode(data: bytes, slot: str) -> Compiled | None:
    digest, _, body = data.partition(b"\n")
    if hashlib.sha256(body).hexdigest().encode() != digest:
        return None
    meta_line, _, image = body.partition(b"\n")
    try:
        meta = json.loads(meta_line)
        if meta["slot"] != slot:
            return None  # another program's entry copied into this slot
        resources = {r["name"]: Resources(**r) for r in meta["resources"]}
        return Compiled(image, meta["cubin"], meta["arch"], meta["log"], resources)
    except (ValueError, KeyError, TypeError):
        return None  # a checksum that matches a body of another format: an entry from another limn


def _read_entry(path: Path) -> Compiled | None:
    """The entry at `path` if it is a regular file whose checksum holds; None for anything else."""
    data = cache_files.file_bytes(path)
    return None if data is None else _decode(data, path.name)


def _write_entry(path: Path, compiled: Compiled) -> None:
    """Writes the entry through a temp file and a rename (limn.atomic_write): a reader sees a whole
    entry or none, and processes storing the same program at once do not collide."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():  # a folder in the slot would poison it for good
        shutil.rmtree(path, ignore_errors=True)
    atomic_write.write_atomically(path, _encode(compiled, path.name))
