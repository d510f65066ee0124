"""limn: a deep learning framework built to be read.

Tensors are lazy: operations build a graph over 19 primitive ops, and nothing computes until a value is
asked for (.numpy(), .item(), .realize()). Devices (numpy, the reference; c and cuda from their own
packages) are found through the `limn.devices` entry point group and chosen with set_device().
"""

__path__ = __import__("pkgutil").extend_path(__path__, __name__)  # limn.* modules ship in several packages

from limn.autograd import enable_grad, is_grad_enabled, no_grad
from limn.creation import manual_seed
from limn.device import DeviceError, current_device, devices, get_device, register_device, set_device
from limn.dtypes import DType, bfloat16, bool_, float16, float32, float64, int8, int16, int32
from limn.engine import realize
from limn.tensor import Tensor

__version__ = "0.1.1"

__all__ = [
    "DType",
    "DeviceError",
    "Tensor",
    "bfloat16",
    "bool_",
    "current_device",
    "devices",
    "enable_grad",
    "float16",
    "float32",
    "float64",
    "get_device",
    "int8",
    "int16",
    "int32",
    "is_grad_enabled",
    "manual_seed",
    "no_grad",
    "realize",
    "register_device",
    "set_device",
]
