"""limn.nn.Module against torch.nn.Module: a small nanoGPT written in both, with lm_head.weight tied to
transformer.wte.weight. Its state_dict names the tied weight twice, as torch's; a limn checkpoint saved
with limn.serialize loads into the torch model strictly and gives the same logits, and torch's state_dict
loads into the limn model strictly. Then the conveniences one by one: train()/eval() reaching plain
objects, modules/children/apply, buffers, requires_grad_, zero_grad, load_state_dict(strict=False).
"""

import math

import numpy as np
import pytest
import safetensors.torch
import torch

import limn
import limn.nn as nn
from limn import Tensor, serialize

V, T, C, NH, LAYERS = 37, 8, 16, 2, 2  # vocab, context, width, heads, blocks


# ---- the limn model ----


class LimnAttention(nn.Module):
    def __init__(self):
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.attn_dropout, self.resid_dropout = nn.Dropout(0.1), nn.Dropout(0.1)
        self.register_buffer("bias", Tensor(np.tril(np.ones((T, T), np.float32))), persistent=False)

    def forward(self, x):
        B, t, _ = x.shape
        q, k, v = self.c_attn(x).split(C, 2)  # (B, T, 3C) -> 3 x (B, T, C)
        q, k, v = (z.reshape(B, t, NH, C // NH).transpose(1, 2) for z in (q, k, v))  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))  # (B, nh, T, T)
        att = self.bias[:t, :t].eq(0).where(float("-inf"), att).softmax(-1)
        y = self.attn_dropout(att) @ v  # (B, nh, T, hs)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(B, t, C)))  # (B, T, C)


class LimnMLP(nn.Module):
    def __init__(self):
        self.c_fc, self.c_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.c_proj(self.c_fc(x).gelu()))


class LimnBlock(nn.Module):
    def __init__(self):
        self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(C), LimnAttention(), nn.LayerNorm(C), LimnMLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class LimnGPT(nn.Module):
    def __init__(self):
        self.transformer = {
            "wte": nn.Embedding(V, C),
            "wpe": nn.Embedding(T, C),
            "drop": nn.Dropout(0.1),
            "h": [LimnBlock() for _ in range(LAYERS)],
            "ln_f": nn.LayerNorm(C),
        }
        self.lm_head = nn.Linear(C, V, bias=False)
        self.transformer["wte"].weight = self.lm_head.weight  # tied, as nanoGPT
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        tr = self.transformer
        x = tr["drop"](tr["wte"](idx) + tr["wpe"](Tensor.arange(idx.shape[1])))  # (B, T, C)
        for block in tr["h"]:
            x = block(x)
        return self.lm_head(tr["ln_f"](x))  # (B, T, V)


# ---- the torch twin ----


class TorchAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn, self.c_proj = torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
        self.attn_dropout, self.resid_dropout = torch.nn.Dropout(0.1), torch.nn.Dropout(0.1)
        self.register_buffer("bias", torch.tril(torch.ones(T, T)), persistent=False)

    def forward(self, x):
        B, t, _ = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(B, t, NH, C // NH).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // NH))
        att = att.masked_fill(self.bias[:t, :t] == 0, float("-inf")).softmax(-1)
        y = self.attn_dropout(att) @ v
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, t, C)))


class TorchBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = torch.nn.LayerNorm(C), TorchAttention(), torch.nn.LayerNorm(C)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp.c_proj(torch.nn.functional.gelu(self.mlp.c_fc(self.ln_2(x))))


class TorchGPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = torch.nn.ModuleDict(
            dict(
                wte=torch.nn.Embedding(V, C),
                wpe=torch.nn.Embedding(T, C),
                h=torch.nn.ModuleList([TorchBlock() for _ in range(LAYERS)]),
                ln_f=torch.nn.LayerNorm(C),
            )
        )
        self.lm_head = torch.nn.Linear(C, V, bias=False)
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        tr = self.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
        for block in tr.h:
            x = block(x)
        return self.lm_head(tr.ln_f(x))


IDX = np.random.default_rng(9).integers(0, V, (3, T)).astype(np.int32)


def _limn_logits(model):
    return model(Tensor(IDX)).numpy()


def _torch_logits(model):
    with torch.no_grad():
        return model(torch.from_numpy(IDX).long()).numpy()


@pytest.fixture
def gpt(device):
    limn.manual_seed(0)
    return LimnGPT().eval()


def test_the_tied_weight_is_one_parameter_and_two_state_dict_names_as_torchs(gpt):
    torch_names = list(TorchGPT().state_dict())
    assert list(gpt.state_dict()) == torch_names  # both names, in torch's order
    assert gpt.state_dict()["lm_head.weight"] is gpt.state_dict()["transformer.wte.weight"]
    names = [n for n, _ in gpt.named_parameters()]
    assert "transformer.wte.weight" in names and "lm_head.weight" not in names  # once, under the first path
    assert len(list(gpt.parameters())) == len(list(TorchGPT().parameters()))
    assert [n for n, _ in gpt.named_parameters(remove_duplicate=False)][-1] == "lm_head.weight"


def test_a_limn_checkpoint_loads_into_torch_strictly_with_the_same_logits(gpt, tmp_path):
    path = tmp_path / "gpt.safetensors"
    serialize.save(path, gpt.state_dict())
    theirs = TorchGPT().eval()
    theirs.load_state_dict(safetensors.torch.load_file(str(path)), strict=True)
    assert theirs.lm_head.weight is theirs.transformer.wte.weight  # still tied after the load
    np.testing.assert_allclose(_limn_logits(gpt), _torch_logits(theirs), rtol=1e-4, atol=1e-5)


def test_a_torch_state_dict_loads_into_limn_strictly_with_the_same_logits(gpt):
    torch.manual_seed(1)
    theirs = TorchGPT().eval()
    gpt.load_state_dict(theirs.state_dict(), strict=True)  # torch tensors as they come
    assert gpt.lm_head.weight is gpt.transformer["wte"].weight
    np.testing.assert_array_equal(gpt.lm_head.weight.numpy(), theirs.lm_head.weight.detach().numpy())
    np.testing.assert_allclose(_limn_logits(gpt), _torch_logits(theirs), rtol=1e-4, atol=1e-5)
    sd = {k: v.numpy() for k, v in theirs.state_dict().items()}
    del sd["lm_head.weight"]
    with pytest.raises(ValueError, match="missing: lm_head.weight"):
        gpt.load_state_dict(sd, strict=True)  # torch also needs both names


def test_train_and_eval_reach_every_module_dropout_and_plain_object():
    class Plain:  # no base class, a `training` attribute
        training = True

    limn.manual_seed(0)
    model = LimnGPT()
    model.extra = [Plain()]
    assert model.eval() is model
    assert not model.training and not model.transformer["drop"].training and not model.extra[0].training
    assert not model.transformer["h"][1].attn.resid_dropout.training
    x = Tensor.randn((2, 4, C))
    block = model.transformer["h"][0]
    np.testing.assert_array_equal(block(x).numpy(), block(x).numpy())  # eval: no dropout
    model.train()
    assert all(m.training for m in model.modules() if isinstance(m, nn.Module)) and model.extra[0].training
    assert not np.array_equal(block(x).numpy(), block(x).numpy())  # train: fresh masks


def test_modules_children_and_apply_walk_as_torchs():
    limn.manual_seed(0)
    ours, theirs = LimnGPT(), TorchGPT()
    containers = (torch.nn.ModuleDict, torch.nn.ModuleList, torch.nn.Dropout)
    theirs_names = [n for n, m in theirs.named_modules() if not isinstance(m, containers)]
    our_names = [n for n, m in ours.named_modules() if not isinstance(m, nn.Dropout)]
    assert our_names == theirs_names
    assert [n for n, _ in ours.named_children()] == [
        "transformer.wte",
        "transformer.wpe",
        "transformer.drop",
        "transformer.h.0",
        "transformer.h.1",
        "transformer.ln_f",
        "lm_head",
    ]
    order = []
    ours.apply(lambda m: order.append(m))
    assert order[-1] is ours and order.index(ours.transformer["h"][0].attn) < order.index(ours.transformer["h"][0])


def test_buffers_persistent_in_the_state_dict_and_not_when_asked():
    class Norm(nn.Module):
        def __init__(self):
            self.weight = Tensor.ones(3, requires_grad=True)
            self.register_buffer("running_mean", Tensor.zeros(3))
            self.register_buffer("mask", Tensor.ones(3), persistent=False)

    m = Norm()
    assert list(m.state_dict()) == ["weight", "running_mean"]
    assert [n for n, _ in m.named_buffers()] == ["running_mean", "mask"]
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    m.load_state_dict({"weight": np.full(3, 2.0), "running_mean": np.full(3, 5.0)})
    assert m.running_mean.tolist() == [5.0, 5.0, 5.0]


def test_load_state_dict_not_strict_writes_what_matches_and_reports_the_rest():
    limn.manual_seed(0)
    model = LimnGPT()
    keys = model.load_state_dict({"transformer.ln_f.bias": np.ones(C), "other": np.zeros(2)}, strict=False)
    assert keys.unexpected_keys == ["other"] and "lm_head.weight" in keys.missing_keys
    assert model.transformer["ln_f"].bias.tolist() == [1.0] * C


def test_requires_grad_freezes_and_keeps_parameters_and_zero_grad_drops_grads():
    limn.manual_seed(0)
    model = LimnGPT()
    n = len(list(model.parameters()))
    model.transformer["h"][0].requires_grad_(False)
    assert len(list(model.parameters())) == n and len(model.state_dict()) == n + 1  # + the tied name
    assert not model.transformer["h"][0].attn.c_attn.weight.requires_grad
    model.transformer["h"][0].requires_grad_(True)
    assert all(p.requires_grad for p in model.parameters())
    model(Tensor(IDX)).sum().backward()
    assert model.lm_head.weight.grad is not None
    model.zero_grad(set_to_none=False)
    assert not model.lm_head.weight.grad.numpy().any()
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_forward_is_needed_and_dropout_checks_p():
    with pytest.raises(NotImplementedError, match="define forward"):
        nn.Module()(1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(-0.1)


def test_to_a_dtype_converts_every_float_tensor_keeps_ties_and_gives_torchs_logits(gpt):
    torch.manual_seed(1)
    theirs = TorchGPT().eval().double()
    assert gpt.double() is gpt
    assert {t.dtype for t in gpt.state_dict().values()} == {limn.float64}
    assert gpt.lm_head.weight is gpt.transformer["wte"].weight  # still one tensor under both names
    assert all(p.requires_grad and p._ctx is None for p in gpt.parameters())  # leaves an optimizer can step
    gpt.load_state_dict(theirs.state_dict(), strict=True)
    ours = gpt(Tensor(IDX)).numpy()
    with torch.no_grad():
        want = theirs(torch.from_numpy(IDX).long()).numpy()
    assert ours.dtype == want.dtype == np.float64
    np.testing.assert_allclose(ours, want, rtol=1e-10, atol=1e-12)


def test_to_moves_to_a_device_and_refuses_an_int_dtype(gpt):
    assert gpt.to(device="numpy", dtype="float32") is gpt
    assert {t.device for t in gpt.state_dict().values()} == {"numpy"}
    with pytest.raises(TypeError, match="only a float dtype"):
        gpt.to(limn.int32)
    with pytest.raises(limn.DeviceError, match="cpu"):
        gpt.to("cpu")


def _keeps_what_it_computed(lib):
    """The same model in limn and torch: a forward that keeps its loss, an activation (under an underscore
    name too) and a cache as attributes, as llama2.c's model.py keeps `self.last_loss`."""
    nn_ = lib.nn

    class Keeper(nn_.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn_.Linear(3, 2)
            self.cache = [None]

        def forward(self, x):
            y = self.lin(x)
            self.last_loss = (y * y).sum()
            self._activation = y
            self.cache[0] = y.detach()
            return y

    return Keeper()


def test_a_tensor_a_forward_keeps_is_not_a_parameter_as_in_torch():
    """Rule: only leaves are parameters. A loss, an activation or a cache a forward stores on the module is
    computed (or detached data), so after a forward named_parameters(), parameters() and state_dict() hold the
    layer's weights only, as torch's (which registers parameters and buffers only)."""
    names = {}
    for lib in (limn, torch):
        model = _keeps_what_it_computed(lib)
        model(lib.ones(1, 3))
        names[lib.__name__] = (
            [n for n, _ in model.named_parameters()],
            len(list(model.parameters())),
            sorted(model.state_dict()),
        )
    assert names["limn"] == names["torch"], f"limn {names['limn']}, torch {names['torch']}"
    assert Tensor([1.0], requires_grad=True).is_leaf and not (Tensor([1.0], requires_grad=True) * 2).is_leaf
