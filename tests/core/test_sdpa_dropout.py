"""Fused attention with dropout (Tensor.scaled_dot_product_attention(dropout_p=p) on the CUSTOM kernels, which draw
the mask inside): the oracle is limn's composed attention, softmax(...).dropout(p) @ v, from the same seed, so both
draw the same mask from the device generator's words, and it holds for O and the gradients of q, k, v:
 - on numpy (the references, limn.composed.functional.sdpa) and c (limn.c.attention), float32 and float64 (whose
   uniform numbers take two words), causal, key_mask, t_q != t_k, dead rows;
 - each call draws a new mask and advances the generator by one word per weight (two for float64); a backward
   run after other draws still regenerates its forward's mask; create_graph=True composes the backward from the
   same mask and its second derivatives are the composed form's;
 - the factors keep a weight with probability 1 - p and scale it by 1 / (1 - p); dropout_p = 1 gives zeros, as
   torch's; a dropout_p outside [0, 1] raises naming it.
torch draws its masks from another generator, so its values are not the oracle here; its rate and scaling are."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import limn
from limn import Tensor
from limn.autograd import grad
from limn.composed.functional import attention, sdpa
from limn.composed.random import rng
from limn.graph.ops import Op, toposort

_data = np.random.default_rng(5)


def r(*shape: int, dtype=np.float32) -> np.ndarray:
    return _data.standard_normal(shape).astype(dtype)


# name -> (q shape, k shape, v shape, causal, key mask (B, 1, t_k) or None)
CASES = {
    "plain, t_q < t_k": ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4), False, None),
    "causal, t_q > t_k": ((2, 3, 9, 8), (2, 3, 7, 8), (2, 3, 7, 4), True, None),
    "key_mask and causal, a dead row": ((2, 3, 9, 8), (2, 3, 70, 8), (2, 3, 70, 4), True, "dead"),
    "ragged tiles": ((1, 2, 67, 16), (1, 2, 130, 16), (1, 2, 130, 8), True, "mask"),
}
TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12}


def _inputs(name: str, dtype) -> tuple[list[np.ndarray], np.ndarray | None, bool]:
    """q, k, v and the output's weight w, the key mask and causal: the same arrays at every call for a name."""
    q, k, v, causal, kind = CASES[name]
    data = np.random.default_rng(len(name))
    arrays = [data.standard_normal(s).astype(dtype) for s in (q, k, v, (*q[:-1], v[-1]))]
    mask = None
    if kind is not None:
        mask = data.random((q[0], 1, k[2])) < 0.7
        mask[..., 0] = True
        if kind == "dead":
            mask[1, :, 0] = False  # with causal, query 0 of batch row 1 sees no key
    return arrays, mask, causal


def _custom_names(*tensors: Tensor) -> set[str]:
    return {n.arg.name for n in toposort([t.node for t in tensors]) if n.op is Op.CUSTOM}


def _attend(name: str, dtype, fused: bool, p: float = 0.3, seed: int = 11) -> list[np.ndarray]:
    """O and the gradients of q, k, v of sum(attention * w), from `seed`: fused, or composed with Tensor.dropout."""
    (q, k, v, w), mask, causal = _inputs(name, dtype)
    limn.manual_seed(seed)
    ours = [Tensor(x, requires_grad=True) for x in (q, k, v)]
    key_mask = None if mask is None else Tensor(mask)
    if fused:
        out = Tensor.scaled_dot_product_attention(*ours, dropout_p=p, causal=causal, key_mask=key_mask)
    else:
        out = attention.composed(*ours, None, p, causal, 1 / np.sqrt(q.shape[-1]), key_mask)
    (out * Tensor(w)).sum().backward()
    if fused:
        assert _custom_names(out, *(t.grad for t in ours)) == {"sdpa", "sdpa_bwd_q", "sdpa_bwd_kv"}
    return [out.numpy()] + [t.grad.numpy() for t in ours]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", CASES)
def test_fused_dropout_is_the_composed_form_with_the_same_masks(device: str, name: str, dtype) -> None:
    fused = _attend(name, dtype, fused=True)
    composed = _attend(name, dtype, fused=False)
    other_seed = _attend(name, dtype, fused=False, seed=12)
    tol = TOLERANCE[dtype]
    for what, f, c, o in zip(("O", "dQ", "dK", "dV"), fused, composed, other_seed):
        np.testing.assert_allclose(f, c, rtol=tol, atol=tol, err_msg=f"{name}: {what} on {device}")
        assert not np.allclose(f, o, rtol=tol, atol=tol), f"{name}: {what} is the same under another seed"


def test_each_call_draws_a_new_mask_and_advances_the_generator_a_word_per_weight(device: str) -> None:
    for dtype, words in ((np.float32, 1), (np.float64, 2)):
        q = Tensor(r(2, 3, 5, 8, dtype=dtype))
        limn.manual_seed(0)
        g = rng.default_generator()
        first = Tensor.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
        assert g.position() == 2 * 3 * 5 * 5 * words
        second = Tensor.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
        assert g.position() == 2 * 2 * 3 * 5 * 5 * words
        assert not np.array_equal(first, second)


def test_a_backward_after_other_draws_regenerates_its_forwards_mask(device: str) -> None:
    """The counter is an input of the forward's node: the gradient reads the value it had, not the advanced one."""
    (q, k, v, w), _mask, _causal = _inputs("plain, t_q < t_k", np.float32)
    grads = []
    for interleave in (False, True):
        limn.manual_seed(4)
        ours = [Tensor(x, requires_grad=True) for x in (q, k, v)]
        out = Tensor.scaled_dot_product_attention(*ours, dropout_p=0.4)
        loss = (out * Tensor(w)).sum()
        loss.realize()
        if interleave:
            Tensor.rand(1000).realize()
            Tensor.scaled_dot_product_attention(*(Tensor(x) for x in (q, k, v)), dropout_p=0.4).realize()
        loss.backward()
        grads.append([t.grad.numpy() for t in ours])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)


def test_create_graph_composes_the_backward_from_the_same_mask(device: str) -> None:
    x = [r(2, 2, 5, 3, dtype=np.float64), r(2, 2, 7, 3, dtype=np.float64), r(2, 2, 7, 4, dtype=np.float64)]
    w, u = r(2, 2, 5, 4, dtype=np.float64), [r(*a.shape, dtype=np.float64) for a in x]
    results = []
    for fused in (True, False):
        limn.manual_seed(2)
        ours = [Tensor(a, requires_grad=True) for a in x]
        if fused:
            out = Tensor.scaled_dot_product_attention(*ours, dropout_p=0.3, causal=True)
        else:
            out = attention.composed(*ours, None, 0.3, True, 1 / np.sqrt(3))
        firsts = grad((out * Tensor(w)).sum(), ours, create_graph=True)
        total = sum(((g * Tensor(c)).sum() for g, c in zip(firsts, u)), Tensor(0.0, dtype=limn.float64))
        total.backward()
        results.append([g.numpy() for g in firsts] + [t.grad.numpy() for t in ours])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_the_factors_keep_one_minus_p_of_the_weights_scaled_as_torchs(dtype) -> None:
    """The rate and the scale, against torch's dropout of ones (torch's own mask is another generator's)."""
    limn.manual_seed(9)
    counter = rng.default_generator().draw(200_000)
    seed = rng.default_generator().key
    z = sdpa.dropout_factors(seed.numpy(), counter.numpy(), 0.25, (2, 100, 1000), np.dtype(dtype))
    theirs = torch.nn.functional.dropout(
        torch.ones(200_000, dtype=torch.float64 if dtype == np.float64 else None), 0.25
    )
    assert z.dtype == dtype and set(np.unique(z).tolist()) == set(np.unique(theirs.numpy()).tolist())
    assert abs((z == 0).mean() - 0.25) < 0.005 and abs((theirs.numpy() == 0).mean() - 0.25) < 0.005


def test_dropout_of_one_gives_zeros_as_torchs_and_a_bad_dropout_p_raises(device: str) -> None:
    q = r(1, 2, 4, 8)
    out = Tensor.scaled_dot_product_attention(Tensor(q), Tensor(q), Tensor(q), dropout_p=1.0)
    want = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(q),) * 3, dropout_p=1.0)
    np.testing.assert_array_equal(out.numpy(), want.numpy())
    for p in (-0.1, 1.5, float("nan")):
        with pytest.raises(limn.ArgumentError, match=rf"dropout_p has to be between 0 and 1, but got {p}"):
            Tensor.scaled_dot_product_attention(Tensor(q), Tensor(q), Tensor(q), dropout_p=p)
    for p in (None, "0.1", Tensor(0.1), True):
        with pytest.raises(TypeError, match=r"dropout_p must be a number"):
            Tensor.scaled_dot_product_attention(Tensor(q), Tensor(q), Tensor(q), dropout_p=p)
