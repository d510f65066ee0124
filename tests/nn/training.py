"""The training step the tests under tests/nn write as a user would: forward, backward, and one realize() for the
update and the loss (optimizer.step(loss))."""

from __future__ import annotations

from limn import nn


def training_step(model, opt):
    """step(x, y) -> the loss of an MSE fit of model(x) to y, after opt has stepped on it."""

    def step(x, y):
        opt.zero_grad()
        loss = nn.mse_loss(model(x), y)
        loss.backward()
        opt.step(loss)
        return loss

    return step
