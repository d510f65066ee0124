"""The shared executor for compiled devices: plans, caches, and the assign transaction.

A CompiledDevice turns the sinks of one realize() into a Plan (schedule, loop-nest IR, one compiled program
per kernel; the first two kept on disk by plan_index), caches it by the graph's structure, and replays it against
the buffers of each call. Programs are cached by source hash, so two plans that render the same kernel share it. A
backend supplies only `render` (IR -> source), `compile` (source -> program), `launch`, and the five
hooks for moving bytes; everything else here is common to C and CUDA.
Set LIMN_DEBUG=1 (plans built), 2 (why each buffer is stored, and the IR), 3 (rendered source and per-kernel timings).
Pipeline: tensor -> graph -> schedule -> IR -> **plan executor** -> renderer -> device.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from limn.compiler import index_checks, plan_index, progress, row_pieces
from limn.compiler.codegen import lower_schedule
from limn.compiler.explain import explain_schedule
from limn.compiler.ir import KernelIR, Program
from limn.compiler.kernel import SlotKind
from limn.compiler.schedule import Schedule, schedule
from limn.dtypes import DType
from limn.graph import provenance
from limn.graph.ops import Node, Op, Shape, toposort
from limn.graph.view import View
from limn.runtime.device import Buffer, DeviceError, get_device


def debug_level() -> int:
    level = os.environ.get("LIMN_DEBUG", "0")
    return int(level) if level.isdigit() else 0


def structure_key(sinks: Sequence[Node], order: list[Node] | None = None) -> tuple[tuple, list[Buffer]]:
    """A hashable description of the graph with leaf buffers replaced by their order of appearance,
    and those buffers. Two graphs with equal keys run the same plan on their own buffers. `order` is
    toposort(sinks) when the caller has walked it already.

    Each row is plain data (the op, names, ints, tuples of them, a view as its four fields), since the plan
    cache keeps every key it is given and the garbage collector walks only containers of objects. The op is
    the Op itself, compared by identity: its .name is an Enum property, slow to read for every node."""
    order = toposort(sinks) if order is None else order
    position = {id(n): i for i, n in enumerate(order)}
    leaves: list[Buffer] = []
    leaf_index: dict[int, int] = {}
    rows = []
    for n in order:
        if n.op is Op.BUFFER:
            if id(n.arg) not in leaf_index:
                leaf_index[id(n.arg)] = len(leaves)
                leaves.append(n.arg)
            arg: Any = ("leaf", leaf_index[id(n.arg)])
        elif n.op is Op.CONST:
            arg = (type(n.arg).__name__, repr(n.arg))  # by spelling: 0.0 == -0.0 and nan != nan as floats
        elif n.op is Op.VIEW:
            view: View = n.arg
            arg = (view.shape, view.strides, view.offset, view.mask)
        else:
            arg = n.arg
        rows.append((n.op, n.dtype.name, n.shape, arg, tuple([position[id(s)] for s in n.srcs])))
    rows.append(("sinks", tuple(position[id(s)] for s in sinks)))
    return tuple(rows), leaves


@dataclass
class Plan:
    """What one graph structure compiles to: its program (schedule and IR), a compiled program per
    kernel, and the index checks to run on the way. Each thread keeps its own scratch buffers for the
    intermediate values (`scratch()`), reused between its runs: a training step reuses the same memory
    every step instead of asking the allocator (and the kernel, page by page) for fresh memory, and two
    threads running one plan at once never share an intermediate. Within a run, intermediates whose lives do
    not meet share a buffer (`owners`). Sinks get fresh buffers each run, since callers keep them."""

    program: Program
    compiled: list[Any]
    checks: list[index_checks.IndexCheck]
    _per_thread: threading.local = field(default_factory=threading.local, repr=False)

    @functools.cached_property
    def written(self) -> list[tuple[int, DType, Shape, bool]]:
        """Each slot a run allocates, as (number, dtype, shape, whether it is a sink's): a run walks this,
        not the schedule's slots and sinks, on the hot path of every realize."""
        kept = {sink.slot for sink in self.schedule.sinks}
        touched = {b.slot for k in self.program.kernels for b in k.inputs + k.outputs} | kept
        slots = [s for s in self.schedule.slots if s.kind != SlotKind.INPUT and s.number in touched]
        return [(s.number, s.dtype, s.shape, s.number in kept) for s in slots]

    @functools.cached_property
    def owners(self) -> dict[int, int]:
        """Each scratch slot's owner: the slot whose buffer it uses. A slot's life runs from the first kernel
        that touches it to the last (an index check counts as a read); slots of one dtype and shape whose lives
        do not meet share one buffer, the later taking the buffer of one that is done, so a training step
        holds about what is live at once rather than every intermediate it ever makes. A kernel reading one
        slot for the last time and writing another for the first keeps them apart (no kernel reads and writes
        one buffer under two names)."""
        life: dict[int, list[int]] = {}
        for i, kernel in enumerate(self.program.kernels):
            for b in kernel.inputs + kernel.outputs:
                span = life.setdefault(b.slot, [i, i])
                span[1] = i
        for check in self.checks:
            if check.load.slot in life:
                life[check.load.slot][1] = max(life[check.load.slot][1], check.kernel)
        free: dict[tuple[DType, Shape], list[tuple[int, int]]] = {}  # (dtype, shape) -> (done after, owner)
        owners: dict[int, int] = {}
        scratch = [(n, d, s) for n, d, s, kept in self.written if not kept and n in life]
        for number, dtype, shape in sorted(scratch, key=lambda entry: life[entry[0]][0]):
            first, last = life[number]
            pool = free.setdefault((dtype, tuple(shape)), [])
            done = [k for k, (end, _) in enumerate(pool) if end < first]
            owner = pool.pop(done[0])[1] if done else number  # a done slot's buffer, else its own
            owners[number] = owner
            pool.append((last, owner))
        return owners

    @functools.cached_property
    def checks_by_kernel(self) -> dict[int, list[index_checks.IndexCheck]]:
        return {k: [c for c in self.checks if c.kernel == k] for k in {c.kernel for c in self.checks}}

    @property
    def schedule(self) -> Schedule:
        return self.program.schedule

    def scratch(self) -> dict[int, Any]:
        """This thread's intermediate buffers, slot number -> handle (freed with the thread)."""
        return self._per_thread.__dict__.setdefault("buffers", {})


@dataclass
class Stats:
    """Counters a test or a curious user can read: how often the caches missed and hit."""

    plans_built: int = 0
    plan_hits: int = 0
    programs_compiled: int = 0
    program_hits: int = 0
    kernels_run: int = 0


class CompiledDevice:
    """Base class of the compiled devices. Subclasses set `name` and `host`, and implement render,
    compile, launch and the five byte hooks (alloc, free, copyin, copyout, synchronize)."""

    name = "compiled"
    host = True
    custom_kernels: frozenset[str] = frozenset()
    row_pieces = False  # whether the device runs a kernel as row pieces (join_pieces)

    # what a subclass defines: render(kernel) -> source, compile(kernel, source) -> program, launch(...) and 5 hooks
    REQUIRED = ("render", "compile", "launch", "alloc", "free", "copyin", "copyout", "synchronize")

    def __init__(self) -> None:
        missing = [m for m in self.REQUIRED if not callable(getattr(self, m, None))]
        if missing:
            raise TypeError(f"{type(self).__name__} is a CompiledDevice without {', '.join(missing)}")
        self.plans: dict[tuple, Plan] = {}
        self.programs: dict[str, Any] = {}
        self.families = row_pieces.Families()  # what earlier plans ran, for row pieces
        self.stats = Stats()

    # ---- planning ----

    def plan(self, sinks: Sequence[Node]) -> tuple[Plan, list[Buffer]]:
        """The plan for this graph's structure (on first sight built, or loaded from plan_index) and its leaves."""
        order = toposort(sinks)  # one walk for the key and, on a miss, the schedule
        key, leaves = structure_key(sinks, order)
        plan = self.plans.get(key)
        if plan is not None:
            self.stats.plan_hits += 1
            return plan, leaves
        self.prepare(order)
        explained = provenance.from_environment() or debug_level() >= 2  # each kernel's reasons (and lines)
        slot = None if explained or provenance.is_recording() else plan_index.entry(key)  # where a process kept it
        kept = None if slot is None else plan_index.load(slot)
        program = kept or lower_schedule(schedule(sinks, order))
        plan = Plan(program, self._programs(program.kernels), index_checks.placed(program.schedule))
        self.plans[key] = plan
        self.stats.plans_built += 1
        if debug_level() >= 1:
            told = " (from the plan index)" if kept else ""
            print(f"[limn {self.name}] plan {len(self.plans)}: {len(program.kernels)} kernels{told}", file=sys.stderr)
        if explained:
            print(f"[limn {self.name}] plan {len(self.plans)}, explained:", file=sys.stderr)
            print(explain_schedule(program.schedule, program), file=sys.stderr)
        if not provenance.is_recording():
            # a cached plan outlives its graph: the nodes each kernel computes (explain's source lines, kept while
            # provenance records) would hold the graph's buffers; capture takes a buffer no node reads as let go
            program.schedule.computes.clear()
            if kept is None and slot is not None:
                plan_index.store(slot, program)
        return plan, leaves

    def prepare(self, order: Sequence[Node]) -> None:
        """Starts work the new plan of graph `order` will need while it is made (c: cc on its attention); base: none."""

    def _programs(self, kernels: Sequence[KernelIR]) -> list[Any]:
        """A compiled program per kernel (None for CUSTOM). A kernel that row_pieces.Families cuts into row
        pieces, on a device that runs them, is one program joined from its pieces' (join_pieces)."""
        say = (lambda line: print(f"[limn {self.name}] {line}", file=sys.stderr)) if debug_level() >= 1 else None
        cuts = self.families.cuts(kernels, say) if self.row_pieces else [None] * len(kernels)
        parts = [[k] if cut is None else list(cut.kernels) for k, cut in zip(kernels, cuts)]
        made = iter(self._compiled([p for kernel_parts in parts for p in kernel_parts]))  # in parts' order
        return [next(made) if cut is None else self.join_pieces(cut, [next(made) for _ in cut.kernels]) for cut in cuts]

    def join_pieces(self, cut: row_pieces.Split, programs: list[Any]) -> Any:
        """One program making a kernel's calls of its pieces (`programs`, one per piece kernel): row_pieces' hook."""
        raise NotImplementedError(f"{type(self).__name__} sets row_pieces and has no join_pieces")

    def _compiled(self, kernels: Sequence[KernelIR]) -> list[Any]:
        """A compiled program per kernel (None for CUSTOM): cached by source hash, the rest built by compile_batch."""
        sources = [None if k.custom is not None else self.render(k) for k in kernels]
        digests = [None if s is None else hashlib.sha256(s.encode()).hexdigest() for s in sources]
        missing: dict[str, tuple[KernelIR, str]] = {}
        for k, s, d in zip(kernels, sources, digests):
            if d is None:
                continue
            if d in self.programs:
                self.stats.program_hits += 1
            elif d not in missing:
                missing[d] = (k, s)
        if missing:
            if debug_level() >= 3:
                print(*(source for _, source in missing.values()), sep="\n", file=sys.stderr)
            with progress.Progress(len(missing), self.name) as line:  # a line on a terminal past a second
                compiled = self.compile_batch(list(missing.values()), line)
            self.programs.update(zip(missing, compiled))
            self.stats.programs_compiled += len(missing)
        return [None if d is None else self.programs[d] for d in digests]

    def compile_batch(self, items: list[tuple[KernelIR, str]], line: progress.Progress) -> list[Any]:
        """Compiles several kernels and tells `line` (limn.compiler.progress); a backend whose compiler is slow to
        start overrides this to build them in one go. The default compiles each on its own."""
        programs = [self.compile(kernel, source) for kernel, source in items]
        line.advance(len(programs))
        return programs

    # ---- running ----

    def run(self, sinks: Sequence[Node]) -> list[Buffer]:
        """The Device protocol's run: the plan for the sinks' graph (built once per structure), run."""
        return self.run_plan(*self.plan(sinks))

    def run_plan(
        self, plan: Plan, leaves: Sequence[Buffer], after: Callable[[int, list[Any]], None] | None = None
    ) -> list[Buffer]:
        """Runs a plan on these leaf buffers (in structure_key's order): what run() does after the
        cache lookup, and what limn.capture replays without building the graph again. `after(i, handles)`,
        when given, is called once kernel i has run, with every slot's handle (limn.capture.replay's trace)."""
        sched = plan.schedule
        handles: list[Any] = [None] * len(sched.slots)
        for slot, buf in zip(sched.inputs, leaves):
            handles[slot] = self._bind(buf)
        scratch = plan.scratch()
        for number, dtype, shape, kept in plan.written:
            if kept:
                handles[number] = self._alloc_checked(dtype, shape)
            else:
                owner = plan.owners.get(number, number)
                if owner not in scratch:
                    scratch[owner] = self._alloc_checked(dtype, shape)
                handles[number] = scratch[owner]
        checks = plan.checks_by_kernel
        timing = debug_level() >= 3
        for i, (kernel, compiled) in enumerate(zip(plan.program.kernels, plan.compiled)):
            for check in checks.get(i, ()):
                index_checks.verify(check, sched, handles, self)
            args = [handles[b.slot] for b in kernel.inputs + kernel.outputs]
            start = time.perf_counter() if timing else 0.0
            if kernel.custom is not None:
                self.run_custom(kernel, args)
            else:
                self.launch(compiled, kernel, args)
            if timing:
                self.synchronize()
                ms, loop = (time.perf_counter() - start) * 1e3, list(kernel.loop_shape)
                print(f"[limn {self.name}] {kernel.name} {kernel.op.name} loop{loop}: {ms:.3f} ms", file=sys.stderr)
            self.stats.kernels_run += 1
            if after is not None:
                after(i, handles)
        return self._results(sched, leaves, handles)

    def run_custom(self, kernel: KernelIR, handles: list[Any]) -> None:
        """Runs a CUSTOM kernel (fused attention, the generator's words); a device that has any overrides it."""
        raise DeviceError(f"device {self.name!r} registers no CUSTOM kernel {kernel.custom!r}")

    def _bind(self, buf: Buffer) -> Any:
        if buf.device == self.name:
            return buf.handle
        source = get_device(buf.device)
        if self.host and source.host:
            return np.ascontiguousarray(buf.handle)  # host devices share bytes
        if source.host:  # a host tensor handed to this device: upload it for this call
            handle = self._alloc_checked(buf.dtype, buf.shape)
            self.copyin(handle, np.ascontiguousarray(buf.handle))
            return handle
        raise DeviceError(
            f"a tensor on device {buf.device!r} reached device {self.name!r}; move it first with .to({self.name!r})"
        )

    def _alloc_checked(self, dtype: DType, shape: Shape) -> Any:
        try:
            return self.alloc(dtype, shape)
        except MemoryError as e:
            nbytes = int(np.prod(shape)) * dtype.itemsize
            why = f": {e}" if str(e) else ""  # the device's own account (a GPU's free bytes), where it gave one
            raise MemoryError(
                f"device {self.name!r} could not allocate {nbytes} bytes for a {dtype.name}{list(shape)} buffer{why}"
            ) from None

    def _results(self, sched: Schedule, leaves: list[Buffer], handles: list[Any]) -> list[Buffer]:
        leaf_of = dict(zip(sched.inputs, leaves))
        out = []
        for sink in sched.sinks:
            leaf = leaf_of.get(sink.slot)
            if leaf is not None and leaf.shape == sink.shape:
                out.append(leaf)  # an ASSIGN's target, or a sink that is a leaf as it is
                continue
            handle = handles[sink.slot]
            if self.host:
                handle = handle.reshape(sink.shape)  # an alias: same bytes, the sink's shape
            out.append(Buffer(self.name, sched.slots[sink.slot].dtype, sink.shape, handle))
        return out
