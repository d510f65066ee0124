"""Row pieces (limn.compiler.row_pieces) on the c device: a kernel whose family an earlier plan ran at another row
count runs as kernels built for power-of-two counts, and the oracle is the whole kernel on a device that has never
seen another count, bit for bit:
- which kernels' rows are independent: a matmul's, a layer norm's, a gather's rows are; a pad along the rows, a
  scatter, a CUSTOM call's are not;
- matmuls (register-tiled), layer norm and GELU, softmax, an embedding gather, a (B, T, C) batch, and
  attention's head layout (whose head loop is peeled: its stride holds the row count), at 21, 37 and 100 rows
  after a plan at 16, equal the whole kernels bit for bit, and the pieces are what ran; so do float16,
  bfloat16, int8, bool and int64 kernels, a cumsum, an argmax, gathered columns and a transposed output;
- a plan whose shapes never change keeps its whole kernels; once the power-of-two counts are built, a new count
  compiles nothing;
- what a review found: kernels apart in a literal's sign alone (0.0 == -0.0) are two families; a counter with
  two extents is left whole; a loop longer than the rows it leaves is not peeled."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import limn
from limn import Tensor
from limn.c.device import CDevice
from limn.c.row_call import RowPieces
from limn.compiler import row_pieces
from limn.compiler.checker import check
from limn.compiler.codegen import ir
from limn.compiler.ir import BufferArg, EndLoop, Index, KernelIR, LoadI, Loop, LoopVar, Store, Value
from limn.graph.ops import Op
from limn.nn import functional as F
from limn.runtime.device import get_device

rng = np.random.default_rng(3)
C, H = 24, 40
W1, B1 = rng.standard_normal((C, H)).astype(np.float32), rng.standard_normal(H).astype(np.float32)
W2 = rng.standard_normal((H, C)).astype(np.float32)
TABLE = rng.standard_normal((50, C)).astype(np.float32)


def mlp(x: Tensor) -> Tensor:
    h = (x @ Tensor(W1) + Tensor(B1)).gelu()  # (T, H)
    return h @ Tensor(W2)  # (T, C)


def block(x: Tensor) -> Tensor:
    y = F.layer_norm(x, (C,)) * 1.5 + 0.25
    return (mlp(y) + x).softmax(-1)


def embed(ids: Tensor) -> Tensor:
    return Tensor(TABLE)[ids] * 2.0 + 1.0  # (T, C)


def batched(x: Tensor) -> Tensor:
    return (x.reshape(x.shape[0], -1, C) @ Tensor(W1)).relu().sum(-1)  # (B, T, C) -> (B, T)


def heads(x: Tensor) -> Tensor:
    """(T, C) to attention's (heads, T, C / heads) layout and back: each copy's head stride is T C / heads."""
    split = (x.reshape(x.shape[0], 4, C // 4).permute(1, 0, 2) * 2.0).contiguous()  # (4, T, 6)
    return (split + 1.0).permute(1, 0, 2).reshape(x.shape[0], C)  # (4, T, 6) -> (T, C)


MODELS = {"mlp": mlp, "block": block, "embed": embed, "batched": batched, "heads": heads}

W16 = rng.standard_normal((C, C)).astype(np.float16)
# other dtypes and kernel kinds, each with its input's dtype: the offsets are bytes, so every itemsize is met
KINDS = {
    "float16 matmul": (np.float16, lambda x: (x @ Tensor(W16) + 1.0).relu().sum(-1, keepdim=True) * x),
    "bfloat16 softmax": (ml_dtypes.bfloat16, lambda x: x.softmax(-1)),
    "int8 that wraps": (np.int8, lambda x: (x * 3 + 7).cast(limn.int8)),
    "bool mask and where": (np.float32, lambda x: (x > 0).logical_and(x < 0.5).where(x, -x)),
    "int64 cumsum": (np.int64, lambda x: x.cumsum(-1)),
    "argmax": (np.float32, lambda x: x.argmax(-1)),
    "gathered columns": (np.float32, lambda x: x[:, [2, 0, 1, 1]] * 2.0),
    "transposed output": (np.float32, lambda x: x.T.contiguous() + 1.0),
}


def _input(name: str, rows: int) -> np.ndarray:
    if name == "embed":
        return rng.integers(0, 50, rows)
    if name == "batched":
        return rng.standard_normal((rows, 3 * C)).astype(np.float32)
    return rng.standard_normal((rows, C)).astype(np.float32)


def _pieces_ran(device: CDevice) -> int:
    return sum(isinstance(p, RowPieces) for plan in device.plans.values() for p in plan.compiled)


def test_which_kernels_have_independent_rows() -> None:
    limn.set_device("c")
    x = Tensor(rng.standard_normal((21, C)).astype(np.float32))
    (matmul,) = ir(x @ Tensor(W1)).kernels
    rows = row_pieces.rows_of(matmul)
    assert rows is not None and rows.count == 21 and rows.strides == (C, 0, H), rows
    assert all(row_pieces.rows_of(k) is not None for k in ir(F.layer_norm(x, (C,))).kernels)
    assert all(row_pieces.rows_of(k) is not None for k in ir(embed(Tensor(np.arange(21)))).kernels)
    (padded,) = ir(x.pad(((2, 1), (0, 0))) * 2.0).kernels  # a mask tests the row
    assert row_pieces.rows_of(padded) is None
    scattered = ir(Tensor.zeros((5, C)).index_add(0, Tensor(np.arange(21) % 5), x)).kernels
    assert any(row_pieces.rows_of(k) is None for k in scattered), "a scatter adds rows into shared cells"
    q = Tensor(rng.standard_normal((2, 21, 8)).astype(np.float32))
    (attention,) = [k for k in ir(Tensor.scaled_dot_product_attention(q, q, q)).kernels if k.custom]
    assert row_pieces.rows_of(attention) is None
    assert row_pieces.pieces(100) == [(0, 64), (64, 32), (96, 4)]
    split, merge = ir(heads(x)).kernels  # (4, 21, 6) from (21, 24), then (21, 4, 6) from it
    assert row_pieces.rows_of(split).count == 4, "its own rows are the heads"
    for kernel, head in ((split, "i0"), (merge, "i1")):
        ways = row_pieces.forms(kernel)
        peeled = [w for w in ways if w.peel is not None and str(w.peel.var) == head]
        assert peeled and peeled[0].rows.count == 21 and peeled[0].peel.count == 4, ways


@pytest.mark.parametrize("name", MODELS)
def test_row_pieces_equal_the_whole_kernels_bit_for_bit(name: str) -> None:
    limn.register_device(f"c_rows_{name}", CDevice)
    model = MODELS[name]
    limn.set_device(f"c_rows_{name}")
    model(Tensor(_input(name, 16))).realize()  # the family's first count
    for rows in (21, 37, 100):
        x = _input(name, rows)
        limn.set_device(f"c_rows_{name}")
        got = model(Tensor(x)).numpy()
        limn.register_device(f"c_whole_{name}_{rows}", CDevice)  # a device that sees this count alone
        limn.set_device(f"c_whole_{name}_{rows}")
        want = model(Tensor(x)).numpy()
        assert got.tobytes() == want.tobytes(), f"{name} at {rows} rows: pieces differ from the whole kernels"
        assert _pieces_ran(get_device(f"c_whole_{name}_{rows}")) == 0
    assert _pieces_ran(get_device(f"c_rows_{name}")) > 0, "the pieces are what ran"


@pytest.mark.parametrize("name", KINDS)
def test_row_pieces_of_every_dtype_and_kind_equal_the_whole_kernels_bit_for_bit(name: str) -> None:
    dtype, model = KINDS[name]
    tag = name.replace(" ", "_")
    limn.register_device(f"c_rows_{tag}", CDevice)
    limn.set_device(f"c_rows_{tag}")
    model(Tensor((rng.standard_normal((16, C)) * 5).astype(dtype))).realize()
    for rows in (21, 37):
        x = (rng.standard_normal((rows, C)) * 5).astype(dtype)
        limn.set_device(f"c_rows_{tag}")
        got = model(Tensor(x)).numpy()
        limn.register_device(f"c_whole_{tag}_{rows}", CDevice)
        limn.set_device(f"c_whole_{tag}_{rows}")
        want = model(Tensor(x)).numpy()
        assert got.tobytes() == want.tobytes(), f"{name} at {rows} rows: pieces differ from the whole kernels"
    assert _pieces_ran(get_device(f"c_rows_{tag}")) > 0, "the pieces are what ran"


def test_a_plan_whose_shapes_never_change_keeps_whole_kernels() -> None:
    limn.register_device("c_fixed", CDevice)
    limn.set_device("c_fixed")  # a device of this test's own: the registry keeps one per name
    x = Tensor(_input("block", 21))
    for _ in range(3):
        block(x).realize()
    assert _pieces_ran(get_device("c_fixed")) == 0


def test_once_the_powers_of_two_are_built_a_new_count_compiles_nothing() -> None:
    limn.register_device("c_grow", CDevice)
    limn.set_device("c_grow")
    device = get_device("c_grow")
    model = lambda x: heads(mlp(x))  # noqa: E731
    # the first plan (16) builds whole kernels; 5 = 4 + 1 builds the one-row pieces, 18 = 16 + 2 the two-row
    # ones and the 16-row pieces of the kernels whose head loop is peeled (their whole kernel at 16 is not one;
    # with fewer rows than heads they are not peeled)
    for rows in (16, 8, 4, 5, 18):
        model(Tensor(_input("mlp", rows))).realize()
    compiled = device.stats.programs_compiled
    for rows in (29, 23, 30, 17):
        model(Tensor(_input("mlp", rows))).realize()
    assert device.stats.programs_compiled == compiled, "a new count compiled kernels"
    assert device.stats.plans_built == 9


def test_kernels_apart_in_a_literals_sign_alone_are_two_families() -> None:
    """0.0 == -0.0 in Python: the family spells its literals, so -0.0's kernel never runs 0.0's pieces."""
    limn.register_device("c_signs", CDevice)
    x = np.full((21, 8), -0.0, np.float32)
    limn.set_device("c_signs")
    (Tensor(np.full((16, 8), -0.0, np.float32)) * 2.0 + 0.0).realize()
    (Tensor(x) * 2.0 + 0.0).realize()  # 0.0's pieces
    got = (Tensor(x) * 2.0 + -0.0).numpy()
    assert np.signbit(got).all(), "-0.0 * 2 + -0.0 is -0.0"


def test_a_counter_with_two_extents_and_a_long_loop_are_not_peeled() -> None:
    """A kernel whose nests give one counter two extents is left whole (its cell test would read one of them);
    a loop longer than the rows it leaves is not peeled (a call per value)."""
    i0, i1, i2 = LoopVar("i0"), LoopVar("i1"), LoopVar("i2")
    v0, v1 = Value("v0"), Value("v1")
    body = (
        *(Loop(i0, 3), Loop(i1, 4), Loop(i2, 4)),
        LoadI(v0, "in0", Index(((i0, 16), (i1, 4), (i2, 1))), limn.float32),
        Store("out", Index(((i0, 8), (i1, 2), (i2, 1))), v0),  # rows share cells: i2 < 4 but i1's step is 2
        *(EndLoop(i2), EndLoop(i1), EndLoop(i0), Loop(i0, 3), Loop(i1, 4), Loop(i2, 2)),
        LoadI(v1, "in0", Index(((i0, 16), (i1, 4), (i2, 1))), limn.float32),
        *(EndLoop(i2), EndLoop(i1), EndLoop(i0)),
    )
    buffers = (BufferArg("in0", 0, limn.float32, (3, 16)),), (BufferArg("out", 1, limn.float32, (4, 8)),)
    kernel = KernelIR("k", Op.ADD, (3, 4, 4), *buffers, body)
    check(kernel)
    assert row_pieces.forms(kernel) == []

    limn.register_device("c_widths", CDevice)
    limn.set_device("c_widths")
    (Tensor(np.ones((21, 8), np.float32)) * 2.0 + 1.0).realize()
    (Tensor(np.ones((21, 16), np.float32)) * 2.0 + 1.0).realize()  # the same kernel at another width
    assert _pieces_ran(get_device("c_widths")) == 0, "21 rows are not peeled into 21 calls"
