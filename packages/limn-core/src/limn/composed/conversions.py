"""torch's conversion methods and small spellings: .float() .long() .to(dtype) .type_as(y), .size() .dim() ...

Each takes a tensor and gives a tensor cast to another dtype (CAST, the one primitive under all of them) or
a plain python answer about the tensor (its shape, rank, element count, width). A tensor's device moves only
through .to(device), a copy computed at the call. The methods carry torch's names.
Pipeline: **tensor (composed ops)** -> graph (CAST) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.dtypes import DType
from limn.runtime.device import get_device

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def caster(name: str, dtype: DType) -> Callable[[Tensor], Tensor]:
    """torch's x.<name>() for one dtype: x.long() is x.cast(limn.int64), and x itself when it is one already.
    Floats to ints truncate toward zero and wrap, ints wrap, anything to bool is != 0 (Tensor.cast)."""

    def method(x: Tensor) -> Tensor:
        return x.cast(dtype)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (
        f"x.{name}() is x.cast(limn.{dtype.name}), as torch's: x itself when it is {dtype.name} already; floats "
        "to ints truncate toward zero and wrap, narrowing ints wrap, anything to bool is != 0."
    )
    return method


def _as_dtype_or_none(arg: Any) -> DType | None:
    """arg as a dtype when it names one (a DType, 'int64', np.uint8, torch.long), None when it cannot."""
    if isinstance(arg, DType):
        return arg
    try:
        return dtypes.as_dtype(arg)
    except TypeError:
        return None


# torch's legacy type names, which x.type() gives and takes: x.type() is 'limn.FloatTensor' for float32
LEGACY_NAMES: dict[DType, str] = {
    dtypes.float64: "DoubleTensor",
    dtypes.float32: "FloatTensor",
    dtypes.float16: "HalfTensor",
    dtypes.bfloat16: "BFloat16Tensor",
    dtypes.int64: "LongTensor",
    dtypes.int32: "IntTensor",
    dtypes.int16: "ShortTensor",
    dtypes.int8: "CharTensor",
    dtypes.uint8: "ByteTensor",
    dtypes.bool_: "BoolTensor",
}
_BY_LEGACY_NAME = {name: dtype for dtype, name in LEGACY_NAMES.items()}


class ConversionsMixin:
    """Tensor's dtype and device conversions (to, type, the casters like .long()) and its torch-style facts (dim,
    element_size)."""

    __slots__ = ()

    def to(
        self,
        *args: Any,
        dtype: DType | str | None = None,
        device: str | None = None,
        non_blocking: bool = False,
        copy: bool = False,
    ) -> Tensor:
        """torch's Tensor.to: x.to(dtype), x.to(device), x.to(device, dtype), x.to(other) (other's device and
        dtype), with the same keywords. A cast is lazy and keeps gradients between floats; a move is a copy
        computed now, a new leaf, and none is made to x's own device, where the value stays lazy and keeps its
        gradients, as torch's. x itself when nothing changes, unless copy.
        non_blocking is accepted and changes nothing: every limn move is done when it returns.

        Trap: a device is a limn device name ('numpy', 'c'); torch's 'cpu' and 'cuda:0' are DeviceErrors naming them.

        >>> Tensor([1.5, -2.5]).to("int64").tolist(), Tensor([1, 2]).to(dtypes.float64).dtype
        ([1, -2], limn.float64)
        """
        if len(args) > 2:
            raise TypeError(f"to() takes at most a device and a dtype, got {len(args)} positional arguments: {args!r}")
        for arg in args:
            if isinstance(arg, limn.Tensor):
                if len(args) != 1:
                    raise TypeError("to(other): a tensor argument comes alone; it gives both the device and the dtype")
                device, dtype = arg.device, arg.dtype
            elif (as_dtype := _as_dtype_or_none(arg)) is not None:
                dtype = as_dtype
            elif isinstance(arg, str):
                device = arg
            else:
                raise TypeError(f"to(): {arg!r} is neither a dtype (limn.int64, 'float32') nor a device name ('numpy')")
        out = self if dtype is None else self.cast(dtypes.as_dtype(dtype))
        if device is not None and get_device(device).name != out.device:
            return limn.Tensor(out.numpy(), device=get_device(device).name)  # computed now: a new leaf there
        return out.contiguous() if copy and out is self else out  # on its device already: lazy, gradients kept

    def type(self, dtype: DType | str | None = None, non_blocking: bool = False) -> Tensor | str:
        """torch's Tensor.type: with no dtype the legacy type name ('limn.FloatTensor' where torch says
        'torch.FloatTensor'); with one, x cast to it. dtype may also be a legacy name, with either prefix.

        >>> Tensor([1.0]).type(), Tensor([1.7]).type("limn.LongTensor").tolist()
        ('limn.FloatTensor', [1])
        """
        if dtype is None:
            return f"limn.{LEGACY_NAMES[self.dtype]}"
        if isinstance(dtype, str):
            legacy = dtype.removeprefix("torch.").removeprefix("limn.")
            if legacy in _BY_LEGACY_NAME:
                return self.cast(_BY_LEGACY_NAME[legacy])
        return self.cast(dtypes.as_dtype(dtype))

    def type_as(self, other: Tensor) -> Tensor:
        """x cast to other's dtype (x itself when it has it), as torch's x.type_as(other)."""
        if not isinstance(other, limn.Tensor):
            raise TypeError(f"type_as(other): other must be a Tensor, got {type(other).__name__}")
        return self.cast(other.dtype)

    # ---- torch's small spellings: answers about a tensor, computed from its shape and dtype alone ----
    def dim(self) -> int:
        """The number of dims (x.ndim), as torch's dim() and ndimension()."""
        return self.ndim

    def element_size(self) -> int:
        """The bytes one element takes (4 for float32, 1 for uint8 and bool), as torch's element_size()."""
        return self.dtype.itemsize

    def is_floating_point(self) -> bool:
        """Whether the dtype is a float (float64, float32, float16, bfloat16)."""
        return self.dtype.is_float

    def is_signed(self) -> bool:
        """Whether the dtype holds negative values: False for uint8 and bool, as torch's is_signed()."""
        return self.dtype.is_signed

    ndimension = dim

    # torch's small spellings of cast
    double = caster("double", dtypes.float64)
    float = caster("float", dtypes.float32)
    half = caster("half", dtypes.float16)
    bfloat16 = caster("bfloat16", dtypes.bfloat16)
    long = caster("long", dtypes.int64)
    int = caster("int", dtypes.int32)
    short = caster("short", dtypes.int16)
    char = caster("char", dtypes.int8)
    byte = caster("byte", dtypes.uint8)
    bool = caster("bool", dtypes.bool_)
