"""Train a small MLP with AdamW to fit a synthetic 2-D function, on the best device installed.

    uv run python examples/train_mlp.py            # 600 steps, progress every 50
    uv run python examples/train_mlp.py --steps 200 --device numpy

The target is f(x, y) = sin(3x) cos(2y) + x y / 2 on [-1, 1]^2. Each step draws a fresh batch, runs the
model forward, backpropagates, and lets AdamW update every parameter in one realize() that also
produces the logged loss. The step is captured (limn.capture), so after the first step no Python graph
is built: the recorded kernels run on each new batch. The script prints step, loss and steps/s, and
ends by reporting how far the loss fell (the README promises at least 20x).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import limn
from limn import Tensor, nn, optim
from limn.capture import capture


def target(xy: np.ndarray) -> np.ndarray:
    x, y = xy[:, 0], xy[:, 1]
    return (np.sin(3 * x) * np.cos(2 * y) + 0.5 * x * y)[:, None]


class MLP:
    """2 -> hidden -> hidden -> 1 with tanh between: (B, 2) -> (B, 1)."""

    def __init__(self, hidden: int) -> None:
        self.layers = [nn.Linear(2, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, 1)]

    def __call__(self, x: Tensor) -> Tensor:
        for layer in self.layers[:-1]:
            x = layer(x).tanh()  # (B, hidden)
        return self.layers[-1](x)  # (B, 1)


def best_device() -> str:
    """cuda where a GPU answers, else c where a compiler does, else the numpy reference."""
    for name in ("cuda", "c"):
        if name in limn.devices():
            try:
                limn.set_device(name)
                return name
            except limn.DeviceError:
                continue
    limn.set_device("numpy")
    return "numpy"


def train(steps: int, batch: int, hidden: int, lr: float, device: str | None, log_every: int, seed: int) -> dict:
    """Runs the training loop; returns the first and last loss and the steady-state steps/s."""
    if device is None:
        device = best_device()
    else:
        limn.set_device(device)
    limn.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = MLP(hidden)
    opt = optim.AdamW(nn.named_parameters(model), lr=lr, weight_decay=1e-4)

    def step(x: Tensor, y: Tensor) -> Tensor:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step(loss)  # parameters, AdamW state and the loss in one realize()
        return loss

    step = capture(step)
    first_loss = last_loss = float("nan")
    start = time.perf_counter()
    timed_from, timed_steps = start, 0
    print(f"training a 2-{hidden}-{hidden}-1 MLP on {device}: {steps} steps of {batch}")
    for i in range(1, steps + 1):
        opt.lr = lr * 0.5 * (1 + math.cos(math.pi * (i - 1) / steps))  # cosine decay, no recompile
        xy = rng.uniform(-1, 1, size=(batch, 2)).astype(np.float32)
        loss = step(Tensor(xy), Tensor(target(xy).astype(np.float32)))
        if i == 1:
            first_loss = loss.item()
            timed_from = time.perf_counter()  # steps/s below leaves out the first (compiling) step
        timed_steps = i - 1
        if i % log_every == 0 or i == steps:
            last_loss = loss.item()
            elapsed = time.perf_counter() - timed_from
            rate = timed_steps / elapsed if elapsed > 0 else float("nan")
            print(f"step {i:5d}  loss {last_loss:.5f}  {rate:7.1f} steps/s")
    total = time.perf_counter() - start
    rate = timed_steps / (time.perf_counter() - timed_from) if timed_steps else float("nan")
    print(f"loss {first_loss:.4f} -> {last_loss:.5f}: {first_loss / last_loss:.0f}x lower in {total:.1f} s")
    return {"first": first_loss, "last": last_loss, "steps_per_s": rate, "device": device}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--device", default=None, help="numpy, c or cuda (default: the best installed)")
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    train(args.steps, args.batch, args.hidden, args.lr, args.device, args.log_every, args.seed)


if __name__ == "__main__":
    main()
