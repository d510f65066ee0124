"""examples/train_mlp.py, the README's first command: AdamW on a toy regression must cut the loss at least
20x (first step's loss over last step's). It runs here in a short mode: 200 steps of the script's own
model on the c device, and on the numpy reference a smaller model and batch, which train as far in a few
seconds (120 steps of the full size take ~5 s there and reach only ~6x: the cosine schedule ends too soon).
"""

import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_mlp.py"

RUNS = {
    "c": dict(steps=200, batch=256, hidden=64, lr=1e-2),  # ~45x
    "numpy": dict(steps=200, batch=64, hidden=32, lr=2e-2),  # ~45x
}


@pytest.fixture(scope="module")
def train_mlp():
    spec = importlib.util.spec_from_file_location("train_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("device", RUNS)
def test_train_mlp_cuts_the_loss_at_least_20x(train_mlp, device):
    result = train_mlp.train(**RUNS[device], device=device, log_every=100, seed=0)
    assert result["device"] == device
    assert result["first"] / result["last"] >= 20, f"loss {result['first']:.4f} -> {result['last']:.5f}"
