"""The 1cycle learning-rate policy (torch.optim.lr_scheduler.OneCycleLR), on limn.optim.lr_base's LRScheduler.

Up from max_lr / div_factor to max_lr, then down past the start (three phases, or two), by cosine or linear
annealing, with torch's phase boundaries and float results. limn.optim.lr_scheduler re-exports it, so
`limn.optim.lr_scheduler.OneCycleLR` is the name a port uses.
Pipeline: nn (loss.backward()) -> optim (ASSIGN graphs) -> **lr_scheduler** (group lr between steps) -> device.
"""

from __future__ import annotations

import math
from typing import Any

from limn.optim.lr_base import LRScheduler, Schedulable, _checked_optimizer, _per_group

__all__ = ["OneCycleLR"]


class OneCycleLR(LRScheduler):
    """The 1cycle policy: from max_lr / div_factor up to max_lr over pct_start of total_steps, then down to
    initial_lr / final_div_factor (three_phase: back to initial_lr first), by cosine or linear annealing.
    It sets each group's "initial_lr", "max_lr" and "min_lr", as torch's.

    Trap: torch's default cycle_momentum=True also cycles momentum or beta1, which in limn are constants of
    the step's graph (only lr and weight_decay live on the device); it raises, so pass cycle_momentum=False.
    """

    def __init__(
        self,
        optimizer: Schedulable,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        _checked_optimizer(optimizer, "OneCycleLR")
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        self._schedule_phases = _phases(pct_start, self.total_steps, three_phase)
        if not isinstance(pct_start, float) or pct_start < 0 or pct_start > 1:
            raise ValueError(f"OneCycleLR: pct_start must be a float in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group(max_lr, optimizer, "max_lr", "OneCycleLR")
        if cycle_momentum:
            raise NotImplementedError(
                "OneCycleLR: cycle_momentum=True (torch's default) cycles each group's momentum or beta1, which "
                "limn's optimizers hold as constants of the step's graph; pass cycle_momentum=False"
            )
        self.cycle_momentum = False
        if last_epoch == -1:
            for lr, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"OneCycleLR: tried to step {step} times; the cycle is total_steps={self.total_steps} steps. "
                "Make it with the run's number of scheduler steps"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    break
                start = end
        return lrs


def _total_steps(total_steps: int | None, epochs: int | None, steps_per_epoch: int | None) -> int:
    if total_steps is not None:
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"OneCycleLR: total_steps must be a positive int, got {total_steps!r}")
        return total_steps
    if epochs is not None and steps_per_epoch is not None:
        for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"OneCycleLR: {name} must be a positive int, got {value!r}")
        return epochs * steps_per_epoch
    raise ValueError("OneCycleLR: give total_steps, or both epochs and steps_per_epoch")


def _phases(pct_start: float, total: int, three_phase: bool) -> list[dict[str, Any]]:
    """torch's phase table: where each phase ends and the group keys its lr anneals between (with torch's
    momentum keys, so that a state_dict reads as torch's; limn does not cycle momentum)."""
    keys = ("end_step", "start_lr", "end_lr", "start_momentum", "end_momentum")
    up = (float(pct_start * total) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum")
    down = (float(2 * pct_start * total) - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum")
    last = (total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")
    rows = [up, down, last] if three_phase else [up, (total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
    return [dict(zip(keys, row)) for row in rows]
