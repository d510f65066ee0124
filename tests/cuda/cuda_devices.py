"""What the tests under tests/cuda ask of the machine: whether a CUDA driver is present, and the devices a kernel
shape is run on: always cuda-sim (the CUDA C on CPU threads), and the real GPU where there is one (skipped with
the reason `no CUDA device` elsewhere)."""

from __future__ import annotations

import pytest

from limn.runtime.device import DeviceError

WHERE = ["cuda-sim", "gpu"]  # parametrize a test over these, and build its device with make_device


def driver_present() -> bool:
    """True where the CUDA driver loads, whether or not it finds a GPU."""
    from limn.cuda import driver as cuda_driver

    try:
        cuda_driver.probe()
    except DeviceError as e:
        return not str(e).startswith("no CUDA driver")
    return True


def make_device(where: str, **options):
    """A fresh cuda-sim device, or the real cuda device (skipping the test without a GPU), with `options`
    (tiling=..., for the matmul tiles) handed to its constructor."""
    if where == "cuda-sim":
        from limn.cuda.sim.device import CudaSimDevice

        return CudaSimDevice(**options)
    from limn.cuda.device import CudaDevice

    try:
        return CudaDevice(**options)
    except DeviceError as e:
        pytest.skip(f"no CUDA device: {e}")
