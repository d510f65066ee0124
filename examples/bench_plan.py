"""What a new graph shape costs with every kernel already compiled: greedy generation, one token at a time.

    uv run python examples/bench_plan.py [--tokens 24] [--prompt 8]

The model is examples/bench_step.py's GPT (byte vocabulary, d_model 128, 4 layers of 4 heads). Generating
without a kv cache runs a forward of the whole context per token, so each token is a graph of a new shape:
a new plan to schedule, lower, render and look up, though every kernel of it is in the disk cache after one
run. Child processes generate the same tokens over a kernel cache of their own (a temporary LIMN_CACHE_DIR):
the first fills it; the second, its in-process plan and program caches cold and the plan index emptied (so
each shape is planned, as a shape no process has seen is), is the one measured. It reports per token (per
new shape) the ms spent building the graph, in each planning phase, and running the kernels, beside torch's
ms per token; and a third run's total per token where the plan index holds every shape (a shape an earlier
process planned: loaded, not scheduled).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _bench import in_own_process, median_seconds, only_this, table
from _limits import limits_header
from bench_step import CONTEXT, D_MODEL, DATA, HEADS, LAYERS, limn_gpt, torch_gpt

# what one token's time is split into, in the order a new plan meets them (PhaseClock says what each times)
PHASES = ["graph", "key", "schedule", "lower", "render", "load", "run", "other"]
MEANING = {
    "graph": "building the graph (Python tensor ops)",
    "key": "toposort, structure key and plan-cache lookup",
    "schedule": "limn.compiler.schedule: fusion and kernels",
    "lower": "limn.compiler.codegen: loop-nest IR",
    "render": "rendering C",
    "load": "program cache: hashing sources, finding and loading libraries",
    "run": "running the plan's kernels",
    "other": "the rest of realize() and reading the logits",
}


def prompt_bytes(length: int) -> np.ndarray:
    return np.frombuffer(DATA.read_bytes()[:length], dtype=np.uint8).astype(np.int32)


# ---- limn ----


def limn_generate(tokens: int, prompt: np.ndarray, device: str, on_token: Callable[[int, float], None]) -> list[int]:
    """Greedy generation with limn: each token a forward of the whole context (no kv cache)."""
    limn, GPT = limn_gpt()
    from limn import Tensor

    limn.set_device(device)
    limn.manual_seed(0)
    model = GPT()

    def forward(idx: Tensor) -> Tensor:
        t = idx.shape[1]
        x = model.wte(idx) + model.wpe(model.positions[:t])  # (1, T, C)
        causal = model.causal[:t, :t]  # (T, T)
        for block in model.blocks:
            x = block(x, causal)
        return model.head(model.ln_f(x))[0, -1]  # (vocab,): the next byte's logits

    context = list(prompt)
    for _ in range(tokens):
        start = time.perf_counter()
        logits = forward(Tensor(np.array([context], dtype=np.int32)))
        on_token(len(context), time.perf_counter() - start)  # the graph is built, nothing has run
        context.append(int(np.argmax(logits.numpy())))
    return context[len(prompt) :]


class PhaseClock:
    """Seconds spent per phase: wraps the functions each phase runs in (limn.compiler.jit's and the c device's) with
    a timer. A phase timed inside another (rendering inside the program lookup) counts for itself only."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.open: list[str] = []  # the phases being timed, innermost last

    def wrap(self, owner: object, attr: str, phase: str) -> None:
        inner = getattr(owner, attr)

        def timed(*args, **kwargs):
            self.open.append(phase)
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                self.open.pop()
                self.seconds[phase] += spent
                if self.open:
                    self.seconds[self.open[-1]] -= spent

        setattr(owner, attr, timed)

    def install(self) -> None:
        import limn.compiler.jit
        from limn.c.device import CDevice

        self.wrap(limn.compiler.jit, "toposort", "key")
        self.wrap(limn.compiler.jit, "structure_key", "key")
        self.wrap(limn.compiler.jit, "schedule", "schedule")
        self.wrap(limn.compiler.jit, "lower_schedule", "lower")
        self.wrap(CDevice, "render", "render")
        self.wrap(limn.compiler.jit.CompiledDevice, "_programs", "load")
        self.wrap(limn.compiler.jit.CompiledDevice, "run_plan", "run")


def run_limn(tokens: int, prompt: int, device: str, profile: bool) -> dict:
    """One generation in this process: the tokens, and per token the seconds of each phase and in all."""
    clock = PhaseClock()
    clock.install()
    starts: list[float] = []  # when each token's forward began, then when the last one ended
    graph: list[float] = []
    phase_marks: list[dict[str, float]] = []  # the clock's totals as each token's graph is built

    def on_token(t: int, seconds: float) -> None:
        starts.append(time.perf_counter() - seconds)
        graph.append(seconds)
        phase_marks.append(dict(clock.seconds))

    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        profiler.enable()
    out = limn_generate(tokens, prompt_bytes(prompt), device, on_token)
    starts.append(time.perf_counter())
    phase_marks.append(dict(clock.seconds))
    if profiler is not None:
        profiler.disable()
    per_token, totals = [], []
    for i in range(tokens):
        phases = {p: phase_marks[i + 1][p] - phase_marks[i][p] for p in PHASES}
        phases["graph"] = graph[i]
        total = starts[i + 1] - starts[i]
        phases["other"] = total - sum(phases[p] for p in PHASES if p != "other")
        per_token.append(phases)
        totals.append(total)
    result = {"tokens": out, "per_token": per_token, "totals": totals}
    if profiler is not None:
        text = io.StringIO()
        for order in ("cumulative", "tottime"):
            pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(40)
        result["profile"] = text.getvalue()
    return result


# ---- torch ----


def torch_seconds_per_token(tokens: int, prompt: int, threads: int) -> float:
    """torch's greedy generation of the same model (CPU, eager, no kv cache): median seconds per token. Its
    weights are its own, so its tokens are too; the contexts have the same lengths."""
    torch, GPT = torch_gpt()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = GPT().eval()

    def generate() -> list[int]:
        context = list(prompt_bytes(prompt))
        with torch.no_grad():
            for _ in range(tokens):
                logits = model(torch.tensor([context]))[0, -1]
                context.append(int(logits.argmax()))
        return context[prompt:]

    return median_seconds(generate, repeats=3) / tokens


# ---- the report ----


def child(tokens: int, prompt: int, device: str, profile: bool) -> None:
    print(json.dumps(run_limn(tokens, prompt, device, profile)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=24, help="tokens generated, each a new shape")
    parser.add_argument("--prompt", type=int, default=8, help="bytes of TinyStories the context starts from")
    parser.add_argument("--device", default="c")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of the warm run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=("torch",), help=argparse.SUPPRESS)  # torch's own process
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only == "torch":
        return only_this({"seconds": torch_seconds_per_token(args.tokens, args.prompt, args.threads)})
    if args.prompt + args.tokens > CONTEXT:
        parser.error(f"--prompt + --tokens must be at most the model's context, {CONTEXT}")
    if args.child:
        child(args.tokens, args.prompt, args.device, args.profile)
        return
    import limn
    from limn.c.team import team_size

    threads = team_size()
    print(limits_header(args.device))
    toolchain = getattr(limn.get_device(args.device), "toolchain", None)
    isa = f"ISA {toolchain.isa.name}, " if toolchain is not None else ""
    runs = []
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "LIMN_CACHE_DIR": cache}
        # the first fills the cache; the second, the plan index emptied, is measured; the third loads every plan
        for profile, forget_plans in ((False, False), (args.profile, True), (False, False)):
            if forget_plans:
                shutil.rmtree(Path(cache) / "plans", ignore_errors=True)
            cmd = [sys.executable, __file__, "--child", "--tokens", str(args.tokens), "--prompt", str(args.prompt)]
            cmd += ["--device", args.device] + (["--profile"] if profile else [])
            done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=Path(__file__).parent, env=env)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    cold, warm, indexed = runs
    assert cold["tokens"] == warm["tokens"], "the two limn runs generated different tokens"
    argv = ["--tokens", str(args.tokens), "--prompt", str(args.prompt), "--threads", str(threads)]
    torch_per_token = in_own_process(__file__, "torch", argv)["seconds"]  # no limn threads beside torch's
    ms = {p: statistics.median(t[p] for t in warm["per_token"]) * 1e3 for p in PHASES}
    total = statistics.median(warm["totals"]) * 1e3
    planning = ms["key"] + ms["schedule"] + ms["lower"] + ms["render"] + ms["load"]
    print(
        f"greedy generation, GPT of examples/bench_step.py (d_model {D_MODEL}, {LAYERS} layers x {HEADS} heads); "
        f"context {args.prompt} -> {args.prompt + args.tokens}, each token a new shape; {isa}{threads} threads"
    )
    print(f"limn {args.device}, every kernel in the disk cache, plan caches and plan index cold: median ms per token")
    rows = [[p, f"{ms[p]:.1f}", MEANING[p]] for p in PHASES]
    rows.append(["planning", f"{planning:.1f}", "key + schedule + lower + render + load (medians summed)"])
    rows.append(["total", f"{total:.1f}", "per token, graph to argmax"])
    rows.append(
        [
            "first run",
            f"{statistics.median(cold['totals']) * 1e3:.1f}",
            "per token, compiling what the disk cache lacked",
        ]
    )
    rows.append(
        [
            "planned before",
            f"{statistics.median(indexed['totals']) * 1e3:.1f}",
            "per token, every shape's plan in the plan index (an earlier process planned it)",
        ]
    )
    rows.append(["torch", f"{torch_per_token * 1e3:.1f}", "torch CPU eager, same model and context"])
    print(table(["phase", "ms", "what"], rows))
    print(f"limn / torch per token: {total / (torch_per_token * 1e3):.1f}x")
    if args.profile:
        print(warm["profile"])


if __name__ == "__main__":
    main()
