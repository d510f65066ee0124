"""The c device's thread team (limn/c/team.py): sized before each run to the cores other processes leave free,
told to OpenMP at run time rather than compiled in, and loaded with a short spin unless the user chose one.

Oracles: the team's rule computed by hand from a given count of busy threads; the run queue while a process
this test starts spins; libgomp's own account of its settings (OMP_DISPLAY_ENV); the kernels' values with a
team of one against a team of two, bit for bit.
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


@pytest.mark.parametrize(
    "cpus, most, busy, want",
    [(2, 2, 0, 2), (2, 2, 1, 1), (2, 2, 3, 1), (4, 2, 1, 2), (8, 4, 5, 3), (8, 4, 8, 1)],
)
def test_the_team_leaves_other_processes_their_cores(cpus, most, busy, want):
    told, changes = [], []
    team = Team(most, told.append, cpus=cpus, elsewhere=lambda: busy)
    team.on_change = lambda old, new, ready: changes.append((old, new, ready))
    assert team.before_run() == want, f"Team({most}, cpus={cpus}) beside {busy} busy threads"
    assert told == [want], "the size is what OpenMP is told before the run"
    assert changes == ([] if want == most else [(most, want, busy)]), "LIMN_DEBUG hears of each change"


def test_a_fixed_team_is_never_resized(monkeypatch):
    monkeypatch.setenv("LIMN_FIXED_TEAM", "1")
    told = []
    team = Team(2, told.append, cpus=2, elsewhere=lambda: 3)
    assert team.before_run() == 2 and told == [2], "LIMN_FIXED_TEAM=1 keeps the team at its most"


def test_the_run_queue_is_read_at_most_once_per_recheck_interval():
    reads = []
    team = Team(2, lambda n: None, cpus=2, elsewhere=lambda: reads.append(1) or 0)
    team.before_run()
    team.before_run()
    assert len(reads) == 2, "one decision reads the queue twice (the lower read counts) and holds for a while"
    team.decided_at -= c_team.RECHECK_S
    team.before_run()
    assert len(reads) == 4


def test_a_busy_process_is_counted_as_ready_elsewhere():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline, seen = time.monotonic() + 5, []
        while time.monotonic() < deadline:
            seen.append(min(c_team.ready_elsewhere(), c_team.ready_elsewhere()))
            if seen[-1] >= 1:
                break
            time.sleep(0.05)
        assert seen[-1] >= 1, f"a spinning process beside this one was never counted: reads {seen}"
    finally:
        spinner.kill()
        spinner.wait()


def test_this_process_own_running_threads_are_not_counted_as_elsewhere():
    stop = threading.Event()
    block = bytes(1 << 24)

    def hash_forever():  # hashlib lets go of the GIL over big buffers: a thread of ours, running
        while not stop.is_set():
            hashlib.sha256(block).digest()

    worker = threading.Thread(target=hash_forever)
    worker.start()
    try:
        counts = [c_team._own_running() for _ in range(50)]
    finally:
        stop.set()
        worker.join()
    assert max(counts) >= 2, f"this thread and the hashing one both run, yet /proc/self/task said {counts}"


limn.register_device("c_team", lambda: CDevice(parallel_work=0))  # every nest that can, threaded


def test_a_team_of_one_computes_the_same_bits_as_a_team_of_two():
    dev = limn.get_device("c_team")
    if dev.team is None:
        pytest.skip("the c device here has no OpenMP, so no team to size")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((96, 80), np.float32), rng.standard_normal((80, 72), np.float32)
    sizes = []

    def run(busy: int) -> np.ndarray:
        dev.team.elsewhere = lambda: busy
        dev.team.decided_at = -c_team.RECHECK_S
        limn.set_device("c_team")
        try:
            x, y = limn.Tensor(a), limn.Tensor(b)
            out = ((x @ y).relu() * 0.5 + x.sum(1, keepdim=True)[:, :1]).numpy()
        finally:
            limn.set_device("numpy")
        sizes.append(dev.team.size)
        return out

    wide, narrow = run(0), run(dev.team.cpus)
    assert sizes == [dev.team.most, 1]
    np.testing.assert_array_equal(wide, narrow, err_msg="a team's size must never change a value")
    sources = [source for _, source in dev._sources.values()]
    assert any("omp parallel" in s for s in sources), "the nests are threaded"
    assert not any("num_threads" in s for s in sources), "the team's size is set at run time, not compiled in"


def _libgomp_settings(extra_env: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in c_team.USER_SETTINGS}
    code = "import os, limn; limn.get_device('c'); print('after:', os.environ.get('GOMP_SPINCOUNT'))"
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


def test_a_wait_policy_the_user_chose_is_kept():
    shown = _libgomp_settings({"OMP_WAIT_POLICY": "ACTIVE"})
    if "GOMP_SPINCOUNT" not in shown:
        pytest.skip("the C compiler's OpenMP runtime is not libgomp: its spin is its own")
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in shown, shown
    assert f"GOMP_SPINCOUNT = '{c_team.SPIN_COUNT}'" not in shown, shown
