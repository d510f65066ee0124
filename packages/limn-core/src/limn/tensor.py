"""The user API: a Tensor is a lazy value, a Node in the op graph plus what autograd needs.

Tensor methods never compute. Primitives build one Node each; everything else (sub, matmul, softmax,
cross_entropy, ...) is composed from primitives here, with its formula in a comment, so a device that
implements the 19 primitives runs all of it. Bytes appear only at .numpy(), .item() or .realize().
Pipeline: **tensor** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from limn import autograd, dtypes
from limn.autograd import Context
from limn.device import Buffer, DeviceError, current_device, get_device
from limn.dtypes import DType
from limn.engine import buffer_node, observers, realize
from limn.ops import Movement, Node, Op, Shape
from limn.view import View, prod

Scalar = bool | int | float
TensorLike = Any  # Tensor, numpy array, nested lists or a python scalar

_rng = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Seeds rand/randn (and everything built on them) for reproducible runs."""
    global _rng
    _rng = np.random.default_rng(seed)


def _normalize_axis(axis: int, ndim: int, what: str) -> int:
    """axis as an index into the dims, counted from the end when negative. A 0-d tensor takes 0 and -1, as in
    torch, which gives it one dim of size 1 for dim arguments."""
    size = max(ndim, 1)
    if not -size <= axis < size:
        raise IndexError(
            f"{what}: axis {axis} is out of range for a tensor with {ndim} dims; use an axis from {-size} to {size - 1}"
        )
    return axis % size if ndim else 0


def _const_value(value: Scalar, dtype: DType) -> Scalar:
    """The python value a CONST of `dtype` holds: rounded to the dtype, ints wrapped to its width."""
    if dtype == dtypes.bool_:
        return bool(value)
    if dtype.is_int:
        return int(np.array(int(value), np.int64).astype(dtype.np))
    return float(np.array(value, np.float64).astype(dtype.np))


def _host_array(data: TensorLike, dtype: DType | None) -> np.ndarray:
    """A fresh, native-endian, row-major numpy array of a supported dtype holding `data`."""
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        arr = np.asarray(data)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("="))
        src = dtypes.from_numpy(arr.dtype) if dtype is None else dtype
    else:
        try:
            arr = np.array(data)
        except ValueError as e:
            raise ValueError(f"Tensor(): cannot make a rectangular array from this data: {e}") from None
        if arr.dtype == object:
            raise TypeError("Tensor(): the data holds objects that are not numbers (ragged lists?)")
        if dtype is not None:
            src = dtype
        elif arr.dtype.kind == "f":
            src = dtypes.float32  # python floats become float32, as in torch
        elif arr.dtype.kind in "iu":
            if arr.size and (arr.min() < -(2**31) or arr.max() >= 2**31):
                raise OverflowError("Tensor(): an integer in the data does not fit int32, limn's widest int")
            src = dtypes.int32
        else:
            src = dtypes.from_numpy(arr.dtype)
    return np.array(arr, dtype=src.np, order="C", copy=True)


def _broadcast_shape(a: Shape, b: Shape, what: str) -> Shape:
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"{what}: shapes {a} and {b} do not broadcast: sizes {x} and {y} differ and neither is 1")
        out.append(max(x, y) if x != 0 and y != 0 else 0)
    return tuple(out)


class Tensor:
    """A lazy n-dimensional array. Build expressions; call .numpy()/.item()/.realize() to compute.

    >>> x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad.numpy()
    array([[2., 4.],
           [6., 8.]], dtype=float32)
    """

    __slots__ = ("node", "requires_grad", "grad", "_ctx", "_device", "__weakref__")
    __array_priority__ = 1000  # numpy scalar (op) Tensor defers to Tensor's reflected op

    def __init__(
        self,
        data: TensorLike,
        dtype: DType | str | None = None,
        requires_grad: bool = False,
        device: str | None = None,
    ) -> None:
        dtype = None if dtype is None else dtypes.as_dtype(dtype)
        if isinstance(data, Tensor):
            src = data.cast(dtype) if dtype is not None else data
            self.node, self._device = src.node, src._device
        else:
            arr = _host_array(data, dtype)
            self._device = device or current_device()
            self.node = buffer_node(self._device, arr)
        self.requires_grad = bool(requires_grad)
        self.grad: Tensor | None = None
        self._ctx: Context | None = None
        if requires_grad and not self.dtype.is_float:
            raise TypeError(f"requires_grad=True needs a float dtype; this tensor is {self.dtype.name}")

    @staticmethod
    def _from_node(node: Node, device: str, ctx: Context | None = None) -> Tensor:
        t = Tensor.__new__(Tensor)
        t.node, t._device, t._ctx, t.grad = node, device, ctx, None
        t.requires_grad = ctx is not None
        return t

    # ---- properties ----

    @property
    def shape(self) -> Shape:
        return self.node.shape

    @property
    def dtype(self) -> DType:
        return self.node.dtype

    @property
    def device(self) -> str:
        return self._device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    def numel(self) -> int:
        return self.size

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self) -> str:
        state = "realized" if self.node.op is Op.BUFFER else f"lazy {self.node.op.name}"
        grad = ", requires_grad=True" if self.requires_grad else ""
        return f"<Tensor {self.dtype.name}{list(self.shape)} on {self.device}, {state}{grad}>"

    # ---- creation ----

    @staticmethod
    def full(shape: Sequence[int] | int, value: Scalar, dtype: DType | str | None = None, **kw: Any) -> Tensor:
        """A tensor of one repeated value. It is a CONST node: nothing is allocated until realized."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if any(not isinstance(s, int) or s < 0 for s in shape):
            raise ValueError(f"full(): shape {shape} must be non-negative ints")
        if dtype is None:
            dtype = (
                dtypes.bool_
                if isinstance(value, bool)
                else (dtypes.int32 if isinstance(value, int) else dtypes.float32)
            )
        dtype = dtypes.as_dtype(dtype)
        node = Node(Op.CONST, (), dtype, shape, _const_value(value, dtype))
        t = Tensor._from_node(node, kw.get("device") or current_device())
        if kw.get("requires_grad"):
            t = t.contiguous().realize().detach()
            t.requires_grad = True
        return t

    @staticmethod
    def zeros(shape: Sequence[int] | int, dtype: DType | str = dtypes.float32, **kw: Any) -> Tensor:
        return Tensor.full(shape, 0, dtype, **kw)

    @staticmethod
    def ones(shape: Sequence[int] | int, dtype: DType | str = dtypes.float32, **kw: Any) -> Tensor:
        return Tensor.full(shape, 1, dtype, **kw)

    def zeros_like(self) -> Tensor:
        return Tensor.zeros(self.shape, self.dtype, device=self.device)

    def ones_like(self) -> Tensor:
        return Tensor.ones(self.shape, self.dtype, device=self.device)

    @staticmethod
    def arange(
        start: int | float, stop: int | float | None = None, step: int | float = 1, dtype=None, **kw: Any
    ) -> Tensor:
        """Evenly spaced values in [start, stop); int32 for int arguments, float32 otherwise."""
        if stop is None:
            start, stop = 0, start
        if dtype is None:
            ints = all(isinstance(v, int) for v in (start, stop, step))
            dtype = dtypes.int32 if ints else dtypes.float32
        return Tensor(np.arange(start, stop, step), dtype=dtype, **kw)

    @staticmethod
    def eye(n: int, m: int | None = None, dtype: DType | str = dtypes.float32, **kw: Any) -> Tensor:
        return Tensor(np.eye(n, m), dtype=dtype, **kw)

    @staticmethod
    def rand(shape: Sequence[int] | int, dtype: DType | str = dtypes.float32, **kw: Any) -> Tensor:
        """Uniform in [0, 1), drawn from the generator limn.manual_seed seeds."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return Tensor(_rng.random(shape), dtype=dtype, **kw)

    @staticmethod
    def randn(shape: Sequence[int] | int, dtype: DType | str = dtypes.float32, **kw: Any) -> Tensor:
        """Standard normal, drawn from the generator limn.manual_seed seeds."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return Tensor(_rng.standard_normal(shape), dtype=dtype, **kw)

    # ---- realization ----

    def realize(self) -> Tensor:
        """Computes this tensor now (a no-op if it already holds a buffer). Returns self."""
        realize(self)
        return self

    def numpy(self) -> np.ndarray:
        """A numpy copy of the value (computing it first if needed)."""
        self.realize()
        for observer in observers.active:
            observer.read_back(self)
        buf: Buffer = self.node.arg
        return buf.numpy().reshape(self.shape)

    def item(self) -> Scalar:
        if self.size != 1:
            raise ValueError(f"item() needs a single-element tensor; this one has shape {self.shape}")
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def to(self, device: str) -> Tensor:
        """A copy of this tensor's value on another device (realized)."""
        dev = get_device(device)
        if dev.name == self.device and self.node.op is Op.BUFFER:
            return self
        out = Tensor(self.numpy(), device=dev.name)
        return out

    def detach(self) -> Tensor:
        """The same value, cut off from gradient history."""
        return Tensor._from_node(self.node, self.device)

    def assign(self, value: TensorLike) -> Tensor:
        """Overwrites this tensor's buffer with `value` at the next realize. Every assign realized in
        one realize() reads the values from before any of them, so their order cannot matter."""
        if not isinstance(value, Tensor):
            value = (
                Tensor.full(self.shape, value, self.dtype, device=self.device)
                if isinstance(value, (bool, int, float))
                else Tensor(value, dtype=self.dtype, device=self.device)
            )
        if value.shape != self.shape:
            raise ValueError(f"assign: value of shape {value.shape} cannot be written into shape {self.shape}")
        if value.dtype != self.dtype:
            value = value.cast(self.dtype)
        self.realize()  # the target is a buffer, and the bytes this tensor holds now (limn.snapshot)
        self.node = Node(Op.ASSIGN, (self.node, value.node), self.dtype, self.shape)
        self._ctx = None
        for observer in observers.active:
            observer.assigned(self)
        return self

    # ---- primitives: each builds one Node (and a Context when gradients flow) ----

    def _result(self, node: Node, rule: Op | Movement, parents: tuple[Tensor, ...], arg: Any = None) -> Tensor:
        device = _join_devices(parents, node.op.name)
        ctx = None
        if autograd.is_grad_enabled() and any(p.requires_grad for p in parents):
            ctx = Context(rule, parents, node, arg)
        return Tensor._from_node(node, device, ctx)

    def _unary(self, op: Op, dtype: DType | None = None) -> Tensor:
        return self._result(Node(op, (self.node,), dtype or self.dtype, self.shape), op, (self,))

    def cast(self, dtype: DType | str) -> Tensor:
        """Converts to dtype: floats to ints truncate toward zero, narrowing ints wrap."""
        dtype = dtypes.as_dtype(dtype)
        if dtype == self.dtype:
            return self
        return self._unary(Op.CAST, dtype)

    def _float(self) -> Tensor:
        """Self, cast to float32 when it is an int or bool tensor."""
        return self if self.dtype.is_float else self.cast(dtypes.float32)

    def neg(self) -> Tensor:
        if self.dtype == dtypes.bool_:
            raise TypeError("negation of a bool tensor; use .logical_not()")
        return self._unary(Op.NEG)

    def exp(self) -> Tensor:
        return self._float()._unary(Op.EXP)

    def log(self) -> Tensor:
        return self._float()._unary(Op.LOG)

    def sqrt(self) -> Tensor:
        return self._float()._unary(Op.SQRT)

    def reciprocal(self) -> Tensor:
        return self._float()._unary(Op.RECIP)

    def _operands(self, other: TensorLike, what: str, reverse: bool = False) -> tuple[Tensor, Tensor]:
        """Self and other promoted to one dtype and broadcast to one shape."""
        a = self
        if isinstance(other, Tensor):
            b = other
            dtype = dtypes.promote(a.dtype, b.dtype)
        elif isinstance(other, (bool, int, float, np.number, np.bool_)):
            value = other.item() if isinstance(other, np.generic) else other
            dtype = dtypes.scalar_dtype(a.dtype, value)
            b = Tensor.full((), value, dtype, device=a.device)
        else:
            b = Tensor(other, device=a.device)
            dtype = dtypes.promote(a.dtype, b.dtype)
        a, b = a.cast(dtype), b.cast(dtype)
        shape = _broadcast_shape(a.shape, b.shape, what)
        a, b = a.broadcast_to(shape), b.broadcast_to(shape)
        return (b, a) if reverse else (a, b)

    def _binary(self, op: Op, other: TensorLike, reverse: bool = False, dtype: DType | None = None) -> Tensor:
        a, b = self._operands(other, op.name.lower(), reverse)
        node = Node(op, (a.node, b.node), dtype or a.dtype, a.shape)
        return a._result(node, op, (a, b))

    def add(self, other: TensorLike, reverse: bool = False) -> Tensor:
        return self._binary(Op.ADD, other, reverse)

    def mul(self, other: TensorLike, reverse: bool = False) -> Tensor:
        return self._binary(Op.MUL, other, reverse)

    def lt(self, other: TensorLike, reverse: bool = False) -> Tensor:
        return self._binary(Op.CMPLT, other, reverse, dtypes.bool_)

    def where(self, a: TensorLike, b: TensorLike) -> Tensor:
        """Elementwise self ? a : b, with self a bool condition; a and b promote and broadcast."""
        cond = self if self.dtype == dtypes.bool_ else self.ne(0)
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            a = Tensor.full((), a, device=cond.device)
        if isinstance(a, Tensor):
            a, b = a._operands(b, "where")
        else:
            b, a = b._operands(a, "where")
        shape = _broadcast_shape(cond.shape, a.shape, "where")
        cond, a, b = cond.broadcast_to(shape), a.broadcast_to(shape), b.broadcast_to(shape)
        node = Node(Op.WHERE, (cond.node, a.node, b.node), a.dtype, shape)
        return cond._result(node, Op.WHERE, (cond, a, b))

    def _reduce(self, op: Op, axis: int | Sequence[int] | None, keepdim: bool) -> Tensor:
        axes = self._axes(axis, op.name.lower())
        dtype = dtypes.int32 if self.dtype == dtypes.bool_ else self.dtype
        x = self.cast(dtype)
        if not axes:
            return x  # nothing to fold (a 0-d tensor reduced over its dim 0): the value as it is
        shape = tuple(1 if d in axes else s for d, s in enumerate(self.shape))
        out = x._result(Node(op, (x.node,), dtype, shape, axes), op, (x,), axes)
        if keepdim:
            return out
        return out.reshape(tuple(s for d, s in enumerate(self.shape) if d not in axes))

    def _axes(self, axis: int | Sequence[int] | None, what: str) -> tuple[int, ...]:
        """The dims a reduce over `axis` folds, sorted. A 0-d tensor has none: its dim 0 (or -1) is the size-1
        dim torch gives it, so a reduce over that leaves the value as it is."""
        if axis is None:
            return tuple(range(self.ndim))
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        normalized = {_normalize_axis(a, self.ndim, what) for a in axes}
        return tuple(sorted(normalized)) if self.ndim else ()

    def _check_nonempty(self, axes: tuple[int, ...], what: str) -> None:
        """max, min, argmax and argmin of no values have no answer: torch and numpy raise, and so does limn."""
        empty = [d for d in axes if self.shape[d] == 0]
        if empty:
            raise IndexError(
                f"{what}: axis {empty[0]} of a tensor of shape {self.shape} is empty, and the {what} of no values "
                "is undefined (torch and numpy raise too); reduce over a non-empty axis, or check the size first"
            )

    def gather(self, idx: Tensor, axis: int = 0) -> Tensor:
        """out[..., j, ...] = self[..., idx[..., j, ...], ...] along `axis` (torch.gather). idx has self's
        rank and is no larger in the other dims; out has idx's shape."""
        axis = _normalize_axis(axis, self.ndim, "gather")
        idx = _index_tensor(idx, "gather")
        if idx.ndim != self.ndim or any(i > s for d, (i, s) in enumerate(zip(idx.shape, self.shape)) if d != axis):
            raise ValueError(
                f"gather: index of shape {idx.shape} does not fit a source of shape {self.shape} "
                f"along axis {axis} (same rank, and no larger than the source off that axis)"
            )
        src = self.shrink(tuple((0, i) if d != axis else (0, s) for d, (i, s) in enumerate(zip(idx.shape, self.shape))))
        node = Node(Op.GATHER, (src.node, idx.node), self.dtype, idx.shape, axis)
        return src._result(node, Op.GATHER, (src, idx), axis)

    def scatter_add(self, idx: Tensor, src: TensorLike, axis: int = 0) -> Tensor:
        """A copy of self with src[..., j, ...] added at self[..., idx[..., j, ...], ...] along `axis`
        (torch.scatter_add); colliding indices all add."""
        axis = _normalize_axis(axis, self.ndim, "scatter_add")
        idx = _index_tensor(idx, "scatter_add")
        src = src if isinstance(src, Tensor) else Tensor(src, dtype=self.dtype)
        src = src.cast(self.dtype)
        if (
            idx.shape != src.shape
            or idx.ndim != self.ndim
            or any(i > s for d, (i, s) in enumerate(zip(idx.shape, self.shape)) if d != axis)
        ):
            raise ValueError(
                f"scatter_add: index {idx.shape} and source {src.shape} must have one shape, of the "
                f"rank of the target {self.shape} and no larger than it off axis {axis}"
            )
        node = Node(Op.SCATTER, (self.node, idx.node, src.node), self.dtype, self.shape, axis)
        return self._result(node, Op.SCATTER, (self, idx, src), axis)

    def contiguous(self) -> Tensor:
        """Materializes this value in row-major order (a barrier the scheduler will not fuse through)."""
        return self._unary(Op.CONTIGUOUS)

    # ---- movement: each one composes into the tensor's View ----

    def _movement(self, kind: Movement, arg: Any) -> Tensor:
        """Applies movement `kind` to self's view (the View method it is named after, with `arg`); copies
        first where a reshape cannot be a view."""
        change = getattr(View, kind.value)  # View.reshape, View.permute, ...: (view, arg) -> view
        node = self.node
        if node.op is Op.CONST and kind is not Movement.PAD:
            shape = change(View.contiguous(node.shape), arg).shape
            new = Node(Op.CONST, (), node.dtype, shape, node.arg)
            return self._result(new, kind, (self,), arg)
        if node.op is Op.VIEW:
            base, view = node.srcs[0], node.arg
        else:
            base, view = node, View.contiguous(node.shape)
        new_view = change(view, arg)
        if new_view is None:  # only reshape says this: the strides cannot express the new shape
            base = Node(Op.CONTIGUOUS, (node,), node.dtype, node.shape)
            new_view = change(View.contiguous(node.shape), arg)
        if new_view.is_contiguous and new_view.shape == base.shape:
            new = base
        else:
            new = Node(Op.VIEW, (base,), node.dtype, new_view.shape, new_view)
        return self._result(new, kind, (self,), arg)

    def reshape(self, *shape: int | Sequence[int]) -> Tensor:
        """The same elements in row-major order under a new shape; one dim may be -1."""
        new = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else tuple(shape)
        if new.count(-1) > 1:
            raise ValueError(f"reshape {self.shape} -> {new}: only one dim can be -1")
        if -1 in new:
            rest = prod([s for s in new if s != -1])
            if rest == 0 or self.size % rest:
                raise ValueError(f"reshape {self.shape} -> {new}: {self.size} elements do not divide into {new}")
            new = tuple(self.size // rest if s == -1 else s for s in new)
        if any(s < 0 for s in new):
            raise ValueError(f"reshape {self.shape} -> {new}: sizes must be non-negative")
        if prod(new) != self.size:
            raise ValueError(f"reshape {self.shape} -> {new}: {self.size} elements cannot become {prod(new)}")
        if new == self.shape:
            return self
        return self._movement(Movement.RESHAPE, new)

    def permute(self, *order: int | Sequence[int]) -> Tensor:
        order = tuple(order[0]) if len(order) == 1 and not isinstance(order[0], int) else tuple(order)
        norm = tuple(_normalize_axis(d, self.ndim, "permute") for d in order)
        if sorted(norm) != list(range(self.ndim)):
            raise ValueError(f"permute {order}: must name each of the {self.ndim} dims exactly once")
        if norm == tuple(range(self.ndim)):
            return self
        return self._movement(Movement.PERMUTE, norm)

    def expand(self, *shape: int | Sequence[int]) -> Tensor:
        """Stretches size-1 dims to `shape` without copying (-1 keeps a dim)."""
        new = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else tuple(shape)
        if len(new) != self.ndim:
            raise ValueError(f"expand {self.shape} -> {new}: the ranks differ; reshape first")
        new = tuple(s if n == -1 else n for s, n in zip(self.shape, new))
        for s, n in zip(self.shape, new):
            if s != n and s != 1:
                raise ValueError(f"expand {self.shape} -> {new}: only size-1 dims can grow")
        if new == self.shape:
            return self
        return self._movement(Movement.EXPAND, new)

    def pad(self, widths: Sequence[tuple[int, int]], value: Scalar = 0) -> Tensor:
        """Adds (before, after) cells around each dim, filled with `value`."""
        widths = tuple((int(b), int(a)) for b, a in widths)
        if len(widths) != self.ndim or any(b < 0 or a < 0 for b, a in widths):
            raise ValueError(f"pad {widths}: needs one non-negative (before, after) pair per dim of {self.shape}")
        if all(w == (0, 0) for w in widths):
            return self
        out = self._movement(Movement.PAD, widths)
        if value != 0:
            inside = Tensor.full(self.shape, True, dtypes.bool_, device=self.device).pad(widths)
            out = inside.where(out, value)
        return out

    def shrink(self, box: Sequence[tuple[int, int]]) -> Tensor:
        """Keeps [start, end) of each dim."""
        box = tuple((int(s), int(e)) for s, e in box)
        if len(box) != self.ndim or any(not 0 <= s <= e <= n for (s, e), n in zip(box, self.shape)):
            raise ValueError(f"shrink {box}: each (start, end) must satisfy 0 <= start <= end <= size of {self.shape}")
        if all((s, e) == (0, n) for (s, e), n in zip(box, self.shape)):
            return self
        return self._movement(Movement.SHRINK, box)

    def broadcast_to(self, shape: Shape) -> Tensor:
        shape = tuple(shape)
        if self.shape == shape:
            return self
        if len(shape) < self.ndim:
            raise ValueError(f"broadcast {self.shape} -> {shape}: the target has fewer dims")
        x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape)
        return x.expand(shape)

    def transpose(self, a: int = -2, b: int = -1) -> Tensor:
        if self.ndim < 2:
            return self
        order = list(range(self.ndim))
        a, b = _normalize_axis(a, self.ndim, "transpose"), _normalize_axis(b, self.ndim, "transpose")
        order[a], order[b] = order[b], order[a]
        return self.permute(tuple(order))

    @property
    def T(self) -> Tensor:
        return self.permute(tuple(reversed(range(self.ndim))))

    def flatten(self, start: int = 0, end: int = -1) -> Tensor:
        if self.ndim == 0:
            return self.reshape(1)
        start, end = _normalize_axis(start, self.ndim, "flatten"), _normalize_axis(end, self.ndim, "flatten")
        return self.reshape(self.shape[:start] + (prod(self.shape[start : end + 1]),) + self.shape[end + 1 :])

    def squeeze(self, axis: int | None = None) -> Tensor:
        if axis is None:
            return self.reshape(tuple(s for s in self.shape if s != 1))
        axis = _normalize_axis(axis, self.ndim, "squeeze")
        if self.ndim == 0 or self.shape[axis] != 1:  # a 0-d tensor has nothing to squeeze, as in torch
            return self
        return self.reshape(self.shape[:axis] + self.shape[axis + 1 :])

    def unsqueeze(self, axis: int) -> Tensor:
        axis = _normalize_axis(axis, self.ndim + 1, "unsqueeze")
        return self.reshape(self.shape[:axis] + (1,) + self.shape[axis:])

    @staticmethod
    def cat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
        """Joins tensors along axis: each is padded to the full length there and the pads add up."""
        tensors = list(tensors)
        if not tensors:
            raise ValueError("cat: needs at least one tensor")
        first = tensors[0]
        axis = _normalize_axis(axis, first.ndim, "cat")
        for t in tensors[1:]:
            if t.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis):
                raise ValueError(f"cat along axis {axis}: shapes {first.shape} and {t.shape} differ off that axis")
        total = sum(t.shape[axis] for t in tensors)
        out, start = None, 0
        for t in tensors:
            widths = [(0, 0)] * first.ndim
            widths[axis] = (start, total - start - t.shape[axis])
            piece = t.pad(widths)
            out = piece if out is None else out + piece
            start += t.shape[axis]
        return out

    @staticmethod
    def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
        tensors = list(tensors)
        if not tensors:
            raise ValueError("stack: needs at least one tensor")
        axis = _normalize_axis(axis, tensors[0].ndim + 1, "stack")
        return Tensor.cat([t.unsqueeze(axis) for t in tensors], axis)

    def split(self, sizes: int | Sequence[int], axis: int = 0) -> list[Tensor]:
        """Pieces along axis: of `sizes` each (the last may be shorter), or of the listed sizes."""
        axis = _normalize_axis(axis, self.ndim, "split")
        n = self.shape[axis]
        if isinstance(sizes, int):
            if sizes <= 0:
                raise ValueError(f"split: piece size must be positive, got {sizes}")
            sizes = [min(sizes, n - s) for s in range(0, n, sizes)]
        if sum(sizes) != n:
            raise ValueError(f"split: sizes {list(sizes)} add to {sum(sizes)}, axis {axis} has {n}")
        out, start = [], 0
        for s in sizes:
            box = [(0, d) for d in self.shape]
            box[axis] = (start, start + s)
            out.append(self.shrink(box))
            start += s
        return out

    def chunk(self, chunks: int, axis: int = 0) -> list[Tensor]:
        axis = _normalize_axis(axis, self.ndim, "chunk")
        if chunks <= 0:
            raise ValueError(f"chunk: the number of chunks must be positive, got {chunks}")
        return self.split(math.ceil(self.shape[axis] / chunks), axis)

    # ---- indexing and iteration ----

    def __getitem__(self, index: Any) -> Tensor:
        """Basic indexing: ints, slices with step 1, `...` and None. It is a shrink and a reshape."""
        index = index if isinstance(index, tuple) else (index,)
        for i in index:
            if isinstance(i, Tensor) or isinstance(i, (list, np.ndarray)):
                raise TypeError(
                    "indexing with a tensor or list: limn has basic indexing only; use "
                    ".gather(idx, axis) or .embedding(idx) for lookups"
                )
        n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
        if sum(1 for i in index if i is Ellipsis) > 1:
            raise IndexError("an index can hold only one `...`")
        if n_real > self.ndim:
            raise IndexError(f"too many indices ({n_real}) for a tensor with {self.ndim} dims")
        if Ellipsis in index:
            at = index.index(Ellipsis)
            index = index[:at] + (slice(None),) * (self.ndim - n_real) + index[at + 1 :]
        else:
            index = index + (slice(None),) * (self.ndim - n_real)
        box, shape, dim = [], [], 0
        for i in index:
            if i is None:
                shape.append(1)
                continue
            size = self.shape[dim]
            if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
                j = int(i) + size if i < 0 else int(i)
                if not 0 <= j < size:
                    raise IndexError(f"index {i} is out of range for dim {dim} of size {size}")
                box.append((j, j + 1))
            elif isinstance(i, slice):
                if i.step not in (None, 1):
                    raise ValueError(
                        f"slice step {i.step} on dim {dim}: a View has no stride for a step other than 1; "
                        "reshape and index instead (x.reshape(..., n, k)[..., 0] takes every k-th)"
                    )
                start, stop, _ = i.indices(size)
                box.append((start, max(start, stop)))
                shape.append(max(stop - start, 0))
            else:
                raise TypeError(f"index {i!r} of type {type(i).__name__} is not an int, slice, ... or None")
            dim += 1
        return self.shrink(box).reshape(tuple(shape))

    def __iter__(self) -> Iterator[Tensor]:
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # ---- composed elementwise ops (primitives only) ----

    def sub(self, other: TensorLike, reverse: bool = False) -> Tensor:
        a, b = self._operands(other, "sub", reverse)
        return a + b.neg()  # a - b = a + (-b)

    def div(self, other: TensorLike, reverse: bool = False) -> Tensor:
        a, b = self._float()._operands(other, "div", reverse)
        a, b = a._float(), b._float()
        return a * b.reciprocal()  # a / b = a * (1/b)

    def pow(self, exponent: TensorLike) -> Tensor:
        """self ** exponent, with torch's values and gradients.

        A python int exponent (or an integer-valued float) multiplies by squaring: exact for negative bases
        and for every n, and x ** 0 is 1 still linked to x (its gradient is 0, as torch's). 0.5 and -0.5 are
        sqrt and 1/sqrt, as torch computes them. Any other exponent, tensors included, follows C's pow (see
        _pow): a negative base to an integer-valued power is real, odd powers keeping the sign, and 0 ** 0,
        inf ** 0 and 1 ** nan are 1. An int tensor to a negative int power raises, as in torch.

        >>> (Tensor([-2.0, 3.0]) ** 3).tolist()
        [-8.0, 27.0]
        >>> (Tensor([-2.0, 0.0]) ** Tensor([3.0, 0.0])).tolist()
        [-8.0, 1.0]
        """
        if isinstance(exponent, np.generic):
            exponent = exponent.item()
        if isinstance(exponent, (bool, int)):
            return self._int_pow(int(exponent))
        if isinstance(exponent, float) and exponent.is_integer() and abs(exponent) <= 2**64:
            return self._int_pow(int(exponent))  # larger integer-valued floats are all even: _pow's |x| ** y
        if isinstance(exponent, float) and exponent in (0.5, -0.5):
            root = self._float().sqrt()
            return root if exponent > 0 else root.reciprocal()  # torch's rsqrt: (-0.0) ** -0.5 is -inf
        base = self if isinstance(exponent, Tensor) else self._float()
        x, y = base._operands(exponent, "pow")
        if not x.dtype.is_float:
            raise TypeError(
                f"pow: a {self.dtype.name} tensor to the power of a {y.dtype.name} tensor: limn has no exact int "
                "power with a tensor exponent (torch computes one in ints); make a side float, e.g. x.cast('float32')"
            )
        dtype = x.dtype  # half widths compute in float32 and round once
        return _pow(x.cast(dtype.compute), y.cast(dtype.compute)).cast(dtype)

    def _int_pow(self, n: int) -> Tensor:
        """x ** n for a python int n by squaring: about 2 log2 |n| multiplies, real for negative x."""
        if not self.dtype.is_float and n < 0:
            raise RuntimeError(
                f"pow: a {self.dtype.name} tensor ** {n}: integers to negative integer powers are not allowed "
                f"(torch raises too); cast to a float dtype first, e.g. x.cast('float32') ** {n}"
            )
        x = self.cast(dtypes.int32) if self.dtype == dtypes.bool_ else self
        if n == 0:
            return Tensor.full(x.shape, True, device=x.device).where(1, x)  # x ** 0 = 1, linked to x (gradient 0)
        dtype = x.dtype
        x = x.cast(dtype.compute)  # half widths multiply in float32 and round once
        result, square, k = None, x if n > 0 else x.reciprocal(), abs(n)
        while k:  # x ** n = product of x ** (2 ** i) over the bits i of n
            if k & 1:
                result = square if result is None else result * square
            k >>= 1
            if k:
                square = square * square
        return result.cast(dtype)

    def rpow(self, base: Scalar) -> Tensor:
        """base ** self for a python number base, by the rules of pow: (-5.5) ** 2.0 = 30.25, 0 ** 0 = 1."""
        if isinstance(base, np.generic):
            base = base.item()
        if not self.dtype.is_float and not isinstance(base, float):
            raise TypeError(
                f"pow: {base!r} ** a {self.dtype.name} tensor: limn has no exact int power with a tensor exponent "
                f"(torch computes one in ints); make a side float, e.g. {float(base)!r} ** x"
            )
        x = self._float()
        return Tensor.full(x.shape, base, x.dtype, device=x.device).pow(x)

    # comparisons: CMPLT is False whenever a side is NaN (IEEE), and everything below is composed so that
    # eq is False, ne True, and le/ge False with a NaN on either side, as in torch

    def eq(self, other: TensorLike) -> Tensor:
        a, b = self._operands(other, "eq")
        neither_below = a.lt(b).where(False, b.lt(a).where(False, True))
        if not a.dtype.is_float:
            return neither_below  # ints and bools have no NaN
        # a NaN is below nothing and above nothing, so it passes the test above: rule it out. a + b is NaN
        # when a side is (and for inf + -inf, which that test already rejects), one isnan for both sides
        return neither_below.where((a + b).isnan().logical_not(), False)

    def ne(self, other: TensorLike) -> Tensor:
        return self.eq(other).logical_not()

    def gt(self, other: TensorLike) -> Tensor:
        return self.lt(other, reverse=True)

    def le(self, other: TensorLike, reverse: bool = False) -> Tensor:
        a, b = self._operands(other, "le", reverse)
        if not a.dtype.is_float:
            return b.lt(a).logical_not()  # a <= b: b is not below a
        return a.lt(b).where(True, a.eq(b))  # a <= b: a is below b or equal to it (so neither is NaN)

    def ge(self, other: TensorLike) -> Tensor:
        return self.le(other, reverse=True)

    def isnan(self) -> Tensor:
        """True where the value is NaN: the one value neither below inf nor above -inf. Ints and bools
        have no NaN, so it is all False for them, as in torch.

        >>> Tensor([float("nan"), 1.0, float("inf")]).isnan().tolist()
        [True, False, False]
        """
        if not self.dtype.is_float:
            return Tensor.full(self.shape, False, device=self.device)
        return self.lt(math.inf).where(False, self.gt(-math.inf).where(False, True))  # not (x < inf or -inf < x)

    def isinf(self) -> Tensor:
        """True where the value is inf or -inf (never for ints and bools).

        >>> Tensor([float("-inf"), 1.0, float("nan")]).isinf().tolist()
        [True, False, False]
        """
        if not self.dtype.is_float:
            return Tensor.full(self.shape, False, device=self.device)
        below_inf, above_minus_inf = self.lt(math.inf), self.gt(-math.inf)
        # isinf(x) = (x < inf) xor (-inf < x): a finite x passes both tests, NaN neither, inf and -inf one
        return below_inf.where(above_minus_inf.logical_not(), above_minus_inf)

    def isfinite(self) -> Tensor:
        """True where the value is neither inf, -inf nor NaN (always for ints and bools).

        >>> Tensor([float("-inf"), 1.0, float("nan")]).isfinite().tolist()
        [False, True, False]
        """
        if not self.dtype.is_float:
            return Tensor.full(self.shape, True, device=self.device)
        return self.lt(math.inf).logical_and(self.gt(-math.inf))  # isfinite(x) = x < inf and -inf < x

    def logical_not(self) -> Tensor:
        return self.cast(dtypes.bool_).where(False, True)

    def logical_and(self, other: TensorLike) -> Tensor:
        return self.cast(dtypes.bool_).where(other, False).cast(dtypes.bool_)

    def logical_or(self, other: TensorLike) -> Tensor:
        return self.cast(dtypes.bool_).where(True, other).cast(dtypes.bool_)

    def relu(self) -> Tensor:
        """max(x, 0) as torch computes it: 0 below 0, x itself elsewhere (so relu(-0.0) is -0.0 and
        relu(nan) is nan). The gradient flows where x > 0 or x is NaN, and is 0 at 0, as torch's."""
        if not self.dtype.is_float:
            return self.gt(0).where(self, 0)  # relu(x) = x if x > 0 else 0
        x = self
        flows = x.gt(0).where(True, x.lt(math.inf).logical_not())  # x > 0, or NaN (NaN is not below inf)
        return flows.where(x, x.lt(0).where(0.0, x.detach()))  # relu(x) = 0 if x < 0 else x

    def sigmoid(self) -> Tensor:
        # sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below, with e = e**-|x| in (0, 1]: the plain
        # 1 / (1 + e**-x) overflows to inf below x = -88 in float32, and inf * 0 makes its gradient NaN
        x = self._float()
        nonneg = x.ge(0)
        e = nonneg.where(-x, x).exp()
        return nonneg.where(1.0, e) / (1 + e)

    def tanh(self) -> Tensor:
        return 2 * (2 * self._float()).sigmoid() - 1  # tanh(x) = 2 sigmoid(2x) - 1

    def erf(self) -> Tensor:
        # Abramowitz & Stegun 7.1.26: |error| < 1.5e-7. t = 1/(1 + p|x|); erf = 1 - poly(t) e**(-x**2)
        x = self._float()
        a = x.abs()
        t = (1 + 0.3275911 * a).reciprocal()
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        y = 1 - poly * (-(a * a)).exp()
        return x.sign() * y

    def gelu(self, approximate: str = "none") -> Tensor:
        """x * Phi(x), with erf (torch's default) or with torch's tanh approximation."""
        x = self._float()
        if approximate == "tanh":
            inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
            return 0.5 * x * (1 + inner.tanh())
        if approximate != "none":
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', not {approximate!r}")
        return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())  # x * (1 + erf(x / sqrt 2)) / 2

    def silu(self) -> Tensor:
        return self * self.sigmoid()

    def sign(self) -> Tensor:
        return self.gt(0).cast(self.dtype) - self.lt(0).cast(self.dtype)  # (x > 0) - (x < 0): 0 at 0 and NaN, as torch

    def abs(self) -> Tensor:
        if not self.dtype.is_float:
            return self * self.sign()  # |x| = x sign(x)
        # |x| = x sign(x) + 0: the + 0 makes |-0.0| +0.0, as torch; gradient sign(x), so 0 at 0 and at NaN
        return self * self.sign() + 0.0

    def square(self) -> Tensor:
        return self * self

    def rsqrt(self) -> Tensor:
        return self.sqrt().reciprocal()

    def maximum(self, other: TensorLike) -> Tensor:
        """The larger of self and other, elementwise, in their promoted dtype, as torch.maximum: exact for
        every value (ints at their limits, inf, subnormals), NaN wins, a tie gives self's value with half the
        gradient to each side, and a NaN gives each side the whole gradient.

        >>> Tensor([1.0, 5.0]).maximum(Tensor([3.0, 2.0])).tolist()
        [3.0, 5.0]
        """
        a, b = self._operands(other, "maximum")
        return b.lt(a).where(a, a.lt(b).where(b, _tie_or_nan(a, b)))

    def minimum(self, other: TensorLike) -> Tensor:
        """The smaller of self and other, by the rules of maximum."""
        a, b = self._operands(other, "minimum")
        return a.lt(b).where(a, b.lt(a).where(b, _tie_or_nan(a, b)))

    def clip(self, lo: TensorLike | None = None, hi: TensorLike | None = None) -> Tensor:
        """Clamps into [lo, hi], as torch.clamp: min(max(x, lo), hi), so NaN stays NaN and lo > hi gives hi.

        With number bounds the gradient flows only strictly inside (lo < x < hi), so it is 0 at the bounds
        and at NaN, as torch's. Tensor bounds are maximum(x, lo) then minimum(., hi), whose ties split the
        gradient between x and the bound, which is torch's rule for one tensor bound.

        >>> Tensor([-2.0, 0.5, 3.0]).clip(-1.0, 1.0).tolist()
        [-1.0, 0.5, 1.0]
        """
        if isinstance(lo, Tensor) or isinstance(hi, Tensor):
            out = self if lo is None else self.maximum(lo)
            return out if hi is None else out.minimum(hi)
        x, value, inside = self, self.detach(), None
        if lo is not None:
            value = value.lt(lo).where(lo, value)  # max(x, lo)
            inside = x.gt(lo)
        if hi is not None:
            value = value.gt(hi).where(hi, value)  # min(., hi)
            inside = x.lt(hi) if inside is None else inside.logical_and(x.lt(hi))
        if inside is None:
            return x
        if any(isinstance(bound, float) and math.isnan(bound) for bound in (lo, hi)):
            value = value.where(math.nan, math.nan)  # a NaN bound makes every value NaN, as in torch
        return inside.where(x, value)  # x where it is strictly inside, so the gradient flows only there

    clamp = clip

    # ---- composed reductions ----

    def sum(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        return self._reduce(Op.SUM, axis, keepdim)

    def max(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The largest value over axis (every dim when None). NaN propagates and a bool tensor gives bool, as
        torch.amax; an empty axis raises IndexError, as in torch (there is no largest of no values)."""
        self._check_nonempty(self._axes(axis, "max"), "max")
        out = self._reduce(Op.MAX, axis, keepdim)
        return out.cast(dtypes.bool_) if self.dtype == dtypes.bool_ else out  # bools reduce as int32 0/1

    def min(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """The smallest value over axis, by the rules of max."""
        self._check_nonempty(self._axes(axis, "min"), "min")
        if self.dtype == dtypes.bool_:
            return self.logical_not().max(axis, keepdim).logical_not()  # min b = not max(not b)
        if self.dtype.is_int:
            # -x overflows at the most negative int; ~x = -x - 1 never does, and min x = ~max(~x)
            return -((-self - 1).max(axis, keepdim)) - 1
        return -((-self).max(axis, keepdim))  # min x = -max(-x)

    def mean(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        x = self._float()
        n = prod([self.shape[d] for d in self._axes(axis, "mean")])
        return x.sum(axis, keepdim) * (1.0 / n if n else float("nan"))

    def var(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """sum((x - mean)**2) / (n - correction); correction=1 is torch's default, 0 the biased form.

        Once correction reaches n, torch divides by zero and so does limn: inf, or NaN where every value is
        the mean (and NaN for an empty slice). The gradient there is 2 (x - mean) / 0, so +-inf, which is
        torch's rule for an axis; torch's all-dims form instead gives +inf throughout."""
        x = self._float()
        n = prod([self.shape[d] for d in self._axes(axis, "var")])
        mean = x.mean(axis, keepdim=True)
        if n <= correction:
            centered = x - mean.detach()  # the mean's path would add inf * 0 = NaN to the gradient
            return (centered * centered).sum(axis, keepdim) * math.inf  # sum / 0
        # the mean's path adds sum(2 (x - mean)) / n = 0 to the gradient (it matters to second derivatives), but
        # a slice holding inf or NaN makes that sum NaN for every element; torch's gradient, 2 (x - mean) / (n - c),
        # is NaN only where x - mean is, so those slices (their mean is not finite) cut the mean's path
        mean = mean.isfinite().where(mean, mean.detach())
        centered = x - mean
        return (centered * centered).sum(axis, keepdim) * (1.0 / (n - correction))

    def std(self, axis: int | Sequence[int] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor:
        """sqrt(var(x)), as torch, whose gradient is 0 where the std is 0.

        It is computed as m * sqrt(var(x / m)) with m = max|x| over each slice, so values near the float limits
        do not overflow when squared (torch accumulates in float64; x ~ 3e38 has a std of about 3e38, not inf).
        m is a constant to autograd, which leaves the gradient exact: std(x) = m std(x / m) for every m > 0."""
        axes = self._axes(axis, "std")
        x = self._float()
        wide = x.cast(x.dtype.compute)
        m = wide.abs()._reduce(Op.MAX, axes, keepdim=True).detach()
        # 1/m overflows for a subnormal m, so those slices are lifted by 2**64 first (exact: a power of two)
        lift = m.lt(2.0**-64).where(2.0**64, 1.0)
        lifted = m * lift
        unit = (wide * lift) * lifted.eq(0).where(1.0, lifted).reciprocal()  # x / m, and 0 where every x is 0
        v = unit.var(axes, keepdim=True, correction=correction)
        positive = v.gt(0)
        root = positive.where(positive.where(v, 1.0).sqrt(), v)  # sqrt(v), with gradient 0 (not 1/0) at v = 0
        out = (root * m).cast(x.dtype)
        return out if keepdim else out.reshape(tuple(s for d, s in enumerate(self.shape) if d not in axes))

    def logsumexp(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        axes = self._axes(axis, "logsumexp")
        x = self._float()
        m = x._reduce(Op.MAX, axes, keepdim=True).detach()  # shifting by the max keeps exp in range; it cancels
        m = m.isinf().where(0.0, m)  # an infinite max (or an empty slice's -inf) shifts by 0, as torch
        out = m + (x - m).exp().sum(axes, keepdim=True).log()  # logsumexp = m + log sum exp(x - m)
        return out if keepdim else out.reshape(tuple(s for d, s in enumerate(self.shape) if d not in axes))

    def softmax(self, axis: int = -1) -> Tensor:
        axis = _normalize_axis(axis, self.ndim, "softmax")
        x = self._float()
        e = (x - x._reduce(Op.MAX, axis, keepdim=True).detach()).exp()  # softmax = exp(x - max) / sum
        return e / e.sum(axis, keepdim=True)

    def log_softmax(self, axis: int = -1) -> Tensor:
        axis = _normalize_axis(axis, self.ndim, "log_softmax")
        x = self._float()
        shifted = x - x._reduce(Op.MAX, axis, keepdim=True).detach()
        return shifted - shifted.exp().sum(axis, keepdim=True).log()  # log softmax = (x - max) - log sum exp(...)

    def argmax(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first maximum along axis (over the flattened tensor when axis is None), int32. NaN
        counts as the largest value, as in torch. Bool tensors and empty axes raise, as in torch."""
        if self.dtype == dtypes.bool_:
            raise TypeError("argmax of a bool tensor: torch does not define it; cast first, x.cast('int32').argmax()")
        if axis is None:
            self._check_nonempty(self._axes(None, "argmax"), "argmax")
            return self.reshape(-1).argmax(0, keepdim=False)
        axis = _normalize_axis(axis, self.ndim, "argmax")
        if self.ndim == 0:
            return Tensor.full((), 0, dtypes.int32, device=self.device)  # the one value sits at index 0
        self._check_nonempty((axis,), "argmax")
        n = self.shape[axis]
        hit = self.eq(self.max(axis, keepdim=True))
        if self.dtype.is_float:
            hit = hit.logical_or(self.isnan())  # NaN counts as the largest value, as in torch.argmax
        shape = [1] * self.ndim
        shape[axis] = n
        # the first hit has the largest (n - index); an index that misses scores 0
        score = hit.where(Tensor.arange(n, 0, -1, device=self.device).reshape(shape), 0)
        return (n - score.max(axis, keepdim=keepdim)).cast(dtypes.int32)

    def argmin(self, axis: int | None = None, keepdim: bool = False) -> Tensor:
        """Index of the first minimum, by the rules of argmax (NaN counts as the smallest value here)."""
        if self.dtype == dtypes.bool_:
            raise TypeError("argmin of a bool tensor: torch does not define it; cast first, x.cast('int32').argmin()")
        self._check_nonempty(self._axes(axis, "argmin"), "argmin")
        # the first minimum of x is the first maximum of -x; for ints of ~x = -x - 1, since -x wraps at -128
        flipped = -self - 1 if self.dtype.is_int else -self
        return flipped.argmax(axis, keepdim)

    # ---- linear algebra ----

    def matmul(self, other: Tensor) -> Tensor:
        """(..., n, k) @ (..., k, m) -> (..., n, m) as a broadcast multiply and a sum over k, which the
        scheduler fuses into one kernel. 1-D operands act as a row or a column, as in numpy."""
        a, b = self, other if isinstance(other, Tensor) else Tensor(other)
        b_shape = b.shape
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("matmul: both operands need at least one dim; use * for scalars")
        squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
        if squeeze_a:
            a = a.reshape(1, a.shape[0])
        if squeeze_b:
            b = b.reshape(b.shape[0], 1)
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(f"matmul {self.shape} @ {b_shape}: inner sizes {a.shape[-1]} and {b.shape[-2]} differ")
        dtype = dtypes.promote(a.dtype, b.dtype)
        compute = dtype.compute  # half widths: multiply and sum in float32, round once at the end
        a, b = a.cast(compute), b.cast(compute)
        prod_ = a.unsqueeze(-2) * b.transpose(-1, -2).unsqueeze(-3)  # (..., n, 1, k) * (..., 1, m, k)
        out = prod_.sum(-1).cast(dtype)  # (..., n, m, k) -> (..., n, m)
        if squeeze_a:
            out = out.squeeze(-2)
        if squeeze_b:
            out = out.squeeze(-1)
        return out

    def dot(self, other: Tensor) -> Tensor:
        return self.matmul(other)

    # ---- lookups and losses composed from gather / scatter ----

    def embedding(self, idx: Tensor) -> Tensor:
        """Rows of this (V, D) table picked by int indices of any shape S: (V, D), S -> (*S, D)."""
        if self.ndim != 2:
            raise ValueError(f"embedding: the table must be (vocab, dim), got {self.shape}")
        idx = _index_tensor(idx, "embedding")
        flat = idx.reshape(idx.size, 1).expand(idx.size, self.shape[1])  # (N,) -> (N, D)
        return self.gather(flat, axis=0).reshape(idx.shape + (self.shape[1],))

    def one_hot(self, num_classes: int) -> Tensor:
        """Int class ids of shape S -> (*S, num_classes) int32 with a 1 at each id. It is a scatter, so an id
        outside [0, num_classes) is an IndexError when the value is computed, not a silent row of zeros."""
        idx = _index_tensor(self, "one_hot").unsqueeze(-1)  # S -> (*S, 1)
        ones = Tensor.ones(idx.shape, dtypes.int32, device=self.device)
        zeros = Tensor.zeros(idx.shape[:-1] + (num_classes,), dtypes.int32, device=self.device)
        return zeros.scatter_add(idx, ones, axis=-1)  # (*S, num_classes)

    def cross_entropy(
        self, target: Tensor, ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean"
    ) -> Tensor:
        """torch.nn.functional.cross_entropy for logits (N, C) or (N, C, ...) and int class targets.
        loss = (1 - s) * -log p[target] + s * mean_c(-log p[c]); targets equal to ignore_index count nothing."""
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', not {reduction!r}")
        logits = self if self.ndim > 1 else self.unsqueeze(0)
        target = _index_tensor(target, "cross_entropy")
        target = target if self.ndim > 1 else target.reshape(1)
        if target.shape != logits.shape[:1] + logits.shape[2:]:
            raise ValueError(
                f"cross_entropy: logits {self.shape} need targets of shape "
                f"{logits.shape[:1] + logits.shape[2:]}, got {target.shape}"
            )
        logp = logits.log_softmax(axis=1)  # (N, C, ...)
        valid = target.ne(ignore_index)
        safe = valid.where(target, 0).cast(target.dtype).unsqueeze(1)  # ignored rows read class 0
        nll = -logp.gather(safe, axis=1).squeeze(1)  # (N, ...)
        loss = nll if label_smoothing == 0 else (1 - label_smoothing) * nll - label_smoothing * logp.mean(axis=1)
        loss = valid.where(loss, 0.0)
        if reduction == "none":
            return loss if self.ndim > 1 else loss.reshape(())
        if reduction == "sum":
            return loss.sum()
        return loss.sum() / valid.cast(loss.dtype).sum()

    # ---- autograd ----

    def backward(self, gradient: TensorLike | None = None, create_graph: bool = False) -> None:
        """Accumulates d(self)/d(leaf) into .grad of every leaf that requires grad. Gradients are lazy
        graphs; create_graph=True makes them differentiable again (for second derivatives)."""
        autograd.backward(self, gradient, create_graph)

    # ---- python operators ----

    __add__ = add
    __mul__ = mul
    __sub__ = sub
    __truediv__ = div
    __pow__ = pow
    __matmul__ = matmul
    __lt__ = lt
    __gt__ = gt
    __le__ = le
    __ge__ = ge

    def __radd__(self, other: TensorLike) -> Tensor:
        return self.add(other, reverse=True)

    def __rmul__(self, other: TensorLike) -> Tensor:
        return self.mul(other, reverse=True)

    def __rsub__(self, other: TensorLike) -> Tensor:
        return self.sub(other, reverse=True)

    def __rtruediv__(self, other: TensorLike) -> Tensor:
        return self.div(other, reverse=True)

    def __rpow__(self, other: Scalar) -> Tensor:
        return self.rpow(other)

    def __rmatmul__(self, other: TensorLike) -> Tensor:
        return Tensor(other).matmul(self)

    def __neg__(self) -> Tensor:
        return self.neg()

    def __eq__(self, other: object) -> Tensor:  # type: ignore[override]
        return self.eq(other)

    def __ne__(self, other: object) -> Tensor:  # type: ignore[override]
        return self.ne(other)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any()/.all()")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def any(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """Whether some value over axis is nonzero (NaN is); over an empty axis False, as in torch."""
        # any = max of (x != 0) as 0/1, > 0; MAX of nothing is the lowest int, so any of nothing is False
        return self.cast(dtypes.bool_).cast(dtypes.int32)._reduce(Op.MAX, axis, keepdim).gt(0)

    def all(self, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:
        """Whether every value over axis is nonzero; over an empty axis True, as in torch."""
        return self.logical_not().any(axis, keepdim).logical_not()  # all x = not any(not x)


# ---- helpers that need the Tensor class ----


def _tie_or_nan(a: Tensor, b: Tensor) -> Tensor:
    """maximum's (and minimum's) answer where neither of a, b is below the other: a tie, or a NaN.

    A tie gives a's value exactly with half the gradient to each side, and a NaN gives NaN with the whole
    gradient to both, as torch. (a + b) / 2 would overflow at the float limits and round subnormals, so a
    finite tie takes a - ((a - b) / 2 + 0), whose added term is exactly +0 there (so -0.0 keeps its sign)
    and whose gradient is the half-half split. At an infinite tie a - b is NaN, but (a + b) / 2 is a itself."""
    if not a.dtype.is_float:
        return a  # ints and bools: a tie, and no gradient to split
    difference, total = a - b, a + b  # at a tie: 0 (finite) or NaN (infinite); a NaN side makes both NaN
    finite_tie = difference.lt(math.inf)  # difference is 0 or NaN here, and only 0 is below inf
    infinite_or_nan = total.isnan().where(total, total * 0.5)
    return finite_tie.where(a - (difference * 0.5 + 0.0), infinite_or_nan)


@dataclass(frozen=True)
class _PowRules:
    """What C's pow decides per element of x ** y, as tensors of x's shape (from detached x and y)."""

    sign: Tensor  # -1 where a negative base (-0.0 and -inf too) meets an odd integer power, else 1
    flip: Tensor  # where |x| stands in for x: a negative base to an integer-valued power (or -0.0, -inf)
    edge: Tensor  # where sign * e**(y log|x|) fails: x = +-0 or +-inf, and the 1s it cannot make
    edge_value: Tensor  # x ** y at the edge points


def _pow_rules(x: Tensor, y: Tensor) -> _PowRules:
    """C's pow decisions for x ** y, from detached x and y of one shape and float dtype."""
    magic = 2.0**52 if x.dtype == dtypes.float64 else 2.0**23  # from here up every float is an integer
    ay = y.abs()
    y_int = ay.ge(magic).logical_or((ay + magic - magic).eq(ay))  # ay + 2**23 rounds ay to an integer
    half = ay * 0.5
    y_odd = y_int.logical_and(ay.lt(2 * magic)).logical_and((half + magic - magic).eq(half).logical_not())
    negative = x.lt(0).logical_or(x.reciprocal().lt(0))  # x < 0, or -0.0 (1 / -0.0 = -inf)
    finite_negative = x.lt(0).logical_and(x.gt(-math.inf))
    zero, infinite, unit = x.eq(0), x.isinf(), x.eq(1).logical_or(x.eq(-1))
    one = y.eq(0).logical_or(x.eq(1)).logical_or(unit.logical_and(y.isinf()))  # C's pow gives exactly 1
    fails = y.eq(0).logical_and(x.isnan()).logical_or(x.eq(1).logical_and(y.isnan()))
    fails = fails.logical_or(unit.logical_and(y.isinf()))  # e**(nan * 0) and e**(inf * 0) are NaN, not 1
    large = y.gt(0).eq(infinite)  # for |x| in {0, inf}: |x| ** y is inf where y > 0 matches |x| = inf
    magnitude = y.isnan().where(math.nan, large.where(math.inf, 0.0))
    sign = negative.logical_and(y_odd).where(-1.0, 1.0)
    return _PowRules(
        sign=sign,
        flip=negative.logical_and(finite_negative.logical_and(y_int.logical_not()).logical_not()),
        edge=zero.logical_or(infinite).logical_or(fails),
        edge_value=one.where(1.0, sign * magnitude),
    )


def _pow(x: Tensor, y: Tensor) -> Tensor:
    """x ** y for float tensors of one shape and dtype, by C's pow, with torch's gradients.

    Away from the edges it is sign * e**(y log|x|), sign -1 for a negative base to an odd power (a finite
    negative base to a non-integer power keeps x, and log x makes it NaN), which autograd differentiates as
    written. At the edges (x = +-0 or +-inf, and 1s such as 1 ** nan) that gradient is 0/0 or inf/inf, so
    the value comes from the rules and the gradient from torch's formulas, d/dx = y x**(y-1) (0 where y = 0)
    and d/dy = x**y log x (0 where x = 0 <= y), by _gradient_carrier. The one gradient it cannot carry is
    torch's +inf for (-inf) ** 2.5 (no composition rises to +inf at -inf): there it is 0."""
    rules = _pow_rules(x.detach(), y.detach())
    safe_base = rules.edge.where(1.0, rules.flip.where(-x, x))  # 1 ** 0 at the edges: gradient 0 there, not NaN
    safe_y = rules.edge.where(0.0, y)
    smooth = rules.sign * (safe_y * safe_base.log()).exp()  # x ** y = sign * e**(y log|x|)
    at_edge = rules.edge_value
    if autograd.is_grad_enabled() and x.requires_grad:
        xd, yd = x.detach(), y.detach()
        dx = yd.eq(0).where(0.0, yd * _pow(xd, yd - 1))  # torch: y x**(y-1), 0 where y = 0
        at_edge = at_edge - (0 - _gradient_carrier(x, dx, at_edge, rules.edge))
    if autograd.is_grad_enabled() and y.requires_grad:
        xd, yd = x.detach(), y.detach()
        dy = xd.eq(0).logical_and(yd.ge(0)).where(0.0, rules.edge_value * xd.log())  # torch: x**y log x
        at_edge = at_edge - (0 - _gradient_carrier(y, dy, at_edge, rules.edge))
    return rules.edge.where(at_edge, smooth)


def _gradient_carrier(t: Tensor, d: Tensor, value: Tensor, at: Tensor) -> Tensor:
    """A tensor whose gradient w.r.t. t is d (detached; inf and NaN too) where `at` holds and 0 elsewhere, and
    whose value is +-0, or where t is infinite value's own infinity, so that value - (0 - carrier) is value
    (-0.0 included).

    Where t is finite, z = t - t.detach() is exactly +0 with gradient 1: z * d carries a finite d, and
    sqrt(z), which is 0 with gradient 1 / (2 sqrt 0) = inf, carries d = +-inf (its sign taken outside) and,
    times 0, NaN. Where t is infinite z is NaN, but t * d is value's infinity when the signs agree (t = -inf,
    d = -inf, value = inf); nothing else carries a gradient there. Every branch is fed values whose gradient
    is finite where it is not taken, so no NaN leaks through the where."""
    finite_t = at.logical_and(t.isfinite())
    linear = finite_t.logical_and(d.isfinite())
    steep = finite_t.logical_and(d.isfinite().logical_not())
    along = at.logical_and(t.isinf()).logical_and(value.isinf()).logical_and((t.detach() * d).eq(value))
    z = t - t.detach()
    by_linear = z * linear.where(d, 0.0)
    by_steep = steep.where(z, 1.0).sqrt() * d.isnan().where(0.0, d.gt(0).where(1.0, -1.0))
    by_along = t * along.where(d, 1.0)
    return linear.where(by_linear, steep.where(by_steep, along.where(by_along, 0.0)))


def _index_tensor(idx: TensorLike, what: str) -> Tensor:
    idx = idx if isinstance(idx, Tensor) else Tensor(idx)
    if not idx.dtype.is_int:
        raise TypeError(f"{what}: indices must be an int tensor (int32, int16 or int8), got {idx.dtype.name}")
    return idx


def _join_devices(tensors: Sequence[Tensor], what: str) -> str:
    """The device an op on these tensors belongs to. Host devices share bytes and mix freely (host
    tensors also upload to a device tensor's device); two different non-host devices do not mix."""
    first = tensors[0].device
    if all(t.device == first for t in tensors):
        return first
    non_host = sorted({t.device for t in tensors if not get_device(t.device).host})
    if len(non_host) > 1:
        raise DeviceError(f"{what}: mixes tensors on devices {', '.join(non_host)}; move them to one with .to(name)")
    return non_host[0] if non_host else first
