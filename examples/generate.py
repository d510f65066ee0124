"""Generate text with a pretrained GPT-2 or LLaMA-family model from a Hugging Face checkpoint folder.

    uv run python examples/generate.py --model ./gpt2 --prompt "The meaning of life is" --tokens 40
    uv run python examples/generate.py --model ./tiny --ids 5,17,3 --tokens 20 --device numpy

The folder is what `save_pretrained` writes and the Hugging Face Hub serves: config.json, model.safetensors (or
shards and model.safetensors.index.json), and tokenizer.json for text prompts (read with the `tokenizers`
library when it is installed; without it, pass token ids with --ids). limn downloads nothing. On a machine that
can reach the Hub, fetch a model's files and copy the folder over:

    pip install huggingface_hub
    hf download openai-community/gpt2 config.json model.safetensors tokenizer.json --local-dir gpt2
    hf download HuggingFaceTB/SmolLM2-135M config.json model.safetensors tokenizer.json --local-dir smollm2

(`huggingface-cli download` on older versions of huggingface_hub; gated models such as Meta's Llama need
`hf auth login` and accepting their license first.) The script prints the continuation, then the time to the
first new token and the rate of the rest.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import limn
import limn.models


def tokenizer_of(folder: Path):
    """The folder's tokenizer.json through the `tokenizers` library, or None where either is missing."""
    if not (folder / "tokenizer.json").is_file():
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    return Tokenizer.from_file(str(folder / "tokenizer.json"))


def prompt_ids(args: argparse.Namespace, tokenizer) -> list[int]:
    if args.ids is not None:
        pieces = [t.strip() for t in args.ids.split(",")]
        if not all(p.isdigit() for p in pieces):
            sys.exit(f"--ids takes token ids as comma-separated whole numbers (5,17,3), got {args.ids!r}")
        return [int(p) for p in pieces]
    if tokenizer is None:
        sys.exit(
            f"{args.model} has no tokenizer.json (or the `tokenizers` library is not installed): pass the prompt "
            "as token ids with --ids 1,2,3"
        )
    return tokenizer.encode(args.prompt).ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="a Hugging Face checkpoint folder")
    parser.add_argument("--prompt", default="Once upon a time", help="text, encoded with the folder's tokenizer")
    parser.add_argument("--ids", help="the prompt as comma-separated token ids, in place of --prompt")
    parser.add_argument("--tokens", type=int, default=40, help="how many tokens to generate")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 takes the most likely token")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="numpy, c, cuda (default: the best installed)")
    args = parser.parse_args()

    if args.device is not None:
        limn.set_device(args.device)
    start = time.perf_counter()
    try:
        model = limn.models.from_pretrained(args.model)
    except (FileNotFoundError, limn.ArgumentError) as e:
        sys.exit(f"{args.model}: {e}")
    loaded = time.perf_counter() - start
    tokenizer = tokenizer_of(args.model)
    prompt = prompt_ids(args, tokenizer)
    millions = sum(p.numel() for p in model.parameters()) / 1e6
    print(
        f"{type(model).__name__} of {millions:.1f}M parameters from {args.model} on {limn.current_device()}, "
        f"loaded in {loaded:.1f} s"
    )

    stamps: list[float] = []
    start = time.perf_counter()
    out = limn.models.generate(
        model,
        prompt,
        args.tokens,
        args.temperature,
        args.top_k,
        args.seed,
        on_token=lambda _: stamps.append(time.perf_counter()),
    )
    text = tokenizer.decode(prompt + out) if tokenizer is not None else ",".join(map(str, prompt + out))
    print(text)
    if stamps:
        first = stamps[0] - start
        rest = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else float("nan")
        print(
            f"{len(out)} tokens: the first after {first:.2f} s (the prompt's forward, compiles included), "
            f"then {rest:.1f} tokens/s"
        )


if __name__ == "__main__":
    main()
