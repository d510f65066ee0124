"""Provenance: the line of the user's code that made each graph node, recorded only while asked for.

limn.explain and the diagrams say which source lines a kernel computes. For that, each Node made while
recording is on gets a Site: the innermost frame outside limn itself (and outside the standard library and
installed packages), with the limn function that line called. Gradient nodes get the Site of the forward
value they differentiate, marked as backward, since the line that called backward() says nothing about
which kernel came from where. Nodes a rewrite rebuilds (realize, common values) keep the Site of the node
they replace.

Recording is off unless LIMN_EXPLAIN=1 is set or a `recording()` block is open, and while it is off no node
pays for it beyond one test of a module global. Sites live in a weak table beside the nodes, so a recorded
graph is freed as an unrecorded one is.
Pipeline: tensor -> **graph (+ where each node came from)** -> schedule -> explain / diagram.
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from limn.graph import ops
from limn.graph.ops import Node


@dataclass(frozen=True)
class Frame:
    """One frame of the user's call stack: where it is, and which call of its function it belongs to
    (`call`, a number that tells two calls of one function apart while stacks are recorded, else 0)."""

    file: str
    line: int
    function: str
    call: int = 0

    def __str__(self) -> str:
        return f"{Path(self.file).name}:{self.line} in {self.function}"


@dataclass(frozen=True)
class Scope:
    """One call of a layer (limn.nn's Module.__call__ opens one) that was running while a node was made: the
    layer's class (`kind`), the name its caller holds it under ("ln_1", "h.0"; "" when unknown), the tensors it
    holds itself (parameters and buffers) by name with their nodes at the call, and a number telling its calls
    apart, and the nodes of the tensors it returned (filled in when it returns)."""

    kind: str
    name: str
    params: tuple[tuple[str, Node], ...] = field(compare=False, repr=False)
    call: int
    outputs: list[Node] = field(default_factory=list, compare=False, repr=False)  # what the call returned


@dataclass(frozen=True)
class Site:
    """Where a node came from: the user's line (file, line, the function holding it), the limn function
    called on that line (`api`, e.g. "Tensor.softmax"; "" when unknown), whether the node computes a
    gradient of the value made there (`backward`), when stacks are recorded the user's frames from the
    outermost down to this line, and the layer calls open then, outermost first (`scopes`: the module view
    of limn.diagram draws a box per call)."""

    file: str
    line: int
    function: str
    api: str = ""
    backward: bool = False
    stack: tuple[Frame, ...] = field(default=(), compare=False, repr=False)
    scopes: tuple[Scope, ...] = field(default=(), compare=False, repr=False)
    # `api` as the innermost layer's forward called it, and the line of that forward that called it
    layer_api: str = field(default="", compare=False, repr=False)
    layer_line: int = field(default=0, compare=False, repr=False)

    @property
    def layer_site(self) -> tuple[str, int]:
        return self.layer_api, self.layer_line

    @property
    def place(self) -> str:
        """file:line, the way tracebacks and editors read it."""
        return f"{self.file}:{self.line}"

    def __str__(self) -> str:
        text = f"{Path(self.file).name}:{self.line} in {self.function}"
        if self.api:
            text += f" ({self.api})"
        return text + (", backward" if self.backward else "")


# ---- what counts as the user's code ----


def _library_roots() -> tuple[str, ...]:
    """Directories whose frames are not the user's: every package dir of the limn namespace, the standard
    library and the installed packages."""
    import limn

    roots = [str(Path(p).resolve()) for p in limn.__path__]
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.append(str(Path(path).resolve()))
    return tuple(os.path.join(r, "") for r in roots)


_USER_PSEUDO_FILES = ("<stdin>", "<doctest", "<ipython-input")  # code the user typed


_FORWARDING: set[object] = set()  # code objects of wrappers that only pass a call on (a decorator's)
_LAYER_CALLS: set[object] = set()  # code objects that call a layer's forward (limn.nn's Module call)


def forwards(code: object) -> None:
    """Marks a wrapper's code as passing calls on to the function it wraps: a Site names the function the
    user called, which is the one the wrapper calls (limn.frontend.arguments.axis_is_dim)."""
    _FORWARDING.add(code)


def calls_layers(code: object) -> None:
    """Marks the code that calls a layer's forward inside a scope (limn.nn.module): a Site also keeps the limn
    function that forward called (`layer_api`), the name the module view gives a layer's own arithmetic."""
    _LAYER_CALLS.add(code)


def _api_name(qualname: str) -> str:
    """The name of the limn function a user called, from its frame. Tensor's methods are defined in mixin
    classes and in Primitives (limn.frontend.tensor), so ActivationsMixin.softmax is named Tensor.softmax."""
    owner, _, method = qualname.rpartition(".")
    return f"Tensor.{method}" if owner.endswith("Mixin") or owner == "Primitives" else qualname


class _Recorder:
    """The table of Sites and how to find one. `depth` counts the open recording() blocks (the env var
    holds one for the whole process); `stacks` counts those asking for call stacks."""

    def __init__(self) -> None:
        self.sites: weakref.WeakKeyDictionary[Node, Site] = weakref.WeakKeyDictionary()
        self.depth = 0
        self.stacks = 0
        self.roots: tuple[str, ...] | None = None
        self.files: dict[str, bool] = {}  # filename -> whether it is limn's or a library's
        self.calls: dict[int, tuple[object, int]] = {}  # id(frame) -> (frame, its call number), while stacks
        self.gradient_of: list[Site] = []  # the forward Sites whose gradient rules are running
        self.local = threading.local()  # per thread: `scopes`, the layer calls it has open now, outermost first
        self.scope_calls = 0  # layer calls counted so far, to number the next

    def is_library(self, filename: str) -> bool:
        known = self.files.get(filename)
        if known is None:
            if self.roots is None:
                self.roots = _library_roots()
            resolved = filename if filename.startswith("<") else str(Path(filename).resolve())
            if filename.startswith("<"):  # code made at run time: a dataclass's __init__, importlib, exec
                known = not filename.startswith(_USER_PSEUDO_FILES)
            else:
                known = resolved.startswith(self.roots)
            self.files[filename] = known
        return known

    def site_here(self) -> Site | None:
        """The Site of a node being made now, from the call stack."""
        if self.gradient_of:
            return self.gradient_of[-1]
        frame = sys._getframe(2)  # skip site_here and the hook: the frame making the node
        api, layer = "", None
        while frame is not None and self.is_library(frame.f_code.co_filename):
            if layer is None and frame.f_back is not None and frame.f_back.f_code in _LAYER_CALLS:
                layer = (api, frame.f_lineno)  # this frame is a layer's forward: what it called made the node
            if frame.f_code not in _FORWARDING:
                api = _api_name(frame.f_code.co_qualname)
            frame = frame.f_back
        if frame is None:
            return None
        stack = self._stack(frame) if self.stacks else ()
        code, scopes = frame.f_code, tuple(self.scopes())
        in_layer = layer or (api, frame.f_lineno)
        return Site(code.co_filename, frame.f_lineno, code.co_qualname, api, False, stack, scopes, *in_layer)

    def scopes(self) -> list[Scope]:
        """The layer calls this thread has open (another thread's module calls are not this graph's)."""
        if not hasattr(self.local, "scopes"):
            self.local.scopes = []
        return self.local.scopes

    def _stack(self, frame: object) -> tuple[Frame, ...]:
        frames = []
        while frame is not None:
            code = frame.f_code
            if not self.is_library(code.co_filename):
                # holding the frame keeps its id from being reused by a later call while stacks are on
                held = self.calls.setdefault(id(frame), (frame, len(self.calls) + 1))
                frames.append(Frame(code.co_filename, frame.f_lineno, code.co_qualname, held[1]))
            frame = frame.f_back
        return tuple(reversed(frames))


_recorder = _Recorder()


def _on_create(node: Node) -> None:
    """ops.on_create while recording: a new node gets the Site of the line making it."""
    site = _recorder.site_here()
    if site is not None:
        _recorder.sites[node] = site


def _on_rebuild(node: Node, original: Node) -> None:
    """ops.on_rebuild: a node a rewrite made takes the Site of the one it replaces."""
    site = _recorder.sites.get(original)
    if site is not None:
        _recorder.sites[node] = site


def _start(stacks: bool) -> None:
    _recorder.depth += 1
    _recorder.stacks += stacks
    ops.on_create = _on_create
    ops.on_rebuild = _on_rebuild  # stays: graphs recorded now are rewritten after the block ends too


def _stop(stacks: bool) -> None:
    _recorder.depth -= 1
    _recorder.stacks -= stacks
    if not _recorder.stacks:
        _recorder.calls.clear()
    if not _recorder.depth:
        ops.on_create = None


@contextlib.contextmanager
def recording(stacks: bool = False) -> Iterator[None]:
    """Record a Site for every node made inside the block. `stacks=True` also records each Site's user call
    stack, with which call of each function it was (the diagram collapses repeated blocks with it); the
    frames are held until the outermost such block ends."""
    _start(stacks)
    try:
        yield
    finally:
        _stop(stacks)


@contextlib.contextmanager
def layer(kind: str, name: str, params: tuple[tuple[str, Node], ...]) -> Iterator[Scope]:
    """Nodes made inside are made by one call of a layer (the Scope it yields, whose `outputs` the caller fills
    in); limn.nn's Module.__call__ opens it while recording is on."""
    _recorder.scope_calls += 1
    scope = Scope(kind, name, params, _recorder.scope_calls)
    _recorder.scopes().append(scope)
    try:
        yield scope
    finally:
        _recorder.scopes().pop()


def is_recording() -> bool:
    return _recorder.depth > 0


def is_user_code(filename: str) -> bool:
    """Whether a code object's file is the user's: not limn's, the standard library's or an installed package's."""
    return not _recorder.is_library(filename)


def calling_site() -> Site | None:
    """The user's line running now and the limn function it called there, for an error that names them
    (recorded or not)."""
    return _recorder.site_here()


def site(node: Node) -> Site | None:
    """Where `node` was made, or None when it was made while recording was off (or by limn alone)."""
    return _recorder.sites.get(node)


@contextlib.contextmanager
def gradient_of(node: Node) -> Iterator[None]:
    """Nodes made inside (a gradient rule's) get node's Site, marked backward. Autograd opens it only while
    recording is on, so the normal backward pays nothing."""
    found = _recorder.sites.get(node)
    if found is None:
        yield
        return
    _recorder.gradient_of.append(
        Site(found.file, found.line, found.function, found.api, True, found.stack, found.scopes, *found.layer_site)
    )
    try:
        yield
    finally:
        _recorder.gradient_of.pop()


def from_environment() -> bool:
    """Whether LIMN_EXPLAIN asks for explanations (any value but "", "0")."""
    return os.environ.get("LIMN_EXPLAIN", "0") not in ("", "0")


if from_environment():
    _start(stacks=False)  # for the whole process: limn.compiler.jit prints an explanation beside each new plan's IR
