"""The thread team: how many threads run the kernels of each run, and how long an idle one spins.

The c device's kernels are OpenMP loops, and a loop ends only when the last of its threads is done. On a
machine shared with other work that rule is what hurts: a team as wide as the cores, beside one busy
process on two cores, waits at every kernel's end for the thread that lost its core, a time slice at a time
(bench_step's GPT step ran 3.5 to 4x slower beside one spinning process, where one thread alone runs 1.8x).
So the team is sized before each run to the cores other processes leave free (`Team.before_run`): this
machine's run queue, less this process's own running threads, is what they take. LIMN_FIXED_TEAM=1 keeps
the team at its most (OMP_NUM_THREADS, else the physical cores) whatever else runs.

libgomp's idle threads also spin for 300,000 pauses before they sleep (7.5 ms at the 25 ns a pause takes on
the AMD EPYC Zen 4 it was measured on), and numpy's or torch's threads right after a run, in this process or
another, find the cores taken: a 256 matmul in numpy ran 20x slower right after one of limn's. `short_spin`
loads libgomp with GOMP_SPINCOUNT=SPIN_COUNT, long enough to bridge the gap between two runs from Python,
unless the user chose a wait policy.

Neither changes a value: each output cell is computed by one thread in the serial order, whatever the team.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from limn.compiler.jit import debug_level

SPIN_COUNT = 10_000
"""Pauses an idle OpenMP thread spins before it sleeps: about 250 us on that EPYC, more
than Python takes between two small runs (shorter, a 256 matmul in a loop ran 1.3x slower, its threads woken
from sleep each call); numpy's and torch's matmuls right after a limn run ran within 6% of their time alone."""

RECHECK_S = 0.05
"""How long a team size holds before the run queue is read again: a read costs 40 to 120 us."""

USER_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def physical_cores() -> int:
    """Cores, not hardware threads: pairs of (physical id, core id) in /proc/cpuinfo."""
    try:
        pairs, phys = set(), None
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("physical id"):
                phys = line.split(":")[1].strip()
            elif line.startswith("core id"):
                pairs.add((phys, line.split(":")[1].strip()))
        if pairs:
            return len(pairs)
    except OSError:
        pass
    return os.cpu_count() or 1


def team_size() -> int:
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return physical_cores()


def team_for(most: int, library: Callable[[str], ctypes.CDLL], spin: str) -> Team:
    """The c device's team of up to `most` threads, told to OpenMP through a library of one function that
    `library` builds (so it loads libgomp, inside `short_spin`, where the toolchain's probe did not)."""
    lib = library("#include <omp.h>\nvoid limn_team_set(int n) { omp_set_num_threads(n); }\n")
    set_threads = lib.limn_team_set
    set_threads.argtypes, set_threads.restype = [ctypes.c_int], None
    team = Team(most, set_threads)
    if debug_level() >= 1:
        print(f"[limn c] a team of up to {most} threads, sized per run; idle ones spin: {spin}", file=sys.stderr)
        team.on_change = lambda old, new, busy: print(
            f"[limn c] team {old} -> {new} threads: {busy} threads of other processes ready to run", file=sys.stderr
        )
    return team


@contextmanager
def short_spin() -> Iterator[str]:
    """Within the block, GOMP_SPINCOUNT is SPIN_COUNT for a libgomp loaded there (libgomp reads it once, when it
    loads); afterwards the environment is as it was, so no child process or other library inherits it. Yields
    what was done, for LIMN_DEBUG's line."""
    chosen = [name for name in USER_SETTINGS if name in os.environ]
    if chosen:
        yield f"the user's {', '.join(f'{n}={os.environ[n]}' for n in chosen)}"
        return
    if _libgomp_loaded():
        yield "libgomp's own (it was loaded before limn's first kernel)"
        return
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    try:
        yield f"GOMP_SPINCOUNT={SPIN_COUNT}"
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)


def _libgomp_loaded() -> bool:
    try:
        return "libgomp.so" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def ready_elsewhere() -> int:
    """Threads of other processes ready to run now: the machine's run queue (the running count of
    /proc/loadavg) less this process's threads in state R. 0 where /proc cannot say."""
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 0
    if running <= 1:  # only the thread reading
        return 0
    return max(0, running - _own_running())


def _own_running() -> int:
    own = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    for tid in tasks:
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:  # the thread ended between the listing and the read
            continue
        own += stat[stat.rindex(")") + 2] == "R"  # the state follows the name, which may hold spaces
    return max(own, 1)


class Team:
    """The team size for the next run: `most` threads, less those the cores other processes' ready threads
    take, never under one. The run queue counts every CPU of the machine, so `cpus` is the machine's, not
    this process's share: a job given 8 of 64 cores beside 56 busy ones keeps its 8. `set_threads(n)` tells
    the OpenMP runtime (omp_set_num_threads, for the thread that runs the kernels); `elsewhere()` counts the
    other processes' ready threads (the lower of two reads, so a system thread that wakes for a moment is not
    taken for a busy neighbour)."""

    def __init__(
        self,
        most: int,
        set_threads: Callable[[int], None],
        cpus: int | None = None,
        elsewhere: Callable[[], int] = ready_elsewhere,
    ) -> None:
        self.most = most
        self.cpus = cpus or os.cpu_count() or 1
        self.set_threads = set_threads
        self.elsewhere = elsewhere
        self.size = most
        self.decided_at = -RECHECK_S
        self.on_change: Callable[[int, int, int], None] | None = None  # (old, new, ready elsewhere), for LIMN_DEBUG

    def before_run(self) -> int:
        """Sizes the team for a run starting now (from the run queue at most every RECHECK_S) and sets it."""
        now = time.monotonic()
        if now - self.decided_at >= RECHECK_S and os.environ.get("LIMN_FIXED_TEAM", "") in ("", "0"):
            self.decided_at = now
            busy = min(self.elsewhere(), self.elsewhere())
            size = max(1, min(self.most, self.cpus - busy))
            if size != self.size and self.on_change is not None:
                self.on_change(self.size, size, busy)
            self.size = size
        self.set_threads(self.size)
        return self.size
