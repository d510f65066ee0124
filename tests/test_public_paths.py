"""Rule: the public paths the spec and the README name keep working across the layout (`from limn.codegen import
ir`, `limn.schedule`, `limn.capture`, `limn.serialize`, `limn.explain`, `python -m limn.diagram`), and a
sub-package is an attribute of limn without importing it first, as torch's are. These need the packages above
limn-core, so they sit outside tests/core (which `nox -s "tests(numpy)"` runs with limn-core alone)."""

import subprocess
import sys

import limn
from limn import Tensor


def test_a_sub_package_is_an_attribute_without_importing_it():
    code = "import limn; print(limn.optim.AdamW.__name__, limn.nn.Linear.__name__, 'optim' in dir(limn))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.split() == ["AdamW", "Linear", "True"], out.stderr or out.stdout


def test_the_public_paths_the_spec_names_keep_working():
    from limn.codegen import ir
    from limn.schedule import describe, schedule

    x = Tensor.randn((4, 5)) @ Tensor.randn((5, 3))
    assert "k0  SUM  loop[4, 3, 5]" in str(ir(x))
    assert len(schedule([x.node]).kernels) == 1 and describe
    assert callable(limn.capture.capture) and callable(limn.serialize.save) and callable(limn.explain)
    out = subprocess.run([sys.executable, "-m", "limn.diagram", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "SCRIPT.py:FUNCTION" in out.stdout, out.stderr
