"""A line on the terminal while kernels compile, so that a long first step reads as work and not as a hang.

A plan whose kernels are not in the kernel cache waits on the compiler: seconds, for a model's first step. Once
such a build has taken DELAY seconds, one line on stderr counts the kernels built and the seconds spent,
rewritten in place a few times a second, and ends with a newline when the build is done (or fails, so that the
error starts a line of its own). Nothing is written when stderr is not a terminal (a log file, a pipe, pytest's
capture), when LIMN_QUIET=1, or for a build done within DELAY; a write that fails (the terminal went away)
silences the line and never fails the build.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from typing import Any, TextIO

DELAY = 1.0  # seconds of compiling before the line appears
PERIOD = 0.25  # seconds between rewrites of it


def shows(stream: TextIO) -> bool:
    """Whether a progress line may be written to `stream`: a terminal, and LIMN_QUIET not set to 1."""
    if os.environ.get("LIMN_QUIET", "0") == "1":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """The line for one build of `total` kernels on the device named `device`: `advance(n)` as n more are
    built (from any thread), `close()` when the build ends. A context manager."""

    def __init__(self, total: int, device: str, stream: TextIO | None = None, delay: float | None = None) -> None:
        self.total = total
        self.device = device
        self.built = 0
        self.stream = sys.stderr if stream is None else stream
        self.start = time.perf_counter()
        self.shown = False  # whether the line has been written yet
        self.broken = False  # whether a write failed: the line then stays silent
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if total > 0 and shows(self.stream):
            wait = DELAY if delay is None else delay
            self._thread = threading.Thread(target=self._tick, args=(wait,), name="limn-progress", daemon=True)
            self._thread.start()

    def advance(self, kernels: int) -> None:
        with self._lock:
            self.built += kernels

    def text(self) -> str:
        """The line as it reads now."""
        seconds = time.perf_counter() - self.start
        if self._stop.is_set():
            return f"[limn {self.device}] compiled {self.built} of {self.total} kernels in {seconds:.1f} s"
        return f"[limn {self.device}] compiling kernels: {self.built}/{self.total} built, {seconds:.1f} s"

    def _tick(self, delay: float) -> None:
        if self._stop.wait(delay):
            return
        while True:
            self._write()
            if self._stop.wait(PERIOD):
                return

    def _write(self, end: str = "") -> None:
        with self._lock:
            if self.broken:
                return
            try:
                # `\r` returns to the line's start and `\033[K` clears what a longer earlier text left
                self.stream.write("\r" + self.text() + "\033[K" + end)
                self.stream.flush()
                self.shown = True
            except (OSError, ValueError):  # the terminal went away, or stderr was closed: the build goes on
                self.broken = True

    def close(self) -> None:
        """Stops the line; ends it with its final figures and a newline if it was shown."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            if self.shown:
                self._write("\n")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def silent(total: int = 0) -> Progress:
    """A Progress that counts and never writes: for a build nobody watches (a test calling compile_batch)."""
    return Progress(total, "", stream=io.StringIO())  # not a terminal
