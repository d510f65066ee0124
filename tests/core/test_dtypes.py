"""The dtype rules from the spec, one per test: the promotion table cell by cell, python scalars, narrow ints
that wrap modulo 2**width, half widths that reduce in float32 and round once, casts between floats that carry
gradients, and unsupported dtypes refused with a message that says what to do instead.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

import limn
from limn import Tensor
from limn.dtypes import ALL, PROMOTION, promote, promotion_table

# The spec's table, written out: same -> same; bool with x -> x; ints of one signedness -> the wider int;
# uint8 with a signed int -> the narrowest signed int holding both (int16 at least, as torch); an int with a
# float -> float32, or float64 if the float is float64; float16 with bfloat16 -> float32; a half with a wider
# float -> the wider; float32 with float64 -> float64.
EXPECTED_TABLE = """
          float64   float32   float16   bfloat16  int64     int32     int16     int8      uint8     bool
float64   float64   float64   float64   float64   float64   float64   float64   float64   float64   float64
float32   float64   float32   float32   float32   float32   float32   float32   float32   float32   float32
float16   float64   float32   float16   float32   float32   float32   float32   float32   float32   float16
bfloat16  float64   float32   float32   bfloat16  float32   float32   float32   float32   float32   bfloat16
int64     float64   float32   float32   float32   int64     int64     int64     int64     int64     int64
int32     float64   float32   float32   float32   int64     int32     int32     int32     int32     int32
int16     float64   float32   float32   float32   int64     int32     int16     int16     int16     int16
int8      float64   float32   float32   float32   int64     int32     int16     int8      int16     int8
uint8     float64   float32   float32   float32   int64     int32     int16     int16     uint8     uint8
bool      float64   float32   float16   bfloat16  int64     int32     int16     int8      uint8     bool
"""


def expected_cells() -> dict[tuple[str, str], str]:
    header, *rows = EXPECTED_TABLE.strip().splitlines()
    columns = header.split()
    return {(row.split()[0], col): cell for row in rows for col, cell in zip(columns, row.split()[1:])}


CELLS = sorted(expected_cells().items())
BY_NAME = {d.name: d for d in ALL}


def sample(dtype_name: str, shape: tuple[int, ...] = (2, 3)) -> Tensor:
    values = np.arange(1, np.prod(shape) + 1).reshape(shape) % 5
    if dtype_name == "bool":
        return Tensor(values % 2 == 0)
    return Tensor(values.astype(BY_NAME[dtype_name].np))


@pytest.mark.parametrize(("pair", "result"), CELLS, ids=[f"{a}+{b}" for (a, b), _ in CELLS])
def test_promotion_table_cell(pair: tuple[str, str], result: str) -> None:
    a, b = pair
    assert promote(BY_NAME[a], BY_NAME[b]).name == result
    assert PROMOTION[(BY_NAME[a], BY_NAME[b])].name == result


@pytest.mark.parametrize(("pair", "result"), CELLS, ids=[f"{a}+{b}" for (a, b), _ in CELLS])
def test_tensor_arithmetic_takes_the_promoted_dtype(pair: tuple[str, str], result: str) -> None:
    a, b = sample(pair[0]), sample(pair[1])
    for out in (a + b, a * b):
        assert out.dtype.name == result
        assert out.numpy().dtype == BY_NAME[result].np


def test_the_printed_promotion_table_is_the_spec_table() -> None:
    assert promotion_table() == EXPECTED_TABLE.strip("\n")


def test_promotion_is_symmetric() -> None:
    assert all(promote(a, b) == promote(b, a) for a in ALL for b in ALL)


def test_comparisons_give_bool() -> None:
    for name in ("float32", "bfloat16", "int8"):
        assert (sample(name) < sample(name)).dtype == limn.bool_
        assert (sample(name) == 2).numpy().dtype == np.bool_


# ---- python scalars ----

# (tensor dtype, python scalar, the dtype of tensor op scalar)
SCALAR_RULES = [
    ("int8", 1, "int8"),  # an int scalar takes the tensor's int width, not int32
    ("int16", -3, "int16"),
    ("int32", 7, "int32"),
    ("int8", 1.5, "float32"),  # a float scalar lifts an int tensor to float32
    ("int32", 0.5, "float32"),
    ("float16", 3, "float16"),  # any scalar keeps a float tensor's width
    ("float16", 2.5, "float16"),
    ("bfloat16", 0.25, "bfloat16"),
    ("float64", 2, "float64"),
    ("float32", 2.5, "float32"),
    ("bool", True, "bool"),
    ("bool", 2, "int32"),  # an int scalar lifts a bool tensor to int32
    ("bool", 1.5, "float32"),
    ("int8", True, "int8"),
]


@pytest.mark.parametrize(("tensor_dtype", "scalar", "result"), SCALAR_RULES)
def test_a_python_scalar_takes_the_tensors_dtype(tensor_dtype: str, scalar: object, result: str) -> None:
    t = sample(tensor_dtype)
    for out in (t + scalar, scalar + t, t * scalar, scalar * t):
        assert out.dtype.name == result, f"{tensor_dtype} tensor with {scalar!r}"
        assert out.numpy().dtype == BY_NAME[result].np


def test_an_int_scalar_wraps_inside_int8() -> None:
    x = Tensor(np.array([127, -128, 5], np.int8))
    np.testing.assert_array_equal((x + 1).numpy(), np.array([-128, -127, 6], np.int8))


def test_dividing_ints_gives_float32() -> None:
    x = Tensor(np.array([1, 2, 3], np.int16))
    out = x / 2
    assert out.dtype == limn.float32
    np.testing.assert_array_equal(out.numpy(), np.array([0.5, 1.0, 1.5], np.float32))


# ---- narrow ints wrap modulo 2**width ----


def wrap(values: np.ndarray, bits: int) -> np.ndarray:
    """The oracle: exact integer arithmetic (int64), then reduced modulo 2**bits into the signed range."""
    half = 2 ** (bits - 1)
    return (values.astype(np.int64) + half) % (2 * half) - half


NARROW = [("int8", 8), ("int16", 16)]


def narrow_operands(name: str) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(BY_NAME[name].np)
    rng = np.random.default_rng(0)
    a = rng.integers(info.min, info.max + 1, (4, 6))
    b = rng.integers(info.min, info.max + 1, (4, 6))
    a[0, :3] = [info.max, info.min, info.max]  # the edges, where wrapping shows first
    b[0, :3] = [1, -1, info.max]
    return a.astype(BY_NAME[name].np), b.astype(BY_NAME[name].np)


@pytest.mark.parametrize(("name", "bits"), NARROW)
def test_narrow_int_add_wraps(name: str, bits: int) -> None:
    a, b = narrow_operands(name)
    np.testing.assert_array_equal((Tensor(a) + Tensor(b)).numpy(), wrap(a.astype(np.int64) + b, bits))


@pytest.mark.parametrize(("name", "bits"), NARROW)
def test_narrow_int_sub_wraps(name: str, bits: int) -> None:
    a, b = narrow_operands(name)
    np.testing.assert_array_equal((Tensor(a) - Tensor(b)).numpy(), wrap(a.astype(np.int64) - b, bits))


@pytest.mark.parametrize(("name", "bits"), NARROW)
def test_narrow_int_mul_wraps(name: str, bits: int) -> None:
    a, b = narrow_operands(name)
    np.testing.assert_array_equal((Tensor(a) * Tensor(b)).numpy(), wrap(a.astype(np.int64) * b, bits))


@pytest.mark.parametrize(("name", "bits"), NARROW)
def test_narrow_int_neg_wraps(name: str, bits: int) -> None:
    a, _ = narrow_operands(name)
    np.testing.assert_array_equal((-Tensor(a)).numpy(), wrap(-a.astype(np.int64), bits))


@pytest.mark.parametrize(("name", "bits"), NARROW)
def test_narrow_int_sum_wraps(name: str, bits: int) -> None:
    a, _ = narrow_operands(name)
    for axis in (0, 1, None):
        got = Tensor(a).sum(axis=axis)
        assert got.dtype.name == name
        np.testing.assert_array_equal(got.numpy(), wrap(a.astype(np.int64).sum(axis=axis), bits))


@pytest.mark.parametrize(("name", "bits"), NARROW)
def test_narrow_int_matmul_wraps(name: str, bits: int) -> None:
    a, b = narrow_operands(name)
    got = Tensor(a) @ Tensor(b).transpose()
    np.testing.assert_array_equal(got.numpy(), wrap(a.astype(np.int64) @ b.astype(np.int64).T, bits))


@pytest.mark.parametrize(("name", "bits"), NARROW)
def test_narrow_int_max_min_and_argmin_see_the_extremes(name: str, bits: int) -> None:
    a, _ = narrow_operands(name)
    np.testing.assert_array_equal(Tensor(a).max(axis=1).numpy(), a.max(axis=1))
    np.testing.assert_array_equal(Tensor(a).min(axis=1).numpy(), a.min(axis=1))
    edge = np.array([0, np.iinfo(a.dtype).min, 3], a.dtype)  # -min wraps to min, so min needs care
    assert Tensor(edge).min().item() == edge.min()
    assert Tensor(edge).argmin().item() == 1


@pytest.mark.parametrize(
    ("source", "target", "bits"), [("int32", "int8", 8), ("int32", "int16", 16), ("int16", "int8", 8)]
)
def test_narrowing_int_casts_wrap(source: str, target: str, bits: int) -> None:
    values = np.array([0, 127, 128, 255, 256, -129, 40000, -40000, 2**31 - 1], np.int64)
    values = values[(values >= np.iinfo(BY_NAME[source].np).min) & (values <= np.iinfo(BY_NAME[source].np).max)]
    got = Tensor(values.astype(BY_NAME[source].np)).cast(target)
    assert got.dtype.name == target
    np.testing.assert_array_equal(got.numpy(), wrap(values, bits))


def test_float_to_int_casts_truncate_toward_zero() -> None:
    x = Tensor(np.array([-2.7, -0.5, 0.5, 2.7, 100.9], np.float32))
    np.testing.assert_array_equal(x.cast("int8").numpy(), np.array([-2, 0, 0, 2, 100], np.int8))
    np.testing.assert_array_equal(x.cast("int32").numpy(), np.array([-2, 0, 0, 2, 100], np.int32))


# ---- half widths: storage only, reduced in float32 and rounded once ----

HALVES = [("float16", np.float16, 11), ("bfloat16", ml_dtypes.bfloat16, 8)]  # name, numpy type, mantissa bits


def naive_half_sum(values: np.ndarray) -> np.ndarray:
    """What limn must not do: keep the running total in the half width, rounding after every add."""
    total = values.dtype.type(0)
    for v in values:
        total = values.dtype.type(np.float32(total) + np.float32(v))
    return total


@pytest.mark.parametrize(("name", "np_type", "precision"), HALVES)
def test_half_width_sum_is_a_float32_sum_rounded_once(name: str, np_type: type, precision: int) -> None:
    values = np.random.default_rng(0).standard_normal(300).astype(np_type)
    got = Tensor(values).sum(axis=0)
    assert got.dtype.name == name
    want = np.sum(values.astype(np.float32), axis=0).astype(np_type)
    assert got.numpy().tobytes() == want.tobytes(), f"{got.numpy()} != {want}"


@pytest.mark.parametrize(("name", "np_type", "precision"), HALVES)
def test_half_width_sum_differs_from_half_accumulation(name: str, np_type: type, precision: int) -> None:
    """1 + n * 2**-precision with n = 2**precision: each small term is half an ulp of 1.0, so a half-width
    accumulator rounds every add back to 1.0 (ties go to even), while a float32 total reaches 2.0 exactly."""
    n = 2**precision
    values = np.array([1.0] + [2.0**-precision] * n).astype(np_type)
    assert float(naive_half_sum(values)) == 1.0
    assert float(Tensor(values).sum().item()) == 2.0


@pytest.mark.parametrize(("name", "np_type", "precision"), HALVES)
def test_half_width_matmul_keeps_its_total_in_float32(name: str, np_type: type, precision: int) -> None:
    n = 2**precision
    a = np.array([[1.0] + [2.0**-precision] * n]).astype(np_type)  # (1, n + 1)
    b = np.ones((n + 1, 1), np_type)
    out = Tensor(a) @ Tensor(b)
    assert out.dtype.name == name
    assert float(out.item()) == 2.0


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_casting_a_float32_master_weight_to_a_half_width_carries_its_gradient(half: str) -> None:
    """The mixed-precision pattern: float32 weights, half-width compute, float32 gradients."""
    rng = np.random.default_rng(0)
    w_np, x_np = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((2, 3))
    master = Tensor(w_np, requires_grad=True)
    x = Tensor(x_np, dtype=half)
    loss = (x @ master.cast(half)).sum()
    assert loss.dtype.name == half
    loss.backward()
    assert master.grad.dtype == limn.float32

    torch_dtype = getattr(torch, half)
    tw = torch.tensor(w_np, requires_grad=True)
    (torch.tensor(x_np).to(torch_dtype) @ tw.to(torch_dtype)).float().sum().backward()
    np.testing.assert_allclose(master.grad.numpy(), tw.grad.numpy(), rtol=1e-2, atol=1e-2)


def test_casting_between_float32_and_float64_carries_gradients_both_ways() -> None:
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)  # float32
    (x.cast("float64") ** 2).sum().backward()
    assert x.grad.dtype == limn.float32
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])
    y = Tensor(np.array([1.0, 2.0]), requires_grad=True)  # float64
    (y.cast("float32") * 3).sum().backward()
    assert y.grad.dtype == limn.float64
    np.testing.assert_array_equal(y.grad.numpy(), [3.0, 3.0])


def test_float64_gradients_keep_float64() -> None:
    x = Tensor(np.array([0.1, 0.2]), requires_grad=True)
    (x.exp() * x).sum().backward()
    assert x.grad.dtype == limn.float64
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.1, 0.2]) * (1 + np.array([0.1, 0.2])), rtol=1e-14)


# ---- what limn refuses, and how it says so ----

UNSUPPORTED_ARRAYS = {
    "uint16": (np.array([1, 2], np.uint16), r"uint16.*astype\(np\.int64\)"),
    "uint64": (np.array([1, 2], np.uint64), r"uint64.*astype\(np\.int64\)"),
    "complex": (np.array([1 + 2j]), r"complex128.*no complex"),
    "object": (np.array([1, "a"], dtype=object), r"object.*objects to numbers"),
}


@pytest.mark.parametrize("kind", UNSUPPORTED_ARRAYS)
def test_numpy_arrays_of_unsupported_dtypes_are_refused(kind: str) -> None:
    array, message = UNSUPPORTED_ARRAYS[kind]
    with pytest.raises(TypeError, match=message):
        Tensor(array)


def test_python_complex_data_is_refused() -> None:
    with pytest.raises(TypeError, match="complex"):
        Tensor([1 + 2j, 3])


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "complex64", np.uint64, "float128"])
def test_unsupported_dtype_names_are_refused_with_the_supported_list(dtype: object) -> None:
    with pytest.raises(TypeError, match="not one limn supports; use one of: float64, float32"):
        Tensor([1, 2], dtype=dtype)


def test_casting_to_an_unsupported_dtype_is_refused() -> None:
    with pytest.raises(TypeError, match="uint16"):
        Tensor([1, 2]).cast("uint16")


def test_requires_grad_on_an_int_tensor_is_refused() -> None:
    with pytest.raises(TypeError, match="requires_grad=True needs a float dtype"):
        Tensor([1, 2], requires_grad=True)
