"""limn.nn.init: torch.nn.init's initializers, each overwriting a tensor's values in place and returning it.

Each takes a tensor (a parameter, any float dtype, on any device) and the distribution's arguments as torch
names them, draws the values from the generator limn.manual_seed seeds (limn.composed.random.rng), and writes them with
an assign realized at once, so a later step never replays the init. The fans and gains are torch's exactly.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import contextlib
import math
import threading
import warnings
from collections.abc import Callable, Iterator

import numpy as np

from limn import dtypes
from limn.autograd import no_grad
from limn.composed.random import sampling
from limn.composed.random.rng import Generator
from limn.frontend.tensor import Tensor

__all__ = [
    "calculate_gain",
    "constant_",
    "eye_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]

_skipping = threading.local()  # set while skip_init builds a module, in that thread only


@contextlib.contextmanager
def skipped(placeholders: bool = False) -> Iterator[None]:
    """Layers built inside leave their parameters uninitialized (limn.nn.utils.skip_init). With `placeholders`
    they are not even allocated: each is a lazy zero that a loader must replace before anything reads it (a
    placeholder read in a captured step would be a constant there), as limn.models' loader does."""
    before = getattr(_skipping, "mode", None)
    _skipping.mode = "placeholders" if placeholders else "zeros"
    try:
        yield
    finally:
        _skipping.mode = before


def parameter(shape: tuple[int, ...], dtype: dtypes.DType, values: Callable[[], Tensor]) -> Tensor:
    """A layer's new parameter: `values()` made trainable; inside skip_init zeros (Tensor.empty), which cost no
    random draws; inside skipped(placeholders=True) a lazy zero that costs no memory either."""
    mode = getattr(_skipping, "mode", None)
    if mode == "zeros":
        return Tensor.empty(shape, dtype=dtype, requires_grad=True)
    if mode == "placeholders":
        placeholder = Tensor.full(shape, 0.0, dtype=dtype)  # a CONST: nothing allocated
        placeholder.requires_grad = True  # a leaf the parameter walk names; never realized, replaced
        return placeholder
    return values().requires_grad_()


_GAIN_ONE = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """torch.nn.init.calculate_gain: the scale that keeps activations' variance through `nonlinearity`:
    1 for linear, conv* and sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope**2)) for
    leaky_relu (slope `param`, 0.01 when None), 3/4 for selu.

    >>> calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    True
    """
    if nonlinearity in _GAIN_ONE or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) as torch computes them: shape[1] and shape[0], times the receptive field
    (the product of the dims past the second) for conv weights (out, in, *kernel)."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _write(tensor: Tensor, values: np.ndarray) -> Tensor:
    """Assigns host `values` into tensor (cast to its dtype) and realizes the assign now."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"nn.init: expected a limn Tensor, got {type(tensor).__name__}")
    with no_grad():
        tensor.assign(Tensor(np.asarray(values, np.float64), dtype=tensor.dtype, device=tensor.device))
        tensor.realize()
    return tensor


def _float(tensor: Tensor, what: str) -> None:
    if not tensor.dtype.is_float:
        raise TypeError(f"nn.init.{what}: needs a float tensor, got {tensor.dtype.name}")


def _uniform01(tensor: Tensor, generator: Generator | None) -> np.ndarray:
    """float64 uniforms in [0, 1) of the tensor's shape, from the tensor's device generator."""
    return sampling.rand(tensor.shape, dtype=dtypes.float64, device=tensor.device, generator=generator).numpy()


def _normal01(tensor: Tensor, generator: Generator | None) -> np.ndarray:
    return sampling.randn(tensor.shape, dtype=dtypes.float64, device=tensor.device, generator=generator).numpy()


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fills tensor with U(a, b) values, as torch.nn.init.uniform_; returns tensor.

    >>> w = uniform_(Tensor.zeros((2, 3)), -1.0, 1.0)
    >>> bool((w.numpy() >= -1).all() and (w.numpy() < 1).all())
    True
    """
    _float(tensor, "uniform_")
    return _write(tensor, a + (b - a) * _uniform01(tensor, generator))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Generator | None = None) -> Tensor:
    """Fills tensor with N(mean, std**2) values, as torch.nn.init.normal_; returns tensor."""
    _float(tensor, "normal_")
    return _write(tensor, mean + std * _normal01(tensor, generator))


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Generator | None = None,
) -> Tensor:
    """Fills tensor with N(mean, std**2) values truncated to [a, b] (a and b are values, not numbers of std),
    as torch.nn.init.trunc_normal_, by its method: a uniform between the CDFs of a and b, mapped through
    the normal's inverse CDF, then clamped to [a, b]."""
    _float(tensor, "trunc_normal_")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.",
            stacklevel=2,
        )
    low, high = _norm_cdf((a - mean) / std), _norm_cdf((b - mean) / std)
    p = low + (high - low) * _uniform01(tensor, generator)
    p = np.clip(p, np.nextafter(0.0, 1.0), np.nextafter(1.0, 0.0))  # the inverse CDF wants (0, 1)
    z = sampling.host_values(sampling.normal_icdf(Tensor(p, dtype=dtypes.float64, device="numpy")))
    return _write(tensor, np.clip(mean + std * z, a, b))


def _norm_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fills tensor with val; returns tensor."""
    return _write(tensor, np.full(tensor.shape, float(val)))


def zeros_(tensor: Tensor) -> Tensor:
    """Fills the tensor with 0."""
    return constant_(tensor, 0.0)


def ones_(tensor: Tensor) -> Tensor:
    """Fills the tensor with 1."""
    return constant_(tensor, 1.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fills a 2-d tensor with the identity (1 on the diagonal), as torch.nn.init.eye_."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*tensor.shape))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """U(-a, a) with a = gain sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio), as torch's."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))  # sqrt(3) std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """N(0, std**2) with std = gain sqrt(2 / (fan_in + fan_out)), as torch's."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """U(-bound, bound) with bound = gain sqrt(3 / fan) (He et al.), gain = calculate_gain(nonlinearity, a),
    fan the tensor's fan_in or fan_out (mode), as torch's. nn.Linear's weight init is a=sqrt(5).

    >>> w = kaiming_uniform_(Tensor.zeros((64, 16)), a=math.sqrt(5))
    >>> bool(abs(w.numpy()).max() <= 1 / math.sqrt(16))
    True
    """
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0.0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Generator | None = None,
) -> Tensor:
    """N(0, std**2) with std = gain / sqrt(fan) (see kaiming_uniform_), as torch's."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Generator | None = None) -> Tensor:
    """A (semi-)orthogonal matrix scaled by gain, as torch.nn.init.orthogonal_: the Q of a normal matrix's
    QR (its columns' signs fixed by R's diagonal), over the tensor flattened to (shape[0], -1)."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if 0 in tensor.shape:
        return tensor
    rows = tensor.shape[0]
    cols = math.prod(tensor.shape) // rows
    flat = sampling.randn((rows, cols), dtype=dtypes.float64, device=tensor.device, generator=generator).numpy()
    if rows < cols:
        flat = flat.T  # (rows, cols) -> (cols, rows): QR of the tall one
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))  # make Q unique: R's diagonal positive
    if rows < cols:
        q = q.T
    return _write(tensor, gain * q.reshape(tensor.shape))
