"""Rule: each package's README opens with an example that runs and prints what it says it prints."""

import doctest
from pathlib import Path

import pytest

import limn

PACKAGES = Path(__file__).resolve().parents[1] / "packages"
READMES = sorted(p for p in PACKAGES.glob("*/README.md") if ">>>" in p.read_text())


@pytest.mark.parametrize("readme", READMES, ids=lambda p: p.parent.name)
def test_readme_example_runs_as_printed(readme: Path):
    limn.manual_seed(0)
    result = doctest.testfile(str(readme), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    limn.set_device("numpy")
    assert result.failed == 0, f"{readme}: {result.failed} of {result.attempted} examples failed (see above)"
