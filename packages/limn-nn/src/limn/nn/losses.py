"""Loss layers, as torch.nn's: CrossEntropyLoss, NLLLoss, BCEWithLogitsLoss, BCELoss, MSELoss, L1Loss. Each is a
limn.nn.module.Module keeping torch's constructor arguments; calling it, `criterion(input, target)`, gives
limn.composed.functional.losses' function of them, so `criterion = nn.CrossEntropyLoss(ignore_index=-1)` ports
unchanged. The weights they keep (class weight, pos_weight) are buffers, in state_dict under torch's names when given,
as torch registers them. Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from typing import Any

from limn.frontend.tensor import Tensor
from limn.nn.module import Module

__all__ = ["BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "L1Loss", "MSELoss", "NLLLoss"]


class _Loss(Module):
    """A loss function with its keyword arguments kept as attributes (reduction "mean", "sum" or "none", as
    torch); a weight or pos_weight tensor is a buffer (register_buffer), in state_dict as torch's."""

    function: Any = None

    def __init__(self, **kwargs: Any):
        self._keys = tuple(kwargs)
        for key, value in kwargs.items():
            if key in ("weight", "pos_weight") and isinstance(value, Tensor):
                self.register_buffer(key, value)
            else:
                setattr(self, key, value)

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return type(self).function(input, target, **{key: getattr(self, key) for key in self._keys})


class CrossEntropyLoss(_Loss):
    """torch.nn.CrossEntropyLoss: Tensor.cross_entropy (class ids or class probabilities as the target).

    >>> CrossEntropyLoss()(Tensor([[0.0, 0.0]]), Tensor([1])).item()
    0.6931471824645996
    """

    function = staticmethod(Tensor.cross_entropy)

    def __init__(
        self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0
    ):
        super().__init__(
            weight=weight,
            size_average=size_average,
            ignore_index=ignore_index,
            reduce=reduce,
            reduction=reduction,
            label_smoothing=label_smoothing,
        )


class NLLLoss(_Loss):
    """torch.nn.NLLLoss: Tensor.nll_loss of log-probabilities."""

    function = staticmethod(Tensor.nll_loss)

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(
            weight=weight, size_average=size_average, ignore_index=ignore_index, reduce=reduce, reduction=reduction
        )


class BCEWithLogitsLoss(_Loss):
    """torch.nn.BCEWithLogitsLoss: Tensor.binary_cross_entropy_with_logits (stable for any logit)."""

    function = staticmethod(Tensor.binary_cross_entropy_with_logits)

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(
            weight=weight, size_average=size_average, reduce=reduce, reduction=reduction, pos_weight=pos_weight
        )


class BCELoss(_Loss):
    """torch.nn.BCELoss: Tensor.binary_cross_entropy of probabilities."""

    function = staticmethod(Tensor.binary_cross_entropy)

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(weight=weight, size_average=size_average, reduce=reduce, reduction=reduction)


class MSELoss(_Loss):
    """torch.nn.MSELoss: mean (or sum) of (input - target)**2."""

    function = staticmethod(Tensor.mse_loss)

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average=size_average, reduce=reduce, reduction=reduction)


class L1Loss(_Loss):
    """torch.nn.L1Loss: mean (or sum) of |input - target|."""

    function = staticmethod(Tensor.l1_loss)

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average=size_average, reduce=reduce, reduction=reduction)
