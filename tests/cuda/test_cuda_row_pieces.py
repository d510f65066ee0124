"""Row pieces (limn.compiler.row_pieces) on the cuda devices: a kernel whose family ran at another row count runs as
kernels built for power-of-two counts, each launched on device pointers moved on to its first row (and, where a
short loop is peeled, to its value's cells):
- on cuda-sim, bit for bit the whole kernels of a device that never saw another count (the oracle), for an MLP
  (matmuls, bias, GELU) and attention's head layout at 21 and 37 rows after a plan at 16;
- on the cuda device (a GPU where there is one, else the emulated driver), against the numpy device, with the
  pieces being what launched."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from test_cuda_device import cuda, emulated  # noqa: F401 (fixtures: the cuda device on a GPU or the emulated driver)

import limn
from limn import Tensor
from limn.cuda.sim.device import CudaSimDevice
from limn.runtime.device import get_device

# cuda-sim builds each plan with g++ (seconds): nox -s "tests(cuda-sim)" runs these, not the default suite
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")]

rng = np.random.default_rng(4)
C, H = 16, 24
W1, B1 = rng.standard_normal((C, H)).astype(np.float32), rng.standard_normal(H).astype(np.float32)
W2 = rng.standard_normal((H, C)).astype(np.float32)


def model(x: Tensor) -> Tensor:
    h = (x @ Tensor(W1) + Tensor(B1)).gelu() @ Tensor(W2)  # (T, C)
    split = (h.reshape(h.shape[0], 4, C // 4).permute(1, 0, 2) * 2.0).contiguous()  # (4, T, 4): heads first
    return (split + 1.0).permute(1, 0, 2).reshape(h.shape[0], C)


def _pieces_ran(device) -> int:
    return sum(isinstance(p, list) for plan in device.plans.values() for p in plan.compiled)


def test_row_pieces_on_cuda_sim_equal_the_whole_kernels_bit_for_bit() -> None:
    limn.register_device("cuda-sim-rows", CudaSimDevice)
    limn.set_device("cuda-sim-rows")
    model(Tensor(rng.standard_normal((16, C)).astype(np.float32))).realize()
    for rows in (21, 37):
        x = rng.standard_normal((rows, C)).astype(np.float32)
        limn.set_device("cuda-sim-rows")
        got = model(Tensor(x)).numpy()
        limn.register_device(f"cuda-sim-whole-{rows}", CudaSimDevice)
        limn.set_device(f"cuda-sim-whole-{rows}")
        want = model(Tensor(x)).numpy()
        assert got.tobytes() == want.tobytes(), f"{rows} rows: the pieces differ from the whole kernels"
        assert _pieces_ran(get_device(f"cuda-sim-whole-{rows}")) == 0
    assert _pieces_ran(get_device("cuda-sim-rows")) > 0, "the pieces are what ran"


def test_row_pieces_on_the_cuda_device_are_the_numpy_devices(cuda) -> None:  # noqa: F811
    xs = [rng.standard_normal((rows, C)).astype(np.float32) for rows in (16, 21)]
    got = [model(Tensor(x)).numpy() for x in xs]
    limn.set_device("numpy")
    for g, x in zip(got, xs):
        np.testing.assert_allclose(g, model(Tensor(x)).numpy(), rtol=1e-5, atol=1e-5)
    assert _pieces_ran(get_device("cuda")) > 0, "21 rows ran as the pieces 16 + 4 + 1"
