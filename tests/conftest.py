"""Shared test setup: every test starts on the numpy device, and tests/ is importable (corpus.py)."""

import pytest

import limn


@pytest.fixture(autouse=True)
def _numpy_device_between_tests():
    limn.set_device("numpy")
    yield
    limn.set_device("numpy")
