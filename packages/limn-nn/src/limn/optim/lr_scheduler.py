"""Learning-rate schedules as torch.optim.lr_scheduler's: its classes, arguments, errors and float results.

A scheduler takes a limn optimizer (or an optim.Chain: every member's groups are scheduled) and, at each
step(), sets every param group's "lr". That writes the group's 0-d device tensor, so a schedule builds no
graph and a captured step (limn.capture) replays with each new rate. The rates are Python floats computed
by torch's own formulas in torch's order, recursive ones included, so a sequence equals torch's bit for bit.
Pipeline: nn (loss.backward()) -> optim (ASSIGN graphs) -> **lr_scheduler** (group lr between steps) -> device.
"""

from __future__ import annotations

import copy
import math
import types
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from limn.optim.lr_base import LRScheduler, Schedulable, _checked_optimizer, _current, _per_group
from limn.optim.lr_composite import ChainedScheduler, SequentialLR
from limn.optim.lr_one_cycle import OneCycleLR

__all__ = [
    "ChainedScheduler",
    "ConstantLR",
    "CosineAnnealingLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "MultiplicativeLR",
    "OneCycleLR",
    "PolynomialLR",
    "SequentialLR",
    "StepLR",
]

# ---- rates from a function of the step ----


class _LambdaScheduler(LRScheduler):
    """LambdaLR's and MultiplicativeLR's shared part: a function per group, and torch's checkpoint of it
    (None for a plain function or lambda, the object's __dict__ for a callable object)."""

    def __init__(self, optimizer: Schedulable, lr_lambda: Any, last_epoch: int = -1) -> None:
        what = type(self).__name__
        _checked_optimizer(optimizer, what)
        self.lr_lambdas: list[Callable[[int], float]] = _per_group(lr_lambda, optimizer, "lr_lambda", what)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"{what}: lr_lambda should be a function of the step, got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict[str, Any]:
        out = copy.deepcopy({k: v for k, v in vars(self).items() if k not in ("optimizer", "lr_lambdas")})
        out["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else copy.deepcopy(vars(fn)) for fn in self.lr_lambdas
        ]
        return out

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict.get("lr_lambdas", [None] * len(self.lr_lambdas))
        super().load_state_dict({k: v for k, v in state_dict.items() if k != "lr_lambdas"})
        for fn, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                vars(fn).update(copy.deepcopy(attributes))


class LambdaLR(_LambdaScheduler):
    """lr = initial_lr * lr_lambda(step), one function for every group or one per group.

    >>> from limn import Tensor, optim
    >>> opt = optim.SGD([Tensor([1.0], requires_grad=True)], lr=0.1)
    >>> warmup = LambdaLR(opt, lambda step: min(1.0, (step + 1) / 4))
    >>> warmup.get_last_lr()
    [0.025]
    """

    def get_lr(self) -> list[float]:
        return [base_lr * fn(self.last_epoch) for fn, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaScheduler):
    """lr = lr * lr_lambda(step) at every step after the first (chainable)."""

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return _current(self.optimizer)
        return [group["lr"] * fn(self.last_epoch) for fn, group in zip(self.lr_lambdas, self.optimizer.param_groups)]


# ---- decays by a constant factor ----


class StepLR(LRScheduler):
    """lr = lr * gamma every step_size steps (chainable): initial_lr * gamma ** (step // step_size)."""

    def __init__(self, optimizer: Schedulable, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        if not step_size > 0:
            raise ValueError(f"StepLR: step_size must be a positive number of steps between decays, got {step_size}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _current(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = lr * gamma at each milestone step (chainable; a milestone listed n times decays by gamma**n)."""

    def __init__(
        self, optimizer: Schedulable, milestones: Iterable[int], gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return _current(self.optimizer)
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch] for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch) for base_lr in self.base_lrs]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        if "milestones" in state:  # json turns the Counter's int keys into strings
            state["milestones"] = Counter({int(step): n for step, n in state["milestones"].items()})
        super().load_state_dict(state)


class ConstantLR(LRScheduler):
    """lr = initial_lr * factor for the first total_iters steps, then initial_lr (chainable)."""

    def __init__(
        self, optimizer: Schedulable, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1
    ) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError(f"ConstantLR: factor must be in [0, 1] (it multiplies the lr), got {factor}")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _current(self.optimizer)
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        reached = self.last_epoch >= self.total_iters
        return [base_lr * (self.factor + reached * (1 - self.factor)) for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """The factor on initial_lr goes linearly from start_factor to end_factor over total_iters steps, then
    stays (chainable: torch's ratio of consecutive factors, so the floats are torch's)."""

    def __init__(
        self,
        optimizer: Schedulable,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _current(self.optimizer)
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span)
        return [group["lr"] * ratio for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        span = self.end_factor - self.start_factor
        done = min(self.total_iters, self.last_epoch)
        return [base_lr * (self.start_factor + span * done / self.total_iters) for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = lr * gamma at every step after the first (chainable): initial_lr * gamma ** step."""

    def __init__(self, optimizer: Schedulable, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return _current(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma**self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - step / total_iters) ** power up to total_iters, then stays (chainable)."""

    def __init__(self, optimizer: Schedulable, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial or self.last_epoch > self.total_iters:
            return _current(self.optimizer)
        now, before = 1.0 - self.last_epoch / self.total_iters, 1.0 - (self.last_epoch - 1) / self.total_iters
        decay = (now / before) ** self.power
        return [group["lr"] * decay for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        left = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base_lr * left**self.power for base_lr in self.base_lrs]


# ---- cosine ----


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from initial_lr down to eta_min over T_max steps, then back up (no restarts), by
    torch's recursion, not the closed form eta_min + (initial_lr - eta_min) (1 + cos(pi step / T_max)) / 2:

        lr(t) = eta_min + (lr(t-1) - eta_min) (1 + cos(pi t / T_max)) / (1 + cos(pi (t-1) / T_max))

    The two differ in the last bits; limn follows the recursion, so the floats are torch's.
    """

    def __init__(self, optimizer: Schedulable, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:
        if isinstance(T_max, bool) or not isinstance(T_max, (int, float)) or not T_max > 0:
            raise ValueError(
                f"CosineAnnealingLR: T_max must be a positive number of steps (the half period), got {T_max!r}; "
                "pass the run's length in scheduler steps"
            )
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups, t, period, low = self.optimizer.param_groups, self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return _current(self.optimizer)
        if self._step_count == 1 and t > 0:  # torch's: get_lr() read before the first step(), the closed form
            return [low + (base_lr - low) * (1 + math.cos(t * math.pi / period)) / 2 for base_lr in self.base_lrs]
        if (t - 1 - period) % (2 * period) == 0:  # one past the minimum: the ratio's 1 + cos(pi) would be 0
            rise = (1 - math.cos(math.pi / period)) / 2
            return [group["lr"] + (base_lr - low) * rise for base_lr, group in zip(self.base_lrs, groups)]
        ratio = (1 + math.cos(math.pi * t / period)) / (1 + math.cos(math.pi * (t - 1) / period))
        return [ratio * (group["lr"] - low) + low for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        low, cosine = self.eta_min, math.cos(math.pi * self.last_epoch / self.T_max)
        return [low + (base_lr - low) * (1 + cosine) / 2 for base_lr in self.base_lrs]
