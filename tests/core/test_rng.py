"""The device generator (limn.composed.random.rng, Squares) and the draws built on it (limn.composed.random.sampling).

Oracles: the host reference squares32_host (numpy's wrapping uint64 arithmetic) for the bits the device
graph makes, on numpy and on c; torch.special.ndtri for the normal's inverse CDF; and statistics for the
rest: chi-square uniformity over bins, correlation between neighbours and between calls, mean and std.
Every statistical test draws from a fixed seed, so it gives one answer; its bound is what a uniform (or
normal) stream passes with probability above 1 - 1e-4, and a broken mixing round fails it by far.
"""

import numpy as np
import pytest
import torch

import limn
from limn import Tensor
from limn.composed.random import rng, sampling
from limn.graph.ops import Op, toposort


def _graph_words(g, shape):
    """Words drawn through the device graph (as inside a captured step), realized."""
    with rng.drawing_on_device():
        words = g.words(shape)
        limn.realize(words, g.counter)
    return words.numpy()


# ---- the bits ----


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**40 + 7])
def test_the_device_graph_gives_the_host_references_bits(device, seed):
    g = rng.Generator(seed)
    first, second = _graph_words(g, (5, 7)), _graph_words(g, (3,))
    expected = rng.squares32_host(np.arange(38, dtype=np.uint64), rng._key(seed)).astype(np.float64)
    np.testing.assert_array_equal(first.ravel(), expected[:35])
    np.testing.assert_array_equal(second, expected[35:])
    assert g.position() == 38


@pytest.mark.parametrize("start", [2**16 - 3, 2**32 - 3, 2**48 - 3, 2**64 - 3], ids=["16", "32", "48", "64"])
def test_counters_carry_across_every_limb_and_wrap_at_2_to_the_64(device, start):
    g = rng.Generator(9)
    rng._write(g.counter, np.array(rng.limbs_of(start)))
    got = _graph_words(g, (6,))
    counters = (np.arange(6, dtype=np.uint64) + np.uint64(start)) & np.uint64(rng.MASK64)
    np.testing.assert_array_equal(got, rng.squares32_host(counters, rng._key(9)).astype(np.float64))
    assert g.position() == (start + 6) % 2**64


def test_eager_draws_take_the_host_words_and_give_the_graphs_numbers(device):
    """The eager path (host_words, nothing compiled) against the graph path from the same state."""
    for make in (
        lambda g: sampling.rand((4, 5), generator=g),
        lambda g: sampling.rand((7,), dtype=limn.float64, generator=g),
        lambda g: limn.Tensor.randint(-5, 1000, (9,), generator=g),
        lambda g: sampling.randn((4, 5), generator=g),
    ):
        eager = make(rng.Generator(4)).numpy()
        with rng.drawing_on_device():
            g = rng.Generator(4)
            graph = make(g)
            limn.realize(g.counter)
        if eager.dtype == np.float32 and device != "numpy":
            np.testing.assert_allclose(graph.numpy(), eager, rtol=2**-23)  # randn: libm's log may differ by an ulp
        else:
            np.testing.assert_array_equal(graph.numpy(), eager)


def test_keys_follow_widynskis_rule():
    for seed in range(50):
        digits = f"{rng._key(seed):016x}"
        assert "0" not in digits and len(set(digits[:8])) == 8 and len(set(digits[8:])) == 8
        assert int(digits[-1], 16) % 2 == 1
    assert len({rng._key(seed) for seed in range(1000)}) == 1000


# ---- seeds ----


def test_the_same_seed_repeats_and_two_seeds_differ(device):
    limn.manual_seed(11)
    a = (Tensor.rand((3, 4)).numpy(), Tensor.randn(6).numpy(), Tensor.randint(0, 100, (5,)).numpy())
    limn.manual_seed(11)
    b = (Tensor.rand((3, 4)).numpy(), Tensor.randn(6).numpy(), Tensor.randint(0, 100, (5,)).numpy())
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    limn.manual_seed(12)
    c = Tensor.rand((3, 4)).numpy()
    assert not np.array_equal(a[0], c)
    assert not np.array_equal(a[0], Tensor.rand((3, 4)).numpy())  # the next draw of a stream is new


def test_numpy_and_c_give_the_same_numbers_for_one_seed():
    draws = {}
    for device in ("numpy", "c"):
        limn.set_device(device)
        limn.manual_seed(5)
        draws[device] = [Tensor.rand((2, 3)).numpy(), Tensor.ones(8).dropout(0.5).numpy()]
    for a, b in zip(draws["numpy"], draws["c"]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("start", [0, 2**16 - 3, 2**48 - 3, 2**64 - 3], ids=["0", "16", "48", "64"])
@pytest.mark.parametrize("offset", [0, 2**16 + 5])
def test_the_words_kernel_and_its_composition_give_the_host_references_bits(start, offset):
    """squares_words is one CUSTOM op: the c device runs it as one C loop (limn/c/squares.py), a device without
    that kernel runs its composition from primitives, and the numpy device its reference; all three give
    squares32_host's words for counters start + offset + i, carrying across limbs and wrapping at 2**64."""
    n, key = 70_000, rng._key(3)  # past the kernel's threshold for a team
    counters = np.arange(n, dtype=np.uint64) + np.uint64((start + offset) % 2**64)
    want = rng.squares32_host(counters, key).astype(np.float64)
    limbs = [np.array(rng.limbs_of(v)) for v in (key, start, offset)]
    for device in ("numpy", "c"):
        limn.set_device(device)
        key_t, counter_t, start_t = (Tensor(a, dtype="float64") for a in limbs)
        (composed,) = rng._words_composed(key_t, counter_t, start_t, n)
        kernel = rng.words_at(key_t, counter_t, (n,), offset)
        if device == "c":  # the kernel, not the composition: one CUSTOM node over three leaves and a view
            assert Op.CUSTOM in {node.op for node in toposort([kernel.node])}
        np.testing.assert_array_equal(composed.numpy(), want, err_msg=f"composed on {device}")
        np.testing.assert_array_equal(kernel.numpy(), want, err_msg=f"words_at on {device}")


@pytest.mark.parametrize("on", ["numpy", "c"])
def test_two_threads_drawing_from_one_generator_share_its_stream_without_repeats(on):
    """Each draw reads and advances the counter under the generator's lock, and realize() runs one thread at a
    time, so two threads drawing from one generator get disjoint runs of one stream: together exactly the
    words one thread would have drawn (a draw was repeated, 1,000 words of 50 draws, before)."""
    import threading

    limn.set_device(on)
    g = rng.Generator(seed=3)
    drawn: list[list[np.ndarray]] = [[], []]

    def draw(i: int) -> None:
        for _ in range(40):
            drawn[i].append(g.words((500,)).numpy())

    threads = [threading.Thread(target=draw, args=(i,)) for i in range(2)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    got = np.sort(np.concatenate(drawn[0] + drawn[1]))
    want = np.sort(rng.squares32_host(np.arange(40_000, dtype=np.uint64), rng._key(3)).astype(np.float64))
    np.testing.assert_array_equal(got, want)
    assert g.position() == 40_000


# ---- statistics ----

N = 200_000


def _chi_square(u, bins=64):
    counts = np.histogram(u, bins=bins, range=(0.0, 1.0))[0]
    expected = len(u) / bins
    return ((counts - expected) ** 2 / expected).sum()


def test_rand_is_uniform_by_chi_square_and_in_0_1():
    limn.set_device("numpy")
    limn.manual_seed(0)
    u = Tensor.rand(N).numpy()
    assert u.dtype == np.float32 and u.min() >= 0.0 and u.max() < 1.0
    assert _chi_square(u) < 112  # chi-square, 63 degrees of freedom: P(> 112) ~ 1e-4
    top = Tensor.rand(N, dtype="float64").numpy()
    assert _chi_square(top) < 112
    assert _chi_square((u * 2**16) % 1.0) < 112  # the low bits of the float32 draws are uniform too


def test_neighbours_and_consecutive_calls_are_uncorrelated():
    limn.set_device("numpy")
    limn.manual_seed(1)
    a, b = Tensor.rand(N, dtype="float64").numpy(), Tensor.rand(N, dtype="float64").numpy()
    bound = 4.5 / np.sqrt(N)  # |r| of independent samples: about N(0, 1/N)
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < bound  # neighbouring elements
    assert abs(np.corrcoef(a, b)[0, 1]) < bound  # element i of two consecutive calls
    assert abs(np.corrcoef(a[:-2], a[2:])[0, 1]) < bound


def test_randn_has_mean_0_std_1_and_normal_tails():
    limn.set_device("numpy")
    limn.manual_seed(2)
    z = Tensor.randn(N).numpy()
    assert z.dtype == np.float32
    assert abs(z.mean()) < 4.5 / np.sqrt(N) and abs(z.std() - 1) < 4.5 / np.sqrt(2 * N)
    assert abs((np.abs(z) > 1.96).mean() - 0.05) < 0.003
    assert _chi_square(torch.special.ndtr(torch.from_numpy(z.astype(np.float64))).numpy()) < 112


def test_the_inverse_normal_cdf_agrees_with_torchs_ndtri(device):
    p = np.concatenate([np.linspace(1e-12, 1 - 1e-12, 2001), [1e-300, 2**-53, 0.425, 0.575, 0.5 + 2**-40]])
    ours = sampling.normal_icdf(Tensor(p, dtype="float64")).numpy()
    np.testing.assert_allclose(ours, torch.special.ndtri(torch.from_numpy(p)).numpy(), rtol=4e-15, atol=1e-15)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_width_rand_is_in_0_1(dtype):
    limn.set_device("numpy")
    u = Tensor.rand(4096, dtype=dtype).cast("float32").numpy()
    assert u.min() >= 0.0 and u.max() < 1.0 and len(np.unique(u)) > 200


# ---- integers, bernoulli, dropout, multinomial ----


def test_randint_takes_torchs_two_call_forms_and_stays_in_range(device):
    limn.manual_seed(3)
    k = Tensor.randint(-3, 4, (2000,)).numpy()
    assert k.dtype == np.int32 and k.min() == -3 and k.max() == 3
    assert Tensor.randint(5, (2, 3)).shape == (2, 3)
    assert Tensor.randint(5, size=(4,)).numpy().max() < 5
    big = Tensor.randint(-(2**31), 2**31 - 1, (1000,)).numpy()
    assert big.min() < -(2**30) and big.max() > 2**30
    assert Tensor.randint_like(Tensor.zeros(3, dtype="int16"), 7).dtype == limn.int16
    with pytest.raises(ValueError, match="needs low < high"):
        Tensor.randint(3, 3, (2,))
    with pytest.raises(ValueError, match="does not fit int8"):
        Tensor.randint(0, 300, (2,), dtype="int8")


def test_rand_like_and_randn_like_follow_the_tensor(device):
    x = Tensor.zeros((2, 5), dtype="float64")
    assert Tensor.rand_like(x).dtype == limn.float64 and Tensor.randn_like(x).shape == (2, 5)
    with pytest.raises(TypeError, match="float32, float64"):
        Tensor.rand((2,), dtype="int32")


def test_bernoulli_draws_ones_with_the_given_probabilities(device):
    limn.manual_seed(4)
    p = Tensor(np.repeat(np.array([0.0, 0.25, 1.0], np.float32), 4000))
    b = p.bernoulli().numpy().reshape(3, 4000)
    assert b.dtype == np.float32 and set(np.unique(b)) <= {0.0, 1.0}
    assert b[0].sum() == 0 and b[2].sum() == 4000 and abs(b[1].mean() - 0.25) < 0.03
    assert abs(Tensor.zeros(4000).bernoulli(0.7).numpy().mean() - 0.7) < 0.03


def test_dropout_zeroes_p_of_the_entries_and_scales_the_rest_as_torch(device):
    limn.manual_seed(5)
    x = Tensor.ones((100, 100))
    y = x.dropout(0.3).numpy()
    assert abs((y == 0).mean() - 0.3) < 0.02
    np.testing.assert_allclose(np.unique(y), [0.0, 1 / 0.7])
    assert x.dropout(0.3, training=False) is x and x.dropout(0.0) is x
    inf = Tensor([float("inf")] * 64).dropout(0.5).numpy()  # x * mask / (1 - p): inf * 0 is NaN, as torch
    assert np.isnan(inf).any() and np.isinf(inf).any()
    torch_inf = torch.nn.functional.dropout(torch.full((64,), float("inf")), 0.5)
    assert torch.isnan(torch_inf).any()
    assert not Tensor.ones(5).dropout(1.0).numpy().any()
    with pytest.raises(ValueError, match="between 0 and 1, but got 1.5"):
        x.dropout(1.5)


def test_dropout_has_torchs_gradient_the_mask_over_1_minus_p(device):
    limn.manual_seed(6)
    x = Tensor(np.ones((8, 8), np.float32), requires_grad=True)
    y = x.dropout(0.5)
    (y * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 3 * y.numpy())  # d(x * m / (1-p))/dx = m / (1-p)


def test_multinomial_draws_categories_with_their_weights(device):
    limn.manual_seed(7)
    weights = Tensor([[1.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 2.0]])
    k = weights.multinomial(4000, replacement=True).numpy()
    assert k.shape == (2, 4000) and k.dtype == np.int32
    assert set(np.unique(k[0])) == {0, 2} and abs((k[0] == 2).mean() - 0.75) < 0.03
    assert (k[1] == 3).all()
    assert Tensor([0.2, 0.8]).multinomial(1).shape == (1,)
    with pytest.raises(ValueError, match="cannot draw 3 samples from 2 categories"):
        Tensor([0.2, 0.8]).multinomial(3)


def test_multinomial_without_replacement_draws_distinct_categories_in_weighted_order():
    limn.set_device("numpy")
    limn.manual_seed(8)
    w = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    draws = Tensor(np.tile(w, (4000, 1))).multinomial(4).numpy()  # (4000, 4): each row a permutation
    assert (np.sort(draws, 1) == np.arange(4)).all()
    assert abs((draws[:, 0] == 3).mean() - 0.4) < 0.03  # the first draw is weighted: 4 / 10
    second_given_3 = draws[draws[:, 0] == 3, 1]
    assert abs((second_given_3 == 2).mean() - 0.5) < 0.05  # then 3 / (1 + 2 + 3)
    vocab = Tensor.rand((2, 50_000)).multinomial(1)  # a language model's vocabulary: no (K, K) matrix
    assert vocab.shape == (2, 1) and (vocab.numpy() < 50_000).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_extreme_words_give_finite_normals_and_uniforms_below_1(dtype):
    """All-ones and all-zeros words: the largest and smallest uniforms. (k + 1/2) / 2**bits stays exact
    (bits <= 52), so the normal's p is never 0 or 1 and randn never gives inf."""
    limn.set_device("numpy")
    dtype = getattr(limn, dtype)
    for word in (2.0**32 - 1, 0.0):
        words = lambda shape, w=word: Tensor.full(shape, w, dtype="float64")  # noqa: E731
        u = sampling.uniform((3,), dtype, words).numpy()
        p = sampling.uniform((3,), dtype, words, open_interval=True).numpy()
        z = sampling.normal_icdf(Tensor(p)).numpy()
        assert (u < 1).all() and (0 < p).all() and (p < 1).all() and np.isfinite(z).all()


def test_randperm_is_a_permutation_and_the_captured_one_is_the_eager_one(device):
    limn.manual_seed(9)
    eager = [Tensor.randperm(50).numpy() for _ in range(2)]
    assert (np.sort(eager[0]) == np.arange(50)).all() and not np.array_equal(eager[0], eager[1])
    limn.manual_seed(9)
    with rng.drawing_on_device():
        graph = [Tensor.randperm(50).numpy() for _ in range(2)]
        limn.realize(rng.default_generator().counter)
    for a, b in zip(eager, graph):
        np.testing.assert_array_equal(a, b)
    assert Tensor.randperm(0).shape == (0,) and Tensor.randperm(1).tolist() == [0]
    with pytest.raises(ValueError, match="n must be >= 0"):
        Tensor.randperm(-1)


def test_negative_and_empty_shapes():
    limn.set_device("numpy")
    with pytest.raises(ValueError, match="negative size"):
        Tensor.rand((2, -1))
    assert Tensor.randn((0, 3)).shape == (0, 3) and Tensor.rand(()).shape == ()
    assert Tensor.zeros((0, 4)).dropout(0.5).shape == (0, 4)
