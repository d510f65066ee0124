"""The c device: renders kernels as C, compiles them with cc, and calls them through ctypes.

The executor, plan cache and assign transaction are limn-compiler's (jit.CompiledDevice); this module builds
a new plan's units (c/units.py) through the kernel cache (c/library_cache.py) with c/toolchain.py's cc, sizes
the thread team before each run (c/team.py), and adds the five byte hooks on host numpy arrays (c/pool.py).
Pipeline: tensor -> graph -> schedule -> IR -> C source (c/source.py) -> **cc -> ctypes**.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from limn.c import addresses, library_cache, squares, units
from limn.c import attention as c_attention
from limn.c import source_index as c_source_index
from limn.c import team as c_team
from limn.c.library_cache import cache_dir
from limn.c.pool import HostPool
from limn.c.row_call import RowPieces
from limn.c.source import CRenderer, Options
from limn.c.toolchain import Toolchain
from limn.compiler import cache_files, progress, row_pieces
from limn.compiler.ir import KernelIR
from limn.compiler.jit import CompiledDevice, Plan, debug_level
from limn.dtypes import DType
from limn.graph.ops import Node, Shape
from limn.runtime.device import Buffer


class CDevice(CompiledDevice):
    """The c device. threads=False emits serial nests (what the threaded ones are tested against); split_pads,
    tile_matmuls, chunk_folds, jam_folds and hoist_invariants likewise turn off the bit-exact rewrites for tests, and
    nests with fewer than `parallel_work` iterations stay serial (0 threads every nest that can be)."""

    name = "c"
    host = True
    custom_kernels = c_attention.NAMES | {squares.NAME}  # fused attention and the generator's words, fixed C
    row_pieces = True  # a new row count runs on kernels built for others (limn.compiler.row_pieces)

    def __init__(
        self,
        threads: bool = True,
        split_pads: bool = True,
        tile_matmuls: bool = True,
        cc: str | None = None,
        parallel_work: int = 32768,
        march: str | None = None,
        chunk_folds: bool = True,
        jam_folds: bool = True,
        hoist_invariants: bool = True,
    ) -> None:
        super().__init__()
        self.libraries: list[ctypes.CDLL] = []  # kept alive while their functions may be called
        self.attention = c_attention.Libraries(self._library)  # fused attention's C, a library per width
        self.squares = squares.Words(self._library)  # the generator's words (c/squares.py)
        self._sources: dict[tuple, tuple[tuple, str]] = {}  # rendered sources, by nest body (render)
        with c_team.short_spin():  # libgomp loads in here: in the toolchain's probe or the team's library
            self.toolchain = Toolchain(cc, march)
            team = c_team.team_size() if threads and self.toolchain.openmp else 1
            self.team = c_team.team_for(team, self._library, c_team.spin) if team > 1 else None
        self.options = Options(
            threads=team,
            split_pads=split_pads,
            tile_matmuls=tile_matmuls,
            chunk_folds=chunk_folds,
            jam_folds=jam_folds,
            parallel_work=parallel_work,
            hoist_invariants=hoist_invariants,
            isa=self.toolchain.isa,
        )
        if debug_level() >= 1:
            print(f"[limn c] ISA table {self.toolchain.isa.describe()} ({self.toolchain.isa_reason})", file=sys.stderr)
        self.renderer = CRenderer(self.options)
        self.pool = HostPool()  # big freed buffers, kept for the next alloc of their size (c/pool.py)

    # ---- rendering and compiling ----

    def render(self, kernel: KernelIR) -> str:
        """The kernel's C source, rendered once per nest: C reads a kernel's op, loop shape, body and buffers'
        names, dtypes and shapes, never its name or slots, and codegen gives kernels of one nest one body
        object, so sources are kept by that body (held by its entry, so its id stays its own) and the parts
        around it, up to 2048 of them. An equal body that is another object renders anew, to the same source."""
        sources = self._sources
        buffers = tuple((b.name, b.dtype.name, b.shape) for b in kernel.inputs + kernel.outputs)
        key = (id(kernel.body), kernel.op.name, kernel.loop_shape, len(kernel.inputs), buffers, kernel.custom)
        known = sources.get(key)
        if known is not None:
            body, source = known
            assert body is kernel.body, "a kept source's body is held by its entry, so no other body has its id"
            return source
        source = self._indexed_source(kernel)
        if len(sources) >= 2048:
            sources.clear()
        sources[key] = (kernel.body, source)
        return source

    def _indexed_source(self, kernel: KernelIR) -> str:
        """The kernel's source from the on-disk source index (c/source_index.py) when an earlier process
        rendered its nest with these options, else rendered now and kept there."""
        if not kernel.nest:  # built by hand, not lowered from a nest key
            return self.renderer.render(kernel)[1]
        path = c_source_index.entry(cache_dir() / "sources", kernel.nest, repr(self.options))
        data = cache_files.file_bytes(path)  # None for a FIFO or a folder in the slot: a miss
        source = c_source_index.parse(data, path.name)
        if source is None and data is not None:
            cache_files.warn_rebuilt("c", path)
        if source is None:
            source = self.renderer.render(kernel)[1]
            c_source_index.write(path, source)
        return source

    def compile(self, kernel: KernelIR, source: str) -> Any:
        return self.compile_batch([(kernel, source)], progress.silent())[0]

    def compile_batch(self, items: list[tuple[KernelIR, str]], line: progress.Progress) -> list[Any]:
        """A new plan's kernels, cut into units of like size that cc builds at once (c/units.py), each told to
        `line` as its unit is built; each kernel's function from its unit's library."""
        sources = [source for _, source in items]
        cut = units.split([units.cost(s) for s in sources], units.cores())
        libs = units.build_all([units.source([sources[i] for i in unit]) for unit in cut], self._library, line)
        lib_of = {i: lib for unit, lib in zip(cut, libs) for i in unit}
        return [units.function(lib_of[i], s, len(k.inputs) + len(k.outputs)) for i, (k, s) in enumerate(items)]

    def _library(self, source: str) -> ctypes.CDLL:
        """The shared library for this source, through the kernel cache (limn.c.library_cache), keyed by
        the source, the compiler's identity, the flags and the host."""
        toolchain = self.toolchain
        key = "\n".join([source, toolchain.identity, " ".join(toolchain.flags), toolchain.host_target()])
        lib = library_cache.library(source, key, toolchain.build)
        self.libraries.append(lib)
        return lib

    def run_plan(self, plan: Plan, leaves: Sequence[Buffer], after: Any = None) -> list[Buffer]:
        """Runs the plan with the team sized to the cores other work leaves free (c/team.py)."""
        with self.team.run() if self.team is not None else contextlib.nullcontext():
            return super().run_plan(plan, leaves, after)

    def launch(self, program: Any, kernel: KernelIR, handles: list[np.ndarray]) -> None:
        program(*addresses.of(handles))

    def join_pieces(self, cut: row_pieces.Split, programs: list[Any]) -> RowPieces:
        return RowPieces(cut, programs)  # c/row_call.py

    def prepare(self, order: Sequence[Node]) -> None:
        self.attention.prefetch(order)  # cc builds the attention a new plan needs while the plan is made

    def run_custom(self, kernel: KernelIR, handles: list[np.ndarray]) -> None:
        """A CUSTOM kernel: the generator's words (c/squares.py), or fused attention (c/attention.py) on the team."""
        team = 1 if self.team is None else self.team.size
        if kernel.custom == squares.NAME:
            return self.squares.run(handles, team)
        if kernel.custom not in c_attention.NAMES:
            super().run_custom(kernel, handles)
        self.attention.run(kernel, handles, team)

    # ---- the five hooks: buffers are host numpy arrays ----

    def alloc(self, dtype: DType, shape: Shape) -> np.ndarray:
        return self.pool.alloc(dtype, shape)

    def free(self, handle: np.ndarray) -> None:
        pass  # the last reference to the array frees it (or gives a big block back to the pool)

    def copyin(self, handle: np.ndarray, array: np.ndarray) -> None:
        handle[...] = array

    def copyout(self, handle: np.ndarray, dtype: DType, shape: Shape) -> np.ndarray:
        return np.array(handle, copy=True).reshape(shape)

    def synchronize(self) -> None:
        pass  # kernels run synchronously on the calling thread's team
