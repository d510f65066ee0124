"""Primitives, the base of Tensor: a lazy value's state (a Node in the op graph, plus what autograd needs)
and one method per primitive.

Each primitive method takes tensors and gives a tensor of one new Node (with a Context for autograd when
a parent requires grad): Tensor(data) a BUFFER, Tensor.full a CONST, the elementwise ops, reduces, indexed
ops, barriers and the five movements. Everything composed from these comes from the mixins that
limn.frontend.tensor lists as Tensor's other bases. The tensors made here are that class, `limn.Tensor`, named
at call time: it is built after this module. Bytes appear only at .numpy(), .item() or .realize(), which hand
the graph to limn.runtime.engine.
Pipeline: **tensor** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partialmethod
from typing import TYPE_CHECKING, Any

import numpy as np

import limn
from limn import autograd, dtypes
from limn.autograd import Context
from limn.dtypes import DType
from limn.errors import ArgumentError
from limn.frontend.arguments import (
    Scalar,
    TensorLike,
    broadcast_shape,
    check_requires_grad,
    const_value,
    dim_first,
    host_array,
    normalize_axis,
    scalar_dtype,
    times_alpha,
)
from limn.frontend.host import HostMixin
from limn.graph.ops import Movement, Node, Op, Shape
from limn.graph.view import View, prod
from limn.runtime.device import DeviceError, current_device, get_device
from limn.runtime.engine import buffer_node, observers, pending

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def index_tensor(idx: TensorLike, what: str) -> Tensor:
    """idx as an int tensor of indices (host data becomes one); anything else is a TypeError."""
    idx = idx if isinstance(idx, limn.Tensor) else limn.Tensor(idx)
    if not idx.dtype.is_int:
        raise TypeError(f"{what}: indices must be an int tensor (int64, int32, ... uint8), got {idx.dtype.name}")
    return idx


# each movement's View method, looked up once: an Enum's .value is a Python-level property
_VIEW_METHODS = {kind: getattr(View, kind.value) for kind in Movement}


def join_devices(tensors: Sequence[Tensor], what: str | Op) -> str:
    """The device an op on these tensors belongs to. Host devices share bytes and mix freely (host
    tensors also upload to a device tensor's device); two different non-host devices do not mix."""
    if len({t._device for t in tensors}) == 1:  # every op asks, and nearly always of one device
        return tensors[0]._device
    non_host = sorted({t.device for t in tensors if not get_device(t.device).host})
    if len(non_host) > 1:
        name = what.name if isinstance(what, Op) else what  # an op's name is spelled only for the error
        raise DeviceError(f"{name}: mixes tensors on devices {', '.join(non_host)}; move them to one with .to(name)")
    return non_host[0] if non_host else tensors[0]._device


class Primitives(HostMixin):
    """A tensor's state and its primitive ops: the base the mixins of limn.frontend.tensor complete into
    Tensor. Its constructor is Tensor's: Tensor(data) copies `data` into a buffer (Tensor's docstring)."""

    __slots__ = ("node", "requires_grad", "grad", "_ctx", "_device", "__weakref__")
    __array_priority__ = 1000  # numpy scalar (op) Tensor defers to Tensor's reflected op

    def __init__(
        self,
        data: TensorLike,
        *,
        dtype: DType | str | None = None,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> None:
        dtype = None if dtype is None else dtypes.as_dtype(dtype)
        if isinstance(data, limn.Tensor):
            src = data if dtype is None else data.cast(dtype)
            if device is not None and get_device(device).name != src.device:
                src = src.to(device)  # a copy on that device, as torch.tensor(t, device=...) is
            self.node, self._device = src.node, src._device
        else:
            arr = host_array(data, dtype)
            self._device = device or current_device()
            self.node = buffer_node(self._device, arr)
        self.requires_grad = bool(requires_grad)
        self.grad: Tensor | None = None
        self._ctx: Context | None = None
        check_requires_grad(requires_grad, self.dtype, "Tensor()")

    @staticmethod
    def _from_node(node: Node, device: str, ctx: Context | None = None) -> Tensor:
        t = object.__new__(limn.Tensor)
        t.node, t._device, t._ctx, t.grad = node, device, ctx, None
        t.requires_grad = ctx is not None
        return t

    @staticmethod
    def full(
        shape: Sequence[int] | int,
        value: Scalar,
        *,
        dtype: DType | str | None = None,
        device: str | None = None,
        requires_grad: bool = False,
    ) -> Tensor:
        """A tensor of `shape` holding `value` everywhere. dtype: bool for a bool value, int32 for an int,
        float32 for a float, unless given; the value is rounded (ints wrapped) to it.

        It is a CONST node, so nothing is allocated until it is realized and a movement of it stays a CONST.
        With requires_grad=True it is realized into a buffer of its own now: a leaf a gradient can reach.

        >>> Tensor.full((2,), 7).tolist(), Tensor.full((), 300, dtype="int8").item()
        ([7, 7], 44)
        """
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if any(not isinstance(s, int) or s < 0 for s in shape):
            raise ArgumentError(f"full(): shape {shape} must be non-negative ints")
        dtype = scalar_dtype(value, "full()") if dtype is None else dtypes.as_dtype(dtype)
        check_requires_grad(requires_grad, dtype, "full()")
        if device is None:
            device = current_device()
        else:
            get_device(device)  # an unknown device raises here, not at the first realize
        node = Node(Op.CONST, (), dtype, shape, const_value(value, dtype))
        t = limn.Tensor._from_node(node, device)
        if requires_grad:
            t = t.contiguous().realize().detach()
            t.requires_grad = True
        return t

    def detach(self) -> Tensor:
        """The same value, cut off from gradient history. It is no alias: a later assign to self does not
        change it (limn.runtime.snapshot), unlike torch's detach, which shares storage."""
        return limn.Tensor._from_node(self.node, self.device)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Marks this tensor as a leaf gradients reach (or not), as torch's; returns self. A lazy value is
        realized into a buffer of its own first, so an optimizer can assign to it. Only a leaf can be
        switched off: a computed value's history stays (use .detach())."""
        if self._ctx is not None and not requires_grad:
            raise RuntimeError(
                "requires_grad_(False) on a computed tensor: only leaves can change the flag; "
                "use x.detach() for a value cut off from the graph"
            )
        check_requires_grad(requires_grad, self.dtype, "requires_grad_()")
        if requires_grad and self._ctx is None and self.node.op is not Op.BUFFER:
            self.realize()
        self.requires_grad = bool(requires_grad) or self._ctx is not None
        return self

    def assign(self, value: TensorLike) -> Tensor:
        """Overwrites this tensor's buffer with `value` (cast to self's dtype) at the next realize; returns self.

        Every assign realized in one realize() reads the values from before any of them, so their order
        cannot matter, and a value built before the assign still computes what it saw then (limn.runtime.snapshot).
        A second assign realizes the first; two tensors over one buffer, each with one pending, raise at realize."""
        if not isinstance(value, limn.Tensor):
            value = (
                limn.Tensor.full(self.shape, value, dtype=self.dtype, device=self.device)
                if isinstance(value, (bool, int, float))
                else limn.Tensor(value, dtype=self.dtype, device=self.device)
            )
        if value.shape != self.shape:
            raise ArgumentError(f"assign: value of shape {value.shape} cannot be written into shape {self.shape}")
        if value.dtype != self.dtype:
            value = value.cast(self.dtype)
        self.realize()  # the target is a buffer, and the bytes this tensor holds now (limn.runtime.snapshot)
        self.node = Node(Op.ASSIGN, (self.node, value.node), self.dtype, self.shape)
        self._ctx = None
        pending.assigns[id(self)] = self
        for observer in observers.active:
            observer.assigned(self)
        return self

    # ---- primitives: each builds one Node (and a Context when gradients flow) ----

    def _result(self, node: Node, rule: Op | Movement, parents: tuple[Tensor, ...], arg: Any = None) -> Tensor:
        device = join_devices(parents, node.op)
        ctx = None
        if autograd.is_grad_enabled() and any(p.requires_grad for p in parents):
            ctx = Context(rule, parents, node, arg)
        return limn.Tensor._from_node(node, device, ctx)

    def _unary(self, op: Op, dtype: DType | None = None) -> Tensor:
        return self._result(Node(op, (self.node,), dtype or self.dtype, self.shape), op, (self,))

    def cast(self, dtype: DType | str) -> Tensor:
        """Converts to dtype (self itself when it has it already). Floats to ints truncate toward zero,
        narrowing ints wrap, anything to bool is `!= 0`. Gradients flow through casts between floats; an int
        or bool result has none, as in torch."""
        if dtype is self.node.dtype:  # most casts in composed ops are to the dtype a tensor has
            return self
        dtype = dtypes.as_dtype(dtype)
        if dtype == self.dtype:
            return self
        if not dtype.is_float:
            return self.detach()._unary(Op.CAST, dtype)  # as torch's x.long(): cut off from x's gradient
        return self._unary(Op.CAST, dtype)

    def _float(self) -> Tensor:
        """Self, cast to float32 when it is an int or bool tensor."""
        return self if self.dtype.is_float else self.cast(dtypes.float32)

    def neg(self) -> Tensor:
        """-x. Ints wrap (-(-128) is -128 in int8); a bool tensor raises (use logical_not)."""
        if self.dtype == dtypes.bool_:
            raise TypeError("negation of a bool tensor; use .logical_not()")
        return self._unary(Op.NEG)

    def exp(self) -> Tensor:
        """e**x, elementwise; an int or bool tensor is cast to float32 first."""
        return self._float()._unary(Op.EXP)

    def log(self) -> Tensor:
        """The natural log, elementwise (-inf at 0, NaN below); an int or bool tensor is cast to float32 first."""
        return self._float()._unary(Op.LOG)

    def sqrt(self) -> Tensor:
        """The square root, elementwise (NaN below 0); an int or bool tensor is cast to float32 first."""
        return self._float()._unary(Op.SQRT)

    def reciprocal(self) -> Tensor:
        """1 / x, elementwise (inf at 0, -inf at -0.0); an int or bool tensor is cast to float32 first."""
        return self._float()._unary(Op.RECIP)

    def _operands(self, other: TensorLike, what: str, reverse: bool = False) -> tuple[Tensor, Tensor]:
        """Self and other promoted to one dtype and broadcast to one shape."""
        a = self
        if isinstance(other, limn.Tensor):
            b = other
            dtype = dtypes.promote_shaped(a.dtype, a.ndim == 0, b.dtype, b.ndim == 0)
        elif isinstance(other, (bool, int, float, np.number, np.bool_)):  # a CONST of self's shape: no movement
            value = other.item() if isinstance(other, np.generic) else other
            dtype = dtypes.scalar_dtype(a.dtype, value)
            a = a.cast(dtype)
            # the CONST node made directly: self's shape and device are known good (Tensor.full checks them)
            b = limn.Tensor._from_node(Node(Op.CONST, (), dtype, a.shape, const_value(value, dtype)), a._device)
            return (b, a) if reverse else (a, b)
        else:
            b = limn.Tensor(other, device=a.device)
            dtype = dtypes.promote(a.dtype, b.dtype)
        a, b = a.cast(dtype), b.cast(dtype)
        shape = broadcast_shape(a.shape, b.shape, what)
        a, b = a.broadcast_to(shape), b.broadcast_to(shape)
        return (b, a) if reverse else (a, b)

    def _binary(self, op: Op, other: TensorLike, reverse: bool = False, dtype: DType | None = None) -> Tensor:
        a, b = self._operands(other, op.name.lower(), reverse)
        node = Node(op, (a.node, b.node), dtype or a.dtype, a.shape)
        return a._result(node, op, (a, b))

    def add(self, other: TensorLike, reverse: bool = False, *, alpha: Scalar = 1) -> Tensor:
        """self + alpha * other (torch.add), promoted (limn.dtypes) and broadcast. A python scalar takes self's
        dtype, so an int8 tensor + 200 stays int8 and wraps; bools add as logical or.

        >>> Tensor([1.0, 2.0]).add(Tensor([10.0, 20.0]), alpha=0.5).tolist()
        [6.0, 12.0]
        """
        return self._binary(Op.ADD, times_alpha(self, other, alpha, "add"), reverse)

    def mul(self, other: TensorLike, reverse: bool = False) -> Tensor:
        """self * other, promoted and broadcast as add; ints wrap, bools multiply as logical and."""
        return self._binary(Op.MUL, other, reverse)

    def lt(self, other: TensorLike, reverse: bool = False) -> Tensor:
        """self < other as a bool tensor, promoted and broadcast as add; False where either side is NaN."""
        return self._binary(Op.CMPLT, other, reverse, dtypes.bool_)

    def where(self, a: TensorLike, b: TensorLike) -> Tensor:
        """Elementwise self ? a : b. self is the condition (a non-bool tensor means self != 0); a and b
        promote and broadcast with it. The gradient goes to a where the condition holds and to b elsewhere;
        the trap, as in torch: a NaN or inf in the branch not taken still makes its own gradient NaN."""
        cond = self if self.dtype == dtypes.bool_ else self.ne(0)
        if not isinstance(a, limn.Tensor) and not isinstance(b, limn.Tensor):
            a = limn.Tensor.full(cond.shape, a, device=cond.device)
        if isinstance(a, limn.Tensor):
            a, b = a._operands(b, "where")
        else:
            b, a = b._operands(a, "where")
        shape = broadcast_shape(cond.shape, a.shape, "where")
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
        normalized = {normalize_axis(a, self.ndim, what) for a in axes}
        return tuple(sorted(normalized)) if self.ndim else ()

    def gather(self, dim: int, index: TensorLike, *, sparse_grad: bool = False) -> Tensor:
        """out[..., j, ...] = self[..., index[..., j, ...], ...] along `dim`, as torch.gather. index has self's
        rank and is no larger in the other dims; out has index's shape. An index out of range is an IndexError
        when the value is computed, not at this call. sparse_grad is torch's; the gradient is the same."""
        dim = dim_first(dim, index, "gather(dim, index)")
        dim = normalize_axis(dim, self.ndim, "gather")
        index = index_tensor(index, "gather")
        if index.ndim != self.ndim or any(i > s for d, (i, s) in enumerate(zip(index.shape, self.shape)) if d != dim):
            raise ArgumentError(
                f"gather: index of shape {index.shape} does not fit a source of shape {self.shape} "
                f"along dim {dim} (same rank, and no larger than the source off that dim)"
            )
        box = tuple((0, i) if d != dim else (0, s) for d, (i, s) in enumerate(zip(index.shape, self.shape)))
        src = self.shrink(box)
        node = Node(Op.GATHER, (src.node, index.node), self.dtype, index.shape, dim)
        return src._result(node, Op.GATHER, (src, index), dim)

    def scatter_add(self, dim: int, index: TensorLike, src: TensorLike) -> Tensor:
        """A copy of self with src[..., j, ...] added at self[..., index[..., j, ...], ...] along `dim`, as
        torch.scatter_add; colliding indices all add. index has self's rank, no larger off `dim`; src (a tensor
        of self's dtype, or data taken in it) may be larger than index, which reads its first part."""
        dim = dim_first(dim, index, "scatter_add(dim, index, src)")
        dim = normalize_axis(dim, self.ndim, "scatter_add")
        index = index_tensor(index, "scatter_add")
        src = self._source(src, index.shape, "scatter_add")
        if index.ndim != self.ndim or any(i > s for d, (i, s) in enumerate(zip(index.shape, self.shape)) if d != dim):
            raise ArgumentError(
                f"scatter_add: index of shape {index.shape} does not fit a target of shape {self.shape} "
                f"along dim {dim} (same rank, and no larger than the target off that dim)"
            )
        node = Node(Op.SCATTER, (self.node, index.node, src.node), self.dtype, self.shape, dim)
        return self._result(node, Op.SCATTER, (self, index, src), dim)

    def _source(self, src: TensorLike, shape: Shape, what: str) -> Tensor:
        """src for a write into self: in self's dtype, cut to the index's shape (torch reads only that much of
        it). A src tensor of another dtype raises, as torch's: a cast would hide a float written into ints."""
        if isinstance(src, limn.Tensor) and src.dtype != self.dtype:
            raise ArgumentError(
                f"{what}: src is {src.dtype.name} and the tensor written into is {self.dtype.name}; they must "
                f"match (cast src first: src.cast('{self.dtype.name}'))"
            )
        src = src if isinstance(src, limn.Tensor) else limn.Tensor(src, dtype=self.dtype, device=self.device)
        if src.ndim != len(shape) or any(s < i for s, i in zip(src.shape, shape)):
            raise ArgumentError(
                f"{what}: src of shape {src.shape} is smaller than the index {shape}; it needs one value each"
            )
        return src.shrink(tuple((0, i) for i in shape))

    def contiguous(self) -> Tensor:
        """Materializes this value in row-major order (a barrier the scheduler will not fuse through)."""
        return self._unary(Op.CONTIGUOUS)

    # ---- movement: each one composes into the tensor's View ----

    def _movement(self, kind: Movement, arg: Any) -> Tensor:
        """Applies movement `kind` to self's view (the View method it is named after, with `arg`); copies
        first where a reshape cannot be a view."""
        change = _VIEW_METHODS[kind]  # View.reshape, View.permute, ...: (view, arg) -> view
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
        """The same elements in row-major order under a new shape; one dim may be -1. A view where the
        strides allow it; otherwise a copy first (CONTIGUOUS), which the scheduler materializes."""
        new = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else tuple(shape)
        if new.count(-1) > 1:
            raise ArgumentError(f"reshape {self.shape} -> {new}: only one dim can be -1")
        if -1 in new:
            rest = prod([s for s in new if s != -1])
            if rest == 0 or self.size % rest:
                raise ArgumentError(f"reshape {self.shape} -> {new}: {self.size} elements do not divide into {new}")
            new = tuple(self.size // rest if s == -1 else s for s in new)
        if any(s < 0 for s in new):
            raise ArgumentError(f"reshape {self.shape} -> {new}: sizes must be non-negative")
        if prod(new) != self.size:
            raise ArgumentError(f"reshape {self.shape} -> {new}: {self.size} elements cannot become {prod(new)}")
        if new == self.shape:
            return self
        return self._movement(Movement.RESHAPE, new)

    def permute(self, *order: int | Sequence[int]) -> Tensor:
        """The dims reordered: dim i of the result is dim order[i] of self (a view, nothing is copied)."""
        order = tuple(order[0]) if len(order) == 1 and not isinstance(order[0], int) else tuple(order)
        norm = tuple(normalize_axis(d, self.ndim, "permute") for d in order)
        if sorted(norm) != list(range(self.ndim)):
            raise ArgumentError(f"permute {order}: must name each of the {self.ndim} dims exactly once")
        if norm == tuple(range(self.ndim)):
            return self
        return self._movement(Movement.PERMUTE, norm)

    def expand(self, *sizes: int | Sequence[int]) -> Tensor:
        """Stretches size-1 dims to `sizes` without copying, as torch.expand: -1 keeps a dim, and new dims may
        be added on the left (not as -1). Every stretched element reads the same cell.

        >>> Tensor([[1], [2]]).expand(3, -1, 4).shape
        (3, 2, 4)
        """
        new = tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else tuple(sizes)
        if any(not isinstance(n, (int, np.integer)) or isinstance(n, bool) for n in new):
            raise TypeError(f"expand: sizes must be ints, got {new}")
        lead = len(new) - self.ndim
        if lead < 0:
            raise ArgumentError(f"expand {self.shape} -> {new}: the target has fewer dims than the tensor")
        if any(n == -1 for n in new[:lead]):
            raise ArgumentError(f"expand {self.shape} -> {new}: a new leading dim cannot be -1; give its size")
        if any(n < -1 for n in new):
            raise ArgumentError(f"expand {self.shape} -> {new}: sizes must be non-negative (or -1 to keep a dim)")
        x = self.reshape((1,) * lead + self.shape) if lead else self  # (...) -> (1, ..., 1, ...)
        new = tuple(s if n == -1 else int(n) for s, n in zip(x.shape, new))
        if any(s != n and s != 1 for s, n in zip(x.shape, new)):
            raise ArgumentError(f"expand {self.shape} -> {new}: only size-1 dims can grow")
        return x if new == x.shape else x._movement(Movement.EXPAND, new)

    def pad_constant(self, widths: Sequence[tuple[int, int]], value: Scalar = 0) -> Tensor:
        """The PAD movement: (before, after) cells around each dim, one non-negative pair per dim from the
        first, filled with `value`. Tensor.pad is torch's F.pad (widths from the last dim, modes, crops)."""
        widths = tuple((int(b), int(a)) for b, a in widths)
        if len(widths) != self.ndim or any(b < 0 or a < 0 for b, a in widths):
            raise ArgumentError(f"pad {widths}: needs one non-negative (before, after) pair per dim of {self.shape}")
        if all(w == (0, 0) for w in widths):
            return self
        out = self._movement(Movement.PAD, widths)
        if value != 0:
            inside = limn.Tensor.full(self.shape, True, dtype=dtypes.bool_, device=self.device).pad_constant(widths)
            out = inside.where(out, value)
        return out

    def shrink(self, box: Sequence[tuple[int, int]]) -> Tensor:
        """Keeps [start, end) of each dim, one pair per dim (a view, nothing is copied)."""
        box = tuple((int(s), int(e)) for s, e in box)
        if len(box) != self.ndim or any(not 0 <= s <= e <= n for (s, e), n in zip(box, self.shape)):
            raise ArgumentError(
                f"shrink {box}: each (start, end) must satisfy 0 <= start <= end <= size of {self.shape}"
            )
        if all((s, e) == (0, n) for (s, e), n in zip(box, self.shape)):
            return self
        return self._movement(Movement.SHRINK, box)

    # ---- autograd ----

    def backward(self, gradient: TensorLike | None = None, create_graph: bool = False) -> None:
        """Accumulates d(self)/d(leaf) into .grad of every leaf that requires grad. A single-element self
        has the implied gradient 1; any other needs `gradient` of its shape. Gradients are lazy graphs;
        create_graph=True makes them differentiable again (for second derivatives). As in torch, .grad
        accumulates across calls: set it to None between steps (optimizers' zero_grad does)."""
        autograd.backward(self, gradient, create_graph)

    # ---- python's operators and torch's other names, for the primitives above ----

    __add__ = add
    __radd__ = partialmethod(add, reverse=True)
    __mul__ = mul
    __rmul__ = partialmethod(mul, reverse=True)
    __neg__ = neg
    __lt__ = lt
    multiply = mul
    negative = neg
