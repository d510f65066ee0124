"""A smoke test of installed wheels, which `nox -s wheels` runs in venvs holding no workspace code.

  python tests/smoke_wheels.py core-and-c   limn-core and limn-c from dist/ (limn-compiler comes along):
                                            every limn.* module they ship is found through one `limn`,
                                            and the c device, once limn-c ships it, agrees with numpy
  python tests/smoke_wheels.py core-only    limn-core alone: the numpy device computes, and asking for
                                            "c" is a DeviceError that says which package to install

pytest does not collect it (no test_ prefix): it checks an installation, not the workspace.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from importlib import metadata
from pathlib import Path

import numpy as np

import limn
from limn import DeviceError, Tensor

REPO = Path(__file__).resolve().parents[1]
FIRST_PARTY = {
    "limn-core",
    "limn-compiler",
    "limn-c",
    "limn-cuda",
    "limn-nn",
    "limn-dist",
    "limn-diagram",
    "limn-models",
}


def installed_limn_packages() -> set[str]:
    names = {metadata.metadata(d.name)["Name"].lower().replace("_", "-") for d in metadata.distributions()}
    return names & FIRST_PARTY


def shipped_modules(distribution: str) -> list[str]:
    """The dotted name of every module under limn/ that a distribution installed (limn.c.device, ...)."""
    files = metadata.files(distribution) or []
    modules = []
    for f in files:
        parts = f.with_suffix("").parts
        if parts[0] == "limn" and f.suffix == ".py" and f.as_posix() != "limn/__init__.py":
            modules.append(".".join(parts[:-1] if parts[-1] in ("__init__", "__main__") else parts))
    return sorted(set(modules))


def small_graph(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return (Tensor(x) @ Tensor(w)).relu().sum(axis=0).numpy()  # (8, 5) @ (5, 3) -> (8, 3) -> (3,)


def check_installed_not_workspace() -> None:
    where = Path(limn.__file__).resolve()
    assert REPO / "packages" not in where.parents, f"limn was imported from the workspace ({where})"
    print(f"limn {limn.__version__} from {where.parent}; installed: {sorted(installed_limn_packages())}")


def check_namespace() -> None:
    """limn-core owns limn/__init__.py; every other package's limn.* modules resolve through it."""
    for distribution in sorted(installed_limn_packages()):
        files = metadata.files(distribution) or []
        owns_init = any(f.as_posix() == "limn/__init__.py" for f in files)
        assert owns_init == (distribution == "limn-core"), f"{distribution}: ships limn/__init__.py is {owns_init}"
        for module in shipped_modules(distribution):
            found = importlib.util.find_spec(module)
            assert found is not None, f"{module}, shipped by {distribution}, is not importable"
        print(f"{distribution}: {', '.join(shipped_modules(distribution)) or 'no modules yet'}")


def check_numpy_device(x: np.ndarray, w: np.ndarray) -> None:
    limn.set_device("numpy")
    np.testing.assert_allclose(small_graph(x, w), np.maximum(x @ w, 0).sum(axis=0), rtol=1e-5)
    print("numpy device: ok")


def check_c_device(x: np.ndarray, w: np.ndarray) -> None:
    assert "c" in limn.devices(), f"limn-c is installed but devices() is {limn.devices()}"
    if importlib.util.find_spec("limn.c.device") is None:
        print("c device: limn-c ships no limn.c.device yet, so there is nothing to run")
        return
    try:
        limn.set_device("c")
    except DeviceError as e:
        if shutil.which("cc") is None:
            print(f"c device: no cc on this machine, and set_device says so: {e}")
            return
        raise
    on_c = small_graph(x, w)
    limn.set_device("numpy")
    np.testing.assert_allclose(on_c, small_graph(x, w), rtol=1e-5, atol=1e-6)
    print("c device: agrees with numpy")


def core_and_c() -> None:
    installed = installed_limn_packages()
    assert {"limn-core", "limn-compiler", "limn-c"} <= installed, installed
    assert not installed & {"limn-cuda", "limn-nn"}, f"asked for limn-core and limn-c, got {installed}"
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    check_numpy_device(x, w)
    check_c_device(x, w)


def core_only() -> None:
    assert installed_limn_packages() == {"limn-core"}, installed_limn_packages()
    assert limn.devices() == ["numpy"], limn.devices()
    for module in ("limn.compiler", "limn.schedule", "limn.codegen"):
        assert importlib.util.find_spec(module) is None, f"{module} without limn-compiler"
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((8, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
    check_numpy_device(x, w)
    try:
        limn.set_device("c")
    except DeviceError as e:
        assert "pip install limn-c" in str(e), f"the error does not name the package: {e}"
        print(f"set_device('c') without limn-c: {e}")
    else:
        raise AssertionError("set_device('c') worked with limn-core alone")
    assert limn.current_device() == "numpy"


CHECKS = {"core-and-c": core_and_c, "core-only": core_only}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CHECKS:
        sys.exit(f"usage: python {sys.argv[0]} {{{' | '.join(CHECKS)}}}")
    check_installed_not_workspace()
    check_namespace()
    CHECKS[sys.argv[1]]()
    print(f"smoke ({sys.argv[1]}): ok")
