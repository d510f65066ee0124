"""Rules for the c device's toolchain and its cache, and for what may reach compiled code:
- the program cache lives on disk, keyed by source, compiler, flags and host; a corrupt or truncated
  entry is a miss, never a crash; several processes compiling the same kernel at once all succeed;
- a missing compiler fails at set_device with the reason; a compile error shows the command, cc's
  output and the offending source lines; a cc without OpenMP gets the same source minus pragmas;
- bad input never reaches C: out-of-range gather indices raise first, odd numpy inputs are copied,
  and an allocation too large for memory raises MemoryError before any kernel runs."""

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.c.device import CDevice, cache_dir
from limn.c.toolchain import CompileError
from limn.compiler import progress
from limn.compiler.codegen import ir


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "c"


def _matmul_on(device: CDevice) -> np.ndarray:
    limn.register_device("c_probe", lambda: device)
    limn.set_device("c_probe")
    a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    b = Tensor(np.arange(8, dtype=np.float32).reshape(4, 2))
    return ((a @ b) * 2 + 1).numpy()


EXPECTED = (np.arange(12, dtype=np.float32).reshape(3, 4) @ np.arange(8, dtype=np.float32).reshape(4, 2)) * 2 + 1


def test_compiled_kernels_land_in_the_cache_folder_and_are_reused(fresh_cache):
    np.testing.assert_array_equal(_matmul_on(CDevice()), EXPECTED)
    libs = sorted(fresh_cache.glob("*.so"))
    assert libs and cache_dir() == fresh_cache
    before = {p: p.stat().st_mtime_ns for p in libs}
    np.testing.assert_array_equal(_matmul_on(CDevice()), EXPECTED)  # a new process-like device: disk hit
    assert {p: p.stat().st_mtime_ns for p in fresh_cache.glob("*.so")} == before, "a cached library was rebuilt"


@pytest.mark.parametrize("damage", ["truncate", "garbage", "checksum"])
def test_a_corrupt_cache_entry_is_a_miss_not_a_crash(fresh_cache, damage):
    _matmul_on(CDevice())
    for lib in fresh_cache.glob("*.so"):
        # damage arrives as a new file (another process, a disk fault): this process still maps the old one
        data = lib.read_bytes()
        lib.unlink()
        if damage == "truncate":
            lib.write_bytes(data[:100])
        elif damage == "garbage":
            lib.write_bytes(b"\x7fELF" + os.urandom(2000))
        else:
            lib.write_bytes(data)
            lib.with_suffix(".sha256").write_text("0" * 64)  # a checksum without a slot name: a quiet miss
    if damage == "checksum":
        np.testing.assert_array_equal(_matmul_on(CDevice()), EXPECTED)
    else:  # an entry that is there and does not verify is reported as it is rebuilt
        with pytest.warns(RuntimeWarning, match="does not verify"):
            np.testing.assert_array_equal(_matmul_on(CDevice()), EXPECTED)


def test_processes_compiling_the_same_kernel_at_once_all_succeed(fresh_cache):
    script = textwrap.dedent(
        """
        import numpy as np, limn
        from limn import Tensor
        limn.set_device("c")
        x = Tensor(np.linspace(-1, 1, 1000, dtype=np.float32))
        y = ((x * 3.0).exp() + x.sqrt().abs()).sum().item()
        print(repr(y))
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, f"a concurrent compile failed:\n{err}"
    assert len({out for out, _ in outs}) == 1, f"processes disagree: {[o for o, _ in outs]}"
    assert not list(fresh_cache.glob("*.tmp")) and not list(fresh_cache.glob("*.c")), "temp files left behind"


def test_a_missing_compiler_fails_at_set_device_with_the_reason(monkeypatch):
    monkeypatch.setenv("CC", "limn-no-such-compiler")
    limn.register_device("c_nocc", CDevice)
    with pytest.raises(limn.DeviceError, match="limn-no-such-compiler.*not on PATH"):
        limn.set_device("c_nocc")
    assert limn.current_device() == "numpy"


def test_a_compile_error_shows_command_output_and_source_lines(fresh_cache):
    dev = CDevice()
    kernel = ir(Tensor.ones((3,)) + 1).kernels[0]
    broken = "void limn_broken(float* restrict out) {\n    out[0] = undefined_name + 1;\n}\n"
    with pytest.raises(CompileError) as err:
        dev.compile_batch([(kernel, broken)], progress.silent())
    text = str(err.value)
    assert "command:" in text and "-O3" in text, text
    assert "undefined_name" in text, "the compiler's complaint is missing"
    assert "out[0] = undefined_name + 1;" in text, "the offending source line is missing"


def test_a_cc_without_openmp_gets_the_same_source_without_pragmas(tmp_path, fresh_cache):
    real_cc = subprocess.run(["sh", "-c", "command -v cc"], capture_output=True, text=True).stdout.strip()
    wrapper = tmp_path / "cc-no-openmp"
    wrapper.write_text(
        f'#!/bin/sh\nfor a in "$@"; do [ "$a" = "-fopenmp" ] && {{ echo "no openmp here" >&2; exit 1; }}; done\n'
        f'exec {real_cc} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    dev = CDevice(cc=str(wrapper), parallel_work=0)
    assert not dev.toolchain.openmp and dev.options.threads == 1
    source = dev.render(ir(Tensor.ones((64, 64)).exp()).kernels[0])
    assert "#pragma omp" not in source
    np.testing.assert_array_equal(_matmul_on(dev), EXPECTED)


def test_out_of_range_gather_indices_raise_before_any_kernel_runs():
    limn.set_device("c")
    table = Tensor(np.arange(20, dtype=np.float32).reshape(5, 4))
    dev = limn.get_device("c")
    before = dev.stats.kernels_run
    with pytest.raises(IndexError, match="index 7 is out of range for an axis of size 5"):
        table.embedding(Tensor(np.array([1, 7], dtype=np.int32))).numpy()
    with pytest.raises(IndexError, match="index -1 is out of range"):
        Tensor.zeros((5, 4)).scatter_add(0, Tensor(np.array([[-1, 0, 0, 0]], np.int32)), Tensor.ones((1, 4))).numpy()
    assert dev.stats.kernels_run == before, "a kernel ran with out-of-range indices"


@pytest.mark.parametrize(
    "make",
    [
        lambda a: a[:, ::2],  # non-contiguous
        lambda a: np.asfortranarray(a),
        lambda a: _readonly(a),
        lambda a: a.astype(">f4"),  # big-endian
    ],
    ids=["strided", "fortran", "readonly", "big-endian"],
)
def test_odd_numpy_inputs_are_copied_before_compiled_code_sees_them(make):
    limn.set_device("c")
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    arr = make(base)
    t = Tensor(arr)
    np.testing.assert_array_equal((t * 2).numpy(), np.asarray(arr, dtype=np.float32) * 2)
    handle = t.node.arg.handle
    assert handle.flags.c_contiguous and handle.flags.writeable and handle.dtype.isnative
    assert not np.shares_memory(handle, arr), "the caller's array was handed over as is"


def test_object_arrays_are_rejected():
    with pytest.raises(TypeError, match="not supported"):
        Tensor(np.array([1, "a"], dtype=object))


def test_an_allocation_too_large_for_memory_raises_memoryerror_before_kernels():
    limn.set_device("c")
    dev = limn.get_device("c")
    before = dev.stats.kernels_run
    with pytest.raises(MemoryError, match="could not allocate"):
        limn.realize(Tensor.ones((4,)).exp(), Tensor.zeros((1 << 45,)) + 1)  # 128 TiB cannot exist
    assert dev.stats.kernels_run == before


def _readonly(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.setflags(write=False)
    return a


def test_cache_dir_honours_xdg_and_limn_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("LIMN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == Path(tmp_path / "xdg" / "limn" / "c")
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == Path(tmp_path / "mine" / "c")
