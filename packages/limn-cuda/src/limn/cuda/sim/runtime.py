"""The CUDA-on-CPU runtime: compiles a CudaProgram with g++ against SHIM and runs its launches on CPU threads.

SimRuntime.compile(program) writes SHIM, the program's source and one `extern "C"` launcher per Launch into a
C++ file, builds it into a shared library in a cache folder keyed by the source and the compiler, and loads
it; SimRuntime.run(module, program, pointers, block) runs each launch in order over a grid capped at
`max_blocks` blocks, so a grid-stride loop walks more than one stride. Buffers are host memory: `pointers`
are plain addresses. What running here checks and what it does not model: cuda/sim/shim.py's docstring.
Pipeline: IR -> CUDA C (cuda/source.py) -> CudaProgram -> **this** (g++ -> ctypes -> std::thread).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from limn.compiler import cache_files
from limn.cuda.program import CudaProgram, Launch
from limn.cuda.sim.shim import SHIM

# -O1 keeps builds quick; -ffp-contract=off keeps a * b + c two roundings unless the source writes fmaf, as the
# c device does; hidden visibility binds each library's kernels to itself, whatever else the process loaded.
FLAGS = ["-std=c++20", "-O1", "-fPIC", "-shared", "-pthread", "-ffp-contract=off", "-fvisibility=hidden"]
MAX_THREADS_PER_BLOCK = 1024  # CUDA's limit, kept so a launch that runs here can run on a GPU
LAUNCHER_PREFIX = "limn_sim_launch_"

# `extern __shared__ float tile[];`: dynamic shared memory, sized by Launch.shared_bytes at launch time. A
# `static` (what __shared__ spells here) cannot be `extern`, so the declaration becomes a pointer to the
# launch's buffer; the optional __align__(n) is dropped, the buffer being aligned for any scalar type.
DYNAMIC_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?([A-Za-z_][\w\s:]*?)\s*(\w+)\s*\[\s*\]\s*;"
)


class SimCompileError(RuntimeError):
    """g++ rejected a program under the sim: the message holds the command, g++'s output and the lines it names."""


class SimLaunchError(RuntimeError):
    """A launch went wrong while running: threads of a block at different barriers, or a thread that would not start."""


def cache_dir() -> Path:
    """Where sim libraries are kept (limn.compiler.cache_files): $LIMN_CACHE_DIR/cuda-sim, else under ~/.cache/limn."""
    return cache_files.cache_dir("cuda-sim")


@dataclass
class SimModule:
    """A compiled program: its library, one launcher per Launch by function name, and the lock that keeps one
    launch at a time on it (blockDim, gridDim and the `__shared__` objects belong to the library)."""

    library: ctypes.CDLL
    launchers: dict[str, ctypes._CFuncPtr]
    path: str
    lock: threading.Lock = field(default_factory=threading.Lock)


class SimRuntime:
    """Compiles and runs CudaPrograms on the CPU.

    Each block runs as `block` std::threads, blocks one after another. The trap: a Launch with block=None gets
    the `block` handed to run(), and its grid is capped at max_blocks, so a kernel that assumes one thread per
    cell (no grid-stride loop) leaves cells unwritten here even where a GPU grid sized to the cells would not:
    the cap is on purpose, so every grid-stride loop is walked past its first stride.

    Example (not a doctest, since it needs g++; tests/cuda/test_cuda_sim_runtime.py runs programs like it):

        src = 'extern "C" __global__ void fill(float* out) { out[threadIdx.x] = threadIdx.x; }'
        program = CudaProgram(src, (Launch("fill", ("float*",), cells=4),))
        out = np.zeros(4, np.float32)
        runtime = SimRuntime()
        runtime.run(runtime.compile(program), program, [out.ctypes.data], block=4)
        out.tolist()  # [0.0, 1.0, 2.0, 3.0]
    """

    def __init__(self, cxx: str = "g++", cache: Path | None = None, max_blocks: int = 4) -> None:
        found = shutil.which(cxx)
        if found is None:
            raise SimCompileError(
                f"the cuda-sim runtime needs a C++20 compiler: {cxx!r} is not on PATH; install g++ 12 or newer"
            )
        if max_blocks < 1:
            raise ValueError(f"max_blocks must be at least 1, got {max_blocks}")
        self.cxx = found
        self.cache = cache
        self.max_blocks = max_blocks
        self.builds = 0  # g++ runs by this runtime: a cache hit adds none
        self.identity = _compiler_identity(found)
        self._loaded: dict[str, SimModule] = {}

    def compile(self, program: CudaProgram) -> SimModule:
        """The loaded library for this program, from the disk cache or built into it by g++."""
        text = translation_unit(program)
        key = "\n".join([text, self.identity, " ".join(FLAGS)])
        digest = hashlib.sha256(key.encode()).hexdigest()
        if digest in self._loaded:
            return self._loaded[digest]
        folder = self.cache if self.cache is not None else cache_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OSError(
                f"the cuda-sim cache {folder} cannot be made ({e}); set LIMN_CACHE_DIR to a writable folder"
            ) from e
        path = folder / f"{digest}.so"
        library = _load(path, folder / f"{digest}.sha256")
        if library is None:
            library = self._build(text, path, program)
        module = SimModule(library, _launchers(library, program), str(path))
        self._loaded[digest] = module
        return module

    def run(self, module: SimModule, program: CudaProgram, pointers: list[int], block: int) -> None:
        """Runs every launch of `program` in order, each to completion, each given all of `pointers` (the
        kernel's buffers as addresses, in its parameters' order). `block` is the threads per block for the
        launches that leave it open (Launch.block is None)."""
        with module.lock:
            for launch in program.launches:
                threads = launch.block if launch.block is not None else block
                _check_launch(launch, pointers, threads)
                grid = max(1, min(-(-launch.cells // threads), self.max_blocks))  # ceil(cells / threads), capped
                args = (ctypes.c_void_p * len(pointers))(*pointers)
                if module.launchers[launch.name](args, grid, threads) != 0:
                    reason = ctypes.string_at(module.library.limn_sim_error()).decode(errors="replace")
                    raise SimLaunchError(
                        f"launch {launch.name!r} (grid {grid}, block {threads}, cells {launch.cells}) failed under "
                        f"the cuda sim: {reason}"
                    )

    def _build(self, text: str, path: Path, program: CudaProgram) -> ctypes.CDLL:
        """g++ into a temp name in the cache folder, then os.replace into place: a reader sees a whole library or
        none, and two processes building the same program do not collide."""
        fd, tmp_src = tempfile.mkstemp(suffix=".cpp", dir=path.parent)
        tmp_lib = tmp_src[: -len(".cpp")] + ".so.tmp"
        header = self._precompiled_shim(path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text.replace(SHIM, f'#include "{header}"', 1) if header is not None else text)
            cmd = [self.cxx, *FLAGS, tmp_src, "-o", tmp_lib]
            self.builds += 1
            env = {**os.environ, "LC_ALL": "C"}  # g++'s messages in plain ASCII quotes, whatever the locale
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
            if done.returncode != 0:
                raise SimCompileError(_compile_report(cmd, done.stdout + done.stderr, program.source))
            if path.is_dir() and not path.is_symlink():  # a folder in the slot would poison it for good
                shutil.rmtree(path, ignore_errors=True)
            os.replace(tmp_lib, path)
            library = ctypes.CDLL(str(path))
            try:
                cache_files.record_checksum(path, path.with_suffix(".sha256"))
            except OSError:
                pass  # the library serves this process; without its checksum the next one rebuilds it
            return library
        finally:
            for leftover in (tmp_src, tmp_lib):
                if os.path.lexists(leftover):
                    os.unlink(leftover)

    def _precompiled_shim(self, folder: Path) -> Path | None:
        """The shim as a header with its precompiled form beside it (g++ reads X.gch for `#include "X"` when the
        flags match): parsing the shim's C++ headers is most of a small program's second of compiling, and this
        pays it once per cache folder. None (the shim then goes inline) when the header cannot be built."""
        name = hashlib.sha256("\n".join([SHIM, self.identity, " ".join(FLAGS)]).encode()).hexdigest()[:16]
        header = folder / f"shim-{name}.hpp"
        pch = folder / f"shim-{name}.hpp.gch"
        if header.is_file() and pch.is_file():
            return header
        fd, tmp = tempfile.mkstemp(suffix=".hpp", dir=folder)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(SHIM)
            os.replace(tmp, header)
            flags = [f for f in FLAGS if f != "-shared"]
            cmd = [self.cxx, *flags, "-x", "c++-header", str(header), "-o", tmp + ".gch"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "LC_ALL": "C"})
            if done.returncode != 0:
                return None
            os.replace(tmp + ".gch", pch)
            return header
        except OSError:
            return None
        finally:
            for leftover in (tmp, tmp + ".gch"):
                if os.path.lexists(leftover):
                    os.unlink(leftover)


def translation_unit(program: CudaProgram) -> str:
    """SHIM, the program's source (its lines numbered from 1 as program.cu, so g++'s errors and the barrier
    check name the program's own lines), then a launcher per launch."""
    _check_program(program)
    source = DYNAMIC_SHARED.sub(r"\1* \2 = static_cast<\1*>(::limn_sim::dynamic_shared);", program.source)
    launchers = "\n".join(_launcher(launch) for launch in program.launches)
    return f'{SHIM}\n#line 1 "program.cu"\n{source}\n#line 1 "launchers.cpp"\n{launchers}\n'


def _launcher(launch: Launch) -> str:
    """`int limn_sim_launch_<name>(void** args, unsigned grid, unsigned block)`: each arg cast to its parameter's
    type, the kernel run over the grid by limn_sim::launch; 0, or 1 with limn_sim_error() saying why."""
    args = ", ".join(f"({param})args[{i}]" for i, param in enumerate(launch.params))
    return (
        f'extern "C" __attribute__((visibility("default"))) int {LAUNCHER_PREFIX}{launch.name}'
        "(void** args, unsigned grid, unsigned block) {\n"
        f"    return limn_sim::launch(grid, block, {launch.shared_bytes}, [args] {{ {launch.name}({args}); }});\n"
        "}\n"
    )


def _check_program(program: CudaProgram) -> None:
    for launch in program.launches:
        if not launch.name.isidentifier() or not launch.name.isascii():
            raise ValueError(f"launch name {launch.name!r} is not a C identifier; name the __global__ function plainly")
        scalars = [param for param in launch.params if not param.rstrip().endswith("*")]
        if scalars:
            raise ValueError(
                f"launch {launch.name!r} has non-pointer parameters {scalars}; the cuda sim passes buffers only"
            )


def _check_launch(launch: Launch, pointers: list[int], threads: int) -> None:
    if len(pointers) != len(launch.params):
        raise ValueError(
            f"launch {launch.name!r} takes {len(launch.params)} buffers {list(launch.params)}, "
            f"but {len(pointers)} pointers were given"
        )
    if not 1 <= threads <= MAX_THREADS_PER_BLOCK:
        raise ValueError(f"launch {launch.name!r}: block {threads} is outside 1..{MAX_THREADS_PER_BLOCK} threads")


def _launchers(library: ctypes.CDLL, program: CudaProgram) -> dict[str, ctypes._CFuncPtr]:
    library.limn_sim_error.restype = ctypes.c_void_p
    launchers = {}
    for launch in program.launches:
        function = getattr(library, LAUNCHER_PREFIX + launch.name)
        function.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint, ctypes.c_uint]
        function.restype = ctypes.c_int
        launchers[launch.name] = function
    return launchers


def _load(path: Path, sum_path: Path) -> ctypes.CDLL | None:
    """A cached library whose bytes match the checksum recorded for its slot, or None: missing, truncated,
    another program's or not loadable, which a rebuild replaces (with a warning for an entry that is there
    and does not verify)."""
    verified = cache_files.check_entry(path, sum_path)
    if verified is False:
        cache_files.warn_rebuilt("cuda-sim", path)
    if not verified:
        return None
    try:
        return ctypes.CDLL(str(path))
    except OSError:
        return None


_identities: dict[str, str] = {}


def _compiler_identity(cxx: str) -> str:
    """The compiler's path and `--version` banner: a different g++ builds a different cache entry."""
    if cxx not in _identities:
        try:
            done = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SimCompileError(f"the cuda-sim compiler {cxx} did not answer `--version`: {e}") from e
        _identities[cxx] = f"{cxx} {done.stdout.strip()}"
    return _identities[cxx]


def _compile_report(cmd: list[str], output: str, source: str) -> str:
    """g++'s complaint with the program.cu lines it points at, numbered as g++ numbers them."""
    lines = source.splitlines()
    shown = []
    for match in re.finditer(r"program\.cu:(\d+):", output):
        n = int(match.group(1))
        for i in range(max(n - 2, 1), min(n + 1, len(lines)) + 1):
            shown.append(f"{i:5d} | {lines[i - 1]}")
    excerpt = "\n".join(dict.fromkeys(shown)) or "(no program.cu line named; the error is in the shim or a launcher)"
    return (
        f"g++ rejected the CUDA program under the cuda sim\ncommand: {' '.join(cmd)}\n{output.strip()}\n"
        f"program.cu lines:\n{excerpt}"
    )
