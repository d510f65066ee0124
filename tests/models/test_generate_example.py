"""examples/generate.py runs a checkpoint folder as a new user would:
- with token ids (--ids) and no tokenizer it prints the prompt and exactly the tokens limn.models.generate
  gives for them;
- with a text prompt it encodes and decodes through the folder's tokenizer.json (the `tokenizers` library);
- a folder without tokenizer.json asks for --ids instead of failing deep inside;
- its help says how to get real weights onto the machine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from limn.models import from_pretrained, generate

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "generate.py"
WORDS = ["[UNK]", "once", "upon", "a", "time", "there", "was", "cat", "dog", "who", "ran", "sat", "home", "."]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A tiny GPT-2 saved by transformers, with a word-level tokenizer.json over WORDS."""
    out = tmp_path_factory.mktemp("gpt2-words")
    torch.manual_seed(3)
    config = transformers.GPT2Config(
        vocab_size=len(WORDS),
        n_positions=64,
        n_embd=16,
        n_layer=1,
        n_head=2,
        initializer_range=0.5,
        bos_token_id=None,
        eos_token_id=None,
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(out)
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(WORDS)}, "[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.decoder = tokenizers.decoders.WordPiece(cleanup=False)  # joins words with spaces
    tokenizer.save(str(out / "tokenizer.json"))
    return out


@pytest.fixture(scope="module")
def bare(folder, tmp_path_factory) -> Path:
    """The same model without its tokenizer.json."""
    out = tmp_path_factory.mktemp("gpt2-bare")
    for name in ["config.json", "model.safetensors"]:
        (out / name).write_bytes((folder / name).read_bytes())
    return out


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *args, "--device", "numpy"], capture_output=True, text=True, timeout=300
    )


def test_token_ids_in_give_generates_tokens_out(bare):
    run = _run("--model", str(bare), "--ids", "1,2,3", "--tokens", "9")
    assert run.returncode == 0, run.stderr
    want = [1, 2, 3, *generate(from_pretrained(bare), [1, 2, 3], 9)]
    printed = run.stdout.splitlines()[1]
    assert printed == ",".join(map(str, want)), f"the example printed {printed!r}, generate gives {want}"
    assert "9 tokens: the first after" in run.stdout, run.stdout


def test_a_text_prompt_goes_through_the_tokenizer(folder, bare):
    run = _run("--model", str(folder), "--prompt", "once upon a time", "--tokens", "5")
    assert run.returncode == 0, run.stderr
    text = run.stdout.splitlines()[1]
    assert text.startswith("once upon a time ") and len(text.split()) == 9, run.stdout
    run = _run("--model", str(bare), "--prompt", "once")
    assert run.returncode != 0 and "pass the prompt as token ids with --ids" in run.stderr, run.stderr


def test_the_help_says_how_to_get_weights():
    run = subprocess.run([sys.executable, str(EXAMPLE), "--help"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "hf download" in run.stdout and "--local-dir" in run.stdout, run.stdout


def test_bad_ids_and_folders_are_named_without_a_traceback(bare, tmp_path):
    for ids in [",", "5,x", "-1"]:
        run = _run("--model", str(bare), "--ids", ids)
        assert run.returncode != 0 and "--ids takes token ids" in run.stderr and "Traceback" not in run.stderr, ids
    run = _run("--model", str(tmp_path), "--ids", "1")
    assert run.returncode != 0 and "no config.json" in run.stderr and "Traceback" not in run.stderr, run.stderr
