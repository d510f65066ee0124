"""Rule: every nest lowering writes is well formed, and a nest that is not says where. checker.check passes
every kernel of the shared corpus; each rule it enforces is then broken once in a small hand-written nest,
and the test shows the failure the checker prints: the rule, what is wrong, and the nest with the
offending instruction marked `-->`."""

import re
from pathlib import Path

import numpy as np
import pytest
from corpus import CASES, Case

import limn.compiler.codegen
from limn import Tensor, dtypes
from limn.compiler.checker import IRError, check
from limn.compiler.codegen import ir
from limn.compiler.ir import (
    OPCODES,
    Acc,
    Accum,
    Arith,
    BufferArg,
    ConstI,
    EndLoop,
    Index,
    Instr,
    KernelIR,
    LoadI,
    Loop,
    LoopVar,
    Range,
    Store,
    Value,
)
from limn.graph.ops import Op

f32 = dtypes.float32
i0, r0 = LoopVar("i0"), LoopVar("r0")
v0, v1, v2, v9, acc0 = Value("v0"), Value("v1"), Value("v2"), Value("v9"), Value("acc0")


def at(term, const: int = 0) -> Index:
    return Index(((term, 1),), const)


def kernel(*body: Instr, op: Op = Op.ADD, out: tuple[int, ...] = (4,)) -> KernelIR:
    """A kernel over loop[4] reading in0 (float32[4]) and writing out (float32[out])."""
    return KernelIR("k0", op, (4,), (BufferArg("in0", 0, f32, (4,)),), (BufferArg("out", 1, f32, out),), body)


# out = in0 + 1, the well-formed nest every broken one below starts from
ADD_ONE = (
    Loop(i0, 4),
    LoadI(v0, "in0", at(i0), f32),
    ConstI(v1, 1.0, f32),
    Arith(v2, Op.ADD, (v0, v1), f32),
    Store("out", at(i0), v2),
    EndLoop(i0),
)
# out = sum(in0), a total in a register
REGISTER_SUM = (
    Acc(acc0, 0.0, f32),
    Loop(r0, 4, reduce=True),
    LoadI(v1, "in0", at(r0), f32),
    Accum(acc0, None, Op.ADD, v1),
    EndLoop(r0),
    Store("out", Index((), 0), acc0),
)


def replaced(body: tuple[Instr, ...], pc: int, ins: Instr) -> tuple[Instr, ...]:
    return body[:pc] + (ins,) + body[pc + 1 :]


def failure(k: KernelIR) -> str:
    with pytest.raises(IRError) as err:
        check(k)
    return str(err.value)


def marker_line(message: str) -> str:
    (line,) = [line for line in message.splitlines() if line.startswith("-->")]
    return line


# ---- well-formed nests pass ----


@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_corpus_kernel_passes_the_checker(case: Case):
    limn.set_device("numpy")
    program = ir(*case.build(np.random.default_rng(0)))
    for k in program.kernels:
        assert check(k) is k, f"{case}: check returns the kernel it was given"


def test_the_hand_written_nests_are_well_formed():
    assert str(check(kernel(*ADD_ONE))) == (
        "k0  ADD  loop[4]\n"
        "    in0 = buf0  float32[4]\n"
        "    out = buf1  float32[4]\n"
        "  LOOP    i0 < 4\n"
        "    LOAD    v0 = in0[i0] : float32\n"
        "    CONST   v1 = 1.0 : float32\n"
        "    ARITH   v2 = ADD v0, v1 : float32\n"
        "    STORE   out[i0] = v2\n"
        "  ENDLOOP i0"
    )
    check(kernel(*REGISTER_SUM, op=Op.SUM, out=(1,)))


def test_a_range_narrows_the_loop_an_index_is_checked_over():
    # in0[i0 + 1] would read in0[4] at i0 = 3, but the load happens only where 0<=i0<3
    check(kernel(*replaced(ADD_ONE, 1, LoadI(v0, "in0", at(i0, 1), f32, (Range(i0, 0, 3),)))))


def test_lowering_checks_every_nest_under_limn_debug(monkeypatch):
    checked = []
    monkeypatch.setattr(limn.compiler.codegen, "check", lambda k: checked.append(k.name) or k)
    x = Tensor.randn((4, 5))
    monkeypatch.delenv("LIMN_DEBUG", raising=False)
    ir(x.exp().sum(1), x.max(axis=0))
    assert checked == [], "without LIMN_DEBUG lowering does not check"
    monkeypatch.setenv("LIMN_DEBUG", "1")
    ir(x.exp().sum(1), x.max(axis=0))
    assert checked == ["k0", "k1"], "LIMN_DEBUG=1 checks each kernel as it is lowered"


# ---- rule: defined before use ----


def test_a_value_read_before_any_instruction_defines_it():
    message = failure(kernel(*replaced(ADD_ONE, 3, Arith(v2, Op.ADD, (v0, v9), f32))))
    assert message == (
        'k0 breaks "defined before use": ARITH reads v9, which no instruction above it defines\n'
        "    k0  ADD  loop[4]\n"
        "        in0 = buf0  float32[4]\n"
        "        out = buf1  float32[4]\n"
        "      LOOP    i0 < 4\n"
        "        LOAD    v0 = in0[i0] : float32\n"
        "        CONST   v1 = 1.0 : float32\n"
        "-->     ARITH   v2 = ADD v0, v9 : float32\n"
        "        STORE   out[i0] = v2\n"
        "      ENDLOOP i0"
    )


def test_a_value_read_after_its_loop_closed():
    body = (Loop(i0, 4), LoadI(v0, "in0", at(i0), f32), EndLoop(i0), Store("out", Index((), 0), v0))
    message = failure(kernel(*body, out=(1,)))
    assert message.splitlines()[0] == (
        'k0 breaks "defined before use": STORE reads v0, whose loop has closed: '
        "a value lives until the ENDLOOP of its loop"
    )
    assert marker_line(message) == "-->   STORE   out[0] = v0"


def test_a_value_defined_twice():
    message = failure(kernel(*replaced(ADD_ONE, 2, ConstI(v0, 1.0, f32))))
    assert message.splitlines()[0] == (
        'k0 breaks "defined before use": CONST defines v0 a second time: every value is defined once, '
        "by one instruction"
    )
    assert marker_line(message) == "-->     CONST   v0 = 1.0 : float32"


# ---- rule: loops balanced ----


def test_a_loop_never_closed():
    message = failure(kernel(*ADD_ONE[:-1]))
    assert message == (
        'k0 breaks "loops balanced": LOOP i0 is never closed: the body ends before its ENDLOOP i0\n'
        "    k0  ADD  loop[4]\n"
        "        in0 = buf0  float32[4]\n"
        "        out = buf1  float32[4]\n"
        "-->   LOOP    i0 < 4\n"
        "        LOAD    v0 = in0[i0] : float32\n"
        "        CONST   v1 = 1.0 : float32\n"
        "        ARITH   v2 = ADD v0, v1 : float32\n"
        "        STORE   out[i0] = v2"
    )


def test_an_endloop_that_is_not_the_innermost_loop():
    message = failure(kernel(*replaced(ADD_ONE, 5, EndLoop(r0))))
    assert message.splitlines()[0] == (
        'k0 breaks "loops balanced": ENDLOOP r0 while the innermost open loop is i0: ENDLOOP i0 comes first'
    )
    assert marker_line(message) == "-->   ENDLOOP r0"


def test_an_endloop_with_no_loop_open():
    message = failure(kernel(*ADD_ONE, EndLoop(i0)))
    assert message.splitlines()[0] == 'k0 breaks "loops balanced": ENDLOOP i0 closes nothing: no LOOP is open'
    assert marker_line(message) == "--> ENDLOOP i0"


def test_a_loop_reopened_inside_itself():
    message = failure(kernel(Loop(i0, 4), *ADD_ONE, EndLoop(i0)))
    assert message.splitlines()[0] == (
        'k0 breaks "loops balanced": LOOP i0 opens inside the open loop that already counts i0'
    )
    assert marker_line(message) == "-->     LOOP    i0 < 4"


# ---- rule: indices in range ----


def test_an_index_past_the_end_of_its_buffer():
    message = failure(kernel(*replaced(ADD_ONE, 1, LoadI(v0, "in0", at(i0, 1), f32))))
    assert message == (
        'k0 breaks "indices in range": LOAD reaches in0[1] to in0[4] over 0<=i0<4, '
        "but in0 holds 4 elements (float32[4])\n"
        "    k0  ADD  loop[4]\n"
        "        in0 = buf0  float32[4]\n"
        "        out = buf1  float32[4]\n"
        "      LOOP    i0 < 4\n"
        "-->     LOAD    v0 = in0[i0 + 1] : float32\n"
        "        CONST   v1 = 1.0 : float32\n"
        "        ARITH   v2 = ADD v0, v1 : float32\n"
        "        STORE   out[i0] = v2\n"
        "      ENDLOOP i0"
    )


def test_an_index_over_a_loop_that_is_not_open():
    message = failure(kernel(*replaced(ADD_ONE, 1, LoadI(v0, "in0", at(r0), f32))))
    assert message.splitlines()[0] == (
        'k0 breaks "indices in range": LOAD uses r0, which is not the counter of an open loop'
    )
    assert marker_line(message) == "-->     LOAD    v0 = in0[r0] : float32"


def test_an_index_into_a_buffer_the_kernel_does_not_have():
    message = failure(kernel(*replaced(ADD_ONE, 1, LoadI(v0, "in9", at(i0), f32))))
    assert message.splitlines()[0] == (
        'k0 breaks "indices in range": LOAD addresses in9, which is not a buffer of this kernel (in0, out)'
    )
    assert marker_line(message) == "-->     LOAD    v0 = in9[i0] : float32"


# ---- rule: writes land ----


def test_an_accum_into_a_value_no_acc_opened():
    message = failure(kernel(*replaced(REGISTER_SUM, 3, Accum(v1, None, Op.ADD, v1)), op=Op.SUM, out=(1,)))
    assert message == (
        'k0 breaks "writes land": ACCUM folds into v1, which no ACC opened: fold into an ACC\'s register '
        "or an output\n"
        "    k0  SUM  loop[4]\n"
        "        in0 = buf0  float32[4]\n"
        "        out = buf1  float32[1]\n"
        "      ACC     acc0 = 0.0 : float32\n"
        "      LOOP    r0 < 4\n"
        "        LOAD    v1 = in0[r0] : float32\n"
        "-->     ACCUM   v1 = ADD v1, v1\n"
        "      ENDLOOP r0\n"
        "      STORE   out[0] = acc0"
    )


def test_an_accum_into_an_input():
    message = failure(kernel(*replaced(REGISTER_SUM, 3, Accum("in0", at(r0), Op.ADD, v1)), op=Op.SUM, out=(1,)))
    assert message.splitlines()[0] == 'k0 breaks "writes land": ACCUM folds into in0[r0], which is not an output (out)'
    assert marker_line(message) == "-->     ACCUM   in0[r0] = ADD in0[r0], v1"


def test_a_store_into_an_input():
    message = failure(kernel(*replaced(REGISTER_SUM, 5, Store("in0", Index((), 0), acc0)), op=Op.SUM, out=(1,)))
    assert message.splitlines()[0] == (
        'k0 breaks "writes land": STORE writes in0, which is not an output (out): a kernel writes only its outputs'
    )
    assert marker_line(message) == "-->   STORE   in0[0] = acc0"


# ---- the instruction set ----


def test_each_opcode_is_one_instruction_class_that_prints_it_first():
    samples = [ADD_ONE[0], ADD_ONE[-1], *ADD_ONE[1:5], REGISTER_SUM[0], REGISTER_SUM[3]]
    assert {type(s) for s in samples} == set(OPCODES), "one sample per instruction class"
    for s in samples:
        assert str(s).split()[0] == OPCODES[type(s)], f"{s!r} prints as {s}"


def test_the_docs_count_the_opcodes_the_ir_has():
    numbers = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen".split()
    words = dict(enumerate(numbers, start=1))
    root = Path(__file__).parents[2]
    said = []
    for path in [*root.glob("packages/*/src/limn/**/*.py"), *root.glob("packages/*/README.md")]:
        said += [(path.name, m) for m in re.findall(rf"\b({'|'.join(numbers)})[ -]opcode", path.read_text().lower())]
    assert said, "some docstring says how many opcodes the IR has"
    wrong = [(name, count) for name, count in said if count != words[len(OPCODES)]]
    assert not wrong, f"the IR has {words[len(OPCODES)]} opcodes; these say otherwise: {wrong}"
