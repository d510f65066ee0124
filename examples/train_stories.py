"""Train a byte-level GPT on TinyStories, then let it write a story: limn's main example.

    uv run python examples/train_stories.py                       # about two minutes on a 2-core CPU
    uv run python examples/train_stories.py --data ~/tinystories  # the full TinyStories-{train,valid}.txt
    uv run python examples/train_stories.py --full --data ~/tinystories   # the long run: a bigger model
    uv run python examples/train_stories.py --resume runs/stories/ckpt.safetensors
    uv run mpiexec -n 2 python examples/train_stories.py --distributed     # data parallel: 2 ranks, one batch
    uv run python examples/train_stories.py --sample runs/stories/ckpt.safetensors --prompt "Once upon" \
        --tokens 500 --temperature 0.8 --top-k 40 --sample-seed 1

The model is examples/stories_gpt.py (nanoGPT's layout, fused attention, a tied head). Muon steps the hidden
matrices and AdamW the rest, as one Chain, with a linear warmup and a cosine decay of both learning rates and
the gradients clipped to a global norm of 1; the whole step is captured (limn.capture), so after the first step
no Python graph is built. Every --eval-every steps the validation loss is measured; every --checkpoint-every
steps and at the end one safetensors file holds the weights (torch's names), the optimizer state, the random
generator and the run's history, so --resume continues exactly where the run stopped (the same losses, bit for
bit, on the same device). At the end it writes loss.svg (drawn by limn.diagram.plot) and samples a story through a
KV cache, one captured one-byte step per byte.

--distributed trains data-parallel on the ranks mpiexec started (limn.distributed; a process started alone is a
world of one): every rank draws the same global batch of --batch rows and computes on its share, the gradients
are averaged between backward and the clip, and every rank takes the same step, so N ranks give the losses one
process gives for the same batch (with --dropout 0: each rank draws its own dropout masks). Rank 0 prints,
writes the checkpoint and loss.svg; any world size resumes from it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from stories_data import Corpus, DataError, open_corpus
from stories_gpt import GPT, Config

import limn
from limn import Tensor, nn, optim, serialize
from limn.capture import capture
from limn.composed.random.rng import Generator, default_generator
from limn.diagram import plot

try:  # limn-dist is needed for --distributed only: the single-process run works without it
    from limn import distributed as dist
    from limn.distributed.parallel import DataParallel
    from limn.distributed.transport import describe
except ImportError as missing:
    dist = None
    DIST_MISSING = str(missing)

FULL = Config(context=256, layers=6, heads=6, width=384, dropout=0.1)
MODEL_ARGS = ("context", "layers", "heads", "width", "dropout")  # the command line's names for Config's fields


class UserError(Exception):
    """A mistake in what the script was asked to do: printed as one line, exit status 2."""


# ---- the run's settings and what it keeps ----


@dataclass
class Settings:
    config: Config = field(default_factory=Config)
    steps: int = 600
    batch: int = 16
    warmup: int = 60
    muon_lr: float = 0.02
    adam_lr: float = 3e-3
    clip: float = 1.0
    eval_every: int = 100
    eval_batches: int = 8
    checkpoint_every: int = 200
    seed: int = 0


@dataclass
class History:
    """The losses so far: (step, tokens seen, loss) for train (every step) and validation (when measured)."""

    train: list[tuple[int, int, float]] = field(default_factory=list)
    valid: list[tuple[int, int, float]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"train": self.train, "valid": self.valid})

    @classmethod
    def from_json(cls, text: str) -> History:
        data = serialize.fields.json_object(text)
        try:
            return cls([tuple(r) for r in data["train"]], [tuple(r) for r in data["valid"]])
        except (KeyError, TypeError) as e:
            raise ValueError("not a history: an object of 'train' and 'valid' lists") from e


class Run:
    """A model, its optimizers and schedule, the data and the captured steps: one training run, in this process
    alone or (distributed) as one rank of limn.distributed's world."""

    def __init__(self, settings: Settings, corpus: Corpus, distributed: bool = False) -> None:
        self.settings, self.corpus = settings, corpus
        corpus.check(settings.config.context)
        limn.manual_seed(settings.seed)
        self.model = GPT(settings.config)
        named = list(self.model.named_parameters())
        hidden = [(n, p) for n, p in named if p.ndim == 2 and n.startswith("transformer.h.")]
        rest = [(n, p) for n, p in named if not (p.ndim == 2 and n.startswith("transformer.h."))]
        self.optimizer = optim.Chain(
            optim.Muon(hidden, lr=settings.muon_lr, weight_decay=0.0),
            optim.AdamW(rest, lr=settings.adam_lr, betas=(0.9, 0.95), weight_decay=0.0),
        )
        self.schedule = optim.lr_scheduler.LambdaLR(self.optimizer, self.lr_factor)
        self.generator = default_generator()  # dropout draws from it: a checkpoint keeps its counter
        self.history = History()
        self.step_count = 0
        self.train_step = capture(self._train_step)
        self.eval_step = capture(self._eval_step)
        self.parallel: DataParallel | None = None
        if distributed:
            self._join_world(named)

    # ---- data parallel ----

    def _join_world(self, named: list[tuple[str, Tensor]]) -> None:
        """Rank 0's weights on every rank, a dropout stream of each rank's own, and the step split in two
        captured halves around the gradients' allreduce (which runs on the host, between them)."""
        dist.init()  # idempotent: main() has joined already
        if dist.rank() > 0:  # the same masks on every shard would be one mask drawn N times: nanoGPT seeds per rank
            self.generator.manual_seed(
                int(np.random.SeedSequence([self.settings.seed, dist.rank()]).generate_state(1)[0])
            )
        # the counter too: every rank draws as many numbers per step, so one saved counter resumes them all
        dist.broadcast_parameters({**dict(named), "rng.counter": self.generator.counter})
        self.parallel = DataParallel(named)
        self.forward_backward = capture(self._forward_backward)
        self.update = capture(self._update)

    def _forward_backward(self, x: Tensor, y: Tensor) -> tuple[Tensor, ...]:
        logits = self.model(x)  # (B / N, T, 256): this rank's share of the batch
        loss = logits.reshape(-1, logits.shape[-1]).cross_entropy(y.reshape(-1))
        loss.backward()
        return (loss, *[p.grad for p in self.parallel.params])  # realized together: one run

    def _update(self) -> None:
        # reads the DataParallel's gradient tensors, which keep their buffers from step to step: state the
        # recording reads like the optimizer's own
        nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.clip)
        self.optimizer.step()

    def _distributed_step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One step on this rank's share of the global batch (x, y); the loss of the whole batch."""
        self.optimizer.zero_grad()  # backward accumulates: an eager call (the recording) starts from none
        loss, *grads = self.forward_backward(Tensor(dist.shard_rows(x)), Tensor(dist.shard_rows(y)))
        for p, g in zip(self.parallel.params, grads):  # a replay runs no backward(): the grads are its outputs
            p.grad = g
        self.parallel.reduce_gradients()  # every rank now holds the mean gradient of the global batch
        self.update()
        return dist.all_reduce([loss], "mean")[0].item()  # equal shares: the mean of the means is the mean

    @property
    def is_root(self) -> bool:
        """Whether this process prints and writes files: always alone, rank 0 of a world."""
        return self.parallel is None or dist.rank() == 0

    def lr_factor(self, step: int) -> float:
        """A linear warmup to the full rate, then a cosine decay to a tenth of it at the last step."""
        s = self.settings
        if step < s.warmup:
            return (step + 1) / s.warmup
        progress = min(1.0, (step - s.warmup) / max(1, s.steps - s.warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    def _train_step(self, x: Tensor, y: Tensor) -> Tensor:
        logits = self.model(x)  # (B, T, 256)
        loss = logits.reshape(-1, logits.shape[-1]).cross_entropy(y.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), self.settings.clip)
        self.optimizer.step(loss)  # every update and the loss in one realize()
        return loss

    def _eval_step(self, x: Tensor, y: Tensor) -> Tensor:
        self.model.eval()
        with limn.no_grad():
            logits = self.model(x)
            loss = logits.reshape(-1, logits.shape[-1]).cross_entropy(y.reshape(-1))
        self.model.train()
        return loss.realize()

    def tokens(self, step: int) -> int:
        return step * self.settings.batch * self.settings.config.context

    def train_one(self) -> float:
        s = self.settings
        x, y = self.corpus.batch("train", s.batch, s.config.context, s.seed, self.step_count)
        if self.parallel is None:
            loss = self.train_step(Tensor(x), Tensor(y)).item()
        else:
            loss = self._distributed_step(x, y)
        self.step_count += 1
        self.schedule.step()
        self.history.train.append((self.step_count, self.tokens(self.step_count), loss))
        return loss

    def validate(self) -> float:
        s = self.settings
        losses = []
        for k in range(s.eval_batches):
            x, y = self.corpus.batch("valid", s.batch, s.config.context, s.seed, k)
            if self.parallel is not None:
                x, y = dist.shard_rows(x), dist.shard_rows(y)
            losses.append(self.eval_step(Tensor(x), Tensor(y)).item())
        loss = float(np.mean(losses))
        if self.parallel is not None:  # each rank's mean over its shares: their mean is the whole batches' mean
            loss = dist.all_reduce([Tensor(np.array([loss]), dtype="float64")], "mean")[0].item()
        self.history.valid.append((self.step_count, self.tokens(self.step_count), loss))
        return loss

    # ---- checkpoints ----

    def state(self) -> dict[str, Tensor]:
        """Everything a resumed run needs: the weights under torch's names, the optimizer state, the
        generator's counter."""
        return {
            **self.model.torch_state_dict(),
            **self.optimizer.state_dict(),
            "rng.counter": self.generator.counter,
        }

    def save(self, path: Path) -> None:
        """The checkpoint, written once: by this process, or by rank 0 while the other ranks wait."""
        if self.parallel is None:
            self._write(path)
        else:
            dist.on_root(lambda: self._write(path))

    def _write(self, path: Path) -> None:
        metadata = {
            **self.settings.config.as_metadata(),
            "step": str(self.step_count),
            "settings": json.dumps({k: v for k, v in vars(self.settings).items() if k != "config"}),
            "history": self.history.to_json(),
            "schedule": json.dumps(self.schedule.state_dict()),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        serialize.save(path, self.state(), metadata)  # atomic: a temp file renamed over the old one

    def load(self, path: Path) -> None:
        """The state of the checkpoint at `path`, written into this run's own tensors (nothing is loaded
        when a name or shape differs: the error lists them)."""
        serialize.load_into(path, self.state())
        fields = checkpoint_fields(path)
        self.step_count = fields["step"]
        self.history = fields["history"]
        self.schedule.load_state_dict(fields["schedule"])


# what a train_stories checkpoint keeps in its metadata, each with the parser that checks it
CHECKPOINT_FIELDS = {
    "step": serialize.fields.natural,
    "settings": serialize.fields.json_object,
    "history": History.from_json,
    "schedule": serialize.fields.json_object,
    **{name: serialize.fields.positive for name in ("context", "layers", "heads", "width")},
    "dropout": serialize.fields.rate,
}


def checkpoint_fields(path: Path) -> dict:
    """The checkpoint's metadata, every field checked (serialize.read_fields): a CheckpointError names the
    file and the key of the first that cannot be used, for --resume and --sample alike."""
    try:
        metadata = serialize.read_metadata(path)
    except (OSError, ValueError) as e:  # missing, a folder, a FIFO or device, not safetensors
        raise UserError(f"{path}: cannot read the checkpoint: {e}") from e
    fields = serialize.read_fields(path, metadata, CHECKPOINT_FIELDS)
    if fields["width"] % fields["heads"]:
        raise serialize.CheckpointError(
            f"{path}: metadata 'heads' {fields['heads']} does not divide 'width' {fields['width']}; the checkpoint "
            "is damaged"
        )
    return fields


def settings_of_checkpoint(path: Path, overrides: dict) -> Settings:
    fields = checkpoint_fields(path)
    config = Config(**{name: fields[name] for name in MODEL_ARGS})
    try:
        return Settings(config=config, **{**fields["settings"], **overrides})
    except TypeError as e:  # a settings object with other keys than a run's
        raise serialize.CheckpointError(f"{path}: metadata 'settings' does not hold a run's settings ({e})") from e


# ---- sampling ----


def sample_next(logits: Tensor, temperature: float, top_k: int | None, generator: Generator) -> Tensor:
    """One byte per row of logits (B, 256): the top_k most likely (all when None), drawn from the softmax of
    logits / temperature; (B, 1) int32. temperature 0 takes the most likely byte."""
    if temperature == 0:
        return logits.argmax(-1, keepdim=True).cast("int32")
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(top_k, -1).values[:, -1:]  # (B, 1): the k-th largest
        logits = (logits < kth).where(float("-inf"), logits)
    return logits.softmax(-1).multinomial(1, generator=generator).cast("int32")


class Sampler:
    """A model's generation steps at one temperature and top_k on one device: its KV caches, a device generator,
    and the captured steps (the prompt's, one per padded length, and the one-byte step). generate() keeps the
    last one it made and reuses it for the same model and settings, so a second generation records nothing
    (recording costs 40 to 55 ms, a fifth of a 200-byte generation's time). The captured steps read the
    parameters' buffers as they are at each replay: training in between is seen."""

    def __init__(self, model: GPT, temperature: float, top_k: int | None) -> None:
        self.model, self.key = model, (limn.current_device(), temperature, top_k)
        self.caches = model.caches()
        self.generator = Generator(0, limn.current_device())
        self.prefills: dict[int, Callable] = {}  # a captured step per padded length
        self.advance = capture(
            lambda idx, pos: sample_next(model.step(idx, pos, self.caches), temperature, top_k, self.generator)
        )

    def prefill(self, window: list[int]) -> None:
        """The caches filled with every byte of the window but its last, which the next step feeds, in one step
        padded to a power of two, so a handful of graphs serve a prompt of any length. The padding fills slots
        no step reads before it writes them: a byte's step writes its slot, and reads up to it."""
        n = len(window) - 1
        if n == 0:
            return
        length = min(self.model.config.context, 1 << (n - 1).bit_length())
        if length not in self.prefills:
            self.prefills[length] = capture(lambda idx, pos: self.model.step(idx, pos, self.caches).realize())
        self.prefills[length](_bytes(window[:-1] + [0] * (length - n)), _position(0))


_sampler: Sampler | None = None  # the last one generate() made: one model's steps kept, not every model's


def generate(model: GPT, prompt: bytes, count: int, temperature: float, top_k: int | None, seed: int, echo=None):
    """`count` bytes after `prompt`, one captured one-byte step each against the model's KV caches. The prompt
    goes in as one step of many positions, and so does the last half of a full context, which refills the
    caches. echo(byte) is called as each comes."""
    global _sampler
    model.eval()
    context = model.config.context
    if _sampler is None or _sampler.model is not model or _sampler.key != (limn.current_device(), temperature, top_k):
        _sampler = None  # the old steps go before the new ones record
        _sampler = Sampler(model, temperature, top_k)
    sampler = _sampler
    sampler.generator.manual_seed(seed)
    with limn.no_grad():
        window, filled, out = list(prompt or b"\n"), False, []
        for _ in range(count):
            if len(window) > context:  # full (or a prompt past it): start again from the last half of the context
                window, filled = window[-max(1, context // 2) :], False
            if not filled:
                sampler.prefill(window)
                filled = True
            nxt = int(sampler.advance(_bytes(window[-1:]), _position(len(window) - 1)).item())
            window.append(nxt)
            out.append(nxt)
            if echo is not None:
                echo(nxt)
    model.train()
    return bytes(out)


def _bytes(values: list[int]) -> Tensor:
    return Tensor(np.array([values], np.int32))  # (1, T)


def _position(value: int) -> Tensor:
    return Tensor(np.array(value, np.int32))


# ---- the command line ----


def choose_device(name: str | None) -> str:
    """The device asked for, or the best one installed: cuda, c, numpy."""
    if name is not None:
        try:
            limn.set_device(name)
        except limn.DeviceError as e:
            raise UserError(str(e)) from e
        return name
    for candidate in ("cuda", "c"):
        if candidate in limn.devices():
            try:
                limn.set_device(candidate)
                return candidate
            except limn.DeviceError:
                continue
    limn.set_device("numpy")
    return "numpy"


def clock(seconds: float) -> str:
    """m:ss, or h:mm:ss past an hour."""
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}" if minutes >= 60 else f"{minutes}:{secs:02d}"


def train(run: Run, out: Path, log=None) -> dict:
    """Trains from run.step_count to its last step, logging a line per eval interval (and a live one between
    on a terminal; rank 0 only, distributed); returns the run's figures. tokens/s counts the training steps
    after the first (which compiles), not the validation passes, and the global batch of every rank together."""
    s = run.settings
    log = log or (lambda line: print(line, flush=True))  # flushed: a pipe or a log file sees each line now
    if not run.is_root:
        log = lambda line: None  # noqa: E731
    live = sys.stdout.isatty() and run.is_root
    start, first_step, training = time.perf_counter(), None, 0.0
    begin, val = run.step_count, float("nan")
    while run.step_count < s.steps:
        t0 = time.perf_counter()
        loss = run.train_one()
        if first_step is None:
            first_step = time.perf_counter() - t0
        else:
            training += time.perf_counter() - t0
        steady = run.step_count - begin - 1
        rate = steady * s.batch * s.config.context / training if steady else float("nan")
        measured = run.step_count % s.eval_every == 0 or run.step_count == s.steps
        if measured:
            val = run.validate()
        elapsed = time.perf_counter() - start
        per_step = elapsed / (run.step_count - begin)
        line = (
            f"step {run.step_count:>5}/{s.steps}  train {loss:.3f}  "
            + (f"val {val:.3f}  " if measured else " " * 11)
            + (f"{rate:>8,.0f} tok/s" if steady else f"{'(first step)':>14}")
            + f"  elapsed {clock(elapsed)}  eta {clock(per_step * (s.steps - run.step_count))}"
        )
        if measured:
            log(("\r" if live else "") + line)
        elif live:
            print("\r" + line, end="", flush=True)
        if run.step_count % s.checkpoint_every == 0 or run.step_count == s.steps:
            run.save(out / "ckpt.safetensors")
    steady = run.step_count - begin - 1
    return {
        "steps": run.step_count - begin,
        "seconds": time.perf_counter() - start,
        "first_step_seconds": first_step,
        "tokens_per_second": steady * s.batch * s.config.context / training if steady else float("nan"),
        "train_loss": run.history.train[-1][2] if run.history.train else float("nan"),
        "valid_loss": run.history.valid[-1][2] if run.history.valid else float("nan"),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def write_loss_svg(history: History, path: Path) -> None:
    series = {"train": ([t for _, t, _ in history.train], [v for _, _, v in history.train])}
    if history.valid:
        series["validation"] = ([t for _, t, _ in history.valid], [v for _, _, v in history.valid])
    chart = plot.line_chart(series, title="train_stories", x_label="tokens seen", y_label="loss (nats per byte)")
    chart.save(path)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", help="numpy, c, cuda (default: the best installed)")
    p.add_argument("--data", help="a folder with TinyStories-train.txt and -valid.txt, or one text file")
    p.add_argument("--full", action="store_true", help="the long run: 6 layers of width 384, context 256")
    p.add_argument("--steps", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--context", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--dropout", type=float)
    p.add_argument("--eval-every", type=int)
    p.add_argument("--checkpoint-every", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--out", default="runs/stories", help="where the checkpoint and loss.svg go")
    p.add_argument("--resume", help="a checkpoint to continue from")
    p.add_argument("--sample", help="a checkpoint to generate from (no training)")
    p.add_argument("--prompt", default="Once upon a time")
    p.add_argument("--tokens", type=int, default=300, help="bytes to generate")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=40, help="sample among the k likeliest bytes (0: all of them)")
    p.add_argument("--sample-seed", type=int, default=0, help="the seed of the sampler's random draws")
    p.add_argument(
        "--distributed", action="store_true", help="data parallel over mpiexec's ranks; --batch is the global batch"
    )
    return p.parse_args(argv)


def settings_of(args: argparse.Namespace) -> Settings:
    base = Settings(config=FULL, steps=20000, batch=32, warmup=500, eval_every=500) if args.full else Settings()
    config = config_of(base.config, {k: getattr(args, k) for k in MODEL_ARGS if getattr(args, k) is not None})
    chosen = {k: getattr(args, k) for k in ("steps", "batch", "eval_every", "checkpoint_every", "seed")}
    return replace(base, config=config, **{k: v for k, v in chosen.items() if v is not None})


def check_arguments(args: argparse.Namespace) -> None:
    """The command line's numbers, before anything is built: a UserError naming the first that cannot be used."""
    at_least_one = ("steps", "batch", "context", "layers", "heads", "width", "eval_every", "checkpoint_every")
    for name in at_least_one:
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UserError(f"--{name.replace('_', '-')} {value}: it must be at least 1")
    if args.dropout is not None and not 0 <= args.dropout < 1:
        raise UserError(f"--dropout {args.dropout}: a rate in [0, 1)")
    if args.tokens < 0 or args.temperature < 0 or not 0 <= args.top_k <= 256:
        raise UserError(
            f"--tokens {args.tokens}, --temperature {args.temperature}, --top-k {args.top_k}: tokens and temperature "
            "are at least 0, top-k is 0 (every byte) to 256"
        )
    launched = launched_ranks()
    if launched > 1 and not args.distributed:
        raise UserError(
            f"started as one of {launched} ranks (mpiexec) without --distributed: each would train alone and write "
            "the same checkpoint; add --distributed"
        )
    if args.distributed and args.sample:
        raise UserError("--sample generates in one process: drop --distributed (and mpiexec)")
    try:
        args.prompt.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UserError(f"--prompt: byte {e.object[e.start]!r} is not UTF-8 text; pass the prompt in UTF-8") from e


def check_out(out: Path) -> None:
    """--out must be a folder this process can write, found before any training."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file, not a folder; name a folder for the checkpoint and loss.svg")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / f".write-test-{os.getpid()}").touch()
        (out / f".write-test-{os.getpid()}").unlink()
    except OSError as e:
        raise UserError(f"--out {out}: cannot write there ({e.strerror}); name a writable folder") from e


def config_of(base: Config, changes: dict) -> Config:
    """base with the command line's changes to the model; heads that do not divide the width are refused."""
    width, heads = changes.get("width", base.width), changes.get("heads", base.heads)
    if width % heads:
        raise UserError(f"--heads {heads} does not divide the width {width}; pick --heads that divides --width")
    return replace(base, **changes)


def check_resume(settings: Settings, resumed_at: int | None) -> None:
    """A resumed run must have steps left to take."""
    if resumed_at is not None and resumed_at >= settings.steps:
        raise UserError(
            f"--resume: the checkpoint has trained {resumed_at} steps and the run asks for {settings.steps}; nothing "
            f"is left to train: pass --steps with more than {resumed_at} to train more"
        )


def launched_ranks() -> int:
    """How many ranks the MPI launcher started, from its environment (MPICH's Hydra, Open MPI), without
    joining the world; 1 when there is no launcher."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 1


def share_cores() -> int:
    """The c device's threads per rank: OMP_NUM_THREADS when set, else the cores divided among the ranks on
    this machine (each would start a team of one thread per core otherwise, and the teams would fight)."""
    if "OMP_NUM_THREADS" not in os.environ:
        local = os.environ.get("MPI_LOCALNRANKS") or os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE")
        here = int(local) if local and local.isdigit() else dist.world_size()
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // here))
    return int(os.environ["OMP_NUM_THREADS"].split(",")[0])


def check_batch(settings: Settings) -> None:
    if settings.batch % dist.world_size():
        raise UserError(
            f"--batch {settings.batch} (the global batch) does not split over {dist.world_size()} ranks; use a "
            f"multiple of {dist.world_size()}"
        )


def main(argv: list[str] | None = None) -> dict:
    args = arguments(argv)
    check_arguments(args)
    threads = None
    if args.distributed:
        if dist is None:
            raise UserError(f"--distributed needs limn-dist (pip install 'limn-dist[mpich]'): {DIST_MISSING}")
        dist.init()
        threads = share_cores()  # before the c device starts its team
    device = choose_device(args.device)
    out = Path(args.out)
    if args.sample:
        run = Run(settings_of_checkpoint(Path(args.sample), {}), open_corpus(args.data))
        run.load(Path(args.sample))
        return {"text": stream(run.model, args)}
    if args.resume:  # the checkpoint's settings, but for what the command line changes
        overrides = {k: getattr(args, k) for k in ("steps", "eval_every", "checkpoint_every") if getattr(args, k)}
        saved = settings_of_checkpoint(Path(args.resume), overrides)
        shape = {k: getattr(args, k) for k in MODEL_ARGS if getattr(args, k) is not None}
        settings = replace(saved, config=config_of(saved.config, shape))
    else:
        settings = settings_of(args)
    check_resume(settings, checkpoint_fields(Path(args.resume))["step"] if args.resume else None)
    check_out(out)
    if args.distributed:
        check_batch(settings)
    run = Run(settings, open_corpus(args.data), distributed=args.distributed)
    if args.resume:
        run.load(Path(args.resume))  # a model of another shape: the error lists every mismatch
    say = print if run.is_root else lambda *_: None
    c = run.settings.config
    params = sum(p.size for p in run.model.parameters())
    say(
        f"GPT of {params / 1e6:.2f}M parameters ({c.layers} layers, {c.heads} heads, width {c.width}, context "
        f"{c.context}, head tied to the embedding) on {device}; data: {run.corpus.source}, "
        f"{len(run.corpus.train):,} train and {len(run.corpus.valid):,} validation bytes"
    )
    if args.distributed:
        n = dist.world_size()
        say(
            f"data parallel over {n} rank{'s' if n > 1 else ''} ({threads} thread{'s' if threads > 1 else ''} each): "
            f"global batch {run.settings.batch}, {run.settings.batch // n} rows per rank; {describe(device)}"
        )
    if run.step_count:
        say(f"resumed at step {run.step_count} from {args.resume}")
    figures = train(run, out)
    if not run.is_root:
        return figures  # rank 0 draws the curve and samples the story
    report(run, figures, out, say)
    figures["text"] = stream(run.model, args)
    return figures


def report(run: Run, figures: dict, out: Path, say: Callable[[str], None]) -> None:
    """The end of a run on rank 0: the loss curve drawn, and a summary of the figures (said with `say`)."""
    write_loss_svg(run.history, out / "loss.svg")
    rate = figures["tokens_per_second"]
    steady = "no step after the first to time" if math.isnan(rate) else f"{rate:,.0f} tok/s"
    say(
        f"done: {figures['steps']} steps in {clock(figures['seconds'])}, {steady} "
        f"after a first step of {figures['first_step_seconds']:.1f} s; train loss {figures['train_loss']:.3f}, "
        f"validation {figures['valid_loss']:.3f}; peak memory {figures['peak_mb']:.0f} MB"
    )
    if run.parallel is not None:
        stats = run.parallel.stats
        per_step = stats.seconds / max(1, stats.steps)
        say(f"collectives: {per_step * 1e3:.1f} ms and {stats.bytes_per_step:,.0f} bytes reduced per step")
    say(f"checkpoint {out / 'ckpt.safetensors'}, loss curve {out / 'loss.svg'}")


def stream(model: GPT, args: argparse.Namespace) -> bytes:
    """Generates after the prompt, printing bytes as they come."""
    sys.stdout.write(f"\n{args.prompt}")
    sys.stdout.flush()

    def echo(byte: int) -> None:
        sys.stdout.buffer.write(bytes([byte]))
        sys.stdout.flush()

    top_k = args.top_k or None
    start = time.perf_counter()
    text = generate(model, args.prompt.encode(), args.tokens, args.temperature, top_k, args.sample_seed, echo)
    seconds = time.perf_counter() - start
    print(f"\n({len(text)} bytes in {seconds:.1f} s, {len(text) / seconds:.0f} bytes/s, first step's compile included)")
    return text


def say_error(message: str) -> None:
    """One line on stderr in one write: under mpiexec each rank's line must arrive whole, not interleaved."""
    sys.stderr.write(f"train_stories: error: {message}\n")
    sys.stderr.flush()


def cli(argv: list[str] | None = None) -> int:
    """The command line: main(), with a user's mistake told in one line on stderr and exit status 2."""
    try:
        main(argv)
    except (UserError, DataError, limn.DeviceError, serialize.CheckpointError) as e:
        say_error(str(e))
        return 2
    except ValueError as e:
        if "does not match the tensors" not in str(e):
            raise
        say_error(f"the checkpoint does not fit this model: {e}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli())
