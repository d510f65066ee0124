"""The cuda device: what set_device says without a GPU, and graphs against numpy on a GPU or, where there is none,
on an emulated driver.

The emulated driver (EmulatedDriver) answers cuda.bindings.driver's calls from host memory and runs each launch
through the cuda-sim runtime, so everything in backend_cuda.py but the GPU itself runs here: the pointers a
launch is given, the grid it asks for, copies, frees, the memory check and the error messages. The same tests
run on a real GPU (the `cuda` fixture's "gpu" half), skipped with "no CUDA device" where there is none.
"""

import ctypes
import gc
import re
import shutil
import types

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.runtime.device import DeviceError

backend_cuda = pytest.importorskip("limn.cuda.device")
from cuda_devices import driver_present  # noqa: E402

from limn.cuda import driver as cuda_driver  # noqa: E402
from limn.cuda import nvrtc as cuda_nvrtc  # noqa: E402
from limn.cuda.program import CudaProgram, Launch  # noqa: E402


def test_cuda_is_an_installed_device():
    assert "cuda" in limn.devices()


def test_set_device_without_a_driver_says_so():
    if driver_present():
        pytest.skip("a CUDA driver is present")
    with pytest.raises(limn.DeviceError, match="no CUDA driver.*install the NVIDIA driver"):
        limn.set_device("cuda")
    assert limn.current_device() == "numpy"


class EmulatedDriver:
    """cuda.bindings.driver as one small GPU answers it: device memory is host memory (ctypes buffers, so a
    CUdeviceptr is a real address), and cuLaunchKernel runs the function under the cuda-sim runtime in one
    block of the threads it asks for, whatever grid it is asked for (the kernels are grid-stride, so any grid
    is correct, and a matmul tile gets the block it was written for).
    `launches` records each launch's (name, grid, block); `sync_error` makes the next cuStreamSynchronize fail."""

    def __init__(self, capacity: int = 2**30, sm_count: int = 2) -> None:
        from cuda.bindings import driver

        from limn.cuda.sim.runtime import SimRuntime

        self.CUresult, self.CUdeviceptr = driver.CUresult, driver.CUdeviceptr
        self.CUdevice_attribute, self.CUfunction_attribute = driver.CUdevice_attribute, driver.CUfunction_attribute
        self.ok = driver.CUresult.CUDA_SUCCESS
        self.capacity, self.sm_count = capacity, sm_count
        self.memory: dict[int, ctypes.Array] = {}
        self.modules: list[str] = []
        self.launches: list[tuple[str, int, int]] = []
        self.sync_error = self.launch_error = None
        self.runtime = SimRuntime(max_blocks=1)

    # the probe's calls
    def cuInit(self, flags):
        return (self.ok,)

    def cuDeviceGetCount(self):
        return (self.ok, 1)

    def cuDeviceGet(self, ordinal):
        return (self.ok, ordinal)

    def cuDeviceGetAttribute(self, attr, dev):
        values = {
            self.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: 9,
            self.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: self.sm_count,
        }
        return (self.ok, values.get(attr, 0))

    def cuDeviceGetName(self, size, dev):
        return (self.ok, b"Emulated GPU\0")

    def cuDeviceTotalMem(self, dev):
        return (self.ok, self.capacity)

    def cuDriverGetVersion(self):
        return (self.ok, 13020)

    # the device's calls
    def cuDevicePrimaryCtxRetain(self, dev):
        return (self.ok, "context")

    def cuCtxSetCurrent(self, ctx):
        return (self.ok,)

    def cuStreamCreate(self, flags):
        return (self.ok, "stream")

    def cuStreamSynchronize(self, stream):
        error, self.sync_error = self.sync_error, None
        return (error or self.ok,)

    def cuMemGetInfo(self):
        used = sum(ctypes.sizeof(b) for b in self.memory.values())
        return (self.ok, self.capacity - used, self.capacity)

    def cuMemAlloc(self, nbytes):
        assert nbytes > 0, "cuMemAlloc(0) is CUDA_ERROR_INVALID_VALUE on a GPU"
        block = ctypes.create_string_buffer(nbytes)
        self.memory[ctypes.addressof(block)] = block
        return (self.ok, self.CUdeviceptr(ctypes.addressof(block)))

    def cuMemFree(self, pointer):
        if self.memory.pop(int(pointer), None) is None:
            return (self.CUresult.CUDA_ERROR_INVALID_VALUE,)  # a double free, or a pointer never allocated
        return (self.ok,)

    def _span(self, pointer, nbytes) -> None:
        address = int(pointer)
        start = max((a for a in self.memory if a <= address), default=None)
        assert start is not None and address + nbytes <= start + ctypes.sizeof(self.memory[start]), (
            f"a copy of {nbytes} bytes at 0x{address:x} leaves device memory"
        )

    def cuMemcpyHtoDAsync(self, dst, src, nbytes, stream):
        self._span(dst, nbytes)
        ctypes.memmove(int(dst), src, nbytes)
        return (self.ok,)

    def cuMemcpyDtoHAsync(self, dst, src, nbytes, stream):
        self._span(src, nbytes)
        ctypes.memmove(dst, int(src), nbytes)
        return (self.ok,)

    def cuModuleLoadData(self, image):
        self.modules.append(image.decode())  # the emulated NVRTC's image is the source itself
        return (self.ok, len(self.modules) - 1)

    def cuModuleGetFunction(self, module, name):
        source = self.modules[module]
        match = re.search(rf"void {name.decode()}\(([^)]*)\)", source)
        if match is None:
            return (self.CUresult.CUDA_ERROR_NOT_FOUND, None)
        params = tuple(p.split(" __restrict__ ")[0] for p in match.group(1).split(", "))
        program = CudaProgram(source, (Launch(name.decode(), params, cells=1),))
        return (self.ok, (self.runtime.compile(program), program))

    def cuFuncSetAttribute(self, function, attr, value):
        return (self.ok,)

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        module, program = function
        self.launches.append((program.launches[0].name, gx, bx))
        if self.launch_error is not None:
            return (self.launch_error,)
        assert (gy, gz, by, bz, extra) == (1, 1, 1, 1, 0)
        addresses = [int(a) for a in np.asarray(params)]
        pointers = [ctypes.c_uint64.from_address(a).value for a in addresses]
        self.runtime.run(module, program, pointers, block=bx)  # the block it asks for: a tile needs its own
        return (self.ok,)


@pytest.fixture
def emulated(monkeypatch):
    """The cuda device on an EmulatedDriver, selected; the driver is returned."""
    if shutil.which("g++") is None:
        pytest.skip("the emulated driver runs kernels under cuda-sim, which needs g++")
    fake = EmulatedDriver()
    monkeypatch.setattr(cuda_driver, "_driver", lambda: fake)
    monkeypatch.setattr(cuda_nvrtc, "choose_target", lambda arch: (arch, True))
    image = lambda source, name, arch, cubin, driver_version: types.SimpleNamespace(image=source.encode())  # noqa: E731
    monkeypatch.setattr(cuda_nvrtc, "cached_compile", image)
    monkeypatch.setitem(limn.runtime.device._loaded, "cuda", backend_cuda.CudaDevice())
    limn.set_device("cuda")
    yield fake
    # a draw made the emulated device a default generator; the device goes with the test, so must it (or the
    # next limn.manual_seed would reseed it on a device that can no longer load)
    limn.composed.random.rng._generators.pop("cuda", None)


# the emulated half builds its kernels with g++ under cuda-sim: it runs in nox -s "tests(cuda-sim)" (CI runs it)
@pytest.fixture(params=["gpu", pytest.param("emulated", marks=pytest.mark.cuda)])
def cuda(request):
    """Each test on a real GPU (skipped without one) and on the emulated driver."""
    if request.param == "emulated":
        return request.getfixturevalue("emulated")
    try:
        limn.set_device("cuda")
    except DeviceError as e:
        pytest.skip(f"no CUDA device: {e}")
    return None


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_elementwise_graph_matches_numpy(cuda):
    a, b = rand(3, 5), rand(3, 5, seed=1)
    got = ((Tensor(a) * Tensor(b) + 1.0).relu() - Tensor(b).exp()).numpy()
    np.testing.assert_allclose(got, np.maximum(a * b + 1, 0) - np.exp(b), rtol=1e-5, atol=1e-6)


def test_matmul_matches_numpy(cuda):
    a, b = rand(17, 33), rand(33, 9, seed=1)
    np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_scatter_with_every_index_on_one_row(cuda):
    base, updates = rand(4, 6), rand(50, 6, seed=1)
    idx = np.full((50, 6), 2, dtype=np.int32)
    got = Tensor(base).scatter_add(0, Tensor(idx), Tensor(updates)).numpy()
    want = base.copy()
    want[2] += updates.sum(0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_grid_stride_past_one_launch(cuda):
    n = 10_000_000
    x = np.arange(n, dtype=np.float32)
    got = (Tensor(x) * 2.0 + 1.0).numpy()
    np.testing.assert_array_equal(got, x * 2 + 1)
    if cuda is not None:  # the grid asked for is capped, so each thread walks many cells
        (_, grid, block) = cuda.launches[-1]
        assert block == backend_cuda.BLOCK and grid == backend_cuda.BLOCKS_PER_SM * cuda.sm_count < n // block


def test_allocation_past_the_gpu_memory_raises_memory_error(cuda):
    dev = limn.runtime.device.get_device("cuda")
    cells = dev.gpu.total_memory // 4 + 1
    with pytest.raises(MemoryError, match=rf"cannot allocate {cells * 4} bytes .* bytes .* free"):
        dev.alloc(limn.float32, (cells,))


def test_numpy_tensor_uploads_and_results_read_back(cuda):
    a = rand(4, 3)
    host = Tensor(a, device="numpy")
    made_here = Tensor(np.ones((4, 3), np.float32))  # made under cuda: its bytes live on the device
    assert made_here.device == "cuda" and host.device == "numpy"
    got = host + made_here
    np.testing.assert_allclose(got.numpy(), a + 1, rtol=1e-6)
    np.testing.assert_allclose(made_here.to("numpy").numpy(), np.ones((4, 3)))


def test_assign_to_an_uploaded_host_tensor_is_written_back(cuda):
    host = Tensor(rand(5), device="numpy")
    want = host.numpy() * 3
    host.assign(host * 3)
    limn.realize(host)
    np.testing.assert_allclose(host.numpy(), want, rtol=1e-6)


def test_empty_tensors_need_no_memory(cuda):
    dev = limn.runtime.device.get_device("cuda")
    empty = dev.alloc(limn.float32, (0, 3))
    assert empty.pointer == 0 and empty.nbytes == 0
    dev.copyin(empty, np.zeros((0, 3), np.float32))
    assert dev.copyout(empty, limn.float32, (0, 3)).shape == (0, 3)
    dev.free(empty)
    assert Tensor(np.zeros((2, 0), np.float32)).sum(1).numpy().tolist() == [0.0, 0.0]


def _train(steps: int) -> list[float]:
    """An MLP's losses over a few AdamW steps on the current device, from fixed weights and data."""
    from limn import nn, optim

    model = [nn.Linear(2, 8), nn.Linear(8, 1)]
    for k, p in enumerate(nn.parameters(model)):
        p.assign(Tensor(rand(*p.shape, seed=k) * 0.5))
        p.realize()
    opt = optim.AdamW(nn.named_parameters(model), lr=1e-2)
    x, y = rand(16, 2, seed=10), rand(16, 1, seed=11)
    losses = []
    for _ in range(steps):
        loss = ((model[1](model[0](Tensor(x)).tanh()) - Tensor(y)) ** 2).mean()
        loss.backward()
        opt.step(loss)
        losses.append(float(loss.numpy()))
    return losses


def test_training_loop_matches_numpy(cuda):
    got = _train(3)
    limn.set_device("numpy")
    np.testing.assert_allclose(got, _train(3), rtol=1e-5)


@pytest.mark.cuda
def test_buffers_are_freed_once_when_tensors_go(emulated):
    t = Tensor(rand(64, 64)) * 2
    t.numpy()
    assert emulated.memory
    del t
    gc.collect()
    limn.runtime.device.get_device("cuda").plans.clear()  # scratch buffers belong to the plans
    gc.collect()
    assert not emulated.memory


@pytest.mark.cuda
def test_launch_error_names_the_kernel(emulated):
    emulated.launch_error = emulated.CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    with pytest.raises(DeviceError, match=r"cuLaunchKernel of kernel \w+ \(limn_\w+_n0.*LAUNCH_OUT_OF_RESOURCES"):
        (Tensor(rand(8)) + 1).numpy()


@pytest.mark.cuda
def test_fault_found_at_synchronize_names_the_kernels_and_says_to_restart(emulated):
    x = Tensor(rand(8))  # uploaded (and waited for) before the fault is armed
    emulated.sync_error = emulated.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(DeviceError, match=r"after kernel \w+ \(limn_\w+\).*ILLEGAL_ADDRESS.*restart the Python"):
        (x - 1).numpy()


@pytest.mark.cuda
def test_programs_compile_once_per_plan(emulated):
    x = Tensor(rand(6, 7))
    (x.softmax(1) + x.sum(0)).numpy()
    assert len(emulated.modules) == 1  # one NVRTC program and one module for the plan's kernels


def _gpt_losses(steps: int) -> list[float]:
    """A two-layer byte GPT's losses over AdamW steps on the current device, from seeded weights and data:
    embeddings, pre-LayerNorm blocks, fused causal attention, a GELU MLP, tied nothing, cross entropy."""
    from limn import nn, optim

    limn.manual_seed(0)
    vocab, d, heads, t, batch = 64, 32, 4, 16, 4
    emb, pos, ln_f, head = nn.Embedding(vocab, d), nn.Embedding(t, d), nn.LayerNorm(d), nn.Linear(d, vocab)
    attention = lambda: [nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)]  # noqa: E731
    mlp = lambda: [nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)]  # noqa: E731
    blocks = [attention() + mlp() for _ in range(2)]
    params = [emb, pos, ln_f, head, *(m for b in blocks for m in b)]
    for k, p in enumerate(nn.parameters(params)):  # the same start on every device, drawn by numpy
        p.assign(Tensor((rand(*p.shape, seed=100 + k) * 0.2).astype(np.float32)))
        p.realize()
    opt = optim.AdamW(nn.named_parameters(params), lr=3e-3)
    data = np.random.default_rng(7).integers(0, vocab, (steps, batch, t + 1)).astype(np.int32)
    losses = []
    for step in range(steps):
        idx, target = Tensor(data[step, :, :-1]), Tensor(data[step, :, 1:])
        x = emb(idx) + pos(Tensor(np.arange(t, dtype=np.int32)))  # (B, T, C)
        for ln1, qkv, proj, ln2, fc, out in blocks:
            q, k, v = qkv(ln1(x)).reshape(batch, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)  # (B, nh, T, hs)
            y = Tensor.scaled_dot_product_attention(q, k, v, causal=True).permute(0, 2, 1, 3).reshape(batch, t, d)
            x = x + proj(y)
            x = x + out(fc(ln2(x)).gelu())
        loss = head(ln_f(x)).reshape(batch * t, vocab).cross_entropy(target.reshape(batch * t))
        loss.backward()
        opt.step(loss)
        opt.zero_grad()
        losses.append(float(loss.numpy()))
    return losses


def test_a_gpt_training_loop_on_the_gpu_follows_the_c_device():
    """The GPU's losses over 10 steps against the c device's (numpy's where limn-c is not installed)."""
    try:
        limn.set_device("cuda")
    except DeviceError as e:
        pytest.skip(f"no CUDA device: {e}")
    got = _gpt_losses(10)
    reference = "c" if "c" in limn.devices() else "numpy"
    limn.set_device(reference)
    want = _gpt_losses(10)
    limn.set_device("numpy")
    np.testing.assert_allclose(got, want, rtol=1e-4, err_msg=f"cuda's GPT losses against {reference}'s")
