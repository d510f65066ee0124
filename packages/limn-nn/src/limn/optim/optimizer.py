"""The optimizer base: parameters in groups, their state, and a step as one batch of ASSIGNs realized together.

An optimizer holds parameters (Tensors, (name, Tensor) pairs from nn.named_parameters, or torch's list of
group dicts, see limn.optim.param_groups) and their state as realized device tensors. step(*extra) builds every
update as an assign into the parameter's and the state's own buffers and realizes them all, with `extra`,
in one limn.realize(): every update reads the values from before the step, and a logged loss shares the
forward pass with the gradients. What a step changes (the step count, AdamW's beta**t) and what a schedule
changes (each group's lr and weight_decay) are 0-d device tensors, so a new learning rate changes no graph
and a compiled device replays the plan it has.
Pipeline: nn (model, loss.backward()) -> **optim** (ASSIGN graphs) -> realize -> schedule -> device.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from limn import dtypes
from limn.autograd import no_grad
from limn.dtypes import DType
from limn.frontend.tensor import Tensor, realize
from limn.graph.ops import Op
from limn.nn.walk import assign_values
from limn.optim.param_groups import LIVE, ParamGroup, Params, split_groups


class Optimizer(ABC):
    """What every optimizer shares: the parameters in their groups (`param_groups`, as torch's), their
    per-parameter state, the step count, plus step / zero_grad / state_dict.

    A subclass gives its defaults, checks one group's hyperparameters in `_check`, and writes `updates()`:
    the step as lazy tensors carrying assigns, nothing realized.
    """

    kind = "optimizer"  # the default name: the prefix of this optimizer's own keys in state_dict()

    def __init__(self, params: Params, defaults: dict[str, Any], name: str | None = None) -> None:
        what = type(self).__name__
        groups = split_groups(params, defaults, what)
        for _, hyper in groups:
            self._check(hyper)
        named = [pair for group_named, _ in groups for pair in group_named]
        self.names, self.params = [n for n, _ in named], [t for _, t in named]
        lazy = [t for t in self.params if t.node.op is not Op.BUFFER]
        if lazy:
            realize(*lazy)
        self.device = self.params[0].device
        self.name = name or self.kind
        self.defaults = dict(defaults)
        self.steps = self._scalar(0, dtypes.int32)
        self.state: dict[str, dict[str, Tensor]] = {name: {} for name in self.names}
        self.param_groups: list[ParamGroup] = []
        for group_named, hyper in groups:
            tensors = {key: self._scalar(hyper[key]) for key in LIVE} | self._group_scalars(hyper)
            self.param_groups.append(ParamGroup(group_named, hyper, tensors, what))

    @abstractmethod
    def _check(self, hyper: dict[str, Any]) -> None:
        """Raises ValueError for a group's hyperparameters the optimizer cannot use."""

    def _group_scalars(self, hyper: dict[str, Any]) -> dict[str, Tensor]:
        """The 0-d device tensors a group's step keeps besides lr and weight_decay (AdamW's beta**t)."""
        return {}

    def _scalar(self, value: float, dtype: DType = dtypes.float64) -> Tensor:
        """A realized 0-d tensor: hyperparameters and step scalars are float64, as torch's python floats."""
        return mark_state(Tensor(np.array(value, dtype.np), device=self.device))

    def _zeros_like(self, p: Tensor) -> Tensor:
        return mark_state(Tensor(np.zeros(p.shape, p.dtype.np), device=p.device))

    # ---- hyperparameters a schedule may change: written into their buffers, no graph is built ----

    @property
    def lr(self) -> float:
        """Every group's lr when they share one (set it to set every group's; param_groups[i]["lr"] for one)."""
        return self._shared("lr")

    @lr.setter
    def lr(self, value: float) -> None:
        for group in self.param_groups:
            group["lr"] = value

    @property
    def weight_decay(self) -> float:
        return self._shared("weight_decay")

    @weight_decay.setter
    def weight_decay(self, value: float) -> None:
        for group in self.param_groups:
            group["weight_decay"] = value

    def _shared(self, key: str) -> float:
        values = [group[key] for group in self.param_groups]
        if len(set(values)) != 1:
            raise ValueError(
                f"{type(self).__name__}.{key}: the parameter groups have different values {values}; "
                f"read optimizer.param_groups[i][{key!r}]"
            )
        return values[0]

    # ---- stepping ----

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forgets every parameter's gradient: sets .grad to None (torch's default), or with set_to_none=False
        sets each existing gradient to zeros (so the next step updates those parameters with a zero gradient).
        step() drops the gradients itself (their graphs read the parameters the step overwrote)."""
        for p in self.params:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad = Tensor.zeros(p.shape, dtype=p.grad.dtype, device=p.device)

    def step(self, *extra: Tensor) -> None:
        """Updates every parameter that has a gradient, in one realize() together with `extra` (say the
        loss, so the forward pass is computed once for both). The gradients are then dropped (.grad is
        None): their graphs read the parameters the step has just overwritten.

        >>> from limn.optim import SGD
        >>> w = Tensor([1.0, -2.0], requires_grad=True)
        >>> opt = SGD([w], lr=0.25)
        >>> loss = (w * w).sum()
        >>> loss.backward()
        >>> opt.step(loss)  # the loss is realized in the same run, from the pre-step w
        >>> loss.item(), w.tolist()
        (5.0, [0.5, -1.0])
        """
        _step_together([self], *extra)

    @abstractmethod
    def updates(self) -> list[Tensor]:
        """The step as lazy tensors (assigns into parameters and state), for step() to realize."""

    @staticmethod
    def _with_grads(group: ParamGroup) -> Iterator[tuple[str, Tensor, Tensor]]:
        """(name, parameter, gradient) for each parameter of the group that has a gradient; the others stay."""
        for name, p in zip(group.names, group.params):
            if p.grad is not None:
                yield name, p, p.grad

    def _count_step(self) -> Tensor:
        return self.steps.assign(self.steps + 1)

    # ---- checkpoints ----

    def state_dict(self) -> dict[str, Tensor]:
        """Everything a resumed run needs, as the optimizer's own realized tensors (not copies):
        per-parameter state under `{parameter path}.{state}` (`layers.0.weight.exp_avg`; the path is the
        parameter's index when it was given without names), the step count under `{name}.step`, and each
        group's scalars under `{name}.{scalar}` with one group (`adamw.lr`, `adamw.beta1_power`), under
        `{name}.param_groups.{i}.{scalar}` with several. limn.serialize.save writes it beside the model's
        parameters in one file; load_state_dict or serialize.load_into reads it back."""
        out: dict[str, Tensor] = {}
        for name, entries in self.state.items():
            for key, t in entries.items():
                out[f"{name}.{key}"] = t
        out[f"{self.name}.step"] = self.steps
        for i, group in enumerate(self.param_groups):
            prefix = self.name if len(self.param_groups) == 1 else f"{self.name}.param_groups.{i}"
            for key, t in group.tensors.items():
                out[f"{prefix}.{key}"] = t
        lazy = [t for t in out.values() if t.node.op is not Op.BUFFER]
        if lazy:
            realize(*lazy)
        return out

    def load_state_dict(self, values: dict[str, Any]) -> None:
        """Writes `values` (Tensors or arrays, keyed as state_dict() keys them) into this optimizer's own
        buffers in one realize(). Every key is checked first; on a mismatch nothing is written."""
        assign_values(self.state_dict(), values, True, f"{type(self).__name__}.load_state_dict")
        self._refresh()

    def _refresh(self) -> None:
        for group in self.param_groups:
            group.refresh()


def _step_together(optimizers: Sequence[Optimizer], *extra: Tensor) -> None:
    """One step of several optimizers in one realize(): each one's updates read pre-step values of
    everything, including the parameters the others update (gradients are lazy graphs that read them)."""
    with no_grad():
        updates = [u for opt in optimizers for u in opt.updates()]
    realize(*updates, *extra)
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)


class Chain:
    """Several optimizers stepped as one, e.g. Muon for the hidden matrices and AdamW for the rest. They
    must step in one realize(): stepping them one after the other would let the second read gradients
    whose graphs see parameters the first has already changed.

    >>> from limn import nn
    >>> from limn.optim import AdamW, Muon
    >>> class Model:
    ...     def __init__(self):
    ...         self.wte = nn.Embedding(10, 4)
    ...         self.hidden = nn.Linear(4, 4)
    ...         self.head = nn.Linear(4, 10)
    >>> model = Model()
    >>> named = list(nn.named_parameters(model))
    >>> hidden = [(n, p) for n, p in named if p.ndim == 2 and not n.startswith(("wte", "head"))]
    >>> rest = [(n, p) for n, p in named if n not in dict(hidden)]
    >>> [n for n, _ in hidden], [n for n, _ in rest]
    (['hidden.weight'], ['wte.weight', 'hidden.bias', 'head.weight', 'head.bias'])
    >>> opt = Chain(Muon(hidden, lr=0.02), AdamW(rest, lr=3e-4))
    >>> logits = model.head(model.hidden(model.wte(Tensor([1, 2, 3]))))
    >>> loss = logits.cross_entropy(Tensor([2, 3, 4]))
    >>> loss.backward()
    >>> before = model.hidden.weight.numpy()
    >>> opt.step(loss)  # both optimizers, and the loss, in one realize()
    >>> bool((model.hidden.weight.numpy() != before).any()), model.hidden.weight.grad is None
    (True, True)
    """

    def __init__(self, *optimizers: Optimizer) -> None:
        if not optimizers:
            raise ValueError("Chain: needs at least one optimizer")
        seen: dict[int, str] = {}
        for opt in optimizers:
            for name, p in zip(opt.names, opt.params):
                if id(p) in seen:
                    raise ValueError(f"Chain: parameter {name!r} is in two optimizers; give each to one")
                seen[id(p)] = name
        self.optimizers = list(optimizers)
        self.state_dict()  # raises now if two optimizers' keys collide

    @property
    def param_groups(self) -> list[ParamGroup]:
        """Every optimizer's groups, in order: a schedule that walks them reaches all of them."""
        return [group for opt in self.optimizers for group in opt.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none)

    def step(self, *extra: Tensor) -> None:
        _step_together(self.optimizers, *extra)

    def state_dict(self) -> dict[str, Tensor]:
        out: dict[str, Tensor] = {}
        for opt in self.optimizers:
            for key, t in opt.state_dict().items():
                if key in out:
                    raise ValueError(
                        f"Chain: two optimizers both name state {key!r}; give them different names "
                        f"(e.g. AdamW(..., name='adamw_embed'))"
                    )
                out[key] = t
        return out

    def load_state_dict(self, values: dict[str, Any]) -> None:
        assign_values(self.state_dict(), values, True, "Chain.load_state_dict")
        for opt in self.optimizers:
            opt._refresh()


# ---- helpers the optimizers share ----


def refuse_unsupported(what: str, **flags: bool) -> None:
    """torch's variants limn does not compute raise; foreach and fused (how torch runs a step, not what it
    computes) are accepted and change nothing: a limn step is always one realize."""
    asked = [name for name, on in flags.items() if on]
    if asked:
        raise NotImplementedError(f"{what}: {', '.join(asked)}=True is not implemented in limn; leave it False")


def lerp(start: Tensor, end: Tensor, weight: float) -> Tensor:
    """start + weight (end - start), from whichever end is nearer as torch's lerp computes it, so that
    the weight's complement 1 - weight is rounded as torch rounds it."""
    w = float(np.array(weight, start.dtype.np))  # torch rounds the weight to the tensor's dtype first
    if abs(w) < 0.5:
        return start + w * (end - start)
    return end - (end - start) * float(np.array(1, start.dtype.np) - np.array(w, start.dtype.np))


def mark_state(t: Tensor) -> Tensor:
    """Marks an optimizer's own tensor: a step writes it in place (limn.runtime.snapshot), since nothing outside
    the optimizer reads it, which saves the step a second block of memory per state tensor."""
    t.node.arg.in_place = True
    return t
