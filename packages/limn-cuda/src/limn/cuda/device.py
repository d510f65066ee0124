"""The cuda device: limn's CUDA C compiled by NVRTC and launched through the driver API on an NVIDIA GPU.

Takes the kernels of a plan; renders each as a CudaProgram (limn.cuda.source), compiles the plan's programs as one
NVRTC translation unit (limn.cuda.nvrtc, through its disk cache), loads the image with cuModuleLoadData and runs
each Launch in order on one stream. Buffers are device memory (CudaBuffer: a CUdeviceptr and what it holds), so
the device is not `host`: jit's executor uploads host tensors handed to it, reads index checks and results back
through copyout, and every run ends by waiting for the stream, so a fault on the GPU is reported by the realize
that caused it, naming its kernels. Assigns to an uploaded host tensor are written back to its host bytes.
Every driver call's CUresult is checked (`_check`). The executor, plan cache and assign transaction are
limn-compiler's (jit.CompiledDevice). Pipeline: IR -> CUDA C (cuda/source.py) -> NVRTC -> **driver -> GPU**.
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from limn import dtypes
from limn.compiler import progress, row_pieces
from limn.compiler.ir import KernelIR
from limn.compiler.jit import CompiledDevice
from limn.compiler.schedule import Schedule
from limn.cuda import attention, nvrtc
from limn.cuda import driver as cuda_driver
from limn.cuda.matmul import GPU_TILING, Tiling
from limn.cuda.prelude import PRELUDE
from limn.cuda.program import CudaProgram, Launch, RendersPrograms, merge
from limn.cuda.source import CudaRenderer
from limn.dtypes import DType
from limn.graph.ops import Shape
from limn.runtime.device import Buffer, DeviceError

BLOCK = 256  # threads per block for a launch that accepts any block size
BLOCKS_PER_SM = 32  # the grid cap, per multiprocessor: enough blocks to fill the GPU, the rest is grid-stride
STATIC_SHARED_LIMIT = 48 * 1024  # dynamic shared memory past this needs the function's opt-in attribute

# Errors after which the context is unusable: every later call in this process fails with the same error.
STICKY = frozenset(
    {
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "CUDA_ERROR_MISALIGNED_ADDRESS",
        "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        "CUDA_ERROR_INVALID_PC",
        "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "CUDA_ERROR_LAUNCH_FAILED",
        "CUDA_ERROR_LAUNCH_TIMEOUT",
        "CUDA_ERROR_ASSERT",
        "CUDA_ERROR_ECC_UNCORRECTABLE",
    }
)
RESTART = "the CUDA context is unusable after this error: restart the Python process to use the GPU again"


@dataclass(eq=False)
class CudaBuffer:
    """One allocation in GPU memory. `pointer` is 0 for a 0-byte buffer, which owns no memory and is never
    handed to a copy. The memory is freed by `release()` (the device's free hook) or when the handle is
    garbage collected, whichever comes first."""

    pointer: int  # the CUdeviceptr's address
    nbytes: int
    dtype: DType
    shape: Shape
    _finalizer: Any = None

    def release(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # a weakref.finalize runs at most once

    def __repr__(self) -> str:
        return f"CudaBuffer(0x{self.pointer:x}, {self.dtype.name}{list(self.shape)}, {self.nbytes} bytes)"


@dataclass(frozen=True)
class Loaded:
    """A kernel's program on the GPU: one CUfunction per launch, in order, and the module holding them."""

    program: CudaProgram
    functions: tuple[Any, ...]
    module: Any


class CudaDevice(RendersPrograms, CompiledDevice):
    """Runs kernels on an NVIDIA GPU through NVRTC and the driver API (see the module docstring)."""

    name = "cuda"
    host = False
    custom_kernels = attention.NAMES  # fused attention, fixed CUDA C (attention.py)
    row_pieces = True  # a new row count runs on kernels built for others (limn.compiler.row_pieces)

    def __init__(self, ordinal: int = 0, tiling: Tiling | None = GPU_TILING) -> None:
        self.gpu = cuda_driver.probe(ordinal)  # DeviceError saying why: no driver, no device, ...
        self.target = nvrtc.choose_target(self.gpu.arch)  # DeviceError when NVRTC cannot load
        super().__init__()
        self.driver = cuda_driver._driver()
        d = self.driver
        self.device = _check(d.cuDeviceGet(ordinal), "cuDeviceGet")
        attr = d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
        self.sm_count = int(_check(d.cuDeviceGetAttribute(attr, self.device), "cuDeviceGetAttribute"))
        self.context = _check(d.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        self._threads = threading.local()  # whether the context is current in this thread
        self._enter()
        self.stream = _check(d.cuStreamCreate(0), "cuStreamCreate")
        self.renderer = CudaRenderer(tiling=tiling)  # tiling: the matmul tiles' widths (None: no tiles)
        self._pending: list[str] = []  # kernels launched since the stream was last waited for
        self._attention: Loaded | None = None  # the attention kernels' module, built on first use
        self._attention_functions: dict[str, Any] = {}  # their CUfunctions, by name, as they are first run
        self._attention_meta: dict[tuple[int, ...], CudaBuffer] = {}  # META by its values, written once each

    def _enter(self) -> None:
        """Makes the primary context current in the calling thread (once per thread): the driver's
        context is per thread, and jit may run plans, and the garbage collector free buffers, from any."""
        if not getattr(self._threads, "current", False):
            _check(self.driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
            self._threads.current = True

    # ---- compiling ----

    def compile_batch(self, items: list[tuple[KernelIR, str]], line: progress.Progress) -> list[Loaded]:
        """One NVRTC program and one module for all of a plan's kernels (NVRTC starts once per plan, and the
        prelude is compiled once). An NvrtcError propagates with NVRTC's log and the lines it names."""
        programs = self.rendered_programs(items)
        source = merge(programs, PRELUDE).source
        arch, cubin = self.target
        image = nvrtc.cached_compile(source, "limn_plan.cu", arch, cubin, self.gpu.driver_version).image
        line.advance(len(programs))  # one program: all are built at once
        self._enter()
        module = _check(self.driver.cuModuleLoadData(image), "cuModuleLoadData")
        out = []
        for program in programs:
            functions = tuple(self._function(module, launch) for launch in program.launches)
            out.append(Loaded(program, functions, module))
        return out

    def _function(self, module: Any, launch: Launch) -> Any:
        d = self.driver
        function = _check(d.cuModuleGetFunction(module, launch.name.encode()), f"cuModuleGetFunction({launch.name})")
        if launch.shared_bytes > STATIC_SHARED_LIMIT:
            attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(d.cuFuncSetAttribute(function, attr, launch.shared_bytes), f"cuFuncSetAttribute({launch.name})")
        return function

    # ---- running ----

    def join_pieces(self, cut: row_pieces.Split, programs: list[Loaded]) -> list[tuple[Loaded, list[int]]]:
        """A kernel's row pieces (limn.compiler.row_pieces): each piece's program and its buffers' byte offsets."""
        return [(programs[i], offsets) for i, offsets in cut.byte_calls()]

    def launch(self, program: Loaded | list, kernel: KernelIR, handles: list[CudaBuffer]) -> None:
        """Each of the program's launches in order on the stream, its parameters the device pointers of
        all the kernel's buffers (inputs, then outputs); a launch with no cells is skipped. A kernel run as
        row pieces launches each piece's program on its pointers moved on by the piece's offsets."""
        pointers = [h.pointer for h in handles]
        for loaded, offsets in program if isinstance(program, list) else [(program, [0] * len(handles))]:
            self._launch(loaded, kernel, [p + o for p, o in zip(pointers, offsets)])

    def _launch(self, program: Loaded, kernel: KernelIR, addresses: list[int]) -> None:
        self._enter()
        pointers = np.array(addresses, dtype=np.uint64)
        # cuLaunchKernel takes an array of addresses, each of one parameter's value: here, of one pointer
        params = np.array([pointers.ctypes.data + 8 * i for i in range(len(addresses))], dtype=np.uint64)
        for launch, function in zip(program.program.launches, program.functions):
            if len(launch.params) != len(addresses):
                raise DeviceError(
                    f"kernel {kernel.name} ({launch.name}) takes {len(launch.params)} buffers and was given "
                    f"{len(addresses)}: the renderer and the executor disagree on the kernel's buffers"
                )
            if launch.cells == 0:
                continue
            block = launch.block or BLOCK
            grid = min(math.ceil(launch.cells / block), BLOCKS_PER_SM * self.sm_count)
            result = self.driver.cuLaunchKernel(
                function, grid, 1, 1, block, 1, 1, launch.shared_bytes, self.stream, params, 0
            )
            what = f"cuLaunchKernel of kernel {kernel.name} ({launch.name}, grid {grid}, block {block})"
            if self._pending:  # a sticky error from one of these can surface at this launch instead
                what += f", with {', '.join(self._pending)} launched before it and not yet waited for"
            _check(result, what)
            self._pending.append(f"{kernel.name} ({launch.name})")

    def run_custom(self, kernel: KernelIR, handles: list[CudaBuffer]) -> None:
        """A CUSTOM kernel: fused attention's CUDA C (attention.py), launched through launch() with the
        kernel's buffers, an empty buffer (a null pointer) in the mask's slot when there is none, and META:
        one buffer per set of shapes and params, uploaded when first seen and never rewritten, so a launch
        waits for no copy after the first of its shape."""
        if kernel.custom not in attention.NAMES:
            super().run_custom(kernel, handles)
        module = self._attention_module()
        launch = attention.launch(kernel, attention.GPU)
        function = self._attention_functions.get(launch.name)
        if function is None:
            function = self._attention_functions[launch.name] = self._function(module.module, launch)
        values = attention.meta(kernel)
        meta = self._attention_meta.get(tuple(values.tolist()))
        if meta is None:
            meta = self._attention_meta[tuple(values.tolist())] = self.alloc(dtypes.int64, values.shape)
            self.copyin(meta, values)
        absent = CudaBuffer(0, 0, dtypes.bool_, (0,))
        args = attention.arguments(kernel, handles, absent, meta)
        program = CudaProgram(module.program.source, (launch,))
        self.launch(Loaded(program, (function,), module.module), kernel, args)

    def _attention_module(self) -> Loaded:
        """The attention kernels at every width, one NVRTC program and module, compiled on first use (through
        the disk cache); their functions are looked up as each is first run."""
        if self._attention is None:
            arch, cubin = self.target
            program = attention.program(attention.GPU)
            source = PRELUDE + program.source
            image = nvrtc.cached_compile(source, "limn_sdpa.cu", arch, cubin, self.gpu.driver_version).image
            self._enter()
            module = _check(self.driver.cuModuleLoadData(image), "cuModuleLoadData")
            self._attention = Loaded(CudaProgram(source, program.launches), (), module)
        return self._attention

    def synchronize(self) -> None:
        """Waits for the stream. A fault in a kernel surfaces here: DeviceError naming the kernels launched
        since the last wait, and saying when the context must be restarted."""
        self._enter()
        pending, self._pending = self._pending, []
        what = "cuStreamSynchronize"
        if pending:
            what += f" after kernel{'s' if len(pending) > 1 else ''} {', '.join(pending)}"
        _check(self.driver.cuStreamSynchronize(self.stream), what)

    def _results(self, sched: Schedule, leaves: list[Buffer], handles: list[Any]) -> list[Buffer]:
        """jit's results, once the stream has finished this run (so its faults are reported here), and each
        host tensor an ASSIGN wrote, uploaded for this run, copied back to its host bytes."""
        self.synchronize()
        written = {slot for kernel in sched.kernels for slot in kernel.outputs}
        leaf_of = dict(zip(sched.inputs, leaves))
        for sink in sched.sinks:
            leaf = leaf_of.get(sink.slot)
            if leaf is not None and leaf.device != self.name and sink.slot in written:
                np.copyto(leaf.handle, self.copyout(handles[sink.slot], leaf.dtype, leaf.shape))
        return super()._results(sched, leaves, handles)

    # ---- memory ----

    def alloc(self, dtype: DType, shape: Shape) -> CudaBuffer:
        """Device memory for a dtype and shape; MemoryError naming the size and what is free when the GPU
        has not that much left. A 0-byte buffer gets no memory (pointer 0)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes == 0:
            return CudaBuffer(0, 0, dtype, tuple(shape))
        self._enter()
        free, total = _check(self.driver.cuMemGetInfo(), "cuMemGetInfo")
        if nbytes > free:
            raise MemoryError(_out_of_memory(nbytes, int(free), int(total), dtype, shape, self.gpu.name))
        err, pointer = self.driver.cuMemAlloc(nbytes)
        if err.name == "CUDA_ERROR_OUT_OF_MEMORY":  # free memory is an estimate: the allocator has the last word
            raise MemoryError(_out_of_memory(nbytes, int(free), int(total), dtype, shape, self.gpu.name))
        pointer = int(_check((err, pointer), f"cuMemAlloc({nbytes})"))
        handle = CudaBuffer(pointer, nbytes, dtype, tuple(shape))
        handle._finalizer = weakref.finalize(handle, self._free_pointer, pointer)
        return handle

    def _free_pointer(self, pointer: int) -> None:
        self._enter()
        result = self.driver.cuMemFree(self.driver.CUdeviceptr(pointer))
        if result[0].name in STICKY:
            return  # the context went with everything in it, and the fault was reported when it was found
        _check(result, "cuMemFree")

    def free(self, handle: CudaBuffer) -> None:
        handle.release()

    def copyin(self, handle: CudaBuffer, array: np.ndarray) -> None:
        """Writes a host array's bytes (its dtype and size must match the buffer's) into the buffer."""
        data = np.ascontiguousarray(array)
        if data.nbytes != handle.nbytes:
            raise ValueError(
                f"copyin: a {data.dtype}{list(data.shape)} array holds {data.nbytes} bytes and the "
                f"{handle.dtype.name}{list(handle.shape)} buffer {handle.nbytes}; they must be the same size"
            )
        if handle.nbytes == 0:
            return
        self._enter()
        dst = self.driver.CUdeviceptr(handle.pointer)
        _check(self.driver.cuMemcpyHtoDAsync(dst, data.ctypes.data, data.nbytes, self.stream), "cuMemcpyHtoDAsync")
        self.synchronize()  # `data` may be a temporary: the copy must be done before it goes

    def copyout(self, handle: CudaBuffer, dtype: DType, shape: Shape) -> np.ndarray:
        """The buffer's first prod(shape) cells as a fresh host array of `dtype` and `shape`."""
        out = np.empty(shape, dtype=dtype.np)
        if out.nbytes > handle.nbytes:
            raise ValueError(
                f"copyout: {dtype.name}{list(shape)} needs {out.nbytes} bytes and the buffer holds {handle.nbytes}"
            )
        if out.nbytes == 0:
            return out
        self._enter()
        src = self.driver.CUdeviceptr(handle.pointer)
        _check(self.driver.cuMemcpyDtoHAsync(out.ctypes.data, src, out.nbytes, self.stream), "cuMemcpyDtoHAsync")
        self.synchronize()
        return out


def _check(result: tuple, what: str) -> Any:
    """The value(s) of a cuda.bindings call, whose result is (CUresult, values...), or DeviceError naming
    the call and the error, and saying the process must restart when the error is sticky."""
    err, *values = result
    if err.name != "CUDA_SUCCESS":
        message = f"device 'cuda': {what} failed with {err.name}"
        try:
            from cuda.bindings import driver

            described, text = driver.cuGetErrorString(err)
            if described == driver.CUresult.CUDA_SUCCESS and text:
                message += f" ({text.decode(errors='replace')})"
        except Exception:  # the description is a courtesy; the error's name is already in the message
            pass
        if err.name in STICKY:
            message += f"; {RESTART}"
        raise DeviceError(message)
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _out_of_memory(nbytes: int, free: int, total: int, dtype: DType, shape: Shape, gpu: str) -> str:
    return (
        f"device 'cuda' cannot allocate {nbytes} bytes ({nbytes / 2**30:.2f} GiB) for a {dtype.name}{list(shape)} "
        f"buffer: the {gpu} has {free} bytes ({free / 2**30:.2f} GiB) free of {total}; free tensors you no "
        "longer need, or use a smaller batch"
    )
