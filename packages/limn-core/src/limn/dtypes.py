"""The nine dtypes limn computes in, plus bool, and the rules for mixing them.

A DType names a storage format and the numpy dtype that holds it; torch's short names (long, half, ...)
are the same dtypes under another name. Half widths (float16, bfloat16) are
storage only: every device widens them to float32 to compute and rounds back once per value. The
promotion table below is the single answer to "what dtype does a op on these two give"; the docs in
limn-core's README print it cell by cell and tests/core/test_dtypes.py checks every cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


@dataclass(frozen=True, eq=True)
class DType:
    """One element type: its name, its numpy twin, its family ('f' float, 'i' int, signed or not, 'b' bool)
    and its width in bits."""

    name: str
    np: np.dtype
    kind: str
    bits: int

    def __eq__(self, other: object) -> bool:
        # by name (one dtype per name, as __hash__): every op compares dtypes, and the four fields cost more
        return self is other or (self.name == other.name if isinstance(other, DType) else NotImplemented)

    @property
    def itemsize(self) -> int:
        """Bytes per value."""
        return self.np.itemsize

    @property
    def is_float(self) -> bool:
        """float64, float32, float16 and bfloat16."""
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        """The signed ints and uint8 (not bool)."""
        return self.kind == "i"

    @property
    def is_unsigned(self) -> bool:
        """uint8: an int with no negative values, which wraps modulo 2**8 into [0, 255]."""
        return self.np.kind == "u"

    @property
    def is_floating_point(self) -> bool:
        """torch's name for is_float."""
        return self.is_float

    @property
    def is_signed(self) -> bool:
        """Whether the dtype holds negative values, as torch's dtype.is_signed (False for uint8 and bool)."""
        return self.is_float or (self.is_int and not self.is_unsigned)

    @property
    def is_half(self) -> bool:
        """float16 and bfloat16: stored narrow, computed in float32."""
        return self.kind == "f" and self.bits == 16

    @property
    def compute(self) -> DType:
        """The dtype arithmetic on this one runs in: float32 for the half widths, itself otherwise."""
        return float32 if self.is_half else self

    def __hash__(self) -> int:
        # the name alone, unique per dtype, so equal dtypes still hash equal: the generated hash of all four
        # fields hashes the numpy dtype too, and dtypes key the renderer's and scheduler's tables
        return hash(self.name)

    def __repr__(self) -> str:
        return f"limn.{self.name}"


float64 = DType("float64", np.dtype(np.float64), "f", 64)
float32 = DType("float32", np.dtype(np.float32), "f", 32)
float16 = DType("float16", np.dtype(np.float16), "f", 16)
bfloat16 = DType("bfloat16", np.dtype(ml_dtypes.bfloat16), "f", 16)
int64 = DType("int64", np.dtype(np.int64), "i", 64)
int32 = DType("int32", np.dtype(np.int32), "i", 32)
int16 = DType("int16", np.dtype(np.int16), "i", 16)
int8 = DType("int8", np.dtype(np.int8), "i", 8)
uint8 = DType("uint8", np.dtype(np.uint8), "i", 8)
bool_ = DType("bool", np.dtype(np.bool_), "b", 8)

ALL: tuple[DType, ...] = (float64, float32, float16, bfloat16, int64, int32, int16, int8, uint8, bool_)
FLOATS: tuple[DType, ...] = (float64, float32, float16, bfloat16)
INTS: tuple[DType, ...] = (int64, int32, int16, int8, uint8)

# torch's other names for the same dtypes (torch.long is torch.int64): limn exports them, and as_dtype reads
# them, so ported code reads unchanged
TORCH_NAMES = {"double": float64, "float": float32, "half": float16, "long": int64, "int": int32, "short": int16}
BY_NAME: dict[str, DType] = {d.name: d for d in ALL} | TORCH_NAMES
BY_NUMPY: dict[np.dtype, DType] = {d.np: d for d in ALL}


def as_dtype(x: DType | str | np.dtype | type) -> DType:
    """Accepts a DType, its name or torch's ('float32', 'long'), a numpy dtype or python type (int is numpy's
    int64), or a torch dtype (torch.int64, read by its name: limn does not import torch); anything else is a
    TypeError.

    >>> as_dtype("long"), as_dtype(np.uint8), as_dtype(bool)
    (limn.int64, limn.uint8, limn.bool)
    """
    if isinstance(x, DType):
        return x
    if isinstance(x, str) and x.removeprefix("limn.") in BY_NAME:
        return BY_NAME[x.removeprefix("limn.")]
    if type(x).__module__ == "torch" and str(x).removeprefix("torch.") in BY_NAME:
        return BY_NAME[str(x).removeprefix("torch.")]
    try:
        npd = np.dtype(x)
    except TypeError:
        npd = None
    if npd is not None and npd in BY_NUMPY:
        return BY_NUMPY[npd]
    names = ", ".join(d.name for d in ALL)
    raise TypeError(f"dtype {x!r} is not one limn supports; use one of: {names}")


def from_numpy(npd: np.dtype) -> DType:
    """The DType for a numpy array's dtype, or a TypeError that says which cast would work."""
    npd = np.dtype(npd)
    if npd in BY_NUMPY:
        return BY_NUMPY[npd]
    hint = {
        "i": "cast it with .astype(np.int64)",
        "u": "cast it with .astype(np.int64) (limn's one unsigned int is uint8)",
        "c": "limn has no complex dtypes",
        "O": "convert the objects to numbers first",
    }.get(npd.kind, "cast it to float32")
    raise TypeError(f"numpy dtype {npd} is not supported by limn: {hint}")


def _promote_pair(a: DType, b: DType) -> DType:
    if a == b:
        return a
    if a == bool_:
        return b
    if b == bool_:
        return a
    if a.is_int and b.is_int:
        if a.is_unsigned == b.is_unsigned:
            return a if a.bits >= b.bits else b
        # uint8 meeting a signed int: the narrowest signed int holding both ranges (uint8 + int8 is int16)
        signed, unsigned = (b, a) if a.is_unsigned else (a, b)
        return next(d for d in (int16, int32, int64) if d.bits >= max(signed.bits, 2 * unsigned.bits))
    if a.is_int or b.is_int:
        # an int meeting a float joins the floats at float32 or wider
        f = b if a.is_int else a
        return float64 if f == float64 else float32
    # two different floats: the halves meet at float32, anything wider wins
    if a.is_half and b.is_half:
        return float32
    return a if a.bits > b.bits else b


PROMOTION: dict[tuple[DType, DType], DType] = {(a, b): _promote_pair(a, b) for a in ALL for b in ALL}


def promote(a: DType, b: DType) -> DType:
    """The dtype of a binary op on tensors of dtypes a and b (see PROMOTION)."""
    return PROMOTION[(a, b)]


def _kind(d: DType) -> int:
    return 0 if d == bool_ else (1 if d.is_int else 2)


def promote_shaped(a: DType, a_is_0d: bool, b: DType, b_is_0d: bool) -> DType:
    """The dtype of a binary op on two tensors, with torch's rule for a 0-d tensor beside one with dims: the
    0-d one counts only when it is of a higher kind (bool < int < float), as a python scalar would, so
    float32 x + a 0-d float64 stays float32 and int32 x + a 0-d float64 is float64 (limn.dtypes.promote
    otherwise)."""
    if a_is_0d == b_is_0d:
        return promote(a, b)
    dims, zero = (b, a) if a_is_0d else (a, b)
    return promote(dims, zero) if _kind(zero) > _kind(dims) else dims


def scalar_dtype(tensor_dtype: DType, value: bool | int | float) -> DType:
    """The dtype a python scalar takes beside a tensor: the tensor's own, unless the scalar is a float
    meeting an int or bool tensor (then float32), or an int meeting a bool tensor (then int32)."""
    if isinstance(value, bool):
        return tensor_dtype
    if isinstance(value, int):
        return int32 if tensor_dtype == bool_ else tensor_dtype
    return tensor_dtype if tensor_dtype.is_float else float32


def promotion_table() -> str:
    """The promotion table as aligned text, rows and columns in ALL's order."""
    width = max(len(d.name) for d in ALL) + 2
    lines = ["".ljust(width) + "".join(d.name.ljust(width) for d in ALL)]
    for a in ALL:
        lines.append(a.name.ljust(width) + "".join(promote(a, b).name.ljust(width) for b in ALL))
    return "\n".join(line.rstrip() for line in lines)
