"""The checks that need more than the workspace environment: each session builds its own venv with uv.

  tests(<backend>) limn-core, limn-compiler and one backend's package, then that backend's tests with
                   LIMN_TEST_DEVICE=<backend>: numpy runs the reference's own suite, c and cuda diff the
                   shared corpus and the autograd fuzzer's graphs against it (cuda skips without a GPU)
  lint             ruff check and ruff format --check over the repository
  wheels           every package built with `uv build --all-packages`, installed from dist/ as a user
                   would: limn-core with limn-c, then limn-core alone
  plugin           limn-core plus examples/third_party_device: limn finds a device it has never heard of
  isa              the slow c tests (pytest -m isa): every ISA's kernels, sweeps, five sixths of the corpus' rewrites
  ops              the c device's half of the op tables against torch, and the HF models on c (pytest -m ops)
  train            the long training runs against torch (pytest -m train)
  dist             data-parallel runs under mpiexec, started by the tests (pytest -m dist)
  docs             the documentation site built by MkDocs in strict mode, two pages opened by headless Chromium
  browser          a diagram's SVG screenshotted by headless Chromium (pytest -m browser) and its dot read by
                   Graphviz; installs Debian's chromium and graphviz with apt-get where they are missing

Third-party versions (pytest, torch, ruff, ...) are pinned to uv.lock, so a session tests what
`uv sync` gives. `uv run nox` runs the three CI sessions; `uv run nox -s 'tests(c)'` runs one backend's
suite; `uv run nox -l` lists them all.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import nox
from packaging.requirements import Requirement

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["lint", "wheels", "plugin"]  # what .ci/run runs; tests(...) are asked for by name

ROOT = Path(__file__).parent
PACKAGES = ROOT / "packages"
DIST = ROOT / "dist"
PLUGIN = ROOT / "examples" / "third_party_device"
SMOKE = ROOT / "tests" / "smoke_wheels.py"

# The package that provides each backend (with the extras it needs); numpy is limn-core's own. cuda-sim is
# limn-cuda's CUDA C run on the CPU: no GPU needed, so CI runs it. The cuda sessions add limn-nn, whose
# layers build the GPT step their emission sweep compiles.
CUDA_PACKAGES = ["limn-cuda[nvrtc]", "limn-nn"]
BACKEND_PACKAGES = {"numpy": [], "c": ["limn-c"], "cuda": CUDA_PACKAGES, "cuda-sim": CUDA_PACKAGES}
# What each backend's session runs: the numpy reference's own suite, or the diffs against it. The cuda
# sessions also run the emission sweeps the default suite leaves out (the `cuda` marker).
CUDA_TESTS = ["tests/test_backend_corpus.py", "tests/cuda", "-m", "not isa and not ops"]
BACKEND_TESTS = {
    "numpy": ["tests/core", "tests/test_devices.py"],
    "c": ["tests/test_backend_corpus.py", "tests/c", "tests/compiler"],
    "cuda": CUDA_TESTS,
    "cuda-sim": CUDA_TESTS,
}
TOOLS = {"ruff", "nox"}  # dev-group members the tests do not import


def test_requirements() -> list[str]:
    """What the shared suite needs beside limn: the dev group, less limn's own packages and the tools."""
    dev = nox.project.dependency_groups(nox.project.load_toml(ROOT / "pyproject.toml"), "dev")
    names = [(requirement, Requirement(requirement).name) for requirement in dev]
    return [requirement for requirement, name in names if not name.startswith("limn") and name not in TOOLS]


def uv() -> str:
    """The uv that nox's uv backend uses, to run outside the session's venv."""
    return nox.virtualenv.find_uv()[1]


def locked_constraints(session: nox.Session) -> str:
    """A constraints file pinning every third-party package to its version in uv.lock."""
    path = Path(session.create_tmp()) / "constraints.txt"
    session.run(
        uv(),
        "export",
        "--frozen",
        "--all-packages",
        "--all-groups",
        "--all-extras",
        "--no-emit-workspace",
        "--no-hashes",
        "--no-header",
        "--no-annotate",
        "--quiet",
        "--output-file",
        str(path),
        external=True,
        silent=True,
    )
    return str(path)


def package_path(name: str) -> str:
    """A workspace package to install by path, its extras kept: "limn-cuda[nvrtc]" -> ".../limn-cuda[nvrtc]"."""
    base, extras = name.partition("[")[0], name[len(name.partition("[")[0]) :]
    return str(PACKAGES / base) + extras


@nox.session
@nox.parametrize("backend", list(BACKEND_PACKAGES), ids=list(BACKEND_PACKAGES))
def tests(session: nox.Session, backend: str) -> None:
    """The shared suite against the numpy reference, with only `backend`'s package installed."""
    packages = ["limn-core", "limn-compiler", *BACKEND_PACKAGES[backend]]
    session.install("-c", locked_constraints(session), *(package_path(name) for name in packages), *test_requirements())
    # pytest exits 5 when it collects nothing, which fails the session: an empty suite is no pass
    session.run("pytest", *BACKEND_TESTS[backend], *session.posargs, env={"LIMN_TEST_DEVICE": backend})


@nox.session
def isa(session: nox.Session) -> None:
    """The slow c tests: every kernel of the corpus and a GPT step compiled for x86-64-v3 and v4 with gcc's
    vectorization report, the other ISA rows' matmul tiles, exp/log over a dense sweep of float32, and the
    long randomized sweep of matmul epilogues (pytest -m isa)."""
    packages = ["limn-core", "limn-compiler", "limn-c", "limn-nn"]
    session.install(
        "-c", locked_constraints(session), *(str(PACKAGES / name) for name in packages), *test_requirements()
    )
    session.run("pytest", "-m", "isa", "tests/c", "tests/compiler/test_epilogue_adversarial.py", *session.posargs)


@nox.session
def ops(session: nox.Session) -> None:
    """The c device's half of the op tables: every family of Tensor ops against torch, forward and backward,
    on c (pytest -m ops; the numpy half runs in the default suite), and the Hugging Face models against
    transformers on c. tests/nn imports train_stories, which draws its loss.svg with limn-diagram."""
    packages = ["limn-core", "limn-compiler", "limn-c", "limn-nn", "limn-diagram", "limn-models"]
    session.install(
        "-c", locked_constraints(session), *(str(PACKAGES / name) for name in packages), *test_requirements()
    )
    session.run("pytest", "-m", "ops", "tests/core", "tests/nn", "tests/models", *session.posargs)


@nox.session
def train(session: nox.Session) -> None:
    """The long training comparisons (pytest -m train): examples/train_stories.py's GPT trained in limn and in
    torch from the same weights for 100 steps, on numpy and c, and a GPT on fused attention against composed.
    limn-diagram draws train_stories' loss.svg."""
    packages = ["limn-core", "limn-compiler", "limn-c", "limn-nn", "limn-diagram"]
    session.install(
        "-c", locked_constraints(session), *(str(PACKAGES / name) for name in packages), *test_requirements()
    )
    session.run("pytest", "tests/nn", "-m", "train", *session.posargs)


@nox.session
def dist(session: nox.Session) -> None:
    """Data-parallel training under mpiexec (pytest -m dist): each test launches its ranks with the mpiexec
    of the mpich wheel, on numpy and c."""
    packages = ["limn-core", "limn-compiler", "limn-c", "limn-nn", "limn-diagram", "limn-dist[mpich]"]
    session.install(
        "-c", locked_constraints(session), *(str(PACKAGES / name) for name in packages), *test_requirements()
    )
    # one test at a time (-n 0): each starts its own ranks, which want the cores to themselves
    session.run("pytest", "tests/dist", "-m", "dist", "-n", "0", *session.posargs)


@nox.session
def browser(session: nox.Session) -> None:
    """A diagram's SVG as headless Chromium draws it, checked pixel by pixel against the SVG's own boxes and
    text lines (pytest -m browser), and its dot source as Graphviz reads it. Debian's chromium and graphviz are
    installed with apt-get where `chromium` or `dot` is missing, which needs root (CI runs as root)."""
    _debian_tools(session, {"chromium": "chromium", "dot": "graphviz"})
    packages = ["limn-core", "limn-compiler", "limn-diagram"]
    session.install(
        "-c",
        locked_constraints(session),
        *(package_path(name) for name in packages),
        "pytest",
        "pytest-xdist",
        "hypothesis",
    )
    diagrams = ["tests/diagram/test_diagram_browser.py", "tests/diagram/test_diagram_graph.py"]
    session.run("pytest", *diagrams, "-m", "browser", *session.posargs)
    session.run("pytest", "tests/diagram/test_diagram_graph.py", "-k", "dot", *session.posargs)


def _debian_tools(session: nox.Session, tools: dict[str, str]) -> None:
    """Installs Debian's package for each tool (command -> package) missing from PATH, with apt-get (as root)."""
    missing = [package for tool, package in tools.items() if not shutil.which(tool)]
    if not missing:
        return
    if shutil.which("apt-get") is None:
        session.error(
            f"nox -s {session.name} needs {' and '.join(missing)} on PATH, and there is no apt-get here to install "
            "Debian's: install them with this system's package manager, then rerun"
        )
    session.run("apt-get", "update", external=True)
    apt_env = {"DEBIAN_FRONTEND": "noninteractive"}  # no debconf question can stop an unattended run
    session.run("apt-get", "install", "-y", "--no-install-recommends", *missing, external=True, env=apt_env)


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site: docs/site.py gathers the pages, checks that every public name the API reference
    documents has a docstring, and builds with MkDocs in strict mode (a broken link fails); then headless
    Chromium opens two pages from disk (pytest -m docs). Every package is installed: the reference imports
    them all."""
    _debian_tools(session, {"chromium": "chromium"})
    packages = [p.name for p in sorted(PACKAGES.iterdir()) if (p / "pyproject.toml").is_file()]
    docs_group = nox.project.dependency_groups(nox.project.load_toml(ROOT / "pyproject.toml"), "docs")
    session.install(
        "-c",
        locked_constraints(session),
        *(package_path(name) for name in packages),
        *docs_group,
        "ruff",  # mkdocstrings formats long signatures with it
        "pytest",
        "pytest-xdist",
    )
    session.run("python", "docs/site.py", env={"NO_MKDOCS_2_WARNING": "1"})
    session.run("pytest", "tests/test_docs_site.py", "-m", "docs", "-n", "0", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff's lint rules and its formatting, over everything ruff is configured to see."""
    session.install("-c", locked_constraints(session), "ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@nox.session
def wheels(session: nox.Session) -> None:
    """Builds every distribution, then installs them from dist/ the way a user would: limn-core with
    limn-c in the session's fresh venv, then limn-core alone in a second one. Only numpy and ml_dtypes
    come from the index; nothing comes from the workspace."""
    shutil.rmtree(DIST, ignore_errors=True)  # no wheels left from an older version
    session.run(uv(), "build", "--all-packages", "--quiet", "-o", str(DIST), external=True)
    session.log("built: " + ", ".join(sorted(p.name for p in DIST.glob("*.whl"))))

    session.install("--find-links", str(DIST), "limn-core", "limn-c")
    session.run("python", str(SMOKE), "core-and-c")

    core_only = Path(session.create_tmp()) / "core-only"
    shutil.rmtree(core_only, ignore_errors=True)
    session.run(uv(), "venv", "--quiet", "--python", sys.executable, str(core_only), external=True)
    python = str(venv_python(core_only))
    session.run(uv(), "pip", "install", "--python", python, "--find-links", str(DIST), "limn-core", external=True)
    session.run(python, str(SMOKE), "core-only", external=True)


@nox.session
def plugin(session: nox.Session) -> None:
    """A device from outside the repository's packages, found through its `limn.devices` entry point."""
    session.install(
        "-c", locked_constraints(session), str(PACKAGES / "limn-core"), str(PLUGIN), "pytest", "pytest-xdist"
    )
    session.run("python", "-c", "import limn; print('limn.devices():', limn.devices())")
    session.run("pytest", str(PLUGIN / "tests"), *session.posargs)
