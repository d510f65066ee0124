"""torch's conversion methods and small spellings against torch: .float() .double() .half() .bfloat16() .int()
.long() .short() .char() .byte() .bool(), .to(), .type(), .type_as(), and .size() .dim() .numel() and friends.

The casts run on the numpy device and on c, forward and backward (a cast between floats carries the gradient;
a cast to an int or bool cuts it, as torch's); the spellings are answers about shape and dtype, checked for
every dtype. A float past an int's range (NaN, inf, 3e9 to int32) converts as torch's does on x86: to the
lowest value of int64 or int32, the narrower ints wrapping from int32. limn's named differences: x.size is
also the element count (numpy's x.size), and x.type() says 'limn.FloatTensor' where torch says
'torch.FloatTensor'.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracle import Table, case

import limn
from limn import Tensor
from limn.dtypes import ALL

TORCH = {d: getattr(torch, d.name) for d in ALL}
CASTS = ("float", "double", "half", "bfloat16", "int", "long", "short", "char", "byte", "bool")

FLOATS = np.array([[-2.75, -0.5, 0.0, 0.5], [1.0, 3.25, 100.9, -126.5]], np.float32)
SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 1e5, 3e38, 1e-40, -1.5], np.float32)
# past every int range, at its edges, and the values that truncate into range just outside it
OUT_OF_RANGE = [np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20, 300.0, -300.0, 255.9, 256.0, -0.9, 2147483520.0]
OUT_OF_RANGE_64 = OUT_OF_RANGE + [-2147483648.75, 2147483647.9, 9.3e18, -(2.0**63), 2.0**63]
INTS = np.array([[-(2**62), -1, 0, 255], [256, 2**31, 70000, 7]], np.int64)
BYTES = np.array([0, 1, 127, 128, 255, 200], np.uint8)
BOOLS = np.array([True, False, True])


def spelled(method: str) -> str:
    """x.<method>(), read back as float32 for bfloat16, which torch's .numpy() (the oracle's) cannot give."""
    return "x.bfloat16().float()" if method == "bfloat16" else f"x.{method}()"


TABLE = Table(
    [case(spelled(m), x=FLOATS, id=f"float32 x.{m}()") for m in CASTS]
    + [case(spelled(m), x=SPECIALS, id=f"float32 specials x.{m}()") for m in ("double", "half", "bfloat16", "bool")]
    + [
        case(f"x.{m}()", x=np.array(values, dtype), grad=False, id=f"{np.dtype(dtype)} past the range x.{m}()")
        for m in ("int", "long", "short", "char", "byte")
        for dtype, values in ((np.float32, OUT_OF_RANGE), (np.float64, OUT_OF_RANGE_64))
    ]
    + [case(spelled(m), x=INTS, grad=False, id=f"int64 x.{m}()") for m in CASTS]
    + [case(spelled(m), x=BYTES, grad=False, id=f"uint8 x.{m}()") for m in CASTS]
    + [case(spelled(m), x=BOOLS, grad=False, id=f"bool x.{m}()") for m in CASTS]
    + [
        case("x.double().float()", x=FLOATS, id="a round trip through float64 keeps the gradient"),
        case("(x.double() * y.double()).float()", x=FLOATS, y=FLOATS[::-1].copy(), id="float64 products"),
        case("x.half().float() * 2", x=FLOATS, id="through float16 and back"),
        case("x.long().float() * x", x=FLOATS, id="the long() path carries no gradient"),
        case("x.to(limn.float64)", "x.to(torch.float64)", x=FLOATS, id="to(dtype)"),
        case("x.to(dtype=limn.int64)", "x.to(dtype=torch.int64)", x=FLOATS, id="to(dtype=)"),
        case("x.to(i)", x=FLOATS, i=INTS, id="to(other) takes other's dtype"),
        case("x.type_as(i)", x=FLOATS, i=INTS, id="type_as an int64 tensor"),
        case("i.type_as(x)", x=FLOATS, i=INTS, id="type_as a float32 tensor"),
        case("x.type(limn.float16)", "x.type(torch.float16)", x=FLOATS, id="type(dtype)"),
        case("x.type('limn.LongTensor')", "x.type('torch.LongTensor')", x=FLOATS, id="type(legacy name)"),
        case("x.byte().float() / 255", x=FLOATS, id="to bytes and back to a float"),
    ]
)


@pytest.mark.parametrize("name", TABLE.ids)
def test_conversions_match_torch(device: str, name: str) -> None:
    TABLE.assert_agrees(device, name)


@pytest.mark.parametrize("method", CASTS)
def test_each_conversion_gives_torchs_dtype_and_cuts_the_gradient_as_torch(method: str) -> None:
    x = Tensor(FLOATS, requires_grad=True)
    tx = torch.tensor(FLOATS, requires_grad=True)
    ours, theirs = getattr(x, method)(), getattr(tx, method)()
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    assert ours.requires_grad == theirs.requires_grad


def test_a_conversion_to_its_own_dtype_is_the_tensor_itself() -> None:
    x = Tensor(FLOATS)
    assert x.float() is x and x.to(limn.float32) is x and x.type_as(x) is x and x.to("numpy") is x
    assert x.to(limn.float32, copy=True) is not x


# ---- to(): dtypes and devices in every spelling torch has ----


def test_to_reads_a_dtype_from_each_spelling() -> None:
    x = Tensor(FLOATS)
    for dtype in (limn.int64, limn.long, "int64", "long", np.int64, torch.int64, torch.long):
        assert x.to(dtype).dtype == limn.int64, dtype
    assert x.to(int).dtype == limn.int64 and x.to(float).dtype == limn.float64  # python types as numpy reads them
    assert x.to(bool).dtype == limn.bool_


def test_to_a_device_moves_and_to_a_device_and_dtype_does_both(device: str) -> None:
    x = Tensor(FLOATS, device="numpy")
    moved = x.to(device, limn.int64)
    assert (moved.device, moved.dtype) == (limn.get_device(device).name, limn.int64)
    np.testing.assert_array_equal(moved.numpy(), FLOATS.astype(np.int64))
    assert x.to(device=device, dtype="float64").dtype == limn.float64
    other = Tensor(INTS, device=device)
    assert (x.to(other).device, x.to(other).dtype) == (other.device, limn.int64)


def test_to_its_own_device_keeps_the_value_lazy_and_its_gradient() -> None:
    x = Tensor(FLOATS, requires_grad=True)
    y = (x * 3).to("numpy")
    assert y.requires_grad
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(FLOATS.shape, 3, np.float32))


def test_to_refuses_what_is_neither_a_dtype_nor_a_device() -> None:
    x = Tensor(FLOATS)
    with pytest.raises(TypeError, match=r"neither a dtype .* nor a device name"):
        x.to(3.5)
    with pytest.raises(TypeError, match="at most a device and a dtype"):
        x.to("numpy", limn.int64, limn.int8)
    with pytest.raises(TypeError, match="a tensor argument comes alone"):
        x.to(x, limn.int64)
    with pytest.raises(limn.DeviceError, match="cpu"):
        x.to("cpu")  # torch's device names are not limn's


def test_type_with_no_dtype_names_the_legacy_type_as_torch_with_limns_prefix() -> None:
    for dtype in ALL:
        legacy = torch.ones(1, dtype=TORCH[dtype]).type()
        assert Tensor(np.ones(1, dtype.np)).type() == legacy.replace("torch.", "limn.")
        assert Tensor(FLOATS).type(legacy).dtype == dtype  # and it reads torch's names back


def test_type_as_refuses_a_non_tensor() -> None:
    with pytest.raises(TypeError, match="other must be a Tensor"):
        Tensor(FLOATS).type_as(np.ones(2))


# ---- the small spellings: shape, rank, count, width ----

SHAPES = [(), (0,), (5,), (2, 3), (2, 0, 4), (1, 2, 3, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_size_dim_and_numel_are_torchs(shape: tuple[int, ...]) -> None:
    x, tx = Tensor.zeros(shape), torch.zeros(shape)
    assert x.size() == tuple(tx.size())
    for d in range(-len(shape), len(shape)):
        assert x.size(d) == tx.size(d)
    assert x.dim() == x.ndimension() == tx.dim()
    assert x.numel() == x.nelement() == tx.numel()
    assert type(x.numel()) is int


def test_size_is_also_the_element_count_as_numpys() -> None:
    x = Tensor.zeros((2, 3))
    assert x.size == 6 and x.size * 2 == 12 and x.size() == (2, 3)  # the named difference from torch


def test_size_of_a_dim_out_of_range_raises_indexerror_as_torch() -> None:
    with pytest.raises(IndexError, match="out of range"):
        Tensor.zeros((2, 3)).size(2)
    with pytest.raises(IndexError, match="0-d tensor has no dims"):
        Tensor.zeros(()).size(0)
    with pytest.raises(IndexError):
        torch.zeros(()).size(0)


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: d.name)
def test_element_size_is_floating_point_and_is_signed_are_torchs(dtype: limn.DType) -> None:
    x, tx = Tensor(np.ones(2, dtype.np)), torch.ones(2, dtype=TORCH[dtype])
    assert x.element_size() == tx.element_size() == dtype.itemsize
    assert x.is_floating_point() == tx.is_floating_point() == dtype.is_floating_point
    assert x.is_signed() == tx.is_signed() == dtype.is_signed


NAMES = ["float", "double", "half", "bfloat16", "long", "int", "short", "int8", "uint8", "bool", "int64", "float16"]


@pytest.mark.parametrize("name", NAMES)
def test_torchs_dtype_names_are_limns(name: str) -> None:
    ours, theirs = getattr(limn, name), getattr(torch, name)
    assert ours.name == str(theirs).removeprefix("torch.")
    assert limn.dtypes.as_dtype(name) is ours and limn.dtypes.as_dtype(theirs) is ours
    assert Tensor(np.ones(2, ours.np)).dtype == ours
