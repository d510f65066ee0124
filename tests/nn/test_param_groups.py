"""Parameter groups against torch.optim: the same MLP split in two groups with different hyperparameters,
5 steps, the parameters compared after each; a schedule that changes a group's lr between steps, eager
and inside limn.capture; zero_grad(set_to_none=False); state_dict keys and round trips with groups.

Tolerance as tests/nn/test_optim.py (1e-5 relative, 1e-6 absolute in float32; its docstring says why).
"""

import numpy as np
import pytest
import torch

import limn
import limn.nn as nn
import limn.optim as optim
from limn.capture import capture

DEVICES = ["numpy", "c"]
STEPS = 5
RTOL, ATOL = 1e-5, 1e-6

_rng = np.random.default_rng(4)
XS = _rng.standard_normal((STEPS + 3, 8, 6)).astype(np.float32)
YS = _rng.standard_normal((STEPS + 3, 8, 3)).astype(np.float32)


@pytest.fixture(params=DEVICES)
def device(request):
    limn.set_device(request.param)
    return request.param


class LimnMLP:
    def __init__(self):
        self.fc1 = nn.Linear(6, 12)
        self.fc2 = nn.Linear(12, 3)

    def __call__(self, x):
        return self.fc2(self.fc1(x).relu())  # (B, 6) -> (B, 12) -> (B, 3)


def twins():
    limn.manual_seed(0)
    ours = LimnMLP()
    theirs = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
    with torch.no_grad():
        for p, q in zip(nn.parameters(ours), theirs.parameters()):
            q.copy_(torch.from_numpy(p.numpy()))
    return ours, theirs


def limn_loss(model, s):
    return nn.mse_loss(model(limn.Tensor(XS[s])), limn.Tensor(YS[s]))


def torch_step(model, opt, s):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(torch.from_numpy(XS[s])), torch.from_numpy(YS[s])).backward()
    opt.step()


def assert_same(ours, theirs, s):
    for (name, p), q in zip(nn.named_parameters(ours), theirs.parameters()):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=f"{name}, step {s}")


def weights_and_biases(params):
    params = list(params)
    return [p for p in params if p.ndim == 2], [p for p in params if p.ndim != 2]


# each optimizer with two groups that differ in every hyperparameter a group may set
GROUPS = {
    "sgd": (
        lambda w, b: optim.SGD(
            [
                {"params": w, "weight_decay": 0.1, "momentum": 0.9, "nesterov": True, "dampening": 0.0},
                {"params": b, "lr": 0.2},
            ],
            lr=0.05,
            momentum=0.5,
            dampening=0.1,
        ),
        lambda w, b: torch.optim.SGD(
            [
                {"params": w, "weight_decay": 0.1, "momentum": 0.9, "nesterov": True, "dampening": 0.0},
                {"params": b, "lr": 0.2},
            ],
            lr=0.05,
            momentum=0.5,
            dampening=0.1,
        ),
    ),
    "adamw": (
        lambda w, b: optim.AdamW(
            [{"params": w, "weight_decay": 0.1}, {"params": b, "weight_decay": 0.0, "betas": (0.8, 0.95), "eps": 1e-6}],
            lr=0.01,
        ),
        lambda w, b: torch.optim.AdamW(
            [{"params": w, "weight_decay": 0.1}, {"params": b, "weight_decay": 0.0, "betas": (0.8, 0.95), "eps": 1e-6}],
            lr=0.01,
        ),
    ),
}


@pytest.mark.parametrize("kind", GROUPS)
def test_two_groups_step_as_torchs(device, kind):
    make_ours, make_theirs = GROUPS[kind]
    ours, theirs = twins()
    opt = make_ours(*weights_and_biases(nn.parameters(ours)))
    torch_opt = make_theirs(*weights_and_biases(theirs.parameters()))
    for s in range(STEPS):
        loss = limn_loss(ours, s)
        loss.backward()
        opt.step(loss)
        torch_step(theirs, torch_opt, s)
        assert_same(ours, theirs, s)


def _torch_newton_schulz_float32(grad, ns_coefficients, ns_steps, eps):
    """torch.optim._muon._zeropower_via_newtonschulz in float32 (see tests/nn/test_optim.py)."""
    a, b, c = ns_coefficients
    x = grad.to(dtype=torch.float32, copy=True)
    if grad.size(0) > grad.size(1):
        x = x.T
    x.div_(x.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if grad.size(0) > grad.size(1) else x


def test_muon_with_two_groups_steps_as_torchs_inside_a_chain(device, monkeypatch):
    monkeypatch.setattr(torch.optim._muon, "_zeropower_via_newtonschulz", _torch_newton_schulz_float32)
    ours, theirs = twins()
    (w1, w2), biases = weights_and_biases(nn.parameters(ours))
    (v1, v2), torch_biases = weights_and_biases(theirs.parameters())
    muon_groups = [
        {"weight_decay": 0.2, "momentum": 0.9, "nesterov": False},
        {"lr": 0.05, "adjust_lr_fn": "match_rms_adamw"},
    ]
    opt = optim.Chain(
        optim.Muon(
            [{"params": [w1], **muon_groups[0]}, {"params": [w2], **muon_groups[1]}], lr=0.02, ns_dtype=limn.float32
        ),
        optim.AdamW(biases, lr=0.01),
    )
    torch_muon = torch.optim.Muon([{"params": [v1], **muon_groups[0]}, {"params": [v2], **muon_groups[1]}], lr=0.02)
    torch_adamw = torch.optim.AdamW(torch_biases, lr=0.01)
    assert len(opt.param_groups) == 3
    for s in range(STEPS):
        loss = limn_loss(ours, s)
        loss.backward()
        opt.step(loss)
        torch_muon.zero_grad()
        torch_adamw.zero_grad()
        torch.nn.functional.mse_loss(theirs(torch.from_numpy(XS[s])), torch.from_numpy(YS[s])).backward()
        torch_muon.step()
        torch_adamw.step()
        assert_same(ours, theirs, s)


# ---- a schedule: lr changed per group between steps ----


def _schedule(s):
    return [0.01 / (1 + s), 0.03 * (s % 2)]  # group 1 is frozen on even steps


def _set_lrs(groups, s):
    for group, lr in zip(groups, _schedule(s)):
        group["lr"] = lr


def test_a_changed_group_lr_takes_effect_eagerly_and_in_captured_replays(device):
    eager, captured, theirs = twins()[0], twins()[0], twins()[1]

    def make(model):
        w, b = weights_and_biases(nn.parameters(model))
        return optim.AdamW([{"params": w}, {"params": b, "weight_decay": 0.0}], lr=0.01)

    eager_opt, captured_opt = make(eager), make(captured)
    w, b = weights_and_biases(theirs.parameters())
    torch_opt = torch.optim.AdamW([{"params": w}, {"params": b, "weight_decay": 0.0}], lr=0.01)

    def step(x, y):
        loss = nn.mse_loss(captured(x), y)
        loss.backward()
        captured_opt.step(loss)
        return loss

    train = capture(step)
    for s in range(STEPS + 3):
        _set_lrs(eager_opt.param_groups, s)
        _set_lrs(captured_opt.param_groups, s)
        _set_lrs(torch_opt.param_groups, s)
        loss = limn_loss(eager, s)
        loss.backward()
        eager_opt.step(loss)
        train(limn.Tensor(XS[s]), limn.Tensor(YS[s]))
        torch_step(theirs, torch_opt, s)
        assert_same(eager, theirs, s)
        for (name, p), q in zip(nn.named_parameters(captured), nn.parameters(eager)):
            np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=f"captured {name}, step {s}")
    assert train.replays == STEPS + 2


def test_changing_a_graph_constant_of_a_group_raises_and_names_what_may_change():
    model = LimnMLP()
    opt = optim.AdamW([{"params": nn.parameters(model)}])
    with pytest.raises(ValueError, match="betas.*only lr and weight_decay"):
        opt.param_groups[0]["betas"] = (0.5, 0.5)
    opt.param_groups[0]["betas"] = [0.9, 0.999]  # the same value is no change
    opt.param_groups[0]["initial_lr"] = 0.1  # a key the optimizer does not read is plain data
    opt.param_groups[0].setdefault("name", "all")
    assert opt.param_groups[0]["name"] == "all"
    with pytest.raises(ValueError, match="must be >= 0"):
        opt.param_groups[0]["lr"] = -1.0


def test_group_dicts_fill_missing_keys_from_the_defaults_as_torchs():
    model = LimnMLP()
    w, b = weights_and_biases(nn.parameters(model))
    opt = optim.SGD([{"params": w, "momentum": 0.9}, {"params": b}], lr=0.1, weight_decay=0.01)
    ref = torch.optim.SGD(
        [
            {"params": [torch.zeros(1, requires_grad=True)], "momentum": 0.9},
            {"params": [torch.zeros(1, requires_grad=True)]},
        ],
        lr=0.1,
        weight_decay=0.01,
    )
    for ours, theirs in zip(opt.param_groups, ref.param_groups):
        for key in ("lr", "momentum", "dampening", "weight_decay", "nesterov"):
            assert ours[key] == theirs[key], key
    assert all(a is b for a, b in zip(opt.param_groups[0]["params"], w, strict=True))
    with pytest.raises(ValueError, match="groups have different values"):
        _ = optim.SGD([{"params": w, "lr": 0.1}, {"params": b, "lr": 0.2}]).lr


def test_group_misuse_raises_typed_errors():
    model = LimnMLP()
    w, b = weights_and_biases(nn.parameters(model))
    with pytest.raises(ValueError, match="listed twice"):
        optim.AdamW([{"params": w}, {"params": w + b}])
    with pytest.raises(ValueError, match="no 'params' key"):
        optim.AdamW([{"params": w}, {"lr": 0.1}])
    with pytest.raises(TypeError, match="mixes group dicts and tensors"):
        optim.AdamW([{"params": w}, b[0]])
    with pytest.raises(ValueError, match="betas in"):
        optim.AdamW([{"params": w}, {"params": b, "betas": (0.9, 1.5)}])
    with pytest.raises(ValueError, match="got no parameters"):
        optim.AdamW([{"params": []}])


# ---- zero_grad(set_to_none=False) ----


def test_zero_grad_set_to_none_false_zeroes_existing_grads_as_torchs(device):
    ours, theirs = twins()
    opt = optim.SGD(nn.parameters(ours), lr=0.1, momentum=0.9)
    torch_opt = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    ours.fc2.weight.grad = None
    limn_loss(ours, 0).backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.numpy().any() for p in nn.parameters(ours))
    torch.nn.functional.mse_loss(theirs(torch.from_numpy(XS[0])), torch.from_numpy(YS[0])).backward()
    torch_opt.zero_grad(set_to_none=False)
    loss = limn_loss(ours, 1)
    loss.backward()  # accumulates onto the zeros
    opt.step(loss)
    torch.nn.functional.mse_loss(theirs(torch.from_numpy(XS[1])), torch.from_numpy(YS[1])).backward()
    torch_opt.step()
    assert_same(ours, theirs, 1)
    opt.zero_grad(set_to_none=False)  # step() dropped the gradients: nothing to zero, as torch's None grads
    assert all(p.grad is None for p in nn.parameters(ours))


# ---- checkpoints ----


def test_state_dict_keys_name_each_group_and_round_trip_resumes_exactly(device):
    def make(model):
        w, b = weights_and_biases(nn.named_parameters(model))
        return optim.AdamW([{"params": w, "weight_decay": 0.1}, {"params": b, "betas": (0.8, 0.9)}], lr=0.01)

    def weights_and_biases(named):
        named = list(named)
        return [(n, p) for n, p in named if p.ndim == 2], [(n, p) for n, p in named if p.ndim != 2]

    model = LimnMLP()
    opt = make(model)
    keys = set(opt.state_dict())
    assert {"adamw.step", "adamw.param_groups.0.lr", "adamw.param_groups.1.weight_decay"} <= keys
    assert {"adamw.param_groups.1.beta1_power", "fc1.weight.exp_avg", "fc2.bias.exp_avg_sq"} <= keys
    for s in range(3):
        opt.param_groups[1]["lr"] = 0.01 * (s + 1)
        loss = limn_loss(model, s)
        loss.backward()
        opt.step(loss)
    weights = {k: t.numpy() for k, t in nn.state_dict(model).items()}
    state = {k: t.numpy() for k, t in opt.state_dict().items()}
    assert state["adamw.param_groups.1.beta1_power"] == pytest.approx(0.8**3)
    for s in range(3, 6):
        loss = limn_loss(model, s)
        loss.backward()
        opt.step(loss)

    resumed = LimnMLP()
    resumed_opt = make(resumed)
    nn.load_state_dict(resumed, weights)
    resumed_opt.load_state_dict(state)
    assert resumed_opt.param_groups[1]["lr"] == pytest.approx(0.03)  # the group dict reads the loaded value
    for s in range(3, 6):
        loss = limn_loss(resumed, s)
        loss.backward()
        resumed_opt.step(loss)
    for (name, a), b in zip(nn.named_parameters(model), nn.parameters(resumed)):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_nanogpts_optimizer_arguments_are_accepted_and_variants_limn_lacks_raise():
    model = LimnMLP()
    w, b = weights_and_biases(nn.parameters(model))
    groups = [{"params": w, "weight_decay": 0.1}, {"params": b, "weight_decay": 0.0}]
    opt = optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), fused=True)  # nanoGPT's configure_optimizers
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]
    with pytest.raises(NotImplementedError, match="amsgrad=True"):
        optim.AdamW(nn.parameters(model), amsgrad=True)
    with pytest.raises(NotImplementedError, match="maximize=True"):
        optim.SGD(nn.parameters(model), maximize=True, foreach=False)
