"""Where a verified replay parts from the eager call: the first recorded kernel whose value differs.

capture(fn, verify=N) compares each checked replay's outputs and assigned buffers with the eager call's.
When they differ, first_difference says why, checking in this order: the eager call made a different number
of device runs, or built another plan (its graph changed, which is the cause itself); otherwise both
recordings are run again from the same state, kernel by kernel, and the first kernel whose written slot
differs is named with its slot, the largest difference, how the slots it reads are bound, and the likely
causes. The numpy device runs whole graphs, not kernels: there the first run and result that differ are named.
Pipeline: nn/optim step -> capture -> **capture verify** -> plan executor (jit.py) -> device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from limn.compiler.explain import kernel_sites
from limn.compiler.jit import structure_key
from limn.compiler.kernel import Kernel, Schedule
from limn.graph.ops import Op

if TYPE_CHECKING:
    from limn.capture.recording import Leaf, Recording, Run

# One run, step by step: per kernel (one step for a numpy-device run), slot number (result index) -> bytes.
Trace = list[dict[int, np.ndarray]]

PYTHON_STATE = (
    "Likely cause: Python state the recording cannot see, such as a float or counter in a closure (baked into "
    "the graph as a constant) or a branch on one; pass it in as a tensor argument, or keep it on the device "
    "as optimizer hyperparameters are."
)
REBOUND = (
    "Likely cause: the recording reads another tensor than the eager call does, such as a global or attribute "
    "rebound to a new tensor while the old one lives on; pass it as an argument, or capture the step again."
)
BYTES = (
    "Likely causes: the bytes of a buffer this kernel reads differ between the replay and the eager call "
    "(a kept tensor changed outside the step's assigns, or host data the step reads changed), or the kernel "
    "is not deterministic."
)


def first_difference(ours: Recording, eager: Recording, trace: Callable[[Recording], list[Trace]]) -> str:
    """Why replaying `ours` differs from the eager call that made `eager`. trace(recording) runs a
    recording from the state both started from and returns what each of its runs wrote, step by step."""
    if len(eager.runs) != len(ours.runs):
        return (
            f"The eager call made {len(eager.runs)} device runs (realize() calls), the recording "
            f"{len(ours.runs)}: the step took another path than when it was recorded. {PYTHON_STATE}"
        )
    for r, (a, b) in enumerate(zip(ours.runs, eager.runs)):
        changed = _graph_change(a, b)
        if changed is not None:
            return f"Run {r} of the eager call {changed}. {PYTHON_STATE}"
    expected = trace(eager)
    got = trace(ours)
    for r, run in enumerate(ours.runs):
        for step, (g, e) in enumerate(zip(got[r], expected[r])):
            for slot in g:
                if not _equal(g[slot], e[slot]):
                    return _first_kernel(r, run, eager.runs[r], step, slot, g[slot], e[slot])
    return (
        "Run again kernel by kernel from the same state, every recorded kernel agrees with the eager call's: "
        "the difference did not come back, so a kernel is not deterministic or state outside the buffers the "
        "step assigns changed between the two runs."
    )


def max_difference(got: np.ndarray, expected: np.ndarray) -> float:
    """The largest |got - expected|, where a NaN on both sides counts as equal and on one side as NaN."""
    a, b = got.astype(np.float64), expected.astype(np.float64)
    both_nan = np.isnan(a) & np.isnan(b)
    diff = np.abs(a - b)[~both_nan]
    return float(np.max(diff)) if diff.size else 0.0


def kernel_name(kernel) -> str:
    """A kernel as ir() and LIMN_DEBUG=3 name it: `k3 SUM loop[4, 5]`."""
    return f"{kernel.name} {kernel.op.name} loop{list(kernel.loop_shape)}"


def _equal(got: np.ndarray, expected: np.ndarray) -> bool:
    return np.array_equal(got, expected, equal_nan=got.dtype.kind == "f")


def _graph_change(ours: Run, eager: Run) -> str | None:
    """How the eager call's run differs from the recorded one in what it runs (not in the values), or None."""
    if ours.device != eager.device:
        return f"ran on device {eager.device!r}, the recording's on {ours.device!r}"
    if ours.plan is None:
        mine, theirs = structure_key(ours.template)[0], structure_key(eager.template)[0]
        if mine == theirs:
            return None
        changed = "ran another graph than the recording's (the numpy device runs graphs, not kernels)"
        # structure_key's rows are (op, dtype, shape, arg, srcs), a CONST's arg (type name, repr of the value)
        for (op, _, _, arg_ours, _), (op_eager, _, _, arg_eager, _) in zip(mine[:-1], theirs[:-1]):
            if op is op_eager is Op.CONST and arg_ours != arg_eager:
                return f"{changed}: a constant {arg_eager[1]} where the recording has {arg_ours[1]}"
        return changed
    if ours.plan is eager.plan:  # plans are cached by graph structure: the same graph gets the same plan
        return None
    mine, theirs = ours.plan.program.kernels, eager.plan.program.kernels
    if len(mine) != len(theirs):
        return f"built another plan: {len(theirs)} kernels where the recording's has {len(mine)}"
    for k_ours, k_eager in zip(mine, theirs):
        if k_ours != k_eager:
            changed = f"built another plan: its kernel {kernel_name(k_eager)} is not the recording's"
            for line_ours, line_eager in zip(k_ours.body_lines(), k_eager.body_lines()):
                if line_ours != line_eager:
                    return f"{changed}, it has `{line_eager.strip()}` where the recording's has `{line_ours.strip()}`"
            return f"{changed} {kernel_name(k_ours)}"
    return "built another plan: the same kernels, on other slots"


def _first_kernel(r: int, ours: Run, eager: Run, step: int, slot: int, got: np.ndarray, expected: np.ndarray) -> str:
    """The message naming the first step of run r that wrote a different value into `slot`."""
    diff = max_difference(got, expected)
    if ours.plan is None:
        where = (
            f"The first difference: run {r}, result {slot} {_dtype_shape(got)} (the numpy device runs whole "
            f"graphs, so no kernel is named): max difference {diff}."
        )
        rebound = _rebound_leaf(ours.leaves, eager.leaves, {f"leaf {j}": j for j in range(len(ours.leaves))})
        return f"{where} {rebound or BYTES}"
    sched = ours.plan.schedule
    kernel = ours.plan.program.kernels[step]
    dtype = sched.slots[slot].dtype.name
    where = (
        f"The first recorded kernel to differ: run {r}, kernel {kernel_name(kernel)}, writing buf{slot} "
        f"{dtype}{list(sched.slots[slot].shape)}: max difference {diff}."
    )
    leaf_of = {s: j for j, s in enumerate(sched.inputs)}
    read = {f"buf{b.slot}": leaf_of[b.slot] for b in kernel.inputs if b.slot in leaf_of}  # its leaf slots
    rebound = _rebound_leaf(ours.leaves, eager.leaves, read)
    sources = _source_lines(sched, sched.kernels[step])
    return " ".join(part for part in (where, sources, rebound or BYTES) if part)


def _rebound_leaf(ours: list[Leaf], eager: list[Leaf], read: dict[str, int]) -> str | None:
    """Says which of the leaves `read` (name -> leaf index) the recording binds otherwise than the eager
    call, if one is. Host data is made anew each call, so two "const" leaves count as the same."""
    for name, j in read.items():
        a, b = ours[j], eager[j]
        same = a.kind == b.kind and (a.index, a.run) == (b.index, b.run)
        if a.kind in ("kept", "before"):
            same = same and a.buffer is b.buffer
        if not same:
            binds = f"the recording binds to {_leaf(a)} and the eager call to {_leaf(b)}"
            return f"It reads {name}, which {binds}. {REBOUND}"
    return None


def _leaf(leaf: Leaf) -> str:
    if leaf.kind == "arg":
        return f"argument {leaf.index}"
    if leaf.kind == "run":
        return f"result {leaf.index} of run {leaf.run}"
    what = f"{leaf.buffer.dtype.name}{list(leaf.buffer.shape)}"
    if leaf.kind == "const":
        return f"host data ({what})"
    if leaf.kind == "before":
        return f"the bytes of an assigned {what} buffer {_address(leaf)}"
    return f"a kept {what} buffer {_address(leaf)}"


def _address(leaf: Leaf) -> str:
    return f"(buffer at 0x{id(leaf.buffer):x})"


def _dtype_shape(a: np.ndarray) -> str:
    return f"{a.dtype}{list(a.shape)}"


def _source_lines(sched: Schedule, kernel: Kernel) -> str:
    """The user source lines (file:line) the kernel computes, as limn.compiler.explain finds them."""
    sites = kernel_sites(sched, kernel)
    if not sites:
        return "(Its source lines were not recorded: its plan was built before the capture; set LIMN_EXPLAIN=1.)"
    return "It computes " + "; ".join(str(site) for site in sites) + "."
