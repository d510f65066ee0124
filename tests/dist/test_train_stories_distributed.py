"""examples/train_stories.py --distributed under `mpiexec -n 2`, started here, against one process (the oracle):
- 2 ranks with a global batch of 8 (4 rows each) log the train and validation losses one process logs at batch 8
  (within 1e-4 relative: the ranks sum the batch's loss and gradients in another order), and print them once;
- the checkpoint the 2 ranks wrote (rank 0's) resumes in one process, which goes on with the losses the
  uninterrupted one-process run had; with dropout (each rank drawing its own masks), resumed on 2 ranks it gives
  the uninterrupted 2-rank run's losses bit for bit;
- a global batch that does not split over the ranks, or ranks started without --distributed, end in one line
  per rank and exit status 2.
A tiny model (1 layer, width 32, context 32) on the c device, one thread per rank, dropout 0 where one process is
the oracle (each rank draws its own dropout masks, so with dropout the runs differ by design).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from limn import distributed as dist
from limn import serialize

pytestmark = pytest.mark.dist

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train_stories.py"
TINY = ["--layers", "1", "--heads", "2", "--width", "32", "--context", "32", "--batch", "8", "--dropout", "0"]
ARGS = [*TINY, "--eval-every", "3", "--tokens", "1", "--device", "c"]
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}  # two ranks on a 2-core machine: one core each


def mpiexec() -> str:
    try:
        return dist.mpiexec()
    except dist.DistributedError as e:
        pytest.skip(f"no mpiexec to start ranks with: {e}")


def train(*args: str, ranks: int = 1, cwd: Path) -> subprocess.CompletedProcess:
    """train_stories.py run as one process (ranks=1), or as `ranks` ranks under mpiexec with --distributed."""
    cmd = [sys.executable, str(SCRIPT), *args]
    if ranks > 1:
        cmd = [mpiexec(), "-n", str(ranks), *cmd, "--distributed"]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=ONE_THREAD, timeout=120)


def history(folder: Path) -> dict[str, list[float]]:
    """The losses a run's checkpoint holds: train (every step) and validation (every --eval-every)."""
    saved = json.loads(serialize.read_metadata(folder / "ckpt.safetensors")["history"])
    return {split: [loss for _, _, loss in rows] for split, rows in saved.items()}


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> dict[str, list[float]]:
    folder = tmp_path_factory.mktemp("one")
    done = train(*ARGS, "--steps", "6", "--out", str(folder / "run"), cwd=folder)
    assert done.returncode == 0, done.stderr
    return history(folder / "run")


def test_two_ranks_log_the_losses_of_one_process_with_the_same_global_batch(tmp_path, one_process):
    done = train(*ARGS, "--steps", "6", "--out", str(tmp_path / "run"), ranks=2, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("step     6/6") == 1, f"rank 0 alone prints the log:\n{done.stdout}"
    assert "data parallel over 2 ranks" in done.stdout and "4 rows per rank" in done.stdout, done.stdout
    two = history(tmp_path / "run")
    for split in ("train", "valid"):
        np.testing.assert_allclose(two[split], one_process[split], rtol=1e-4, err_msg=f"{split} losses, 2 ranks")
    logged = [float(line.split("train ")[1].split()[0]) for line in done.stdout.splitlines() if "val " in line]
    np.testing.assert_allclose(logged, [one_process["train"][2], one_process["train"][5]], atol=1e-3)


def test_a_two_rank_checkpoint_resumes_in_one_process(tmp_path, one_process):
    done = train(*ARGS, "--steps", "3", "--out", str(tmp_path / "two"), ranks=2, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    resume = ["--resume", str(tmp_path / "two" / "ckpt.safetensors"), "--steps", "6", "--tokens", "1"]
    done = train(*resume, "--device", "c", "--out", str(tmp_path / "one"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "resumed at step 3" in done.stdout, done.stdout
    resumed = history(tmp_path / "one")  # steps 1-3 on two ranks, 4-6 in one process
    for split in ("train", "valid"):
        np.testing.assert_allclose(resumed[split], one_process[split], rtol=1e-4, err_msg=f"{split}, resumed")


def test_two_ranks_resumed_with_dropout_give_the_uninterrupted_two_rank_losses_bit_for_bit(tmp_path):
    dropout = [*ARGS, "--dropout", "0.1"]  # each rank its own masks: the saved counter must resume every stream
    whole = train(*dropout, "--steps", "6", "--out", str(tmp_path / "whole"), ranks=2, cwd=tmp_path)
    first = train(*dropout, "--steps", "3", "--out", str(tmp_path / "first"), ranks=2, cwd=tmp_path)
    resume = ["--resume", str(tmp_path / "first" / "ckpt.safetensors"), "--steps", "6", "--tokens", "1"]
    second = train(*resume, "--device", "c", "--out", str(tmp_path / "second"), ranks=2, cwd=tmp_path)
    for done in (whole, first, second):
        assert done.returncode == 0, done.stderr
    want, got = history(tmp_path / "whole"), history(tmp_path / "second")
    assert got == want, f"resumed {got} against uninterrupted {want}"


@pytest.mark.parametrize(
    "args, says",
    [
        (["--batch", "7", "--distributed"], "--batch 7 (the global batch) does not split over 2 ranks"),
        ([], "without --distributed"),
    ],
    ids=["uneven batch", "no --distributed"],
)
def test_a_mistake_under_mpiexec_is_one_line_per_rank_and_exit_status_2(tmp_path, args, says):
    cmd = [mpiexec(), "-n", "2", sys.executable, str(SCRIPT), *ARGS, "--steps", "1", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=ONE_THREAD, timeout=60)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and all(says in line for line in lines) and "Traceback" not in done.stderr, done.stderr
