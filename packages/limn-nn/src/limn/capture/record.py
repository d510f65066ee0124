"""Step capture: record the device runs of one call of a step function, replay them on new batches.

The first call runs the function as usual while every realize() it makes is recorded: which device
ran, the plan (on compiled devices) or the graph (on the numpy device), and where each leaf buffer
came from: an argument of the call, the result of an earlier run in the same call, a buffer that lives
across calls (parameters and optimizer state, which the step's assigns update), or a constant the step
made from host data. Later calls bind the new arguments' buffers to those leaves and run the recorded
plans directly, so no Python graph is built. Assigns the step made but did not realize are realized at
its end and recorded with it; assigns made outside it (a weight loaded, a caller's `t.assign(...)`) are
realized before it is recorded and, for the buffers it reads, before each replay, as the eager step would.

Replayed as the eager loop runs: arguments positional or by keyword (bound by name), one tensor passed
twice, a view of another argument (each is realized to its own buffer), an argument or a view of one
returned, an output fed back as the next input, realizes inside the step (one recorded run each),
random draws (the device generator's counter is state the step advances: each replay draws fresh numbers,
the ones the uncaptured loop would), a captured function called inside another step (it runs eagerly
there, recorded as the outer step's), a step that raises while recorded (nothing is recorded, the assigns
it made are realized, the next call records), a replay that raises (its run writes nothing).

Refused with a CaptureError naming the cause: another shape (batch size), dtype, device or argument
structure; another Python value argument (compared by repr) or object (compared by identity: a method
captured on its class refuses a second instance); tensors inside a container argument; other sharing of
buffers between arguments; a value read back into Python inside the step (a branch on it could go the
other way); host data whose bytes differ between the first two calls; an argument that is a buffer the
step assigns or the recording keeps; a tensor the recording read that no longer exists outside it (a
global rebound to a new tensor); a returned value that is not a tensor, or a tensor the step did not make.

Python values the step reads itself are guarded (limn.capture.guards): a float in a closure cell, a global counter
a branch reads, a setting on `self`, a default argument, noted with the line that reads them when the step is
recorded and read again before each replay; one that changed records the step anew (up to MAX_RECORDINGS times,
then a CaptureError naming the value, its two values and the line). The guards read the user's functions the step
calls too, one call deep; a value read deeper, or in a library, is replayed as recorded, as a print runs on the
recording call only. Pass such values in as tensor arguments (or keep them on the device, as optimizer
hyperparameters are), and check a new step with `capture(fn, verify=N)`: its first N replays also run the function
eagerly from the same state and raise on the first difference, naming what the eager call did otherwise
(limn.capture.verify): another number of runs, another plan (the kernel line that changed, a closure's float as a
CONST), or the first recorded kernel that wrote another value (`k1 SUM loop[8, 4]`, its slot, the largest
difference, its source lines and the binding that differs).
Pipeline: nn/optim step -> **capture** -> plan executor (jit.py) -> device.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from limn.capture import guards as capture_guards
from limn.capture import verify as capture_verify
from limn.capture.recording import (
    CaptureError,
    Leaf,
    Recording,
    Run,
    dtype_shape,
    graph_leaf_buffers,
    graph_template,
)
from limn.capture.replay import leaf_buffer, restore, run_runs, traced
from limn.composed.random import rng
from limn.frontend.tensor import Tensor, realize
from limn.graph import provenance
from limn.graph.ops import Node, Op
from limn.runtime import engine
from limn.runtime.device import Buffer, current_device, get_device
from limn.runtime.snapshot import Fork

MAX_RECORDINGS = 8  # how often a step records again for a Python value that changed, before it refuses


class _Recorder:
    """The observer (limn.runtime.engine.Observer) installed while a call is recorded."""

    def __init__(self, arg_buffers: dict[int, int]) -> None:
        self.arg_buffers = arg_buffers  # id(Buffer) -> argument index
        self.runs: list[Run] = []
        self.results: dict[int, tuple[int, int]] = {}  # id(Buffer) -> (run, result index)
        self.fresh: set[int] = set()  # buffers made from host data during the call
        self.constants: list[tuple[str, str]] = []
        self.assigns: list[Tensor] = []  # tensors the call assigned, realized or not
        self.targets: set[int] = set()  # id(Buffer) of each buffer an assign made in the call writes
        self.before: dict[int, Buffer] = {}  # id(old bytes) -> the buffer they were, in the current run
        self.problem: str | None = None
        # every buffer whose id is a key above, held until the recording ends: a buffer freed mid-call
        # would let a new one take its id and be classified as the old one (a fresh tensor as a result)
        self.alive: list[Buffer] = []

    def refuse(self, problem: str) -> None:
        self.problem = self.problem or problem

    def created(self, buffer: Buffer) -> None:
        self.fresh.add(id(buffer))
        self.alive.append(buffer)

    def assigned(self, t: Tensor) -> None:
        self.assigns.append(t)
        self.targets.add(id(t.node.srcs[0].arg))

    def read_back(self, t: Tensor) -> None:
        site = provenance.calling_site()
        where = f" at {site}" if site is not None else ""
        self.refuse(
            f"the step reads a {dtype_shape(t.dtype, t.shape)} value back into Python{where} while it is being "
            "captured (.numpy(), .item(), or an op that needs a mask's positions: x[mask] = values with one "
            "value per place, nonzero, masked_select); a replay could not follow it. Return the value from "
            "the step and read it outside, or write a masked update as x = mask.where(value, x)"
        )

    def realized(self, device: str, sinks: list[Node], buffers: list[Buffer], forks: list[Fork]) -> None:
        self.before = {id(f.before): f.target for f in forks if f.before is not None}
        for f in forks:
            if id(f.target) not in self.targets:
                self.refuse(
                    f"the step realized an assign to a {dtype_shape(f.target.dtype, f.target.shape)} tensor made "
                    "outside it and still pending (capture realizes this thread's pending assigns first: was it "
                    "made in another thread?); a replay would make it again on every call. Realize the tensor "
                    "(t.realize()) before calling the step"
                )
            if id(f.target) in self.arg_buffers:
                self.refuse(
                    f"the step assigns argument {self.arg_buffers[id(f.target)]} "
                    f"({dtype_shape(f.target.dtype, f.target.shape)}); a replay would write whatever tensor is "
                    "passed there next. Keep parameters and state out of the arguments: the step reads them itself"
                )
        dev = get_device(device)
        if hasattr(dev, "plan"):  # a compiled device: keep its plan and the leaves in its order
            plan, leaf_buffers = dev.plan(sinks)
            template = None
        else:
            plan, leaf_buffers = None, graph_leaf_buffers(sinks)
            template = graph_template(sinks, leaf_buffers)
        leaves = [self._classify(b) for b in leaf_buffers]
        run = len(self.runs)
        owners = {id(f.target): f.owners for f in forks}  # realize() fills these in after this call
        in_place = [f.target for f in forks if f.before is None]
        self.runs.append(Run(device, plan, template, leaves, owners, in_place))
        for i, b in enumerate(buffers):
            self.results.setdefault(id(b), (run, i))
        self.alive += buffers + [f.before for f in forks]

    def _classify(self, b: Buffer) -> Leaf:
        if id(b) in self.before:
            return Leaf("before", buffer=self.before[id(b)])
        if id(b) in self.arg_buffers:
            return Leaf("arg", index=self.arg_buffers[id(b)])
        if id(b) in self.results:
            run, index = self.results[id(b)]
            return Leaf("run", index=index, run=run)
        if id(b) in self.fresh:
            self.constants.append((dtype_shape(b.dtype, b.shape), hashlib.sha256(b.numpy().tobytes()).hexdigest()))
            return Leaf("const", buffer=b)
        return Leaf("kept", buffer=b)


def _signature(args: tuple, keywords: tuple[str, ...] = ()) -> tuple:
    """What must stay the same between calls: each argument's kind, shape and dtype (a tensor), value (a
    number, string, or container of them: by repr) or identity (any other object, whose attributes the
    step may read: another one is another step). The last len(keywords) arguments were passed by name."""
    names = ("",) * (len(args) - len(keywords)) + keywords
    sig = []
    for a, name in zip(args, names):
        if isinstance(a, Tensor):
            sig.append(("tensor", a.shape, a.dtype.name, a.device, name))
        elif _holds_tensor(a):
            where = f"argument {name!r}" if name else f"argument {len(sig)}"
            raise CaptureError(
                f"{where} is a {type(a).__name__} holding tensors; a recording binds only tensors passed as "
                "arguments themselves (one in a container would be read as the first call's on every replay). "
                "Pass each tensor as its own argument"
            )
        elif _plain(a):
            sig.append(("value", type(a).__name__, repr(a), name))
        else:
            sig.append(("object", type(a).__name__, id(a), name))
    return tuple(sig)


def _holds_tensor(a: Any) -> bool:
    if isinstance(a, dict):
        return any(_holds_tensor(v) for v in a.values())
    if isinstance(a, (list, tuple, set, frozenset)):
        return any(isinstance(v, Tensor) or _holds_tensor(v) for v in a)
    return False


def _plain(a: Any) -> bool:
    """A value compared by repr: a number (numpy's too), string, bytes, None, slice, or a container of them."""
    if isinstance(a, (bool, int, float, complex, str, bytes, type(None), slice, range, np.generic)):
        return True
    if isinstance(a, dict):
        return all(_plain(k) and _plain(v) for k, v in a.items())
    if isinstance(a, (list, tuple)):
        return all(_plain(v) for v in a)
    return False


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


def _record(call: Callable[[], Any], args: tuple) -> tuple[Recording, Any]:
    """Runs call() (the step on `args`) eagerly while recording what it runs; raises CaptureError for what
    cannot replay. A step that raises records nothing: the assigns it made are realized, outside the
    recording (as an eager loop realizes them when it next reads them), and the exception propagates."""
    realize(*[a for a in args if isinstance(a, Tensor)])  # arguments must be buffers to be bound to
    arg_buffers = {id(a.node.arg): i for i, a in enumerate(args) if isinstance(a, Tensor)}
    recorder = _Recorder(arg_buffers)
    for device in {a.device for a in args if isinstance(a, Tensor)} | {current_device()}:
        rng.default_generator(device)  # made outside the recording: its state is kept across calls
    rng.settle()  # a draw made before the step advanced a counter lazily: write it now, not in the recording
    engine.realize_pending_assigns()  # so with any assign made before the step (a weight loaded, ...)
    engine.observers.active.append(recorder)
    try:
        with rng.drawing_on_device():  # draws are graphs the recording holds, so replays draw anew
            out = call()
        outs, rebuild = _flatten(out)
        pending = [t for t in recorder.assigns if t.node.op is Op.ASSIGN]
        realize(*outs, *pending)  # assigns the step left pending are part of what it did
    except BaseException:
        engine.observers.active.remove(recorder)
        # the assigns made before the raise are realized now, so the next call (which records) does not
        # find them pending; one that cannot run stays pending, as eagerly, and the step's own error is raised
        with contextlib.suppress(Exception):
            realize(*[t for t in recorder.assigns if t.node.op is Op.ASSIGN])
        raise
    engine.observers.active.remove(recorder)
    if recorder.problem is not None:
        raise CaptureError(recorder.problem)
    positions = []
    for o in outs:
        buf = o.node.arg
        if id(buf) in recorder.results:
            run, index = recorder.results[id(buf)]
            positions.append(Leaf("run", index=index, run=run))
        elif id(buf) in arg_buffers:  # an argument returned as it is (a view of one is a run's result)
            positions.append(Leaf("arg", index=arg_buffers[id(buf)]))
        else:
            raise CaptureError(
                f"the step returned a {dtype_shape(o.dtype, o.shape)} tensor it did not compute; "
                "return only values computed inside the step"
            )
    return Recording(recorder.runs, positions, rebuild, recorder.constants), out


class Captured:
    """A step function that records its first call and replays the recording on later calls.

    >>> from limn import Tensor, optim
    >>> from limn.capture import capture
    >>> w = Tensor([1.0, 2.0], requires_grad=True)
    >>> opt = optim.SGD([w], lr=0.5)
    >>> def step(x):
    ...     loss = (w * x).sum()
    ...     loss.backward()
    ...     opt.step(loss)
    ...     return loss
    >>> train = capture(step, verify=1)
    >>> [train(Tensor([1.0, 1.0])).item() for _ in range(3)]  # record, verified replay, replay
    [3.0, 2.0, 1.0]
    >>> train.replays, w.tolist()
    (2, [-0.5, 0.5])
    """

    def __init__(self, fn: Callable[..., Any], verify: int = 0) -> None:
        if not isinstance(verify, int) or verify < 0:
            raise ValueError(f"capture(verify={verify!r}): verify is how many replays to check, an int >= 0")
        self.fn = fn
        self.verify = verify
        self.signature: tuple | None = None
        self.sharing: tuple | None = None
        self.recording: Recording | None = None
        self.confirmed = False  # host data the step makes is checked once more on the second call
        self.replays = 0
        self.objects: list[Any] = []  # object arguments, held so no other object takes their id
        self.guards: list[capture_guards.Guard] = []  # the Python values the recording read (capture/guards.py)
        self.recordings = 0

    @property
    def runs(self) -> list[Run]:
        return [] if self.recording is None else self.recording.runs

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """A captured method: bound to its instance, which is an argument like any other (compared by
        identity, so a method captured on its class refuses a second instance)."""
        return self if instance is None else functools.partial(self, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if any(isinstance(o, _Recorder) for o in engine.observers.active):
            return self.fn(*args, **kwargs)  # inside another step's recording: its runs are that step's
        keywords = tuple(sorted(kwargs))
        flat = args + tuple(kwargs[k] for k in keywords)  # keyword arguments bind by name, in name order
        call = functools.partial(self.fn, *args, **kwargs)
        if self.recording is not None and self._guards_changed():
            self.recording = None  # a Python value the step read has changed: record it anew
        if self.recording is None:
            guards = capture_guards.guards_of(self.fn, args, kwargs)  # the values as the call will read them
            signature = _signature(flat, keywords)
            # verify names a kernel's source lines when it finds one differing: record where nodes are made
            with provenance.recording() if self.verify else contextlib.nullcontext():
                self.recording, out = _record(call, flat)
            self.signature, self.sharing, self.guards = signature, _sharing(flat), guards
            self.recordings += 1
            self.objects = [a for a in flat if not isinstance(a, Tensor) and not _plain(a)]  # ids stay theirs
            self.confirmed = not self.recording.constants
            return out
        self._check_arguments(flat, keywords)
        rng.settle()  # a draw outside the step advanced a counter lazily: the replay reads the new bytes
        engine.realize_pending_assigns(self.recording.kept_ids)  # and what the caller assigned, not realized
        if not self.confirmed:
            return self._confirm(call, flat)
        self._check_kept(flat)
        if self.replays < self.verify:
            out = self._verified_replay(call, flat)
            if self.replays == self.verify and not provenance.is_recording():
                for run in self.runs:  # verified: the plans need not hold the first call's graph for its lines
                    if run.plan is not None:
                        run.plan.schedule.computes.clear()
            return out
        return self._replay(flat)

    # ---- what a replay must refuse ----

    def _guards_changed(self) -> bool:
        """Whether a Python value the recording read has changed since (then the step records again), raising
        CaptureError once it has recorded MAX_RECORDINGS times: a value that changes on every call belongs in
        a tensor argument."""
        found = capture_guards.first_changed(self.guards)
        if found is None:
            return False
        guard, now = found
        if guard.value is capture_guards.UNWATCHED:
            raise CaptureError(
                f"the step reads {guard.what} at {guard.line}, a container of over {capture_guards.MAX_ITEMS:,} "
                "numbers, too many to compare before each replay, so a replay could read it stale; pass what the "
                "step needs from it as a tensor argument"
            )
        if self.recordings >= MAX_RECORDINGS:
            raise CaptureError(
                f"the step reads {guard.what} at {guard.line}: {guard.value!r} when it was last recorded, {now!r} "
                f"now, and it has been recorded {self.recordings} times for such changes; pass the value as an "
                "argument (a 0-d tensor replays with its new value) or keep it on the device"
            )
        return True

    def _check_arguments(self, args: tuple, keywords: tuple[str, ...]) -> None:
        sig = _signature(args, keywords)
        if sig != self.signature:
            raise CaptureError(
                f"captured step called with arguments {_describe(sig)}, recorded with {_describe(self.signature)}: "
                "a replay runs the recorded shapes, dtypes and values only, and reads the recorded objects (one "
                "object is not another, however alike: pass arrays as tensors, capture a method per instance); "
                "capture a new step for these"
            )
        realize(*[a for a in args if isinstance(a, Tensor)])
        sharing = _sharing(args)
        if sharing != self.sharing:
            raise CaptureError(
                f"captured step called with arguments sharing buffers as {sharing}, recorded as {self.sharing} "
                "(each entry: the first argument holding the same buffer): a recording binds each buffer it "
                "read once, so pass one tensor twice exactly where the recording did, or capture a new step"
            )

    def _check_kept(self, args: tuple) -> None:
        kept = self.recording.kept
        kept_ids = self.recording.kept_ids
        for i, a in enumerate(args):
            if isinstance(a, Tensor) and id(a.node.arg) in kept_ids:
                raise CaptureError(
                    f"argument {i} ({dtype_shape(a.dtype, a.shape)}) is a buffer the recording keeps across calls "
                    "(a parameter or optimizer state): the replay would read and write it as two buffers. "
                    "Pass data as arguments, not the step's own tensors"
                )
        for b in kept:
            if not b.nodes:
                raise CaptureError(
                    f"the step read a {dtype_shape(b.dtype, b.shape)} tensor that nothing outside the recording holds "
                    "any more (a global or attribute rebound to a new tensor?); a replay would read the old one. "
                    "Pass it as an argument, or capture the step again"
                )

    def _confirm(self, call: Callable[[], Any], args: tuple) -> Any:
        """The second call of a step that makes host data: run and record it again; the data must match."""
        second, out = _record(call, args)
        for (what, a), (_, b) in zip(self.recording.constants, second.constants):
            if a != b:
                raise CaptureError(
                    f"the step makes a {what} tensor from host data whose bytes changed between its first two "
                    "calls; a replay would reuse the first call's. Pass it in as an argument of the step instead"
                )
        if len(second.constants) != len(self.recording.constants):
            raise CaptureError("the step made a different number of tensors from host data on its second call")
        self.recording, self.confirmed = second, True
        return out

    # ---- replaying ----

    def _replay(self, args: tuple) -> Any:
        results, _ = run_runs(self.recording, args)
        self.replays += 1
        outs = []
        for leaf in self.recording.outputs:
            buf = leaf_buffer(leaf, args, results, {})
            outs.append(Tensor._from_node(buf.node(), buf.device))
        return self.recording.rebuild(outs)

    def _verified_replay(self, call: Callable[[], Any], args: tuple) -> Any:
        """A replay checked against the eager call from the same state: the written buffers are saved,
        the function runs, they are put back, the replay runs, and the two must agree exactly. On a
        difference both are run again from the saved state, kernel by kernel (limn.capture.verify), to
        name the first recorded kernel whose value differs."""
        written = self.recording.written
        saved = [b.numpy() for b in written]
        eager_recording, eager = _record(call, args)
        eager_outs = [t.numpy() for t in _flatten(eager)[0]]
        eager_state = [b.numpy() for b in written]
        restore(written, saved)
        number = self.replays + 2  # the recording was call 1
        out = self._replay(args)
        pairs = [(f"output {i}", t.numpy(), e) for i, (t, e) in enumerate(zip(_flatten(out)[0], eager_outs))]
        pairs += [
            (f"the {dtype_shape(b.dtype, b.shape)} buffer the step assigns ({i})", b.numpy(), e)
            for i, (b, e) in enumerate(zip(written, eager_state))
        ]
        for what, got, expected in pairs:
            if not np.array_equal(got, expected, equal_nan=got.dtype.kind == "f"):
                trace = functools.partial(traced, args=args, written=written, saved=saved)
                first = capture_verify.first_difference(self.recording, eager_recording, trace)
                raise CaptureError(
                    f"verify: call {number} replayed differs from the eager call in {what}: max difference "
                    f"{capture_verify.max_difference(got, expected)}. {first}"
                )
        return out


def _describe(sig: tuple) -> str:
    parts = []
    for item in sig:
        if item[0] == "tensor":
            part = f"{item[2]}{list(item[1])} on {item[3]}"
        elif item[0] == "object":
            part = f"{item[1]} object at 0x{item[2]:x}"
        else:
            part = f"{item[1]} {item[2]}"
        parts.append(f"{item[-1]}={part}" if item[-1] else part)
    return "(" + ", ".join(parts) + ")"


def capture(fn: Callable[..., Any], verify: int = 0) -> Captured:
    """Wraps a step function for record-once, replay-after execution (see the module docstring). With
    verify=N the first N replays also run fn eagerly from the same state and raise CaptureError on the
    first difference, naming the call, the run and the first recorded kernel whose value differs (as ir()
    names it, with its slot, the largest difference, its source lines and the likely causes; on the numpy
    device, which runs graphs and not kernels, the run and its first differing result). Use it when a
    step is new, then drop it: each verified call costs two steps, four when they differ, and the first
    call records where each node is made (limn.graph.provenance) for the source lines, so its plans hold its
    graph until the last verified call."""
    return Captured(fn, verify)
