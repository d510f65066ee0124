"""Replaying a recording on a new call's arguments: each run's leaves bound to this call's buffers, the plan
or graph run, and the assigns settled as realize() settles them (the tensors assigned read the new bytes,
every other reader keeps the old). A run that raises writes nothing.
"""

from __future__ import annotations

import numpy as np

from limn.capture.recording import Leaf, Recording, Run, bind
from limn.compiler.jit import CompiledDevice, Plan
from limn.runtime import engine, snapshot
from limn.runtime.device import Buffer, get_device
from limn.runtime.snapshot import Fork


def traced(recording: Recording, args: tuple, written: list[Buffer], saved: list[np.ndarray]) -> list:
    """What each run of `recording` writes, kernel by kernel (capture_verify.Trace), from the saved state."""
    restore(written, saved)
    return run_runs(recording, args, traced=True)[1]


def restore(buffers: list[Buffer], saved: list[np.ndarray]) -> None:
    for b, data in zip(buffers, saved):
        get_device(b.device).copyin(b.handle, data)


def run_runs(recording: Recording, args: tuple, traced: bool = False) -> tuple[list[list[Buffer]], list]:
    """Runs a recording's runs on this call's arguments: each run's result buffers and, when traced, what
    each run wrote step by step (limn.capture.verify.Trace: per kernel on a compiled device, slot ->
    bytes; one step on the numpy device, result index -> bytes)."""
    results: list[list[Buffer]] = []
    traces: list[list[dict[int, np.ndarray]]] = []
    for run in recording.runs:
        forks = {id(leaf.buffer): snapshot.fork(leaf.buffer) for leaf in run.leaves if leaf.kind == "before"}
        leaves = [leaf_buffer(leaf, args, results, forks) for leaf in run.leaves]
        forks |= {id(b): snapshot.fork(b) for b in run.in_place}  # no new memory: they only lose readers
        dev = get_device(run.device)
        try:
            if traced and run.plan is not None:
                out, steps = plan_traced(dev, run.plan, leaves)
                traces.append(steps)
            elif run.plan is not None:
                out = dev.run_plan(run.plan, leaves)
            else:
                out = dev.run(bind(run.template, leaves))
                if traced:
                    traces.append([{i: b.numpy() for i, b in enumerate(out)}])
            results.append(out)
        except BaseException:
            snapshot.undo(list(forks.values()))
            raise
        settle(run, list(forks.values()))
    return results, traces


Trace = list[dict[int, np.ndarray]]  # per kernel run: slot number -> the bytes it wrote there


def plan_traced(dev: CompiledDevice, plan: Plan, leaves: list[Buffer]) -> tuple[list[Buffer], Trace]:
    """The plan run, with what each kernel wrote: per kernel, slot number -> a copy of that slot's bytes just
    after the kernel ran (a later kernel may reuse the scratch buffer). Slow, since it copies every written
    slot out: verify runs it only to name the first kernel where two runs part."""
    slots = plan.schedule.slots
    written: Trace = []

    def keep(i: int, handles: list) -> None:
        dev.synchronize()
        outputs = plan.program.kernels[i].outputs
        written.append({b.slot: dev.copyout(handles[b.slot], b.dtype, slots[b.slot].shape) for b in outputs})

    return dev.run_plan(plan, leaves, after=keep), written


def leaf_buffer(leaf: Leaf, args: tuple, results: list[list[Buffer]], forks: dict[int, Fork]) -> Buffer:
    if leaf.kind == "before":
        return forks[id(leaf.buffer)].before
    if leaf.kind == "arg":
        return args[leaf.index].node.arg
    if leaf.kind == "run":
        return results[leaf.run][leaf.index]
    return leaf.buffer


def settle(run: Run, forks: list[Fork]) -> None:
    """What realize() does after an assigning run: the tensors whose assigns these are read the new bytes,
    every other reader of the old bytes keeps them."""
    for f in forks:
        for ref in run.owners.get(id(f.target), ()):
            t = ref()
            if t is not None:
                t.node = f.target.node()
    snapshot.settle(forks, engine.remember)
