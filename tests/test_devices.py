"""The device registry: devices are found by name through the `limn.devices` entry points, loaded on
first use, and every way of failing to get one (unknown name, missing package, a package that raises on
import, a broken entry point, a missing toolchain) is a DeviceError at set_device that names the device
and the cause, while limn.devices() goes on listing the others.
"""

import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint

import numpy as np
import pytest

import limn
from limn import DeviceError, Tensor
from limn.runtime import device as registry
from limn.runtime.numpy_device import NumpyDevice

NUMPY_EP = EntryPoint(name="numpy", value="limn.runtime.numpy_device:NumpyDevice", group=registry.ENTRY_POINT_GROUP)


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch):
    """Each test starts from a registry holding no runtime registrations (other test modules may have
    made some) and leaves it, and the selected device, as it found them."""
    monkeypatch.setattr(registry, "_registered", {})
    monkeypatch.setattr(registry, "_loaded", {})
    yield
    registry.set_device("numpy")


def fake_entry_points(monkeypatch, *extra: EntryPoint) -> None:
    """Makes the registry see the numpy device's entry point plus `extra`, and nothing installed."""
    eps = {ep.name: ep for ep in (NUMPY_EP, *extra)}
    monkeypatch.setattr(registry, "_entry_points", lambda: dict(eps))


def entry_point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=registry.ENTRY_POINT_GROUP)


class RenamedNumpyDevice(NumpyDevice):
    """The reference under another name, to stand in for a working device."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


# ---- listing ----


def test_devices_lists_numpy_first():
    assert limn.devices()[0] == "numpy"


def test_devices_lists_every_entry_point_and_registration(monkeypatch):
    fake_entry_points(monkeypatch, entry_point("zeta", "zeta_mod:Z"), entry_point("alpha", "alpha_mod:A"))
    limn.register_device("mine", lambda: RenamedNumpyDevice("mine"))
    assert limn.devices() == ["numpy", "alpha", "mine", "zeta"]


def test_import_limn_imports_no_backend():
    code = textwrap.dedent(
        """
        import sys
        from importlib.metadata import entry_points
        import limn
        limn.devices()
        modules = {ep.module for ep in entry_points(group="limn.devices") if ep.name != "numpy"}
        print(sorted(m for m in modules if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- bad input: every failure names the device and the cause ----


def test_unknown_device_name_says_which_devices_exist(monkeypatch):
    fake_entry_points(monkeypatch, entry_point("other", "other_mod:Other"))
    with pytest.raises(DeviceError, match="no device named 'nonesuch'") as info:
        limn.set_device("nonesuch")
    assert "installed: numpy, other" in str(info.value)
    assert limn.devices() == ["numpy", "other"]


def test_missing_first_party_package_names_the_package_to_install(monkeypatch):
    fake_entry_points(monkeypatch)
    with pytest.raises(DeviceError, match="'c'.*pip install limn-c"):
        limn.set_device("c")
    with pytest.raises(DeviceError, match="'cuda'.*pip install limn-cuda"):
        limn.set_device("cuda")


def test_device_package_that_raises_on_import(monkeypatch, tmp_path):
    (tmp_path / "exploding_device.py").write_text(
        "raise RuntimeError('libexplode.so: cannot open shared object file')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fake_entry_points(monkeypatch, entry_point("exploding", "exploding_device:Device"))

    with pytest.raises(DeviceError) as info:
        limn.set_device("exploding")
    message = str(info.value)
    assert "'exploding'" in message
    assert "RuntimeError: libexplode.so: cannot open shared object file" in message
    assert isinstance(info.value.__cause__, RuntimeError)
    assert limn.devices() == ["numpy", "exploding"]


def test_entry_point_to_a_missing_module(monkeypatch):
    fake_entry_points(monkeypatch, entry_point("boom", "some_missing_module:X"))
    with pytest.raises(DeviceError, match=r"'boom'.*ModuleNotFoundError.*some_missing_module"):
        limn.set_device("boom")
    assert "boom" in limn.devices()


def test_entry_point_to_a_missing_attribute(monkeypatch):
    fake_entry_points(monkeypatch, entry_point("typo", "limn.runtime.numpy_device:NumpyDevise"))
    with pytest.raises(DeviceError, match=r"'typo'.*AttributeError.*NumpyDevise"):
        limn.set_device("typo")


def test_entry_point_to_something_that_is_not_a_device(monkeypatch):
    fake_entry_points(monkeypatch, entry_point("notadevice", "fractions:Fraction"))
    with pytest.raises(DeviceError, match=r"'notadevice'.*does not implement limn.runtime.device.Device"):
        limn.set_device("notadevice")


def test_a_broken_device_leaves_the_others_working(monkeypatch):
    fake_entry_points(
        monkeypatch,
        entry_point("boom", "some_missing_module:X"),
        entry_point("renamed", "limn.runtime.numpy_device:NumpyDevice"),
    )
    with pytest.raises(DeviceError):
        limn.set_device("boom")
    assert limn.current_device() == "numpy"  # a failed set_device changes nothing
    limn.set_device("renamed")
    assert limn.current_device() == "renamed"
    np.testing.assert_array_equal((Tensor([1.0, 2.0]) * 2).numpy(), [2.0, 4.0])


# ---- toolchains: a device that cannot run here fails at set_device, with its reason ----


def test_missing_toolchain_fails_at_set_device_with_the_reason():
    def needs_cc():
        raise DeviceError("device 'needs-cc' needs a C compiler: no 'cc' on PATH; install gcc or clang")

    limn.register_device("needs-cc", needs_cc)
    with pytest.raises(DeviceError, match="no 'cc' on PATH") as info:
        limn.set_device("needs-cc")
    assert info.value.__cause__ is None  # the device's own DeviceError, not a wrapper around it
    assert limn.current_device() == "numpy"
    assert "needs-cc" in limn.devices()


def test_other_errors_while_constructing_are_wrapped_with_the_device_name():
    def no_driver():
        raise OSError("libcuda.so.1: cannot open shared object file")

    limn.register_device("gpu", no_driver)
    with pytest.raises(DeviceError, match=r"'gpu'.*OSError: libcuda.so.1") as info:
        limn.set_device("gpu")
    assert isinstance(info.value.__cause__, OSError)


def test_a_failed_load_is_tried_again_next_time():
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise DeviceError("device 'flaky' is not ready yet")
        return RenamedNumpyDevice("flaky")

    limn.register_device("flaky", flaky)
    with pytest.raises(DeviceError):
        limn.set_device("flaky")
    limn.set_device("flaky")
    assert limn.current_device() == "flaky"


# ---- register_device ----


def test_registered_factory_is_called_once_and_computes():
    calls = []

    def factory():
        calls.append(1)
        return RenamedNumpyDevice("mine")

    limn.register_device("mine", factory)
    assert calls == []  # loaded on first use, not at registration
    limn.set_device("mine")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = (Tensor(x) @ Tensor(x.T)).sum(axis=1).numpy()  # (3, 4) @ (4, 3) -> (3, 3) -> (3,)
    np.testing.assert_allclose(got, (x @ x.T).sum(axis=1))
    limn.get_device("mine")
    assert calls == [1]
    assert limn.get_device("mine").nodes_run > 0


def test_registered_instance_is_used_as_it_is():
    device = RenamedNumpyDevice("instance")
    limn.register_device("instance", device)
    limn.set_device("instance")
    assert limn.get_device() is device


def test_registering_again_replaces_the_loaded_device():
    limn.register_device("again", RenamedNumpyDevice("again"))
    first = limn.get_device("again")
    limn.register_device("again", RenamedNumpyDevice("again"))
    assert limn.get_device("again") is not first


# ---- set_device's own argument ----


@pytest.mark.parametrize("name", [3, None, b"numpy", ["numpy"]])
def test_set_device_takes_a_name_not_anything_else(name):
    with pytest.raises(TypeError, match="device name"):
        limn.set_device(name)
    assert limn.current_device() == "numpy"
