"""The thread team: how many threads run the kernels of each run, and how long an idle one spins.

The c device's kernels are OpenMP loops, and a loop ends only when the last of its threads is done. On a
machine shared with other work that rule is what hurts: a team as wide as the cores, beside one busy
process on two cores, waits at every kernel's end for the thread that lost its core, a time slice at a time
(bench_step's GPT step ran 3.5 to 4x slower beside one spinning process, where one thread alone runs 1.8x).
So the team is sized before each run to the cores other work leaves free (`Team.run`): the machine's run
queue, less the threads of this process's own team, is what it takes (other threads of this process count:
torch's spinning team, a data loader). LIMN_FIXED_TEAM=1 keeps the team at its most (OMP_NUM_THREADS, else
the physical cores this process may use, under a cgroup's CPU quota) whatever else runs. The size is set for
the calling thread around each run only, so other OpenMP code on that thread keeps its own.

libgomp's idle threads also spin for 300,000 pauses before they sleep (7.9 ms at the 26 ns a pause takes on
the AMD EPYC Zen 4 it was measured on), and numpy's or torch's threads right after a run, in this process or
another, find the cores taken: a 256 matmul in numpy ran 20x slower right after one of limn's. `short_spin`
loads libgomp with GOMP_SPINCOUNT=SPIN_COUNT, long enough to bridge the gap between two runs from Python and
short enough to leave the cores soon after the last, unless the user chose a wait policy.

Neither changes a value: each output cell is computed by one thread in the serial order, whatever the team.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from limn.compiler.jit import debug_level

SPIN_COUNT = 50_000
"""Pauses an idle OpenMP thread spins before it sleeps: about 1.3 ms at the 26 ns a pause takes on that EPYC,
longer than Python takes between two small runs even when the machine is slow. A thread that sleeps between
runs is woken by the next one, and on a virtual machine whose idle vCPU the host has put to sleep that took
about a millisecond: with 10,000 pauses (260 us) bench_matmul's 256 product ran 1.27-1.58 ms a call in 9 of 12
processes, with 20,000 in 4 of 5, and with 40,000 to 100,000 0.33-0.79 ms in 21 of 22 (its kernel alone: 0.17).
numpy's and torch's 256 matmuls right after a limn run took what they take alone (bench_shared's second table)."""

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
    """The most threads a team has: OMP_NUM_THREADS, else the physical cores, no more than this process's CPUs
    (its affinity, and a cgroup's CPU quota: a container given 2 CPUs of a 64-core host gets 2 threads)."""
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(physical_cores(), allowed, _quota_cpus()))


def _quota_cpus() -> int:
    """The CPUs a cgroup v2 quota allows ("200000 100000" in cpu.max is 2), a large number when none is set."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):  # no cgroup v2, or "max": no quota
        return 1 << 16


SET_THREADS = """int omp_get_max_threads(void);
void omp_set_num_threads(int n);
int limn_team_set(int n) { const int before = omp_get_max_threads(); omp_set_num_threads(n); return before; }
"""  # declared here, not from omp.h: a compiler whose -fopenmp links need not ship the header


def team_for(most: int, library: Callable[[str], ctypes.CDLL], spin: Callable[[], str]) -> Team:
    """The c device's team of up to `most` threads, told to OpenMP through a library of one function that
    `library` builds (so it loads libgomp, inside `short_spin`, where the toolchain's probe did not)."""
    lib = library(SET_THREADS)
    set_threads = lib.limn_team_set
    set_threads.argtypes, set_threads.restype = [ctypes.c_int], ctypes.c_int
    team = Team(most, set_threads)
    if debug_level() >= 1:
        print(f"[limn c] a team of up to {most} threads, sized per run; idle ones spin: {spin()}", file=sys.stderr)
        team.on_change = lambda old, new, busy: print(
            f"[limn c] team {old} -> {new} threads: {busy} threads of other processes ready to run", file=sys.stderr
        )
    return team


_limn_spun = False  # whether limn loaded libgomp with SPIN_COUNT (libgomp reads it once per process)


@contextmanager
def short_spin() -> Iterator[None]:
    """Within the block, GOMP_SPINCOUNT is SPIN_COUNT for a libgomp loaded there (libgomp reads it once, when it
    loads), unless the user set a wait policy; afterwards the environment is as it was, so libraries loaded
    later and processes started later do not inherit it (a cc the block runs does, to no effect)."""
    global _limn_spun
    if any(name in os.environ for name in USER_SETTINGS) or _libgomp_loaded():
        yield
        return
    os.environ["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    try:
        yield
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)
        _limn_spun = _libgomp_loaded()


def spin() -> str:
    """How long idle team threads spin, in words, for LIMN_DEBUG's line."""
    chosen = [f"{name}={os.environ[name]}" for name in USER_SETTINGS if name in os.environ]
    if chosen:
        return f"the user's {', '.join(chosen)}"
    if _limn_spun:
        return f"GOMP_SPINCOUNT={SPIN_COUNT}, set by limn when it loaded libgomp"
    if _libgomp_loaded():
        return "libgomp's own (it was loaded before limn's first kernel)"
    return "the OpenMP runtime's own (not libgomp: GOMP_SPINCOUNT means nothing to it)"


def _libgomp_loaded() -> bool:
    try:
        return "libgomp.so" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def ready_elsewhere(team: int) -> int:
    """Threads ready to run now besides this team of `team` (the caller and its workers): the machine's run
    queue (the running count of /proc/loadavg) less this process's threads in state R, up to `team` of them.
    0 where /proc cannot say."""
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 0
    if running <= 1:  # only the thread reading
        return 0
    return max(0, running - min(_own_running(), team))


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
    """The team size for the next run: `most` threads, less those the cores other ready threads take, never
    under one. The run queue counts every CPU of the machine, so `cpus` is the machine's, not this process's
    share: a job given 8 of 64 cores beside 56 busy ones keeps its 8. Hardware threads count as CPUs, so a
    team thread may share a core with a busy sibling: slower, but it never waits a time slice. `set_threads(n)`
    tells the OpenMP runtime (omp_set_num_threads, for the thread that runs the kernels) and returns what it
    was; `elsewhere(team)` counts the other ready threads (the lower of two reads, so a system thread that
    wakes for a moment is not taken for a busy neighbour)."""

    def __init__(
        self,
        most: int,
        set_threads: Callable[[int], int],
        cpus: int | None = None,
        elsewhere: Callable[[int], int] = ready_elsewhere,
    ) -> None:
        self.most = most
        self.cpus = cpus or os.cpu_count() or 1
        self.set_threads = set_threads
        self.elsewhere = elsewhere
        self.size = most
        self.decided_at = -RECHECK_S
        self.on_change: Callable[[int, int, int], None] | None = None  # (old, new, ready elsewhere), for LIMN_DEBUG

    def decide(self) -> int:
        """The size for a run starting now: from the run queue, read at most every RECHECK_S."""
        if os.environ.get("LIMN_FIXED_TEAM", "").lower() in ("1", "true", "yes"):
            self.size = self.most
            return self.size
        now = time.monotonic()
        if now - self.decided_at >= RECHECK_S:
            self.decided_at = now
            busy = min(self.elsewhere(self.size), self.elsewhere(self.size))
            size = max(1, min(self.most, self.cpus - busy))
            if size != self.size and self.on_change is not None:
                self.on_change(self.size, size, busy)
            self.size = size
        return self.size

    @contextmanager
    def run(self) -> Iterator[int]:
        """The team sized for the block's run (decide) on the calling thread, whose OpenMP setting is put
        back afterwards."""
        before = self.set_threads(self.decide())
        try:
            yield self.size
        finally:
            self.set_threads(before)
