"""train_stories' default run in limn beside the same model, recipe and data in torch eager and torch.compile.

    uv run python examples/bench_stories.py [--steps 600] [--device c] [--kinds limn torch "torch, Muon f32"]

Every kind starts from the same weights (a limn checkpoint, loaded into torch with safetensors' loader), trains
on the same batches with Muon on the hidden matrices and AdamW on the rest, the warmup + cosine schedule and the
clip, in a process of its own with the same threads. Reported: tokens/s over the steps after the first, the time
to the first step (limn: tracing, scheduling, compiling and capturing; torch.compile: its compile), the final
validation loss (dropout draws differ between the frameworks, so the losses agree only to a few percent), and
the peak resident memory of the process.

torch.optim.Muon runs its Newton-Schulz matmuls in bfloat16, which a CPU without AVX512-BF16 emulates (on one
such 2-core EPYC they took 80% of torch's step); limn's Muon rounds its iterates to bfloat16 too but multiplies
in float32 arithmetic. "torch, Muon f32" is torch's step with the iterations in float32
(stories_torch.newton_schulz_float32): the frameworks compared at the same arithmetic cost. The line above
the table says whether this CPU has bfloat16 arithmetic.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bench import table
from _limits import limits_header

KINDS = ("limn", "torch", "torch, Muon f32", "torch.compile")
NOTES = {
    "torch": "Muon's Newton-Schulz in bfloat16 (torch's own)",
    "torch, Muon f32": "Muon's Newton-Schulz in float32 matmuls, as limn multiplies",
    "torch.compile": "Muon in bfloat16",
}


def limn_child(start: Path, steps: int, device: str) -> dict:
    import train_stories
    from stories_data import open_corpus

    import limn
    from limn import serialize

    limn.set_device(device)
    run = train_stories.Run(train_stories.Settings(steps=steps), open_corpus(None))
    serialize.load_into(start, run.model.torch_state_dict())
    first, steady = 0.0, 0.0
    for step in range(steps):
        t0 = time.perf_counter()
        run.train_one()
        if step == 0:
            first = time.perf_counter() - t0
        else:
            steady += time.perf_counter() - t0
    return {"first_step_seconds": first, "steady_seconds": steady, "valid_loss": run.validate()}


def torch_child(start: Path, steps: int, threads: int, compiled: bool, muon_float32: bool) -> dict:
    import stories_torch
    import torch
    import train_stories
    from stories_data import open_corpus

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    settings = train_stories.Settings(steps=steps)
    corpus = open_corpus(None)
    model = stories_torch.from_checkpoint(start, settings.config)
    factor = train_stories.Run.lr_factor.__get__(type("Run", (), {"settings": settings})())
    with stories_torch.muon_in_float32() if muon_float32 else contextlib.nullcontext():
        result = stories_torch.train(model, settings, corpus, factor, steps, compiled=compiled)
    return {
        "first_step_seconds": result["first_step_seconds"],
        "steady_seconds": result["steady_seconds"],
        "valid_loss": stories_torch.validate(model, settings, corpus),
    }


def child(kind: str, start: Path, steps: int, device: str, threads: int) -> None:
    if kind == "limn":
        result = limn_child(start, steps, device)
    else:
        result = torch_child(start, steps, threads, kind == "torch.compile", kind == "torch, Muon f32")
    result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def starting_weights(path: Path) -> None:
    """The default run's initial weights, drawn by limn on the numpy device, saved with torch's names."""
    import train_stories
    from stories_data import open_corpus

    from limn import serialize

    run = train_stories.Run(train_stories.Settings(), open_corpus(None))
    serialize.save(path, run.model.torch_state_dict())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600, help="the default run's 600")
    parser.add_argument("--device", default="c")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--start", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from limn.c.team import team_size

    threads = team_size()
    if args.child:
        child(args.child, Path(args.start), args.steps, args.device, threads)
        return
    from stories_gpt import Config
    from train_stories import Settings

    print(limits_header(args.device))
    settings = Settings(steps=args.steps)
    tokens = settings.batch * settings.config.context  # per step
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        start = Path(folder) / "start.safetensors"
        starting_weights(start)
        for kind in args.kinds:
            cmd = [sys.executable, __file__, "--child", kind, "--start", str(start), "--steps", str(args.steps)]
            done = subprocess.run([*cmd, "--device", args.device], capture_output=True, text=True)
            if done.returncode != 0:
                reason = (done.stderr.strip().splitlines() or ["no output"])[-1][:60]
                rows.append([kind, "failed", "-", "-", "-", reason])
                continue
            r = json.loads(done.stdout.strip().splitlines()[-1])
            rate = (args.steps - 1) * tokens / r["steady_seconds"]
            rows.append(
                [
                    kind,
                    f"{rate:,.0f}",
                    f"{r['first_step_seconds']:.1f}",
                    f"{r['valid_loss']:.3f}",
                    f"{r['peak_mb']:.0f}",
                    NOTES.get(kind, ""),
                ]
            )
    c: Config = settings.config
    print(
        f"train_stories' default run: {c.layers} layers x {c.heads} heads, width {c.width}, context {c.context}, "
        f"batch {settings.batch}, {args.steps} steps; limn on {args.device}, torch on the CPU; {threads} threads"
    )
    print(f"this CPU {'computes' if _native_bf16() else 'emulates'} bfloat16 matmuls (avx512_bf16 or amx_bf16)")
    print(table(["kind", "tokens/s", "first step (s)", "val loss", "peak MB", "note"], rows))


def _native_bf16() -> bool:
    """Whether the CPU has bfloat16 arithmetic (torch's bf16 matmuls run natively, not emulated)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


if __name__ == "__main__":
    main()
