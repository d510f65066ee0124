"""limn.optim.Adam against torch.optim.Adam, step for step on test_optim's MLP and batches (its tolerance,
1e-5 relative plus 1e-6 absolute, explained there): plain, with L2 weight decay in two parameter groups,
and decoupled_weight_decay=True (AdamW's step). Then its checks and its state_dict keys.
"""

import pytest
import torch
from test_optim import run_against_torch

import limn.nn as nn
import limn.optim as optim

CASES = {
    "plain": dict(lr=0.01),
    "weight_decay": dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    "decoupled": dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True),
}


@pytest.mark.parametrize("case", CASES)
def test_adam_matches_torch(device, case):
    kw = CASES[case]
    run_against_torch(lambda m: optim.Adam(nn.parameters(m), **kw), lambda m: [torch.optim.Adam(m.parameters(), **kw)])


def test_adam_weight_decay_groups_match_torch(device):
    def groups(model, params):
        weights = [p for p in params(model) if p.ndim == 2]
        rest = [p for p in params(model) if p.ndim != 2]
        return [{"params": weights, "weight_decay": 0.5}, {"params": rest, "lr": 0.02}]

    run_against_torch(
        lambda m: optim.Adam(groups(m, nn.parameters), lr=0.01),
        lambda m: [torch.optim.Adam(groups(m, lambda mm: list(mm.parameters())), lr=0.01)],
        steps=8,
    )


def test_adam_refuses_what_it_does_not_compute():
    w = nn.Linear(2, 2).weight
    with pytest.raises(NotImplementedError, match="Adam: amsgrad=True is not implemented"):
        optim.Adam([w], amsgrad=True)
    with pytest.raises(ValueError, match="betas in"):
        optim.Adam([w], betas=(0.9, 1.0))


def test_adam_state_dict_is_named_adam():
    opt = optim.Adam(nn.named_parameters(nn.Linear(2, 2)))
    assert sorted(opt.state_dict()) == [
        "adam.beta1_power", "adam.beta2_power", "adam.lr", "adam.step", "adam.weight_decay",
        "bias.exp_avg", "bias.exp_avg_sq", "weight.exp_avg", "weight.exp_avg_sq",
    ]  # fmt: skip
