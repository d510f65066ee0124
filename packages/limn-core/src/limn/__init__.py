"""limn: a deep learning framework built to be read.

Tensors are lazy: operations build a graph over 19 primitive ops, and nothing computes until a value is
asked for (.numpy(), .item(), .realize()). Devices (numpy, the reference; c and cuda from their own
packages) are found through the `limn.devices` entry point group and chosen with set_device().
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)  # limn.* modules ship in several packages

from limn import provenance  # noqa: F401  (LIMN_EXPLAIN=1 starts recording at import)
from limn.autograd import enable_grad, is_grad_enabled, no_grad
from limn.creation import manual_seed
from limn.device import DeviceError, current_device, devices, get_device, register_device, set_device
from limn.dtypes import DType, bfloat16, bool_, float16, float32, float64, int8, int16, int32, int64, uint8
from limn.engine import realize
from limn.errors import ArgumentError
from limn.tensor import Tensor

# torch's other names for the same dtypes (limn.long is limn.int64), so ported code reads unchanged
double, float, half = float64, float32, float16
long, int, short, bool = int64, int32, int16, bool_

__version__ = "0.1.1"

__all__ = [
    "ArgumentError",
    "DType",
    "DeviceError",
    "Tensor",
    "bfloat16",
    "bool_",
    "current_device",
    "devices",
    "double",
    "enable_grad",
    "float16",
    "float32",
    "float64",
    "get_device",
    "half",
    "int8",
    "int16",
    "int32",
    "int64",
    "is_grad_enabled",
    "long",
    "manual_seed",
    "no_grad",
    "realize",
    "register_device",
    "set_device",
    "short",
    "uint8",
]


def __getattr__(name: str) -> object:
    """torch's module-level spellings: limn.f(...) is Tensor.f(...) for every public function of Tensor, so
    limn.cat([a, b], 1), limn.zeros(2, 3), limn.exp(x) and limn.where(c, a, b) read as torch.cat, torch.zeros,
    torch.exp and torch.where do. A name that is a limn module (limn.nn, limn.optim, and limn.einsum,
    limn.scatter, limn.view, limn.device, whose functions are Tensor.einsum, ...) stays the module, so
    `from limn import nn` still gives it."""
    import importlib.util

    attr = getattr(Tensor, name, None) if not name.startswith("_") else None
    if callable(attr) and not isinstance(attr, type) and importlib.util.find_spec(f"limn.{name}") is None:
        return attr
    provided = _provided_functions().get(name)
    if provided is not None:  # a function another limn package adds: limn.explain from limn-compiler
        return provided.load()
    raise AttributeError(f"module 'limn' has no attribute {name!r}")


def _provided_functions() -> dict:
    """The `limn.functions` entry points: functions the packages above core put in limn's namespace (they
    cannot be imported here, since core imports nothing above it)."""
    from importlib import metadata

    return {ep.name: ep for ep in metadata.entry_points(group="limn.functions")}


# limn.float, limn.int and limn.bool are torch's names too, left out of __all__ so that `from limn import *`
# does not hide python's float, int and bool
