"""The driver probe: a Gpu where a driver and a GPU are present, a DeviceError saying which is missing where not."""

import pytest
from cuda_devices import driver_present

from limn.runtime.device import DeviceError

cuda_driver = pytest.importorskip("limn.cuda.driver")


def test_probe_without_a_driver_says_so_and_what_to_install():
    if driver_present():
        pytest.skip("a CUDA driver is present")
    with pytest.raises(DeviceError, match="no CUDA driver.*install the NVIDIA driver"):
        cuda_driver.probe()


def test_probe_describes_the_gpu():
    try:
        gpu = cuda_driver.probe()
    except DeviceError as e:
        pytest.skip(f"needs a CUDA driver and GPU: {e}")
    assert gpu.arch >= 50 and gpu.total_memory > 0 and gpu.name
    assert gpu.driver_release >= (12, 0)


def test_probe_names_an_ordinal_past_the_device_count():
    try:
        cuda_driver.probe()
    except DeviceError as e:
        pytest.skip(f"needs a CUDA driver and GPU: {e}")
    with pytest.raises(DeviceError, match="CUDA device 4096 was asked for"):
        cuda_driver.probe(4096)


class FakeDriver:
    """cuda.bindings.driver's calls as they answer with one H200, or failing as told: the probe's paths
    without a GPU. Results are (CUresult, value...) tuples, as the bindings return them."""

    def __init__(self, init_error: str = "CUDA_SUCCESS", count: int = 1) -> None:
        from cuda.bindings import driver

        self.CUresult, self.CUdevice_attribute = driver.CUresult, driver.CUdevice_attribute
        self.init_error, self.count = getattr(driver.CUresult, init_error), count
        self.ok = driver.CUresult.CUDA_SUCCESS

    def cuInit(self, flags):
        return (self.init_error,)

    def cuDeviceGetCount(self):
        return (self.ok, self.count)

    def cuDeviceGet(self, ordinal):
        return (self.ok, ordinal)

    def cuDeviceGetAttribute(self, attr, dev):
        major = attr == self.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        return (self.ok, 9 if major else 0)

    def cuDeviceGetName(self, size, dev):
        return (self.ok, b"NVIDIA H200" + b"\0" * (size - 11))

    def cuDeviceTotalMem(self, dev):
        return (self.ok, 150_000_000_000)

    def cuDriverGetVersion(self):
        return (self.ok, 13020)


def test_probe_reads_the_gpu_from_the_driver(monkeypatch):
    monkeypatch.setattr(cuda_driver, "_driver", FakeDriver)
    gpu = cuda_driver.probe()
    assert gpu == cuda_driver.Gpu(0, "NVIDIA H200", 90, 150_000_000_000, 13020)
    assert gpu.driver_release == (13, 2)


@pytest.mark.parametrize(
    "fake, message",
    [
        (lambda: FakeDriver(init_error="CUDA_ERROR_NO_DEVICE"), "no CUDA device.*CUDA_VISIBLE_DEVICES"),
        (lambda: FakeDriver(init_error="CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER"), "driver is older.*update the driver"),
        (lambda: FakeDriver(init_error="CUDA_ERROR_UNKNOWN"), "cuInit failed with CUDA_ERROR_UNKNOWN.*nvidia-smi"),
        (lambda: FakeDriver(count=0), "no CUDA device.*counts 0 GPUs"),
    ],
)
def test_probe_says_what_is_missing(monkeypatch, fake, message):
    monkeypatch.setattr(cuda_driver, "_driver", fake)
    with pytest.raises(DeviceError, match=message):
        cuda_driver.probe()


def test_probe_names_an_ordinal_past_the_device_count_of_a_fake(monkeypatch):
    monkeypatch.setattr(cuda_driver, "_driver", lambda: FakeDriver(count=2))
    with pytest.raises(DeviceError, match=r"CUDA device 2 was asked for, and the driver sees 2 \(0 to 1\)"):
        cuda_driver.probe(2)
