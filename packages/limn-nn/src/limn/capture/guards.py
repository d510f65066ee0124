"""Guards: the Python values a captured step reads, noted when it is recorded and checked before each replay.

A replay runs the recorded kernels and no Python, so a value the step read from Python (a learning rate in a
closure, a counter in a global, a default argument, a setting on `self` or on an object the step names) would
be replayed as it was when recorded. So the step's own code is read for the names it loads: each closure
variable, global and default it reads, and each attribute it reads off an object it holds that way or takes
as an argument, whose value is plain Python (numbers, strings, None, and tuples, lists and dicts of them), is
noted with the line that reads it. Before each replay the values are read again; one that changed makes the
step record anew (limn.capture.record decides how often), so a replay never runs on a stale value; a container
of numbers too long to compare each time is refused at the first replay instead. The user's functions and
methods the step calls are read the same way, one call deep (a hand-written schedule's `rate()`); limn's and
the libraries' code is not, nor what lies deeper: `capture(fn, verify=N)` checks those.
Pipeline: nn/optim step -> **capture (guards)** -> plan executor (jit.py) -> device.
"""

from __future__ import annotations

import builtins
import dis
import functools
import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from limn.frontend.tensor import Tensor
from limn.graph import provenance

PLAIN = (bool, int, float, complex, str, bytes, type(None), np.generic)
OPAQUE = (Tensor, types.ModuleType, type)  # whose attributes are no Python state of the step's (and may compute)
CALL_DEPTH = 2  # the step, and the user's functions it calls: their own loads are read too
MAX_ITEMS = 10_000  # a container of numbers longer than this is too long to compare before every replay
MISSING = object()
UNWATCHED = "<unwatched>"  # a Guard's value when the value cannot be compared: the first replay refuses


@dataclass(frozen=True)
class Guard:
    """One value the step read: what it is ("closure variable lr", "self.lr"), where the step reads it, how
    to read it now, and its value when the step was recorded."""

    what: str
    line: str
    read: Callable[[], Any]
    value: Any

    def changed(self) -> Any:
        """The value now if it differs from the recorded one, else MISSING."""
        if self.value is UNWATCHED:
            return UNWATCHED
        try:
            now = self.read()
        except (AttributeError, KeyError, ValueError):
            now = "<gone>"
        return MISSING if _same(now, self.value) else now


def plain(value: Any, depth: int = 0) -> bool:
    """Whether a value is plain Python data the guards can compare: a number, a string, None, or a short tuple,
    list or dict of them."""
    if isinstance(value, PLAIN):
        return True
    if depth > 2 or not isinstance(value, (tuple, list, dict)) or len(value) > MAX_ITEMS:
        return False
    items = value.items() if isinstance(value, dict) else enumerate(value)
    return all(plain(k, depth + 1) and plain(v, depth + 1) for k, v in items)


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b) or (a != a and b != b)  # NaN equals NaN here
    except (TypeError, ValueError):
        return False


def _snapshot(value: Any) -> Any:
    """A copy that later changes to a container do not reach."""
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snapshot(v) for v in value]
    return value


def guards_of(fn: Callable[..., Any], args: tuple, kwargs: dict) -> list[Guard]:
    """The guards of one call of `fn` with these arguments, read off fn's code (see the module docstring)."""
    fn = inspect.unwrap(fn)
    if isinstance(fn, functools.partial):
        args, kwargs, fn = (*fn.args, *args), {**fn.keywords, **kwargs}, fn.func
    if callable(fn) and not isinstance(fn, (types.FunctionType, types.MethodType, type)):
        call = fn.__call__  # a callable object: its __call__, bound to it (a builtin's is no MethodType)
        fn = call if isinstance(call, types.MethodType) else fn
    if isinstance(fn, types.MethodType):
        args, fn = (fn.__self__, *args), fn.__func__
    if not isinstance(fn, types.FunctionType):
        return []
    found: dict[str, Guard] = {}
    _collect(fn, _arguments(fn, args, kwargs), found, "", set())
    return list(found.values())


def _collect(fn: types.FunctionType, bound: dict, found: dict[str, Guard], inside: str, seen: set) -> None:
    """The guards of fn's own loads into `found`, then those of the user's functions and methods it names,
    CALL_DEPTH calls deep (a hand-written schedule's `lr()`; limn's and libraries' code is not read)."""
    seen.add(fn.__code__)
    for ins, chain, line in _loads(fn.__code__):
        for guard in _guards_at(fn, ins, chain, bound, f"{fn.__code__.co_filename}:{line}"):
            what = f"{guard.what} (in {inside})" if inside else guard.what
            found.setdefault(what, replace(guard, what=what))
        depth = inside.count(" <- ") + 1 if inside else 0  # calls below the step
        if depth + 1 >= CALL_DEPTH or len(seen) > 64:
            continue
        callee = _callee(fn, ins, chain, bound)
        if callee is not None and callee[0].__code__ not in seen:
            name = callee[0].__qualname__
            _collect(callee[0], callee[1], found, f"{name} <- {inside}" if inside else name, seen)


def _callee(fn: types.FunctionType, ins: dis.Instruction, chain: tuple, bound: dict):
    """(function, its bound self) when `ins` loads one of the user's functions or methods, else None."""
    try:
        if ins.opname in ("LOAD_DEREF", "LOAD_GLOBAL"):
            value = _owner(fn, ins, bound)
        elif ins.opname in ATTRIBUTE_LOADS and chain:
            value = _owner(fn, chain[0], bound)
            for attribute in (*[link.argval for link in chain[1:]], ins.argval):
                value = None if value is None or isinstance(value, OPAQUE) else getattr(value, attribute, None)
        else:
            return None
    except Exception:  # an attribute that raises when read is no callee to follow
        return None
    if isinstance(value, types.MethodType) and isinstance(value.__func__, types.FunctionType):
        func, bound_self = value.__func__, value.__self__
    elif isinstance(value, types.FunctionType):
        func, bound_self = value, None
    else:
        return None
    if not provenance.is_user_code(func.__code__.co_filename):
        return None
    first = func.__code__.co_varnames[:1]
    return func, ({first[0]: (bound_self, True)} if bound_self is not None and first else {})


def _arguments(fn: types.FunctionType, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The call's arguments by parameter name, defaults included (an attribute read off a default counts)."""
    try:
        bound = inspect.signature(fn).bind_partial(*args, **kwargs)
    except TypeError:
        return {}
    passed = set(bound.arguments)
    bound.apply_defaults()
    return {name: (value, name in passed) for name, value in bound.arguments.items()}


ATTRIBUTE_LOADS = ("LOAD_ATTR", "LOAD_METHOD")
MAX_CHAIN = 3  # self.settings.clip is followed; longer chains of attributes are not


def _loads(code: types.CodeType):
    """(instruction, the loads it reads attributes off, its line) for every instruction of the step's own code:
    for `self.settings.clip`, the LOAD_ATTR of clip comes with (LOAD_FAST self, LOAD_ATTR settings)."""
    chain: list[dis.Instruction] = []
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        if ins.positions is not None and ins.positions.lineno is not None:
            line = ins.positions.lineno
        yield ins, tuple(chain), line
        if ins.opname in ATTRIBUTE_LOADS and chain and len(chain) < MAX_CHAIN:
            chain.append(ins)
        else:
            chain = [ins] if ins.opname in ("LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL") else []


def _guards_at(fn: types.FunctionType, ins: dis.Instruction, chain: tuple, bound: dict, line: str) -> list[Guard]:
    """The guards one load makes: a closure variable, a global, an argument's default, or an attribute of an
    object the loads before it reached (an argument, a closure variable or a global, and attributes of it)."""
    name = ins.argval
    if ins.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF") and name in fn.__code__.co_freevars:
        cell = fn.__closure__[fn.__code__.co_freevars.index(name)]
        return _guard(f"closure variable {name}", line, lambda: cell.cell_contents)
    if ins.opname == "LOAD_GLOBAL" and not hasattr(builtins, name):
        space = fn.__globals__
        return _guard(f"global {name}", line, lambda: space[name])
    if ins.opname == "LOAD_FAST" and name in bound and not bound[name][1] and _default(fn, name) is not MISSING:
        return _guard(f"default argument {name}", line, lambda: _default(fn, name))
    if ins.opname in ATTRIBUTE_LOADS and chain:
        base = _owner(fn, chain[0], bound)
        path = [link.argval for link in chain[1:]]

        def read() -> Any:
            owner = base
            for attribute in (*path, name):
                if owner is None or isinstance(owner, OPAQUE):
                    raise AttributeError(name)  # a tensor's or a module's attributes are not Python state
                owner = getattr(owner, attribute)
            return owner

        if base is not None:
            return _guard(".".join([chain[0].argval, *path, name]), line, read)
    return []


def _guard(what: str, line: str, read: Callable[[], Any]) -> list[Guard]:
    try:
        value = read()
    except (AttributeError, KeyError, ValueError):
        return []
    if plain(value):
        return [Guard(what, line, read, _snapshot(value))]
    if isinstance(value, (tuple, list, dict)) and len(value) > MAX_ITEMS and plain(_head(value)):
        return [Guard(what, line, read, UNWATCHED)]  # numbers, but too many to compare before each replay
    return []


def _head(value: tuple | list | dict) -> list:
    """A container's first few items (values of a dict), to tell numbers from objects."""
    items = list(value.values() if isinstance(value, dict) else value)
    return items[:8]


def _default(fn: types.FunctionType, name: str) -> Any:
    """The default of parameter `name`, as the function holds it now, or MISSING."""
    code = fn.__code__
    positional = code.co_varnames[: code.co_argcount]
    if name in positional and fn.__defaults__:
        index = positional.index(name) - (len(positional) - len(fn.__defaults__))
        if index >= 0:
            return fn.__defaults__[index]
    return (fn.__kwdefaults__ or {}).get(name, MISSING)


def _owner(fn: types.FunctionType, load: dis.Instruction, bound: dict) -> Any:
    """The object an attribute is read off, when the instruction before loaded it from an argument, a closure
    variable or a global; None otherwise."""
    name = load.argval
    try:
        if load.opname == "LOAD_FAST":
            return bound.get(name, (None, False))[0]
        if load.opname == "LOAD_DEREF" and name in fn.__code__.co_freevars:
            return fn.__closure__[fn.__code__.co_freevars.index(name)].cell_contents
        if load.opname == "LOAD_GLOBAL":
            return fn.__globals__.get(name)
    except ValueError:  # an empty cell
        return None
    return None


def first_changed(guards: list[Guard]) -> tuple[Guard, Any] | None:
    """The first guard whose value changed, with its value now."""
    for guard in guards:
        now = guard.changed()
        if now is not MISSING:
            return guard, now
    return None
