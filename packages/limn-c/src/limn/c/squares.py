"""The c device's generator kernel: the Squares words of n counters as one C loop (squares_words, the CUSTOM op
limn.composed.random.rng registers), where the primitives spell each word as some 370 nodes of float64 limb
arithmetic. A captured step with dropout draws its masks here, and its first call builds a node per draw, not a
few hundred.
Pipeline: graph (a CUSTOM node) -> schedule -> IR (a CUSTOM kernel) -> **this C function** (CDevice.run_custom).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from limn.c import addresses
from limn.c.prelude import PRELUDE
from limn.compiler.squares_c import squares_c

NAME = "squares_words"

# each word on its own counter, so the team's split changes no bit; a short draw stays on one thread
SOURCE = (
    squares_c("static inline")
    + r"""
void limn_squares_words(const double* key, const double* counter, const double* start, double* out, int64_t n,
                        int threads) {
    const uint64_t k = limn_sdpa_word_of(key), first = limn_sdpa_word_of(counter) + limn_sdpa_word_of(start);
#pragma omp parallel for schedule(static) num_threads(threads) if (n >= 65536)
    for (int64_t i = 0; i < n; i++) out[i] = (double)limn_sdpa_squares32(first + (uint64_t)i, k);
}
"""
)


class Words:
    """The kernel, built through `build` (the device's kernel cache) on its first run."""

    def __init__(self, build: Callable[[str], ctypes.CDLL]) -> None:
        self.build = build
        self.function: Any = None

    def run(self, handles: list[Any], threads: int) -> None:
        """Runs squares_words on its buffers (key, counter and start as float64 limbs, then the words) with a
        team of `threads`."""
        if self.function is None:  # typed before it is kept: another thread may call it as soon as it is
            function = self.build(PRELUDE + SOURCE).limn_squares_words
            function.argtypes, function.restype = [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_int], None
            self.function = function
        self.function(*addresses.of(handles), handles[3].size, threads)
