"""limn: a deep learning framework built to be read.

Tensors are lazy: operations build a graph over 19 primitive ops, and nothing computes until a value is
asked for (.numpy(), .item(), .realize()). Devices (numpy, the reference; c and cuda from their own
packages) are found through the `limn.devices` entry point group and chosen with set_device().
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)  # limn.* modules ship in several packages

from limn.autograd import enable_grad, inference_mode, is_grad_enabled, no_grad
from limn.composed.creation import manual_seed
from limn.dtypes import DType, bfloat16, bool_, float16, float32, float64, int8, int16, int32, int64, uint8
from limn.errors import ArgumentError
from limn.frontend.tensor import Tensor
from limn.graph import provenance  # noqa: F401  (LIMN_EXPLAIN=1 starts recording at import)
from limn.runtime.device import (
    Device,
    DeviceError,
    current_device,
    devices,
    get_device,
    register_device,
    set_device,
)
from limn.runtime.engine import realize

# torch's other names for the same dtypes (limn.long is limn.int64), so ported code reads unchanged
double, float, half = float64, float32, float16
long, int, short, bool = int64, int32, int16, bool_

__version__ = "0.2.0"

__all__ = [
    "ArgumentError",
    "DType",
    "DeviceError",
    "device",
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
    "inference_mode",
    "realize",
    "register_device",
    "set_device",
    "short",
    "uint8",
]


def device(name: str | None = None) -> Device:
    """torch.device's place: the device object called `name` ("numpy", "c", "cuda", ...), or the current one
    when no name is given. A tensor's `device=` argument takes the name or this object.

        >>> device("numpy").name
        'numpy'
    """
    return get_device(name)


def __getattr__(name: str) -> object:
    """What `limn.<name>` finds when the name is not defined above, in this order:
    - a sub-package or module of limn (limn.nn, limn.optim, limn.diagram), imported on first use, so
      `import limn; limn.optim.AdamW` works as torch's does;
    - a public function of Tensor, as torch's module-level spellings: limn.cat([a, b], 1), limn.zeros(2, 3),
      limn.exp(x), limn.einsum("ij,jk->ik", a, b) and limn.where(c, a, b) read as torch's do. No module of limn
      is named after one of these (a test holds it), so the two never compete for a name;
    - a function a package above core provides through the `limn.functions` entry points (limn.explain)."""
    import importlib
    import importlib.util

    if name.startswith("_"):
        raise AttributeError(f"module 'limn' has no attribute {name!r}")
    if importlib.util.find_spec(f"limn.{name}") is not None:
        return importlib.import_module(f"limn.{name}")
    attr = getattr(Tensor, name, None)
    if callable(attr) and not isinstance(attr, type):
        return attr
    provided = _provided_functions().get(name)
    if provided is not None:
        return provided.load()
    raise AttributeError(f"module 'limn' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The names above, the sub-packages and modules, and the provided functions (not Tensor's methods)."""
    import pkgutil

    submodules = {info.name for info in pkgutil.iter_modules(__path__)}
    return sorted({*globals(), *submodules, *_provided_functions()})


def _provided_functions() -> dict:
    """The `limn.functions` entry points: functions the packages above core put in limn's namespace (they
    cannot be imported here, since core imports nothing above it)."""
    from importlib import metadata

    return {ep.name: ep for ep in metadata.entry_points(group="limn.functions")}


# limn.float, limn.int and limn.bool are torch's names too, left out of __all__ so that `from limn import *`
# does not hide python's float, int and bool
