"""Index checks: a gather's or scatter's indices are read before the kernel that uses them runs, so an index
that would leave its buffer raises IndexError (naming it and the axis) and never reaches compiled code.

The executor (limn.compiler.jit) places one check per gather and scatter when it builds a plan (placed) and runs
each before its kernel (verify).
Pipeline: schedule -> **index checks** -> plan executor -> device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from limn.compiler.kernel import Scatter
from limn.compiler.schedule import Gather, Load, Schedule
from limn.runtime.numpy_device import view_array


@dataclass
class IndexCheck:
    """Before kernel `kernel` runs, the int buffer `slot`, read through `view`, must hold only
    values in [0, size): a gather or scatter index that would leave its buffer never reaches it."""

    kernel: int
    load: Load
    size: int
    what: str


def placed(sched: Schedule) -> list[IndexCheck]:
    """One check per gather and scatter, each placed before the first kernel that runs once its indices
    exist: before any kernel at all when they are a leaf buffer, so a bad index stops the realize() before
    an in-place ASSIGN has written anything."""
    last_write: dict[int, int] = {}  # slot -> the last kernel writing it, up to the kernel being checked
    checks = []
    for i, k in enumerate(sched.kernels):
        loads: list[tuple[Load, int, str]] = []
        if isinstance(k.form, Scatter):
            loads.append((k.form.idx, sched.slots[k.out].shape[k.form.axis], "scatter"))
        for e in k.exprs:
            if isinstance(e, Gather):
                loads.append((e.idx, e.src.view.shape[e.axis], "gather"))
        for load, size, what in loads:
            checks.append(IndexCheck(last_write.get(load.slot, -1) + 1, load, size, what))
        for s in k.outputs:
            last_write[s] = i
    return checks


def verify(check: IndexCheck, sched: Schedule, handles: list[Any], device: Any) -> None:
    """Raises IndexError, naming the index and the axis, where the check's indices leave [0, size); `device`
    is the compiled device running the plan, whose handles these are."""
    load = check.load
    raw = handles[load.slot]
    if not device.host:
        raw = device.copyout(raw, load.dtype, sched.slots[load.slot].shape)
    values = view_array(np.asarray(raw), load.view)
    if values.size and (values.min() < 0 or values.max() >= check.size):
        bad = values[(values < 0) | (values >= check.size)].reshape(-1)[0]
        raise IndexError(
            f"{check.what}: index {int(bad)} is out of range for an axis of size {check.size} "
            f"(valid indices are 0..{check.size - 1})"
        )
