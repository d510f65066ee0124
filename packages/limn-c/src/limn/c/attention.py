"""The c device's fused attention kernels: sdpa, sdpa_bwd_q and sdpa_bwd_kv (limn.composed.functional.sdpa holds the
layout and the numpy references they are diffed against), as fixed C compiled once per device through its kernel cache.

Each kernel is a list of work items, one per (n, tile of rows), run by an OpenMP team: every output total is owned
by one item and folded in an order fixed by the tiles, never by the team, so threaded equals serial bit for bit
(tests/c/test_sdpa_c.py). Every product of two tiles (S = q k^T, dP = dO v^T, O += P v, dQ += dS k, dK += dS^T q,
dV += P^T dO) is one register-tiled routine, limn_sdpa_gemm, which skips the blocks causal attention hides. The
tiles a work item streams past are read where they lie (rows of k, v, or q, dO); only the item's own tile is
transposed, once, so the other operand's rows are what each step of a product reads. The forward and dQ passes
hold their tiles with a key per row, so what is left between the products (the masks, the exp, the running max
and sums) runs as vector loops over the item's queries; the dK, dV pass holds a query per row.
Pipeline: graph (CUSTOM nodes) -> schedule -> IR (a CUSTOM kernel) -> **these C functions** (CDevice.run_custom).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from importlib import resources
from typing import Any

import numpy as np

from limn import dtypes
from limn.c import addresses
from limn.c.prelude import PRELUDE
from limn.c.rewrites.matmul import VECTOR_PRELUDE
from limn.compiler.ir import KernelIR
from limn.compiler.squares_c import squares_c
from limn.graph.ops import Node, Op
from limn.runtime.device import DeviceError

NAMES = frozenset({"sdpa", "sdpa_bwd_q", "sdpa_bwd_kv"})


def kernel_text(name: str) -> str:
    """A C file of limn/c/kernels/, shipped in the wheel beside this module."""
    return resources.files("limn.c").joinpath("kernels", name).read_text(encoding="utf-8")


ROWS = 64  # queries per tile: one forward or dQ work item owns them, the dK, dV pass streams them
KEYS = 64  # keys per tile: the forward and dQ stream them, one dK, dV work item owns them

COMMON = kernel_text("sdpa_common.c")  # the helpers both widths share

# Written once over REAL, VEC, LANES, EXP, LOG, PICK and SUFFIX, instantiated for float (the prelude's vectorizing
# exp and log) and double (C's). limn_sdpa_gemm's b operands are rows whose length is whole pairs of vectors:
# inputs whose width is not are copied, zero-padded, once per call (limn_sdpa_tiles).
TEMPLATE = kernel_text("sdpa.c")  # the kernels, in placeholder words

WIDTHS = {  # the C spellings of each width the kernels are built for
    "f32": {
        **{"REAL": "float", "VEC": "limn_vec_float", "LANES": "LIMN_VEC_FLOAT"},
        **{
            "EXP": "limn_expf",
            "LOG": "limn_logf",
            "PICK": "limn_pickf",
            "MADD": "limn_madd",
            "KEEP": "limn_sdpa_keep_f",
        },
    },
    "f64": {
        **{"REAL": "double", "VEC": "limn_vec_double", "LANES": "LIMN_VEC_DOUBLE"},
        **{"EXP": "exp", "LOG": "log", "PICK": "limn_pickd", "MADD": "fma", "KEEP": "limn_sdpa_keep_d"},
    },
}
SUFFIX = {dtypes.float32: "f32", dtypes.float64: "f64"}


def width(dtype: dtypes.DType) -> str | None:
    """The width ("f32" or "f64") attention on `dtype` computes in (float16 and bfloat16 widen to float32), or
    None where the kernels take no such dtype."""
    return SUFFIX.get(dtype, "f32" if dtype in (dtypes.float16, dtypes.bfloat16) else None)


def source(suffix: str) -> str:
    """The C of all three kernels at one width (a library each: a float32 model never waits on cc for the
    float64 ones), to follow the prelude (limn_expf, limn_pickf, LIMN_IVDEP); the vector words (limn_vec_float,
    LIMN_VEC_FMA) are the matmul tiles' (rewrites/matmul.VECTOR_PRELUDE)."""
    sizes = f"#define LIMN_SDPA_ROWS {ROWS}\n#define LIMN_SDPA_KEYS {KEYS}\n"
    text = TEMPLATE.replace("SUFFIX", suffix)
    for word, c in WIDTHS[suffix].items():
        text = re.sub(rf"\b{word}\b", c, text)  # whole words: VEC is not the VEC of LIMN_VEC_FMA
    return "".join([VECTOR_PRELUDE, sizes, squares_c("static inline"), COMMON, text])


def functions(lib: ctypes.CDLL, suffix: str) -> dict[str, Callable[..., None]]:
    """The kernels of a library built from source(suffix), by CUSTOM name, their argument types set."""
    sizes = [ctypes.c_int64] * 5 + [ctypes.c_int, ctypes.c_double, ctypes.c_double, ctypes.c_int]  # n, ..., threads
    arrays = {"sdpa": 8, "sdpa_bwd_q": 10, "sdpa_bwd_kv": 11}  # pointers: inputs (mask, seed, counter), outputs
    c_names = {"sdpa": "forward", "sdpa_bwd_q": "backward_q", "sdpa_bwd_kv": "backward_kv"}
    out = {}
    for name, pointers in arrays.items():
        f = getattr(lib, f"limn_sdpa_{c_names[name]}_{suffix}")
        f.argtypes, f.restype = [ctypes.c_void_p] * pointers + sizes, None
        out[name] = f
    return out


class Libraries:
    """A c device's attention kernels: a library per width, built through `build` (the device's kernel cache).
    A new plan whose graph holds attention starts cc on the library of its width (prefetch) on a thread of its
    own, so it compiles while the plan is scheduled and lowered (one core, in Python) and not after its units;
    a kernel's first run waits for it, or builds it if no plan started it. The thread is not a daemon: a process
    that ends while cc runs waits for it, so no half-written file is left in the kernel cache."""

    def __init__(self, build: Callable[[str], ctypes.CDLL]) -> None:
        self.build = build
        self.functions: dict[str, dict[str, Callable[..., None]]] = {}  # by width
        self.building: dict[str, Future] = {}  # by width, while cc runs
        self.pool: ThreadPoolExecutor | None = None

    def prefetch(self, order: Sequence[Node]) -> None:
        """Starts cc on each library these nodes' attention needs that is neither built nor being built."""
        needed = {width(n.srcs[0].dtype) for n in order if n.op is Op.CUSTOM and n.arg.name in NAMES}
        for suffix in sorted(needed - {None} - self.functions.keys() - self.building.keys()):
            self.pool = self.pool or ThreadPoolExecutor(len(WIDTHS), thread_name_prefix="limn-attention")
            self.building[suffix] = self.pool.submit(self.build, PRELUDE + source(suffix))

    def run(self, kernel: KernelIR, handles: list[Any], threads: int) -> None:
        """Runs one attention kernel with its width's library."""
        suffix = width(kernel.inputs[0].dtype)
        if suffix is None:
            raise DeviceError(
                f"CUSTOM {kernel.custom!r}: the c device's kernels take float32 or float64 (float16 and bfloat16 "
                f"widened), not {kernel.inputs[0].dtype.name}"
            )
        if suffix not in self.functions:
            started = self.building.pop(suffix, None)
            lib = started.result() if started is not None else self.build(PRELUDE + source(suffix))
            self.functions[suffix] = functions(lib, suffix)
        run(self.functions[suffix], kernel, handles, threads)


def run(kernels: dict[str, Callable[..., None]], kernel: KernelIR, handles: list[Any], threads: int):
    """Runs one CUSTOM attention kernel on its buffers (inputs, then outputs, as the KernelIR lists them) with
    `kernels`, the functions of its width's library.
    float16 and bfloat16 are widened to float32 copies here, computed there and rounded once when stored. The
    key mask and dropout's seed and counter limbs go as they are; an absent one is a null pointer."""
    params = dict(kernel.params)
    dtype = kernel.inputs[0].dtype
    wide = dtype if dtype in SUFFIX else dtypes.float32
    arrays = [np.ascontiguousarray(h) for h in handles]
    n_in = len(kernel.inputs)
    q, k, v = (a.astype(wide.np, copy=False) for a in arrays[:3])
    rest = arrays[3:n_in]
    mask = addresses.address(rest.pop(0)) if params["masked"] else None
    dropout = float(params.get("dropout", 0.0))
    seed, counter = addresses.of(rest[:2]) if dropout else (None, None)
    rest = [a.astype(wide.np, copy=False) for a in rest[2 if dropout else 0 :]]  # O, L, dO in the backward
    outs = [a if a.dtype == wide.np else np.empty(a.shape, wide.np) for a in arrays[n_in:]]
    n, t_q, d = q.shape
    t_k, d_v = k.shape[1], v.shape[2]
    pointers = [*addresses.of([q, k, v]), mask, seed, counter, *addresses.of(rest + outs)]
    sizes = (n, t_q, t_k, d, d_v, int(params["causal"]), float(params["scale"]), dropout, threads)
    kernels[kernel.custom](*pointers, *sizes)
    for handle, result in zip(handles[n_in:], outs):
        if result is not handle:
            handle[...] = result.astype(handle.dtype)  # one rounding, from float32 (L is float32 already)
