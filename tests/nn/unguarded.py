"""Python state a captured step reads past limn.capture.guards' reach (two calls below the step, as a library's
would be): what the tests of replaying as recorded and of verify=N use, written once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def past_the_guards(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn, called through one more function: state it reads is two calls below the step that calls the result,
    past the guards (limn.capture.guards.CALL_DEPTH)."""

    def through(*args: Any) -> Any:
        return fn(*args)

    return through


def halving_step(start: float) -> tuple[Callable[..., Any], dict[str, float]]:
    """step(x, y) = x * lr - y, where lr starts at `start` and halves at every call, kept past the guards; and
    the dict that holds lr."""
    lr = {"value": start}

    @past_the_guards
    def current() -> float:
        lr["value"] /= 2
        return lr["value"]

    def step(x, y):
        return x * current() - y

    return step, lr
