"""Normalization layers beside limn.nn's LayerNorm: BatchNorm1d/2d, GroupNorm, InstanceNorm1d/2d, RMSNorm, and
torch.nn.functional's group_norm and layer_norm (GroupNorm's and LayerNorm's computations).

Each is a limn.nn.module.Module with torch's constructor arguments, parameter names (weight, bias) and buffer names
(running_mean, running_var, num_batches_tracked), so torch's state_dict values load by name; x -> y of the
same shape. BatchNorm and InstanceNorm read `training` (True at first, as torch): in training a BatchNorm
normalizes by the batch's statistics and folds them into its running buffers with an assign; in eval it
uses the buffers. Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Sequence

import ml_dtypes
import numpy as np

from limn import dtypes
from limn.dtypes import DType
from limn.frontend.tensor import Tensor, realize
from limn.nn import init
from limn.nn.module import Module


def _param(n: int, value: float, dtype: DType) -> Tensor:
    return init.parameter((n,), dtype, lambda: Tensor(np.full((n,), value), dtype=dtype))


def _per_channel(t: Tensor, ndim: int) -> Tensor:
    """A (C,) tensor shaped to broadcast over dim 1 of an ndim-dim input: (1, C, 1, ...)."""
    return t.reshape((1, t.shape[0]) + (1,) * (ndim - 2))


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    if weight is not None:
        y = y * _per_channel(weight, y.ndim)
    if bias is not None:
        y = y + _per_channel(bias, y.ndim)
    return y


class _BatchNorm(Module):
    ranks: tuple[int, ...] = ()  # the input ranks the class takes

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        dtype: DType = dtypes.float32,
    ):
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.training = True
        self.weight = _param(num_features, 1.0, dtype) if affine else None
        self.bias = _param(num_features, 0.0, dtype) if affine else None
        # buffers under torch's names, in state_dict and named_buffers(); None without tracking, as torch's
        track = track_running_stats
        self.register_buffer("running_mean", Tensor(np.zeros(num_features), dtype=dtype) if track else None)
        self.register_buffer("running_var", Tensor(np.ones(num_features), dtype=dtype) if track else None)
        self.register_buffer("num_batches_tracked", Tensor(np.zeros((), np.int64)) if track else None)

    def forward(self, x: Tensor) -> Tensor:
        name = type(self).__name__
        if x.ndim not in self.ranks or x.shape[1] != self.num_features:
            raise ValueError(
                f"{name}({self.num_features}): expects a {' or '.join(f'{r}-d' for r in self.ranks)} input "
                f"(N, {self.num_features}, ...), got shape {x.shape}"
            )
        axes = (0,) + tuple(range(2, x.ndim))  # every dim but the channels
        if self.training or self.running_mean is None:
            n = x.size // x.shape[1]
            if self.training and n <= 1:
                raise ValueError(f"{name}: expected more than 1 value per channel when training, got input {x.shape}")
            mean = x.mean(axes, keepdim=True)
            var = x.var(axes, keepdim=True, correction=0)  # normalized by the biased variance, as torch
            if self.training and self.running_mean is not None:
                self._track(mean, var, n)
        else:
            mean, var = _per_channel(self.running_mean, x.ndim), _per_channel(self.running_var, x.ndim)
        y = (x - mean) * (var + self.eps).rsqrt()  # (x - mean) / sqrt(var + eps)
        return _affine(y, self.weight, self.bias)

    def _track(self, mean: Tensor, var: Tensor, n: int) -> None:
        """running = (1 - momentum) running + momentum batch, with the unbiased batch variance, as torch;
        momentum None is the cumulative average (1 / num_batches_tracked). The assigns compute when a buffer
        is read, or at the next training call; pass running_mean and running_var to the optimizer's
        step(loss, ...) to compute them in the step's run, from the forward pass it computes anyway."""
        # the last call's assigns land first: a value built on a pending assign would hold it, and realizing
        # that value beside this call's assign would write the buffer twice in one run (Tensor.assign's trap)
        realize(self.num_batches_tracked, self.running_mean, self.running_var)
        count = self.num_batches_tracked + 1
        self.num_batches_tracked.assign(count)
        factor = 1.0 / count.cast(self.running_mean.dtype) if self.momentum is None else self.momentum
        mean = mean.detach().reshape(self.num_features)
        unbiased = var.detach().reshape(self.num_features) * (n / (n - 1))
        self.running_mean.assign((1 - factor) * self.running_mean + factor * mean)
        self.running_var.assign((1 - factor) * self.running_var + factor * unbiased)


class BatchNorm1d(_BatchNorm):
    """torch.nn.BatchNorm1d over (N, C) or (N, C, L): per channel, (x - mean) / sqrt(var + eps) * weight +
    bias, the statistics over every dim but C."""

    ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """torch.nn.BatchNorm2d over (N, C, H, W), as BatchNorm1d.

    >>> bn = BatchNorm2d(3)
    >>> bn(Tensor.ones((2, 3, 4, 4))).shape, bn.num_batches_tracked.item()
    ((2, 3, 4, 4), 1)
    """

    ranks = (4,)


class GroupNorm(Module):
    """torch.nn.GroupNorm: (N, C, *) with the C channels in num_groups groups; each (sample, group) is
    normalized by its own mean and biased variance, then weight and bias (C,) apply per channel."""

    def __init__(
        self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, dtype=dtypes.float32
    ):
        if num_groups < 1 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must divide by num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        self.weight = _param(num_channels, 1.0, dtype) if affine else None
        self.bias = _param(num_channels, 0.0, dtype) if affine else None

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expects (N, {self.num_channels}, ...), got shape {x.shape}")
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def group_norm(
    input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    """torch.nn.functional.group_norm: GroupNorm's computation, (N, C, *) normalized per (sample, group of
    C / num_groups channels) by its mean and biased variance, then weight and bias (C,) per channel if given.

    >>> group_norm(Tensor([[[1.0], [3.0]]]), 1).reshape(-1).tolist()
    [-0.9999949932098389, 0.9999949932098389]
    """
    if input.ndim < 2 or num_groups < 1 or input.shape[1] % num_groups:
        raise ValueError(
            f"group_norm: expects (N, C, ...) with C divisible by num_groups ({num_groups}), got shape {input.shape}"
        )
    n = input.shape[0]
    groups = input.reshape(n, num_groups, -1) if input.size else input.reshape(n, num_groups, 0)  # (N, G, C/G *)
    mean = groups.mean(-1, keepdim=True)
    var = groups.var(-1, keepdim=True, correction=0)
    y = ((groups - mean) * (var + eps).rsqrt()).reshape(input.shape)  # (N, G, C/G *) -> (N, C, *)
    return _affine(y, weight, bias)


def layer_norm(
    input: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """torch.nn.functional.layer_norm: LayerNorm's (x - mean) / sqrt(var + eps) * weight + bias over the
    trailing `normalized_shape` dims (the biased variance), with the weight and bias given (either may be None).

    >>> layer_norm(Tensor([[1.0, 3.0]]), (2,)).tolist()
    [[-0.9999949932098389, 0.9999949932098389]]
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    n = len(shape)
    trailing = input.shape[input.ndim - n :]
    if trailing != shape:
        raise ValueError(
            f"LayerNorm over {shape}: the input's trailing dims are {trailing} (input shape {input.shape})"
        )
    axes = tuple(range(input.ndim - n, input.ndim))
    mean = input.mean(axes, keepdim=True)
    var = input.var(axes, keepdim=True, correction=0)
    y = (input - mean) * (var + eps).rsqrt()  # (x - mean) / sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


class _InstanceNorm(Module):
    ranks: tuple[int, ...] = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        dtype: DType = dtypes.float32,
    ):
        if track_running_stats:
            raise NotImplementedError(f"{type(self).__name__}: track_running_stats=True is not supported in limn")
        self.num_features, self.eps, self.momentum, self.affine = num_features, eps, momentum, affine
        self.track_running_stats = False
        self.training = True
        self.weight = _param(num_features, 1.0, dtype) if affine else None
        self.bias = _param(num_features, 0.0, dtype) if affine else None

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in self.ranks:
            raise ValueError(
                f"{type(self).__name__}: expects a {'-d or '.join(map(str, self.ranks))}-d input, got {x.shape}"
            )
        unbatched = x.ndim == self.ranks[0]
        x = x.unsqueeze(0) if unbatched else x
        axes = tuple(range(2, x.ndim))  # each (sample, channel) over its own spatial cells
        mean = x.mean(axes, keepdim=True)
        var = x.var(axes, keepdim=True, correction=0)
        y = _affine((x - mean) * (var + self.eps).rsqrt(), self.weight, self.bias)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """torch.nn.InstanceNorm1d over (N, C, L) or (C, L): each channel of each sample normalized alone."""

    ranks = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """torch.nn.InstanceNorm2d over (N, C, H, W) or (C, H, W), as InstanceNorm1d."""

    ranks = (3, 4)


class RMSNorm(Module):
    """torch.nn.RMSNorm: x / sqrt(mean(x**2) + eps) * weight over the trailing normalized_shape dims; eps
    None is the input dtype's machine epsilon, as torch's."""

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float | None = None,
        elementwise_affine: bool = True,
        dtype: DType = dtypes.float32,
    ):
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        self.weight = None
        if elementwise_affine:
            self.weight = init.parameter(shape, dtype, lambda: Tensor(np.ones(shape), dtype=dtype))

    def forward(self, x: Tensor) -> Tensor:
        n = len(self.normalized_shape)
        if x.shape[x.ndim - n :] != self.normalized_shape:
            raise ValueError(f"RMSNorm over {self.normalized_shape}: the input's trailing dims are {x.shape}")
        eps = float(ml_dtypes.finfo(x.dtype.np).eps) if self.eps is None else self.eps
        axes = tuple(range(x.ndim - n, x.ndim))
        y = x * ((x * x).mean(axes, keepdim=True) + eps).rsqrt()  # x / sqrt(mean(x**2) + eps)
        return y if self.weight is None else y * self.weight
