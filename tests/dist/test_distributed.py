"""Rule: N ranks under mpiexec train as one process would on their whole batch, start from rank 0's weights,
share checkpoints with runs of any size, fail fast and clearly, refuse mismatched tensors before data moves,
and reduce to the same bits whichever rank arrives first. Each test starts `mpiexec -n N` itself on
tests/dist/dist_worker.py; the oracle is the same worker run as a single process (or rank 0's own data).
Marked `dist`: `nox -s dist` runs them, and CI runs that session."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import limn
import limn.distributed as dist

pytestmark = pytest.mark.dist

WORKER = Path(__file__).with_name("dist_worker.py")
TIMEOUT = 120  # seconds a launch may take before the test fails it: a hang is a failure, not a wait


def launch(n: int, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`mpiexec -n n python dist_worker.py args`, one thread per rank, failing the test on a hang."""
    cmd = [dist.mpiexec(), "-n", str(n), sys.executable, str(WORKER), *args]
    env_cmd = ["env", "OMP_NUM_THREADS=1", *cmd]
    done = subprocess.run(env_cmd, capture_output=True, text=True, timeout=TIMEOUT)
    if check:
        assert done.returncode == 0, f"{' '.join(cmd)}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


def devices() -> list[str]:
    found = ["numpy"]
    try:
        limn.get_device("c")
        found.append("c")
    except limn.DeviceError:
        pass
    return found


@pytest.mark.parametrize("device", devices())
def test_two_ranks_at_batch_b_reach_what_one_process_at_2b_reaches(tmp_path: Path, device: str):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    launch(1, "train", str(one), "--device", device, "--steps", "20", "--batch", "16")
    launch(2, "train", str(two), "--device", device, "--steps", "20", "--batch", "16")
    single = np.load(one / "params-0.npy")
    for r in range(2):
        got = np.load(two / f"params-{r}.npy")
        np.testing.assert_allclose(got, single, rtol=1e-5, atol=1e-6, err_msg=f"rank {r} after 20 AdamW steps")
    np.testing.assert_array_equal(np.load(two / "params-0.npy"), np.load(two / "params-1.npy"))


@pytest.mark.parametrize("root", [0, 1])
def test_broadcast_parameters_leaves_every_rank_with_roots_weights(tmp_path: Path, root: int):
    launch(2, "broadcast", str(tmp_path), "--root", str(root))
    before = [np.load(tmp_path / f"before-{r}.npy") for r in range(2)]
    assert not np.array_equal(before[0], before[1]), "the ranks must start apart for the test to mean anything"
    for r in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / f"after-{r}.npy"), before[root], err_msg=f"rank {r}")


@pytest.mark.parametrize("first, second", [(2, 1), (1, 2)])
def test_a_checkpoint_resumes_in_a_run_of_another_size(tmp_path: Path, first: int, second: int):
    """10 steps on `first` ranks, a checkpoint, 10 more on `second`: the same weights as 20 on one process."""
    straight, a, b = tmp_path / "straight", tmp_path / "a", tmp_path / "b"
    for d in (straight, a, b):
        d.mkdir()
    ckpt = tmp_path / "ckpt.safetensors"
    launch(1, "train", str(straight), "--steps", "20", "--batch", "8")
    launch(first, "train", str(a), "--steps", "10", "--batch", "8", "--save", str(ckpt))
    launch(second, "train", str(b), "--steps", "10", "--first", "10", "--batch", "8", "--load", str(ckpt))
    np.testing.assert_allclose(np.load(b / "params-0.npy"), np.load(straight / "params-0.npy"), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_a_rank_that_fails_ends_every_rank_in_bounded_time(tmp_path: Path, how: str):
    start = time.monotonic()
    done = launch(2, "fail", str(tmp_path), "--how", how, check=False)
    elapsed = time.monotonic() - start
    assert done.returncode != 0, f"the run must fail\n{done.stdout}\n{done.stderr}"
    assert "rank 0 done" not in done.stdout, "rank 0 must not go on past the failed rank"
    assert elapsed < 60, f"the survivors took {elapsed:.0f} s to end"
    if how == "raise":
        assert "[limn.distributed] rank 1 of 2 failed" in done.stderr, done.stderr
        assert "ValueError: rank 1 raised on purpose at step 3" in done.stderr, done.stderr
        assert "aborting all 2 ranks" in done.stderr, done.stderr
    else:  # the launcher reports the killed process
        assert "KILLED" in done.stdout + done.stderr or "signal 9" in done.stdout + done.stderr, done.stderr


@pytest.mark.parametrize("how", ["return", "exit"])
def test_a_rank_that_leaves_early_ends_every_rank_naming_it(tmp_path: Path, how: str):
    """Rank 1's loop ends a step early (or it calls sys.exit(3), which no excepthook sees) while rank 0 goes on
    reducing: rank 0 hears rank 1's farewell in its next all_reduce and aborts, within seconds."""
    start = time.monotonic()
    done = launch(2, "leave", str(tmp_path), "--how", how, check=False)
    elapsed = time.monotonic() - start
    assert done.returncode != 0 and "rank 0 done" not in done.stdout, f"{done.stdout}\n{done.stderr}"
    assert "rank 1 ended while this rank waited for it in all_reduce('mean')" in done.stderr, done.stderr
    assert "aborting all 2 ranks" in done.stderr and elapsed < 60, f"{elapsed:.0f} s\n{done.stderr}"


def test_a_barrier_against_an_all_reduce_raises_on_both_ranks_naming_the_two(tmp_path: Path):
    done = launch(2, "crossed", str(tmp_path), check=False)
    assert done.returncode != 0 and "done" not in done.stdout, f"{done.stdout}\n{done.stderr}"
    assert "rank 1 called all_reduce('sum') where rank 0 called barrier()" in done.stderr, done.stderr


def test_a_collective_that_waits_past_its_timeout_aborts_naming_it(tmp_path: Path):
    start = time.monotonic()
    done = launch(2, "stall", str(tmp_path), "--timeout", "2", check=False)
    elapsed = time.monotonic() - start
    assert done.returncode != 0 and "rank 0 done" not in done.stdout, f"{done.stdout}\n{done.stderr}"
    assert "all_reduce('sum') waited 2 s for the other ranks (the collective timeout, 2 s" in done.stderr, done.stderr
    assert elapsed < 40, f"the stalled run took {elapsed:.0f} s to end (rank 1 sleeps 60 s)"


def test_the_timeout_must_be_a_positive_number_of_seconds():
    from limn.distributed import watchdog

    with pytest.raises(ValueError, match=r"init\(timeout=...\) is -1: the collective timeout is a positive"):
        watchdog.timeout_from(-1)
    assert watchdog.timeout_from(None) == watchdog.TIMEOUT_S or "LIMN_DIST_TIMEOUT" in __import__("os").environ


@pytest.mark.parametrize("how", ["shape", "dtype"])
def test_mismatched_tensors_are_refused_on_every_rank_before_data_moves(tmp_path: Path, how: str):
    launch(2, "mismatch", str(tmp_path), "--how", how)
    results = [json.loads((tmp_path / f"mismatch-{r}.json").read_text()) for r in range(2)]
    expected = {
        "shape": "rank 1's tensor 1 (b) is float32[3], rank 0's (b) is float32[5]",
        "dtype": "rank 1's tensor 1 (b) is float64[5], rank 0's (b) is float32[5]",
    }[how]
    for r, result in enumerate(results):
        assert expected in result["message"], f"rank {r}: {result['message']}"
        assert result["a"] == [r + 1.0] * 4, f"rank {r}'s other tensor was reduced anyway: {result['a']}"


def test_the_allreduce_gives_the_same_bits_whichever_rank_arrives_first(tmp_path: Path):
    launch(3, "order", str(tmp_path), "--steps", "6")
    runs = [np.load(tmp_path / f"order-{r}.npy") for r in range(3)]
    reference = runs[0][0]
    for r, per_rank in enumerate(runs):
        for k, result in enumerate(per_rank):
            assert result.tobytes() == reference.tobytes(), f"rank {r}, repetition {k} differs in its bits"
    parts = [np.random.default_rng(r).standard_normal((3, 4099)).astype(np.float32) * 10.0 ** np.arange(3)[:, None] for r in range(3)]
    np.testing.assert_allclose(reference, parts[0] + parts[1] + parts[2], rtol=1e-6, atol=1e-3)
