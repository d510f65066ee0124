"""The machine's limits, measured in the benchmark's own run by small C probes built like the kernels.

`measure(device)` takes a c device and compiles three probes with its toolchain (the same cc and flags,
-march and -fopenmp included) in a private temp dir, loads them with ctypes and runs them on the
kernels' OpenMP team: the copy bandwidth (`out[i] = a[i] * 2` over 64 MiB arrays, read + write bytes),
the read bandwidth (a sum over 64 MiB into vector accumulators: the ceiling of a reduce, which writes
almost nothing) and the FMA peak (independent chains of the tiles' own vector fma, 2 flops per lane).
`report` prints them with the ISA row and thread count; `share` writes a figure as a percentage of one.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from _bench import median_seconds

from limn.c.rewrites.matmul import VECTOR_PRELUDE

COPY_FLOATS = 16 * 1024 * 1024  # 64 MiB per array: the pair is 4x a 32 MiB L3, yet quick to page in
RUNS = 5  # each limit is the median of this many timed runs, after one warm-up
FMA_SECONDS = 0.04  # one timed run of the fma probe lasts about this long

# CHAINS is set per ISA: enough accumulators to cover the fma latency times the fma units (4 cycles x 2
# units on Zen 4 and most Intel cores), leaving registers for b and the broadcast x.
PROBES = r"""
/* copy: the team splits the array as the kernels split a parallel loop */
void limn_probe_copy(const float *restrict a, float *restrict out, long n, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (long i = 0; i < n; i++) out[i] = a[i] * 2.0f;
}

/* read: each thread sums its part of the array into CHAINS vector accumulators (the array's length is a
   multiple of CHAINS vectors); the total is returned so the loads cannot be dropped */
float limn_probe_read(const float *restrict a, long n, int threads) {
    float total = 0.0f;
    const long step = (long)CHAINS * LIMN_VEC_FLOAT;
    #pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        limn_vec_float acc[CHAINS];
        for (int k = 0; k < CHAINS; k++) acc[k] = (limn_vec_float){0};
        #pragma omp for schedule(static)
        for (long i = 0; i < n; i += step) {
            #pragma GCC unroll 32
            for (int k = 0; k < CHAINS; k++) {
                limn_vec_float v;
                memcpy(&v, a + i + (long)k * LIMN_VEC_FLOAT, sizeof v);
                acc[k] += v;
            }
        }
        for (int k = 0; k < CHAINS; k++)
            for (int lane = 0; lane < LIMN_VEC_FLOAT; lane++) total += acc[k][lane];
    }
    return total;
}

/* fma: each thread runs CHAINS independent accumulators, one vector fma each per step (the fma the
   matmul tiles use); the sum of their lanes is returned so the compiler must compute them */
float limn_probe_fma(long steps, float x, int threads) {
    float total = 0.0f;
    #pragma omp parallel num_threads(threads) reduction(+ : total)
    {
        limn_vec_float b = (limn_vec_float){0} + x, acc[CHAINS];
        for (int k = 0; k < CHAINS; k++) acc[k] = b * (float)k;
        for (long s = 0; s < steps; s++) {
            #pragma GCC unroll 32
            for (int k = 0; k < CHAINS; k++) acc[k] = LIMN_VEC_FMA(x, b, acc[k]);
        }
        for (int k = 0; k < CHAINS; k++)
            for (int lane = 0; lane < LIMN_VEC_FLOAT; lane++) total += acc[k][lane];
    }
    return total;
}
"""


@dataclass(frozen=True)
class Limits:
    """What the kernels were built for and what the machine did just now; a None limit says why in `missing`."""

    isa: str  # the ISA row's describe()
    march: str  # the -march flag the kernels are built with
    threads: int  # the OpenMP team the kernels run on
    fma: bool  # the target has an fma instruction (else the probe's fma is fmaf, a libm call)
    chains: int  # independent accumulators per thread in the fma probe
    copy_gbs: float | None  # GB/s, read + write bytes of out[i] = a[i] * 2
    read_gbs: float | None  # GB/s, bytes read by a sum that keeps its totals in registers
    fma_gflops: float | None  # GFLOP/s, 2 per lane of each vector fma, all threads
    load: float = 0.0  # the 1-minute load average as the probes ran: other work on the cores skews them
    missing: str = ""


def measure(device) -> Limits:
    """The limits of the machine `device` (a limn c device) compiles for, measured now (under 2 s)."""
    toolchain, isa = device.toolchain, device.toolchain.isa
    threads = device.options.threads
    chains = min(16, isa.registers - 4)
    march = " ".join(toolchain.target) or "no -march"
    base = Limits(isa.describe(), march, threads, isa.fma, chains, None, None, None)
    with tempfile.TemporaryDirectory(prefix="limn-limits-") as folder:
        source, library = Path(folder) / "probes.c", Path(folder) / "probes.so"
        source.write_text(f"#include <math.h>\n#include <string.h>\n#define CHAINS {chains}\n{VECTOR_PRELUDE}{PROBES}")
        cmd = [toolchain.cc, *toolchain.flags, str(source), "-o", str(library), "-lm"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                why = f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[:300]}"
                return replace(base, missing=why)
            lib = ctypes.CDLL(str(library))  # the mapping outlives the temp dir
        except (OSError, subprocess.TimeoutExpired) as e:
            return replace(base, missing=f"{' '.join(cmd)} failed: {e}")
    copy = lib.limn_probe_copy
    copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
    copy.restype = None
    read = lib.limn_probe_read
    read.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
    read.restype = ctypes.c_float
    fma = lib.limn_probe_fma
    fma.argtypes = [ctypes.c_long, ctypes.c_float, ctypes.c_int]
    fma.restype = ctypes.c_float
    gflops = _fma_gflops(fma, isa.vector_bytes // 4, chains, threads)
    copy_gbs, read_gbs = _bandwidths(copy, read, threads)
    return replace(base, copy_gbs=copy_gbs, read_gbs=read_gbs, fma_gflops=gflops, load=os.getloadavg()[0])


def _bandwidths(copy, read, threads: int) -> tuple[float, float]:
    """(copy GB/s counting read + write bytes, read GB/s)."""
    a = np.ones(COPY_FLOATS, dtype=np.float32)
    out = np.empty_like(a)
    # median_seconds warms up first: the team starts and the output pages are touched
    copy_seconds = median_seconds(lambda: copy(a.ctypes.data, out.ctypes.data, a.size, threads), RUNS)
    assert out[-1] == 2.0, "the copy probe did not write its output"
    read_seconds = median_seconds(lambda: read(a.ctypes.data, a.size, threads), RUNS)
    assert read(a.ctypes.data, a.size, threads) == a.size, "the read probe did not read every value"
    return 2 * a.nbytes / copy_seconds / 1e9, a.nbytes / read_seconds / 1e9


def _fma_gflops(fma, lanes: int, chains: int, threads: int) -> float:
    # Sized on one thread, since every thread of the team runs the same steps: a team's run can wait
    # a scheduler tick for a thread that another process holds off its core, which would fool the sizing.
    steps, seconds = 1 << 12, 0.0
    while seconds < FMA_SECONDS / 8:
        steps *= 4
        start = time.perf_counter()
        fma(steps, 1e-7, 1)
        seconds = time.perf_counter() - start
    steps = int(steps * FMA_SECONDS / seconds)
    seconds = median_seconds(lambda: fma(steps, 1e-7, threads), RUNS)
    return 2 * lanes * chains * steps * threads / seconds / 1e9


def share(value: float, limit: float | None) -> str:
    """`value` as a percentage of `limit`, or "n/a" when the limit could not be measured."""
    return "n/a" if limit is None else f"{100 * value / limit:.0f}%"


def report(limits: Limits) -> str:
    """Two lines: what the kernels are built for, and the limits (or why they are missing)."""
    built = f"c kernels built with {limits.march} for {limits.isa}; {limits.threads} threads"
    if limits.missing:
        return f"{built}\nmachine limits not measured: {limits.missing}"
    chains = f"{limits.chains} independent vector fma chains per thread"
    if not limits.fma:
        chains += " (no fma instruction: fmaf per lane, a libm call, as in the tiles)"
    return (
        f"{built}\nmachine limits, measured now by C probes built like the kernels: "
        f"copy {limits.copy_gbs:.1f} GB/s (out[i] = a[i] * 2 over {COPY_FLOATS * 4 >> 20} MiB, read + write), "
        f"read {limits.read_gbs:.1f} GB/s (a sum over {COPY_FLOATS * 4 >> 20} MiB), "
        f"fma peak {limits.fma_gflops:.1f} GFLOP/s ({chains}, 2 flops per lane); "
        f"load average {limits.load:.1f} on {os.cpu_count()} CPUs"
    )


def limits_header(device: str) -> str:
    """What a benchmark prints first: the c device's build and the machine's limits (report), measured now, when
    limn runs on c; another device's limits are not these, so it says so instead."""
    import limn

    if device != "c":
        return f"limn on {device}: the machine limits below are the c device's, not measured for it"
    return report(measure(limn.get_device("c")))
