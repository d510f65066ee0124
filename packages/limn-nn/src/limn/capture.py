"""Step capture: record the device runs of one call of a step function, replay them on new batches.

The first call runs the function as usual while every realize() it makes is recorded: which device
ran, the plan (on compiled devices) or the graph (on the numpy device), and where each leaf buffer
came from: an argument of the call, the result of an earlier run in the same call, or a buffer that
lives across calls (parameters and optimizer state, which the step's ASSIGNs update in place). Later
calls bind the new arguments' buffers to those leaves and run the recorded plans directly, so no
Python graph is built. What cannot be replayed is refused with a CaptureError instead of replayed
wrong: a changed shape or dtype, a new argument structure, a value read back into Python inside the
step (a branch on it could go the other way), or a tensor made from host data inside the step.
Pipeline: nn/optim step -> **capture** -> plan executor (jit.py) -> device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import limn.tensor as tensor_module
from limn import snapshot
from limn.device import Buffer, get_device
from limn.ops import Node, Op, toposort
from limn.snapshot import Fork
from limn.tensor import Tensor, realize


class CaptureError(RuntimeError):
    """The step cannot be captured or replayed as asked; the message says what changed and what to do."""


@dataclass(frozen=True)
class _Leaf:
    """Where a recorded run's leaf buffer comes from on replay."""

    # "arg": argument `index`; "run": result `index` of run `run`; "kept": `buffer` itself;
    # "before": the bytes `buffer` holds before this run assigns it (limn.snapshot forks it anew)
    kind: str
    index: int = 0
    run: int = 0
    buffer: Buffer | None = None


@dataclass
class _Run:
    device: str
    plan: Any  # a jit Plan on compiled devices, None on devices that interpret graphs
    sinks: list[Node] | None  # the graph, for devices without plans
    leaves: list[_Leaf]
    leaf_buffers: list[Buffer]  # as recorded, in the order `leaves` describes them
    owners: dict[int, list[Any]]  # id(assigned buffer) -> weakrefs to the tensors whose assign it is


class _Recorder:
    """The observer installed in limn.tensor while the first call runs."""

    def __init__(self, arg_buffers: dict[int, int]) -> None:
        self.arg_buffers = arg_buffers  # id(Buffer) -> argument index
        self.runs: list[_Run] = []
        self.results: dict[int, tuple[int, int]] = {}  # id(Buffer) -> (run, result index)
        self.fresh: set[int] = set()  # buffers made from host data during the call
        self.problem: str | None = None
        # every buffer whose id is a key above, held until the recording ends: a buffer freed mid-call
        # would let a new one take its id and be classified as the old one (a fresh tensor as a result)
        self.alive: list[Buffer] = []
        self.before: dict[int, Buffer] = {}  # id(old bytes) -> the buffer they were, in the current run

    def created(self, buffer: Buffer) -> None:
        self.fresh.add(id(buffer))
        self.alive.append(buffer)

    def assigned(self, t: Tensor) -> None:
        pass

    def read_back(self, t: Tensor) -> None:
        self.problem = self.problem or (
            f"the step reads a {t.dtype.name}{list(t.shape)} value back into Python (.numpy()/.item()) "
            "while it is being captured; a replay could not follow a branch on it. Return the value "
            "from the step and read it outside"
        )

    def realized(self, device: str, sinks: list[Node], buffers: list[Buffer], forks: list[Fork]) -> None:
        self.before = {id(f.before): f.target for f in forks}
        dev = get_device(device)
        if hasattr(dev, "plan"):  # a compiled device: keep its plan and the leaves in its order
            plan, leaf_buffers = dev.plan(sinks)
            sinks_kept = None
        else:
            plan, sinks_kept = None, list(sinks)
            leaf_buffers = _leaf_buffers(sinks)
        leaves = [self._classify(b) for b in leaf_buffers]
        run = len(self.runs)
        owners = {id(f.target): f.owners for f in forks}  # realize() fills these in after this call
        self.runs.append(_Run(device, plan, sinks_kept, leaves, list(leaf_buffers), owners))
        for i, b in enumerate(buffers):
            self.results.setdefault(id(b), (run, i))
        self.alive += buffers

    def _classify(self, b: Buffer) -> _Leaf:
        if id(b) in self.before:
            return _Leaf("before", buffer=self.before[id(b)])
        if id(b) in self.arg_buffers:
            return _Leaf("arg", index=self.arg_buffers[id(b)])
        if id(b) in self.results:
            run, index = self.results[id(b)]
            return _Leaf("run", index=index, run=run)
        if id(b) in self.fresh:
            self.problem = self.problem or (
                f"the step makes a {b.dtype.name}{list(b.shape)} tensor from host data (Tensor(...), "
                "randn, arange, ...) each call; a replay would reuse the first call's values. Pass it "
                "in as an argument of the step instead"
            )
        return _Leaf("kept", buffer=b)


def _leaf_buffers(sinks: list[Node]) -> list[Buffer]:
    seen: dict[int, Buffer] = {}
    for n in toposort(sinks):
        if n.op is Op.BUFFER:
            seen.setdefault(id(n.arg), n.arg)
    return list(seen.values())


def _signature(args: tuple) -> tuple:
    """What must stay the same between calls: each argument's kind, shape and dtype (or value)."""
    sig = []
    for a in args:
        if isinstance(a, Tensor):
            sig.append(("tensor", a.shape, a.dtype.name, a.device))
        else:
            sig.append(("value", type(a).__name__, repr(a)))
    return tuple(sig)


def _sharing(args: tuple) -> tuple:
    """For each argument, the index of the first argument holding the same buffer (None for a value). A
    recording made with one tensor passed twice reads it through one leaf; a replay must pass one twice too."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(id(a.node.arg), i) if isinstance(a, Tensor) else None for i, a in enumerate(args))


def _flatten(out: Any) -> tuple[list[Tensor], Callable[[list[Tensor]], Any]]:
    """The tensors in a step's return value (a tensor, or a tuple/list/dict of them) and a rebuilder."""
    if isinstance(out, Tensor):
        return [out], lambda ts: ts[0]
    if isinstance(out, (tuple, list)):
        if not all(isinstance(o, Tensor) for o in out):
            raise CaptureError("a captured step may return a tensor, or a tuple, list or dict of tensors")
        kind = type(out)
        return list(out), lambda ts: kind(ts)
    if isinstance(out, dict):
        if not all(isinstance(o, Tensor) for o in out.values()):
            raise CaptureError("a captured step may return a tensor, or a tuple, list or dict of tensors")
        keys = list(out)
        return list(out.values()), lambda ts: dict(zip(keys, ts))
    if out is None:
        return [], lambda ts: None
    raise CaptureError(f"a captured step returned {type(out).__name__}; return tensors (or None)")


class Captured:
    """A step function that records its first call and replays the recording on later calls.

    >>> step = capture(train_step)      # doctest: +SKIP
    >>> loss = step(x_batch, y_batch)   # first call: runs and records
    >>> loss = step(x_next, y_next)     # later calls: replay, no graph building
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.signature: tuple | None = None
        self.sharing: tuple | None = None
        self.runs: list[_Run] = []
        self.outputs: list[tuple[int, int]] = []
        self.rebuild: Callable[[list[Tensor]], Any] | None = None
        self.replays = 0

    def __call__(self, *args: Any) -> Any:
        if self.signature is None:
            return self._record(args)
        sig = _signature(args)
        if sig != self.signature:
            raise CaptureError(
                f"captured step called with arguments {_describe(sig)}, recorded with {_describe(self.signature)}: "
                "a replay runs the recorded shapes, dtypes and values only; capture a new step for these"
            )
        realize(*[a for a in args if isinstance(a, Tensor)])
        sharing = _sharing(args)
        if sharing != self.sharing:
            raise CaptureError(
                f"captured step called with arguments sharing buffers as {sharing}, recorded as {self.sharing} "
                "(each entry: the first argument holding the same buffer): a recording binds each buffer it "
                "read once, so pass one tensor twice exactly where the recording did, or capture a new step"
            )
        return self._replay(args)

    def _record(self, args: tuple) -> Any:
        tensors = [a for a in args if isinstance(a, Tensor)]
        realize(*tensors)  # arguments must be buffers to be bound to
        arg_buffers = {id(a.node.arg): i for i, a in enumerate(args) if isinstance(a, Tensor)}
        recorder = _Recorder(arg_buffers)
        tensor_module.observers.active.append(recorder)
        try:
            out = self.fn(*args)
            outs, rebuild = _flatten(out)
            realize(*outs)
        finally:
            tensor_module.observers.active.remove(recorder)
        if recorder.problem is not None:
            raise CaptureError(recorder.problem)
        positions = []
        for o in outs:
            buf = o.node.arg
            if id(buf) not in recorder.results:
                raise CaptureError(
                    f"the step returned a {o.dtype.name}{list(o.shape)} tensor it did not compute; "
                    "return only values computed inside the step"
                )
            positions.append(recorder.results[id(buf)])
        self.signature, self.sharing = _signature(args), _sharing(args)
        self.runs, self.outputs, self.rebuild = recorder.runs, positions, rebuild
        return out

    def _replay(self, args: tuple) -> Any:
        results: list[list[Buffer]] = []
        for run in self.runs:
            forks = {id(leaf.buffer): snapshot.fork(leaf.buffer) for leaf in run.leaves if leaf.kind == "before"}
            leaves = []
            for leaf in run.leaves:
                if leaf.kind == "before":
                    leaves.append(forks[id(leaf.buffer)].before)
                elif leaf.kind == "arg":
                    leaves.append(args[leaf.index].realize().node.arg)
                elif leaf.kind == "run":
                    leaves.append(results[leaf.run][leaf.index])
                else:
                    leaves.append(leaf.buffer)
            dev = get_device(run.device)
            try:
                if run.plan is not None:
                    results.append(dev.run_plan(run.plan, leaves))
                else:
                    results.append(dev.run(_rebind(run.sinks, run.leaf_buffers, leaves)))
            except BaseException:
                snapshot.undo(list(forks.values()))
                raise
            _settle(run, list(forks.values()))
        self.replays += 1
        outs = []
        for run, index in self.outputs:
            buf = results[run][index]
            node = Node(Op.BUFFER, (), buf.dtype, buf.shape, buf)
            outs.append(Tensor._from_node(node, buf.device))
        return self.rebuild(outs)


def _settle(run: _Run, forks: list[Fork]) -> None:
    """What realize() does after an assigning run: the tensors whose assigns these are read the new bytes,
    every other reader of the old bytes keeps them."""
    for f in forks:
        for ref in run.owners.get(id(f.target), ()):
            t = ref()
            if t is not None:
                t.node = f.target.node()
    snapshot.settle(forks, tensor_module._realized.__setitem__)


def _rebind(sinks: list[Node], old: list[Buffer], new: list[Buffer]) -> list[Node]:
    """The recorded graph with each old leaf buffer swapped for its new one."""
    swap = {id(o): n for o, n in zip(old, new)}
    rebuilt: dict[int, Node] = {}
    for n in toposort(sinks):
        if n.op is Op.BUFFER:
            b = swap.get(id(n.arg), n.arg)
            rebuilt[id(n)] = n if b is n.arg else Node(Op.BUFFER, (), b.dtype, b.shape, b)
        else:
            srcs = tuple(rebuilt[id(s)] for s in n.srcs)
            same = all(a is b for a, b in zip(srcs, n.srcs))
            rebuilt[id(n)] = n if same else Node(n.op, srcs, n.dtype, n.shape, n.arg)
    return [rebuilt[id(s)] for s in sinks]


def _describe(sig: tuple) -> str:
    parts = []
    for item in sig:
        if item[0] == "tensor":
            parts.append(f"{item[2]}{list(item[1])} on {item[3]}")
        else:
            parts.append(f"{item[1]} {item[2]}")
    return "(" + ", ".join(parts) + ")"


def capture(fn: Callable[..., Any]) -> Captured:
    """Wraps a step function for record-once, replay-after execution (see the module docstring)."""
    return Captured(fn)
