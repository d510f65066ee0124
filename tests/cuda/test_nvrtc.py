"""NVRTC compiles hand-written CUDA C to CUBIN and PTX, reports ptxas's resources, shows compile errors with
their source lines, picks a target per GPU, and caches programs on disk. No GPU needed: NVRTC runs on the CPU."""

import os

import pytest

from limn.runtime.device import DeviceError

cuda_nvrtc = pytest.importorskip("limn.cuda.nvrtc")
try:
    cuda_nvrtc.nvrtc_version()
except DeviceError:
    pytest.skip("needs NVRTC (pip install limn-cuda[nvrtc])", allow_module_level=True)

# NVRTC has no <stdint.h>: a program spells its own fixed-width ints.
ELEMENTWISE = """\
typedef long long int64_t;
extern "C" __global__ void axpy(const float* x, const float* y, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    out[i] = 2.0f * x[i] + y[i];
  }
}
"""

TILE = 256
SHARED = f"""\
extern "C" __global__ void reverse_block(const float* x, float* out) {{
  __shared__ float tile[{TILE}];
  int i = blockIdx.x * {TILE} + threadIdx.x;
  tile[threadIdx.x] = x[i];
  __syncthreads();
  out[i] = tile[{TILE - 1} - threadIdx.x];
}}
"""


@pytest.mark.parametrize("arch", [80, 90])
@pytest.mark.parametrize("source, name", [(ELEMENTWISE, "axpy"), (SHARED, "reverse_block")])
def test_kernels_compile_to_cubin_with_a_resource_report(source, name, arch):
    compiled = cuda_nvrtc.compile(source, "kernel.cu", arch, cubin=True)
    assert compiled.cubin and compiled.arch == arch
    assert compiled.image[:4] == b"\x7fELF", "a CUBIN is an ELF image"
    report = compiled.resources[name]
    assert report.entry and report.registers > 0
    assert (report.spill_store_bytes, report.spill_load_bytes) == (0, 0)
    assert report.shared_bytes == (TILE * 4 if name == "reverse_block" else 0)


def test_kernels_compile_to_ptx_for_a_virtual_arch():
    compiled = cuda_nvrtc.compile(ELEMENTWISE + SHARED, "kernel.cu", 80, cubin=False)
    ptx = compiled.image.decode()
    assert not compiled.cubin and compiled.resources == {}
    assert compiled.image.endswith(b"\n\0") and compiled.image.count(0) == 1, "the driver reads PTX as a C string"
    assert ".target sm_80" in ptx and ".entry axpy" in ptx and ".entry reverse_block" in ptx


def test_no_contraction_of_multiply_add_unless_written():
    # --fmad=false: a * b + c stays a multiply and an add, each rounded, as the IR says; fmaf is one rounding
    source = """\
extern "C" __global__ void k(const float* a, const float* b, float* out) {
  out[0] = a[0] * b[0] + a[1];
  out[1] = fmaf(a[0], b[0], a[1]);
}
"""
    ptx = cuda_nvrtc.compile(source, "kernel.cu", 80, cubin=False).image.decode()
    assert ptx.count("mul.rn.f32") == 1 and ptx.count("add.rn.f32") == 1 and ptx.count("fma.rn.f32") == 1


def test_report_names_device_functions_apart_from_entries():
    source = """\
__device__ __noinline__ float square(float v) { return v * v; }
extern "C" __global__ void k(float* x) { x[0] = square(x[1]); }
"""
    report = cuda_nvrtc.compile(source, "kernel.cu", 90, cubin=True).resources
    assert report["k"].entry and report["k"].registers > 0
    helpers = [r for r in report.values() if not r.entry]
    assert len(helpers) == 1 and "square" in helpers[0].name


def test_syntax_error_shows_the_log_and_the_source_line():
    source = ELEMENTWISE.replace("out[i] = 2.0f * x[i] + y[i];", "out[i] = 2.0f * x[i] + y[i]")
    with pytest.raises(cuda_nvrtc.NvrtcError) as e:
        cuda_nvrtc.compile(source, "kernel.cu", 80, cubin=True)
    message = str(e.value)
    assert 'kernel.cu(5): error: expected a ";"' in message, "NVRTC's log"
    # NVRTC names the line where it stopped (the brace after the missing semicolon), shown with its neighbours
    assert ">    5 |   }" in message, "the line the log points at, marked"
    assert "     4 |     out[i] = 2.0f * x[i] + y[i]\n" in message, "the lines around it"
    assert "--gpu-architecture=sm_80" in message


def test_error_under_a_line_marker_finds_its_cuda_line():
    source = 'extern "C" __global__ void k(float* x) {\n#line 40 "nest.ir"\n  x[0] = undefined_value;\n}\n'
    with pytest.raises(cuda_nvrtc.NvrtcError) as e:
        cuda_nvrtc.compile(source, "kernel.cu", 80, cubin=False)
    message = str(e.value)
    assert "nest.ir(40): error" in message
    assert ">    3 |   x[0] = undefined_value;" in message


def test_an_arch_nvrtc_lacks_is_refused_naming_the_ones_it_has():
    with pytest.raises(ValueError, match=r"NVRTC \d+\.\d+ cannot compile for arch 12: it supports \[75"):
        cuda_nvrtc.compile(ELEMENTWISE, "kernel.cu", 12, cubin=True)


def test_choose_target_prefers_a_cubin_for_the_gpus_own_arch():
    archs = cuda_nvrtc.supported_archs()
    assert cuda_nvrtc.choose_target(archs[0]) == (archs[0], True)
    assert cuda_nvrtc.choose_target(archs[-1]) == (archs[-1], True)


def test_choose_target_gives_ptx_for_a_gpu_newer_than_nvrtc():
    newest = cuda_nvrtc.supported_archs()[-1]
    assert cuda_nvrtc.choose_target(newest + 50) == (newest, False)


def test_choose_target_gives_ptx_for_an_arch_between_supported_ones(monkeypatch):
    monkeypatch.setattr(cuda_nvrtc, "supported_archs", lambda: [80, 90])
    assert cuda_nvrtc.choose_target(86) == (80, False)


def test_choose_target_refuses_a_gpu_older_than_nvrtc_supports():
    oldest = cuda_nvrtc.supported_archs()[0]
    with pytest.raises(DeviceError, match=f"GPU is sm_{oldest - 5}.*install"):
        cuda_nvrtc.choose_target(oldest - 5)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path))
    return tmp_path / "cuda"


def _count_compiles(monkeypatch) -> list[int]:
    calls = []
    real = cuda_nvrtc.compile

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cuda_nvrtc, "compile", counted)
    return calls


def test_cache_hits_on_the_second_compile(cache, monkeypatch):
    calls = _count_compiles(monkeypatch)
    first = cuda_nvrtc.cached_compile(SHARED, "kernel.cu", 90, True, driver_version=13020)
    second = cuda_nvrtc.cached_compile(SHARED, "kernel.cu", 90, True, driver_version=13020)
    assert len(calls) == 1
    assert second == first, "image, log and resource report all come back from disk"
    assert [p.suffix for p in cache.iterdir()] == [".bin"], "no temp file is left behind"


def test_cache_key_holds_the_driver_version_and_target(cache, monkeypatch):
    calls = _count_compiles(monkeypatch)
    cuda_nvrtc.cached_compile(SHARED, "kernel.cu", 90, True, driver_version=13020)
    cuda_nvrtc.cached_compile(SHARED, "kernel.cu", 90, True, driver_version=12080)
    cuda_nvrtc.cached_compile(SHARED, "kernel.cu", 90, False, driver_version=13020)
    assert len(calls) == 3


@pytest.mark.parametrize("damage", ["flip_a_byte", "truncate", "directory"])
def test_a_corrupt_entry_is_a_miss(cache, monkeypatch, damage):
    first = cuda_nvrtc.cached_compile(ELEMENTWISE, "kernel.cu", 80, True, driver_version=13020)
    (entry,) = cache.iterdir()
    data = entry.read_bytes()
    entry.unlink()
    if damage == "flip_a_byte":
        entry.write_bytes(data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:])
    elif damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    else:
        entry.mkdir()
    calls = _count_compiles(monkeypatch)
    if damage == "directory":
        again = cuda_nvrtc.cached_compile(ELEMENTWISE, "kernel.cu", 80, True, driver_version=13020)
    else:  # an entry that is there and does not verify is reported as it is compiled again
        with pytest.warns(cuda_nvrtc.KernelCacheWarning, match="does not verify"):
            again = cuda_nvrtc.cached_compile(ELEMENTWISE, "kernel.cu", 80, True, driver_version=13020)
    cuda_nvrtc.cached_compile(ELEMENTWISE, "kernel.cu", 80, True, driver_version=13020)
    assert len(calls) == 1, "compiled once more and stored again (a directory in the slot is removed: it heals)"
    assert entry.is_file()
    assert (again.image, again.resources) == (first.image, first.resources)  # the log holds ptxas's timings


def test_another_programs_entry_in_a_slot_is_rebuilt_with_a_warning(cache, monkeypatch):
    """An entry verifies against the slot it is read for: another program's whole, valid entry copied there
    is not loaded (it would run the other kernel); it is compiled again, with one warning, and replaced."""
    mine = cuda_nvrtc.cached_compile(ELEMENTWISE, "kernel.cu", 80, True, driver_version=13020)
    (my_entry,) = cache.iterdir()
    cuda_nvrtc.cached_compile(SHARED, "kernel.cu", 80, True, driver_version=13020)
    (other,) = [p for p in cache.iterdir() if p != my_entry]
    os.replace(other, my_entry)
    calls = _count_compiles(monkeypatch)
    with pytest.warns(cuda_nvrtc.KernelCacheWarning, match="does not verify"):
        again = cuda_nvrtc.cached_compile(ELEMENTWISE, "kernel.cu", 80, True, driver_version=13020)
    assert len(calls) == 1 and (again.image, again.resources) == (mine.image, mine.resources)
    assert cuda_nvrtc.cached_compile(ELEMENTWISE, "kernel.cu", 80, True, driver_version=13020).image == mine.image
    assert len(calls) == 1, "the rebuilt entry is stored and read back"


def test_nvrtc_that_cannot_load_names_what_to_install(monkeypatch):
    import sys

    import cuda.bindings

    monkeypatch.delattr(cuda.bindings, "nvrtc")
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)  # as if the wheel were absent
    cuda_nvrtc._nvrtc.cache_clear()
    try:
        with pytest.raises(DeviceError, match=r"cannot load NVRTC.*pip install 'limn-cuda\[nvrtc\]'"):
            cuda_nvrtc.nvrtc_version()
    finally:
        monkeypatch.undo()
        cuda_nvrtc._nvrtc.cache_clear()
    assert cuda_nvrtc.nvrtc_version() >= (12, 0)


def test_reading_an_empty_log_leaves_pythons_cached_bytes_alone():
    """NVRTC writes its log into the buffer it is given; an empty log is one NUL. Handed `b" " * 1`, which is
    CPython's cached one-byte object, it turned every b" " in the process into b"\\0" (a safetensors header's
    padding among them): the buffers are bytearrays."""
    source = 'extern "C" __global__ void k(float* x) { x[0] = 1; }'
    compiled = cuda_nvrtc.compile(source, "k.cu", 80, False)  # PTX: no ptxas report, so an empty log
    space = b"x "[1:]  # a one-byte slice is CPython's cached object for that byte
    assert compiled.log == "" and space[0] == 32, f"the cached b' ' now holds {space!r}"
