"""nn.KVCache, the buffers a generation step attends over: update writes exactly slot `position` and leaves the
others, the returned mask marks slots 0..position, a captured one-position step replays at each new position
(one graph for every position), a prompt's positions go in as one update whose queries attend through
`visible` as causal attention over the whole sequence (torch's, the oracle), and bad shapes or a non-tensor
position are refused with what to do."""

from __future__ import annotations

import numpy as np
import pytest

import limn
from limn import Tensor, nn
from limn.capture import capture

rng = np.random.default_rng(0)


def test_update_writes_one_slot_and_masks_the_filled_ones():
    cache = nn.KVCache(batch=2, heads=3, length=5, head_dim=4)
    written = []
    for position in range(3):
        k, v = (
            rng.standard_normal((2, 3, 1, 4)).astype(np.float32),
            rng.standard_normal((2, 3, 1, 4)).astype(np.float32),
        )
        keys, values, filled = cache.update(Tensor(k), Tensor(v), Tensor(np.array(position, np.int32)))
        limn.realize(keys, values, filled, cache.keys, cache.values)
        written.append((k, v))
        assert filled.tolist() == [i <= position for i in range(5)]
    keys = cache.keys.numpy()
    for position, (k, v) in enumerate(written):
        np.testing.assert_array_equal(keys[:, :, position], k[:, :, 0])
        np.testing.assert_array_equal(cache.values.numpy()[:, :, position], v[:, :, 0])
    assert not keys[:, :, 3:].any(), "slots past the last position stay as they were (zeros)"


def test_attention_over_the_cache_equals_causal_attention_over_the_whole_sequence():
    t, heads, d = 6, 2, 8
    q, k, v = (rng.standard_normal((1, heads, t, d)).astype(np.float32) for _ in range(3))
    want = Tensor.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), causal=True).numpy()
    cache = nn.KVCache(1, heads, t, d)

    def step(qi: Tensor, ki: Tensor, vi: Tensor, position: Tensor) -> Tensor:
        keys, values, filled = cache.update(ki, vi, position)
        return Tensor.scaled_dot_product_attention(qi, keys, values, key_mask=filled)

    step = capture(step)  # one recording: the position is a tensor, so every step is the same graph
    rows = [
        step(*(Tensor(a[:, :, i : i + 1]) for a in (q, k, v)), Tensor(np.array(i, np.int32))).numpy() for i in range(t)
    ]
    np.testing.assert_allclose(np.concatenate(rows, axis=2), want, rtol=1e-5, atol=1e-6)


def test_eager_use_reads_only_the_step_output_and_runs_every_position(device):
    """Used eagerly, as a newcomer writes it: each step reads only its attention output, never the cache
    itself, so each update's assign is still pending when the next one is made. The cache realizes its own
    earlier assign then; that assign, named again inside the next step's graph, is not a second write to
    the buffer. The rows equal causal attention over the whole sequence, on every device."""
    t, heads, d = 6, 2, 8
    q, k, v = (rng.standard_normal((1, heads, t, d)).astype(np.float32) for _ in range(3))
    want = Tensor.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), causal=True).numpy()
    cache = nn.KVCache(1, heads, t, d)
    rows = []
    for i in range(t):
        keys, values, filled = cache.update(Tensor(k[:, :, i : i + 1]), Tensor(v[:, :, i : i + 1]), Tensor(i))
        qi = Tensor(q[:, :, i : i + 1])
        rows.append(Tensor.scaled_dot_product_attention(qi, keys, values, key_mask=filled).numpy())
    np.testing.assert_allclose(np.concatenate(rows, axis=2), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(cache.keys.numpy(), k)


@pytest.mark.parametrize("pieces", [[6], [4, 1, 1], [1, 3, 2], [2, 2, 2]])
def test_a_prompt_in_pieces_attends_as_causal_attention_over_the_whole_sequence(pieces, device):
    """Each piece of T positions is one update at its first position; its queries attend with visible(position,
    T), the one-position ones with key_mask as a generation step does. Oracle: torch's causal sdpa."""
    import torch

    t, heads, d = sum(pieces), 2, 8
    q, k, v = (rng.standard_normal((1, heads, t, d)).astype(np.float32) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), is_causal=True)
    cache = nn.KVCache(1, heads, t + 2, d)  # room to spare: the unwritten slots must stay hidden
    rows, start = [], 0
    for n in pieces:
        qi, ki, vi = (Tensor(a[:, :, start : start + n]) for a in (q, k, v))
        position = Tensor(np.array(start, np.int32))
        keys, values, filled = cache.update(ki, vi, position)
        assert filled.tolist() == [j < start + n for j in range(t + 2)], f"pieces {pieces}, at {start}"
        if n == 1:
            rows.append(Tensor.scaled_dot_product_attention(qi, keys, values, key_mask=filled).numpy())
        else:
            mask = cache.visible(position, n)
            rows.append(Tensor.scaled_dot_product_attention(qi, keys, values, attn_mask=mask).numpy())
        start += n
    np.testing.assert_allclose(np.concatenate(rows, axis=2), want.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(cache.keys.numpy()[:, :, :t], k)
    assert not cache.values.numpy()[:, :, t:].any(), "the slots past the prompt stay as they were"


def test_bad_input_is_refused_with_what_to_do():
    cache = nn.KVCache(1, 2, 4, 3)
    one = Tensor.zeros((1, 2, 1, 3))
    with pytest.raises(limn.ArgumentError, match=r"1 <= T <= 4"):
        cache.update(Tensor.zeros((1, 2, 5, 3)), Tensor.zeros((1, 2, 5, 3)), Tensor(np.array(0, np.int32)))
    with pytest.raises(limn.ArgumentError, match=r"\(B, H, T, hs\) = \(1, 2, T, 3\)"):
        cache.update(Tensor.zeros((1, 2, 2, 3)), Tensor.zeros((1, 2, 3, 3)), Tensor(np.array(0, np.int32)))
    with pytest.raises(limn.ArgumentError, match="0-d integer tensor"):
        cache.update(one, one, Tensor(np.array([0], np.int32)))
    with pytest.raises(limn.ArgumentError, match=r"T must be 1 \.\. 4"):
        cache.visible(Tensor(np.array(0, np.int32)), 5)
    with pytest.raises(limn.ArgumentError, match="at least 1"):
        nn.KVCache(1, 2, 0, 3)


def test_a_captured_prompt_step_makes_no_host_data():
    """visible() reads the cache's own slot numbers, so a captured prompt step replays from its second call
    on (host data made inside a step is checked by a second eager call first: limn.capture)."""
    cache = nn.KVCache(1, 2, 8, 4)

    def prompt(k: Tensor, position: Tensor) -> Tensor:
        keys, values, _ = cache.update(k, k, position)
        return Tensor.scaled_dot_product_attention(k, keys, values, attn_mask=cache.visible(position, 3))

    step = capture(prompt)
    k = Tensor(rng.standard_normal((1, 2, 3, 4)).astype(np.float32))
    step(k, Tensor(np.array(0, np.int32)))
    assert step.recording.constants == [], step.recording.constants
