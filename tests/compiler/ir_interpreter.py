"""The IR interpreter as a device: graphs run through the real scheduler, lowering and plan executor,
and then limn.compiler.interpret.execute walks each printed instruction with numpy scalars. Diffing it against the numpy
device checks that the printed nest means what it says (strides, masks, reduce identities, loop order);
every kernel it is handed passes limn.compiler.checker.check first.
"""

from __future__ import annotations

import numpy as np

from limn.compiler.checker import check
from limn.compiler.interpret import execute
from limn.compiler.ir import (
    KernelIR,
)
from limn.compiler.jit import CompiledDevice
from limn.dtypes import DType
from limn.graph.ops import Shape


class IRInterpreter(CompiledDevice):
    """A host device whose 'compiled program' is the checked KernelIR itself, run by `execute`."""

    name = "ir"
    host = True

    def render(self, kernel: KernelIR) -> str:
        return str(check(kernel))

    def compile(self, kernel: KernelIR, source: str) -> KernelIR:
        return kernel

    def launch(self, program: KernelIR, kernel: KernelIR, handles: list[np.ndarray]) -> None:
        with np.errstate(all="ignore"):
            execute(program, handles)

    def alloc(self, dtype: DType, shape: Shape) -> np.ndarray:
        # garbage, not zeros: a kernel that reads a cell before writing it must fail the diff
        return np.full(shape, 123, dtype.np) if dtype.kind != "b" else np.ones(shape, bool)

    def free(self, handle: np.ndarray) -> None:
        pass

    def copyin(self, handle: np.ndarray, array: np.ndarray) -> None:
        handle[...] = array

    def copyout(self, handle: np.ndarray, dtype: DType, shape: Shape) -> np.ndarray:
        return np.array(handle, copy=True).reshape(shape)

    def synchronize(self) -> None:
        pass
