"""What the primitives check and convert in a user's arguments: axes, broadcast shapes, python scalars in a dtype,
host data as a fresh array, and other libraries' names for an argument (numpy's axis= for dim=). Plain functions
of shapes and values, with no Tensor in sight, so the primitives (limn.frontend.primitives) read as the ops they
build.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import numpy as np

from limn import dtypes
from limn.dtypes import DType
from limn.errors import ArgumentError
from limn.graph import provenance
from limn.graph.ops import Shape

Scalar = bool | int | float
TensorLike = Any  # Tensor, numpy array, nested lists or a python scalar

P = ParamSpec("P")
R = TypeVar("R")


def aliases(**names: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Marks a method whose arguments other libraries name differently: aliases(axis="dim") lets it be called
    with numpy's and tinygrad's axis= for torch's dim=, as torch's own argument parser does. This is the one
    place a second name is read: the method body sees its own names alone. An argument given by both names
    is a TypeError that names both."""

    def mark(method: Callable[P, R]) -> Callable[P, R]:
        signature = inspect.signature(method)

        @functools.wraps(method)
        def with_aliases(*args: P.args, **kwargs: P.kwargs) -> R:
            if kwargs and not names.keys().isdisjoint(kwargs):  # the common call names no alias: one check
                _rename(method.__name__, signature, names, args, kwargs)
            return method(*args, **kwargs)

        provenance.forwards(with_aliases.__code__)  # limn.explain names the method called, not this wrapper
        return with_aliases

    return mark


def _rename(what: str, signature: inspect.Signature, names: dict[str, str], args: tuple, kwargs: dict) -> None:
    """kwargs with each alias replaced by the name it stands for; a TypeError where both were given."""
    moved = {alias: kwargs.pop(alias) for alias in names if alias in kwargs}
    given = signature.bind_partial(*args, **kwargs).arguments
    for alias, value in moved.items():
        name = names[alias]
        if name in given:
            raise TypeError(
                f"{what}(): got {name}={given[name]!r} and {alias}={value!r}, two names for one argument; pass one"
                " of them"
            )
        kwargs[name] = given[name] = value


axis_is_dim = aliases(axis="dim")  # torch's parser takes numpy's axis= wherever an op has dim=


def normalize_axis(axis: int, ndim: int, what: str) -> int:
    """axis as an index into the dims, counted from the end when negative. A 0-d tensor takes 0 and -1, as in
    torch, which gives it one dim of size 1 for dim arguments."""
    size = max(ndim, 1)
    if not -size <= axis < size:
        raise IndexError(
            f"{what}: axis {axis} is out of range for a tensor with {ndim} dims; use an axis from {-size} to {size - 1}"
        )
    return axis % size if ndim else 0


def broadcast_shape(a: Shape, b: Shape, what: str) -> Shape:
    """The shape a and b broadcast to, numpy's rule: dims align from the right and a size-1 dim stretches."""
    if a == b:  # most binary ops' operands: one shape already
        return tuple(a)
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb):
        if x != y and x != 1 and y != 1:
            raise ArgumentError(
                f"{what}: shapes {a} and {b} do not broadcast: sizes {x} and {y} differ and neither is 1"
            )
        out.append(max(x, y) if x != 0 and y != 0 else 0)
    return tuple(out)


def const_value(value: Scalar, dtype: DType) -> Scalar:
    """The python value a CONST of `dtype` holds: rounded to the dtype, ints wrapped to its width."""
    if dtype == dtypes.bool_:
        return bool(value)
    if dtype.is_int:
        return wrap_int(int(value), dtype)
    # through a python float (float64), as numpy's cast of an array would: bfloat16's scalar refuses an int past int64
    return float(dtype.np.type(float(value)))


def wrap_int(value: int, dtype: DType) -> int:
    """A python int reduced modulo 2**bits into the range of the int dtype (300 in int8 is 44, -1 in uint8 255)."""
    span = 1 << dtype.bits
    low = 0 if dtype.is_unsigned else -(span >> 1)
    return (value - low) % span + low


def host_array(data: TensorLike, dtype: DType | None) -> np.ndarray:
    """A native-endian, row-major numpy array of a supported dtype holding `data`: `data` itself when it is one
    already (Tensor's buffer is a copy of it, made by the device, which chooses where the copy lives)."""
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        arr = np.asarray(data)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("="))
        src = dtypes.from_numpy(arr.dtype) if dtype is None else dtype
    else:
        try:
            arr = np.array(data)
        except ValueError as e:
            raise ArgumentError(f"Tensor(): cannot make a rectangular array from this data: {e}") from None
        if arr.dtype == object:
            raise TypeError("Tensor(): the data holds objects that are not numbers (ragged lists?)")
        if dtype is not None:
            src = dtype
        elif arr.dtype.kind == "f":
            src = dtypes.float32  # python floats become float32, as in torch
        elif arr.dtype.kind in "iu":
            if arr.size and (arr.min() < -(2**31) or arr.max() >= 2**31):
                raise OverflowError(
                    "Tensor(): an integer in the data does not fit int32, the dtype python ints take; "
                    "pass dtype=limn.int64 to keep it"
                )
            src = dtypes.int32
        else:
            src = dtypes.from_numpy(arr.dtype)
    return np.asarray(arr, dtype=src.np, order="C")


def dim_first(dim: Any, index: Any, spelling: str) -> int:
    """dim, checked to be an int: the order is torch's, dim before index (a tensor there is a mistake)."""
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool):
        return int(dim)
    raise TypeError(f"{spelling}: dim must be an int, got {type(dim).__name__}; the order is torch's, dim first")


def check_requires_grad(requires_grad: bool, dtype: DType, what: str) -> None:
    """A TypeError unless a tensor that requires grad is a float: gradients are only defined for floats."""
    if requires_grad and not dtype.is_float:
        raise TypeError(
            f"{what}: requires_grad=True needs a float dtype; this tensor is {dtype.name} (pass dtype='float32')"
        )


def scalar_dtype(value: Scalar, what: str) -> DType:
    """The dtype a python scalar takes when none is given: bool, int32 for an int (an OverflowError past
    int32, rather than a silent wrap), float32 for a float, as torch's defaults but for its int64."""
    if isinstance(value, bool):
        return dtypes.bool_
    if not isinstance(value, int):
        return dtypes.float32
    if not -(2**31) <= value < 2**31:
        raise OverflowError(
            f"{what}: the python int {value} does not fit int32, limn's dtype for python ints; pass dtype=limn.int64"
        )
    return dtypes.int32


def times_alpha(x: TensorLike, other: TensorLike, alpha: Scalar, what: str) -> TensorLike:
    """other * alpha for torch's add/sub(x, other, alpha=): a float alpha with int operands raises, as in torch."""
    if alpha == 1 and not isinstance(alpha, float):
        return other
    other_is_int = not getattr(getattr(other, "dtype", None), "is_float", False)  # a Tensor's dtype says; data is int
    if isinstance(alpha, float) and not x.dtype.is_float and other_is_int and not isinstance(other, float):
        raise TypeError(f"{what}: alpha={alpha!r} is a float and the operands are ints (torch raises too); use an int")
    return other * alpha
