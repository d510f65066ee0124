"""The contract, checked from outside: limn finds the counting device through its entry point, loads it
only when asked, computes what the numpy reference computes, and counts the nodes of every graph it ran.
Run with limn-core and this distribution installed (nox -s plugin does both).
"""

import subprocess
import sys

import numpy as np
import pytest

import limn
from limn import Tensor


@pytest.fixture(autouse=True)
def back_to_numpy():
    yield
    limn.set_device("numpy")


def mlp_step(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A small graph with movement, a matmul, a reduce and elementwise ops, realized on the current device."""
    h = (Tensor(x) @ Tensor(w)).relu()  # (4, 3) @ (3, 5) -> (4, 5)
    return (h * h).sum(dim=0).numpy()  # (4, 5) -> (5,)


def test_devices_lists_the_counting_device():
    assert "counting" in limn.devices()
    assert limn.devices()[0] == "numpy"


def test_import_limn_does_not_import_the_device_package():
    code = "import sys, limn; limn.devices(); print('limn_counting' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_set_device_loads_the_entry_point():
    from limn_counting import CountingDevice

    limn.set_device("counting")
    assert limn.current_device() == "counting"
    assert isinstance(limn.get_device("counting"), CountingDevice)
    assert isinstance(limn.get_device("counting"), limn.runtime.device.Device)


def test_counting_computes_what_the_numpy_reference_computes():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 5)).astype(np.float32)

    limn.set_device("numpy")
    reference = mlp_step(x, w)
    limn.set_device("counting")
    counted = mlp_step(x, w)

    np.testing.assert_array_equal(counted, reference)  # the same interpreter: the same bits
    np.testing.assert_allclose(counted, (np.maximum(x @ w, 0) ** 2).sum(axis=0), rtol=1e-5)


def test_counting_counts_the_nodes_the_reference_interprets():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    counting = limn.get_device("counting")
    numpy_device = limn.get_device("numpy")

    limn.set_device("numpy")
    before = numpy_device.nodes_run
    mlp_step(x, w)
    numpy_nodes = numpy_device.nodes_run - before

    limn.set_device("counting")
    nodes_before, graphs_before = counting.nodes_run, counting.graphs_run
    mlp_step(x, w)

    assert counting.graphs_run - graphs_before == 1  # one realize(), one graph
    assert counting.nodes_run - nodes_before == numpy_nodes > 0


def test_tensors_move_between_host_devices():
    limn.set_device("counting")
    t = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)) + 1
    on_numpy = t.to("numpy")
    np.testing.assert_array_equal(on_numpy.numpy(), np.arange(1, 7, dtype=np.float32).reshape(2, 3))
