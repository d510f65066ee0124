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
import warnings
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from limn.optim.optimizer import Chain, Optimizer

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
    "OneCycleLR",  # noqa: F822 (module __getattr__ below gives it)
    "PolynomialLR",
    "SequentialLR",
    "StepLR",
]

Schedulable = Optimizer | Chain


class LRScheduler:
    """What every schedule shares, as torch's LRScheduler: `base_lrs` (each group's "initial_lr", which the
    first scheduler of an optimizer records), `last_epoch` (the steps taken; -1 before the first), `step()`,
    `get_last_lr()`, and `state_dict()` / `load_state_dict()`. A subclass writes get_lr(): the next rate
    of every group, from last_epoch and the groups' current "lr" (torch's chainable form), and may write
    _get_closed_form_lr() (the rate from base_lrs alone, used by step(epoch) and SequentialLR).

    Making a scheduler takes its first step: the groups get the rates of step 0. Call scheduler.step()
    after optimizer.step(), outside a captured step function: a replay runs no Python, so a scheduler
    stepped inside the captured function would stay at the recorded call's rate.

    Checkpoints: state_dict() is plain Python values (torch's keys; lambdas as torch keeps them), which
    json round-trips, so it goes in a limn.serialize file's metadata:

        serialize.save(path, nn.state_dict(model) | opt.state_dict(),
                       metadata={"lr_scheduler": json.dumps(scheduler.state_dict())})
        # resume: make model, opt and scheduler as before, then
        serialize.load_into(path, nn.state_dict(model) | opt.state_dict())
        scheduler.load_state_dict(json.loads(serialize.read_metadata(path)["lr_scheduler"]))

    Trap: load_state_dict also writes get_last_lr() into the groups (torch leaves that to the optimizer's
    load_state_dict; serialize.load_into writes the lr tensors but not the groups' floats, which the
    recursive schedules read), so an lr set by hand after the last scheduler.step() is not restored.

    >>> from limn import Tensor, optim
    >>> w = Tensor([1.0], requires_grad=True)
    >>> opt = optim.SGD([w], lr=0.1)
    >>> scheduler = StepLR(opt, step_size=2, gamma=0.5)
    >>> rates = []
    >>> for _ in range(5):
    ...     opt.step()
    ...     scheduler.step()
    ...     rates.append(scheduler.get_last_lr()[0])
    >>> rates, opt.param_groups[0].tensors["lr"].item()
    ([0.1, 0.05, 0.05, 0.025, 0.025], 0.025)
    """

    _is_initial = False

    def __init__(self, optimizer: Schedulable, last_epoch: int = -1) -> None:
        self.optimizer = _checked_optimizer(optimizer, type(self).__name__)
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group in groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"{type(self).__name__}(last_epoch={last_epoch}): param_groups[{i}] has no 'initial_lr', "
                        "which a scheduler resumed at last_epoch >= 0 reads. Make the scheduler with the default "
                        "last_epoch=-1 and restore it with load_state_dict(), or set group['initial_lr'] first"
                    )
        self.base_lrs: list[float] = [group["initial_lr"] for group in groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """Sets the groups' rates for the step the scheduler starts at (torch's _initial_step)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The next rate of every group; called by step() with last_epoch already advanced."""
        raise NotImplementedError(f"{type(self).__name__}: a scheduler writes get_lr()")

    def get_last_lr(self) -> list[float]:
        """The rate of every group that the last step() set."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advances the schedule one step and sets every group's lr. step(epoch) is torch's deprecated form:
        it jumps to `epoch` and uses the closed form where the schedule has one."""
        if self._step_count == 1:
            _warn_if_optimizer_has_not_stepped(self.optimizer)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(
                "scheduler.step(epoch) is deprecated (as in torch): it jumps to `epoch` with the closed form; "
                "call scheduler.step() once per step instead",
                UserWarning,
                stacklevel=2,
            )
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        self._set_lrs(values)

    def _set_lrs(self, values: Sequence[float]) -> None:
        groups = self.optimizer.param_groups
        if len(values) != len(groups):
            raise ValueError(f"{type(self).__name__}: get_lr() gave {len(values)} rates for {len(groups)} groups")
        for group, lr in zip(groups, values):
            group["lr"] = lr  # writes the group's device tensor: no graph, a captured step replays with it
        self._last_lr = [group["lr"] for group in groups]

    # ---- checkpoints ----

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer, copied: plain Python values, keyed as torch's."""
        return copy.deepcopy({key: value for key, value in vars(self).items() if key != "optimizer"})

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores state_dict() (also from its json round trip) and writes get_last_lr() into the groups."""
        self.__dict__.update(copy.deepcopy(state_dict))
        if "_last_lr" in state_dict:
            self._set_lrs(self._last_lr)


def _checked_optimizer(optimizer: Any, what: str) -> Schedulable:
    if not isinstance(optimizer, (Optimizer, Chain)):
        raise TypeError(
            f"{what}: {type(optimizer).__name__} is not a limn optimizer; give it an optim.SGD, Adam, AdamW, "
            "Muon or an optim.Chain of them (a torch optimizer takes torch.optim.lr_scheduler)"
        )
    return optimizer


def _warn_if_optimizer_has_not_stepped(optimizer: Schedulable) -> None:
    """torch's warning for the pre-1.1 loop order, from the optimizer's step count (one read, once)."""
    first = optimizer.optimizers[0] if isinstance(optimizer, Chain) else optimizer
    if first.steps.item() == 0:
        warnings.warn(
            "Detected call of `lr_scheduler.step()` before `optimizer.step()`: the schedule's first rate is "
            "skipped. Call optimizer.step() first, then lr_scheduler.step(), as torch asks since 1.1",
            UserWarning,
            stacklevel=3,
        )


def _current(optimizer: Schedulable) -> list[float]:
    return [group["lr"] for group in optimizer.param_groups]


def _per_group(value: Any, optimizer: Schedulable, name: str, what: str) -> list[Any]:
    """One value per param group: a list or tuple of exactly that many, or one value for every group."""
    count = len(optimizer.param_groups)
    if not isinstance(value, (list, tuple)):
        return [value] * count
    if len(value) != count:
        raise ValueError(
            f"{what}: got {len(value)} {name} values for {count} param groups; give one value, or one per group"
        )
    return list(value)


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


# ---- schedules of schedules ----


def _check_members(what: str, optimizer: Schedulable, schedulers: Sequence[LRScheduler]) -> None:
    if len(schedulers) < 1:
        raise ValueError(f"{what}: expects at least one scheduler, got none")
    for i, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{what}: schedulers[{i}] ({type(scheduler).__name__}) has no `optimizer`; is it one?")
        if scheduler.optimizer is not optimizer:
            raise ValueError(
                f"{what}: schedulers[{i}] ({type(scheduler).__name__}) schedules another optimizer than the "
                f"{type(optimizer).__name__} given; make every scheduler on the same optimizer"
            )


class SequentialLR(LRScheduler):
    """One scheduler after another: schedulers[i] runs from milestones[i - 1] on, restarted there at its
    step 0 (its closed form where it has one, as torch). Warmup then cosine decay:

    >>> from limn import Tensor, optim
    >>> opt = optim.AdamW([Tensor([1.0], requires_grad=True)], lr=1e-3)
    >>> warmup = LinearLR(opt, start_factor=0.25, total_iters=3)
    >>> decay = CosineAnnealingLR(opt, T_max=4)
    >>> scheduler = SequentialLR(opt, [warmup, decay], milestones=[3])
    >>> rates = [scheduler.get_last_lr()[0]]
    >>> for _ in range(6):
    ...     opt.step()
    ...     scheduler.step()
    ...     rates.append(round(scheduler.get_last_lr()[0], 8))
    >>> rates
    [0.00025, 0.0005, 0.00075, 0.001, 0.00085355, 0.0005, 0.00014645]
    """

    def __init__(
        self, optimizer: Schedulable, schedulers: list[LRScheduler], milestones: list[int], last_epoch: int = -1
    ) -> None:
        _checked_optimizer(optimizer, "SequentialLR")
        _check_members("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                f"SequentialLR: {len(schedulers)} schedulers need {len(schedulers) - 1} milestones (the steps where "
                f"each next one takes over), got {len(milestones)}: {list(milestones)}"
            )
        if any(b < a for a, b in zip([0, *milestones], milestones)):  # bisect would pick the wrong scheduler
            raise ValueError(f"SequentialLR: milestones must be steps >= 0 in increasing order, got {list(milestones)}")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:  # the members' first steps set the rates: undo them
            group["lr"] = group["initial_lr"]
        _undo_first_steps(self)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:  # type: ignore[override]
        self.last_epoch += 1
        index = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler._update_lr(0)  # the next scheduler starts at its step 0
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        return _with_members(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _load_with_members(self, state_dict)


def _undo_first_steps(scheduler: Any) -> None:
    """torch's recursive_undo: every scheduler inside `scheduler` goes back one step."""
    if hasattr(scheduler, "_schedulers"):
        for member in scheduler._schedulers:
            _undo_first_steps(member)
    elif hasattr(scheduler, "last_epoch"):
        scheduler.last_epoch -= 1


class ChainedScheduler(LRScheduler):
    """Several chainable schedulers stepped together, each scaling the rate the one before it set (say
    ConstantLR and ExponentialLR at once)."""

    def __init__(self, schedulers: Sequence[LRScheduler], optimizer: Schedulable | None = None) -> None:
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler: expects at least one scheduler to chain, got none")
        optimizer = optimizer or schedulers[0].optimizer
        _checked_optimizer(optimizer, "ChainedScheduler")
        _check_members("ChainedScheduler", optimizer, schedulers)
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = _current(self._schedulers[-1].optimizer)

    def step(self) -> None:  # type: ignore[override]
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _current(self._schedulers[-1].optimizer)

    def state_dict(self) -> dict[str, Any]:
        return _with_members(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        _load_with_members(self, state_dict)


def _with_members(scheduler: SequentialLR | ChainedScheduler) -> dict[str, Any]:
    own = {k: v for k, v in vars(scheduler).items() if k not in ("optimizer", "_schedulers")}
    return copy.deepcopy(own) | {"_schedulers": [member.state_dict() for member in scheduler._schedulers]}


def _load_with_members(scheduler: SequentialLR | ChainedScheduler, state_dict: dict[str, Any]) -> None:
    for member, state in zip(scheduler._schedulers, state_dict["_schedulers"]):
        member.load_state_dict(state)
    own = {k: v for k, v in state_dict.items() if k != "_schedulers"}
    LRScheduler.load_state_dict(scheduler, own)  # last: the groups get this scheduler's rates


def __getattr__(name: str) -> Any:
    """OneCycleLR lives in limn.optim.lr_one_cycle, which subclasses LRScheduler: it is imported when first asked
    for, so either module can be imported first."""
    if name == "OneCycleLR":
        from limn.optim.lr_one_cycle import OneCycleLR

        return OneCycleLR
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
