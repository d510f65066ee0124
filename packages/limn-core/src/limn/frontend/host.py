"""What a tensor tells the host: its shape, dtype, device and size, and its value as numpy or python numbers.

A mixin of limn.frontend.primitives' Tensor: these methods build no graph, they read the Node a tensor holds
or hand it to the engine to compute. Bytes appear only here, at numpy(), item(), tolist() and realize().
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from limn.dtypes import DType
from limn.errors import ArgumentError
from limn.frontend.arguments import Scalar
from limn.frontend.size import Size
from limn.graph.ops import Op, Shape
from limn.graph.view import prod
from limn.runtime.device import Buffer
from limn.runtime.engine import observers, realize


class HostMixin:
    """Tensor's properties and its ways to the host (see the module docstring)."""

    __slots__ = ()  # the state is Tensor's own slots: node, requires_grad, _device

    # ---- what a tensor is ----

    @property
    def shape(self) -> Shape:
        """The size of each dim, a tuple of ints (() for a 0-d tensor)."""
        return self.node.shape

    @property
    def dtype(self) -> DType:
        """The element type (limn.float32, limn.int8, limn.bool_, ...)."""
        return self.node.dtype

    @property
    def device(self) -> str:
        """The name of the device this tensor's value lives on, or will be computed on."""
        return self._device

    @property
    def is_leaf(self) -> bool:
        """True unless the tensor was computed from one that requires grad (it then has a gradient history),
        as torch's: parameters and data are leaves, activations and losses are not."""
        return self._ctx is None

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self.shape)

    @property
    def size(self) -> Size:
        """The number of elements (1 for a 0-d tensor), an int that, called, is torch's size() (see Size)."""
        return Size(self.shape)

    def numel(self) -> int:
        """The number of elements, as torch's numel() and nelement()."""
        return prod(self.shape)

    nelement = numel

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        state = "realized" if self.node.op is Op.BUFFER else f"lazy {self.node.op.name}"
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"<Tensor {self.dtype.name}{list(self.shape)} on {self.device}, {state}{grad}>"

    # ---- where bytes appear ----

    def realize(self) -> Self:
        """Computes this tensor now (a no-op if it already holds a buffer). Returns self. To compute several,
        call limn.realize(a, b, ...): one run shares their common work and their assigns read pre-step values."""
        realize(self)
        return self

    def numpy(self) -> np.ndarray:
        """A numpy copy of the value (computing it first if needed); writing to it leaves the tensor alone."""
        self.realize()
        for observer in observers.active:
            observer.read_back(self)
        buf: Buffer = self.node.arg
        return buf.numpy().reshape(self.shape)

    def item(self) -> Scalar:
        """The value of a single-element tensor as a python number (computing it first if needed)."""
        if self.size != 1:
            raise ArgumentError(f"item() needs a single-element tensor; this one has shape {self.shape}")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        """The value as nested python lists (a python number for a 0-d tensor)."""
        return self.numpy().tolist()

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ArgumentError(f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any()/.all()")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())
