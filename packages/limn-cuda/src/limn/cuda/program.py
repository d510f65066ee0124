"""What the CUDA renderer hands a device: one translation unit of CUDA C and the launches that run a kernel.

A KernelIR becomes a CudaProgram: its `source` (the prelude, then one `extern "C" __global__` function per launch)
and its `launches`, run in order on one stream, each to completion before the next reads what it wrote. A launch
names its function, the C types of its parameters (the kernel's buffers: inputs, then outputs), how many threads
its work needs in all (`cells`: the grid-stride loop's trip count, so any grid is correct) and, where the shape
stages data through shared memory, the exact block size it was written for (None: any block size works).
Both the cuda device (NVRTC + the driver) and the cuda-sim device (the same source compiled as C++ on the CPU)
run a CudaProgram the same way. Pipeline: IR -> CUDA C (cuda/source.py) -> **this** -> cuda / cuda-sim.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from limn.compiler import progress


@dataclass(frozen=True)
class Launch:
    """One `__global__` function of a program and how to launch it."""

    name: str  # the function's name in the source (extern "C", so the name is the symbol)
    params: tuple[str, ...]  # each parameter's C type, in order: "const float*", ..., "float*"
    cells: int  # threads the work needs in all: grid * block may be smaller (grid-stride) or larger (guarded)
    block: int | None = None  # the block size the function was written for, None when any size works
    shared_bytes: int = 0  # dynamic shared memory per block, beyond what the source declares statically


@dataclass(frozen=True)
class CudaProgram:
    """A kernel as CUDA C: the translation unit and its launches, in order."""

    source: str
    launches: tuple[Launch, ...]


def merge(programs: list[CudaProgram], prelude: str) -> CudaProgram:
    """One translation unit for several programs that each begin with `prelude`: the prelude once, then each
    program's functions, and every launch in order (a device compiles a plan's kernels in one go)."""
    for program in programs:
        assert program.source.startswith(prelude), "every program of a plan begins with the same prelude"
    source = prelude + "".join(p.source[len(prelude) :] for p in programs)
    return CudaProgram(source, tuple(launch for p in programs for launch in p.launches))


class RendersPrograms:
    """What the cuda and cuda-sim devices share between jit's render and compile hooks: render() gives jit the
    source of a kernel's CudaProgram and remembers the program by that source, so compile_batch finds each
    kernel's launches again (`rendered_programs`); compile() is a batch of one. The device sets `renderer`."""

    renderer: Any  # a limn.cuda.source.CudaRenderer

    def render(self, kernel: Any) -> str:
        program = self.renderer.render(kernel)
        self.__dict__.setdefault("_rendered", {})[program.source] = program
        return program.source

    def compile(self, kernel: Any, source: str) -> Any:
        return self.compile_batch([(kernel, source)], progress.silent())[0]

    def rendered_programs(self, items: list[tuple[Any, str]]) -> list[CudaProgram]:
        """The programs render() gave for these (kernel, source) pairs, forgotten as they are taken."""
        return [self.__dict__["_rendered"].pop(source) for _, source in items]
