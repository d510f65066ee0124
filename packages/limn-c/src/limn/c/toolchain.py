"""The toolchain: the C compiler the c device builds kernels with, the flags and target it passes, the build
of one translation unit, and what cc said when it refused one (`compile_report`). How many threads run the
kernels is c/team.py's.

Finding cc is a probe, not a guess: a compiler counts once it has built and loaded a small shared library with
the flags kernels get, with OpenMP where that builds too, for -march=native (or LIMN_C_MARCH) where the compiler
knows it. limn.c.isa then reads which vector unit that target has.
Pipeline: C source -> **cc** (this toolchain, through c/library_cache.py) -> ctypes.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from limn.c import isa as c_isa
from limn.c import library_cache, units
from limn.runtime.device import DeviceError

# No -ffast-math: every operation rounds as the IR says. -ffp-contract=off keeps a * b + c two roundings
# unless the renderer writes fmaf; -fno-math-errno and -fno-trapping-math change no result (limn reads
# neither errno nor the FP exception flags) but let gcc run both arms of a select, so loops with one vectorize.
COMPILE_TIMEOUT_S = 600  # one unit's cc run; past it, a CompileError names the unit's kernels


class CompileError(RuntimeError):
    """cc rejected a kernel: the message holds the command, cc's output and the offending lines."""


BASE_FLAGS = ["-O3", "-fPIC", "-shared", "-std=c11", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off"]


class Toolchain:
    """A C compiler that is known to build shared libraries, with or without OpenMP."""

    def __init__(self, cc: str | None = None, march: str | None = None) -> None:
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
        self.target = self._target(march or os.environ.get("LIMN_C_MARCH") or "native")
        self.openmp = self._builds(self.target + ["-fopenmp"])
        self.flags = BASE_FLAGS + self.target + (["-fopenmp"] if self.openmp else [])
        self.isa, why = c_isa.probe(self.cc, self.flags)
        self.isa_reason = f"{' '.join(self.target) or 'no -march'}: {why}"

    def build(self, source: str, src_path: str, lib_path: str) -> None:
        """cc builds `src_path` (holding `source`) into the shared library `lib_path`: library_cache's compile
        step. A full disk is the folder's fault (an OSError); any other failure is the kernels' (CompileError)."""
        cmd = [self.cc, *self.flags, src_path, "-o", lib_path, "-lm"]
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except OSError as e:  # cc went missing after the toolchain found it: the kernel's failure, not the folder's
            raise CompileError(f"C compilation failed: {' '.join(cmd)} could not run ({e})") from e
        except subprocess.TimeoutExpired as e:
            names = units.kernel_names(source)
            kernels = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            raise CompileError(
                f"C compilation ran past {COMPILE_TIMEOUT_S} s and was stopped: {kernels}; nothing was cached. "
                "limn.c.toolchain.COMPILE_TIMEOUT_S sets the limit; a kernel that slow to compile is worth a report"
            ) from e
        if done.returncode == 0:
            return units.report(source, time.perf_counter() - start)
        for code in library_cache.DISK_ERRNOS:
            if os.strerror(code) in done.stdout + done.stderr:  # cc could not write its output
                raise OSError(code, f"{os.strerror(code)}: cc could not write", lib_path)
        raise CompileError(compile_report(cmd, done.stdout + done.stderr, source, units.kernel_names(source)))

    def _target(self, march: str) -> list[str]:
        """The -march flag kernels are built with. A requested target the compiler cannot build for is
        an error; `native` that fails (a compiler too old for this CPU, or one that has no such flag)
        falls back to the compiler's default target, whose kernels are correct, only slower."""
        if self._builds([f"-march={march}"]):
            return [f"-march={march}"]
        if march == "native" and self._builds([]):
            return []
        raise DeviceError(
            f"the c device cannot build a shared library with {self.cc} {' '.join(BASE_FLAGS)} -march={march}; "
            "check that the compiler and its linker work, and that it knows that target "
            "(LIMN_C_MARCH, or CDevice(march=...), names it)"
        )

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


def compile_report(cmd: list[str], output: str, source: str, kernels: list[str]) -> str:
    """cc's complaint with the lines it points at, numbered as cc numbers them, and the kernels of the unit."""
    lines = source.splitlines()
    shown = []
    for text in output.splitlines():
        parts = text.split(":")
        if len(parts) > 2 and parts[1].isdigit():
            n = int(parts[1])
            for i in range(max(n - 2, 1), min(n + 1, len(lines)) + 1):
                shown.append(f"{i:5d} | {lines[i - 1]}")
    excerpt = "\n".join(dict.fromkeys(shown)) or "\n".join(lines[-20:])
    return (
        f"C compilation failed for {', '.join(kernels) or 'a unit with no kernels'}\ncommand: {' '.join(cmd)}\n"
        f"{output.strip()}\nsource lines:\n{excerpt}"
    )
