"""Lookups composed from GATHER and SCATTER: embedding and one_hot.

Each takes a tensor and int indices (a tensor, or host data that becomes one) and gives a tensor: rows of
a table, or one-hot rows. An index out of range is an IndexError when the value is computed (the numpy
device and the compiled ones check before writing).
Pipeline: **tensor (composed ops)** -> graph (GATHER, SCATTER) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.errors import ArgumentError
from limn.frontend.primitives import index_tensor

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


class LookupsMixin:
    """Tensor's table lookups: embedding and one_hot."""

    __slots__ = ()

    def embedding(self, idx: Tensor) -> Tensor:
        """Rows of this (V, D) table picked by int indices of any shape S: (V, D), S -> (*S, D).

        >>> Tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]).embedding(Tensor([2, 0])).tolist()
        [[4.0, 5.0], [0.0, 1.0]]
        """
        if self.ndim != 2:
            raise ArgumentError(f"embedding: the table must be (vocab, dim), got {self.shape}")
        idx = index_tensor(idx, "embedding")
        flat = idx.reshape(idx.size, 1).expand(idx.size, self.shape[1])  # (N,) -> (N, D)
        return self.gather(0, flat).reshape(idx.shape + (self.shape[1],))

    def one_hot(self, num_classes: int = -1) -> Tensor:
        """Int class ids of shape S -> (*S, num_classes) int32 with a 1 at each id, as torch (whose result is
        int64). It is a scatter, so an id outside [0, num_classes) is an IndexError when the value is computed,
        not a silent row of zeros.

        Trap: num_classes=-1 (the default, as torch) infers max(x) + 1, which realizes x now to read its
        values (an empty x or a negative id raises ValueError, as in torch).

        >>> Tensor([0, 2]).one_hot().tolist()
        [[1, 0, 0], [0, 0, 1]]
        """
        idx = index_tensor(self, "one_hot")
        if num_classes == -1:
            num_classes = _inferred_classes(idx)
        elif num_classes < 0:
            raise ArgumentError(f"one_hot: num_classes must be >= 0, or -1 to infer it from the ids; got {num_classes}")
        idx = idx.unsqueeze(-1)  # S -> (*S, 1)
        ones = limn.Tensor.ones(idx.shape, dtype=dtypes.int32, device=self.device)
        zeros = limn.Tensor.zeros(idx.shape[:-1] + (num_classes,), dtype=dtypes.int32, device=self.device)
        return zeros.scatter_add(-1, idx, ones)  # (*S, num_classes)


def _inferred_classes(idx: Tensor) -> int:
    """max(idx) + 1, read from the realized ids: one_hot's num_classes=-1."""
    if idx.size == 0:
        raise ArgumentError("one_hot: cannot infer num_classes from an empty tensor (torch cannot either); pass it")
    low, high = idx.min().item(), idx.max().item()
    if low < 0:
        raise ArgumentError(f"one_hot: class ids must be non-negative to infer num_classes, got {low}")
    return int(high) + 1
