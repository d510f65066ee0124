"""Activation layers, as torch.nn's: ReLU, GELU, SiLU, LeakyReLU, Tanh, Sigmoid, each a limn.nn.module.Module
with torch's constructor arguments whose forward applies limn's function, so `nn.Sequential(nn.Linear(4, 8),
nn.GELU())` and nanoGPT's `self.gelu = nn.GELU()` port unchanged. They hold no parameters.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from limn.composed.functional import activations
from limn.frontend.tensor import Tensor
from limn.nn.module import Module

__all__ = ["GELU", "LeakyReLU", "ReLU", "SiLU", "Sigmoid", "Tanh"]


def _out_of_place(inplace: bool, what: str) -> None:
    """inplace=True raises, as limn.nn's functions do: limn tensors are values, there is no storage to reuse."""
    if inplace:
        raise NotImplementedError(
            f"{what}(inplace=True): limn tensors are values, not storage to overwrite; use {what}() (the same values)"
        )


class ReLU(Module):
    """torch.nn.ReLU: max(x, 0), gradient 0 at 0.

    >>> ReLU()(Tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """

    def __init__(self, inplace: bool = False):
        _out_of_place(inplace, "ReLU")
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class GELU(Module):
    """torch.nn.GELU: x Phi(x), with erf (approximate='none', torch's default) or torch's tanh form ('tanh')."""

    def __init__(self, approximate: str = "none"):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return x.gelu(self.approximate)


class SiLU(Module):
    """torch.nn.SiLU: x * sigmoid(x)."""

    def __init__(self, inplace: bool = False):
        _out_of_place(inplace, "SiLU")
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return activations.silu(x)


class LeakyReLU(Module):
    """torch.nn.LeakyReLU: x if x > 0 else negative_slope * x; gradient negative_slope at 0, as torch."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        _out_of_place(inplace, "LeakyReLU")
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x: Tensor) -> Tensor:
        return x.leaky_relu(self.negative_slope)


class Tanh(Module):
    """torch.nn.Tanh."""

    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    """torch.nn.Sigmoid: 1 / (1 + e**-x)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()
