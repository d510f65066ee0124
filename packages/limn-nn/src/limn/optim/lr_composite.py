"""Schedules of schedules, as torch's: SequentialLR (one member after another, at given milestones) and
ChainedScheduler (every member each step, their factors multiplied). limn.optim.lr_scheduler re-exports both.
Pipeline: nn (loss.backward()) -> optim (ASSIGN graphs) -> **lr_scheduler** (group lr between steps) -> device.
"""

from __future__ import annotations

import copy
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from limn.optim.lr_base import LRScheduler, Schedulable, _checked_optimizer, _current


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
    >>> from limn.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
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
