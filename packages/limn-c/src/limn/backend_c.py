"""The c device: renders kernels as C, compiles them with cc, and calls them through ctypes.

The executor, plan cache and assign transaction are limn-compiler's (jit.CompiledDevice); this module
adds the toolchain (finding cc, checking it builds a shared library, OpenMP or not), a program cache in
memory and on disk (keyed by source, compiler identity, flags and host; written atomically, a corrupt
entry is a miss), and the five byte hooks, which are trivial because buffers are host numpy arrays.
Pipeline: tensor -> graph -> schedule -> IR -> C source (c_source.py) -> **cc -> ctypes**.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from limn.c_matmul import VECTOR_PRELUDE
from limn.c_prelude import PRELUDE
from limn.c_source import CRenderer, Options
from limn.codegen import KernelIR
from limn.device import DeviceError
from limn.dtypes import DType
from limn.jit import CompiledDevice
from limn.ops import Shape

BASE_FLAGS = ["-O3", "-march=native", "-fPIC", "-shared", "-std=c11", "-fno-math-errno", "-ffp-contract=off"]


class CompileError(RuntimeError):
    """cc rejected a kernel: the message holds the command, cc's output and the offending lines."""


def cache_dir() -> Path:
    """Where compiled kernels are kept: $LIMN_CACHE_DIR, else $XDG_CACHE_HOME/limn, else ~/.cache/limn."""
    if os.environ.get("LIMN_CACHE_DIR"):
        return Path(os.environ["LIMN_CACHE_DIR"]) / "c"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "limn" / "c"


def physical_cores() -> int:
    """Cores, not hardware threads: pairs of (physical id, core id) in /proc/cpuinfo."""
    try:
        pairs, phys = set(), None
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("physical id"):
                phys = line.split(":")[1].strip()
            elif line.startswith("core id"):
                pairs.add((phys, line.split(":")[1].strip()))
        if pairs:
            return len(pairs)
    except OSError:
        pass
    return os.cpu_count() or 1


def team_size() -> int:
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return physical_cores()


class Toolchain:
    """A C compiler that is known to build shared libraries, with or without OpenMP."""

    def __init__(self, cc: str | None = None) -> None:
        name = cc or os.environ.get("CC") or "cc"
        path = shutil.which(name)
        if path is None:
            raise DeviceError(
                f"the c device needs a C compiler: {name!r} is not on PATH (install gcc or clang, or point CC at one)"
            )
        self.cc = path
        try:
            version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise DeviceError(f"the c device could not run the C compiler {path}: {e}") from e
        self.identity = f"{path} {version.stdout.splitlines()[0] if version.stdout else ''}"
        self.openmp = self._builds(["-fopenmp"])
        if not self.openmp and not self._builds([]):
            raise DeviceError(
                f"the c device cannot build a shared library with {path} {' '.join(BASE_FLAGS)}; "
                "check that the compiler and its linker work"
            )
        self.flags = BASE_FLAGS + (["-fopenmp"] if self.openmp else [])

    def _builds(self, extra: list[str]) -> bool:
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "probe.c"
            src.write_text("#include <math.h>\nvoid probe(float* x) { x[0] = sqrtf(x[0]); }\n")
            cmd = [self.cc, *BASE_FLAGS, *extra, str(src), "-o", str(Path(tmp) / "probe.so"), "-lm"]
            try:
                done = subprocess.run(cmd, capture_output=True, timeout=120)
            except (OSError, subprocess.TimeoutExpired):
                return False
            if done.returncode != 0:
                return False
            try:
                ctypes.CDLL(str(Path(tmp) / "probe.so"))
            except OSError:
                return False
            return True

    def host_target(self) -> str:
        """What -march=native means here: the machine and its CPU's feature flags."""
        flags = ""
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith(("flags", "Features", "model name")):
                    flags += line
        except OSError:
            pass
        return f"{platform.machine()} {hashlib.sha256(flags.encode()).hexdigest()[:16]}"


class CDevice(CompiledDevice):
    """The c device. threads=False emits serial nests (what the threaded ones are tested against);
    split_pads, tile_matmuls, chunk_folds and jam_folds likewise turn off the bit-exact rewrites for
    tests, and nests with fewer than `parallel_work` iterations stay serial (0 threads every nest that
    can be)."""

    name = "c"
    host = True

    def __init__(
        self,
        threads: bool = True,
        split_pads: bool = True,
        tile_matmuls: bool = True,
        cc: str | None = None,
        parallel_work: int = 32768,
        chunk_folds: bool = True,
        jam_folds: bool = True,
    ) -> None:
        super().__init__()
        self.toolchain = Toolchain(cc)
        team = team_size() if threads and self.toolchain.openmp else 1
        self.options = Options(
            threads=team,
            split_pads=split_pads,
            tile_matmuls=tile_matmuls,
            chunk_folds=chunk_folds,
            parallel_work=parallel_work,
        )
        self.renderer = CRenderer(self.options)
        self.libraries: list[ctypes.CDLL] = []  # kept alive while their functions may be called

    # ---- rendering and compiling ----

    def render(self, kernel: KernelIR) -> str:
        name, source = self.renderer.render(kernel)
        return source

    def compile(self, kernel: KernelIR, source: str) -> Any:
        return self.compile_batch([(kernel, source)])[0]

    def compile_batch(self, items: list[tuple[KernelIR, str]]) -> list[Any]:
        """Every kernel of a new plan in one library: one cc run instead of one per kernel."""
        tiled = any("LIMN_VEC" in source for _, source in items)  # immintrin.h costs cc 0.2 s
        unit = PRELUDE + (VECTOR_PRELUDE if tiled else "") + "".join("\n" + source for _, source in items)
        lib = self._library(unit)
        functions = []
        for kernel, source in items:
            fn = getattr(lib, source.split("void ", 1)[1].split("(", 1)[0])
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p] * (len(kernel.inputs) + len(kernel.outputs))
            functions.append(fn)
        return functions

    def _library(self, source: str) -> ctypes.CDLL:
        """The shared library for this source, from the disk cache or freshly compiled into it."""
        key = "\n".join([source, self.toolchain.identity, " ".join(self.toolchain.flags), self.toolchain.host_target()])
        digest = hashlib.sha256(key.encode()).hexdigest()
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        lib_path = folder / f"{digest}.so"
        sum_path = folder / f"{digest}.sha256"
        lib = self._load_cached(lib_path, sum_path)
        if lib is None:
            self._build(source, lib_path, sum_path, folder)
            lib = ctypes.CDLL(str(lib_path))
        self.libraries.append(lib)
        return lib

    @staticmethod
    def _load_cached(lib_path: Path, sum_path: Path) -> ctypes.CDLL | None:
        """A cached library whose bytes match its recorded checksum; anything else is a miss."""
        try:
            recorded = sum_path.read_text().strip()
            data = lib_path.read_bytes()
        except OSError:
            return None
        if hashlib.sha256(data).hexdigest() != recorded:
            return None
        try:
            return ctypes.CDLL(str(lib_path))
        except OSError:
            return None

    def _build(self, source: str, lib_path: Path, sum_path: Path, folder: Path) -> None:
        """Compiles to a unique temp name in the cache folder, then renames into place, so readers see
        a whole library or none, and processes compiling the same kernel at once do not collide."""
        fd, tmp_src = tempfile.mkstemp(suffix=".c", dir=folder)
        tmp_lib = tmp_src[:-2] + ".so.tmp"
        try:
            with os.fdopen(fd, "w") as f:
                f.write(source)
            cmd = [self.toolchain.cc, *self.toolchain.flags, tmp_src, "-o", tmp_lib, "-lm"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise CompileError(_compile_report(cmd, done.stdout + done.stderr, source))
            data = Path(tmp_lib).read_bytes()
            os.replace(tmp_lib, lib_path)
            fd2, tmp_sum = tempfile.mkstemp(suffix=".sha256.tmp", dir=folder)
            with os.fdopen(fd2, "w") as f:
                f.write(hashlib.sha256(data).hexdigest())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp_sum, sum_path)
        finally:
            for leftover in (tmp_src, tmp_lib):
                if os.path.exists(leftover):
                    os.unlink(leftover)

    def launch(self, program: Any, kernel: KernelIR, handles: list[np.ndarray]) -> None:
        program(*[h.ctypes.data for h in handles])

    # ---- the five hooks: buffers are host numpy arrays ----

    def alloc(self, dtype: DType, shape: Shape) -> np.ndarray:
        return np.empty(shape, dtype.np)

    def free(self, handle: np.ndarray) -> None:
        pass  # numpy frees the array when the last reference goes

    def copyin(self, handle: np.ndarray, array: np.ndarray) -> None:
        handle[...] = array

    def copyout(self, handle: np.ndarray, dtype: DType, shape: Shape) -> np.ndarray:
        return np.array(handle, copy=True).reshape(shape)

    def synchronize(self) -> None:
        pass  # kernels run synchronously on the calling thread's team


def _compile_report(cmd: list[str], output: str, source: str) -> str:
    """cc's complaint with the lines it points at, numbered as cc numbers them."""
    lines = source.splitlines()
    shown = []
    for text in output.splitlines():
        parts = text.split(":")
        if len(parts) > 2 and parts[1].isdigit():
            n = int(parts[1])
            for i in range(max(n - 2, 1), min(n + 1, len(lines)) + 1):
                shown.append(f"{i:5d} | {lines[i - 1]}")
    excerpt = "\n".join(dict.fromkeys(shown)) or "\n".join(lines[-20:])
    return f"C compilation failed\ncommand: {' '.join(cmd)}\n{output.strip()}\nsource lines:\n{excerpt}"
