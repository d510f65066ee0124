"""The progress line while kernels compile (limn/compiler/progress.py):
- a build that runs past DELAY on a terminal writes one line, rewritten in place (`\\r`), that counts the kernels
  built out of the total and the seconds spent, and ends it with a newline and the final count;
- nothing is written when stderr is not a terminal, when LIMN_QUIET=1, or for a build done within DELAY;
- a build that raises still ends the line, so the error starts a line of its own;
- a terminal that fails every write (gone away) silences the line: the build succeeds, or raises its own error;
- the c device's first plan, its kernel cache empty, shows the line with every kernel it compiled counted,
  and a second device that finds them all in the cache compiles nothing and shows nothing.
"""

from __future__ import annotations

import io
import time

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.c.device import CDevice
from limn.compiler import progress


class Terminal(io.StringIO):
    """What a terminal receives, kept as text."""

    def isatty(self) -> bool:
        return True


def _build(line: progress.Progress, kernels: int, seconds: float) -> None:
    for _ in range(kernels):
        time.sleep(seconds / kernels)
        line.advance(1)


def test_a_long_build_on_a_terminal_shows_one_updating_line_and_ends_it():
    screen = Terminal()
    with progress.Progress(4, "c", stream=screen, delay=0.0) as line:
        _build(line, 4, 3 * progress.PERIOD)
    text = screen.getvalue()
    updates = text.split("\r")[1:]
    assert len(updates) >= 2, f"the line is rewritten as the build goes: {text!r}"
    assert all("\n" not in u for u in updates[:-1]) and text.endswith("\n"), f"one line, ended once: {text!r}"
    assert "[limn c] compiling kernels: " in updates[0] and "/4 built, " in updates[0], text
    assert "[limn c] compiled 4 of 4 kernels in " in updates[-1], f"the last rewrite gives the final count: {text!r}"


@pytest.mark.parametrize("case", ["not a terminal", "LIMN_QUIET=1", "done within the delay"])
def test_the_line_stays_silent(case, monkeypatch):
    screen = io.StringIO() if case == "not a terminal" else Terminal()
    if case == "LIMN_QUIET=1":
        monkeypatch.setenv("LIMN_QUIET", "1")
    delay = 10.0 if case == "done within the delay" else 0.0
    with progress.Progress(3, "c", stream=screen, delay=delay) as line:
        _build(line, 3, 2 * progress.PERIOD)
    assert screen.getvalue() == "", f"{case}: {screen.getvalue()!r}"


def test_a_build_that_raises_ends_its_line():
    screen = Terminal()
    with pytest.raises(RuntimeError), progress.Progress(2, "c", stream=screen, delay=0.0) as line:
        _build(line, 1, 2 * progress.PERIOD)
        raise RuntimeError("cc failed")
    assert screen.getvalue().endswith("\n") and "compiled 1 of 2 kernels" in screen.getvalue(), screen.getvalue()


class GoneTerminal(Terminal):
    """A terminal that went away after the build began: every write fails."""

    def write(self, text: str) -> int:
        raise OSError(5, "Input/output error")


def test_a_terminal_that_goes_away_never_fails_the_build_nor_hides_its_error():
    with progress.Progress(2, "c", stream=GoneTerminal(), delay=0.0) as line:
        _build(line, 2, 2 * progress.PERIOD)
    with pytest.raises(RuntimeError, match="cc failed"), progress.Progress(2, "c", stream=GoneTerminal(), delay=0.0):
        time.sleep(2 * progress.PERIOD)
        raise RuntimeError("cc failed")


def _first_plan(device: CDevice) -> np.ndarray:
    limn.register_device("c_progress", lambda: device)
    limn.set_device("c_progress")
    try:
        x = Tensor(np.linspace(-2, 2, 48, dtype=np.float32).reshape(6, 8))
        return ((x.exp().sum(axis=1) + (x @ x.T).max(axis=0)) * 3).numpy()
    finally:
        limn.set_device("numpy")


def test_the_c_device_counts_every_kernel_it_compiles_on_the_line(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(progress, "DELAY", 0.0)
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    first = CDevice()
    got = _first_plan(first)
    compiled = first.stats.programs_compiled
    assert compiled >= 2 and f"compiled {compiled} of {compiled} kernels in " in screen.getvalue(), (
        f"{compiled} kernels compiled; stderr: {screen.getvalue()!r}"
    )
    screen.truncate(0)
    screen.seek(0)
    monkeypatch.setattr(progress, "DELAY", 1.0)  # loading built libraries takes milliseconds: nothing to show
    again = CDevice()
    np.testing.assert_array_equal(_first_plan(again), got)
    assert again.stats.programs_compiled >= 2 and screen.getvalue() == "", (
        f"every kernel in the cache: nothing to wait on, nothing shown; stderr: {screen.getvalue()!r}"
    )
