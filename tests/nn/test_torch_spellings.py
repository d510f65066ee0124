"""torch.nn spellings a model port reaches for, against torch: the activation layers (ReLU, GELU, SiLU,
LeakyReLU, Tanh, Sigmoid) forward and backward on numpy and c and their inplace=True refusal, the loss layers
(CrossEntropyLoss, NLLLoss, BCEWithLogitsLoss, BCELoss, MSELoss, L1Loss) with their weight buffers, `import
limn.nn.functional as F`, F.layer_norm, F.group_norm, F.linear, F.embedding, nn.Parameter (nanoGPT's own
LayerNorm is written with it and F.layer_norm), and
train()/eval() on the layers that read `training` (Dropout, BatchNorm, InstanceNorm), and the F functions
that are a Tensor method called with the tensor by torch's keyword (input=, x1=, query=).
"""

import numpy as np
import pytest
import torch
from test_layers import check_layer

import limn.nn as nn
from limn import Tensor

# values on both sides of 0, 0 itself (the kinks' gradient rule) and large ones (saturation)
X = np.array([[-30.0, -2.5, -1.0, -0.0, 0.0, 0.3, 1.0, 4.0, 30.0]], np.float32)


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (lambda: nn.ReLU(), lambda: torch.nn.ReLU()),
        (lambda: nn.GELU(), lambda: torch.nn.GELU()),
        (lambda: nn.GELU(approximate="tanh"), lambda: torch.nn.GELU(approximate="tanh")),
        (lambda: nn.SiLU(), lambda: torch.nn.SiLU()),
        (lambda: nn.LeakyReLU(0.2), lambda: torch.nn.LeakyReLU(0.2)),
        (lambda: nn.Tanh(), lambda: torch.nn.Tanh()),
        (lambda: nn.Sigmoid(), lambda: torch.nn.Sigmoid()),
    ],
    ids=["relu", "gelu", "gelu-tanh", "silu", "leaky_relu", "tanh", "sigmoid"],
)
def test_activation_layer_matches_torch(device, ours, theirs):
    check_layer(ours(), theirs(), X)


def test_activation_layers_in_a_sequential_match_torch(device):
    ours = nn.Sequential(nn.Linear(9, 6), nn.GELU(), nn.Linear(6, 3), nn.ReLU())
    theirs = torch.nn.Sequential(torch.nn.Linear(9, 6), torch.nn.GELU(), torch.nn.Linear(6, 3), torch.nn.ReLU())
    check_layer(ours, theirs, np.random.default_rng(0).standard_normal((4, 9)).astype(np.float32))


@pytest.mark.parametrize("make", [nn.ReLU, nn.SiLU, nn.LeakyReLU], ids=["relu", "silu", "leaky_relu"])
def test_inplace_activation_layers_raise_as_limn_nn_functions_do(make):
    with pytest.raises(NotImplementedError, match=r"inplace=True\): limn tensors are values"):
        make(inplace=True)


def test_gelu_takes_only_torchs_approximations():
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh', got 'erf'"):
        nn.GELU(approximate="erf")


def test_limn_nn_functional_holds_torchs_functions_and_limn_nn_names_them_too():
    import limn.nn.functional as F
    from limn.nn.functional import gelu, interpolate

    assert gelu is nn.gelu and interpolate is nn.interpolate and nn.functional is F
    differ = [name for name in F.__all__ if getattr(nn, name, None) is not getattr(F, name)]
    assert not differ, f"limn.nn and limn.nn.functional name these differently: {differ}"
    missing = [
        name
        for name in ("relu", "cross_entropy", "conv2d", "pad", "scaled_dot_product_attention")
        if name not in F.__all__
    ]
    assert not missing, f"torch.nn.functional names limn.nn.functional lacks: {missing}"


class NanoGPTLayerNorm(nn.Module):
    """nanoGPT's LayerNorm (model.py), a port of it: nn.Parameter weights and F.layer_norm."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(Tensor.ones(ndim))
        self.bias = nn.Parameter(Tensor.zeros(ndim)) if bias else None

    def forward(self, input):
        return nn.functional.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_nanogpts_layernorm_of_parameter_and_f_layer_norm_matches_torch(device, bias):
    theirs = torch.nn.LayerNorm(4, bias=bias)
    with torch.no_grad():  # weights away from 1 and 0, so a swapped weight and bias would show
        theirs.weight.copy_(torch.tensor([0.5, -1.0, 2.0, 1.5]))
        if bias:
            theirs.bias.copy_(torch.tensor([0.1, 0.2, -0.3, 0.0]))
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32) * 3
    check_layer(NanoGPTLayerNorm(4, bias), theirs, x)


def test_f_layer_norm_without_weights_over_two_dims_matches_torch(device):
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    ours = nn.layer_norm(Tensor(x), (3, 4), eps=1e-3).numpy()
    theirs = torch.nn.functional.layer_norm(torch.from_numpy(x), (3, 4), eps=1e-3).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_f_linear_embedding_and_group_norm_match_torch(device):
    r = np.random.default_rng(5)
    x, w, b = (r.standard_normal(s).astype(np.float32) for s in [(2, 6, 3, 2), (4, 2), (4,)])
    ids, gw, gb = r.integers(0, 4, (2, 5)), r.standard_normal(6).astype(np.float32), r.standard_normal(6)
    gb = gb.astype(np.float32)
    ours = [
        nn.functional.linear(Tensor(x), Tensor(w), Tensor(b)),
        nn.functional.linear(Tensor(x), Tensor(w)),
        nn.functional.embedding(Tensor(ids), Tensor(w)),
        nn.functional.group_norm(Tensor(x), 3, Tensor(gw), Tensor(gb), eps=1e-3),
        nn.functional.group_norm(Tensor(x), 2),
    ]
    tf, (tx, tw, tb, tgw, tgb) = torch.nn.functional, (torch.from_numpy(a) for a in (x, w, b, gw, gb))
    theirs = [
        tf.linear(tx, tw, tb),
        tf.linear(tx, tw),
        tf.embedding(torch.from_numpy(ids), tw),
        tf.group_norm(tx, 3, tgw, tgb, eps=1e-3),
        tf.group_norm(tx, 2),
    ]
    for k, (o, t) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"case {k}")


def test_f_embedding_refuses_what_changes_its_gradient():
    with pytest.raises(NotImplementedError, match="max_norm and scale_grad_by_freq are not implemented"):
        nn.functional.embedding(Tensor([0, 1]), Tensor.ones(3, 2), max_norm=1.0)
    with pytest.raises(ValueError, match=r"padding_idx 3 is outside the table's 3 rows \(use -3 to 2\)"):
        nn.functional.embedding(Tensor([0, 1]), Tensor.ones(3, 2), padding_idx=3)
    with pytest.raises(ValueError, match=r"C divisible by num_groups \(4\), got shape \(2, 6, 3\)"):
        nn.functional.group_norm(Tensor.ones(2, 6, 3), 4)


def test_f_layer_norm_checks_the_trailing_dims():
    with pytest.raises(ValueError, match=r"LayerNorm over \(3,\): the input's trailing dims are \(4,\)"):
        nn.layer_norm(Tensor.ones(2, 4), 3)


def test_parameter_is_a_fresh_leaf_that_requires_grad_as_torchs():
    data = Tensor.ones(3)
    p = nn.Parameter(data)
    assert p.requires_grad and p.grad is None and p.tolist() == [1.0, 1.0, 1.0] and p is not data
    assert not nn.Parameter(Tensor.ones(3), requires_grad=False).requires_grad
    empty, torchs = nn.Parameter(), torch.nn.Parameter()
    assert empty.shape == tuple(torchs.shape) == (0,) and empty.dtype.name == "float32"
    with pytest.raises(TypeError, match="requires_grad=True needs a float dtype"):
        nn.Parameter(Tensor([1, 2]))  # torch raises too: only float tensors can require gradients


# ---- loss layers ----

_rng = np.random.default_rng(3)
LOGITS = (_rng.standard_normal((5, 4)) * 2).astype(np.float32)
CLASSES = np.array([0, 3, -1, 2, 1])  # -1: an ignore_index row
PROBS = _rng.uniform(0.05, 0.95, (5, 4)).astype(np.float32)
BITS = (_rng.uniform(size=(5, 4)) > 0.5).astype(np.float32)
CLASS_WEIGHT = np.array([1.0, 2.0, 0.5, 1.5], np.float32)


@pytest.mark.parametrize(
    "make, x, target",
    [
        (lambda lib, w: lib.CrossEntropyLoss(), LOGITS, np.abs(CLASSES)),
        (lambda lib, w: lib.CrossEntropyLoss(weight=w, ignore_index=-1, label_smoothing=0.1), LOGITS, CLASSES),
        (lambda lib, w: lib.CrossEntropyLoss(reduction="sum"), LOGITS, PROBS),
        (lambda lib, w: lib.NLLLoss(weight=w, ignore_index=-1), LOGITS, CLASSES),
        (lambda lib, w: lib.BCEWithLogitsLoss(pos_weight=w), LOGITS, BITS),
        (lambda lib, w: lib.BCEWithLogitsLoss(weight=w, reduction="none"), LOGITS, BITS),
        (lambda lib, w: lib.BCELoss(weight=w), PROBS, BITS),
        (lambda lib, w: lib.MSELoss(), LOGITS, PROBS),
        (lambda lib, w: lib.L1Loss(reduction="sum"), LOGITS, PROBS),
    ],
    ids=["ce", "ce-weight-ignore-smoothing", "ce-probabilities-sum", "nll", "bce-logits-pos_weight",
         "bce-logits-weight-none", "bce", "mse", "l1-sum"],
)  # fmt: skip
def test_loss_layer_matches_torch(device, make, x, target):
    ours = make(nn, Tensor(CLASS_WEIGHT))
    theirs = make(torch.nn, torch.from_numpy(CLASS_WEIGHT))
    xl, xt = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    loss = ours(xl, Tensor(target))
    torch_loss = theirs(xt, torch.from_numpy(target))
    loss.sum().backward()
    torch_loss.sum().backward()
    np.testing.assert_allclose(loss.numpy(), torch_loss.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_loss_layers_keep_their_weights_as_buffers_under_torchs_names():
    class Model(nn.Module):
        def __init__(self):
            self.head = nn.Linear(4, 4)
            self.criterion = nn.BCEWithLogitsLoss(weight=Tensor(CLASS_WEIGHT), pos_weight=Tensor(CLASS_WEIGHT))
            self.ce = nn.CrossEntropyLoss()

    class TorchModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.head = torch.nn.Linear(4, 4)
            w = torch.from_numpy(CLASS_WEIGHT)
            self.criterion = torch.nn.BCEWithLogitsLoss(weight=w, pos_weight=w)
            self.ce = torch.nn.CrossEntropyLoss()

    ours, theirs = Model(), TorchModel()
    assert list(ours.state_dict()) == list(theirs.state_dict())  # head.*, criterion.weight, criterion.pos_weight
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})  # strict
    assert [n for n, _ in ours.named_parameters()] == ["head.weight", "head.bias"]


# ---- train() / eval() on the layers that read `training` ----


@pytest.mark.parametrize(
    "make", [nn.Dropout, nn.Dropout1d, nn.Dropout2d, lambda: nn.BatchNorm2d(3), lambda: nn.InstanceNorm2d(3)]
)
def test_layers_that_read_training_train_and_eval_as_torchs(make):
    layer = make()
    assert layer.training and layer.eval() is layer and not layer.training
    assert layer.train() is layer and layer.training and not layer.train(False).training
    with pytest.raises(ValueError, match="mode must be a bool, got 'no'"):
        layer.train("no")


def test_batchnorm_after_eval_uses_its_running_stats_as_torchs(device):
    x = np.random.default_rng(4).standard_normal((4, 3, 5, 5)).astype(np.float32) * 2 + 1
    ours, theirs = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    ours(Tensor(x)), theirs(torch.from_numpy(x))  # one training step moves the running stats
    check_layer(ours.eval(), theirs.eval(), x[:2] - 0.5)


# torch's F functions that are one Tensor method: called with the tensor by torch's keyword, they give torch's
# value (torch names it `input`, `x1` for cosine_similarity, `query` for scaled_dot_product_attention)
P = np.array([[0.2, -1.5, 3.0], [1.0, 0.5, -0.25]], np.float32)
T = np.array([2, 0])
F_BY_KEYWORD = [  # (name, call(F, tensor, x)): F is torch.nn.functional or limn's, tensor its tensor maker
    ("softplus", lambda F, tensor, x: F.softplus(input=x, beta=2.0)),
    ("logsigmoid", lambda F, tensor, x: F.logsigmoid(input=x)),
    ("softsign", lambda F, tensor, x: F.softsign(input=x)),
    ("hardshrink", lambda F, tensor, x: F.hardshrink(input=x, lambd=0.3)),
    ("glu", lambda F, tensor, x: F.glu(input=x[:, :2], dim=-1)),
    ("normalize", lambda F, tensor, x: F.normalize(input=x, dim=1)),
    ("cross_entropy", lambda F, tensor, x: F.cross_entropy(input=x, target=tensor(T))),
    ("nll_loss", lambda F, tensor, x: F.nll_loss(input=x, target=tensor(T))),
    ("mse_loss", lambda F, tensor, x: F.mse_loss(input=x, target=x * 0.5)),
    ("kl_div", lambda F, tensor, x: F.kl_div(input=x, target=x.abs(), reduction="sum")),
    ("cosine_similarity", lambda F, tensor, x: F.cosine_similarity(x1=x, x2=x * 2.0 + 1.0)),
    ("pad", lambda F, tensor, x: F.pad(input=x, pad=(1, 2))),
]


@pytest.mark.parametrize("name, call", F_BY_KEYWORD, ids=[row[0] for row in F_BY_KEYWORD])
def test_functional_takes_the_tensor_by_torchs_keyword(name, call):
    import limn.nn.functional as LF

    got = call(LF, Tensor, Tensor(P)).numpy()
    want = call(torch.nn.functional, torch.tensor, torch.tensor(P)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"F.{name} by keyword against torch")


def test_scaled_dot_product_attention_takes_query_key_value_by_name():
    import limn.nn.functional as LF

    q = np.random.default_rng(0).standard_normal((1, 2, 4, 8)).astype(np.float32)
    got = LF.scaled_dot_product_attention(query=Tensor(q), key=Tensor(q), value=Tensor(q)).numpy()
    want = torch.nn.functional.scaled_dot_product_attention(
        query=torch.tensor(q), key=torch.tensor(q), value=torch.tensor(q)
    ).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
