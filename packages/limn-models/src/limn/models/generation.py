"""Generation with a KV cache: the prompt in one forward, then one captured step per new token.

The prompt's positions go through the model at once, filling each layer's KVCache. Every later token is one step
of a single position: its graph is the same each time (the position is a 0-d tensor), so limn.capture records it
once and replays it, and a token costs one run of that step's kernels. Greedy decoding takes the most likely
token; a temperature above 0 draws from the softmax of logits / temperature, over the top_k most likely when
given, from a device generator seeded by `seed`. The caches are as long as the next power of two that holds the
prompt and the new tokens (capped at the model's context), so a handful of lengths serve every call.
Pipeline: **models** (a generation step) -> capture -> plan executor -> device.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from limn import dtypes
from limn.autograd import no_grad
from limn.capture import capture
from limn.composed.random.rng import Generator
from limn.errors import ArgumentError
from limn.frontend.tensor import Tensor
from limn.nn.module import Module


def next_token(logits: Tensor, temperature: float, top_k: int | None, generator: Generator) -> Tensor:
    """(B, 1) int32: a token per row of logits (B, vocab), the most likely at temperature 0, else drawn."""
    if temperature == 0:
        return logits.argmax(-1, keepdim=True).cast(dtypes.int32)
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(top_k, -1).values[:, -1:]  # (B, 1): the k-th largest
        logits = (logits < kth).where(float("-inf"), logits)
    return logits.softmax(-1).multinomial(1, generator=generator).cast(dtypes.int32)


class Decoder:
    """One model's generation at one cache length and sampling setting: its caches, generator and captured step."""

    def __init__(self, model: Module, length: int, temperature: float, top_k: int | None) -> None:
        self.device = device_of(model)
        self.model, self.key = model, (self.device, length, temperature, top_k)
        self.caches = model.caches(1, length)
        self.generator = Generator(0, self.device)
        self.step: Callable[[Tensor, Tensor], Tensor] = capture(
            lambda token, position: next_token(self._last(token, position), temperature, top_k, self.generator)
        )
        self.temperature, self.top_k = temperature, top_k

    def ids(self, tokens: Sequence[int]) -> Tensor:
        return Tensor(np.array([tokens], np.int32), device=self.device)  # (1, T)

    def _last(self, ids: Tensor, position: Tensor) -> Tensor:
        """(1, vocab): the logits after the last of `ids`, which sit at position, position + 1, ..."""
        return self.model(ids, position, self.caches)[:, -1]

    def prefill(self, prompt: Sequence[int]) -> int:
        """The caches filled with the prompt's positions; the token after it."""
        logits = self._last(self.ids(prompt), Tensor(0, dtype=dtypes.int32, device=self.device))
        return int(next_token(logits, self.temperature, self.top_k, self.generator).item())


_decoder: Decoder | None = None  # the last one generate() made: one model's step kept, not every model's


def generate(
    model: Module,
    prompt: Sequence[int],
    max_new_tokens: int,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int = 0,
    eos_token_id: int | Sequence[int] | None = None,
    on_token: Callable[[int], None] | None = None,
) -> list[int]:
    """The tokens `model` (limn.models.GPT2 or Llama) writes after `prompt` (token ids): `max_new_tokens` of
    them, fewer when an end-of-sequence token comes (it is kept): eos_token_id, one id or several, or the model
    config's when None (`[]` never stops early). on_token(id) is called as each comes. Greedy at temperature 0,
    as transformers' generate with do_sample=False; sampled otherwise, the same tokens for the same seed."""
    global _decoder
    prompt = _checked(model, prompt, max_new_tokens, temperature, top_k)
    if max_new_tokens == 0:
        return []
    needed = len(prompt) + max_new_tokens
    length = min(model.context, 1 << (needed - 1).bit_length())
    key = (device_of(model), length, temperature, top_k)
    if _decoder is None or _decoder.model is not model or _decoder.key != key:
        _decoder = None  # the old caches go before the new ones are made
        _decoder = Decoder(model, length, temperature, top_k)
    decoder = _decoder
    decoder.generator.manual_seed(seed)
    stops = _stops(model.config.eos_token_id if eos_token_id is None else eos_token_id)
    with no_grad():
        out = [decoder.prefill(prompt)]
        while True:
            if on_token is not None:
                on_token(out[-1])
            if len(out) == max_new_tokens or out[-1] in stops:
                break
            where = Tensor(len(prompt) + len(out) - 1, dtype=dtypes.int32, device=decoder.device)  # the last's
            out.append(int(decoder.step(decoder.ids(out[-1:]), where).item()))
    return out


def _stops(eos: int | Sequence[int] | None) -> set[int]:
    return set() if eos is None else {eos} if isinstance(eos, int) else {int(t) for t in eos}


def device_of(model: Module) -> str:
    """The device a model's weights are on, where its generation runs."""
    return model.lm_head.weight.device


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _checked(model: Module, prompt: Sequence[int], count: int, temperature: float, top_k: int | None) -> list[int]:
    """The prompt as a list of ints, after every argument is checked against the model."""
    vocab = model.config.vocab_size
    tokens = [] if isinstance(prompt, (str, bytes)) else list(prompt)
    if not tokens or any(not _is_int(t) or not 0 <= t < vocab for t in tokens):
        raise ArgumentError(
            f"generate: the prompt must be 1 or more int token ids in [0, {vocab}) (encode text with the model's "
            f"tokenizer first), got {prompt!r:.120}"
        )
    if not _is_int(count) or count < 0 or len(tokens) + count > model.context:
        raise ArgumentError(
            f"generate: max_new_tokens must be an int of at least 0, and {len(tokens)} prompt tokens and "
            f"max_new_tokens={count!r} must fit the {model.context} positions the model serves"
        )
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ArgumentError(f"generate: temperature must be a number of at least 0, got {temperature!r}")
    if not math.isfinite(temperature) or (top_k is not None and (not _is_int(top_k) or not 1 <= top_k <= vocab)):
        raise ArgumentError(f"generate: temperature must be finite and top_k an int in 1 .. {vocab}, got {top_k!r}")
    return [int(t) for t in tokens]
