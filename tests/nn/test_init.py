"""limn.nn.init against torch.nn.init: fans and gains exactly, each distribution by its statistics over
large tensors (mean, std, bounds, against the formula and against torch's own draws), errors as torch's.

Statistical bounds: over n = 2**18 values the sample mean is within 5 sigma / sqrt(n) of the truth and the
sample std within 2% (5 sigma of the std's spread for these distributions), from fixed seeds.
"""

import math

import numpy as np
import pytest
import torch

import limn
import limn.graph.ops
import limn.nn as nn
import limn.optim
from limn import Tensor

init = nn.init
SHAPE = (512, 512)
N = SHAPE[0] * SHAPE[1]


@pytest.fixture(autouse=True)
def _numpy_and_seeded():
    limn.set_device("numpy")
    limn.manual_seed(0)


def _limn_and_torch(shape=SHAPE):
    return Tensor.zeros(shape, requires_grad=True), torch.zeros(shape)


FAN_SHAPES = [(3, 5), (4, 3, 5), (6, 2, 3, 3), (2, 3, 1, 4, 5), (0, 3), (1, 1), (7, 0, 2)]


@pytest.mark.parametrize("shape", FAN_SHAPES, ids=str)
def test_fans_are_torchs(shape):
    assert init._calculate_fan_in_and_fan_out(Tensor.zeros(shape)) == torch.nn.init._calculate_fan_in_and_fan_out(
        torch.zeros(shape)
    )
    for mode in ("fan_in", "fan_out", "FAN_IN"):
        assert init._calculate_correct_fan(Tensor.zeros(shape), mode) == torch.nn.init._calculate_correct_fan(
            torch.zeros(shape), mode
        )


def test_fans_of_a_vector_raise_as_torch():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(Tensor.zeros(5))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(Tensor.zeros((3, 4)), mode="fan_avg")


GAINS = [
    ("linear", None),
    ("conv2d", None),
    ("conv_transpose3d", None),
    ("sigmoid", None),
    ("tanh", None),
    ("relu", None),
    ("leaky_relu", None),
    ("leaky_relu", 0.2),
    ("leaky_relu", 1),
    ("selu", None),
]


@pytest.mark.parametrize("nonlinearity,param", GAINS)
def test_gains_are_torchs(nonlinearity, param):
    assert init.calculate_gain(nonlinearity, param) == torch.nn.init.calculate_gain(nonlinearity, param)


def test_gain_errors_are_torchs():
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", True)


def _assert_stats(values, mean, std, what):
    assert abs(values.mean() - mean) < 5 * std / math.sqrt(values.size), f"{what}: mean {values.mean()}"
    assert abs(values.std() / std - 1) < 0.02, f"{what}: std {values.std()}, expected {std}"


def test_uniform_and_normal_have_the_asked_moments_and_bounds():
    w = Tensor.zeros(SHAPE, requires_grad=True)
    assert init.uniform_(w, -0.5, 1.5) is w
    u = w.numpy()
    assert u.min() >= -0.5 and u.max() < 1.5 and u.dtype == np.float32 and w.requires_grad
    _assert_stats(u, 0.5, 2 / math.sqrt(12), "uniform_")
    _assert_stats(init.normal_(w, 3.0, 0.1).numpy(), 3.0, 0.1, "normal_")


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("xavier_uniform_", {}),
        ("xavier_uniform_", {"gain": 2.0}),
        ("xavier_normal_", {"gain": 0.5}),
        ("kaiming_uniform_", {"a": math.sqrt(5)}),
        ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"}),
        ("kaiming_normal_", {}),
        ("kaiming_normal_", {"a": 0.1, "mode": "fan_out", "nonlinearity": "leaky_relu"}),
    ],
)
def test_scaled_inits_match_torchs_distribution(name, kwargs):
    shape = (256, 128, 3)  # fan_in 384, fan_out 768: the modes differ
    ours, theirs = _limn_and_torch(shape)
    getattr(init, name)(ours, **kwargs)
    torch.manual_seed(0)
    getattr(torch.nn.init, name)(theirs, **kwargs)
    a, b = ours.numpy(), theirs.numpy()
    assert abs(a.std() / b.std() - 1) < 0.02 and abs(a.mean()) < 5 * b.std() / math.sqrt(a.size)
    if "uniform" in name:  # both reach the bound torch computes, and neither passes it
        bound = np.abs(b).max()
        assert np.abs(a).max() <= bound * (1 + 1e-6) and np.abs(a).max() > 0.999 * bound


def test_trunc_normal_stays_in_its_bounds_with_the_truncated_moments():
    w = Tensor.zeros(SHAPE, dtype="float64")
    values = init.trunc_normal_(w, mean=0.5, std=1.0, a=-0.5, b=2.0).numpy()
    assert values.min() >= -0.5 and values.max() <= 2.0 and values.dtype == np.float64
    theirs = torch.nn.init.trunc_normal_(torch.zeros(SHAPE, dtype=torch.float64), mean=0.5, std=1.0, a=-0.5, b=2.0)
    _assert_stats(values, theirs.mean().item(), theirs.std().item(), "trunc_normal_")
    std02 = init.trunc_normal_(Tensor.zeros(SHAPE), std=0.02).numpy()  # the nanoGPT-style use: a, b far out
    _assert_stats(std02, 0.0, 0.02, "trunc_normal_(std=0.02)")


def test_constant_zeros_ones_eye():
    w = Tensor.zeros((3, 4))
    assert init.constant_(w, 2.5).numpy().tolist() == [[2.5] * 4] * 3
    assert not init.zeros_(w).numpy().any()
    assert (init.ones_(w).numpy() == 1).all()
    np.testing.assert_array_equal(init.eye_(w).numpy(), np.eye(3, 4))
    with pytest.raises(ValueError, match="2 dimensions"):
        init.eye_(Tensor.zeros((2, 2, 2)))


@pytest.mark.parametrize("shape", [(8, 20), (20, 8), (4, 3, 5)], ids=str)
def test_orthogonal_gives_orthonormal_rows_or_columns_scaled_by_gain(shape):
    q = init.orthogonal_(Tensor.zeros(shape, dtype="float64"), gain=2.0).numpy().reshape(shape[0], -1)
    small = q @ q.T if q.shape[0] <= q.shape[1] else q.T @ q
    np.testing.assert_allclose(small, 4.0 * np.eye(min(q.shape)), atol=1e-12)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(Tensor.zeros(3))


def test_init_writes_in_place_on_the_compiled_device_and_a_step_never_replays_it():
    """The tensor object keeps its identity (an optimizer holding it sees the new values) and the assign is
    realized at once: a later captured step does not carry it."""
    limn.set_device("c")
    limn.manual_seed(1)
    layer = nn.Linear(16, 8)
    opt = limn.optim.SGD(nn.parameters(layer), lr=0.1)
    weight = layer.weight
    init.xavier_uniform_(layer.weight)
    init.zeros_(layer.bias)
    assert layer.weight is weight and weight.node.op is limn.graph.ops.Op.BUFFER and weight.device == "c"
    assert not layer.bias.numpy().any()
    first = weight.numpy().copy()
    loss = layer(Tensor.ones((2, 16))).sum()
    loss.backward()
    opt.step(loss)
    np.testing.assert_allclose(weight.numpy(), first - 0.1 * 2.0, rtol=1e-6)  # d loss / d w = 2 everywhere


def test_init_is_an_attribute_of_limn_nn_and_imports_as_torchs():
    from limn.nn.init import kaiming_uniform_
    from limn.nn.utils import clip_grad_norm_

    assert kaiming_uniform_ is nn.init.kaiming_uniform_ and clip_grad_norm_ is nn.clip_grad_norm_


# ---- skip_init: torch.nn.utils.skip_init ----

SKIPPED = [
    (nn.Linear, (6, 4)),
    (nn.Embedding, (5, 3)),
    (nn.LayerNorm, (7,)),
    (nn.RMSNorm, (7,)),
    (nn.Conv2d, (2, 3, 3)),
    (nn.GroupNorm, (2, 4)),
]


@pytest.mark.parametrize("cls, args", SKIPPED, ids=[c.__name__ for c, _ in SKIPPED])
def test_skip_init_builds_the_module_with_uninitialized_parameters_and_draws_nothing(cls, args):
    made = cls(*args)
    limn.manual_seed(0)
    skipped = nn.utils.skip_init(cls, *args)
    after_skip = cls(*args)  # the generator is where skip_init found it: the same draws as a first module's
    want = torch.nn.utils.skip_init(getattr(torch.nn, cls.__name__), *args)
    got = dict(skipped.named_parameters())
    assert {n: tuple(p.shape) for n, p in got.items()} == {n: tuple(p.shape) for n, p in want.named_parameters()}
    for name, p in got.items():
        assert p.requires_grad and p.is_leaf, f"{cls.__name__}.{name} is a trainable leaf, as torch's"
        assert not np.any(p.numpy()), f"{cls.__name__}.{name}: limn's uninitialized values are zeros"
    for (name, a), (_, b) in zip(made.named_parameters(), after_skip.named_parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=f"{cls.__name__}.{name} after a skip_init")
