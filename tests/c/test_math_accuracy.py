"""Rules for the c device's float32 exp and log (the prelude's limn_expf and limn_logf), against numpy's float64
exp and log rounded to float32 (the correctly rounded answer, but for a double rounding once in billions):
- over a dense sweep of float32 (every 97th bit pattern of each sign, subnormals included), each is within one
  unit in the last place; an exhaustive run over all 2**32 patterns when they were written gave the same bound;
- at the edges (inf, nan, zeros, the overflow and underflow thresholds) each gives exactly the right answer."""

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.c.device import CDevice

pytestmark = pytest.mark.isa  # slow: run by `nox -s isa` (and CI), not the default suite

REFERENCE = {"exp": np.exp, "log": np.log}
MAX_ULP = 1  # both functions, everywhere: the prelude's docstring promises it

FLT_MIN, FLT_MAX = np.finfo(np.float32).tiny, np.finfo(np.float32).max
SMALLEST = np.float32(2.0**-149)  # the smallest subnormal


def either_side(threshold: float) -> list[np.float32]:
    """The float32s just below and just above a real number that is not one."""
    nearest = np.float32(threshold)
    other = np.nextafter(nearest, np.float32(np.inf if nearest < threshold else -np.inf))
    return sorted([nearest, other])


EXP_EDGES = [
    0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, SMALLEST, -SMALLEST, FLT_MAX, -FLT_MAX, -1000.0, -150.0, -104.0,
    *either_side(np.log(FLT_MAX * (1 + 2.0**-24))),  # where the answer rounds up to inf: 88.72283935546875 above
    *either_side(np.log(2.0**-126)),  # where the answer leaves the normals (FLT_MIN)
    *either_side(np.log(2.0**-150)),  # where it rounds to 0 rather than to the smallest subnormal
]  # fmt: skip
LOG_EDGES = [
    0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, -SMALLEST, -FLT_MAX,
    SMALLEST, np.nextafter(FLT_MIN, np.float32(0)), FLT_MIN, FLT_MAX, 2.0, 0.5,
]  # fmt: skip


def sweep() -> np.ndarray:
    """Every 97th bit pattern of the finite float32s of each sign, from 0 up (subnormals among them)."""
    positive = np.arange(0, 0x7F800000, 97, dtype=np.uint32).view(np.float32)
    return np.concatenate([positive, -positive])


def _host_runs_avx2() -> bool:
    """Whether this CPU has AVX2 and FMA (x86-64-v3 code runs on it), from /proc/cpuinfo's flags."""
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return "avx2" in flags and "fma" in flags


# the host's own target, and AVX2 code (gcc's blends where AVX-512 has masks) where the host runs it
limn.register_device("c_avx2", lambda: CDevice(march="x86-64-v3"))
DEVICES = [
    "c",
    pytest.param("c_avx2", marks=pytest.mark.skipif(not _host_runs_avx2(), reason="needs a host that runs AVX2")),
]


def on(device: str, fn: str, x: np.ndarray) -> np.ndarray:
    limn.set_device(device)
    return getattr(Tensor(x), fn)().numpy()


def correctly_rounded(fn: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return REFERENCE[fn](x.astype(np.float64)).astype(np.float32)


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """How many float32s lie between got and want (0 where both are nan; huge where only one is)."""

    def ordered(a: np.ndarray) -> np.ndarray:  # bit patterns as integers that sort as the floats do
        bits = a.view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)

    distance = np.abs(ordered(got) - ordered(want))
    distance[np.isnan(got) & np.isnan(want)] = 0
    distance[np.isnan(got) != np.isnan(want)] = 2**40
    return distance


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["exp", "log"])
def test_within_one_ulp_over_a_dense_sweep_of_float32(fn: str, device: str):
    x = sweep()
    got, want = on(device, fn, x), correctly_rounded(fn, x)
    distance = ulps(got, want)
    worst = int(np.argmax(distance))
    assert distance[worst] <= MAX_ULP, (
        f"on {device}: limn_{fn}f({x[worst]!r}, bits {int(x.view(np.uint32)[worst]):#010x}) = {got[worst]!r}, "
        f"the correctly rounded answer is {want[worst]!r}: {distance[worst]} ulp, the bound is {MAX_ULP}; "
        f"{int((distance > MAX_ULP).sum())} of {x.size} inputs are over it"
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn, edges", [("exp", EXP_EDGES), ("log", LOG_EDGES)])
def test_edges_are_exact(fn: str, edges: list[float], device: str):
    x = np.array(edges, dtype=np.float32)
    got, want = on(device, fn, x), correctly_rounded(fn, x)
    wrong = [
        f"{fn}({a!r}) = {g!r} on {device}, want {w!r}"
        for a, g, w in zip(x, got, want)
        if not (np.isnan(g) and np.isnan(w)) and g.tobytes() != w.tobytes()  # -0.0 is not 0.0 here
    ]
    assert not wrong, "\n".join(wrong)
