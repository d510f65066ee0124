"""The cuda-sim device: limn's CUDA C run on the CPU, for tests and for anyone debugging a kernel without a GPU.

It renders every kernel exactly as the cuda device does (limn.cuda.source), then compiles that source as C++
against the shim (limn.cuda.sim.shim) and runs each launch with one std::thread per CUDA thread, in small
blocks and few of them (`block`, SimRuntime's max_blocks), so grid-stride loops wrap, bounds guards are met and
atomics collide on shapes a test can afford. It checks what the CUDA C says (index arithmetic, guards, tiling,
barriers, atomics); it does not model a GPU's memory system, warps or timing. Buffers are host numpy arrays, as
the c device's. The executor, plan cache and assign transaction are limn-compiler's (jit.CompiledDevice).
Pipeline: IR -> CUDA C (cuda/source.py) -> **g++ and the shim -> threads on the CPU**.
"""

from __future__ import annotations

import shutil
from typing import Any

import numpy as np

from limn.compiler import progress, row_pieces
from limn.compiler.ir import KernelIR
from limn.compiler.jit import CompiledDevice
from limn.cuda import attention
from limn.cuda.matmul import Tiling
from limn.cuda.prelude import PRELUDE
from limn.cuda.program import CudaProgram, RendersPrograms, merge
from limn.cuda.sim.runtime import SimRuntime
from limn.cuda.source import CudaRenderer
from limn.dtypes import DType
from limn.graph.ops import Shape
from limn.runtime.device import DeviceError

BLOCK = 32  # threads per simulated block: a few blocks already cover a small test's cells, the rest wrap
TILING = Tiling(rows=8, cols=8, depth=4, patch_rows=2, patch_cols=2)  # 16 threads: small tests cross tile edges


class CudaSimDevice(RendersPrograms, CompiledDevice):
    """Renders kernels as CUDA C and runs them on the CPU through the shim (see the module docstring)."""

    name = "cuda-sim"
    host = True
    custom_kernels = attention.NAMES  # fused attention, fixed CUDA C (attention.py)
    row_pieces = True  # a new row count runs on kernels built for others (limn.compiler.row_pieces)

    def __init__(self, block: int = BLOCK, max_blocks: int = 4, tiling: Tiling | None = TILING) -> None:
        if shutil.which("g++") is None:
            raise DeviceError(
                "device 'cuda-sim' compiles CUDA C as C++ and found no g++ on PATH: install g++ 10 or newer"
            )
        super().__init__()
        self.renderer = CudaRenderer(fold_block=block, tiling=tiling)  # a long fold's block and matmul tiles, small
        self.runtime = SimRuntime(max_blocks=max_blocks)
        self.block = block
        self.attention_tiles = attention.SIM  # small blocks and tiles: a std::thread per CUDA thread
        self._attention: tuple[Any, CudaProgram] | None = None  # the kernels' module, built on first use

    def compile_batch(self, items: list[tuple[KernelIR, str]], line: progress.Progress) -> list[Any]:
        """One C++ translation unit for all the kernels (g++ starts once per plan, not once per kernel)."""
        programs = self.rendered_programs(items)
        module = self.runtime.compile(merge(programs, PRELUDE))
        line.advance(len(programs))
        return [(module, p) for p in programs]

    def join_pieces(self, cut: row_pieces.Split, programs: list[Any]) -> list[tuple[Any, list[int]]]:
        """A kernel's row pieces (limn.compiler.row_pieces): each piece's program and its buffers' byte offsets."""
        return [(programs[i], offsets) for i, offsets in cut.byte_calls()]

    def launch(self, program: Any, kernel: KernelIR, handles: list[np.ndarray]) -> None:
        pointers = [h.ctypes.data for h in handles]
        for (module, cuda_program), offsets in (
            program if isinstance(program, list) else [(program, [0] * len(handles))]
        ):
            self.runtime.run(module, cuda_program, [p + o for p, o in zip(pointers, offsets)], self.block)

    def run_custom(self, kernel: KernelIR, handles: list[np.ndarray]) -> None:
        """A CUSTOM kernel: fused attention's CUDA C (attention.py), every width in one program built on
        first use, given the kernel's buffers, no mask's slot as a null pointer, and the shapes in META."""
        if kernel.custom not in attention.NAMES:
            super().run_custom(kernel, handles)
        if self._attention is None:
            program = attention.program(self.attention_tiles)
            program = CudaProgram(PRELUDE + program.source, program.launches)
            self._attention = (self.runtime.compile(program), program)
        module, program = self._attention
        launch = attention.launch(kernel, self.attention_tiles)
        meta = attention.meta(kernel)
        pointers = attention.arguments(kernel, [h.ctypes.data for h in handles], 0, meta.ctypes.data)
        self.runtime.run(module, CudaProgram(program.source, (launch,)), pointers, self.block)

    def alloc(self, dtype: DType, shape: Shape) -> np.ndarray:
        return np.empty(shape, dtype=dtype.np)

    def free(self, handle: np.ndarray) -> None:
        pass  # numpy owns host memory

    def copyin(self, handle: np.ndarray, array: np.ndarray) -> None:
        handle[...] = array

    def copyout(self, handle: np.ndarray, dtype: DType, shape: Shape) -> np.ndarray:
        return np.array(handle, copy=True).reshape(shape)

    def synchronize(self) -> None:
        pass  # every launch has joined its threads when run() returns
