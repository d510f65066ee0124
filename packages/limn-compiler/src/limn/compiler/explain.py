"""Explain: for each kernel of a schedule, the user's lines it computes and why each value it writes is stored.

The scheduler already keeps, per slot a kernel writes, the fusion rule that gave the value a buffer (a
Reason: a reduce, an assign, a value several kernels read that costs more to recompute than to store, a
view that cannot be read through, an operand a CUSTOM kernel reads from memory, ...), and per kernel the
graph nodes it evaluates. limn.graph.provenance knows, while it records, which line of the user's code made
each node. An Explanation puts the three together, one entry per kernel in run order, and prints each
beside the kernel's loop nest. `limn.explain(t)` is `explain(t)`; with LIMN_EXPLAIN=1 every plan a compiled
device builds prints its explanation to stderr.
Pipeline: tensor -> graph -> schedule -> IR -> **explain** (text, and the diagram's hover text).
"""

from __future__ import annotations

from dataclasses import dataclass

from limn.compiler.codegen import lower_schedule
from limn.compiler.ir import Program
from limn.compiler.kernel import Kernel, Schedule
from limn.compiler.schedule import schedule
from limn.graph import provenance
from limn.graph.ops import MOVEMENT, Op
from limn.graph.provenance import Site

NOT_RECORDED = (
    "source lines not recorded: build the graph with LIMN_EXPLAIN=1 set, or inside limn.graph.provenance.recording()"
)


@dataclass(frozen=True)
class Stored:
    """One value a kernel writes: its slot, dtype and shape, the fusion rule's sentence for it, and who
    reads it (other kernels, by name, and the caller's sinks)."""

    slot: int
    what: str  # e.g. "float32[4, 1]"
    rule: str  # the Rule's name, e.g. "op", "shared" (fusion.Rule.value)
    reason: str
    readers: tuple[str, ...]
    sinks: tuple[int, ...]
    join: str = ""  # why it is computed in this kernel's nest, where a merge or an epilogue moved it here

    def __str__(self) -> str:
        users = [f"read by {', '.join(self.readers)}"] if self.readers else []
        users += [f"sink {i}" for i in self.sinks]
        text = f"stores buf{self.slot} {self.what}: {self.reason}" + (f"; {self.join}" if self.join else "")
        return f"{text}; {'; '.join(users)}" if users else text


@dataclass(frozen=True)
class KernelExplanation:
    """One kernel: its name as ir() prints it (with "(a matmul)" after a Contraction's), the user lines its
    nodes came from (first seen first), and each value it writes with the reason it is stored."""

    name: str  # e.g. "k1  SUM  loop[4, 5]", or "k0  SUM  loop[4, 3, 5]  (a matmul)"
    sites: tuple[Site, ...]
    stores: tuple[Stored, ...]

    def lines(self) -> list[str]:
        out = [self.name]
        out += [f"  from {s}" for s in self.sites]
        out += [f"  {s}" for s in self.stores]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


@dataclass(frozen=True)
class Explanation:
    """Every kernel of one schedule, explained, with the Program (its IR) beside. str() prints, per kernel,
    its explanation and then its loop nest; `brief()` leaves the nests out."""

    kernels: tuple[KernelExplanation, ...]
    program: Program
    recorded: bool  # whether any node had a Site (False: NOT_RECORDED is printed first)

    @property
    def schedule(self) -> Schedule:
        return self.program.schedule

    def brief(self) -> str:
        blocks = [str(k) for k in self.kernels]
        return "\n\n".join(([] if self.recorded else [f"({NOT_RECORDED})"]) + blocks)

    def __str__(self) -> str:
        blocks = []
        for k, nest in zip(self.kernels, self.program.kernels):
            body = str(nest).splitlines()[1:]  # the nest's own header repeats the kernel's name
            blocks.append("\n".join(k.lines() + ["  ---- loop nest ----"] + body))
        return "\n\n".join(([] if self.recorded else [f"({NOT_RECORDED})"]) + blocks)


def explain(*tensors) -> Explanation:
    """The schedule realizing these tensors would run, kernel by kernel: the source lines each kernel
    computes (when provenance was recording as the tensors were built) and why each value it writes is
    stored. Print it, or read its `kernels`.

        >>> import limn
        >>> print(limn.explain(limn.Tensor.randn((4, 5)).softmax(-1)).brief())  # doctest: +SKIP
    """
    return explain_schedule(schedule([t.node for t in tensors]))


def explain_schedule(sched: Schedule, program: Program | None = None) -> Explanation:
    """The Explanation of a schedule already made (limn.compiler.jit passes its plan's), lowering it if needed."""
    program = program if program is not None else lower_schedule(sched)
    heads = [nest.header_lines()[0] + ("  (a matmul)" if nest.matmul else "") for nest in program.kernels]
    kernels = tuple(_kernel(sched, k, head) for k, head in zip(sched.kernels, heads))
    recorded = any(k.sites for k in kernels)
    return Explanation(kernels, program, recorded)


def kernel_sites(sched: Schedule, kernel: Kernel) -> list[Site]:
    """The user lines whose nodes a kernel evaluates, each once, in the order the kernel meets them. Views
    and constants only say how a value is indexed or spelled, so their lines count only for a kernel that
    does nothing else (a copy through a view)."""
    nodes = sched.computed_by(kernel)
    work = [n for n in nodes if n.op not in MOVEMENT and n.op is not Op.CONST] or nodes
    found: dict[Site, None] = {}
    for node in work:
        site = provenance.site(node)
        if site is not None:
            found.setdefault(site)
    return list(found)


def _kernel(sched: Schedule, kernel: Kernel, name: str) -> KernelExplanation:
    stores = []
    for s in dict.fromkeys(kernel.outputs):
        slot = sched.slots[s]
        reason = sched.reasons.get(s)
        readers = tuple(k.name for k in sched.kernels if k is not kernel and s in k.inputs)
        sinks = tuple(i for i, sink in enumerate(sched.sinks) if sink.slot == s)
        what = f"{slot.dtype.name}{list(slot.shape)}"
        if reason is None:  # a CUSTOM output nothing reads, or an ASSIGN temp's copy into its target
            rule, text = "", "written by the kernel, read by no one"
            if slot.kind == "input":
                rule, text = "assign", "an assign writes its target's buffer"
        else:
            rule, text = reason.rule.value, reason.detail
        join = sched.joins.get(s)
        stores.append(Stored(s, what, rule, text, readers, sinks, "" if join is None else join.detail))
    return KernelExplanation(name, tuple(kernel_sites(sched, kernel)), tuple(stores))
