"""Optimizers: SGD, AdamW and Muon, each step one batch of ASSIGNs realized together.

An optimizer holds parameters (Tensors, or (name, Tensor) pairs from nn.named_parameters) and their state
as realized device tensors. step(*extra) builds every update as an assign into the parameter's and the
state's own buffers and realizes them all, with `extra`, in one limn.realize(): every update reads the
values from before the step, and a logged loss shares the forward pass with the gradients. What a step
changes (the step count, AdamW's beta**t) and what a schedule changes (lr, weight_decay) are 0-d device
tensors, so a new learning rate changes no graph and a compiled device replays the plan it has.
Pipeline: nn (model, loss.backward()) -> **optim** (ASSIGN graphs) -> realize -> schedule -> device.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from limn import dtypes
from limn.autograd import no_grad
from limn.device import get_device
from limn.dtypes import DType
from limn.nn import assign_values
from limn.ops import Op
from limn.tensor import Tensor, realize

__all__ = ["NS_COEFFICIENTS", "SGD", "AdamW", "Chain", "Muon", "Optimizer", "newton_schulz"]

Params = Iterable[Tensor] | Iterable[tuple[str, Tensor]] | dict[str, Tensor]


class Optimizer(ABC):
    """What every optimizer shares: the parameters, their per-parameter state, the step count and the two
    hyperparameters a schedule changes (lr and weight_decay), plus step / zero_grad / state_dict.

    A subclass writes `updates()`: the step as lazy tensors carrying assigns, nothing realized.
    """

    kind = "optimizer"  # the default name: the prefix of this optimizer's own keys in state_dict()

    def __init__(self, params: Params, lr: float, weight_decay: float, name: str | None = None) -> None:
        self.names, self.params = _named(params, type(self).__name__)
        self.device = self.params[0].device
        self.name = name or self.kind
        self._lr = self._scalar(lr)
        self._weight_decay = self._scalar(weight_decay)
        self.steps = self._scalar(0, dtypes.int32)
        self.state: dict[str, dict[str, Tensor]] = {name: {} for name in self.names}

    def _scalar(self, value: float, dtype: DType = dtypes.float64) -> Tensor:
        """A realized 0-d tensor: hyperparameters and step scalars are float64, as torch's python floats."""
        return _state(Tensor(np.array(value, dtype.np), device=self.device))

    def _zeros_like(self, p: Tensor) -> Tensor:
        return _state(Tensor(np.zeros(p.shape, p.dtype.np), device=p.device))

    # ---- hyperparameters a schedule may change: written into their buffers, no graph is built ----

    @property
    def lr(self) -> float:
        return float(self._lr.item())

    @lr.setter
    def lr(self, value: float) -> None:
        _write(self._lr, value)

    @property
    def weight_decay(self) -> float:
        return float(self._weight_decay.item())

    @weight_decay.setter
    def weight_decay(self, value: float) -> None:
        _write(self._weight_decay, value)

    # ---- stepping ----

    def zero_grad(self) -> None:
        """Forgets every parameter's gradient (sets .grad to None, as torch's default)."""
        for p in self.params:
            p.grad = None

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

    def _with_grads(self) -> Iterator[tuple[str, Tensor, Tensor]]:
        """(name, parameter, gradient) for each parameter that has a gradient; the others stay as they are."""
        for name, p in zip(self.names, self.params):
            if p.grad is not None:
                yield name, p, p.grad

    def _count_step(self) -> Tensor:
        return self.steps.assign(self.steps + 1)

    # ---- checkpoints ----

    def state_dict(self) -> dict[str, Tensor]:
        """Everything a resumed run needs, as the optimizer's own realized tensors (not copies):
        per-parameter state under `{parameter path}.{state}` (`layers.0.weight.exp_avg`; the path is the
        parameter's index when it was given without names), and this optimizer's scalars under
        `{name}.{scalar}` (`adamw.step`, `adamw.lr`, `adamw.beta1_power`). limn.serialize.save writes it
        beside the model's parameters in one file; load_state_dict or serialize.load_into reads it back."""
        out: dict[str, Tensor] = {}
        for name, entries in self.state.items():
            for key, t in entries.items():
                out[f"{name}.{key}"] = t
        for key, t in self._scalars().items():
            out[f"{self.name}.{key}"] = t
        lazy = [t for t in out.values() if t.node.op is not Op.BUFFER]
        if lazy:
            realize(*lazy)
        return out

    def _scalars(self) -> dict[str, Tensor]:
        return {"step": self.steps, "lr": self._lr, "weight_decay": self._weight_decay}

    def load_state_dict(self, values: dict[str, Any]) -> None:
        """Writes `values` (Tensors or arrays, keyed as state_dict() keys them) into this optimizer's own
        buffers in one realize(). Every key is checked first; on a mismatch nothing is written."""
        assign_values(self.state_dict(), values, True, f"{type(self).__name__}.load_state_dict")


def _step_together(optimizers: Sequence[Optimizer], *extra: Tensor) -> None:
    """One step of several optimizers in one realize(): each one's updates read pre-step values of
    everything, including the parameters the others update (gradients are lazy graphs that read them)."""
    with no_grad():
        updates = [u for opt in optimizers for u in opt.updates()]
    realize(*updates, *extra)
    for opt in optimizers:
        opt.zero_grad()


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

    def zero_grad(self) -> None:
        for opt in self.optimizers:
            opt.zero_grad()

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


# ---- SGD ----


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay, as
    torch.optim.SGD computes it:

        g = grad + weight_decay * p
        buf = g on the first step, else momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf          (when momentum != 0)
        p = p - lr * g

    lr and weight_decay can change between steps (opt.lr = ...); momentum, dampening and nesterov are fixed.
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
    ) -> None:
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr ({lr}), momentum ({momentum}) and weight_decay ({weight_decay}) must be >= 0")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov momentum needs momentum > 0 and dampening = 0 (as torch)")
        super().__init__(params, lr, weight_decay, name)
        self.momentum, self.dampening, self.nesterov = momentum, dampening, nesterov
        if momentum:
            for name, p in zip(self.names, self.params):
                self.state[name]["momentum_buffer"] = self._zeros_like(p)

    def updates(self) -> list[Tensor]:
        out = []
        first = self.steps.eq(0)
        for name, p, g in self._with_grads():
            c = p.dtype.compute
            x, g = p.cast(c), g.cast(c)
            g = g + self._weight_decay.cast(c) * x
            if self.momentum:
                buf = self.state[name]["momentum_buffer"]
                new_buf = first.where(g, self.momentum * buf.cast(c) + (1 - self.dampening) * g)
                g = g + self.momentum * new_buf if self.nesterov else new_buf
                out.append(buf.assign(new_buf))
            out.append(p.assign(x - self._lr.cast(c) * g))
        out.append(self._count_step())
        return out


# ---- AdamW ----


class AdamW(Optimizer):
    """Adam with decoupled weight decay, as torch.optim.AdamW (amsgrad off) computes it:

        p = p * (1 - lr * weight_decay)
        m = lerp(m, g, 1 - beta1);   v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    beta1**t and beta2**t are float64 device tensors multiplied by beta each step (1 - beta2**t loses
    digits in float32 early on), so a resumed run bias-corrects where it left off. One beta**t serves
    every parameter: torch counts steps per parameter, which differs only for a parameter that goes
    without a gradient in some step.
    """

    kind = "adamw"

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        name: str | None = None,
    ) -> None:
        if lr < 0 or eps < 0 or weight_decay < 0 or not all(0 <= b < 1 for b in betas):
            raise ValueError(
                f"AdamW: needs lr, eps, weight_decay >= 0 and betas in [0, 1); got lr={lr}, "
                f"eps={eps}, weight_decay={weight_decay}, betas={betas}"
            )
        super().__init__(params, lr, weight_decay, name)
        self.betas, self.eps = tuple(betas), eps
        self.beta1_power, self.beta2_power = self._scalar(1.0), self._scalar(1.0)
        for name, p in zip(self.names, self.params):
            self.state[name]["exp_avg"] = self._zeros_like(p)
            self.state[name]["exp_avg_sq"] = self._zeros_like(p)

    def _scalars(self) -> dict[str, Tensor]:
        return super()._scalars() | {"beta1_power": self.beta1_power, "beta2_power": self.beta2_power}

    def updates(self) -> list[Tensor]:
        beta1, beta2 = self.betas
        power1, power2 = self.beta1_power * beta1, self.beta2_power * beta2  # beta**t, t counting this step
        step_size = self._lr / (1 - power1)  # float64, as torch's python floats
        correction2 = (1 - power2).sqrt()
        decay = 1 - self._lr * self._weight_decay
        out = [self.beta1_power.assign(power1), self.beta2_power.assign(power2), self._count_step()]
        for name, p, g in self._with_grads():
            c = p.dtype.compute
            m, v = self.state[name]["exp_avg"], self.state[name]["exp_avg_sq"]
            g = g.cast(c)
            x = p.cast(c) * decay.cast(c)
            new_m = _lerp(m.cast(c), g, 1 - beta1)
            new_v = v.cast(c) * beta2 + (1 - beta2) * g * g
            denom = new_v.sqrt() / correction2.cast(c) + self.eps
            out += [m.assign(new_m), v.assign(new_v), p.assign(x - step_size.cast(c) * new_m / denom)]
        return out


# ---- Muon ----

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # Keller Jordan's quintic, as torch.optim.Muon


class Muon(Optimizer):
    """Momentum orthogonalized by Newton-Schulz, for 2D parameters, as torch.optim.Muon computes it:

        buf = lerp(buf, g, 1 - momentum);   u = lerp(g, buf, momentum) if nesterov else buf
        o = NS(u)            5 quintic Newton-Schulz steps in bfloat16, ~ the nearest orthogonal matrix
        p = p * (1 - lr * weight_decay) - lr * sqrt(max(1, rows / cols)) * o

    Muon is defined on matrices only: route a model's hidden 2D weights here and everything else (biases,
    norms, and by convention the embedding and the output head) to AdamW, and step both together with
    Chain(Muon(...), AdamW(...)). adjust_lr_fn picks torch's lr scaling: None/'original' (above),
    'match_rms_adamw' (0.2 sqrt(max(rows, cols))) or 'spectral_unclamped' (sqrt(rows / cols)). ns_dtype is
    the dtype the iteration rounds to (torch's is bfloat16); lr and weight_decay can change between steps.
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
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"Muon: lr ({lr}), momentum ({momentum}) and weight_decay ({weight_decay}) must be >= 0")
        if adjust_lr_fn not in (None, "original", "match_rms_adamw", "spectral_unclamped"):
            raise ValueError(
                f"Muon: adjust_lr_fn {adjust_lr_fn!r} is not one of 'original', 'match_rms_adamw', 'spectral_unclamped'"
            )
        if len(ns_coefficients) != 3 or not 0 <= ns_steps < 100:
            raise ValueError("Muon: ns_coefficients must be three floats and ns_steps in [0, 100)")
        super().__init__(params, lr, weight_decay, name)
        for name, p in zip(self.names, self.params):
            if p.ndim != 2:
                raise ValueError(
                    f"Muon: parameter {name!r} has shape {p.shape}; Muon updates 2D matrices only. Give "
                    "biases, norms and other non-2D parameters to AdamW and step both with Chain(muon, adamw)"
                )
            self.state[name]["momentum_buffer"] = self._zeros_like(p)
        self.momentum, self.nesterov = momentum, nesterov
        self.ns_coefficients, self.ns_steps, self.eps = tuple(ns_coefficients), ns_steps, eps
        self.adjust_lr_fn, self.ns_dtype = adjust_lr_fn, ns_dtype

    def updates(self) -> list[Tensor]:
        out = [self._count_step()]
        decay = 1 - self._lr * self._weight_decay
        for name, p, g in self._with_grads():
            c = p.dtype.compute
            buf = self.state[name]["momentum_buffer"]
            g = g.cast(c)
            new_buf = _lerp(buf.cast(c), g, 1 - self.momentum)
            u = _lerp(g, new_buf, self.momentum) if self.nesterov else new_buf
            o = newton_schulz(u, self.ns_coefficients, self.ns_steps, self.eps, self.ns_dtype)
            lr = self._lr * _lr_ratio(self.adjust_lr_fn, p.shape)
            out += [buf.assign(new_buf), p.assign(p.cast(c) * decay.cast(c) - lr.cast(c) * o.cast(c))]
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


def _write(t: Tensor, value: float) -> None:
    """Overwrites a realized 0-d tensor's buffer from the host through the device's copyin: no graph
    runs, so no plan is built, and every graph that reads the tensor sees the new value."""
    buf = t.node.arg
    assert t.node.op is Op.BUFFER, "optimizer scalars stay realized"
    get_device(buf.device).copyin(buf.handle, np.array(value, buf.dtype.np))


def _named(params: Params, what: str) -> tuple[list[str], list[Tensor]]:
    """Names and tensors from a list of Tensors (named by index), of (name, Tensor) pairs, or a dict."""
    items = list(params.items()) if isinstance(params, dict) else list(params)
    if not items:
        raise ValueError(f"{what}: got no parameters to optimize")
    if all(isinstance(i, Tensor) for i in items):
        items = [(str(k), t) for k, t in enumerate(items)]
    elif not all(isinstance(i, tuple) and len(i) == 2 and isinstance(i[1], Tensor) for i in items):
        raise TypeError(f"{what}: params must be Tensors or (name, Tensor) pairs, as nn.named_parameters gives")
    names, tensors = [n for n, _ in items], [t for _, t in items]
    seen: set[int] = set()
    for name, t in items:
        if not t.requires_grad or not t.dtype.is_float:
            raise ValueError(f"{what}: parameter {name!r} ({t.dtype.name}{list(t.shape)}) does not require grad")
        if id(t) in seen:
            raise ValueError(f"{what}: parameter {name!r} is listed twice")
        seen.add(id(t))
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: parameter names repeat: {sorted(n for n in set(names) if names.count(n) > 1)}")
    lazy = [t for t in tensors if t.node.op is not Op.BUFFER]
    if lazy:
        realize(*lazy)
    return names, tensors
