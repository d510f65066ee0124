"""The driver probe: a Gpu where a driver and a GPU are present, a DeviceError saying which is missing where not."""

import pytest

from limn.device import DeviceError

cuda_driver = pytest.importorskip("limn.cuda_driver")


def _driver_present() -> bool:
    try:
        cuda_driver.probe()
    except DeviceError as e:
        return not str(e).startswith("no CUDA driver")
    return True


def test_probe_without_a_driver_says_so_and_what_to_install():
    if _driver_present():
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
