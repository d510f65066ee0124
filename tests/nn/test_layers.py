"""limn.nn against torch.nn: each layer's forward, input gradient and every parameter gradient, with the
same weights copied in, on the numpy reference and on the compiled c device; and parameter names.

The loss is sum(out * r) for a fixed random r, so every output cell sends back a different gradient.
Tolerance: 1e-4 relative and 1e-5 absolute in float32. Sums here run over at most a few hundred terms,
whose rounding differs between frameworks by a few float32 ulps (~1e-7 relative each).
"""

import itertools

import numpy as np
import pytest
import torch

import limn
import limn.nn as nn
from limn.compiler.schedule import kernel_count
from limn.composed.functional.convolution import conv

DEVICES = ["numpy", "c"]
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(params=DEVICES)
def device(request):
    limn.set_device(request.param)
    return request.param


def _close(limn_value, torch_value, what):
    expected = torch_value.detach().numpy() if isinstance(torch_value, torch.Tensor) else torch_value
    np.testing.assert_allclose(limn_value, expected, rtol=RTOL, atol=ATOL, err_msg=what)


def _copy_weights(limn_layer, torch_layer):
    """Copies limn's weights into torch by name; the names themselves must agree."""
    ours = dict(nn.named_parameters(limn_layer))
    theirs = dict(torch_layer.named_parameters())
    assert list(ours) == list(theirs), "parameter names differ from torch's"
    with torch.no_grad():
        for name, t in ours.items():
            theirs[name].copy_(torch.from_numpy(t.numpy()))


def check_layer(limn_layer, torch_layer, x, seed=0):
    """Forward and backward of both, compared: the output, x's gradient (float inputs) and every
    parameter's gradient."""
    _copy_weights(limn_layer, torch_layer)
    floating = x.dtype.kind == "f"
    xl = limn.Tensor(x, requires_grad=floating)
    out = limn_layer(xl)
    r = np.random.default_rng(seed).standard_normal(out.shape).astype(np.float32)
    (out * limn.Tensor(r)).sum().backward()
    params = dict(nn.named_parameters(limn_layer))
    limn.realize(out, *[p.grad for p in params.values()], *([xl.grad] if floating else []))

    xt = torch.tensor(x, requires_grad=floating) if floating else torch.tensor(x.astype(np.int64))
    out_t = torch_layer(xt)
    (out_t * torch.from_numpy(r)).sum().backward()
    _close(out.numpy(), out_t, "output")
    if floating:
        _close(xl.grad.numpy(), xt.grad, "input gradient")
    theirs = dict(torch_layer.named_parameters())
    for name, p in params.items():
        _close(p.grad.numpy(), theirs[name].grad, f"gradient of {name}")


def _randn(*shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- layers ----


def test_linear_matches_torch(device):
    check_layer(nn.Linear(5, 3), torch.nn.Linear(5, 3), _randn(2, 4, 5))


def test_linear_without_bias_matches_torch(device):
    check_layer(nn.Linear(5, 3, bias=False), torch.nn.Linear(5, 3, bias=False), _randn(4, 5))


def test_linear_init_is_torchs_kaiming_uniform():
    layer = nn.Linear(64, 256)
    bound = 1 / 8  # 1 / sqrt(fan_in)
    w, b = layer.weight.numpy(), layer.bias.numpy()
    assert w.shape == (256, 64) and b.shape == (256,)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.05 * bound  # uniform(-a, a) has std a / sqrt(3)
    assert np.abs(b).max() <= bound


@pytest.mark.parametrize("shape, affine", [((6,), True), ((3, 4), True), ((5,), False)])
def test_layernorm_matches_torch(device, shape, affine):
    x = _randn(2, 3, *shape) * 3 + 1
    check_layer(
        nn.LayerNorm(shape, elementwise_affine=affine),
        torch.nn.LayerNorm(shape, elementwise_affine=affine),
        x,
    )


def test_layernorm_uses_the_biased_variance():
    x = limn.Tensor([[1.0, 3.0]])
    y = nn.LayerNorm(2, eps=0.0)(x).numpy()
    np.testing.assert_allclose(y, [[-1.0, 1.0]], rtol=1e-6)  # var = 1 (biased), not 2


def test_layernorm_rejects_a_wrong_trailing_shape():
    with pytest.raises(ValueError, match="trailing dims"):
        nn.LayerNorm(4)(limn.Tensor(np.zeros((2, 3), np.float32)))


def test_embedding_matches_torch_with_repeated_ids(device):
    ids = np.array([[1, 4, 1], [0, 4, 4]], np.int32)  # repeated ids add their gradients
    check_layer(nn.Embedding(6, 3), torch.nn.Embedding(6, 3), ids)


@pytest.mark.parametrize("padding_idx", [0, -2])
def test_embedding_padding_row_reads_as_is_and_gets_no_gradient_as_torchs(device, padding_idx):
    ids = np.array([[1, 4, 4], [0, 4, 1]], np.int32)  # the pad row (0, or 4 counted from the end) is read
    check_layer(nn.Embedding(6, 3, padding_idx=padding_idx), torch.nn.Embedding(6, 3, padding_idx=padding_idx), ids)


def test_embedding_padding_row_starts_at_zero_as_torchs():
    ours, theirs = nn.Embedding(5, 4, padding_idx=-1).weight.numpy(), torch.nn.Embedding(5, 4, padding_idx=-1).weight
    np.testing.assert_array_equal(ours[4], theirs.detach().numpy()[4])
    assert np.all(ours[4] == 0) and np.all(ours[:4] != 0)


def test_embedding_init_is_standard_normal():
    w = nn.Embedding(500, 40).weight.numpy()
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1) < 0.02


CONV2D_CASES = [
    # in, out, kernel, stride, padding, dilation, groups
    (3, 4, 3, 1, 1, 1, 1),  # same padding
    (4, 6, 3, 2, 1, 1, 2),  # stride 2, two groups
    (4, 4, (3, 2), (1, 2), (2, 0), (2, 1), 4),  # depthwise, dilated, rectangular
    (2, 3, 1, 1, 0, 1, 1),  # 1x1: pure views, no copy
    (2, 3, 2, 2, 0, 1, 1),  # kernel == stride: windows do not overlap
    (2, 2, 2, 3, 1, 1, 1),  # stride past the kernel, with padding
    (2, 4, 3, (3, 1), 0, (2, 1), 2),  # dilated windows overlapping a stride of 3
]


@pytest.mark.parametrize("case", CONV2D_CASES, ids=lambda c: "in{}-out{}-k{}-s{}-p{}-d{}-g{}".format(*c))
def test_conv2d_matches_torch(device, case):
    cin, cout, k, s, p, d, g = case
    limn_layer = nn.Conv2d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g)
    torch_layer = torch.nn.Conv2d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g)
    check_layer(limn_layer, torch_layer, _randn(2, cin, 7, 6))


CONV1D_CASES = [
    (3, 4, 3, 1, 1, 1, 1),
    (4, 4, 3, 2, 2, 2, 2),
    (2, 3, 2, 3, 0, 1, 1),
    (2, 2, 1, 1, 0, 1, 1),
    (2, 2, 1, 2, 1, 3, 1),  # one tap: dilation changes nothing
]


@pytest.mark.parametrize("case", CONV1D_CASES, ids=lambda c: "in{}-out{}-k{}-s{}-p{}-d{}-g{}".format(*c))
def test_conv1d_matches_torch(device, case):
    cin, cout, k, s, p, d, g = case
    limn_layer = nn.Conv1d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g)
    torch_layer = torch.nn.Conv1d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g)
    check_layer(limn_layer, torch_layer, _randn(2, cin, 9))


def test_conv_without_bias_matches_torch():
    check_layer(nn.Conv2d(2, 3, 3, bias=False), torch.nn.Conv2d(2, 3, 3, bias=False), _randn(1, 2, 5, 5))


def test_conv_weight_layout_and_init_are_torchs():
    conv = nn.Conv2d(4, 8, (3, 2), groups=2)
    assert conv.weight.shape == (8, 2, 3, 2) and conv.bias.shape == (8,)
    bound = 1 / np.sqrt(2 * 3 * 2)  # fan_in = in / groups * kH * kW
    assert np.abs(conv.weight.numpy()).max() <= bound


def test_conv2d_forward_is_the_window_copies_a_matmul_and_a_bias_add():
    x = limn.Tensor(_randn(2, 4, 8, 8))
    with limn.no_grad():  # inference (a trained conv's layout: the next test)
        # the im2col rows (every tap a view of x, one copy), the matmul, the bias add
        assert kernel_count([nn.Conv2d(4, 8, 3, padding=1)(x).node]) == 3
        assert kernel_count([nn.Conv2d(4, 8, 3, padding=1, bias=False)(x).node]) == 2
        assert kernel_count([nn.Conv2d(4, 8, 2, stride=2)(x).node]) == 3
        assert kernel_count([nn.Conv2d(4, 8, 1, bias=False)(x).node]) == 1  # 1x1: the matmul reads x as it is
        # beyond MAX_CAT_TAPS the windows take the repeat that makes them views: one more copy
        assert kernel_count([nn.Conv2d(4, 8, 7, padding=3, bias=False)(x).node]) == 3


def test_a_trained_conv_is_one_matmul_over_the_batch_whose_weight_gradient_folds_one_axis():
    """With gradients wanted, the im2col rows are (C k, B P) and the forward is one matmul over the whole batch
    (then the copy back to (B, O, P)), so the weight gradient reduces over one axis of B P cells, a matmul the
    c device tiles; per batch, it reduced over the batch and the cells both (86 ms against 10.5 for a padded
    3 x 3 conv of 8 x 32 x 32 x 32, forward and backward). Values against torch: the tests below."""
    from limn.graph.ops import Op, toposort

    conv = nn.Conv2d(4, 8, 3, padding=1, bias=False)
    x = limn.Tensor(_randn(2, 4, 8, 8), requires_grad=True)
    y = conv(x)
    assert kernel_count([y.node]) == 3, "the im2col rows, the matmul, the copy back to (B, O, P)"
    (y * y).sum().backward()
    folds = [n for n in toposort([conv.weight.grad.node]) if n.op is Op.SUM and len(n.srcs[0].shape) > 2]
    assert folds and all(len(n.arg) == 1 for n in folds), [(n.srcs[0].shape, n.arg) for n in folds]
    with limn.no_grad():
        assert kernel_count([conv(x).node]) == 2, "without gradients: W @ cols per batch, no copy back"


def test_a_conv_backward_reads_its_im2col_gradient_in_place():
    """The gradient of the im2col rows comes out of the matmul as (C k, B P), the rows' own layout, and the kernel
    that sums the nine taps back into x's gradient reads each tap's shifted, padded view of it through the
    transpose to (B, C, H, W) (fusion.compose through a reorder): no tap is copied out first. Before, the rows'
    gradient came out as (B P, C k) and each tap was copied into a buffer of its own (7 kernels for x's
    gradient, 5 for the weight's). Values against torch: the tests around this one."""
    conv = nn.Conv2d(4, 8, 3, padding=1, bias=False)
    x = limn.Tensor(_randn(2, 4, 8, 8), requires_grad=True)
    y = conv(x)
    (y * y).sum().backward()
    assert kernel_count([x.grad.node]) == 5, "im2col rows, forward matmul, dy, the rows' gradient, the taps' sum"
    assert kernel_count([conv.weight.grad.node]) == 4, "im2col rows, forward matmul, dy, the weight's matmul"


def test_conv2d_taps_in_the_padding_and_strided_taps_match_torch():
    # every tap is a view of x cut by kernel, stride, padding and dilation, some wholly in the padding;
    # the output and both gradients against torch's conv2d, for each combination
    import torch.nn.functional as F

    failures = []
    for k, s, p, d, size in itertools.product((1, 2, 3, 4), (1, 2, 3), (0, 1, 3), (1, 2), (5, 6)):
        if size + 2 * p < d * (k - 1) + 1:
            continue
        x_np, w_np = _randn(1, 2, size, size + 1, seed=k + s), _randn(3, 2, k, k, seed=p + d)
        x, w = limn.Tensor(x_np, requires_grad=True), limn.Tensor(w_np, requires_grad=True)
        y = conv(x, w, None, (s, s), (p, p), (d, d), 1)
        (y * y).sum().backward()
        xt, wt = torch.tensor(x_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)
        yt = F.conv2d(xt, wt, None, s, p, d)
        (yt * yt).sum().backward()
        for name, got, want in (("y", y, yt), ("x.grad", x.grad, xt.grad), ("w.grad", w.grad, wt.grad)):
            if not np.allclose(got.numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-4):
                failures.append(f"kernel {k} stride {s} padding {p} dilation {d} size {size}: {name}")
    assert not failures, "differs from torch.nn.functional.conv2d:\n" + "\n".join(failures)


def test_conv_rejects_mismatched_channels_and_empty_outputs():
    with pytest.raises(ValueError, match="groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="does not fit weight"):
        nn.Conv2d(3, 4, 3)(limn.Tensor(_randn(1, 2, 5, 5)))
    with pytest.raises(ValueError, match="empty"):
        nn.Conv1d(1, 1, 5)(limn.Tensor(_randn(1, 1, 3)))


# ---- activations and losses ----


class _Fn(torch.nn.Module):
    """A torch function as a parameterless module, for check_layer."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("name", ["relu", "gelu", "gelu_tanh", "softmax", "log_softmax"])
def test_activations_match_torch(device, name):
    x = _randn(3, 5) * 2
    limn_fn = {
        "relu": nn.relu,
        "gelu": nn.gelu,
        "gelu_tanh": lambda t: nn.gelu(t, "tanh"),
        "softmax": nn.softmax,
        "log_softmax": nn.log_softmax,
    }[name]
    torch_fn = {
        "relu": torch.relu,
        "gelu": torch.nn.functional.gelu,
        "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
        "softmax": lambda t: t.softmax(-1),
        "log_softmax": lambda t: t.log_softmax(-1),
    }[name]
    check_layer(limn_fn, _Fn(torch_fn), x)


@pytest.mark.parametrize("reduction, smoothing", [("mean", 0.0), ("mean", 0.2), ("sum", 0.2), ("none", 0.0)])
def test_cross_entropy_matches_torch(device, reduction, smoothing):
    logits = _randn(6, 5) * 2
    target = np.array([0, 4, -100, 2, 2, -100])  # two rows ignored
    check_layer(
        lambda x: nn.cross_entropy(
            x, limn.Tensor(target.astype(np.int32)), label_smoothing=smoothing, reduction=reduction
        ),
        _Fn(
            lambda x: torch.nn.functional.cross_entropy(
                x, torch.tensor(target), label_smoothing=smoothing, reduction=reduction
            )
        ),
        logits,
    )


def test_cross_entropy_over_a_sequence_dim_with_a_custom_ignore_index(device):
    logits = _randn(2, 4, 3)  # (N, C, T)
    target = np.array([[1, 3, 0], [3, 2, 2]])
    check_layer(
        lambda x: nn.cross_entropy(x, limn.Tensor(target.astype(np.int32)), ignore_index=3, label_smoothing=0.1),
        _Fn(lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(target), ignore_index=3, label_smoothing=0.1)),
        logits,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_torch(device, reduction):
    target = _randn(3, 4, seed=7)
    check_layer(
        lambda x: nn.mse_loss(x, limn.Tensor(target), reduction=reduction),
        _Fn(lambda x: torch.nn.functional.mse_loss(x, torch.from_numpy(target), reduction=reduction)),
        _randn(3, 4),
    )


# ---- parameter names: the same structure gets torch's names, in the same order ----


class LimnMLP:
    def __init__(self):
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)


class TorchMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 2)


class LimnAttention:
    def __init__(self, d):
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.causal = limn.Tensor(np.tril(np.ones((4, 4), np.float32)))  # no grad: not a parameter


class TorchAttention(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)


class LimnBlock:
    def __init__(self, d):
        self.ln1 = nn.LayerNorm(d)
        self.attn = LimnAttention(d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = {"fc": nn.Linear(d, 4 * d), "proj": nn.Linear(4 * d, d)}


class TorchBlock(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.attn = TorchAttention(d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.ModuleDict({"fc": torch.nn.Linear(d, 4 * d), "proj": torch.nn.Linear(4 * d, d)})


class LimnGPT:
    def __init__(self, d=8, layers=2):
        self.wte = nn.Embedding(16, d)
        self.layers = [LimnBlock(d) for _ in range(layers)]
        self.ln_f = nn.LayerNorm(d)
        self.conv = (nn.Conv1d(d, d, 3),)


class TorchGPT(torch.nn.Module):
    def __init__(self, d=8, layers=2):
        super().__init__()
        self.wte = torch.nn.Embedding(16, d)
        self.layers = torch.nn.ModuleList([TorchBlock(d) for _ in range(layers)])
        self.ln_f = torch.nn.LayerNorm(d)
        self.conv = torch.nn.ModuleList([torch.nn.Conv1d(d, d, 3)])


@pytest.mark.parametrize("models", [(LimnMLP, TorchMLP), (LimnGPT, TorchGPT)], ids=["mlp", "gpt"])
def test_named_parameters_are_torchs_names_and_shapes(models):
    limn_model, torch_model = models[0](), models[1]()
    ours = [(name, t.shape) for name, t in nn.named_parameters(limn_model)]
    theirs = [(name, tuple(p.shape)) for name, p in torch_model.named_parameters()]
    assert ours == theirs
    assert [t for _, t in nn.named_parameters(limn_model)] == nn.parameters(limn_model)


def test_named_parameters_lists_a_tied_tensor_once_under_its_first_path():
    class Tied:
        def __init__(self):
            self.wte = nn.Embedding(5, 3)
            self.head = nn.Linear(3, 5, bias=False)
            self.head.weight = self.wte.weight
            self.me = self  # a cycle is walked once

    assert [name for name, _ in nn.named_parameters(Tied())] == ["wte.weight"]


def test_state_dict_round_trip_writes_into_the_same_tensors():
    src, dst = LimnMLP(), LimnMLP()
    weight = dst.fc1.weight
    nn.load_state_dict(dst, nn.state_dict(src))
    assert dst.fc1.weight is weight  # written into, not rebound
    for (_, a), (_, b) in zip(nn.named_parameters(src), nn.named_parameters(dst)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_load_state_dict_checks_everything_before_writing():
    model = LimnMLP()
    before = model.fc1.weight.numpy()
    values = {name: np.zeros(t.shape, np.float32) for name, t in nn.named_parameters(model)}
    values["fc2.bias"] = np.zeros(3, np.float32)
    values["fc3.weight"] = np.zeros(1, np.float32)
    with pytest.raises(ValueError, match="(?s)shape: fc2.bias.*unexpected: fc3.weight"):
        nn.load_state_dict(model, values)
    np.testing.assert_array_equal(model.fc1.weight.numpy(), before)
