"""Rule: every `>>>` example in a limn module's docstrings runs and prints what it says it prints.

Each module of the `limn` namespace and its sub-packages (all installed packages) whose source holds an
example is imported by name and its examples run on the numpy device from seed 0, as tests/test_readmes.py
runs the READMEs'. `limn` and `Tensor` are there as a reader's session would have them: the composed
modules define Tensor's methods and do not import the class they are bases of.
"""

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import limn


def _modules_with_examples() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(limn.__path__, "limn."):
        spec = importlib.util.find_spec(info.name)
        if spec is not None and spec.origin and ">>>" in Path(spec.origin).read_text():
            names.append(info.name)
    return sorted(names)


MODULES = _modules_with_examples()


def test_the_examples_are_found():
    assert {"limn.frontend.primitives", "limn.optim.optimizer", "limn.capture.record"} <= set(MODULES), MODULES


@pytest.mark.parametrize("name", MODULES)
def test_module_examples_run_as_printed(name: str):
    module = importlib.import_module(name)
    limn.set_device("numpy")
    limn.manual_seed(0)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    for test in finder.find(module, name, extraglobs={"limn": limn, "Tensor": limn.Tensor}):
        runner.run(test, out=report.append)
    limn.set_device("numpy")
    results = runner.summarize(verbose=False)
    assert results.attempted > 0, f"{name} has `>>>` in its source but no example doctest can find"
    assert results.failed == 0, f"{name}: {results.failed} of {results.attempted} examples failed:\n" + "".join(report)
