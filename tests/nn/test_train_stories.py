"""examples/train_stories.py, the README's main example, in a short mode (a one- or two-layer GPT, a few dozen steps):
- the loss falls, the checkpoint and loss.svg are written (the SVG parses, with a line per split);
- a run stopped at a checkpoint and resumed with --resume gives the uninterrupted run's losses bit for bit;
- the checkpoint's weights load into the same model written in torch (safetensors' loader, torch's names) and
  give limn's logits within 1e-4;
- sampling with a seed repeats, a top-k draw never leaves the top k, and generation through the KV cache gives
  the bytes a full forward per byte gives, token for token;
- the model trained in torch from the same weights (Muon + AdamW, warmup + cosine, the clip) follows limn's loss
  curve over 100 steps, on numpy and c (marked `train`: nox -s train runs it, and CI runs that);
- user mistakes (missing data, an unknown device, a checkpoint of another shape) end in one line and exit 2;
- on a terminal, the first step with an empty kernel cache shows the compile progress line (`train`).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch

import limn
from limn import Tensor, serialize

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
import stories_gpt  # noqa: E402
import stories_torch  # noqa: E402
import train_stories  # noqa: E402
from stories_data import open_corpus  # noqa: E402

TINY = ["--layers", "1", "--heads", "2", "--width", "32", "--context", "32", "--batch", "8"]


def settings(steps: int, dropout: float = 0.1, layers: int = 1, **kw) -> train_stories.Settings:
    config = stories_gpt.Config(context=32, layers=layers, heads=2, width=32, dropout=dropout)
    return train_stories.Settings(config=config, steps=steps, batch=8, warmup=5, eval_every=10, **kw)


@pytest.fixture
def on_c():
    limn.set_device("c")
    yield "c"
    limn.set_device("numpy")


@pytest.mark.train
def test_a_short_run_lowers_the_loss_and_writes_a_checkpoint_and_its_curve(tmp_path, on_c, capsys):
    args = [*TINY, "--steps", "40", "--eval-every", "20", "--device", "c", "--out", str(tmp_path), "--tokens", "8"]
    figures = train_stories.main(args)
    out = capsys.readouterr().out
    assert "step    20/40" in out and "val " in out and "tok/s" in out and "eta" in out, out
    assert figures["train_loss"] < math.log(256) - 1.0, f"the loss did not fall: {figures}"
    assert (tmp_path / "ckpt.safetensors").is_file()
    svg = ET.parse(tmp_path / "loss.svg").getroot()
    names = {g.findtext("{http://www.w3.org/2000/svg}title") for g in svg.iter("{http://www.w3.org/2000/svg}g")}
    assert {"train", "validation"} <= names, names
    assert len(figures["text"]) == 8
    sampled = train_stories.main(["--sample", str(tmp_path / "ckpt.safetensors"), "--tokens", "8", "--device", "c"])
    assert sampled["text"] == figures["text"], "--sample from the final checkpoint, same seed: the same bytes"


@pytest.mark.train
def test_a_resumed_run_gives_the_uninterrupted_runs_losses_bit_for_bit(tmp_path, on_c):
    corpus = open_corpus(None)
    whole = train_stories.Run(settings(30, dropout=0.1), corpus)  # dropout on: the generator must resume too
    for _ in range(30):
        whole.train_one()
    first = train_stories.Run(settings(30, dropout=0.1), corpus)
    for _ in range(15):
        first.train_one()
    first.save(tmp_path / "ckpt.safetensors")
    args = ["--resume", str(tmp_path / "ckpt.safetensors"), "--out", str(tmp_path / "resumed"), "--tokens", "1"]
    train_stories.main([*args, "--device", "c"])
    resumed = train_stories.Run(settings(30, dropout=0.1), corpus)
    resumed.load(tmp_path / "resumed" / "ckpt.safetensors")
    got, want = [loss for _, _, loss in resumed.history.train], [loss for _, _, loss in whole.history.train]
    assert got == want, (
        f"resumed losses differ from step {next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)}"
    )


# ---- the same model in torch (examples/stories_torch.py) ----


def test_the_checkpoint_loads_in_torch_and_gives_limns_logits(tmp_path, on_c):
    run = train_stories.Run(settings(10), open_corpus(None))
    for _ in range(10):
        run.train_one()
    run.save(tmp_path / "ckpt.safetensors")
    x, _ = run.corpus.batch("valid", 4, 32, 0, 0)
    run.model.eval()
    want = run.model(Tensor(x)).numpy()
    model = stories_torch.from_checkpoint(tmp_path / "ckpt.safetensors", run.settings.config)
    model.eval()
    got = model(torch.from_numpy(x).long()).detach().numpy()
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


# ---- generation ----


@pytest.fixture(scope="module")
def trained():
    """A model trained a little, so its next-byte distributions are not uniform. On the numpy device, as the
    generation tests are: the full forward per byte is a graph of a new length each byte, which a compiled
    device would compile once each."""
    limn.set_device("numpy")
    run = train_stories.Run(settings(30), open_corpus(None))
    for _ in range(30):
        run.train_one()
    return run.model


def full_forward(model, prompt: bytes, count: int, temperature: float, top_k, seed: int):
    """The nanoGPT loop: a full forward over the context for every byte; also each step's logits."""
    generator = limn.composed.random.rng.Generator(seed, limn.current_device())
    model.eval()
    window, out, seen = list(prompt), [], []
    with limn.no_grad():
        for _ in range(count):
            logits = model(Tensor(np.array([window[-model.config.context :]], np.int32)))[:, -1]  # (1, 256)
            seen.append(logits.numpy()[0])
            nxt = int(train_stories.sample_next(logits, temperature, top_k, generator).item())
            window.append(nxt)
            out.append(nxt)
    model.train()
    return bytes(out), seen


@pytest.mark.train
def test_sampling_with_a_seed_repeats_and_top_k_stays_in_the_top_k(trained):
    a = train_stories.generate(trained, b"Once", 12, 1.0, 5, seed=3)
    b = train_stories.generate(trained, b"Once", 12, 1.0, 5, seed=3)
    assert a == b
    text, logits = full_forward(trained, b"Once", 12, 1.0, 5, seed=3)
    for k, (byte, row) in enumerate(zip(text, logits)):
        top = set(np.argsort(-row, kind="stable")[:5].tolist())
        assert byte in top, f"byte {k} ({byte}) is not among the top 5 {sorted(top)}"


@pytest.mark.train
@pytest.mark.parametrize("temperature, top_k", [(0.0, None), (0.8, 40)], ids=["greedy", "sampled"])
def test_kv_cache_generation_equals_a_full_forward_per_byte(trained, temperature, top_k):
    cached = train_stories.generate(trained, b"The cat", 20, temperature, top_k, seed=1)
    full, _ = full_forward(trained, b"The cat", 20, temperature, top_k, seed=1)
    assert cached == full, f"kv cache {cached!r} vs full forward {full!r}"


@pytest.mark.parametrize("prompt", [b"T", b"The cat sat", b"Once upon a time, there was"], ids=["1", "11", "27"])
def test_generation_past_a_full_context_equals_a_full_forward_of_each_window(prompt):
    """A context of 16 fills and is refilled from its last half several times in 40 bytes; the prompt (one
    step, padded to a power of two; 27 bytes is past the context too) and each refill go in as one step of many
    positions. Oracle: the same window rule, each byte a full forward of the window (greedy, untrained)."""
    model = stories_gpt.GPT(stories_gpt.Config(context=16, layers=2, heads=2, width=32, dropout=0.0))
    cached = train_stories.generate(model, prompt, 40, 0.0, None, seed=0)
    window, full = list(prompt), []
    with limn.no_grad():
        for _ in range(40):
            if len(window) > 16:
                window = window[-8:]
            logits = model(Tensor(np.array([window], np.int32)))[:, -1]  # (1, 256)
            window.append(int(logits.argmax().item()))
            full.append(window[-1])
    assert cached == bytes(full), f"prompt {prompt!r}: kv cache {cached!r} vs full forward {bytes(full)!r}"


# ---- the same training in torch ----


@pytest.mark.parametrize("shape", [(8, 8), (16, 6), (5, 12)])
def test_the_float32_newton_schulz_is_torchs_iteration_without_the_bfloat16_rounding(shape):
    """bench_stories' "torch, Muon f32": stories_torch.newton_schulz_float32 against torch.optim.Muon's own
    iteration (which rounds to bfloat16), within bfloat16's precision, and exactly its shape and dtype."""
    from torch.optim import _muon

    g = torch.from_numpy(np.random.default_rng(1).standard_normal(shape).astype(np.float32))
    ours = stories_torch.newton_schulz_float32(g, (3.4445, -4.7750, 2.0315), 5, 1e-7)
    theirs = _muon._zeropower_via_newtonschulz(g, (3.4445, -4.7750, 2.0315), 5, 1e-7)
    assert ours.shape == g.shape and ours.dtype == torch.float32
    torch.testing.assert_close(ours, theirs.float(), atol=3e-2, rtol=3e-2)
    with stories_torch.muon_in_float32():
        assert _muon._zeropower_via_newtonschulz is stories_torch.newton_schulz_float32
    assert _muon._zeropower_via_newtonschulz is not stories_torch.newton_schulz_float32, "torch's own is back"


@pytest.mark.train
@pytest.mark.parametrize("device", ["numpy", "c"])
def test_torch_trained_from_the_same_weights_follows_limns_loss_curve(tmp_path, device):
    limn.set_device(device)
    try:
        corpus = open_corpus(None)
        run = train_stories.Run(settings(100, dropout=0.0), corpus)  # no dropout: torch draws other numbers
        run.save(tmp_path / "start.safetensors")  # the initial weights, for torch
        for _ in range(100):
            run.train_one()
        limn_losses = [loss for _, _, loss in run.history.train]
    finally:
        limn.set_device("numpy")
    model = stories_torch.from_checkpoint(tmp_path / "start.safetensors", run.settings.config)
    want = stories_torch.train(model, run.settings, corpus, run.lr_factor, 100)["losses"]
    np.testing.assert_allclose(limn_losses, want, rtol=2e-3, err_msg=f"limn on {device} against torch")
    assert want[-1] < want[0] - 1.0, "the run should learn something for the comparison to mean anything"


def test_the_full_files_are_memory_mapped_from_their_folder(tmp_path):
    sample = (EXAMPLES / "data" / "tinystories-sample.txt").read_bytes()
    (tmp_path / "TinyStories-train.txt").write_bytes(sample * 3)
    (tmp_path / "TinyStories-valid.txt").write_bytes(sample[:5000])
    corpus = open_corpus(str(tmp_path))
    assert isinstance(corpus.train, np.memmap) and isinstance(corpus.valid, np.memmap)
    assert (len(corpus.train), len(corpus.valid)) == (3 * len(sample), 5000)
    x, y = corpus.batch("train", 4, 32, 0, 0)
    assert x.shape == y.shape == (4, 32) and (x[:, 1:] == y[:, :-1]).all()
    (tmp_path / "TinyStories-valid.txt").unlink()
    with pytest.raises(train_stories.DataError, match="missing"):
        open_corpus(str(tmp_path))


# ---- user mistakes ----


def run_script(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(EXAMPLES / "train_stories.py"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=300)


def run_cli(*args: str, cwd: Path, capsys, monkeypatch) -> tuple[int, str]:
    """train_stories' command line in this process (what `python train_stories.py` runs): its status, stderr."""
    monkeypatch.chdir(cwd)
    capsys.readouterr()
    status = train_stories.cli(list(args))
    return status, capsys.readouterr().err


MISTAKES = {
    "missing data": (["--data", "no/such/folder"], "no such file or folder"),
    "unknown device": (["--device", "abacus"], "no device named 'abacus'"),
    "empty file": (["--data", "EMPTY"], "the file is empty"),
    "shorter than a window": (["--data", "SHORT"], "fewer than one window"),
    "zero interval": (["--eval-every", "0"], "--eval-every 0: it must be at least 1"),
    "top-k": (["--top-k", "300"], "top-k is 0 (every byte) to 256"),
    "heads": (["--width", "30", "--heads", "4"], "--heads 4 does not divide the width 30"),
    "a FIFO as data": (["--data", "FIFO"], "FIFO: not a regular file"),
    "/dev/zero as data": (["--data", "/dev/zero"], "/dev/zero: not a regular file"),
    "a FIFO to resume": (["--resume", "FIFO"], "is a FIFO, not a regular file"),
    "a device to sample": (["--sample", "/dev/zero"], "is a character device, not a regular file"),
    "a prompt that is not UTF-8": (["--prompt", "Once \udcff"], "--prompt: byte '\\udcff' is not UTF-8 text"),
    "--out a file": (["--out", "EMPTY"], "--out EMPTY: is a file, not a folder"),
    "--out a place nothing can be written": (["--out", "/proc/limn-out"], "--out /proc/limn-out: cannot write there"),
}


def write_bad_corpora(folder: Path) -> None:
    (folder / "EMPTY").write_bytes(b"")
    (folder / "SHORT").write_bytes(b"Once upon a time." * 2)
    os.mkfifo(folder / "FIFO")  # no writer: opening it to read would block forever


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_a_user_mistake_is_one_line_and_exit_status_2(tmp_path, capsys, monkeypatch, mistake):
    args, says = MISTAKES[mistake]
    write_bad_corpora(tmp_path)
    status, err = run_cli(
        *TINY, "--steps", "2", "--device", "numpy", *args, cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch
    )
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and says in lines[0], f"train_stories {' '.join(args)}: {err}"


def test_the_script_itself_exits_2_with_one_line(tmp_path):
    # the same rule through `python train_stories.py`, the file's own entry point
    args, says = MISTAKES["missing data"]
    done = run_script(*TINY, "--steps", "2", "--device", "numpy", *args, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and says in lines[0], done.stderr


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A checkpoint of a run that has taken all its steps (the weights untrained: only its metadata matters)."""
    run = train_stories.Run(settings(2), open_corpus(None))
    run.step_count = 2
    path = tmp_path_factory.mktemp("finished") / "ckpt.safetensors"
    run.save(path)
    return path


DAMAGED = {  # metadata key: (the damaged value, what the one line says)
    "step": ("two", "metadata 'step' is 'two', not a whole number >= 0"),
    "settings": ("{", "metadata 'settings' is '{', not JSON"),
    "history": ("[]", "metadata 'history' is '[]', not a JSON object"),
    "layers": ("0", "metadata 'layers' is '0', not a whole number >= 1"),
    "heads": ("3", "metadata 'heads' 3 does not divide 'width' 32"),
    "schedule": (None, "metadata has no 'schedule'"),
}


@pytest.mark.parametrize("flag", ["--resume", "--sample"])
@pytest.mark.parametrize("key", list(DAMAGED))
def test_damaged_checkpoint_metadata_is_one_line_naming_the_key_and_the_file(
    tmp_path, capsys, monkeypatch, finished, key, flag
):
    value, says = DAMAGED[key]
    metadata = serialize.read_metadata(finished)
    if value is None:
        del metadata[key]
    else:
        metadata[key] = value
    damaged = tmp_path / "damaged.safetensors"
    serialize.save(damaged, serialize.load_numpy(finished), metadata)
    status, err = run_cli(flag, str(damaged), "--steps", "4", cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1, f"{flag} with {key}={value!r}: {err}"
    assert str(damaged) in lines[0] and says in lines[0], f"{flag} with {key}={value!r}: {err}"


def test_heads_that_do_not_divide_the_default_width_are_one_line(tmp_path, capsys, monkeypatch):
    width = train_stories.Settings().config.width
    status, err = run_cli("--heads", "5", "--steps", "2", cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    assert width % 5, "the default width must not be a multiple of 5 for the test to mean anything"
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and f"--heads 5 does not divide the width {width}" in err, err


@pytest.mark.parametrize("steps", [[], ["--steps", "1"]])
def test_resuming_with_nothing_left_to_train_says_how_to_train_more(tmp_path, capsys, monkeypatch, finished, steps):
    status, err = run_cli("--resume", str(finished), *steps, cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    lines = err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and "nothing is left to train: pass --steps with more than 2" in err, err


def test_a_checkpoint_of_another_shape_lists_the_mismatches_and_loads_nothing(tmp_path, on_c, capsys, monkeypatch):
    run = train_stories.Run(settings(1), open_corpus(None))
    run.save(tmp_path / "ckpt.safetensors")  # width 32; the command asks for 64
    args = ["--resume", str(tmp_path / "ckpt.safetensors"), "--width", "64", "--device", "c"]
    status, err = run_cli(*args, cwd=tmp_path, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 2, err
    assert "transformer.h.0.attn.c_attn.weight" in err and "(96, 32)" in err, err


def test_a_second_generation_reuses_the_captured_steps_and_sees_the_weights_as_they_are_now():
    """generate() keeps its Sampler for the same model and settings: the second call records nothing and gives
    what a fresh Sampler gives, from its own seed; a weight changed in between (as training does) is read as
    it is; another model or setting gets a Sampler of its own."""
    config = stories_gpt.Config(context=16, layers=2, heads=2, width=32, dropout=0.0)
    model = stories_gpt.GPT(config)
    first = train_stories.generate(model, b"The cat", 30, 0.8, 5, seed=4)
    sampler = train_stories._sampler
    recorded = sampler.advance.recordings
    assert train_stories.generate(model, b"The cat", 30, 0.8, 5, seed=4) == first
    assert train_stories._sampler is sampler and sampler.advance.recordings == recorded, "nothing recorded again"
    weight = model.transformer.wte.weight
    weight.assign(weight * 1.5).realize()  # as an optimizer step would: the same buffer, new bytes
    again = train_stories.generate(model, b"The cat", 30, 0.8, 5, seed=5)
    train_stories._sampler = None
    fresh = train_stories.generate(model, b"The cat", 30, 0.8, 5, seed=5)
    assert again == fresh, f"reused steps {again!r}, fresh ones {fresh!r}"
    train_stories.generate(stories_gpt.GPT(config), b"The cat", 5, 0.8, 5, seed=5)
    assert train_stories._sampler.model is not model


@pytest.mark.train
def test_the_first_step_on_a_terminal_shows_the_compile_progress_line(tmp_path):
    import pty

    primary, secondary = pty.openpty()  # the script's stdout and stderr are a terminal, as a user's shell is
    env = os.environ | {"LIMN_CACHE_DIR": str(tmp_path / "cache"), "LIMN_QUIET": "0"}
    cmd = [sys.executable, str(EXAMPLES / "train_stories.py"), "--device", "c", "--steps", "1", "--tokens", "0"]
    cmd += ["--out", str(tmp_path / "run")]
    proc = subprocess.Popen(cmd, stdout=secondary, stderr=secondary, cwd=tmp_path, env=env)
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the script exited and closed its end
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=300) == 0, seen.decode(errors="replace")[-2000:]
    text = seen.decode(errors="replace")
    assert "[limn c] compiled " in text and " kernels in " in text, f"no progress line on the first step: {text!r}"
