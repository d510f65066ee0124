"""The cuda and cuda-sim devices' fused attention kernels: sdpa, sdpa_bwd_q and sdpa_bwd_kv as fixed CUDA C
(limn.composed.functional.sdpa holds the layout and the numpy references they are diffed against), compiled once per
device.

A block owns `block` rows, one per thread: query rows in the forward and dQ passes, key rows in the dK, dV pass.
It streams the other side past them in tiles of `tile` rows (keys, values; or queries, dO) staged through
static shared memory `chunk` columns at a time, so d and d_v may be any size: a row's totals over its output
columns are kept in registers `chunk` columns per pass, the scores recomputed on each pass. Every total is one
thread's and folds in the order the tiles fix, with no atomics, so the same input gives the same bits twice.
The shapes (n, t_q, t_k, d, d_v) and params are runtime values, read from a small int64 buffer (META) the
kernel is handed last, since both devices launch with buffers only: one compiled program per device serves
every shape. float16 and bfloat16 are read through the prelude's conversions, computed in float32 and rounded
once when stored, in the kernel (on the cuda device the buffers are GPU memory, so no host widening is possible).
Pipeline: graph (CUSTOM nodes) -> IR (a CUSTOM kernel) -> **this CUDA C** -> NVRTC / the shim (run_custom).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from limn import dtypes
from limn.compiler.ir import KernelIR
from limn.compiler.squares_c import squares_c
from limn.cuda.program import CudaProgram, Launch
from limn.dtypes import DType
from limn.runtime.device import DeviceError

NAMES = frozenset({"sdpa", "sdpa_bwd_q", "sdpa_bwd_kv"})


def kernel_text(name: str) -> str:
    """A CUDA C file of limn/cuda/kernels/, shipped in the wheel beside this module."""
    return resources.files("limn.cuda").joinpath("kernels", name).read_text(encoding="utf-8")


STATIC_SHARED_LIMIT = 48 * 1024  # a block's static __shared__ memory may not pass this
DROP_BYTES = 24  # struct limn_sdpa_drop: dropout's p, seed and counter, one copy a block

# the storage dtype -> (the kernels' suffix, its C storage type, its compute type, L's dtype)
WIDTHS: dict[DType, tuple[str, str, str, DType]] = {
    dtypes.float32: ("f32", "float", "float", dtypes.float32),
    dtypes.float64: ("f64", "double", "double", dtypes.float64),
    dtypes.float16: ("f16", "uint16_t", "float", dtypes.float32),
    dtypes.bfloat16: ("bf16", "uint16_t", "float", dtypes.float32),
}

# META, the int64 buffer every kernel takes last: the shapes, the flags, and scale's and dropout's float64 bits
META = ("n", "t_q", "t_k", "d", "d_v", "causal", "masked", "scale_bits", "dropout_bits")


@dataclass(frozen=True)
class Tiles:
    """The sizes the kernels are compiled for. `block`: threads per block, one owned row each (the kernels
    read blockDim.x, so a smaller block also runs; `block` is what Launch.block asks for and __launch_bounds__
    allows). `tile`, `chunk`: rows per streamed tile and columns per stage and per register pass, for float32
    compute; `wide_tile`, `wide_chunk` the same for float64, whose registers are twice as wide."""

    block: int = 64
    tile: int = 32
    chunk: int = 16
    wide_tile: int = 16
    wide_chunk: int = 16

    def sizes(self, compute: str) -> tuple[int, int]:
        """(tile, chunk) for a compute type ("float" or "double")."""
        return (self.wide_tile, self.wide_chunk) if compute == "double" else (self.tile, self.chunk)

    def shared_bytes(self, name: str, compute: str) -> int:
        """The static shared memory one block of kernel `name` declares: two staged tiles, in the dK, dV pass
        each streamed query's L and D besides, and dropout's p, seed and counter (DROP_BYTES).

        >>> GPU.shared_bytes("sdpa", "float"), GPU.shared_bytes("sdpa_bwd_kv", "double")
        (4120, 4376)
        """
        tile, chunk = self.sizes(compute)
        width = 8 if compute == "double" else 4
        rows = 2 * tile if name == "sdpa_bwd_kv" else 0
        return (2 * tile * chunk + rows) * width + DROP_BYTES


GPU = Tiles()  # 64 threads a block; float32: 32-row tiles, 16 columns a pass (96 floats of registers in dK, dV)
SIM = Tiles(block=8, tile=4, chunk=8, wide_tile=4, wide_chunk=8)  # the sim: one std::thread per CUDA thread

TRAITS = r"""
/* A storage width: S the stored type, R the type computed in, load and store the one conversion each way. */
struct limn_sdpa_width_SFX {
    typedef STORE S;
    typedef REAL R;
    enum { TILE = TILE_ROWS, CHUNK = CHUNK_COLS };
    static __device__ __forceinline__ REAL load(STORE x) { return LOADED; }
    static __device__ __forceinline__ STORE store(REAL x) { return STORED; }
    static __device__ __forceinline__ REAL exp_(REAL x) { return EXP(x); }
    static __device__ __forceinline__ REAL log_(REAL x) { return LOG(x); }
    static __device__ __forceinline__ REAL madd(REAL a, REAL b, REAL c) { return FMA(a, b, c); }
};
"""

SPELLINGS = {  # the words TRAITS leaves open, per width
    "f32": {"LOADED": "x", "STORED": "x"},
    "f64": {"LOADED": "x", "STORED": "x", "EXP": "exp", "LOG": "log", "FMA": "fma"},
    "f16": {"LOADED": "limn_f16_to_f32(x)", "STORED": "limn_f32_to_f16(x)"},
    "bf16": {"LOADED": "limn_bf16_to_f32(x)", "STORED": "limn_f32_to_bf16(x)"},
}
FLOAT_MATH = {"EXP": "expf", "LOG": "logf", "FMA": "fmaf"}

COMMON = kernel_text("sdpa.cu")  # the three kernels as templates over a width W (its TRAITS)

# each kernel's parameters by name (its buffers as the KernelIR lists them, the slots of the mask and of dropout's
# seed and counter always there and null when unused, then META) and the template it instantiates
INPUTS = ("q", "k", "v", "key_mask", "seed", "counter")
ARGUMENTS = {
    "sdpa": (*INPUTS, "out", "lse", "meta"),
    "sdpa_bwd_q": (*INPUTS, "out", "lse", "d_out", "d_q", "meta"),
    "sdpa_bwd_kv": (*INPUTS, "out", "lse", "d_out", "d_k", "d_v", "meta"),
}
TEMPLATES = {"sdpa": "limn_sdpa_forward", "sdpa_bwd_q": "limn_sdpa_backward_q", "sdpa_bwd_kv": "limn_sdpa_backward_kv"}


def _fill(text: str, words: dict[str, str]) -> str:
    """`text` with each word of `words` spelled out: whole words between non-letters (SFX in limn_sdpa_SFX)."""
    for word, spelling in words.items():
        text = re.sub(rf"(?<![A-Za-z]){word}(?![A-Za-z])", spelling, text)
    return text


def source(tiles: Tiles) -> str:
    """The CUDA C of the three kernels at every width, to follow the prelude (cuda/prelude.PRELUDE: the int
    typedefs, INFINITY, the half widths' conversions). Function names: function_name(custom, dtype)."""
    parts = [squares_c("static __device__ __forceinline__"), COMMON]
    for dtype, (suffix, store, real, _) in WIDTHS.items():
        tile, chunk = tiles.sizes(real)
        words = {"SFX": suffix, "STORE": store, "REAL": real, "TILE_ROWS": str(tile), "CHUNK_COLS": str(chunk)}
        words |= FLOAT_MATH | SPELLINGS[suffix]
        parts.append(_fill(TRAITS, words))
        parts += [_entry(custom, dtype, tiles) for custom in ARGUMENTS]
    return "".join(parts)


def _entry(custom: str, dtype: DType, tiles: Tiles) -> str:
    """The extern "C" __global__ function running `custom` on `dtype`: its template at that width. A minimum
    of one block per multiprocessor in __launch_bounds__ lets ptxas give a thread up to 255 registers, which
    the unrolled register tiles take without spilling (tests/cuda/test_cuda_sdpa.py reads ptxas's report)."""
    names = ARGUMENTS[custom]
    signature = ", ".join(f"{t} __restrict__ {name}" for t, name in zip(params(custom, dtype), names))
    head = f'extern "C" __global__ __launch_bounds__({tiles.block}, 1) void {function_name(custom, dtype)}'
    body = f"{TEMPLATES[custom]}<limn_sdpa_width_{WIDTHS[dtype][0]}>({', '.join(names)})"
    return f"{head}({signature}) {{\n    {body};\n}}\n"


def function_name(custom: str, dtype: DType) -> str:
    """The __global__ function running CUSTOM `custom` on q's dtype."""
    return f"limn_{custom}_{WIDTHS[dtype][0]}"


def params(custom: str, dtype: DType) -> tuple[str, ...]:
    """The kernel's parameter types, in ARGUMENTS' order."""
    _, store, real, _ = WIDTHS[dtype]
    ins = [f"const {store}*"] * 3 + ["const uint8_t*", "const double*", "const double*"]
    if custom == "sdpa":
        return (*ins, f"{store}*", f"{real}*", "const int64_t*")
    grads = (f"const {store}*", f"const {real}*", f"const {store}*")
    outs = (f"{store}*",) if custom == "sdpa_bwd_q" else (f"{store}*", f"{store}*")
    return (*ins, *grads, *outs, "const int64_t*")


def launches(tiles: Tiles) -> tuple[Launch, ...]:
    """Every kernel's Launch, no cells (what a compile needs: the names and parameters)."""
    return tuple(
        Launch(function_name(custom, dtype), params(custom, dtype), 0, tiles.block)
        for dtype in WIDTHS
        for custom in sorted(NAMES)
    )


def program(tiles: Tiles) -> CudaProgram:
    """The three kernels at every width as one program (to follow PRELUDE), compiled once per device."""
    return CudaProgram(source(tiles), launches(tiles))


def dims(kernel: KernelIR) -> tuple[int, int, int, int, int]:
    """(n, t_q, t_k, d, d_v) of a CUSTOM attention kernel."""
    (n, t_q, d), (_, t_k, _), (_, _, d_v) = (b.shape for b in kernel.inputs[:3])
    return n, t_q, t_k, d, d_v


def launch(kernel: KernelIR, tiles: Tiles) -> Launch:
    """The one Launch that runs `kernel`: a thread per owned row (query rows, or key rows for dK, dV), whole
    blocks of them; DeviceError for a CUSTOM name or dtype these kernels do not serve."""
    dtype = kernel.inputs[0].dtype
    if kernel.custom not in NAMES:
        raise DeviceError(f"CUSTOM {kernel.custom!r} is not a fused attention kernel ({', '.join(sorted(NAMES))})")
    if dtype not in WIDTHS:
        names = ", ".join(d.name for d in WIDTHS)
        raise DeviceError(f"CUSTOM {kernel.custom!r}: the cuda attention kernels take {names}, not {dtype.name}")
    n, t_q, t_k, _, _ = dims(kernel)
    rows = t_k if kernel.custom == "sdpa_bwd_kv" else t_q
    cells = n * -(-rows // tiles.block) * tiles.block
    return Launch(function_name(kernel.custom, dtype), params(kernel.custom, dtype), cells, tiles.block)


def meta(kernel: KernelIR) -> np.ndarray:
    """The META buffer's values for `kernel`: int64[9], scale and dropout as their float64 bits."""
    values = dict(kernel.params)
    bits = [int(np.array(float(values.get(name, 0.0)), np.float64).view(np.int64)) for name in ("scale", "dropout")]
    flags = [int(bool(values["causal"])), int(bool(values["masked"]))]
    return np.array([*dims(kernel), *flags, *bits], np.int64)


def arguments(kernel: KernelIR, handles: list[Any], absent: Any, meta_buffer: Any) -> list[Any]:
    """The kernel's arguments in its parameters' order: `handles` (inputs, then outputs, as the KernelIR
    lists them) with `absent` in the slots of a mask and of dropout's seed and counter the call has not, then
    the META buffer."""
    values = dict(kernel.params)
    rest = list(handles[3:])
    mask = rest.pop(0) if values["masked"] else absent
    draw = [rest.pop(0), rest.pop(0)] if values.get("dropout", 0.0) else [absent, absent]
    return [*handles[:3], mask, *draw, *rest, meta_buffer]
