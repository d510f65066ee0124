"""limn.nn's activation layers (ReLU, GELU, SiLU, LeakyReLU, Tanh, Sigmoid) against torch.nn's, forward and
backward on numpy and c, their inplace=True refusal, and `import limn.nn.functional as F`, torch's spelling
of limn.nn's functions.
"""

import numpy as np
import pytest
import torch
from test_layers import check_layer

import limn.nn as nn

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


def test_limn_nn_functional_is_limn_nn():
    import limn.nn.functional as F
    from limn.nn.functional import gelu, interpolate

    assert F is nn and gelu is nn.gelu and interpolate is nn.interpolate
