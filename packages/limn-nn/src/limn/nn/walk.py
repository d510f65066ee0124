"""The parameter walk: the tensors a model holds, found through its attributes, named as torch names them.

named_parameters(obj) walks any object's attributes (modules, lists, tuples, dicts) and gives every Tensor
that requires grad with the dotted path to it (`layers.0.attn.weight`); state_dict(obj) gives every path
(a tied weight under each of its names, as torch's) plus the buffers an object names in `_buffer_names`;
load_state_dict writes values into them. No base class is needed: limn.nn.module.Module, the base of limn's
layers, adds torch's methods over the walk.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from limn.frontend.tensor import Tensor, realize
from limn.graph.ops import Op

__all__ = ["assign_values", "load_state_dict", "named_parameters", "named_tensors", "parameters", "state_dict"]


def named_parameters(obj: Any, remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
    """Every Tensor with requires_grad reachable from `obj`, with the dotted path that reaches it.

    Attributes are walked in definition order, list and tuple items by index, dict values by key, so a
    model built like its torch twin gets torch's names (`layers.0.attn.weight`). Each tensor comes once,
    under the first path that meets it (a tied weight keeps the first name; remove_duplicate=False gives
    it under every path, as torch's); a cycle is walked once. A tensor without requires_grad (a mask, a
    rotary table) is not a parameter and is skipped, unless an object above lists it in `_frozen` (a
    parameter Module.requires_grad_(False) froze, which stays a parameter, as torch's); nor is one computed
    from parameters (not a leaf: a loss or an activation a forward kept as an attribute).

    >>> from limn.nn import Linear
    >>> class MLP:
    ...     def __init__(self):
    ...         self.layers = [Linear(2, 4), Linear(4, 1)]
    >>> [name for name, _ in named_parameters(MLP())]
    ['layers.0.weight', 'layers.0.bias', 'layers.1.weight', 'layers.1.bias']
    """
    for path, t, is_parameter in named_tensors(obj, remove_duplicate):
        if is_parameter:
            yield path, t


def named_tensors(obj: Any, remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor, bool]]:
    """(path, tensor, is_parameter) for every parameter and every named buffer (a tensor under a name in its
    owner's `_buffer_names`, as Module.register_buffer records) reachable from obj, in walk order."""
    yielded: set[int] = set()
    walked: set[int] = set()  # containers walked already: with remove_duplicate nothing new is under them
    for path, t, is_parameter in _walk(obj, "", set(), walked if remove_duplicate else None, set()):
        if remove_duplicate:
            if id(t) in yielded:
                continue
            yielded.add(id(t))
        yield path, t, is_parameter


def _walk(
    value: Any, path: str, on_path: set[int], walked: set[int] | None, frozen: set[int], buffer: bool = False
) -> Iterator[tuple[str, Tensor, bool]]:
    """Depth first, in attribute order. `on_path` holds the containers above (a cycle stops there); `frozen`
    the ids of parameters an object above froze (Module.requires_grad_(False) lists them in `_frozen`)."""
    if isinstance(value, Tensor):
        # a parameter is a leaf: a loss or an activation kept as an attribute is computed, never a parameter
        is_parameter = (value.requires_grad and value.is_leaf) or id(value) in frozen
        if is_parameter or buffer:
            yield path, value, is_parameter
        return
    if id(value) in on_path or (walked is not None and id(value) in walked):
        return
    children = _children(value)
    if children is None:
        return
    if walked is not None:
        walked.add(id(value))
    attrs = getattr(value, "__dict__", {})  # an object's own marks (Module sets them); containers have none
    buffers = attrs.get("_buffer_names", ())
    frozen.update(id(t) for t in attrs.get("_frozen", ()))
    on_path.add(id(value))
    prefix = f"{path}." if path else ""
    for key, child in children:
        if key != "_frozen":
            yield from _walk(child, prefix + str(key), on_path, walked, frozen, key in buffers)
    on_path.discard(id(value))


# values the walk never descends into: numbers, strings, arrays, and functions, classes and modules, whose
# attributes (globals, class variables) are not a model's parameters
_LEAVES = (
    str,
    bytes,
    int,
    float,
    bool,
    type(None),
    np.ndarray,
    type,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    types.ModuleType,
)


def _children(value: Any) -> list[tuple[Any, Any]] | None:
    """What the parameter walk descends into: containers' items and plain objects' attributes."""
    if isinstance(value, (list, tuple)):
        return list(enumerate(value))
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, _LEAVES):
        return None
    attrs = getattr(value, "__dict__", None)  # a module, or any object holding tensors
    return None if attrs is None else list(attrs.items())


def replace_tensors(obj: Any, fn: Callable[[Tensor], Tensor]) -> None:
    """Replaces every parameter and named buffer the walk finds under obj with fn(tensor), in its owner's
    attribute, list slot or dict key; a tensor found under two names (a tied weight) becomes one new tensor
    under both. A new parameter is a leaf that requires grad, as the old one was. Tensors inside tuples stay
    (a tuple cannot be written)."""
    new: dict[int, Tensor] = {}

    def swap(t: Tensor) -> Tensor:
        if id(t) not in new:
            out = fn(t)
            if out is not t:  # a leaf of its own, not a cast hanging off the old parameter
                out = out.detach().requires_grad_() if t.requires_grad else out.detach()
            new[id(t)] = out
        return new[id(t)]

    found = {id(t) for _, t, _ in named_tensors(obj, remove_duplicate=False)}
    for owner in _owners(obj, set()):
        if isinstance(owner, tuple):
            continue
        if isinstance(owner, (list, dict)):
            slots = list(enumerate(owner)) if isinstance(owner, list) else list(owner.items())
            for key, child in slots:
                if isinstance(child, Tensor) and id(child) in found:
                    owner[key] = swap(child)
            continue
        for key, child in list(vars(owner).items()):
            if isinstance(child, Tensor) and id(child) in found:
                setattr(owner, key, swap(child))


def _owners(value: Any, seen: set[int]) -> Iterator[Any]:
    """Every container and object the walk descends into from value, each once."""
    children = _children(value)
    if children is None or id(value) in seen:
        return
    seen.add(id(value))
    yield value
    for _, child in children:
        if not isinstance(child, Tensor):
            yield from _owners(child, seen)


def parameters(obj: Any) -> list[Tensor]:
    """The tensors named_parameters(obj) finds, in the same order, without their names (a tied one once)."""
    return [t for _, t in named_parameters(obj)]


def state_dict(obj: Any) -> dict[str, Tensor]:
    """{path: tensor} for every parameter and named buffer of obj, under every path that reaches it (so a
    tied weight, `lm_head.weight` IS `transformer.wte.weight`, is under both names, as torch's state_dict):
    the tensors themselves (realized), not copies, so limn.serialize.save writes them and load_into writes
    into them. Trap: serialize.save writes a tied tensor once per name (two copies in the file)."""
    named = {path: t for path, t, _ in named_tensors(obj, remove_duplicate=False)}
    lazy = [t for t in named.values() if t.node.op is not Op.BUFFER]
    if lazy:
        realize(*lazy)
    return named


def load_state_dict(obj: Any, values: dict[str, Any], strict: bool = True) -> None:
    """Writes `values` ({path: Tensor or array}) into obj's parameters' (and named buffers') own buffers in
    one realize(). Its keys are state_dict(obj)'s: a tied weight needs a value under each name, and the
    last name's is written (as torch's copies, in order, leave it).

    Everything is checked first: every parameter needs a value of its shape (dtype is converted), and with
    strict=True no value may lack a parameter. On a mismatch a ValueError lists every problem and nothing
    is written."""
    assign_values(state_dict(obj), values, strict, "load_state_dict")


def assign_values(targets: dict[str, Tensor], values: dict[str, Any], strict: bool, what: str) -> None:
    """Assigns values[name] into targets[name] for every name, in one realize, after checking them all
    (load_state_dict here, and the optimizers' load_state_dict, share it). `what` opens the error. A
    tensor under several names (a tied weight) is written once, from its last name's value."""
    problems = [f"missing: {name} {list(t.shape)}" for name, t in targets.items() if name not in values]
    for name, t in targets.items():
        if name in values and _shape(values[name]) != t.shape:
            problems.append(f"shape: {name} is {list(t.shape)}, the value is {list(_shape(values[name]))}")
    if strict:
        problems += [f"unexpected: {name}" for name in values if name not in targets]
    if problems:
        listed = "\n".join("  " + p for p in problems)
        raise ValueError(f"{what}: the values do not match, nothing was written:\n{listed}")
    lazy = [t for t in targets.values() if t.node.op is not Op.BUFFER]
    if lazy:
        realize(*lazy)
    last = {id(t): name for name, t in targets.items()}  # the name each tensor is written from
    written = []
    for name, t in targets.items():
        if last[id(t)] != name:
            continue
        value = values[name]
        value = value if isinstance(value, Tensor) else Tensor(np.asarray(value), dtype=t.dtype, device=t.device)
        t.assign(value.detach())
        written.append(t)
    realize(*written)


def _shape(value: Any) -> tuple[int, ...]:
    return value.shape if isinstance(value, Tensor) else tuple(np.shape(value))
