"""Fixtures for the compiler tests: a fresh IR interpreter device per test, its cache counters at 0."""

import pytest
from ir_interpreter import IRInterpreter

import limn


@pytest.fixture
def ir_device() -> IRInterpreter:
    """A new IRInterpreter registered as device "ir" and selected; its stats count only this test."""
    device = IRInterpreter()
    limn.register_device("ir", device)
    limn.set_device("ir")
    return device
