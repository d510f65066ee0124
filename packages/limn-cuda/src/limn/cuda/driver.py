"""The CUDA driver, probed: is there a driver, a GPU, and which one, as a Gpu record or a DeviceError saying why not.

Takes nothing but a device ordinal; gives the GPU's name, compute capability, memory and the driver's version
through cuda.bindings.driver (cuInit, cuDeviceGetCount, cuDeviceGetAttribute, ...). Each failure is a DeviceError
naming the cause and what to do. The cuda device (launching, memory) builds on this later.
Pipeline: ... -> NVRTC (cuda/nvrtc.py) -> **driver** -> GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from limn.runtime.device import DeviceError


@dataclass(frozen=True)
class Gpu:
    """One GPU as the driver describes it."""

    ordinal: int  # the driver's device index (after CUDA_VISIBLE_DEVICES)
    name: str  # "NVIDIA H200"
    arch: int  # compute capability as major * 10 + minor: 90 for 9.0
    total_memory: int  # bytes
    driver_version: int  # cuDriverGetVersion's: 13020 for CUDA 13.2

    @property
    def driver_release(self) -> tuple[int, int]:
        """The driver's CUDA version as (major, minor).

        >>> Gpu(0, "NVIDIA H200", 90, 150 * 10**9, 13020).driver_release
        (13, 2)
        """
        return (self.driver_version // 1000, self.driver_version % 1000 // 10)


def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise DeviceError(f"the cuda device needs cuda-bindings ({e}); pip install limn-cuda") from e
    return driver


def _call(driver: Any, what: str, result: tuple) -> Any:
    """The value of a driver call, or DeviceError naming the call and the driver's error."""
    err, *values = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, text = driver.cuGetErrorString(err)
        detail = text.decode() if isinstance(text, bytes) else str(err)
        raise DeviceError(f"the CUDA driver's {what} failed with {err.name}: {detail}")
    return values[0] if len(values) == 1 else values


# cuInit's failures with a known remedy, by CUresult name
INIT_ERRORS = {
    "CUDA_ERROR_NO_DEVICE": "no CUDA device: the driver is loaded but reports no GPU; check nvidia-smi and that "
    "CUDA_VISIBLE_DEVICES does not hide them",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "the NVIDIA kernel module and libcuda are different versions; reboot, "
    "or reinstall the NVIDIA driver",
    "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER": "the NVIDIA driver is older than the CUDA version cuda-bindings was "
    "built for; update the driver, or install a cuda-bindings matching it ('cuda-bindings==12.*' for CUDA 12)",
}


def _init(driver: Any) -> None:
    """cuInit, with the ways it commonly fails spelled out."""
    try:
        (err,) = driver.cuInit(0)
    except Exception as e:  # the bindings load libcuda on first call: the loader's own error when it is absent
        raise DeviceError(
            f"no CUDA driver: libcuda could not be loaded ({type(e).__name__}: {e}); install the NVIDIA "
            "driver (nvidia-smi should list the GPU), or run on the numpy or c device"
        ) from e
    if err == driver.CUresult.CUDA_SUCCESS:
        return
    reason = INIT_ERRORS.get(err.name, "check the NVIDIA driver with nvidia-smi")
    raise DeviceError(f"the CUDA driver did not start: cuInit failed with {err.name}; {reason}")


def probe(ordinal: int = 0) -> Gpu:
    """The GPU at `ordinal`, or DeviceError saying why there is none (no driver, no device, an ordinal
    past the device count, a driver call failing). On an H200: Gpu(ordinal=0, name='NVIDIA H200', arch=90, ...).
    """
    driver = _driver()
    _init(driver)
    count = _call(driver, "cuDeviceGetCount", driver.cuDeviceGetCount())
    if count == 0:
        raise DeviceError("no CUDA device: the driver is loaded but counts 0 GPUs; check nvidia-smi")
    if not 0 <= ordinal < count:
        raise DeviceError(f"CUDA device {ordinal} was asked for, and the driver sees {count} (0 to {count - 1})")
    dev = _call(driver, "cuDeviceGet", driver.cuDeviceGet(ordinal))
    attr = driver.CUdevice_attribute
    major = _call(
        driver,
        "cuDeviceGetAttribute",
        driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
    )
    minor = _call(
        driver,
        "cuDeviceGetAttribute",
        driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
    )
    raw_name = _call(driver, "cuDeviceGetName", driver.cuDeviceGetName(256, dev))
    total = _call(driver, "cuDeviceTotalMem", driver.cuDeviceTotalMem(dev))
    version = _call(driver, "cuDriverGetVersion", driver.cuDriverGetVersion())
    name = raw_name.split(b"\0", 1)[0].decode(errors="replace")
    return Gpu(ordinal, name, major * 10 + minor, int(total), int(version))
