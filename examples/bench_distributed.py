"""train_stories' default GPT trained data-parallel at 1 and 2 ranks on this machine, one thread per rank.

    uv run python examples/bench_distributed.py [--steps 10] [--warmup 3] [--device c]

Each row is a run of its own, started by this script (under mpiexec for the ranked rows): the default model and
global batch (16 x 128 bytes), a few warm-up steps (the first compiles and captures), then --steps timed steps.
Reported: the median step time on rank 0 (which waits in the allreduce for the slower rank, so it is the step of
the whole world), tokens/s of the global batch, the scaling efficiency (throughput at N ranks over N times the
throughput at 1 rank), the seconds per step spent in DataParallel.reduce_gradients (host copies, buckets and
the allreduce, waiting for the other rank included) and the bytes it reduced per step beside the parameters'
float32 bytes. Beside them, for reference: one process without limn.distributed (the whole step in one
capture) at 1 thread and at every core, which is what 2 ranks on this machine have to beat, and at 1 thread on
half the batch, one rank's share: the step 2 ranks could take at best, were the allreduce free.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _bench import table
from _limits import limits_header


def worker(steps: int, warmup: int, device: str, distributed: bool, batch: int) -> None:
    """One run's figures as a JSON line (printed by rank 0 only)."""
    import train_stories
    from stories_data import open_corpus

    import limn
    from limn import distributed as dist

    limn.set_device(device)
    run = train_stories.Run(train_stories.Settings(batch=batch), open_corpus(None), distributed=distributed)
    for _ in range(warmup):
        run.train_one()
    before = run.parallel.stats if distributed else None
    seconds0, bytes0 = (before.seconds, before.bytes) if before else (0.0, 0)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        run.train_one()
        times.append(time.perf_counter() - start)
    result = {
        "step_seconds": statistics.median(times),
        "parameters": sum(p.size for p in run.model.parameters()),
        "collective_seconds": (run.parallel.stats.seconds - seconds0) / steps if distributed else None,
        "bytes_per_step": (run.parallel.stats.bytes - bytes0) / steps if distributed else None,
        "loss": run.history.train[-1][2],
    }
    if not distributed or dist.rank() == 0:
        print(json.dumps(result), flush=True)


def launch(ranks: int, threads: int, batch: int, args: argparse.Namespace) -> dict | str:
    """A run of `ranks` ranks (0: one process without limn.distributed) at `threads` threads each and a global
    batch of `batch` rows: its figures, or the last line of its error."""
    cmd = [sys.executable, __file__, "--worker", "--steps", str(args.steps), "--warmup", str(args.warmup)]
    cmd += ["--device", args.device, "--batch", str(batch)]
    if ranks:
        from limn import distributed as dist

        cmd = [dist.mpiexec(), "-n", str(ranks), *cmd, "--distributed"]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["no output"])[-1][:60]
    return json.loads(done.stdout.strip().splitlines()[-1])


def cpu_model() -> str:
    """lscpu's model name (the first /proc/cpuinfo one where lscpu is missing)."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        text = Path("/proc/cpuinfo").read_text()
    for line in text.splitlines():
        if line.lower().startswith(("model name", "model name:")):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="timed steps per run, after the warm-up")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (the first compiles)")
    parser.add_argument("--device", default="c")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--distributed", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.warmup, args.device, args.distributed, args.batch)
        return
    from train_stories import Settings

    from limn.c.team import physical_cores

    settings = Settings()
    c, cores = settings.config, physical_cores()
    b = settings.batch
    runs = [  # (label, ranks (0: no limn.distributed), threads per rank, global batch)
        ("alone (one capture)", 0, 1, b),
        (f"alone, {cores} threads", 0, cores, b),
        ("alone, half the batch", 0, 1, b // 2),
        ("1 rank", 1, 1, b),
        ("2 ranks", 2, 1, b),
    ]
    print(limits_header(args.device))
    load = os.getloadavg()[0]  # other processes on the cores slow every row: the header says how busy it was
    results = {label: launch(ranks, threads, batch, args) for label, ranks, threads, batch in runs}
    one_rank = results["1 rank"]
    rows = []
    for (label, ranks, threads, batch), r in zip(runs, results.values()):
        if isinstance(r, str):
            rows.append([label, f"{max(ranks, 1)} x {threads}", str(batch), "failed", "-", "-", "-", "-", r])
            continue
        rate = batch * c.context / r["step_seconds"]
        efficiency = "-"
        if ranks and not isinstance(one_rank, str):
            efficiency = f"{rate / (ranks * b * c.context / one_rank['step_seconds']):.2f}"
        collectives = "-" if r["collective_seconds"] is None else f"{r['collective_seconds'] * 1e3:.1f}"
        reduced = "-" if r["bytes_per_step"] is None else f"{r['bytes_per_step'] / (4 * r['parameters']):.2f}"
        rows.append(
            [label, f"{max(ranks, 1)} x {threads}", str(batch), f"{r['step_seconds'] * 1e3:.0f}", f"{rate:,.0f}"]
            + [efficiency]
            + [collectives, reduced, f"{r['loss']:.4f}"]
        )
    params = next((r["parameters"] for r in results.values() if not isinstance(r, str)), 0)
    print(
        f"{cpu_model()}, {cores} cores (load average {load:.1f} at the start); train_stories' default GPT: "
        f"{c.layers} layers x {c.heads} heads, width {c.width}, context {c.context}, {params / 1e6:.2f}M parameters "
        f"({4 * params:,} float32 bytes), global batch {settings.batch}; {args.warmup} warm-up + {args.steps} timed "
        f"steps on {args.device}"
    )
    headers = ["run", "ranks x threads", "batch", "step ms", "tokens/s", "efficiency", "collectives ms/step"]
    headers += ["reduced / 4 x params", f"loss at step {args.warmup + args.steps}"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
