"""Bitwise ops against torch, on numpy and on c: & | ^ ~ on bools (logical) and on every int width (exact, the
limits included), the shifts << >> by python ints and by tensors (counts past the width and negative ones as
torch), the reverse forms, and the errors for floats.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle import Table, case

import limn
from limn import Tensor


def ints(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Pairs over the dtype's whole range: the limits, 0, -1, and random values."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    edge = [info.min, info.max, 0, -1, 1, info.min + 1, info.max - 1, 85, -86]
    x = np.concatenate([edge, rng.integers(info.min, info.max, 40, endpoint=True)]).astype(dtype)
    y = np.concatenate([edge[::-1], rng.integers(info.min, info.max, 40, endpoint=True)]).astype(dtype)
    return x, y


B1 = np.array([True, True, False, False])
B2 = np.array([True, False, True, False])

CASES = []
for op, fn in [("&", "bitwise_and"), ("|", "bitwise_or"), ("^", "bitwise_xor")]:
    CASES.append(case(f"x {op} y", x=B1, y=B2, id=f"{fn}_bool_is_logical"))
    CASES.append(case(f"x.{fn}(y)", f"torch.{fn}(x, y)", x=B1, y=B2, id=f"{fn}_method_bool"))
    for dtype in ["int8", "int16", "int32"]:
        x, y = ints(dtype)
        CASES.append(case(f"x {op} y", x=x, y=y, id=f"{fn}_{dtype}_whole_range"))
    CASES += [
        case(f"x {op} 6", x=ints("int16")[0], id=f"{fn}_python_int"),
        case(f"6 {op} x", x=ints("int8")[0], id=f"{fn}_reverse"),
        case(f"x {op} y", x=B1, y=np.array([3, -1, 2, 7], np.int8), id=f"{fn}_bool_with_int8_promotes"),
        case(f"x {op} y", x=ints("int8")[0].reshape(7, 7), y=ints("int8")[1][:7], id=f"{fn}_broadcasts"),
        case(f"x {op} y", x=np.zeros((0, 2), np.int32), y=np.zeros((2,), np.int32), id=f"{fn}_empty"),
    ]
CASES += [
    case("~x", x=B1, id="invert_bool_is_logical_not"),
    case("x.bitwise_not()", "torch.bitwise_not(x)", x=B1, id="bitwise_not_method"),
    case("~x", x=ints("int8")[0], id="invert_int8_limits"),
    case("~x", x=ints("int32")[0], id="invert_int32_limits"),
    case("~x", x=np.array(-5, np.int16), id="invert_0d"),
]
SHIFT_COUNTS = [0, 1, 3, 7, 8, 15, 16, 31, 32, 40, -1]
for dtype in ["int8", "int16", "int32"]:
    x = ints(dtype)[0]
    for n in SHIFT_COUNTS:
        CASES.append(case(f"x << {n}", x=x, id=f"lshift_{dtype}_by_{n}"))
        CASES.append(case(f"x >> {n}", x=x, id=f"rshift_{dtype}_by_{n}"))
    counts = np.resize(np.array([c for c in SHIFT_COUNTS if c < 128], dtype), x.shape)
    CASES += [
        case("x << y", x=x, y=counts, id=f"lshift_{dtype}_by_tensor"),
        case("x >> y", x=x, y=counts, id=f"rshift_{dtype}_by_tensor"),
        case("x.bitwise_left_shift(y)", "torch.bitwise_left_shift(x, y)", x=x, y=counts, id=f"lshift_method_{dtype}"),
        case("x.bitwise_right_shift(y)", "torch.bitwise_right_shift(x, y)", x=x, y=counts, id=f"rshift_method_{dtype}"),
    ]
CASES += [
    case("1 << x", x=np.array([0, 3, 6, 7, 8], np.int8), id="rlshift_python_int"),
    case("-100 >> x", x=np.array([0, 1, 3, 9], np.int32), id="rrshift_python_int"),
    case("x << y", x=np.array([5, -5], np.int8), y=np.array([1, 2], np.int32), id="lshift_promotes_to_int32"),
]

TABLE = Table(CASES)


@pytest.mark.parametrize("name", TABLE.ids)
def test_bitwise_matches_torch(device: str, name: str) -> None:
    TABLE.assert_agrees(device, name)


def test_bool_shift_is_an_int32_shift() -> None:
    # torch makes bools int64 for a shift; limn's widest int is int32
    out = Tensor(np.array([True, False])) << 2
    assert out.dtype.name == "int32" and out.tolist() == [4, 0]


@pytest.mark.parametrize("expr", ["x & x", "x | 1", "x ^ x", "~x", "x << 1", "x >> 1"])
def test_bitwise_ops_on_floats_raise_as_torch(expr: str) -> None:
    x = Tensor(np.array([1.0, 2.0], np.float32))
    with pytest.raises(TypeError, match="float32 tensor has no bits"):
        eval(expr, {"x": x})


I64 = np.iinfo(np.int64)
INT64_EDGES = np.array(
    [-3, -1, -5, 0, 1, I64.max, I64.min, I64.min + 1, 2**32, -(2**32), 2**32 - 1, -(2**31), 2**53 + 1, -(2**53) - 1],
    np.int64,
)


def test_int64_bitwise_and_shifts_are_exact_at_every_width_as_torch(device: str) -> None:
    """int64 has more bits than a float64 holds: each value is cut into two exact 32-bit halves first (and
    -3 & 1 was 0 before, every value past 2**53 off)."""
    rng = np.random.default_rng(0)
    a = np.concatenate([INT64_EDGES, rng.integers(I64.min, I64.max, 200, dtype=np.int64)])
    b = np.concatenate([INT64_EDGES[::-1], rng.integers(I64.min, I64.max, 200, dtype=np.int64)])
    n = rng.integers(0, 64, a.size).astype(np.int64)
    n[:3] = (0, 63, 32)
    ta, tb, tn = torch.tensor(a), torch.tensor(b), torch.tensor(n)
    la, lb, ln = Tensor(a), Tensor(b), Tensor(n)
    got = [la & lb, la | lb, la ^ lb, la & 1, la >> ln, la << ln, ~la]
    want = [ta & tb, ta | tb, ta ^ tb, ta & 1, ta >> tn, ta << tn, ~ta]
    limn.realize(*got)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=f"op {i}: a={a[:4]}...")
