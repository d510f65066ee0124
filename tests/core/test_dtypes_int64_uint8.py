"""int64 and uint8 against torch, on the numpy device and on c, exact: the promotion table and python scalars
against torch.result_type (with the spec's two named differences), wraparound at the limits for +, -, * and
negation, casts from floats (truncation toward zero, then wrap) and between ints, comparisons, reductions (a
sum keeps its dtype and wraps, by the spec, where torch sums ints in int64), matmul, gather and scatter with
int64 indices, and a uint8 image normalized to float and back. Values are compared exactly for ints (oracle.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle import Table, case

import limn
from limn import Tensor
from limn.dtypes import ALL, promote, scalar_dtype

I64 = np.iinfo(np.int64)
TORCH = {d: getattr(torch, d.name) for d in ALL}


def torch_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- promotion: every pair and every python scalar against torch.result_type ----


def spec_differs_from_torch(a: limn.DType, b: limn.DType) -> bool:
    """The spec: an int (or uint8) meeting a half float joins the floats at float32; torch keeps the half."""
    return (a.is_int and b.is_half) or (a.is_half and b.is_int)


PAIRS = [(a, b) for a in ALL for b in ALL]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a.name}+{b.name}" for a, b in PAIRS])
def test_the_promotion_of_every_pair_is_torchs_except_an_int_meeting_a_half(a: limn.DType, b: limn.DType) -> None:
    want = torch.result_type(torch.ones(1, dtype=TORCH[a]), torch.ones(1, dtype=TORCH[b]))
    got = promote(a, b)
    if spec_differs_from_torch(a, b):
        assert got == limn.float32 and torch_name(want) in (a.name, b.name), f"{a} + {b}: {got}, torch {want}"
    else:
        assert got.name == torch_name(want), f"{a} + {b}: limn {got}, torch {want}"
    assert (Tensor(np.ones(2, a.np)) + Tensor(np.ones(2, b.np))).dtype == got


SCALARS = [True, 7, -3, 2.5]
SCALAR_ROWS = [(d, s) for d in ALL for s in SCALARS]


@pytest.mark.parametrize(("dtype", "scalar"), SCALAR_ROWS, ids=[f"{d.name}+{s!r}" for d, s in SCALAR_ROWS])
def test_a_python_scalar_takes_torchs_dtype_except_an_int_meeting_bool(dtype: limn.DType, scalar: object) -> None:
    want = torch_name(torch.result_type(torch.ones(1, dtype=TORCH[dtype]), scalar))
    got = scalar_dtype(dtype, scalar)
    if dtype == limn.bool_ and type(scalar) is int:
        assert (got.name, want) == ("int32", "int64"), "the spec: a python int lifts a bool tensor to int32"
    else:
        assert got.name == want
    t = Tensor(np.ones(2, dtype.np))
    assert (t + scalar).dtype == got and (scalar * t).dtype == got


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a.name}[2]+{b.name}[]" for a, b in PAIRS])
def test_a_0d_tensor_beside_one_with_dims_promotes_as_torchs(a: limn.DType, b: limn.DType) -> None:
    """torch's rule: a 0-d operand counts only when it is of a higher kind (bool < int < float) than the
    tensor with dims, so float32 + a 0-d float64 stays float32 (the spec's int-meets-half rule still holds)."""
    want = torch.result_type(torch.ones(2, dtype=TORCH[a]), torch.ones((), dtype=TORCH[b]))
    dims, zero = Tensor(np.ones(2, a.np)), Tensor(np.ones((), b.np))
    got = (dims + zero).dtype
    assert (zero * dims).dtype == got and dims.where(dims, zero).dtype == got
    if spec_differs_from_torch(a, b) and a.is_int:
        assert got == limn.float32 and torch_name(want) == b.name, f"{a}[2] + {b}[]: {got}, torch {want}"
    else:
        assert got.name == torch_name(want), f"{a}[2] + {b}[]: limn {got}, torch {want}"


# ---- values at the limits, numpy and c, exact ----

INT64 = np.array([I64.max, I64.min, I64.max - 1, I64.min + 1, 0, -1, 7, 2**40], np.int64)
INT64_B = np.array([1, -1, 2, -2, I64.min, I64.max, 2**62, 2**30], np.int64)
UINT8 = np.array([255, 0, 254, 1, 128, 127, 7, 200], np.uint8)
UINT8_B = np.array([1, 255, 2, 255, 128, 129, 250, 100], np.uint8)
INT8 = np.array([127, -128, -1, 1, 0, -1, 5, -100], np.int8)
BOOL = np.array([True, False, True, True, False, False, True, False])
ARITH = ["x + y", "x - y", "x * y", "-x", "x + 1", "x - 1", "x * 3", "3 - x", "x * x", "x.abs()", "x.maximum(y)"]
COMPARE = ["x < y", "x <= y", "x == y", "x != y", "x > y", "x >= y"]


def rows_for(name: str, x: np.ndarray, y: np.ndarray) -> list:
    return [case(e, grad=False, x=x, y=y, id=f"{name}: {e}") for e in ARITH + COMPARE]


WRAP = Table(
    rows_for("int64", INT64, INT64_B)
    + rows_for("uint8", UINT8, UINT8_B)
    + [
        case("x + (-9223372036854775807 - 1)", grad=False, x=INT64, id="int64: the lowest literal"),
        case("x - 9223372036854775807", grad=False, x=INT64, id="int64: the highest literal"),
        case("x + 2**40", grad=False, x=INT64, id="int64: a python int wider than int32 stays whole"),
        case("x + 300", grad=False, x=UINT8, id="uint8: a python int wraps into the tensor's dtype"),
        case("x - 1", grad=False, x=np.zeros(3, np.uint8), id="uint8: 0 - 1 is 255"),
        case("x + z", grad=False, x=UINT8, z=INT8, id="uint8 + int8 is int16: nothing wraps"),
        case("x * z", grad=False, x=UINT8, z=INT8, id="uint8 * int8 is int16"),
        case("x < z", grad=False, x=UINT8, z=INT8, id="uint8 < int8 compares in int16: 200 < -1 is False"),
        case("x + b", grad=False, x=UINT8, b=BOOL, id="uint8 + bool is uint8"),
        case("x * w", grad=False, x=UINT8, w=INT64, id="uint8 * int64 is int64"),
        case("(x < y).where(x, y)", "torch.where(x < y, x, y)", grad=False, x=INT64, y=INT64_B, id="int64 where"),
        case("(x < y).where(x, y)", "torch.where(x < y, x, y)", grad=False, x=UINT8, y=UINT8_B, id="uint8 where"),
        case("x * 0.5", grad=False, x=UINT8, id="uint8 * a python float is float32"),
        case("x * f", grad=False, x=INT64, f=np.full(8, 0.5, np.float32), id="int64 * float32 is float32"),
    ]
)


@pytest.mark.parametrize("name", WRAP.ids)
def test_int64_and_uint8_arithmetic_wraps_as_torch(device: str, name: str) -> None:
    WRAP.assert_agrees(device, name)


FLOATS32 = np.array([-1.5, -0.5, 0.0, 0.5, 254.9, 255.5, 300.0, 1e10, -300.7, 127.9], np.float32)
FLOATS64 = np.array([-1.5, 2.0**40 + 0.5, -(2.0**62), 9.99, -0.0, 2.0**62, 255.0, -256.5], np.float64)
CONVERSIONS = ["x.byte()", "x.char()", "x.short()", "x.int()", "x.long()", "x.bool()", "x.float()", "x.double()"]

# a float beyond int32 cast to int16 or int32 is undefined in C, and torch gives what x86 does (INT32_MIN, then
# narrowed); limn truncates through int64 and wraps, as for the other ints, so those rows stay inside int32
INSIDE_INT32 = np.where(np.abs(FLOATS32) < 2**31, FLOATS32, 70000.5).astype(np.float32)
CASTS = Table(
    [case(e, grad=False, x=FLOATS32, id=f"float32 {e}: truncate, then wrap") for e in ("x.byte()", "x.char()")]
    + [case("x.long()", grad=False, x=FLOATS32, id="float32 x.long(): truncate toward zero")]
    + [case(e, grad=False, x=INSIDE_INT32, id=f"float32 {e}: truncate, then wrap") for e in ("x.short()", "x.int()")]
    + [case(e, grad=False, x=FLOATS64, id=f"float64 {e}") for e in ("x.long()", "x.byte()", "x.char()")]
    + [case(e, grad=False, x=INT64, id=f"int64 {e}") for e in CONVERSIONS]
    + [case(e, grad=False, x=UINT8, id=f"uint8 {e}") for e in CONVERSIONS]
    + [case(e, grad=False, x=INT8, id=f"int8 {e}") for e in ("x.byte()", "x.long()")]
    + [case(e, grad=False, x=BOOL, id=f"bool {e}") for e in ("x.byte()", "x.long()")]
)


@pytest.mark.parametrize("name", CASTS.ids)
def test_casts_to_and_from_int64_and_uint8_match_torch(device: str, name: str) -> None:
    CASTS.assert_agrees(device, name)


INT64_2D = np.array([[I64.max, 1, 5], [I64.min, -1, 0], [7, I64.max, I64.min]], np.int64)
UINT8_2D = np.array([[255, 1, 5], [0, 200, 128], [7, 255, 0]], np.uint8)
FOLDS = [
    ("x.sum()", None),
    ("x.sum(0)", None),
    ("x.max()", None),
    ("x.min()", None),
    ("x.max(axis=1)", "x.amax(1)"),
    ("x.min(axis=0)", "x.amin(0)"),
    ("x.argmax()", None),
    ("x.argmin(1)", None),
    ("x.any(0)", None),
    ("x.all(1)", None),
]


def fold_rows(name: str, x: np.ndarray) -> list:
    rows = []
    for expr, theirs in FOLDS:
        if name == "uint8" and expr.startswith("x.sum"):
            # the spec keeps a sum's dtype and wraps it; torch sums any int in int64
            theirs = f"{expr}.to(torch.uint8)"
            rows.append(case(expr, theirs, grad=False, x=x, id=f"uint8 {expr} keeps uint8 and wraps (spec, not torch)"))
        else:
            rows.append(case(expr, theirs, grad=False, x=x, id=f"{name} {expr}"))
    return rows


REDUCES = Table(
    fold_rows("int64", INT64_2D)
    + fold_rows("uint8", UINT8_2D)
    + [
        case("x.sum()", grad=False, x=np.zeros((0,), np.int64), id="int64: the sum of nothing is 0"),
        case("x.sum()", grad=False, x=np.array(-5, np.int64), id="int64: a 0-d sum"),
        case("x @ y", grad=False, x=INT64_2D, y=INT64_2D[::-1].copy(), id="int64 matmul wraps"),
        case("x @ y", grad=False, x=UINT8_2D, y=UINT8_2D.T.copy(), id="uint8 matmul wraps"),
        case("x @ v", grad=False, x=UINT8_2D, v=np.array([3, 2, 1], np.uint8), id="uint8 matrix @ vector"),
    ]
)


@pytest.mark.parametrize("name", REDUCES.ids)
def test_int64_and_uint8_reductions_and_matmul_match_torch(device: str, name: str) -> None:
    REDUCES.assert_agrees(device, name)


def test_a_sum_keeps_its_int_dtype_by_the_spec() -> None:
    # torch.sum gives int64 for every int and bool tensor; limn's sum keeps the dtype (bool sums as int32)
    for dtype in ("int64", "int32", "int8", "uint8"):
        assert Tensor(np.ones(3, dtype)).sum().dtype.name == dtype
    assert Tensor(np.ones(300, np.uint8)).sum().item() == 300 % 256


# ---- indices: gather, scatter, embedding, one_hot, cross_entropy with int64 indices ----

TABLE_F = np.arange(15, dtype=np.float32).reshape(5, 3) / 7
ROWS = np.array([[4, 0, 2], [1, 1, 3]], np.int64)
HITS = np.array([[0, 4, 4], [4, 4, 0]], np.int64)
UPD = np.array([[1.5, -2.0, 3.0], [0.25, 1.0, -1.0]], np.float32)
LOOKUPS = Table(
    [
        case("t.gather(0, i)", "torch.gather(t, 0, i)", t=TABLE_F, i=ROWS, id="float32 gather, int64 index"),
        case("t.gather(0, i)", "torch.gather(t, 0, i)", t=UINT8_2D, i=ROWS % 3, grad=False, id="uint8 gather"),
        case("t.gather(1, i)", "torch.gather(t, 1, i)", t=INT64_2D, i=ROWS[:, :2] % 3, grad=False, id="int64 gather"),
        case("t.scatter_add(0, i, u)", "t.scatter_add(0, i, u)", t=TABLE_F, i=HITS, u=UPD, id="float32 scatter_add"),
        case(
            "t.scatter_add(0, i, u)",
            "t.scatter_add(0, i, u)",
            t=np.full((5, 3), 250, np.uint8),
            i=HITS,
            u=np.full((2, 3), 7, np.uint8),
            grad=False,
            id="uint8 scatter_add wraps at collisions",
        ),
        case("t.embedding(i)", "torch.nn.functional.embedding(i, t)", t=TABLE_F, i=ROWS, id="embedding, int64 ids"),
        case("i.one_hot(5)", "torch.nn.functional.one_hot(i, 5)", i=ROWS, grad=False, id="one_hot of int64 ids"),
        case(
            "t.cross_entropy(i)",
            "torch.nn.functional.cross_entropy(t, i)",
            t=TABLE_F[:2],
            i=np.array([2, 0], np.int64),
            id="cross_entropy, int64 targets",
        ),
    ]
)


@pytest.mark.parametrize("name", LOOKUPS.ids)
def test_lookups_take_int64_indices_as_torch(device: str, name: str) -> None:
    LOOKUPS.assert_agrees(device, name)


# ---- a uint8 image: normalized to float32 as torchvision does, and back to bytes ----

IMAGE = np.random.default_rng(0).integers(0, 256, (4, 5, 3)).astype(np.uint8)
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
IMAGES = Table(
    [
        case("((img.float() / 255.0 - m) / s).permute(2, 0, 1)", img=IMAGE, m=MEAN, s=STD, id="normalize"),
        case("(img.float() / 255.0 * 255.0 + 0.5).byte()", img=IMAGE, grad=False, id="to float and back, exact"),
        case("img.float().mean((0, 1))", img=IMAGE, grad=False, id="mean per channel"),
        case("(img > 128).sum()", img=IMAGE, grad=False, id="count of bright pixels"),
        case("img.double() / 255", img=IMAGE, grad=False, id="float64 from uint8"),
        case("(img.float() * s).clamp(0, 255).byte()", img=IMAGE, s=STD * 3, grad=False, id="scaled, clamped, bytes"),
    ]
)


@pytest.mark.parametrize("name", IMAGES.ids)
def test_a_uint8_image_pipeline_matches_torch(device: str, name: str) -> None:
    IMAGES.assert_agrees(device, name)


# ---- host data: numpy arrays keep their dtype; python ints are int32 by the spec ----


@pytest.mark.parametrize("dtype", ["int64", "uint8"])
def test_a_numpy_array_keeps_its_dtype_and_its_limits(dtype: str) -> None:
    info = np.iinfo(dtype)
    a = np.array([info.min, info.max, 0, 1], dtype)
    t = Tensor(a)
    assert t.dtype.name == dtype
    np.testing.assert_array_equal(t.numpy(), a)
    assert Tensor(a[1]).dtype.name == dtype  # a numpy scalar too
    assert Tensor(np.arange(3)).dtype == limn.int64  # numpy's default int is int64, kept as torch.tensor keeps it


def test_a_python_int_list_is_int32_by_the_spec_where_torch_gives_int64() -> None:
    assert Tensor([1, 2]).dtype == limn.int32
    assert torch.tensor([1, 2]).dtype == torch.int64  # the named difference
    with pytest.raises(OverflowError, match=r"does not fit int32.*dtype=limn.int64"):
        Tensor([2**40])
    assert Tensor([2**40, -(2**62)], dtype=limn.int64).tolist() == [2**40, -(2**62)]


def test_a_constant_wraps_into_int64_and_uint8() -> None:
    assert Tensor.full((2,), 2**62, dtype="int64").tolist() == [2**62, 2**62]
    assert Tensor.full((), -1, dtype="uint8").item() == 255
    assert Tensor.full((), 256 + 7, dtype="uint8").item() == 7
    assert Tensor.full((), 2**63, dtype="int64").item() == -(2**63)


def test_an_index_of_a_float_dtype_is_refused_naming_the_int_dtypes() -> None:
    with pytest.raises(TypeError, match=r"indices must be an int tensor \(int64"):
        Tensor(TABLE_F).gather(0, Tensor(np.zeros((1, 3), np.float32)))
