"""Rules for the ISA table (limn.c.isa), each against an oracle:
- the row is the compiler's own answer: the macros `cc -dM -E` predefines for the device's flags pick it,
  and a target the compiler is told to build for (LIMN_C_MARCH, CDevice(march=)) picks its row;
- every row's matmul tile fits its registers (accumulators, one vector of b per column vector, one
  broadcast value of a);
- a compiler that cannot build for -march=native still gets correct kernels (the compiler's default target)
  and says why; a target it does not know fails at set-up with the reason;
- LIMN_DEBUG=1 says which row was chosen and why."""

import os
import platform
import stat
import subprocess
import sys

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.c import isa as c_isa
from limn.c.device import CDevice
from limn.runtime.device import DeviceError

X86 = platform.machine() in ("x86_64", "AMD64")


def test_the_first_row_whose_macros_are_all_predefined_is_chosen():
    cases = {
        frozenset({"__AVX512F__", "__AVX2__", "__FMA__", "__SSE2__"}): "x86-64-v4",
        frozenset({"__AVX2__", "__FMA__", "__SSE2__"}): "x86-64-v3",
        frozenset({"__AVX2__", "__SSE2__"}): "x86-64",  # AVX2 without FMA: no fused tiles
        frozenset({"__ARM_NEON"}): "aarch64",
        frozenset(): "scalar",
    }
    for macros, name in cases.items():
        isa, why = c_isa.choose(set(macros))
        assert isa is c_isa.BY_NAME[name], f"{sorted(macros)} chose {isa.name}, expected {name}"
        assert why


@pytest.mark.parametrize("isa", c_isa.TABLE, ids=lambda isa: isa.name)
def test_each_rows_matmul_tile_fits_its_registers(isa: c_isa.ISA):
    live = isa.tile_rows * isa.tile_vectors + isa.tile_vectors + 1
    assert live <= isa.registers, f"{isa.describe()}: {live} live vectors"
    assert isa.chunk_bytes >= isa.vector_bytes and isa.jam >= 1


def test_a_row_whose_tile_cannot_fit_is_refused():
    with pytest.raises(ValueError, match="needs 19 registers"):
        c_isa.ISA("too wide", (), 32, 16, True, 8, 2, 64, 8)


@pytest.mark.skipif(not X86, reason="needs an x86-64 host: gcc builds x86-64-v3/v4 code only there")
@pytest.mark.parametrize(("march", "name"), [("x86-64-v3", "x86-64-v3"), ("x86-64-v4", "x86-64-v4")])
def test_a_chosen_target_gets_its_row_and_its_flag(march: str, name: str):
    device = CDevice(march=march)
    assert device.toolchain.isa is c_isa.BY_NAME[name]
    assert f"-march={march}" in device.toolchain.flags
    assert device.options.isa is device.toolchain.isa  # the renderer shapes tiles for that row


def test_the_native_row_is_what_the_compiler_predefines():
    device = CDevice()
    macros, error = c_isa.predefined_macros(device.toolchain.cc, device.toolchain.flags)
    assert not error
    assert device.toolchain.isa is c_isa.choose(macros)[0]


def _wrapper(tmp_path, name: str, refuse: str) -> str:
    """A cc that fails any command holding `refuse` and otherwise runs the real one."""
    real_cc = subprocess.run(["sh", "-c", "command -v cc"], capture_output=True, text=True).stdout.strip()
    wrapper = tmp_path / name
    wrapper.write_text(
        f'#!/bin/sh\nfor a in "$@"; do [ "$a" = "{refuse}" ] && {{ echo "unknown target {refuse}" >&2; exit 1; }}; '
        f'done\nexec {real_cc} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return str(wrapper)


def test_a_compiler_that_cannot_build_for_native_falls_back_to_its_default_target(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    device = CDevice(cc=_wrapper(tmp_path, "cc-no-native", "-march=native"))
    assert not any(flag.startswith("-march") for flag in device.toolchain.flags)
    assert "no -march" in device.toolchain.isa_reason
    limn.register_device("c_default_target", lambda: device)
    limn.set_device("c_default_target")
    try:
        a_np = (np.random.default_rng(0).standard_normal((40, 70)) / 8).astype(np.float32)
        got = (Tensor(a_np) @ Tensor(a_np.T)).exp().sum(1).numpy()
    finally:
        limn.set_device("numpy")
    np.testing.assert_allclose(got, np.exp(a_np.astype(np.float64) @ a_np.T).sum(1), rtol=1e-5)


def test_a_target_the_compiler_does_not_know_fails_with_the_reason(tmp_path):
    with pytest.raises(DeviceError, match="-march=no-such-cpu"):
        CDevice(cc=_wrapper(tmp_path, "cc-strict", "-march=no-such-cpu"), march="no-such-cpu")


def test_limn_debug_1_names_the_row_and_why():
    code = "import limn; limn.set_device('c')"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "LIMN_DEBUG": "1"}, timeout=120
    )
    assert done.returncode == 0, done.stderr
    line = next((ln for ln in done.stderr.splitlines() if "ISA table" in ln), None)
    assert line is not None, f"LIMN_DEBUG=1 printed no ISA line:\n{done.stderr}"
    device = CDevice()
    assert device.toolchain.isa.name in line and "predefines" in line and "matmul tile" in line
