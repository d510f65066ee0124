"""What every learning-rate schedule shares: LRScheduler (torch's base class: base_lrs, last_epoch, step(),
get_last_lr(), state_dict()) and the checks on the optimizer it schedules. The schedules themselves are
limn.optim.lr_scheduler's, torch's public module, which gathers them all.
Pipeline: nn (loss.backward()) -> optim (ASSIGN graphs) -> **lr_scheduler** (group lr between steps) -> device.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence
from typing import Any

from limn.optim.optimizer import Chain, Optimizer

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
    >>> from limn.optim.lr_scheduler import StepLR
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
