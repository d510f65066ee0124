"""The c device's thread team (limn/c/team.py): sized before each run to the cores other work leaves free (other
processes, and threads of this one outside the team), never past this process's CPUs, told to OpenMP around
the run only (the calling thread's own setting comes back), and loaded with a short spin unless the user chose
one.

Oracles: the team's rule computed by hand from a given count of busy threads; the run queue while a process
or a thread this test starts keeps a core busy; OpenMP's own count of a parallel region's threads;
libgomp's account of its settings (OMP_DISPLAY_ENV); the kernels' values with a team of one against a team
of two, bit for bit.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import limn
from limn.c import team as c_team
from limn.c.device import CDevice
from limn.c.team import Team


class FakeOpenMP:
    """set_threads for a Team under test: records each size it is told and returns the one before."""

    def __init__(self, start: int = 7) -> None:
        self.told, self.current = [], start

    def __call__(self, n: int) -> int:
        self.told.append(n)
        before, self.current = self.current, n
        return before


@pytest.mark.parametrize(
    "cpus, most, busy, want",
    [(2, 2, 0, 2), (2, 2, 1, 1), (2, 2, 3, 1), (4, 2, 1, 2), (8, 4, 5, 3), (8, 4, 8, 1)],
)
def test_the_team_leaves_other_work_its_cores_and_puts_the_threads_setting_back(cpus, most, busy, want):
    openmp, changes = FakeOpenMP(), []
    team = Team(most, openmp, cpus=cpus, elsewhere=lambda size: busy)
    team.on_change = lambda old, new, ready: changes.append((old, new, ready))
    with team.run() as size:
        assert size == want, f"Team({most}, cpus={cpus}) beside {busy} busy threads"
        assert openmp.current == want, "OpenMP is told the size before the run"
    assert openmp.told == [want, 7], "and the calling thread's own setting after it"
    assert changes == ([] if want == most else [(most, want, busy)]), "LIMN_DEBUG hears of each change"


def test_a_fixed_team_is_never_resized(monkeypatch):
    team = Team(2, FakeOpenMP(), cpus=2, elsewhere=lambda size: 3)
    assert team.decide() == 1
    monkeypatch.setenv("LIMN_FIXED_TEAM", "1")
    team.decided_at = -c_team.RECHECK_S
    assert team.decide() == 2, "LIMN_FIXED_TEAM=1 keeps the team at its most, a shrunk one too"


def test_the_run_queue_is_read_at_most_once_per_recheck_interval():
    reads = []
    team = Team(2, FakeOpenMP(), cpus=2, elsewhere=lambda size: reads.append(size) or 0)
    team.decide()
    team.decide()
    assert reads == [2, 2], "one decision reads the queue twice (the lower read counts) and holds for a while"
    team.decided_at -= c_team.RECHECK_S
    team.decide()
    assert len(reads) == 4


def test_a_busy_process_is_counted_as_ready_elsewhere():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline, seen = time.monotonic() + 5, []
        while time.monotonic() < deadline:
            seen.append(min(c_team.ready_elsewhere(2), c_team.ready_elsewhere(2)))
            if seen[-1] >= 1:
                break
            time.sleep(0.05)
        assert seen[-1] >= 1, f"a spinning process beside this one was never counted: reads {seen}"
    finally:
        spinner.kill()
        spinner.wait()


def test_a_busy_thread_of_this_process_outside_the_team_counts_too():
    """torch's spinning team, a data loader: a thread of this process that is not limn's team takes a core."""
    stop = threading.Event()
    block = bytes(1 << 24)

    def hash_forever():  # hashlib lets go of the GIL over big buffers: a thread of ours, running
        while not stop.is_set():
            hashlib.sha256(block).digest()

    worker = threading.Thread(target=hash_forever)
    worker.start()
    try:
        time.sleep(0.05)
        counts = [c_team.ready_elsewhere(1) for _ in range(50)]  # a team of one: the caller alone
    finally:
        stop.set()
        worker.join()
    assert max(counts) >= 1, f"the hashing thread beside a team of one was never counted: {counts}"


def test_the_most_threads_stay_within_this_process_cpus(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(c_team, "physical_cores", lambda: 64)
    monkeypatch.setattr(c_team.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    monkeypatch.setattr(c_team, "_quota_cpus", lambda: 1 << 16)
    assert c_team.team_size() == 3, "affinity: 3 CPUs of 64"
    monkeypatch.setattr(c_team, "_quota_cpus", lambda: 2)
    assert c_team.team_size() == 2, "a cgroup quota of 2 CPUs"
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert c_team.team_size() == 5, "OMP_NUM_THREADS is the user's to choose"


limn.register_device("c_team", lambda: CDevice(parallel_work=0))  # every nest that can, threaded


PROBE = """int omp_get_num_threads(void);
int limn_probe_team(void) {
    int n = 0;
#pragma omp parallel
    {
#pragma omp single
        n = omp_get_num_threads();
    }
    return n;
}
"""


def test_a_team_of_one_computes_the_same_bits_as_a_team_of_two():
    dev = limn.get_device("c_team")
    if dev.team is None:
        pytest.skip("the c device here has no OpenMP, so no team to size")
    probe = dev._library(PROBE).limn_probe_team  # a parallel region's team on the calling thread
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 80), np.float32), rng.standard_normal((80, 72), np.float32)
    own = probe()

    def run(busy: int) -> np.ndarray:
        dev.team.elsewhere = lambda size: busy
        dev.team.decided_at = -c_team.RECHECK_S
        with dev.team.run() as size:
            assert probe() == size, "the size reaches the OpenMP runtime the kernels run on"
        limn.set_device("c_team")
        try:
            x, y = limn.Tensor(a), limn.Tensor(b)
            out = ((x @ y).relu() * 0.5 + x.sum(1, keepdim=True)[:, :1]).numpy()
        finally:
            limn.set_device("numpy")
        assert dev.team.size == (1 if busy else dev.team.most)
        return out

    wide, narrow = run(0), run(dev.team.cpus)
    assert probe() == own, "the calling thread's own setting is back after each run"
    np.testing.assert_array_equal(wide, narrow, err_msg="a team's size must never change a value")
    sources = [source for _, source in dev._sources.values()]
    assert any("omp parallel" in s for s in sources), "the nests are threaded"
    assert not any("num_threads" in s for s in sources), "the team's size is set at run time, not compiled in"


def _libgomp_settings(extra_env: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in c_team.USER_SETTINGS}
    code = (
        "import os, limn; from limn.c import team; limn.get_device('c'); "
        "print('after:', os.environ.get('GOMP_SPINCOUNT')); print('spin:', team.spin())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "OMP_DISPLAY_ENV": "VERBOSE", **extra_env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout + done.stderr


def test_libgomp_loads_with_limns_short_spin_and_the_environment_is_left_as_it_was():
    shown = _libgomp_settings({})
    if "GOMP_SPINCOUNT" not in shown:
        pytest.skip("the C compiler's OpenMP runtime is not libgomp: its spin is its own")
    assert f"GOMP_SPINCOUNT = '{c_team.SPIN_COUNT}'" in shown, shown
    assert "after: None" in shown, "a child process or a later library must not inherit limn's setting"
    assert "set by limn when it loaded libgomp" in shown, shown


def test_a_wait_policy_the_user_chose_is_kept():
    shown = _libgomp_settings({"OMP_WAIT_POLICY": "ACTIVE"})
    if "GOMP_SPINCOUNT" not in shown:
        pytest.skip("the C compiler's OpenMP runtime is not libgomp: its spin is its own")
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in shown, shown
    assert f"GOMP_SPINCOUNT = '{c_team.SPIN_COUNT}'" not in shown, shown
    assert "spin: the user's OMP_WAIT_POLICY=ACTIVE" in shown, shown
