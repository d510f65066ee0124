"""Rule: the printed loop nest is a reviewed artifact. Each test prints the IR of one program and compares
it line for line with a dump written out below, so any change to a nest (loop order, an index, a mask, a
kernel cut) fails here and has to be looked at and pasted in on purpose.

To update a golden after a deliberate change: print the new dump, read it (indices, masks, loop order,
accumulators), and paste it over the old literal."""

import difflib

import numpy as np

from limn import Tensor
from limn.compiler.codegen import ir
from limn.compiler.ir import Program


def assert_dump(program: Program, golden: str, what: str) -> None:
    got = str(program).splitlines()
    want = golden.splitlines()
    if got != want:
        diff = "\n".join(difflib.unified_diff(want, got, "golden", "printed", lineterm=""))
        raise AssertionError(f"the IR of {what} changed:\n{diff}")


# The spec's example ("Reading the schedule"): one SUM kernel, a fill nest, then i0 / r2 / i1 with ACCUM
# into memory; the (4, 3) sink aliases the (4, 3, 1) buffer.
MATMUL = """\
k0  SUM  loop[4, 3, 5]
    in0 = buf0  float32[4, 5]
    in1 = buf1  float32[5, 3]
    out = buf2  float32[4, 3, 1]
  LOOP    i0 < 4
    LOOP    i1 < 3
      CONST   v0 = 0.0 : float32
      STORE   out[i0*3 + i1] = v0
    ENDLOOP i1
  ENDLOOP i0
  LOOP    i0 < 4
    LOOP    r2 < 5
      LOOP    i1 < 3
        LOAD    v1 = in0[i0*5 + r2] : float32
        LOAD    v2 = in1[i1 + r2*3] : float32
        ARITH   v3 = MUL v1, v2 : float32
        ACCUM   out[i0*3 + i1] = ADD out[i0*3 + i1], v3
      ENDLOOP i1
    ENDLOOP r2
  ENDLOOP i0

sink 0 = buf2  float32[4, 3]
"""

# x (3, 4) padded by ((1, 0), (2, 1)) to (4, 7), summed over dim 1. The pad is a range check on the load:
# cell (i0, r1) reads x[i0 - 1, r1 - 2] = in0[(i0 - 1)*4 + (r1 - 2)] = in0[i0*4 + r1 - 6]
# where 1<=i0<4 and 2<=r1<6.
# r1 is stride-1 in the input, so it is innermost and the total lives in a register.
PADDED_SUM = """\
k0  SUM  loop[4, 7]
    in0 = buf0  float32[3, 4]
    out = buf1  float32[4, 1]
  LOOP    i0 < 4
    ACC     acc0 = 0.0 : float32
    LOOP    r1 < 7
      LOAD    v1 = in0[i0*4 + r1 - 6] if 1<=i0<4, 2<=r1<6 : float32
      ACCUM   acc0 = ADD acc0, v1
    ENDLOOP r1
    STORE   out[i0] = acc0
  ENDLOOP i0

sink 0 = buf1  float32[4]
"""

# A (10, 4) table looked up by (2, 3) int32 indices: the indices flatten to (6,) and broadcast over the
# row, so v0 = idx[i0] and the row it picks is read at in1[v0*4 + i1]; the sink reads (6, 4) as (2, 3, 4).
EMBEDDING = """\
k0  GATHER  loop[6, 4]
    in0 = buf1  int32[2, 3]
    in1 = buf0  float32[10, 4]
    out = buf2  float32[6, 4]
  LOOP    i0 < 6
    LOOP    i1 < 4
      LOAD    v0 = in0[i0] : int32
      LOAD    v1 = in1[v0*4 + i1] : float32
      STORE   out[i0*4 + i1] = v1
    ENDLOOP i1
  ENDLOOP i0

sink 0 = buf2  float32[2, 3, 4]
"""

# softmax = exp(x - max) / sum over a (2, 3): max in a register (k0); the sum (k1) and the divide (k2)
# each recompute exp(x - max), which is cheaper than storing it and reading it back (RECOMPUTE_LIMIT);
# the divide is a MUL by RECIP of the sum.
SOFTMAX = """\
k0  MAX  loop[2, 3]
    in0 = buf0  float32[2, 3]
    out = buf1  float32[2, 1]
  LOOP    i0 < 2
    ACC     acc0 = -inf : float32
    LOOP    r1 < 3
      LOAD    v1 = in0[i0*3 + r1] : float32
      ACCUM   acc0 = MAX acc0, v1
    ENDLOOP r1
    STORE   out[i0] = acc0
  ENDLOOP i0

k1  SUM  loop[2, 3]
    in0 = buf0  float32[2, 3]
    in1 = buf1  float32[2, 1]
    out = buf2  float32[2, 1]
  LOOP    i0 < 2
    ACC     acc0 = 0.0 : float32
    LOOP    r1 < 3
      LOAD    v1 = in0[i0*3 + r1] : float32
      LOAD    v2 = in1[i0] : float32
      ARITH   v3 = NEG v2 : float32
      ARITH   v4 = ADD v1, v3 : float32
      ARITH   v5 = EXP v4 : float32
      ACCUM   acc0 = ADD acc0, v5
    ENDLOOP r1
    STORE   out[i0] = acc0
  ENDLOOP i0

k2  MUL  loop[2, 3]
    in0 = buf0  float32[2, 3]
    in1 = buf1  float32[2, 1]
    in2 = buf2  float32[2, 1]
    out = buf3  float32[2, 3]
  LOOP    i0 < 2
    LOOP    i1 < 3
      LOAD    v0 = in0[i0*3 + i1] : float32
      LOAD    v1 = in1[i0] : float32
      ARITH   v2 = NEG v1 : float32
      ARITH   v3 = ADD v0, v2 : float32
      ARITH   v4 = EXP v3 : float32
      LOAD    v5 = in2[i0] : float32
      ARITH   v6 = RECIP v5 : float32
      ARITH   v7 = MUL v4, v6 : float32
      STORE   out[i0*3 + i1] = v7
    ENDLOOP i1
  ENDLOOP i0

sink 0 = buf3  float32[2, 3]
"""


# The spec's matmul with a bias add (limn.compiler.epilogue): the add is no second kernel but the SUM kernel's epilogue.
# The fold fills and accumulates into out as before (the memory form); then a nest over the output cells
# loads each finished total, adds the bias and stores out1, the sink. out is still stored.
MATMUL_BIAS = """\
k0  SUM  loop[4, 3, 5]
    in0 = buf0  float32[4, 5]
    in1 = buf1  float32[5, 3]
    in2 = buf2  float32[3]
    out = buf3  float32[4, 3, 1]
    out1 = buf4  float32[4, 3]
  LOOP    i0 < 4
    LOOP    i1 < 3
      CONST   v0 = 0.0 : float32
      STORE   out[i0*3 + i1] = v0
    ENDLOOP i1
  ENDLOOP i0
  LOOP    i0 < 4
    LOOP    r2 < 5
      LOOP    i1 < 3
        LOAD    v1 = in0[i0*5 + r2] : float32
        LOAD    v2 = in1[i1 + r2*3] : float32
        ARITH   v3 = MUL v1, v2 : float32
        ACCUM   out[i0*3 + i1] = ADD out[i0*3 + i1], v3
      ENDLOOP i1
    ENDLOOP r2
  ENDLOOP i0
  LOOP    i0 < 4
    LOOP    i1 < 3
      LOAD    v4 = out[i0*3 + i1] : float32
      LOAD    v5 = in2[i1] : float32
      ARITH   v6 = ADD v4, v5 : float32
      STORE   out1[i0*3 + i1] = v6
    ENDLOOP i1
  ENDLOOP i0

sink 0 = buf4  float32[4, 3]
"""

# A row sum scaled and added to a residual: the register form, so the epilogue runs at each cell right
# after its total is stored, reading it back from out (where a tile or a later kernel would read it too).
ROW_SUM_EPILOGUE = """\
k0  SUM  loop[2, 3, 4]
    in0 = buf0  float32[2, 3, 4]
    in1 = buf1  float32[2, 3]
    out = buf2  float32[2, 3, 1]
    out1 = buf3  float32[2, 3]
  LOOP    i0 < 2
    LOOP    i1 < 3
      ACC     acc0 = 0.0 : float32
      LOOP    r2 < 4
        LOAD    v1 = in0[i0*12 + i1*4 + r2] : float32
        ACCUM   acc0 = ADD acc0, v1
      ENDLOOP r2
      STORE   out[i0*3 + i1] = acc0
      LOAD    v2 = out[i0*3 + i1] : float32
      CONST   v3 = 0.25 : float32
      ARITH   v4 = MUL v2, v3 : float32
      LOAD    v5 = in1[i0*3 + i1] : float32
      ARITH   v6 = ADD v4, v5 : float32
      STORE   out1[i0*3 + i1] = v6
    ENDLOOP i1
  ENDLOOP i0

sink 0 = buf3  float32[2, 3]
"""


def test_matmul_dump_matches_the_spec():
    assert_dump(ir(Tensor.randn((4, 5)) @ Tensor.randn((5, 3))), MATMUL, "the spec's matmul")


def test_padded_sum_dump():
    assert_dump(ir(Tensor.randn((3, 4)).pad(((1, 0), (2, 1))).sum(1)), PADDED_SUM, "a padded row sum")


def test_embedding_dump():
    idx = Tensor(np.array([[1, 7, 3], [0, 9, 2]], np.int32))
    assert_dump(ir(Tensor.randn((10, 4)).embedding(idx)), EMBEDDING, "an embedding lookup")


def test_softmax_dump():
    assert_dump(ir(Tensor.randn((2, 3)).softmax(-1)), SOFTMAX, "a row softmax")


def test_matmul_with_a_bias_dump():
    program = ir(Tensor.randn((4, 5)) @ Tensor.randn((5, 3)) + Tensor.randn((3,)))
    assert_dump(program, MATMUL_BIAS, "a matmul with its bias add as the epilogue")


def test_row_sum_with_an_epilogue_dump():
    x, residual = Tensor.randn((2, 3, 4)), Tensor.randn((2, 3))
    assert_dump(ir(x.sum(2) * 0.25 + residual), ROW_SUM_EPILOGUE, "a row sum's epilogue in the register form")
