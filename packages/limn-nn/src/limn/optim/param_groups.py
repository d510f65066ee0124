"""Parameter groups: torch's `[{"params": [...], "weight_decay": 0.1}, {"params": [...]}]` for limn.optim.

split_groups() reads an optimizer's `params` argument (Tensors, (name, Tensor) pairs, a {name: Tensor} dict, or
a list of group dicts) into named parameters and each group's hyperparameters; ParamGroup is one entry of
`optimizer.param_groups`, a dict as torch's, whose lr and weight_decay are written to 0-d device tensors when
set, so a schedule changes a value and no graph (a captured step replays with the new value).
Pipeline: nn (model, loss.backward()) -> **optim** (ASSIGN graphs) -> realize -> schedule -> device.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from limn.frontend.tensor import Tensor
from limn.graph.ops import Op
from limn.runtime.device import get_device

Params = Iterable[Tensor] | Iterable[tuple[str, Tensor]] | dict[str, Tensor] | Iterable[dict[str, Any]]
Named = list[tuple[str, Tensor]]

LIVE = ("lr", "weight_decay")  # the hyperparameters that live on the device and may change between steps


class ParamGroup(dict):
    """One parameter group: a dict holding "params" (the tensors) and the group's hyperparameters, as
    torch's `optimizer.param_groups[i]`. `names` are the parameters' state_dict paths; `tensors` are the
    group's 0-d device tensors (lr, weight_decay, and per-group step scalars such as AdamW's beta**t).

    Setting "lr" or "weight_decay" writes the device tensor: it takes effect at the next step, eager or
    replayed by limn.capture, and builds no plan. Trap: the other hyperparameters (betas, momentum, ...)
    are constants of the step's graph, so changing one raises a ValueError (make a new optimizer); keys
    the optimizer does not read (a name, torch schedulers' "initial_lr") are plain dict entries.

    >>> from limn import optim
    >>> w, b = Tensor([1.0], requires_grad=True), Tensor([0.0], requires_grad=True)
    >>> opt = optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.5}], lr=0.1)
    >>> [g["lr"] for g in opt.param_groups]
    [0.1, 0.5]
    >>> opt.param_groups[0]["lr"] = 0.01  # as a scheduler does
    >>> opt.param_groups[0].tensors["lr"].item()
    0.01
    """

    def __init__(self, named: Named, hyper: dict[str, Any], tensors: dict[str, Tensor], what: str) -> None:
        super().__init__(params=[t for _, t in named], **hyper)
        self.names = [n for n, _ in named]
        self.params = tuple(t for _, t in named)  # what the step updates, whatever happens to the list
        self.tensors = tensors
        self.fixed = frozenset(hyper) - frozenset(LIVE)
        self.what = what

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "params":
            raise ValueError(f"{self.what}: a group's params are fixed when the optimizer is made; make a new one")
        if key in LIVE:
            value = float(value)
            if not value >= 0:
                raise ValueError(f"{self.what}: param_groups[...][{key!r}] = {value}: it must be >= 0")
            write(self.tensors[key], value)
        elif key in self.fixed and not _same(value, self[key]):
            raise ValueError(
                f"{self.what}: param_groups[...][{key!r}] is {self[key]!r}, asked {value!r}: it is a constant of "
                f"every step's graph (a captured step would replay the old value), so it is fixed when the "
                f"optimizer is made; only {' and '.join(LIVE)} change between steps. Make a new optimizer"
            )
        super().__setitem__(key, value)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def refresh(self) -> None:
        """Reads lr and weight_decay back from their device tensors (after a load_state_dict wrote them)."""
        for key in LIVE:
            dict.__setitem__(self, key, float(self.tensors[key].node.arg.numpy()))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return tuple(a) == tuple(b)
    return a == b


def write(t: Tensor, value: float) -> None:
    """Overwrites a realized 0-d tensor's buffer from the host through the device's copyin: no graph
    runs, so no plan is built, and every graph that reads the tensor sees the new value."""
    buf = t.node.arg
    assert t.node.op is Op.BUFFER, "optimizer scalars stay realized"
    get_device(buf.device).copyin(buf.handle, np.array(value, buf.dtype.np))


def split_groups(params: Params, defaults: dict[str, Any], what: str) -> list[tuple[Named, dict[str, Any]]]:
    """[(named parameters, hyperparameters)] per group, from `params` as torch takes it: one group of
    Tensors (named by their index), (name, Tensor) pairs or a {name: Tensor} dict, or a list of dicts each
    holding "params" and the hyperparameters it overrides (the rest come from `defaults`). Unnamed
    tensors are numbered across groups, as torch numbers them in its state_dict."""
    items = list(params.items()) if isinstance(params, dict) else list(params)
    if items and all(isinstance(i, dict) for i in items):
        specs = items
    elif any(isinstance(i, dict) for i in items):
        raise TypeError(f"{what}: params mixes group dicts and tensors; give a list of dicts or of tensors")
    else:
        specs = [{"params": items}]
    groups, start = [], 0
    for i, spec in enumerate(specs):
        if "params" not in spec:
            raise ValueError(f"{what}: parameter group {i} has no 'params' key (keys: {sorted(spec)})")
        group_params = spec["params"]
        group_params = [group_params] if isinstance(group_params, Tensor) else group_params
        named = _named(group_params, what, start)
        start += len(named)
        groups.append((named, defaults | {k: v for k, v in spec.items() if k != "params"}))
    everything = [pair for named, _ in groups for pair in named]
    if not everything:
        raise ValueError(f"{what}: got no parameters to optimize")
    _check_unique(everything, what)
    return groups


def _named(params: Any, what: str, start: int) -> Named:
    """(name, Tensor) pairs from Tensors (named start, start + 1, ...), (name, Tensor) pairs or a dict."""
    items = list(params.items()) if isinstance(params, dict) else list(params)
    if all(isinstance(i, Tensor) for i in items):
        return [(str(start + k), t) for k, t in enumerate(items)]
    if not all(isinstance(i, tuple) and len(i) == 2 and isinstance(i[1], Tensor) for i in items):
        raise TypeError(f"{what}: params must be Tensors or (name, Tensor) pairs, as nn.named_parameters gives")
    return items


def _check_unique(named: Named, what: str) -> None:
    seen: set[int] = set()
    for name, t in named:
        if not t.requires_grad or not t.dtype.is_float:
            raise ValueError(f"{what}: parameter {name!r} ({t.dtype.name}{list(t.shape)}) does not require grad")
        if id(t) in seen:
            raise ValueError(f"{what}: parameter {name!r} is listed twice (in one group or in two)")
        seen.add(id(t))
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: parameter names repeat: {sorted(n for n in set(names) if names.count(n) > 1)}")
