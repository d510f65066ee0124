"""The shared graph corpus: small graphs every compiled device is diffed against the numpy device on.

Each case is a function of a numpy Generator that builds limn tensors (on whatever device is current)
and returns the tensors to realize. A backend's test runs each case twice, once on numpy and once on
itself, from the same seed, and compares. The cases cover movement (reshape, permute, expand, pad,
shrink), masks and strides, every reduce and its identity, matmul shapes, gather and scatter, casts,
assign, and every dtype. Some inputs carry special values at random places (NaN, inf, -inf and -0.0 for
floats, the dtype's limits for ints), so comparisons, kinks and reductions meet them on every device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import limn
from limn import Tensor


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[np.random.Generator], list[Tensor]]
    dtypes: tuple[str, ...] = ("float32",)  # cases run once per dtype listed

    def __str__(self) -> str:
        return self.name


def data(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    dtype: str = "float32",
    low: float = -2.0,
    high: float = 2.0,
    specials: int = 0,
) -> Tensor:
    """A tensor of the given dtype with values that suit it: small ints, or floats in [low, high); `specials`
    of its cells, at random, hold special values: NaN, inf, -inf or -0.0, or for ints the dtype's limits."""
    d = limn.dtypes.as_dtype(dtype)
    if d == limn.bool_:
        return Tensor(rng.random(shape) < 0.5)
    if d.is_int:
        info = np.iinfo(d.np)
        arr = rng.integers(max(info.min, -100), min(info.max, 100), size=shape)
        choices: tuple = (info.min, info.max)
    else:
        arr = rng.uniform(low, high, size=shape).astype(np.float64)
        choices = (np.nan, np.inf, -np.inf, -0.0)
    flat = arr.reshape(-1)
    spots = rng.choice(flat.size, min(specials, flat.size), replace=False)
    flat[spots] = rng.choice(choices, spots.size)
    return Tensor(arr.astype(d.np)) if d.is_int else Tensor(arr, dtype=d)


def positive(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float32") -> Tensor:
    return data(rng, shape, dtype, 0.5, 3.0)


FLOATS = ("float32", "float64", "float16", "bfloat16")
INTS = ("int32", "int16", "int8", "int64", "uint8")
ALL = FLOATS + INTS

CASES: list[Case] = []


def case(*dtypes: str) -> Callable:
    def register(fn: Callable) -> Callable:
        for dt in dtypes or ("float32",):
            CASES.append(Case(f"{fn.__name__}[{dt}]", lambda rng, fn=fn, dt=dt: fn(rng, dt), (dt,)))
        return fn

    return register


# ---- elementwise and broadcasting ----


@case(*ALL)
def add_mul_broadcast(rng, dt):
    a, b = data(rng, (3, 4), dt), data(rng, (4,), dt)
    return [a + b, a * b, (a * 3) + 1]


@case(*FLOATS)
def unary_chain(rng, dt):
    x = positive(rng, (5, 6), dt)
    return [x.exp(), x.log(), x.sqrt(), x.reciprocal(), -x, (x.log() * 0.5).exp() + x.sqrt()]


@case(*ALL)
def compare_and_where(rng, dt):
    a, b = data(rng, (4, 5), dt, specials=4), data(rng, (4, 5), dt, specials=4)
    return [a < b, (a < b).where(a, b), a.maximum(b), a.eq(b), a <= b, a >= b, a != b, a.minimum(b), a == a]


@case(*FLOATS)
def special_value_tests(rng, dt):
    x = data(rng, (3, 8), dt, specials=10)
    return [x.isnan(), x.isinf(), x.isfinite(), x.relu(), x.abs(), x.sign(), x.clip(-1.0, 1.0), x.maximum(0.0)]


@case(*INTS)
def int_limits(rng, dt):
    a, b = data(rng, (4, 6), dt, specials=8), data(rng, (4, 6), dt, specials=8)
    return [a.maximum(b), a.minimum(b), a.max(axis=1), a.min(axis=0), a.argmax(1), a.argmin(1), a.clip(-5, 5), a.abs()]


@case(*FLOATS)
def powers_at_special_values(rng, dt):
    x, y = data(rng, (4, 6), dt, specials=8), data(rng, (4, 6), dt, specials=8)
    whole = Tensor(rng.integers(-4, 5, (4, 6)).astype(np.float64), dtype=dt)  # integer-valued exponents
    return [x**whole, x**y, x**3, x**-2, x**2.5, 0.0**y, (-2.5) ** whole]


@case("float32", "float64", "float16", "int32", "int8", "int64", "uint8")
def casts(rng, dt):
    x = data(rng, (3, 7), dt)
    outs = [x.cast(t) for t in ("float32", "float64", "int32", "int16", "int8", "bool", "int64", "uint8")]
    return outs + [x.cast("float16"), x.cast("bfloat16")]


@case(*INTS)
def int_wraparound(rng, dt):
    info = np.iinfo(limn.dtypes.as_dtype(dt).np)
    x = Tensor(np.array([info.max, info.min, info.max - 1, 7], dtype=limn.dtypes.as_dtype(dt).np))
    return [x + 1, x * 3, -x, x.sum(), x - 5]


@case("float32")
def composed_activations(rng, dt):
    x = data(rng, (6, 5), dt)
    return [x.relu(), x.sigmoid(), x.tanh(), x.gelu(), x.abs(), x.clip(-0.5, 0.7)]


# ---- movement, strides, masks ----


@case(*ALL)
def permute_and_reshape(rng, dt):
    x = data(rng, (2, 3, 4), dt)
    return [x.permute(2, 0, 1), x.permute(1, 2, 0).reshape(4, 6), x.transpose(0, 2).reshape(-1) + 0]


@case("float32", "int32")
def expand_strides(rng, dt):
    x = data(rng, (3, 1, 4), dt)
    return [x.expand(3, 5, 4), x.expand(3, 5, 4).permute(1, 0, 2) * 2]


@case(*ALL)
def pad_and_shrink(rng, dt):
    x = data(rng, (4, 5), dt)
    padded = x.pad(((1, 2), (0, 3)))
    return [padded, padded[1:4, 2:7], x[1:3, 1:4].pad(((2, 0), (1, 1))), padded.sum(1)]


@case("float32")
def pad_outer_axis_of_narrow_rows(rng, dt):
    # gcc 12.2 at -O3 -march=znver3 miscompiles this nest (constant trip counts 7 and 2, a masked load):
    # the row after the pad comes out as zeros on the c device
    x = data(rng, (5, 2), dt)
    return [x.pad(((1, 1), (0, 0))), data(rng, (4, 2), dt).pad(((1, 1), (0, 0)))]


@case("float32")
def pad_of_computed_value(rng, dt):
    x = data(rng, (3, 4), dt)
    return [x.exp().pad(((1, 1), (2, 0))), (x * 2).pad(((0, 1), (1, 1)), value=5.0)]


@case("float32", "int16")
def indexing_and_views(rng, dt):
    x = data(rng, (4, 5, 6), dt)
    return [x[1], x[:, 2:4, None, 1], x[..., -1], x[2:, 1:3].reshape(2, 12).permute(1, 0)]


@case("float32")
def reshape_needing_copy(rng, dt):
    x = data(rng, (4, 6), dt)
    return [x.permute(1, 0).reshape(3, 8), x.pad(((1, 0), (0, 2))).reshape(5, 2, 4)]


@case("float32")
def cat_stack_split(rng, dt):
    a, b = data(rng, (2, 3), dt), data(rng, (4, 3), dt)
    parts = Tensor.cat([a, b], 0).split([1, 5], 0)
    return [Tensor.cat([a, b], 0), Tensor.stack([a, a * 2], 1), parts[0], parts[1] * 2]


# ---- reduces and their identities ----


@case(*ALL)
def reduces(rng, dt):
    x = data(rng, (3, 4, 5), dt)
    return [x.sum(), x.sum(0), x.sum(2, keepdim=True), x.max(axis=1), x.max(), x.min((0, 2))]


@case(*ALL)
def reduces_over_special_values(rng, dt):
    x = data(rng, (3, 4, 5), dt, specials=6)
    outs = [x.max(axis=1), x.min((0, 2)), x.argmax(2), x.argmin(0), x.sum(1), (x > 0).any(2), (x > 0).all(0)]
    return outs if limn.dtypes.as_dtype(dt).is_int else outs + [x.mean(1), x.logsumexp(2), x.softmax(0), x.std(1)]


@case(*FLOATS)
def reduce_of_expression(rng, dt):
    x, y = data(rng, (6, 7), dt), data(rng, (6, 7), dt)
    return [(x * y + 1).sum(1), (x - y).exp().max(axis=0), x.mean(), x.var(1)]


@case("float32")
def reduce_identities_on_pads(rng, dt):
    x = data(rng, (3, 4), dt) - 5.0  # all negative: a max over a pad must see the pad's zeros
    return [x.pad(((0, 0), (2, 2))).max(axis=1), x.pad(((1, 1), (0, 0))).sum(0), x.max(axis=1)]


@case("float32", "float64")
def softmax_family(rng, dt):
    x = data(rng, (4, 9), dt)
    return [x.softmax(-1), x.log_softmax(0), x.logsumexp(1), x.argmax(1), x.std(0)]


@case("float32", "float64")
def empty_and_0d_reduces(rng, dt):
    x, s = data(rng, (3, 0), dt), data(rng, (), dt)
    return [x.any(1), x.all(1), x.sum(1), x.logsumexp(1), s.sum(0), s.max(axis=-1), s.softmax(-1), s.argmax(0)]


@case("float32")
def empty_and_unit_dims(rng, dt):
    x = data(rng, (1, 5, 1), dt)
    return [x.sum(), x.reshape(5), x.expand(3, 5, 2).sum(1)]


# ---- matmul ----


@case(*FLOATS)
def matmul_shapes(rng, dt):
    outs = []
    for n, k, m in [(4, 5, 3), (1, 7, 1), (8, 1, 6), (17, 13, 9)]:
        outs.append(data(rng, (n, k), dt) @ data(rng, (k, m), dt))
    return outs


@case("float32", "int32", "int8", "int64", "uint8")
def matmul_batched_and_vectors(rng, dt):
    a, b = data(rng, (2, 3, 4), dt), data(rng, (4, 5), dt)
    v = data(rng, (4,), dt)
    return [a @ b, a @ v, v @ b, a @ a.transpose(-1, -2)]


@case("float32")
def matmul_of_views(rng, dt):
    a, b = data(rng, (5, 4), dt), data(rng, (6, 5), dt)
    return [a.T @ b.T, (a + 1).T @ b.T, a.pad(((1, 0), (0, 2))).T @ b]


# ---- gather, scatter ----


@case(*ALL)
def gather_rows(rng, dt):
    table = data(rng, (10, 4), dt)
    idx = Tensor(rng.integers(0, 10, size=(2, 3)).astype(np.int32))
    return [table.embedding(idx), table.gather(0, Tensor(rng.integers(0, 10, size=(5, 4)).astype(np.int32)))]


@case("float32", "float64", "int32")
def gather_along_inner_axis(rng, dt):
    x = data(rng, (4, 6), dt)
    idx = Tensor(rng.integers(0, 6, size=(4, 2)).astype(np.int16))
    return [x.gather(1, idx), x.pad(((0, 0), (1, 1))).gather(1, idx)]


@case("float32", "float64", "int32")
def scatter_add_collisions(rng, dt):
    base = data(rng, (5, 3), dt)
    idx = Tensor(np.array([[0, 1, 1], [4, 4, 4], [0, 0, 2]], dtype=np.int32))
    upd = data(rng, (3, 3), dt)
    return [base.scatter_add(0, idx, upd), (base * 2).scatter_add(0, idx, upd + 1).sum(1)]


@case("float32", "int64", "uint8")
def gather_and_scatter_with_int64_indices(rng, dt):
    table = data(rng, (10, 4), dt, specials=4)
    rows = Tensor(rng.integers(0, 10, size=(2, 3)).astype(np.int64))
    cols = Tensor(rng.integers(0, 4, size=(10, 6)).astype(np.int64))
    hits = Tensor(np.array([[0, 1, 1, 3], [9, 9, 9, 0]], dtype=np.int64))
    upd = data(rng, (2, 4), dt)
    return [table.embedding(rows), table.gather(1, cols), table.scatter_add(0, hits, upd)]


@case("float32")
def cross_entropy_and_one_hot(rng, dt):
    logits = data(rng, (6, 5), dt)
    target = Tensor(np.array([0, 4, 2, -100, 1, 3], dtype=np.int32))
    return [
        logits.cross_entropy(target),
        target.clip(0, 4).one_hot(5),
        logits.cross_entropy(target, label_smoothing=0.1),
    ]


# ---- barriers ----


@case("float32", "int32")
def contiguous_barrier(rng, dt):
    x = data(rng, (3, 4), dt)
    return [x.T.contiguous(), (x + 1).contiguous() * 2]


@case("float32")
def shared_subexpressions(rng, dt):
    x = data(rng, (4, 4), dt)
    e = (x * 2).exp()
    return [e.sum(1), e / e.sum(1, keepdim=True), e.max(axis=0) + e.sum(0)]


@case("float32")
def autograd_graphs(rng, dt):
    x = data(rng, (3, 4), dt)
    w = data(rng, (4, 2), dt)
    x.requires_grad = w.requires_grad = True
    loss = ((x @ w).tanh() ** 2).mean() + x.softmax(-1).max()
    loss.backward()
    return [loss, x.grad, w.grad]


def run_case(c: Case, seed: int = 0) -> list[np.ndarray]:
    """Builds case c on the current device from `seed` and realizes it in one batch."""
    outs = c.build(np.random.default_rng(seed))
    limn.realize(*outs)
    return [o.numpy() for o in outs]


def tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) for comparing a compiled device against numpy at this dtype."""
    return {
        "float64": (1e-12, 1e-12),
        "float32": (1e-5, 1e-5),
        "float16": (2e-3, 2e-3),
        "bfloat16": (1.6e-2, 1.6e-2),
    }.get(dtype, (0.0, 0.0))
