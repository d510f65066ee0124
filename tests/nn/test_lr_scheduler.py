"""limn.optim.lr_scheduler: every schedule sets the rates torch.optim.lr_scheduler sets, float for float.

The oracle is torch's scheduler on a torch optimizer with the same param groups (three, each its own lr):
the rates after each of 50 steps must be equal (==, not approximately). torch's chainable schedules are
recursions (CosineAnnealingLR multiplies by a ratio of cosines, LinearLR by a ratio of factors) whose floats
differ from their closed forms in the last bits; limn computes the recursions in torch's order, and the
cosine test shows that the closed form would not match. A scheduler changes only device scalars, so a
captured step replays each new rate without recording again: there the oracle is the uncaptured run on the
numpy device, bit for bit.
"""

import json
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.optim.lr_scheduler as theirs
from training import training_step

import limn
import limn.nn as nn
import limn.optim as optim
from limn import Tensor, serialize
from limn.capture import capture
from limn.optim import lr_scheduler

ours = optim.lr_scheduler
STEPS = 50
LRS = [0.1, 0.03, 1e-3]  # one param group each


def limn_sgd():
    groups = [{"params": [Tensor(np.zeros(2, np.float32), requires_grad=True)], "lr": lr} for lr in LRS]
    return optim.SGD(groups, lr=0.5, momentum=0.9)


def torch_sgd():
    groups = [{"params": [torch.zeros(2, requires_grad=True)], "lr": lr} for lr in LRS]
    return torch.optim.SGD(groups, lr=0.5, momentum=0.9)


# each builds the schedule from a module, limn's or torch's, so both sides run the same call
CASES = {
    "lambda": lambda m, opt: m.LambdaLR(opt, lambda step: 0.95**step),
    "lambda-per-group": lambda m, opt: m.LambdaLR(
        opt, [lambda step: 0.9**step, lambda step: 1 / (step + 1), lambda step: min(1.0, (step + 1) / 7)]
    ),
    "multiplicative": lambda m, opt: m.MultiplicativeLR(opt, lambda step: 0.97),
    "step": lambda m, opt: m.StepLR(opt, step_size=7, gamma=0.5),
    "multistep": lambda m, opt: m.MultiStepLR(opt, milestones=[5, 12, 12, 30], gamma=0.3),
    "constant": lambda m, opt: m.ConstantLR(opt, factor=0.25, total_iters=9),
    "linear": lambda m, opt: m.LinearLR(opt, start_factor=0.1, end_factor=0.9, total_iters=20),
    "exponential": lambda m, opt: m.ExponentialLR(opt, gamma=0.93),
    "polynomial": lambda m, opt: m.PolynomialLR(opt, total_iters=30, power=2.0),
    "cosine": lambda m, opt: m.CosineAnnealingLR(opt, T_max=20, eta_min=1e-4),  # 50 steps: down, up, down
    "cosine-odd": lambda m, opt: m.CosineAnnealingLR(opt, T_max=7),
    "warmup-cosine": lambda m, opt: m.SequentialLR(
        opt,
        [m.LinearLR(opt, start_factor=0.01, total_iters=10), m.CosineAnnealingLR(opt, T_max=40, eta_min=1e-5)],
        [10],
    ),
    "sequential-three": lambda m, opt: m.SequentialLR(
        opt, [m.ConstantLR(opt, 0.5, 3), m.ExponentialLR(opt, 0.9), m.MultiStepLR(opt, [4, 9], 0.5)], [5, 20]
    ),
    "sequential-no-warmup": lambda m, opt: m.SequentialLR(  # a warmup of 0 steps, say from a config
        opt, [m.LinearLR(opt, start_factor=0.1, total_iters=0), m.CosineAnnealingLR(opt, T_max=30)], [0]
    ),
    "chained": lambda m, opt: m.ChainedScheduler([m.ConstantLR(opt, 0.5, 10), m.ExponentialLR(opt, 0.95)]),
    "one-cycle": lambda m, opt: m.OneCycleLR(opt, [0.5, 0.1, 0.01], total_steps=STEPS + 1, cycle_momentum=False),
    "one-cycle-linear-three-phase": lambda m, opt: m.OneCycleLR(
        opt, 0.2, epochs=5, steps_per_epoch=11, anneal_strategy="linear", three_phase=True, cycle_momentum=False
    ),
}


def rates(opt, scheduler, steps, start=0):
    """get_last_lr() after the scheduler is made (or resumed) and after each step, in torch's loop order."""
    out = [scheduler.get_last_lr()]
    for _ in range(start, steps):
        opt.step()
        scheduler.step()
        out.append(list(scheduler.get_last_lr()))
    return out


# ---- the rates are torch's ----


@pytest.mark.parametrize("case", CASES)
def test_each_schedule_sets_torchs_rates_step_for_step(case):
    opt, torch_opt = limn_sgd(), torch_sgd()
    scheduler = CASES[case](ours, opt)
    assert rates(opt, scheduler, STEPS) == rates(torch_opt, CASES[case](theirs, torch_opt), STEPS)
    # what a step reads is the device tensor: it holds the float the scheduler set
    assert [g.tensors["lr"].item() for g in opt.param_groups] == scheduler.get_last_lr()
    assert [g["initial_lr"] for g in opt.param_groups] == [g["initial_lr"] for g in torch_opt.param_groups]


def test_cosine_annealing_follows_torchs_recursion_not_the_closed_form():
    opt, torch_opt = limn_sgd(), torch_sgd()
    got = rates(opt, ours.CosineAnnealingLR(opt, T_max=20, eta_min=1e-4), STEPS)
    assert got == rates(torch_opt, theirs.CosineAnnealingLR(torch_opt, T_max=20, eta_min=1e-4), STEPS)
    closed = [[1e-4 + (lr - 1e-4) * (1 + math.cos(math.pi * t / 20)) / 2 for lr in LRS] for t in range(STEPS + 1)]
    differ = sum(g != c for g, c in zip(got, closed))
    assert differ > STEPS // 2, "the recursion and the closed form round differently; torch uses the recursion"
    np.testing.assert_allclose(got, closed, rtol=1e-12, atol=1e-15)


def test_step_with_an_epoch_jumps_by_the_closed_form_as_torch():
    opt, torch_opt = limn_sgd(), torch_sgd()
    scheduler, torch_scheduler = ours.CosineAnnealingLR(opt, T_max=20), theirs.CosineAnnealingLR(torch_opt, T_max=20)
    opt.step()
    torch_opt.step()
    with pytest.warns(UserWarning, match="deprecated"):
        scheduler.step(13)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch_scheduler.step(13)
    assert scheduler.get_last_lr() == torch_scheduler.get_last_lr()


def warmup_inverse_sqrt(base):
    """A schedule as a user writes one for torch: a subclass of LRScheduler with its own get_lr()."""

    class WarmupInverseSqrt(base):
        def __init__(self, optimizer, warmup, last_epoch=-1):
            self.warmup = warmup
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            step = self.last_epoch + 1
            return [lr * min(step / self.warmup, (self.warmup / step) ** 0.5) for lr in self.base_lrs]

    return WarmupInverseSqrt


def test_a_scheduler_subclass_written_for_torch_runs_unchanged():
    opt, torch_opt = limn_sgd(), torch_sgd()
    got = rates(opt, warmup_inverse_sqrt(ours.LRScheduler)(opt, warmup=8), STEPS)
    assert got == rates(torch_opt, warmup_inverse_sqrt(theirs.LRScheduler)(torch_opt, warmup=8), STEPS)


OPTIMIZERS = {
    "adam": (lambda g: optim.Adam(g, lr=1e-3), lambda g: torch.optim.Adam(g, lr=1e-3)),
    "adamw": (lambda g: optim.AdamW(g, lr=1e-3), lambda g: torch.optim.AdamW(g, lr=1e-3)),
    "muon": (lambda g: optim.Muon(g, lr=0.02), lambda g: torch.optim.Muon(g, lr=0.02)),
}


@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_a_schedule_sets_the_same_rates_on_every_limn_optimizer(kind):
    make, make_torch = OPTIMIZERS[kind]
    opt = make([{"params": [Tensor(np.zeros((2, 2), np.float32), requires_grad=True)], "lr": lr} for lr in LRS])
    torch_opt = make_torch([{"params": [torch.zeros(2, 2, requires_grad=True)], "lr": lr} for lr in LRS])
    got = rates(opt, CASES["warmup-cosine"](ours, opt), 20)
    assert got == rates(torch_opt, CASES["warmup-cosine"](theirs, torch_opt), 20)


# ---- checkpoints ----

HALF = 17


@pytest.mark.parametrize("case", CASES)
def test_a_state_dict_through_json_resumes_the_sequence(case):
    opt = limn_sgd()
    expected = rates(opt, CASES[case](ours, opt), STEPS)
    opt = limn_sgd()
    scheduler = CASES[case](ours, opt)
    rates(opt, scheduler, HALF)
    saved = json.dumps(scheduler.state_dict())
    resumed_opt = limn_sgd()  # a fresh optimizer: its groups' lrs are the constructor's until the load
    resumed = CASES[case](ours, resumed_opt)
    resumed.load_state_dict(json.loads(saved))
    assert [g.tensors["lr"].item() for g in resumed_opt.param_groups] == expected[HALF]
    assert rates(resumed_opt, resumed, STEPS, start=HALF) == expected[HALF:]


def _without(value, key):
    """value with `key` dropped from every dict in it (torch's get_lr-warning flag, which limn does not keep)."""
    if isinstance(value, dict):
        return {k: _without(v, key) for k, v in value.items() if k != key}
    if isinstance(value, list):
        return [_without(v, key) for v in value]
    return value


@pytest.mark.parametrize("case", CASES)
def test_the_state_dict_is_torchs_and_a_torch_one_resumes_here(case):
    opt, torch_opt = limn_sgd(), torch_sgd()
    scheduler, torch_scheduler = CASES[case](ours, opt), CASES[case](theirs, torch_opt)
    rates(opt, scheduler, HALF)
    rates(torch_opt, torch_scheduler, HALF)
    assert scheduler.state_dict() == _without(torch_scheduler.state_dict(), "_get_lr_called_within_step")
    resumed_opt = limn_sgd()
    resumed = CASES[case](ours, resumed_opt)
    resumed.load_state_dict(torch_scheduler.state_dict())
    assert rates(resumed_opt, resumed, STEPS, start=HALF) == rates(torch_opt, torch_scheduler, STEPS, start=HALF)


# ---- training: eager, captured, resumed from a file ----

BATCH, TRAIN_STEPS = 8, 12
_rng = np.random.default_rng(7)
XS = _rng.standard_normal((TRAIN_STEPS, BATCH, 4)).astype(np.float32)
YS = _rng.standard_normal((TRAIN_STEPS, BATCH, 2)).astype(np.float32)


class MLP:
    def __init__(self):
        self.fc1 = nn.Linear(4, 16)
        self.fc2 = nn.Linear(16, 2)

    def __call__(self, x):
        return self.fc2(self.fc1(x).tanh())  # (B, 4) -> (B, 16) -> (B, 2)


def adamw_in_two_groups(model):
    named = list(nn.named_parameters(model))
    weights = [(n, p) for n, p in named if p.ndim == 2]
    biases = [(n, p) for n, p in named if p.ndim != 2]
    return optim.AdamW([{"params": weights}, {"params": biases, "lr": 3e-2, "weight_decay": 0.0}], lr=1e-2)


def muon_and_adamw(model):
    named = list(nn.named_parameters(model))
    matrices = [(n, p) for n, p in named if p.ndim == 2]
    rest = [(n, p) for n, p in named if p.ndim != 2]
    return optim.Chain(optim.Muon(matrices, lr=0.02), optim.AdamW(rest, lr=1e-2))


def warmup_cosine(opt):
    warmup = ours.LinearLR(opt, start_factor=0.1, total_iters=3)
    return ours.SequentialLR(opt, [warmup, ours.CosineAnnealingLR(opt, T_max=9, eta_min=1e-4)], milestones=[3])


def train(make_opt, make_schedule, captured, steps=TRAIN_STEPS):
    """A fresh seeded MLP trained with the schedule stepped after every step; the parameters after each."""
    limn.manual_seed(0)
    model = MLP()
    opt = make_opt(model)
    schedules = make_schedule(opt)
    step = training_step(model, opt)
    if captured:
        step = capture(step)
    trajectory = []
    for s in range(steps):
        step(Tensor(XS[s]), Tensor(YS[s]))
        for scheduler in schedules if isinstance(schedules, list) else [schedules]:
            scheduler.step()
        trajectory.append({name: p.numpy() for name, p in nn.named_parameters(model)})
    return trajectory, step


def assert_same_trajectory(got, expected):
    for s, (a, b) in enumerate(zip(got, expected, strict=True)):
        for name in b:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"{name}, step {s + 1}")


def test_a_captured_step_replays_every_new_rate_without_recording_again():
    captured, step = train(adamw_in_two_groups, warmup_cosine, captured=True)
    assert step.replays == TRAIN_STEPS - 1  # one recording, every later call a replay
    assert_same_trajectory(captured, train(adamw_in_two_groups, warmup_cosine, captured=False)[0])
    constant, _ = train(adamw_in_two_groups, lambda opt: [], captured=True)
    assert not np.array_equal(captured[-1]["fc1.weight"], constant[-1]["fc1.weight"]), "the schedule took effect"


def test_scheduled_replays_build_no_plans_on_c():
    limn.set_device("c")
    stats = limn.get_device("c").stats
    limn.manual_seed(0)
    model = MLP()
    opt = adamw_in_two_groups(model)
    scheduler = warmup_cosine(opt)
    step = capture(training_step(model, opt))
    for s in range(2):  # the recording, and the second call that confirms it
        step(Tensor(XS[s]), Tensor(YS[s]))
        scheduler.step()
    built = stats.plans_built
    for s in range(2, 8):
        step(Tensor(XS[s]), Tensor(YS[s]))
        scheduler.step()
    assert stats.plans_built == built
    assert step.replays == 7


def test_a_chain_is_scheduled_group_by_group_as_torch_schedules_each_member():
    def members(make_muon, make_adamw, tensor):
        muon = make_muon([{"params": [tensor((3, 3))], "lr": lr} for lr in (0.02, 0.05)])
        return muon, make_adamw([{"params": [tensor((3,))], "lr": 1e-3}])

    muon, adamw = members(
        optim.Muon, optim.AdamW, lambda shape: Tensor(np.zeros(shape, np.float32), requires_grad=True)
    )
    chain = optim.Chain(muon, adamw)
    torch_muon, torch_adamw = members(torch.optim.Muon, torch.optim.AdamW, lambda s: torch.zeros(s, requires_grad=True))
    got = rates(chain, CASES["warmup-cosine"](ours, chain), 30)
    want_muon = rates(torch_muon, CASES["warmup-cosine"](theirs, torch_muon), 30)
    want_adamw = rates(torch_adamw, CASES["warmup-cosine"](theirs, torch_adamw), 30)
    assert got == [m + a for m, a in zip(want_muon, want_adamw)]
    assert [g["lr"] for g in muon.param_groups + adamw.param_groups] == got[-1]


def test_a_scheduled_chain_trains_as_a_scheduler_per_member_and_captures():
    per_member, _ = train(muon_and_adamw, lambda chain: [warmup_cosine(opt) for opt in chain.optimizers], False, 8)
    whole, step = train(muon_and_adamw, warmup_cosine, captured=True, steps=8)
    assert step.replays == 7
    assert_same_trajectory(whole, per_member)


def test_a_checkpoint_file_resumes_the_schedule(tmp_path):
    expected, _ = train(adamw_in_two_groups, warmup_cosine, captured=False)
    limn.manual_seed(0)
    model = MLP()
    opt = adamw_in_two_groups(model)
    scheduler = warmup_cosine(opt)
    step = training_step(model, opt)
    for s in range(5):
        step(Tensor(XS[s]), Tensor(YS[s]))
        scheduler.step()
    path = tmp_path / "run.safetensors"
    serialize.save(
        path, nn.state_dict(model) | opt.state_dict(), metadata={"lr_scheduler": json.dumps(scheduler.state_dict())}
    )
    limn.manual_seed(1)  # another init, overwritten by the file
    model = MLP()
    opt = adamw_in_two_groups(model)
    scheduler = warmup_cosine(opt)
    serialize.load_into(path, nn.state_dict(model) | opt.state_dict())
    scheduler.load_state_dict(json.loads(serialize.read_metadata(path)["lr_scheduler"]))
    step, resumed = training_step(model, opt), []
    for s in range(5, TRAIN_STEPS):
        step(Tensor(XS[s]), Tensor(YS[s]))
        scheduler.step()
        resumed.append({name: p.numpy() for name, p in nn.named_parameters(model)})
    assert_same_trajectory(resumed, expected[5:])


# ---- errors and warnings ----

TORCH_RAISES_TOO = {
    "not an optimizer": (lambda m, opt: m.StepLR(object(), 3), TypeError, "not a limn optimizer"),
    "lambdas per group": (lambda m, opt: m.LambdaLR(opt, [lambda s: 1.0] * 2), ValueError, "2 lr_lambda .* 3 param"),
    "lambda not callable": (lambda m, opt: m.MultiplicativeLR(opt, 0.5), TypeError, "function of the step, got"),
    "constant factor": (lambda m, opt: m.ConstantLR(opt, factor=1.5), ValueError, r"factor must be in \[0, 1\]"),
    "linear start": (lambda m, opt: m.LinearLR(opt, start_factor=0.0), ValueError, r"start_factor must be in \(0, 1"),
    "linear end": (lambda m, opt: m.LinearLR(opt, 0.5, end_factor=2.0), ValueError, r"end_factor must be in \[0, 1"),
    "sequential milestones count": (
        lambda m, opt: m.SequentialLR(opt, [m.ConstantLR(opt), m.ExponentialLR(opt, 0.9)], [3, 5]),
        ValueError,
        r"2 schedulers need 1 milestones .* got 2: \[3, 5\]",
    ),
    "sequential empty": (lambda m, opt: m.SequentialLR(opt, [], []), ValueError, "at least one scheduler"),
    "sequential member": (lambda m, opt: m.SequentialLR(opt, [m.ConstantLR(opt), 3], [3]), TypeError, "no `optimizer`"),
    "chained empty": (lambda m, opt: m.ChainedScheduler([]), ValueError, "at least one scheduler"),
    "resumed without initial_lr": (lambda m, opt: m.StepLR(opt, 3, last_epoch=4), KeyError, "no 'initial_lr'"),
    "one-cycle steps": (lambda m, opt: m.OneCycleLR(opt, 0.1), ValueError, "give total_steps, or both epochs"),
    "one-cycle total": (lambda m, opt: m.OneCycleLR(opt, 0.1, total_steps=0), ValueError, "positive int, got 0"),
    "one-cycle pct_start": (
        lambda m, opt: m.OneCycleLR(opt, 0.1, total_steps=9, pct_start=1.5, cycle_momentum=False),
        ValueError,
        "pct_start must be a float in",
    ),
    "one-cycle anneal": (
        lambda m, opt: m.OneCycleLR(opt, 0.1, total_steps=9, anneal_strategy="exp", cycle_momentum=False),
        ValueError,
        "'cos' or 'linear', got 'exp'",
    ),
    "one-cycle max_lr per group": (
        lambda m, opt: m.OneCycleLR(opt, [0.1, 0.2], total_steps=9, cycle_momentum=False),
        ValueError,
        "2 max_lr values for 3 param groups",
    ),
    "one-cycle past its steps": (
        lambda m, opt: [
            (opt.step(), s.step())
            for s in [m.OneCycleLR(opt, 0.1, total_steps=3, cycle_momentum=False)]
            for _ in "1234"
        ],
        ValueError,
        "tried to step 4 times; the cycle is total_steps=3",
    ),
}

# where torch takes the argument and fails later (a ZeroDivisionError) or quietly does something else
LIMN_RAISES = {
    "step_size 0": (lambda m, opt: m.StepLR(opt, step_size=0), ValueError, "step_size must be a positive"),
    "negative T_max": (lambda m, opt: m.CosineAnnealingLR(opt, T_max=-5), ValueError, "T_max must be a positive"),
    "T_max 0": (lambda m, opt: m.CosineAnnealingLR(opt, T_max=0), ValueError, "T_max must be a positive"),
    "sequential milestones order": (
        lambda m, opt: m.SequentialLR(opt, [m.ConstantLR(opt), m.ExponentialLR(opt, 0.9), m.StepLR(opt, 2)], [6, 3]),
        ValueError,
        r"milestones must be steps >= 0 in increasing order, got \[6, 3\]",
    ),
    "sequential other optimizer": (
        lambda m, opt: m.SequentialLR(opt, [m.ConstantLR(limn_sgd()), m.ExponentialLR(opt, 0.9)], [3]),
        ValueError,
        "another optimizer",
    ),
    "one-cycle momentum": (
        lambda m, opt: m.OneCycleLR(opt, 0.1, total_steps=9),
        NotImplementedError,
        "pass cycle_momentum=False",
    ),
}


@pytest.mark.parametrize("case", TORCH_RAISES_TOO)
def test_bad_arguments_raise_what_torch_raises(case):
    make, error, message = TORCH_RAISES_TOO[case]
    with pytest.raises(error, match=message):
        make(ours, limn_sgd())
    with warnings.catch_warnings(), pytest.raises(error):
        warnings.simplefilter("ignore")
        make(theirs, torch_sgd())


@pytest.mark.parametrize("case", LIMN_RAISES)
def test_arguments_torch_takes_and_fails_on_later_raise_at_once(case):
    make, error, message = LIMN_RAISES[case]
    with pytest.raises(error, match=message):
        make(ours, limn_sgd())


def test_stepping_the_schedule_before_the_optimizer_warns_as_torch():
    opt = limn_sgd()
    scheduler = ours.StepLR(opt, 3)
    with pytest.warns(UserWarning, match=r"`lr_scheduler.step\(\)` before `optimizer.step\(\)`"):
        scheduler.step()
    opt, chain = limn_sgd(), optim.Chain(limn_sgd())
    for optimizer in (opt, chain):
        scheduler = ours.StepLR(optimizer, 3)
        optimizer.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            scheduler.step()


# ---- where it lives ----


def test_the_module_is_limn_optim_lr_scheduler_and_limn_lr_scheduler():
    from limn.optim.lr_scheduler import CosineAnnealingLR

    assert ours is lr_scheduler and CosineAnnealingLR is lr_scheduler.CosineAnnealingLR
    assert set(theirs.__all__) - set(lr_scheduler.__all__) == {
        "ReduceLROnPlateau",
        "CyclicLR",
        "CosineAnnealingWarmRestarts",
    }
    first = "import limn.optim.lr_scheduler as s, limn.optim as o; assert o.lr_scheduler is s and s.StepLR"
    subprocess.run([sys.executable, "-c", first], check=True)  # imported before limn.optim: no cycle
