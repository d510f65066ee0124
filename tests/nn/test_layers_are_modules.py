"""Every built-in layer is a limn.nn.Module with torch.nn.Module's methods, against torch.nn as the oracle: each
layer built with the same arguments in both has torch's parameter names and order, state_dict keys (buffers
included) and buffer names; forward(x) is what calling it gives; train()/eval() return the module and reach
every layer of a Sequential; a subclass's forward is what a call runs.
"""

import inspect

import numpy as np
import pytest
import torch

import limn
import limn.nn as nn
from limn import Tensor

rng = np.random.default_rng(0)


def _randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _pooled(pool):
    """A max pool's (values, indices) of a random input: the arguments of the matching MaxUnpool."""
    return lambda: pool(Tensor(_randn(*(1, 2) + (4,) * pool.dims)))


# (id, make(namespace, tensor) -> layer, inputs() -> limn arguments of one call or None for no forward).
# make is called with (limn.nn, limn.Tensor) and with (torch.nn, torch.tensor): the same arguments in both.
LAYERS = [
    ("Linear", lambda m, t: m.Linear(4, 3), lambda: (Tensor(_randn(2, 4)),)),
    ("Linear-nobias", lambda m, t: m.Linear(4, 3, bias=False), lambda: (Tensor(_randn(2, 4)),)),
    ("LayerNorm", lambda m, t: m.LayerNorm(4), lambda: (Tensor(_randn(2, 4)),)),
    ("LayerNorm-nobias", lambda m, t: m.LayerNorm((2, 4), bias=False), lambda: (Tensor(_randn(3, 2, 4)),)),
    ("Embedding", lambda m, t: m.Embedding(5, 3), lambda: (Tensor(np.array([[0, 4], [2, 2]])),)),
    ("Conv1d", lambda m, t: m.Conv1d(2, 4, 3, padding=1), lambda: (Tensor(_randn(1, 2, 6)),)),
    ("Conv2d", lambda m, t: m.Conv2d(2, 4, 3, groups=2, bias=False), lambda: (Tensor(_randn(1, 2, 5, 5)),)),
    (
        "Conv2d-reflect",
        lambda m, t: m.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"),
        lambda: (Tensor(_randn(1, 2, 4, 4)),),
    ),
    ("ConvTranspose1d", lambda m, t: m.ConvTranspose1d(2, 3, 2, stride=2), lambda: (Tensor(_randn(1, 2, 3)),)),
    ("ConvTranspose2d", lambda m, t: m.ConvTranspose2d(2, 3, 2), lambda: (Tensor(_randn(1, 2, 3, 3)),)),
    ("ReLU", lambda m, t: m.ReLU(), lambda: (Tensor(_randn(2, 3)),)),
    ("GELU", lambda m, t: m.GELU(approximate="tanh"), lambda: (Tensor(_randn(2, 3)),)),
    ("SiLU", lambda m, t: m.SiLU(), lambda: (Tensor(_randn(2, 3)),)),
    ("LeakyReLU", lambda m, t: m.LeakyReLU(0.2), lambda: (Tensor(_randn(2, 3)),)),
    ("Tanh", lambda m, t: m.Tanh(), lambda: (Tensor(_randn(2, 3)),)),
    ("Sigmoid", lambda m, t: m.Sigmoid(), lambda: (Tensor(_randn(2, 3)),)),
    ("Identity", lambda m, t: m.Identity(54, unused="x"), lambda: (Tensor(_randn(2, 3)),)),
    ("Flatten", lambda m, t: m.Flatten(), lambda: (Tensor(_randn(2, 3, 4)),)),
    ("Unflatten", lambda m, t: m.Unflatten(1, (2, 3)), lambda: (Tensor(_randn(4, 6)),)),
    (
        "Sequential",
        lambda m, t: m.Sequential(m.Linear(2, 4), m.ReLU(), m.Linear(4, 1)),
        lambda: (Tensor(_randn(3, 2)),),
    ),
    ("ModuleList", lambda m, t: m.ModuleList([m.Linear(2, 3), m.Tanh(), m.LayerNorm(3)]), None),
    ("ModuleDict", lambda m, t: m.ModuleDict({"proj": m.Linear(2, 3), "norm": m.BatchNorm1d(3)}), None),
    ("Dropout", lambda m, t: m.Dropout(0.3), lambda: (Tensor(_randn(2, 3)),)),
    ("Dropout1d", lambda m, t: m.Dropout1d(0.3), lambda: (Tensor(_randn(2, 3, 4)),)),
    ("Dropout2d", lambda m, t: m.Dropout2d(0.3), lambda: (Tensor(_randn(2, 3, 4, 4)),)),
    ("BatchNorm1d", lambda m, t: m.BatchNorm1d(3), lambda: (Tensor(_randn(4, 3)),)),
    ("BatchNorm2d", lambda m, t: m.BatchNorm2d(3, momentum=None), lambda: (Tensor(_randn(2, 3, 4, 4)),)),
    (
        "BatchNorm2d-untracked",
        lambda m, t: m.BatchNorm2d(3, affine=False, track_running_stats=False),
        lambda: (Tensor(_randn(2, 3, 4, 4)),),
    ),
    ("GroupNorm", lambda m, t: m.GroupNorm(2, 4), lambda: (Tensor(_randn(2, 4, 3)),)),
    ("InstanceNorm1d", lambda m, t: m.InstanceNorm1d(3), lambda: (Tensor(_randn(2, 3, 5)),)),
    ("InstanceNorm2d-affine", lambda m, t: m.InstanceNorm2d(3, affine=True), lambda: (Tensor(_randn(2, 3, 4, 4)),)),
    ("RMSNorm", lambda m, t: m.RMSNorm(4), lambda: (Tensor(_randn(2, 4)),)),
    (
        "CrossEntropyLoss",
        lambda m, t: m.CrossEntropyLoss(label_smoothing=0.1),
        lambda: (Tensor(_randn(4, 3)), Tensor(np.array([0, 2, 1, 2]))),
    ),
    (
        "CrossEntropyLoss-weight",
        lambda m, t: m.CrossEntropyLoss(weight=t(np.array([1.0, 2.0, 0.5], np.float32))),
        lambda: (Tensor(_randn(4, 3)), Tensor(np.array([0, 2, 1, 2]))),
    ),
    (
        "NLLLoss",
        lambda m, t: m.NLLLoss(),
        lambda: (Tensor(_randn(4, 3)).log_softmax(-1), Tensor(np.array([0, 2, 1, 2]))),
    ),
    (
        "BCEWithLogitsLoss-pos_weight",
        lambda m, t: m.BCEWithLogitsLoss(pos_weight=t(np.array([2.0, 1.0], np.float32))),
        lambda: (Tensor(_randn(3, 2)), Tensor(np.array([[1, 0], [0, 1], [1, 1]], np.float32))),
    ),
    (
        "BCELoss",
        lambda m, t: m.BCELoss(reduction="sum"),
        lambda: (Tensor(_randn(3, 2)).sigmoid(), Tensor(np.array([[1, 0], [0, 1], [1, 1]], np.float32))),
    ),
    ("MSELoss", lambda m, t: m.MSELoss(), lambda: (Tensor(_randn(3, 2)), Tensor(_randn(3, 2)))),
    ("L1Loss", lambda m, t: m.L1Loss(reduction="none"), lambda: (Tensor(_randn(3, 2)), Tensor(_randn(3, 2)))),
    ("MaxPool1d", lambda m, t: m.MaxPool1d(2), lambda: (Tensor(_randn(1, 2, 6)),)),
    ("MaxPool2d-indices", lambda m, t: m.MaxPool2d(2, return_indices=True), lambda: (Tensor(_randn(1, 2, 4, 4)),)),
    ("MaxPool3d", lambda m, t: m.MaxPool3d(2), lambda: (Tensor(_randn(1, 1, 4, 4, 4)),)),
    ("AvgPool1d", lambda m, t: m.AvgPool1d(2), lambda: (Tensor(_randn(1, 2, 6)),)),
    ("AvgPool2d", lambda m, t: m.AvgPool2d(2, padding=1), lambda: (Tensor(_randn(1, 2, 4, 4)),)),
    ("AvgPool3d", lambda m, t: m.AvgPool3d(2), lambda: (Tensor(_randn(1, 1, 4, 4, 4)),)),
    ("AdaptiveAvgPool1d", lambda m, t: m.AdaptiveAvgPool1d(3), lambda: (Tensor(_randn(1, 2, 6)),)),
    ("AdaptiveAvgPool2d", lambda m, t: m.AdaptiveAvgPool2d((1, None)), lambda: (Tensor(_randn(1, 2, 4, 3)),)),
    ("AdaptiveAvgPool3d", lambda m, t: m.AdaptiveAvgPool3d(2), lambda: (Tensor(_randn(1, 1, 4, 4, 4)),)),
    ("AdaptiveMaxPool1d", lambda m, t: m.AdaptiveMaxPool1d(3), lambda: (Tensor(_randn(1, 2, 6)),)),
    ("AdaptiveMaxPool2d", lambda m, t: m.AdaptiveMaxPool2d(2), lambda: (Tensor(_randn(1, 2, 4, 4)),)),
    ("AdaptiveMaxPool3d", lambda m, t: m.AdaptiveMaxPool3d(2), lambda: (Tensor(_randn(1, 1, 4, 4, 4)),)),
    ("MaxUnpool1d", lambda m, t: m.MaxUnpool1d(2), _pooled(nn.MaxPool1d(2, return_indices=True))),
    ("MaxUnpool2d", lambda m, t: m.MaxUnpool2d(2), _pooled(nn.MaxPool2d(2, return_indices=True))),
    ("MaxUnpool3d", lambda m, t: m.MaxUnpool3d(2), _pooled(nn.MaxPool3d(2, return_indices=True))),
    ("LPPool1d", lambda m, t: m.LPPool1d(2, 2), lambda: (Tensor(_randn(1, 2, 6)),)),
    ("LPPool2d", lambda m, t: m.LPPool2d(2, 2), lambda: (Tensor(_randn(1, 2, 4, 4)),)),
    ("LPPool3d", lambda m, t: m.LPPool3d(2, 2), lambda: (Tensor(_randn(1, 1, 4, 4, 4)),)),
    ("Upsample", lambda m, t: m.Upsample(scale_factor=2, mode="bilinear"), lambda: (Tensor(_randn(1, 1, 2, 3)),)),
    ("UpsamplingNearest2d", lambda m, t: m.UpsamplingNearest2d(scale_factor=2), lambda: (Tensor(_randn(1, 1, 2, 3)),)),
    ("UpsamplingBilinear2d", lambda m, t: m.UpsamplingBilinear2d(size=(3, 4)), lambda: (Tensor(_randn(1, 1, 2, 3)),)),
]
CASES = [pytest.param(make, inputs, id=name) for name, make, inputs in LAYERS]
# ModuleList and ModuleDict have no forward, as torch's
CALLED = [pytest.param(make, inputs, id=name) for name, make, inputs in LAYERS if inputs is not None]


def _pair(make):
    return make(nn, Tensor), make(torch.nn, torch.tensor)


def _numpy(out):
    return [o.numpy() for o in out] if isinstance(out, tuple) else [out.numpy()]


def test_every_layer_class_of_limn_nn_is_listed_here():
    """A layer added to limn.nn joins the checks below: each public Module class is built by some case."""
    layers = {n for n, c in vars(nn).items() if inspect.isclass(c) and issubclass(c, nn.Module) and n[0] != "_"}
    built = {type(make(nn, Tensor)).__name__ for _, make, _ in LAYERS}
    assert layers - {"Module"} == built


@pytest.mark.parametrize(("make", "inputs"), CASES)
def test_a_layer_is_a_module_with_torchs_parameter_names_and_state_dict_keys(make, inputs):
    ours, theirs = _pair(make)
    assert isinstance(ours, nn.Module)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))
    assert [tuple(p.shape) for p in ours.parameters()] == [tuple(p.shape) for p in theirs.parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]


@pytest.mark.parametrize(("make", "inputs"), CALLED)
def test_a_layers_forward_is_what_calling_it_gives(make, inputs):
    limn.manual_seed(0)
    layer = make(nn, Tensor).eval()  # eval: dropout is the identity, so two calls agree
    args = inputs()
    for got, want in zip(_numpy(layer.forward(*args)), _numpy(layer(*args)), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("make", "inputs"), CASES)
def test_train_and_eval_return_the_module_and_reach_every_layer_of_a_sequential(make, inputs):
    ours, theirs = nn.Sequential(make(nn, Tensor), nn.ReLU()), torch.nn.Sequential(make(torch.nn, torch.tensor))
    for model in (ours, theirs):
        assert model.eval() is model
        assert [m.training for m in model.modules()] == [False] * len(list(model.modules()))
        assert model[0].train() is model[0] and model[0].training
        assert model.train(False) is model and not model[0].training
        assert model.train() is model
        assert all(m.training for m in model.modules())
    assert len(ours) == 2  # train() set `training` on the container; it is not one of its modules


def test_a_subclass_that_overrides_forward_is_called_through_it():
    class Doubled(nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    class TorchDoubled(torch.nn.Linear):
        def forward(self, x):
            return super().forward(x) * 2

    ours, theirs = Doubled(3, 2), TorchDoubled(3, 2)
    ours.load_state_dict(theirs.state_dict())
    x = _randn(4, 3)
    with torch.no_grad():
        want = theirs(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours(Tensor(x)).numpy(), want, rtol=1e-6, atol=1e-6)


def test_a_sequential_walks_its_modules_and_loads_a_torch_state_dict():
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    ours = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [type(m).__name__ for m in ours.children()] == [type(m).__name__ for m in theirs.children()]
    ours.load_state_dict(theirs.state_dict())
    x = _randn(5, 2)
    with torch.no_grad():
        want = theirs(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours(Tensor(x)).numpy(), want, rtol=1e-6, atol=1e-6)
    seen, torch_seen = [], []
    assert ours.apply(lambda m: seen.append(type(m).__name__)) is ours
    theirs.apply(lambda m: torch_seen.append(type(m).__name__))
    assert seen == torch_seen == ["Linear", "ReLU", "Linear", "Sequential"]  # children first
    assert ours.requires_grad_(False) is ours and not any(p.requires_grad for p in ours.parameters())


def test_a_module_dict_refuses_the_name_training_as_torchs():
    with pytest.raises(KeyError):
        torch.nn.ModuleDict({"training": torch.nn.ReLU()})
    with pytest.raises(KeyError, match="training"):
        nn.ModuleDict({"training": nn.ReLU()})
