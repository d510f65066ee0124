"""limn-counting-device: a limn device written outside limn, as a third party would write one.

It takes the sink Nodes of one realize(), counts every node in their graph, and hands them to limn's
numpy reference to compute, so its answers are the reference's, bit for bit. limn finds it through the
`limn.devices` entry point in this distribution's pyproject.toml and constructs it on first use.
Pipeline: tensor -> graph -> **counting device** (-> numpy reference).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from limn.dtypes import DType
from limn.graph.ops import Node, Shape, toposort
from limn.runtime.device import Buffer
from limn.runtime.numpy_device import NumpyDevice

__version__ = "0.1.0"


class CountingDevice:
    """A host device that counts the nodes it ran. It implements limn.runtime.device.Device by delegation:
    nothing here subclasses limn, so the class shows every member the protocol asks for.

    >>> import limn
    >>> from limn import Tensor
    >>> limn.set_device("counting")
    >>> (Tensor([1.0, 2.0]) * 3).numpy()
    array([3., 6.], dtype=float32)
    >>> limn.get_device("counting").nodes_run > 0
    True
    """

    name = "counting"
    # Buffers are numpy arrays in host memory, so tensors move freely between this device and the
    # other host devices (numpy, c) without copies.
    host = True

    def __init__(self) -> None:
        self._reference = NumpyDevice()
        self.nodes_run = 0  # every node of every graph handed to run()
        self.graphs_run = 0  # how many times run() was called: one per realize() batch

    @property
    def custom_kernels(self) -> frozenset[str]:
        """The CUSTOM kernels this device runs whole; the reference interprets all of limn's."""
        return self._reference.custom_kernels

    # ---- the five hooks for moving bytes: host memory, so the reference's own ----

    def alloc(self, dtype: DType, shape: Shape) -> np.ndarray:
        return self._reference.alloc(dtype, shape)

    def free(self, handle: np.ndarray) -> None:
        self._reference.free(handle)

    def copyin(self, handle: np.ndarray, array: np.ndarray) -> None:
        self._reference.copyin(handle, array)

    def copyout(self, handle: np.ndarray, dtype: DType, shape: Shape) -> np.ndarray:
        return self._reference.copyout(handle, dtype, shape)

    def synchronize(self) -> None:
        self._reference.synchronize()

    # ---- running a graph ----

    def run(self, sinks: Sequence[Node]) -> list[Buffer]:
        """One Buffer per sink, computed by the numpy reference, after counting the graph's nodes."""
        self.nodes_run += len(toposort(sinks))
        self.graphs_run += 1
        return self._reference.run(sinks)
