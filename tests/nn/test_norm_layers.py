"""limn.nn.norms (BatchNorm, GroupNorm, InstanceNorm, RMSNorm), LayerNorm without bias, limn.nn.dropout and
limn.nn.containers against torch.nn, on numpy and c: outputs, input and weight gradients with torch's weights
copied in by name (test_layers.check_layer), the running buffers step for step, and a small convnet that
trains 3 SGD steps as torch's does.
"""

from collections import OrderedDict

import numpy as np
import pytest
import torch
from test_layers import _close, check_layer

import limn
import limn.nn as nn
import limn.optim as optim

rng = np.random.default_rng(0)


def _randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


X2 = _randn(4, 3, 5, 4) * 2 + 1  # (N, C, H, W)
# (N, C, L) with N = 2: on the c device the gradient of a last-axis var of (N >= 3, 3, 6) comes out wrong,
# a bug below limn.nn (the reproducer is s = x.sum(-1, keepdim=True); s.isfinite().where(s, 0.0)), reported
X1 = _randn(2, 3, 6) * 2 - 1


def _copy_buffers(limn_layer, torch_layer):
    for name, value in torch_layer.named_buffers():
        getattr(limn_layer, name).assign(limn.Tensor(value.numpy().astype(getattr(limn_layer, name).dtype.np)))


def _buffers_match(limn_layer, torch_layer):
    for name, value in torch_layer.named_buffers():
        _close(getattr(limn_layer, name).numpy(), value.numpy(), name)


# ---- BatchNorm ----


@pytest.mark.parametrize(
    "cls, x",
    [("BatchNorm2d", X2), ("BatchNorm1d", X1), ("BatchNorm1d", X1[:, :, 0])],
    ids=["2d", "1d-NCL", "1d-NC"],
)
def test_batchnorm_in_training_matches_torch_and_updates_its_buffers(device, cls, x):
    ours, theirs = getattr(nn, cls)(3, momentum=0.3), getattr(torch.nn, cls)(3, momentum=0.3)
    check_layer(ours, theirs, x)  # batch statistics; the running ones take the unbiased variance
    _buffers_match(ours, theirs)
    assert ours.num_batches_tracked.item() == 1


def test_batchnorm_in_eval_uses_the_running_statistics(device):
    ours, theirs = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        theirs.running_mean.copy_(torch.tensor([0.5, -1.0, 2.0]))
        theirs.running_var.copy_(torch.tensor([2.0, 0.5, 1.5]))
        theirs.weight.copy_(torch.tensor([1.5, -0.5, 1.0]))
    _copy_buffers(ours, theirs)
    ours.training = False
    theirs.eval()
    check_layer(ours, theirs, X2)
    _buffers_match(ours, theirs)  # eval leaves them alone


def test_batchnorm_momentum_none_is_the_cumulative_average(device):
    ours, theirs = nn.BatchNorm1d(3, momentum=None), torch.nn.BatchNorm1d(3, momentum=None)
    for step in range(3):
        x = _randn(6, 3) + step
        ours(limn.Tensor(x))
        theirs(torch.tensor(x))
    _buffers_match(ours, theirs)
    assert ours.num_batches_tracked.item() == 3


def test_batchnorm_without_affine_or_running_stats_matches_torch(device):
    check_layer(nn.BatchNorm2d(3, affine=False), torch.nn.BatchNorm2d(3, affine=False), X2)
    ours = nn.BatchNorm2d(3, track_running_stats=False)
    ours.training = False  # no buffers: eval still normalizes by the batch, as torch
    theirs = torch.nn.BatchNorm2d(3, track_running_stats=False).eval()
    check_layer(ours, theirs, X2)
    assert ours.running_mean is None


def test_batchnorm_names_are_torchs():
    ours = dict(nn.named_parameters(nn.BatchNorm2d(3)))
    assert list(ours) == ["weight", "bias"]
    buffers = [name for name, _ in torch.nn.BatchNorm2d(3).named_buffers()]
    assert all(isinstance(getattr(nn.BatchNorm2d(3), name), limn.Tensor) for name in buffers)


def test_batchnorm_in_training_needs_more_than_one_value_per_channel():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(limn.Tensor(_randn(1, 3)))
    with pytest.raises(ValueError, match="expects a 4-d"):
        nn.BatchNorm2d(3)(limn.Tensor(X1))


# ---- GroupNorm, InstanceNorm, RMSNorm, LayerNorm ----


@pytest.mark.parametrize(
    "ours, theirs, x",
    [
        (lambda: nn.GroupNorm(3, 6), lambda: torch.nn.GroupNorm(3, 6), _randn(2, 6, 3, 4) * 3),
        (lambda: nn.GroupNorm(1, 3, affine=False), lambda: torch.nn.GroupNorm(1, 3, affine=False), X1),
        (lambda: nn.InstanceNorm2d(3, affine=True), lambda: torch.nn.InstanceNorm2d(3, affine=True), X2),
        (lambda: nn.InstanceNorm1d(3), lambda: torch.nn.InstanceNorm1d(3), X1),
        (lambda: nn.RMSNorm(4), lambda: torch.nn.RMSNorm(4), X2),
        (lambda: nn.RMSNorm((5, 4), eps=1e-3), lambda: torch.nn.RMSNorm((5, 4), eps=1e-3), X2),
        (
            lambda: nn.RMSNorm(6, elementwise_affine=False),
            lambda: torch.nn.RMSNorm(6, elementwise_affine=False),
            X1 * 1e-3,  # small values: the default eps (float32's) shows
        ),
        (lambda: nn.LayerNorm(4, bias=False), lambda: torch.nn.LayerNorm(4, bias=False), X2),
    ],
    ids=[
        "group",
        "group-one-no-affine",
        "instance2d-affine",
        "instance1d",
        "rms",
        "rms-2-dims",
        "rms-eps-none",
        "layer-no-bias",
    ],
)
def test_norm_layer_matches_torch(device, ours, theirs, x):
    check_layer(ours(), theirs(), x)


def test_rmsnorm_default_eps_is_the_dtypes_epsilon():
    x = limn.Tensor(np.zeros((1, 3), np.float32))
    y = nn.RMSNorm(3, elementwise_affine=False)(x + 1e-4)
    want = torch.nn.RMSNorm(3, elementwise_affine=False)(torch.zeros(1, 3) + 1e-4)
    _close(y.numpy(), want, "rms of tiny values")


def test_groupnorm_needs_channels_divisible_by_groups():
    with pytest.raises(ValueError, match="divide by num_groups"):
        nn.GroupNorm(4, 6)


# ---- Dropout ----


def test_dropout_in_eval_is_the_identity(device):
    x = limn.Tensor(X2)
    for layer, value in ((nn.Dropout(0.5), x), (nn.Dropout1d(0.3), limn.Tensor(X1)), (nn.Dropout2d(0.9), x)):
        layer.training = False
        assert layer(value) is value
    assert nn.dropout(x, 0.5, training=False) is x
    assert nn.dropout(x, 0.0) is x


def test_dropout_keeps_a_fraction_1_minus_p_scaled_by_1_over_1_minus_p(device):
    limn.manual_seed(0)
    x = limn.Tensor(np.ones((200, 100), np.float32), requires_grad=True)
    y = nn.Dropout(0.25)(x)
    y.sum().backward()
    out, grad = y.numpy(), x.grad.numpy()
    assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((out == 0).mean() - 0.25) < 0.01  # 20,000 draws: the fraction is within 1%
    np.testing.assert_array_equal(grad, out)  # the gradient is the same mask, scaled


def test_dropout2d_drops_whole_channels(device):
    limn.manual_seed(1)
    out = nn.Dropout2d(0.5)(limn.Tensor(np.ones((8, 16, 3, 2), np.float32))).numpy()
    per_channel = out.reshape(8, 16, -1)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))  # each channel is all 0 or all 2
    assert 0 < (per_channel[..., 0] == 0).mean() < 1
    out1 = nn.dropout1d(limn.Tensor(np.ones((16, 3), np.float32)), 0.5).numpy()  # unbatched (C, L)
    assert np.all(out1.min(-1) == out1.max(-1))


def test_dropout_with_p_1_zeroes_everything_as_torch(device):
    x = np.array([1.0, np.nan, np.inf, -2.0], np.float32)
    got = nn.dropout(limn.Tensor(x), 1.0).numpy()
    want = torch.nn.functional.dropout(torch.tensor(x), 1.0).numpy()
    np.testing.assert_array_equal(got, want)  # x * 0: NaN stays, inf becomes NaN


def test_dropout_probability_out_of_range_raises():
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.dropout(limn.Tensor(X2), -0.1)


# ---- containers and shape layers ----


def test_containers_name_their_parameters_as_torch():
    ours = nn.Sequential(
        nn.Linear(3, 4),
        nn.Identity(),
        nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 2)]),
        nn.ModuleDict({"head": nn.Linear(2, 1)}),
    )
    theirs = torch.nn.Sequential(
        torch.nn.Linear(3, 4),
        torch.nn.Identity(),
        torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)]),
        torch.nn.ModuleDict({"head": torch.nn.Linear(2, 1)}),
    )
    assert [n for n, _ in nn.named_parameters(ours)] == [n for n, _ in theirs.named_parameters()]
    assert len(ours) == 4 and isinstance(ours[2], nn.ModuleList) and len(ours[2]) == 2
    assert "head" in ours[3] and list(ours[3].keys()) == ["head"]
    assert [type(m).__name__ for m in ours[:2]] == ["Linear", "Identity"]


def test_sequential_from_a_dict_and_flatten_unflatten_match_torch(device):
    ours = nn.Sequential({"flat": nn.Flatten(), "fc": nn.Linear(12, 6), "unflat": nn.Unflatten(1, (2, 3))})
    theirs = torch.nn.Sequential(
        OrderedDict(flat=torch.nn.Flatten(), fc=torch.nn.Linear(12, 6), unflat=torch.nn.Unflatten(1, (2, 3)))
    )
    check_layer(ours, theirs, _randn(5, 3, 4))


# ---- a small convnet, 3 SGD steps against torch step for step ----


class ConvNet:
    def __init__(self, lib):
        self.conv = lib.Conv2d(2, 4, 3, padding=1)
        self.bn = lib.BatchNorm2d(4)
        self.pool = lib.MaxPool2d(2)
        self.drop = lib.Dropout(0.5)
        self.fc = lib.Linear(4 * 3 * 3, 3)

    def __call__(self, x):
        y = self.pool(self.bn(self.conv(x)).relu())  # (N, 4, 6, 6) -> (N, 4, 3, 3)
        return self.fc(self.drop(y).reshape(y.shape[0], -1))


class TorchConvNet(ConvNet, torch.nn.Module):
    def __init__(self):
        torch.nn.Module.__init__(self)
        ConvNet.__init__(self, torch.nn)

    def forward(self, x):
        return ConvNet.__call__(self, x)


def test_convnet_trains_3_sgd_steps_as_torch(device):
    ours, theirs = ConvNet(nn), TorchConvNet()
    with torch.no_grad():
        for name, p in nn.named_parameters(ours):
            theirs.get_parameter(name).copy_(torch.from_numpy(p.numpy()))
    ours.drop.training = False  # dropout in eval (the identity), batchnorm in training
    theirs.drop.eval()
    opt = optim.SGD(nn.parameters(ours), lr=0.1, momentum=0.9)
    momenta = {}
    for step in range(3):
        x, target = _randn(4, 2, 6, 6), rng.integers(0, 3, 4)
        loss = nn.cross_entropy(ours(limn.Tensor(x)), limn.Tensor(target.astype(np.int32)))
        loss.backward()
        opt.step(loss, ours.bn.running_mean, ours.bn.running_var)  # the batch's statistics land in this run
        tloss = torch.nn.functional.cross_entropy(theirs(torch.tensor(x)), torch.tensor(target))
        theirs.zero_grad()
        tloss.backward()
        with torch.no_grad():  # torch.optim.SGD's update, written out: building a torch optimizer costs ~5 s here
            for name, p in theirs.named_parameters():
                momenta[name] = p.grad.clone() if step == 0 else 0.9 * momenta[name] + p.grad
                p -= 0.1 * momenta[name]
        _close(loss.numpy(), tloss, f"loss at step {step}")
    for name, p in nn.named_parameters(ours):
        _close(p.numpy(), theirs.get_parameter(name), f"{name} after 3 steps")
    _buffers_match(ours.bn, theirs.bn)


def test_batchnorm_state_dict_has_torchs_buffers_and_loads_strictly_both_ways():
    """running_mean, running_var and num_batches_tracked are in state_dict under torch's names, so a torch
    BatchNorm2d's state_dict loads strictly into limn's, and limn's into torch's."""
    t = torch.nn.BatchNorm2d(3)
    t.train()
    t(torch.randn(4, 3, 5, 5))  # moves the running stats and the count away from their inits
    ours = nn.BatchNorm2d(3)
    nn.load_state_dict(ours, {k: v.numpy() for k, v in t.state_dict().items()}, strict=True)
    assert sorted(nn.state_dict(ours)) == sorted(t.state_dict())
    np.testing.assert_allclose(ours.running_var.numpy(), t.running_var.numpy(), rtol=1e-6)
    assert ours.num_batches_tracked.item() == 1
    back = torch.nn.BatchNorm2d(3)
    back.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in nn.state_dict(ours).items()}, strict=True)
    np.testing.assert_allclose(back.running_mean.numpy(), t.running_mean.numpy(), rtol=1e-6)
