"""Module: the base class of limn's layers, with torch.nn.Module's conveniences over the attribute walk (limn.nn.walk).

Every built-in layer (Linear, Conv2d, BatchNorm2d, ReLU, Sequential, the losses, ...) is a Module, and a model
may be one too; it needs none to have parameters, since limn.nn.walk finds them in any object's attributes.
Module adds what a port reaches for: __call__ -> forward, train()/eval() (setting `training` on every object
in the walk that has it), modules(), children(), apply(), parameters(), state_dict(), load_state_dict(),
zero_grad(), to(), requires_grad_() and register_buffer().
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from limn import dtypes
from limn.frontend.tensor import Tensor
from limn.graph import provenance
from limn.nn import walk

__all__ = ["MODULE_STATE", "Module", "Parameter"]

# the attributes Module's methods set on an instance (train, register_buffer, requires_grad_): a container
# that keeps its modules as attributes (limn.nn.containers) leaves these out of its items
MODULE_STATE = frozenset({"training", "_registered_buffers", "_buffer_names", "_frozen"})


class IncompatibleKeys(NamedTuple):
    """What load_state_dict(strict=False) skipped, as torch's: keys the model has and the values lack, and
    keys of the values the model does not have."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """A base class for models and layers, as torch.nn.Module: subclass it, set layers and tensors as attributes
    (no super().__init__() is needed), and write forward(); calling the module calls forward, so a subclass
    of a layer that overrides forward is called through it. Everything is found by the attribute walk, so
    layers, lists and dicts of them and objects of other classes (no Module) all take part.

    >>> from limn import nn
    >>> class MLP(Module):
    ...     def __init__(self):
    ...         self.layers = [nn.Linear(4, 8), nn.Linear(8, 2)]
    ...         self.drop = nn.Dropout(0.1)
    ...     def forward(self, x):
    ...         return self.layers[1](self.drop(self.layers[0](x).relu()))
    >>> model = MLP().eval()
    >>> model(Tensor.ones((3, 4))).shape, model.drop.training, list(model.state_dict())[:2]
    ((3, 2), False, ['layers.0.weight', 'layers.0.bias'])
    """

    training: bool = True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # one call and nothing else (no hooks, no walk): a layer costs what its forward costs, unless provenance
        # is being recorded, when the call is a scope of its own for the module view of limn.diagram
        if not provenance.is_recording():
            return self.forward(*args, **kwargs)
        return _scoped_call(self, args, kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """What calling the module computes; every subclass defines it."""
        raise NotImplementedError(f"{type(self).__name__}: define forward(self, ...) to call the module")

    # ---- the objects in the walk ----

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Any]]:
        """(path, object) for self and every object the attribute walk descends into (layers, blocks, and
        any other plain object held in an attribute, list or dict), each once, in walk order."""
        yield from _objects(self, prefix, set())

    def modules(self) -> Iterator[Any]:
        """self and every object under it, as named_modules() walks them, without their paths."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Any]]:
        """(path, object) for the objects directly under self: in its attributes, or in lists and dicts there."""
        seen = {id(self)}
        for key, value in vars(self).items():
            yield from _first_objects(value, key, seen)

    def children(self) -> Iterator[Any]:
        """The objects directly under self, as named_children() finds them, without their names."""
        for _, m in self.named_children():
            yield m

    def apply(self, fn: Callable[[Any], None]) -> Module:
        """Calls fn on every object below self and then on self (children first, as torch); returns self."""
        for _, m in reversed(list(self.named_modules())):
            fn(m)
        return self

    def train(self, mode: bool = True) -> Module:
        """Sets `training = mode` on self and every object in the walk that has a `training` attribute (every
        Module, and any other object that keeps one); returns self."""
        if not isinstance(mode, bool):
            raise ValueError(f"train(mode): mode must be a bool, got {mode!r}")
        for m in self.modules():
            if isinstance(m, Module) or hasattr(m, "training"):
                m.training = mode
        return self

    def eval(self) -> Module:
        """train(False): dropout passes values through and batch norms use their running statistics."""
        return self.train(False)

    # ---- tensors ----

    def named_parameters(self, prefix: str = "", remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(path, tensor) for every parameter under self (limn.nn.walk.named_parameters), each path after
        `prefix`; a tied weight comes once, under its first path, unless remove_duplicate=False."""
        start = f"{prefix}." if prefix else ""
        for name, t in walk.named_parameters(self, remove_duplicate):
            yield start + name, t

    def parameters(self) -> Iterator[Tensor]:
        """Every parameter once (a tied weight once), as walk.parameters."""
        yield from walk.parameters(self)

    def named_buffers(self) -> Iterator[tuple[str, Tensor]]:
        """(path, tensor) for every buffer register_buffer set on self or a Module below, persistent or not."""
        seen: set[int] = set()
        for path, m in self.named_modules():
            for name in getattr(m, "_registered_buffers", ()):
                t = getattr(m, name, None)
                if isinstance(t, Tensor) and id(t) not in seen:
                    seen.add(id(t))
                    yield (f"{path}.{name}" if path else name), t

    def buffers(self) -> Iterator[Tensor]:
        """Every registered buffer under self, as named_buffers() finds them, without their names."""
        for _, t in self.named_buffers():
            yield t

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Sets a tensor that is not a parameter (a mask, running statistics) as attribute `name`; a persistent
        one is in state_dict() (the walk reads `_buffer_names`), as torch's."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a limn Tensor or None, got {type(tensor).__name__}")
        setattr(self, name, tensor)
        registered = tuple(n for n in getattr(self, "_registered_buffers", ()) if n != name)
        self._registered_buffers = (*registered, name)
        persistent_names = set(getattr(self, "_buffer_names", ())) - {name}
        self._buffer_names = frozenset(persistent_names | {name} if persistent else persistent_names)

    def state_dict(self) -> dict[str, Tensor]:
        """walk.state_dict(self): every parameter and persistent buffer under every path (tied weights twice)."""
        return walk.state_dict(self)

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Writes the values into the parameters and buffers in one realize(), as torch's: strict=True
        raises a ValueError (nothing written) on a missing, unexpected or misshapen key; strict=False writes
        the keys both have and returns what it skipped. A tied weight's last name's value is written."""
        targets = walk.state_dict(self)
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        if strict:
            walk.assign_values(targets, state_dict, True, f"{type(self).__name__}.load_state_dict")
        else:
            present = {k: t for k, t in targets.items() if k in state_dict}
            walk.assign_values(present, state_dict, False, f"{type(self).__name__}.load_state_dict")
        return IncompatibleKeys(missing, unexpected)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drops every parameter's gradient (or sets existing ones to zeros with set_to_none=False)."""
        for p in self.parameters():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = Tensor.zeros(p.shape, dtype=p.grad.dtype, device=p.device)

    def to(self, *args: Any, device: str | None = None, dtype: Any = None, non_blocking: bool = False) -> Module:
        """torch's Module.to: model.to(device), .to(dtype), .to(device, dtype) or the keywords; returns self.
        Every parameter and buffer moves to the device (a limn device name, 'numpy' or 'c'); a dtype, which
        must be a float one, converts the float tensors only (int buffers such as num_batches_tracked keep
        theirs, as torch). Tied weights stay tied. Trap, as in torch: an optimizer built before holds the old
        tensors; build it after .to()."""
        for arg in args:
            try:
                dtype = dtypes.as_dtype(arg)
            except TypeError:
                device = arg
        if dtype is not None:
            dtype = dtypes.as_dtype(dtype)
            if not dtype.is_float:
                raise TypeError(f"Module.to: only a float dtype converts a model, got {dtype.name}")

        def moved(t: Tensor) -> Tensor:
            want = dtype if dtype is not None and t.dtype.is_float else t.dtype
            return t.to(device or t.device, want)

        walk.replace_tensors(self, moved)
        return self

    def double(self) -> Module:
        """Every float parameter and buffer as float64 (self.to(limn.float64))."""
        return self.to(dtypes.float64)

    def float(self) -> Module:
        """Every float parameter and buffer as float32."""
        return self.to(dtypes.float32)

    def half(self) -> Module:
        """Every float parameter and buffer as float16 (the c device declines half widths; numpy runs them)."""
        return self.to(dtypes.float16)

    def bfloat16(self) -> Module:
        """Every float parameter and buffer as bfloat16."""
        return self.to(dtypes.bfloat16)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Sets requires_grad on every parameter; returns self. Frozen ones stay parameters, in parameters()
        and state_dict() (self lists them in `_frozen`, which the walk reads), as torch's. Trap: an optimizer
        refuses a frozen tensor; give it [p for p in model.parameters() if p.requires_grad]."""
        params = list(self.parameters())
        for t in params:
            t.requires_grad = bool(requires_grad)
        self._frozen = () if requires_grad else tuple(params)
        return self


_calling = threading.local()  # per thread, `modules`: those whose calls are open while provenance records


def _scoped_call(module: Module, args: tuple, kwargs: dict) -> Any:
    """module.forward(*args, **kwargs) inside a provenance scope naming the call: the module's class, the path
    its caller holds it under, and the tensors it holds itself (parameters and buffers, not its children's)."""
    calling = _calling.__dict__.setdefault("modules", [])
    name = _path_to(calling[-1], module) if calling else ""
    own = tuple((n, t.node) for n, t in vars(module).items() if isinstance(t, Tensor))  # parameters and buffers
    calling.append(module)
    try:
        with provenance.layer(type(module).__name__, name, own) as scope:
            result = module.forward(*args, **kwargs)
            returned = result if isinstance(result, (tuple, list)) else [result]
            scope.outputs.extend(t.node for t in returned if isinstance(t, Tensor))
            return result
    finally:
        calling.pop()


provenance.calls_layers(_scoped_call.__code__)


def _path_to(owner: Any, target: Any, depth: int = 4) -> str:
    """The dotted path from `owner` to `target` through attributes, lists and dicts (at most `depth` steps):
    "ln_1", "transformer.h.0"; "" when not found so near."""
    children = walk._children(owner) or []
    for key, child in children:
        if child is target:
            return str(key)
    if depth > 1:
        for key, child in children:
            if walk._children(child) is not None and not isinstance(child, Tensor):
                found = _path_to(child, target, depth - 1)
                if found:
                    return f"{key}.{found}"
    return ""


def _objects(value: Any, path: str, seen: set[int]) -> Iterator[tuple[str, Any]]:
    """Every plain object the walk descends into from value (value first), each once."""
    if id(value) in seen or isinstance(value, Tensor):
        return
    children = walk._children(value)
    if children is None:
        return
    seen.add(id(value))
    if not isinstance(value, (list, tuple, dict)):
        yield path, value
    prefix = f"{path}." if path else ""
    for key, child in children:
        yield from _objects(child, prefix + str(key), seen)


def _first_objects(value: Any, path: str, seen: set[int]) -> Iterator[tuple[str, Any]]:
    """The plain objects in value, looking through lists, tuples and dicts but not into objects."""
    if id(value) in seen or isinstance(value, Tensor):
        return
    if isinstance(value, (list, tuple, dict)):
        seen.add(id(value))
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            yield from _first_objects(child, f"{path}.{key}", seen)
    elif walk._children(value) is not None:
        seen.add(id(value))
        yield path, value


def Parameter(data: Tensor | None = None, requires_grad: bool = True) -> Tensor:  # noqa: N802 (torch's name)
    """torch.nn.Parameter: data's values in a fresh buffer, requiring grad, so the walk finds it as a parameter.
    Trap: limn has no Parameter type, so this gives a plain Tensor (isinstance(p, Parameter) cannot work), and
    a copy: unlike torch's, it shares no storage with data. No data is an empty float32 tensor, as torch's.

    >>> w = Parameter(Tensor.ones(3))
    >>> w.requires_grad, w.tolist()
    (True, [1.0, 1.0, 1.0])
    """
    if data is None:
        return Tensor.empty(0, requires_grad=requires_grad)
    if not isinstance(data, Tensor):
        raise TypeError(f"Parameter(data): data must be a limn Tensor, got {type(data).__name__}")
    return Tensor(data.numpy(), dtype=data.dtype, device=data.device, requires_grad=requires_grad)
