"""Bad input: each mistake raises a typed exception whose message says what was asked and why it cannot be,
from limn's own code at the line the user wrote (or, for index checks only the data can answer, at realize),
never a traceback from deep inside numpy. And a deep graph is not a mistake: 20,000 chained nodes realize
and backprop without recursion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.graph.ops import Node
from limn.runtime.device import Buffer

LIMN_SOURCE = Path(limn.__file__).parent


def raised_by_limn(excinfo: pytest.ExceptionInfo) -> bool:
    """Whether the innermost frame of the traceback is limn's code (not numpy's, not python's)."""
    return Path(excinfo.traceback[-1].path).is_relative_to(LIMN_SOURCE)


def ones(*shape: int) -> Tensor:
    return Tensor(np.ones(shape, np.float32))


# (what the user wrote, the exception, a regex its message must match): each row one rule
MISTAKES: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "broadcast_mismatch": (
        lambda: ones(2, 3) + ones(4),
        ValueError,
        r"add: shapes \(2, 3\) and \(4,\) do not broadcast: sizes 3 and 4 differ and neither is 1",
    ),
    "reshape_to_a_different_size": (
        lambda: ones(4, 6).reshape(5, 5),
        ValueError,
        r"reshape \(4, 6\) -> \(5, 5\): 24 elements cannot become 25",
    ),
    "reshape_with_two_unknown_dims": (lambda: ones(6).reshape(-1, -1), ValueError, r"only one dim can be -1"),
    "negative_step_slice": (lambda: ones(4, 6)[:, ::-1], ValueError, r"slice step -1 on dim 1: steps must be positive"),
    "sum_axis_out_of_range": (
        lambda: ones(4, 6).sum(axis=2),
        IndexError,
        r"sum: axis 2 is out of range for a tensor with 2 dims",
    ),
    "softmax_axis_out_of_range": (
        lambda: ones(4, 6).softmax(axis=-3),
        IndexError,
        r"softmax: axis -3 is out of range for a tensor with 2 dims",
    ),
    "permute_axis_out_of_range": (
        lambda: ones(2, 3).permute(0, 2),
        IndexError,
        r"permute: axis 2 is out of range",
    ),
    "index_out_of_range": (
        lambda: ones(2, 3)[0, 3],
        IndexError,
        r"index 3 is out of bounds for dimension 1 with size 3",
    ),
    "too_many_indices": (
        lambda: ones(2, 3)[0, 0, 0],
        IndexError,
        r"too many indices \(3\) for a tensor with 2",
    ),
    "indexing_with_a_float_tensor": (
        lambda: ones(2, 3)[Tensor([0.0])],
        IndexError,
        r"tensors used as indices must be int or bool tensors, got float32",
    ),
    "matmul_inner_sizes_differ": (
        lambda: ones(2, 3) @ ones(2, 3),
        ValueError,
        r"matmul \(2, 3\) @ \(2, 3\): inner sizes 3 and 2 differ",
    ),
    "expand_a_dim_that_is_not_1": (lambda: ones(2, 3).expand(4, 3), ValueError, r"only size-1 dims can grow"),
    "cat_shapes_differ": (
        lambda: Tensor.cat([ones(2, 3), ones(2, 4)]),
        ValueError,
        r"cat along dim 0: shapes \(2, 3\) and \(2, 4\) differ off that dim",
    ),
    "split_sizes_do_not_add_up": (
        lambda: ones(5).split([2, 2]),
        ValueError,
        r"sizes \[2, 2\] add to 4, dim 0",
    ),
    "chunk_into_zero": (lambda: ones(5).chunk(0), ValueError, r"chunks must be positive, got 0"),
    "shrink_past_the_end": (
        lambda: ones(5).shrink([(2, 7)]),
        ValueError,
        r"0 <= start <= end <= size of \(5,\)",
    ),
    "item_of_many_elements": (lambda: ones(2, 3).item(), ValueError, r"single-element tensor.*\(2, 3\)"),
    "backward_on_a_non_scalar_without_gradient": (
        lambda: (Tensor([1.0, 2.0], requires_grad=True) * 2).backward(),
        RuntimeError,
        r"backward\(\) on a tensor of shape \(2,\) needs `gradient=`.*did you forget \.sum\(\)",
    ),
    "backward_gradient_of_the_wrong_shape": (
        lambda: (Tensor([1.0, 2.0], requires_grad=True) * 2).backward(ones(3)),
        ValueError,
        r"gradient has shape \(3,\), the output has \(2,\)",
    ),
    "backward_through_a_tensor_that_does_not_require_grad": (
        lambda: (ones(2) * 2).sum().backward(),
        RuntimeError,
        r"backward\(\) on a tensor that does not require grad",
    ),
    "gather_with_float_indices": (
        lambda: ones(3, 2).gather(0, Tensor([[0.0, 1.0]])),
        TypeError,
        r"gather: indices must be an int tensor .* got float32",
    ),
    "unsupported_numpy_dtype": (
        lambda: Tensor(np.arange(3, dtype=np.uint16)),
        TypeError,
        r"numpy dtype uint16 is not supported by limn: cast it with \.astype\(np\.int64\)",
    ),
    "unsupported_dtype_name": (
        lambda: Tensor([1], dtype="uint16"),
        TypeError,
        r"'uint16' is not one limn supports",
    ),
    "ragged_data": (lambda: Tensor([[1.0, 2.0], [3.0]]), ValueError, r"cannot make a rectangular array"),
    "an_int_too_wide_for_int32": (lambda: Tensor([2**40]), OverflowError, r"does not fit int32"),
    "unknown_device": (lambda: limn.set_device("no-such-device"), limn.DeviceError, r"no device named"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_mistake_raises_a_typed_error_that_says_why(mistake: str) -> None:
    action, error, message = MISTAKES[mistake]
    with pytest.raises(error, match=message) as excinfo:
        action()
    assert raised_by_limn(excinfo), f"raised from {excinfo.traceback[-1].path}, not limn"


# ---- creation arguments: dtype, device and requires_grad are keyword-only, and a misspelled one raises ----

CREATORS: dict[str, Callable[..., Any]] = {
    "Tensor": lambda **kw: Tensor([1.0, 2.0], **kw),
    "full": lambda **kw: Tensor.full((2,), 1.0, **kw),
    "zeros": lambda **kw: Tensor.zeros((2,), **kw),
    "ones": lambda **kw: Tensor.ones((2,), **kw),
    "arange": lambda **kw: Tensor.arange(0.0, 2.0, **kw),
    "eye": lambda **kw: Tensor.eye(2, **kw),
    "rand": lambda **kw: Tensor.rand((2,), **kw),
    "randn": lambda **kw: Tensor.randn((2,), **kw),
    "zeros_like": lambda **kw: ones(2).zeros_like(**kw),
    "ones_like": lambda **kw: ones(2).ones_like(**kw),
}


@pytest.mark.parametrize("creator", CREATORS)
def test_a_misspelled_creation_argument_raises_type_error_naming_it(creator: str) -> None:
    with pytest.raises(TypeError, match="requires_gard"):
        CREATORS[creator](requires_gard=True)
    t = CREATORS[creator](dtype=limn.float64, device="numpy", requires_grad=True)  # the spelled ones all work
    assert (t.dtype, t.device, t.requires_grad) == (limn.float64, "numpy", True)


def test_dtype_device_and_requires_grad_are_keyword_only() -> None:
    with pytest.raises(TypeError, match="positional"):
        Tensor.zeros((2,), limn.float64)
    with pytest.raises(TypeError, match="positional"):
        Tensor([1.0], limn.float64)
    with pytest.raises(TypeError, match="positional"):
        Tensor.full((2,), 1.0, limn.float64)


def test_requires_grad_on_an_int_dtype_raises_from_every_creation_function() -> None:
    for make in (lambda: Tensor([1, 2], requires_grad=True), lambda: Tensor.full((2,), 3, requires_grad=True)):
        with pytest.raises(TypeError, match="requires_grad=True needs a float dtype; this tensor is int32") as excinfo:
            make()
        assert raised_by_limn(excinfo)


def test_an_unknown_device_raises_at_the_creation_call() -> None:
    for make in (lambda: Tensor.zeros(2, device="no-such-device"), lambda: Tensor([1.0], device="no-such-device")):
        with pytest.raises(limn.DeviceError, match="no device named 'no-such-device'"):
            make()


# ---- index checks that only the data can answer: raised by the numpy device at realize ----

OUT_OF_RANGE = {
    "gather_past_the_end": (
        lambda: ones(3, 2).gather(0, Tensor([[5, 0]])),
        r"gather: index 5 .* axis 0 of size 3",
    ),
    "gather_negative": (
        lambda: ones(3, 2).gather(0, Tensor([[-1, 0]])),
        r"gather: index -1 .* axis 0 of size 3",
    ),
    "scatter_past_the_end": (
        lambda: ones(3, 2).scatter_add(0, Tensor([[3, 0]]), ones(1, 2)),
        r"scatter: index 3 .* axis 0 of size 3",
    ),
    "embedding_past_the_vocabulary": (
        lambda: ones(3, 2).embedding(Tensor([1, 3])),
        r"gather: index 3 .* size 3",
    ),
    "cross_entropy_target_past_the_classes": (
        lambda: ones(2, 3).cross_entropy(Tensor([0, 3])),
        r"index 3 is out of range for axis 1 of size 3",
    ),
    "one_hot_past_the_classes": (lambda: Tensor([0, 3]).one_hot(3), r"index 3 is out of range .* size 3"),
}


@pytest.mark.parametrize("mistake", OUT_OF_RANGE)
def test_out_of_range_indices_raise_index_error_from_limn_at_realize(mistake: str) -> None:
    action, message = OUT_OF_RANGE[mistake]
    lazy = action()  # building the graph cannot see the indices
    with pytest.raises(IndexError, match=message) as excinfo:
        lazy.numpy()
    assert raised_by_limn(excinfo), f"raised from {excinfo.traceback[-1].path}, not limn"


# ---- two devices that do not share memory ----


class FakeDevice:
    """A non-host device for tests: it holds bytes (as numpy arrays it does not share) and runs nothing."""

    host = False
    custom_kernels: frozenset[str] = frozenset()

    def __init__(self, name: str) -> None:
        self.name = name

    def alloc(self, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        return np.empty(shape, dtype.np)

    def free(self, handle: np.ndarray) -> None:
        pass

    def copyin(self, handle: np.ndarray, array: np.ndarray) -> None:
        handle[...] = array

    def copyout(self, handle: np.ndarray, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
        return np.array(handle)

    def synchronize(self) -> None:
        pass

    def run(self, sinks: Sequence[Node]) -> list[Buffer]:
        raise NotImplementedError(f"{self.name} runs no graphs")


@pytest.fixture
def two_fake_devices() -> Iterator[tuple[str, str]]:
    names = ("fake-gpu-a", "fake-gpu-b")
    for name in names:
        limn.register_device(name, FakeDevice(name))
    yield names
    for name in names:  # the registry has no public unregister; keep other tests' device lists clean
        limn.runtime.device._registered.pop(name, None)
        limn.runtime.device._loaded.pop(name, None)


def test_mixing_tensors_of_two_non_host_devices_raises_device_error(
    two_fake_devices: tuple[str, str],
) -> None:
    a_name, b_name = two_fake_devices
    a = Tensor([1.0, 2.0], device=a_name)
    b = Tensor([3.0, 4.0], device=b_name)
    assert (a.device, b.device) == (a_name, b_name)
    with pytest.raises(limn.DeviceError, match=f"mixes tensors on devices {a_name}, {b_name}; move them") as excinfo:
        a + b
    assert raised_by_limn(excinfo)


def test_a_tensor_on_a_non_host_device_may_meet_host_tensors(two_fake_devices: tuple[str, str]) -> None:
    a = Tensor([1.0, 2.0], device=two_fake_devices[0])
    assert (a + Tensor([1.0, 1.0])).device == two_fake_devices[0]


# ---- deep graphs ----


def test_twenty_thousand_chained_nodes_realize_and_backprop_without_recursion_error() -> None:
    x = Tensor([1.0, -2.0], requires_grad=True)
    y = x
    for _ in range(20_000):
        y = -y  # one NEG node each, each the only src of the next
    np.testing.assert_array_equal(y.numpy(), [1.0, -2.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


# ---- the error type torch code catches ----

# the same mistake made in both frameworks, spelled once with `m` for the module (torch or limn's Tensor)
SHARED_MISTAKES = {
    "broadcast": "m.ones(2, 3) + m.ones(4)",
    "matmul inner sizes": "m.ones(2, 3) @ m.ones(2, 3)",
    "reshape": "m.ones(2, 3).reshape(4, 2)",
    "permute": "m.ones(2, 3).permute(0, 0)",
    "flip the same dim twice": "m.ones(2, 3).flip((0, 0))",
    "roll shifts and dims": "m.ones(2, 3).roll((1, 2), (0,))",
    "diagonal of one dim": "m.ones(2, 3).diagonal(0, 0, 0)",
    "einsum sizes": "m.einsum('ij,ij->i', m.ones(2, 3), m.ones(3, 2))",
    "unfold past the size": "m.ones(8).unfold(0, 9, 3)",
}


@pytest.mark.parametrize("name", SHARED_MISTAKES)
def test_an_argument_mistake_torch_raises_runtimeerror_for_is_a_runtimeerror_and_a_valueerror(name: str) -> None:
    """limn.ArgumentError is both, so ported code catching torch's RuntimeError and limn's own tests catching
    ValueError both hold."""
    import torch

    class LimnModule:
        ones = staticmethod(lambda *shape: Tensor.ones(shape))
        einsum = staticmethod(Tensor.einsum)

    with pytest.raises(RuntimeError):
        eval(SHARED_MISTAKES[name], {"m": torch})
    with pytest.raises(RuntimeError) as excinfo:
        eval(SHARED_MISTAKES[name], {"m": LimnModule})
    assert isinstance(excinfo.value, ValueError) and isinstance(excinfo.value, limn.ArgumentError)
