"""Every installed compiled device against the numpy reference: the shared corpus, and the autograd
fuzzer's graphs forward and backward.

The devices come from LIMN_TEST_DEVICE when it is set (nox's tests(<backend>) sessions set it), else
every installed device but numpy. A device that cannot run here skips with the reason its set_device
gave, which names what is missing (no CUDA device, no C compiler). Tolerances: 1e-5 float32, 1e-12
float64, each half width's own rounding, exact for ints and bools.
"""

import functools
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from corpus import CASES, Case, run_case, tolerance

import limn


def backend_devices() -> list[str]:
    chosen = os.environ.get("LIMN_TEST_DEVICE")
    if chosen:
        return [chosen] if chosen != "numpy" else []
    return [d for d in limn.devices() if d in ("c", "cuda")]


def use(device: str) -> None:
    try:
        limn.set_device(device)
    except limn.DeviceError as e:
        reason = "no CUDA device" if device == "cuda" else f"device {device!r} cannot run here"
        pytest.skip(f"{reason}: {e}")


def close(got: np.ndarray, want: np.ndarray, dtype_name: str) -> bool:
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if want.dtype.kind == "f" or want.dtype.name == "bfloat16":
        rtol, atol = tolerance(dtype_name)
        return np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    return np.array_equal(got, want)


DEVICES = backend_devices() or [
    pytest.param("none", marks=pytest.mark.skip(reason="only the numpy device is selected"))
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_corpus_matches_numpy_device(device: str, case: Case):
    limn.set_device("numpy")
    expected = run_case(case)
    use(device)
    got = run_case(case)
    for i, (e, g) in enumerate(zip(expected, got)):
        assert close(g, e, case.dtypes[0]), (
            f"{case} output {i} on {device} differs from numpy\nexpected {e.dtype}{e.shape}:\n{e}\n"
            f"got {g.dtype}{g.shape}:\n{g}\nreproduce: limn.set_device({device!r}); "
            f"corpus.run_case(next(c for c in corpus.CASES if c.name == {case.name!r}))"
        )


@functools.cache
def _fuzzer():
    """The autograd fuzzer's module (tests/core is not a package, so it is loaded by path, once)."""
    path = Path(__file__).parent / "core" / "test_autograd_fuzz.py"
    spec = importlib.util.spec_from_file_location("limn_autograd_fuzz", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


FUZZ_SEEDS = range(0, 300, 6)  # 50 of the fuzzer's 300 graphs: each one compiles its own kernels


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", FUZZ_SEEDS)
def test_autograd_fuzz_graphs_match_numpy_device(device: str, seed: int):
    fuzz = _fuzzer()
    case = fuzz.generate(seed)
    results = {}
    for name in ("numpy", device):
        if name == device:
            use(device)
        else:
            limn.set_device(name)
        ns = fuzz.run(case, "limn")
        tensors = [ns[f"a{i}"] for i in case.values] + [ns[f"a{i}"].grad for i in case.leaves]
        limn.realize(*[t for t in tensors if t is not None])
        results[name] = [None if t is None else t.numpy() for t in tensors]
    for k, (want, got) in enumerate(zip(results["numpy"], results[device])):
        assert (want is None) == (got is None), f"seed {seed}: value {k} exists on one device only"
        if want is not None:
            # fuzz graphs mix widths (a float32 gelu cast to float64), so every value gets float32's 1e-5
            assert close(got, want, "float32"), (
                f"seed {seed}: value {k} on {device} differs from numpy by "
                f"{np.abs(got.astype(np.float64) - want).max():.3g}\n\n{case.reproducer()}"
            )
