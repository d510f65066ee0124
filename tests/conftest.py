"""Shared test setup: every test starts on the numpy device, `device` runs a test on numpy and on c, and tests/
is importable (corpus.py, oracle.py)."""

import sys

# This machine's environment sets PYTHONDONTWRITEBYTECODE; then every worker rewrites each test module's asserts
# anew (about 5 s a worker) and compiles limn's modules on each import. The suite keeps its bytecode in
# __pycache__ folders, which git ignores.
sys.dont_write_bytecode = False

import pytest  # noqa: E402

import limn  # noqa: E402


@pytest.fixture(autouse=True)
def _numpy_device_between_tests():
    limn.set_device("numpy")
    yield
    limn.set_device("numpy")


@pytest.fixture(params=["numpy", pytest.param("c", marks=pytest.mark.ops)])
def device(request: pytest.FixtureRequest) -> str:
    """Each test once on the numpy device and once on c (skipped, naming why, where c cannot run). The c half
    is marked `ops`: the op tables compile a library each on c, so it runs in `nox -s ops` (CI runs it)."""
    try:
        limn.set_device(request.param)
    except limn.DeviceError as e:
        pytest.skip(f"device {request.param!r} cannot run here: {e}")
    return request.param
