"""Dropout: dropout, dropout1d, dropout2d and their modules Dropout, Dropout1d, Dropout2d, as torch's.

Each takes a tensor and a drop probability p and gives a tensor of its shape: in training, each element (or
each whole channel, for 1d and 2d) is zeroed with probability p and the rest scaled by 1 / (1 - p); in eval
(training=False) the input itself. The modules read their `training` attribute (True at first, as torch).
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from limn.frontend.tensor import Tensor
from limn.nn.module import Module


def keep_mask(shape: tuple[int, ...], keep: float, like: Tensor) -> Tensor:
    """A bool tensor, True with probability `keep` in each cell: the one place dropout draws random
    numbers (Tensor.rand: the device generator of limn.composed.random.rng, fresh on each replay of a captured step)."""
    return Tensor.rand(shape, device=like.device).lt(keep)


def _dropout(x: Tensor, p: float, training: bool, mask_shape: tuple[int, ...], what: str) -> Tensor:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{what}: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0  # every cell dropped (NaN and inf become NaN, as torch's x * 0)
    scale = keep_mask(mask_shape, 1.0 - p, x).where(1.0 / (1.0 - p), 0.0)  # torch's noise: bernoulli / (1 - p)
    return x * scale.cast(x.dtype)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """torch.nn.functional.dropout: each element zeroed with probability p, the rest scaled by 1 / (1 - p);
    `input` itself when training is False. inplace is accepted and ignored (limn has no in-place ops).

    >>> dropout(Tensor.ones((2, 3)), p=0.5, training=False).tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """
    return _dropout(input, p, training, input.shape, "dropout")


def _channel_mask_shape(x: Tensor, spatial: int, what: str) -> tuple[int, ...]:
    """The mask shape of a channel dropout: (N, C, 1, ...) for (N, C, *spatial), (C, 1, ...) unbatched."""
    if x.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{what}: expects a {spatial + 1}-d or {spatial + 2}-d input, got shape {x.shape}")
    lead = x.ndim - spatial
    return x.shape[:lead] + (1,) * spatial


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """torch.nn.functional.dropout1d: whole channels of (N, C, L) or (C, L) zeroed with probability p."""
    return _dropout(input, p, training, _channel_mask_shape(input, 1, "dropout1d"), "dropout1d")


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """torch.nn.functional.dropout2d: whole channels of (N, C, H, W) or (C, H, W) zeroed with probability p."""
    return _dropout(input, p, training, _channel_mask_shape(input, 2, "dropout2d"), "dropout2d")


class Dropout(Module):
    """torch.nn.Dropout(p): dropout in training, the identity once `training` is False."""

    function = staticmethod(dropout)

    def __init__(self, p: float = 0.5, inplace: bool = False):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace
        self.training = True

    def forward(self, x: Tensor) -> Tensor:
        return self.function(x, self.p, self.training)


class Dropout1d(Dropout):
    """torch.nn.Dropout1d(p): dropout1d in training, the identity in eval."""

    function = staticmethod(dropout1d)


class Dropout2d(Dropout):
    """torch.nn.Dropout2d(p): dropout2d in training, the identity in eval."""

    function = staticmethod(dropout2d)
