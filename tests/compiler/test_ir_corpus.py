"""Rule: the printed loop nest means what it says. Every corpus graph is scheduled, lowered and run
instruction by instruction by the IR interpreter, and diffed against the numpy reference device."""

import numpy as np
import pytest
from corpus import CASES, Case, run_case, tolerance
from ir_interpreter import IRInterpreter

import limn

limn.register_device("ir", IRInterpreter)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_ir_interpreter_matches_numpy_device(case: Case):
    limn.set_device("numpy")
    expected = run_case(case)
    limn.set_device("ir")
    got = run_case(case)
    rtol, atol = tolerance(case.dtypes[0])
    for i, (e, g) in enumerate(zip(expected, got)):
        assert g.dtype == e.dtype and g.shape == e.shape, f"{case} output {i}: {g.dtype}{g.shape} vs {e.dtype}{e.shape}"
        if e.dtype.kind in "fV" or str(e.dtype) == "bfloat16":
            ok = np.allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = np.array_equal(g, e)
        if not ok:
            limn.set_device("numpy")
            program = limn.compiler.codegen.ir(*case.build(np.random.default_rng(0)))
            pytest.fail(f"{case} output {i} differs\nexpected:\n{e}\ngot:\n{g}\nIR:\n{program}")
