"""Optimizers: SGD, Adam, AdamW and Muon, each step one batch of ASSIGNs realized together.

An optimizer holds parameters (Tensors, (name, Tensor) pairs from nn.named_parameters, or torch's list of
group dicts, see limn.param_groups) and their state as realized device tensors. step(*extra) builds every
update as an assign into the parameter's and the state's own buffers and realizes them all, with `extra`,
in one limn.realize(): every update reads the values from before the step, and a logged loss shares the
forward pass with the gradients. What a step changes (the step count, AdamW's beta**t) and what a schedule
changes (each group's lr and weight_decay) are 0-d device tensors, so a new learning rate changes no graph
and a compiled device replays the plan it has.
Pipeline: nn (model, loss.backward()) -> **optim** (ASSIGN graphs) -> realize -> schedule -> device.
"""

from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from limn import dtypes
from limn.autograd import no_grad
from limn.dtypes import DType
from limn.ops import Op
from limn.param_groups import LIVE, ParamGroup, Params, split_groups
from limn.tensor import Tensor, realize
from limn.walk import assign_values

__all__ = [
    "NS_COEFFICIENTS",
    "SGD",
    "Adam",
    "AdamW",
    "Chain",
    "Muon",
    "Optimizer",
    "ParamGroup",
    "lr_scheduler",
    "newton_schulz",
]


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
        return _state(Tensor(np.array(value, dtype.np), device=self.device))

    def _zeros_like(self, p: Tensor) -> Tensor:
        return _state(Tensor(np.zeros(p.shape, p.dtype.np), device=p.device))

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


# ---- SGD ----


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay, as
    torch.optim.SGD computes it:

        g = grad + weight_decay * p
        buf = g on the first step, else momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf          (when momentum != 0)
        p = p - lr * g

    Each parameter group may set any of these (see limn.param_groups); lr and weight_decay can change
    between steps (opt.lr = ..., or param_groups[i]["lr"] = ...), the others are fixed.
    "The first step" is the optimizer's first, for every parameter (torch counts a parameter's first step
    with a gradient, which differs only with dampening, for a parameter that had no gradient at first).
    """

    kind = "sgd"

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        name: str | None = None,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        _unsupported("SGD", maximize=maximize)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults, name)
        for group in self.param_groups:
            if group["momentum"]:
                for name, p in zip(group.names, group.params):
                    self.state[name]["momentum_buffer"] = self._zeros_like(p)

    def _check(self, hyper: dict[str, Any]) -> None:
        lr, momentum, weight_decay = hyper["lr"], hyper["momentum"], hyper["weight_decay"]
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr ({lr}), momentum ({momentum}) and weight_decay ({weight_decay}) must be >= 0")
        if hyper["nesterov"] and (momentum <= 0 or hyper["dampening"] != 0):
            raise ValueError("SGD: nesterov momentum needs momentum > 0 and dampening = 0 (as torch)")

    def updates(self) -> list[Tensor]:
        out = []
        first = self.steps.eq(0)
        for group in self.param_groups:
            lr, weight_decay = group.tensors["lr"], group.tensors["weight_decay"]
            momentum, dampening = group["momentum"], group["dampening"]
            for name, p, g in self._with_grads(group):
                c = p.dtype.compute
                x, g = p.cast(c), g.cast(c)
                g = g + weight_decay.cast(c) * x
                if momentum:
                    buf = self.state[name]["momentum_buffer"]
                    new_buf = first.where(g, momentum * buf.cast(c) + (1 - dampening) * g)
                    g = g + momentum * new_buf if group["nesterov"] else new_buf
                    out.append(buf.assign(new_buf))
                out.append(p.assign(x - lr.cast(c) * g))
        out.append(self._count_step())
        return out


# ---- AdamW ----


class AdamW(Optimizer):
    """Adam with decoupled weight decay, as torch.optim.AdamW (amsgrad off) computes it:

        p = p * (1 - lr * weight_decay)
        m = lerp(m, g, 1 - beta1);   v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    beta1**t and beta2**t are float64 device tensors multiplied by beta each step (1 - beta2**t loses
    digits in float32 early on), so a resumed run bias-corrects where it left off; each parameter group
    keeps its own (groups may set their own betas). One beta**t serves every parameter of a group: torch
    counts steps per parameter, which differs only for a parameter that goes without a gradient in some step.
    """

    kind = "adamw"
    decoupled = True  # weight decay shrinks the parameter (AdamW); False adds weight_decay * p to the gradient (Adam)

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        name: str | None = None,
        *,
        amsgrad: bool = False,
        maximize: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        _unsupported("AdamW", amsgrad=amsgrad, maximize=maximize)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay), name)
        for name, p in zip(self.names, self.params):
            self.state[name]["exp_avg"] = self._zeros_like(p)
            self.state[name]["exp_avg_sq"] = self._zeros_like(p)

    def _check(self, hyper: dict[str, Any]) -> None:
        lr, betas, eps, weight_decay = hyper["lr"], tuple(hyper["betas"]), hyper["eps"], hyper["weight_decay"]
        if lr < 0 or eps < 0 or weight_decay < 0 or len(betas) != 2 or not all(0 <= b < 1 for b in betas):
            raise ValueError(
                f"AdamW: needs lr, eps, weight_decay >= 0 and betas in [0, 1); got lr={lr}, "
                f"eps={eps}, weight_decay={weight_decay}, betas={betas}"
            )

    def _group_scalars(self, hyper: dict[str, Any]) -> dict[str, Tensor]:
        return {"beta1_power": self._scalar(1.0), "beta2_power": self._scalar(1.0)}

    @property
    def beta1_power(self) -> Tensor:
        """The first group's beta1**t (each group keeps its own in param_groups[i].tensors)."""
        return self.param_groups[0].tensors["beta1_power"]

    @property
    def beta2_power(self) -> Tensor:
        return self.param_groups[0].tensors["beta2_power"]

    def updates(self) -> list[Tensor]:
        out = [self._count_step()]
        for group in self.param_groups:
            out += self._group_updates(group)
        return out

    def _group_updates(self, group: ParamGroup) -> list[Tensor]:
        beta1, beta2 = group["betas"]
        lr, weight_decay = group.tensors["lr"], group.tensors["weight_decay"]
        power1_before, power2_before = group.tensors["beta1_power"], group.tensors["beta2_power"]
        power1, power2 = power1_before * beta1, power2_before * beta2  # beta**t, t counting this step
        step_size = lr / (1 - power1)  # float64, as torch's python floats
        correction2 = (1 - power2).sqrt()
        decay = 1 - lr * weight_decay
        out = [power1_before.assign(power1), power2_before.assign(power2)]
        for name, p, g in self._with_grads(group):
            c = p.dtype.compute
            m, v = self.state[name]["exp_avg"], self.state[name]["exp_avg_sq"]
            g, x = g.cast(c), p.cast(c)
            if self.decoupled:
                x = x * decay.cast(c)
            else:
                g = g + weight_decay.cast(c) * x  # Adam's L2 decay: the gradient of weight_decay / 2 * |p|^2
            new_m = _lerp(m.cast(c), g, 1 - beta1)
            new_v = v.cast(c) * beta2 + (1 - beta2) * g * g
            denom = new_v.sqrt() / correction2.cast(c) + group["eps"]
            out += [m.assign(new_m), v.assign(new_v), p.assign(x - step_size.cast(c) * new_m / denom)]
        return out


class Adam(AdamW):
    """Adam, as torch.optim.Adam (amsgrad off) computes it: AdamW's step with L2 weight decay, the gradient
    g = grad + weight_decay * p feeding both moments, in place of the decoupled p = p * (1 - lr * weight_decay)
    (decoupled_weight_decay=True, as torch's, is AdamW). weight_decay defaults to 0, as torch's.

    >>> w = Tensor([1.0, -2.0], requires_grad=True)
    >>> opt = Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> [round(v, 4) for v in w.tolist()]  # the first step moves each entry by lr against its gradient's sign
    [0.9, -1.9]
    """

    kind = "adam"

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        name: str | None = None,
        *,
        decoupled_weight_decay: bool = False,
        amsgrad: bool = False,
        maximize: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        _unsupported("Adam", amsgrad=amsgrad, maximize=maximize)
        self.decoupled = decoupled_weight_decay
        super().__init__(params, lr, betas, eps, weight_decay, name)


# ---- Muon ----

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # Keller Jordan's quintic, as torch.optim.Muon
ADJUST_LR_FNS = (None, "original", "match_rms_adamw", "spectral_unclamped")


class Muon(Optimizer):
    """Momentum orthogonalized by Newton-Schulz, for 2D parameters, as torch.optim.Muon computes it:

        buf = lerp(buf, g, 1 - momentum);   u = lerp(g, buf, momentum) if nesterov else buf
        o = NS(u)            5 quintic Newton-Schulz steps in bfloat16, ~ the nearest orthogonal matrix
        p = p * (1 - lr * weight_decay) - lr * sqrt(max(1, rows / cols)) * o

    Muon is defined on matrices only: route a model's hidden 2D weights here and everything else (biases,
    norms, and by convention the embedding and the output head) to AdamW, and step both together with
    Chain(Muon(...), AdamW(...)). adjust_lr_fn picks torch's lr scaling: None/'original' (above),
    'match_rms_adamw' (0.2 sqrt(max(rows, cols))) or 'spectral_unclamped' (sqrt(rows / cols)). ns_dtype is
    the dtype the iteration rounds to (torch's is bfloat16). Each parameter group may set any of these;
    lr and weight_decay can change between steps.
    """

    kind = "muon"

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
        eps: float = 1e-7,
        ns_steps: int = 5,
        adjust_lr_fn: str | None = None,
        ns_dtype: DType = dtypes.bfloat16,
        name: str | None = None,
    ) -> None:
        defaults = dict(
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            nesterov=nesterov,
            ns_coefficients=tuple(ns_coefficients),
            eps=eps,
            ns_steps=ns_steps,
            adjust_lr_fn=adjust_lr_fn,
            ns_dtype=ns_dtype,
        )
        super().__init__(params, defaults, name)
        for name, p in zip(self.names, self.params):
            if p.ndim != 2:
                raise ValueError(
                    f"Muon: parameter {name!r} has shape {p.shape}; Muon updates 2D matrices only. Give "
                    "biases, norms and other non-2D parameters to AdamW and step both with Chain(muon, adamw)"
                )
            self.state[name]["momentum_buffer"] = self._zeros_like(p)

    def _check(self, hyper: dict[str, Any]) -> None:
        lr, momentum, weight_decay = hyper["lr"], hyper["momentum"], hyper["weight_decay"]
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"Muon: lr ({lr}), momentum ({momentum}) and weight_decay ({weight_decay}) must be >= 0")
        if hyper["adjust_lr_fn"] not in ADJUST_LR_FNS:
            raise ValueError(
                f"Muon: adjust_lr_fn {hyper['adjust_lr_fn']!r} is not one of 'original', 'match_rms_adamw', "
                "'spectral_unclamped'"
            )
        if len(hyper["ns_coefficients"]) != 3 or not 0 <= hyper["ns_steps"] < 100:
            raise ValueError("Muon: ns_coefficients must be three floats and ns_steps in [0, 100)")

    def updates(self) -> list[Tensor]:
        out = [self._count_step()]
        for group in self.param_groups:
            lr, momentum = group.tensors["lr"], group["momentum"]
            decay = 1 - lr * group.tensors["weight_decay"]
            ns = (group["ns_coefficients"], group["ns_steps"], group["eps"], group["ns_dtype"])
            for name, p, g in self._with_grads(group):
                c = p.dtype.compute
                buf = self.state[name]["momentum_buffer"]
                g = g.cast(c)
                new_buf = _lerp(buf.cast(c), g, 1 - momentum)
                u = _lerp(g, new_buf, momentum) if group["nesterov"] else new_buf
                o = newton_schulz(u, *ns)
                scaled = lr * _lr_ratio(group["adjust_lr_fn"], p.shape)
                out += [buf.assign(new_buf), p.assign(p.cast(c) * decay.cast(c) - scaled.cast(c) * o.cast(c))]
        return out


def newton_schulz(g: Tensor, coefficients: Sequence[float], steps: int, eps: float, dtype: DType) -> Tensor:
    """The zeroth power (U V^T, roughly) of a matrix by the quintic Newton-Schulz iteration of
    torch.optim.Muon, rounding to `dtype` where torch rounds to bfloat16 (arithmetic runs in float32):

        X = G / max(|G|_F, eps)                      (transposed first when tall, so X X^T is the small Gram)
        X = a X + (b A + c A A) X,  A = X X^T        `steps` times

    The iteration pushes every singular value towards ~1 (into about [0.7, 1.2], not exactly 1)."""
    a, b, c = coefficients
    wide = dtype.compute
    x = g.cast(dtype)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T  # (m, n) -> (n, m): rows <= columns
    xw = x.cast(wide)
    norm = xw.square().sum().sqrt().cast(dtype).clip(lo=eps)  # torch: the norm is a bfloat16 value
    x = (xw / norm.cast(wide)).cast(dtype)
    for _ in range(steps):
        xw = x.cast(wide)
        gram = (xw @ xw.T).cast(dtype)  # A = X X^T: (rows, rows)
        gw = gram.cast(wide)
        poly = (b * gw + c * (gw @ gw)).cast(dtype)  # torch's addmm(A, A, A, beta=b, alpha=c): rounded once
        x = (a * xw + poly.cast(wide) @ xw).cast(dtype)  # addmm(X, B, X, beta=a)
    return x.T if tall else x


def _lr_ratio(adjust_lr_fn: str | None, shape: tuple[int, ...]) -> float:
    """torch.optim.Muon's learning-rate scale for a (rows, cols) matrix."""
    rows, cols = shape[:2]
    if adjust_lr_fn in (None, "original"):
        return math.sqrt(max(1.0, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return math.sqrt(rows / cols)  # spectral_unclamped


# ---- helpers ----


def _unsupported(what: str, **flags: bool) -> None:
    """torch's variants limn does not compute raise; foreach and fused (how torch runs a step, not what it
    computes) are accepted and change nothing: a limn step is always one realize."""
    asked = [name for name, on in flags.items() if on]
    if asked:
        raise NotImplementedError(f"{what}: {', '.join(asked)}=True is not implemented in limn; leave it False")


def _lerp(start: Tensor, end: Tensor, weight: float) -> Tensor:
    """start + weight (end - start), from whichever end is nearer as torch's lerp computes it, so that
    the weight's complement 1 - weight is rounded as torch rounds it."""
    w = float(np.array(weight, start.dtype.np))  # torch rounds the weight to the tensor's dtype first
    if abs(w) < 0.5:
        return start + w * (end - start)
    return end - (end - start) * float(np.array(1, start.dtype.np) - np.array(w, start.dtype.np))


def _state(t: Tensor) -> Tensor:
    """Marks an optimizer's own tensor: a step writes it in place (limn.snapshot), since nothing outside
    the optimizer reads it, which saves the step a second block of memory per state tensor."""
    t.node.arg.in_place = True
    return t


# torch.optim.lr_scheduler's place: limn.optim.lr_scheduler, and `from limn.optim.lr_scheduler import StepLR`.
# Imported last: lr_scheduler imports Optimizer and Chain from this module, which exist by now.
from limn import lr_scheduler  # noqa: E402

sys.modules[f"{__name__}.lr_scheduler"] = lr_scheduler
