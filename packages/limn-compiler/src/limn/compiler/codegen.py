"""Lowering: each scheduled kernel becomes a loop nest in the IR of ir.py (eight opcodes, printable).

Views turn into index arithmetic over loop variables and pads into range checks on them; the loop order
is chosen here, and so is where a reduce keeps its total (a register, or the output's memory).
`ir(tensor)` prints the nests for everything a tensor still has to compute; LIMN_DEBUG>=1 checks each one.
Pipeline: tensor -> graph -> schedule -> **IR** -> renderer -> device.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import numpy as np

from limn.compiler import nest_memo
from limn.compiler.checker import check
from limn.compiler.coalesce import coalesce_reduce_dims
from limn.compiler.ir import (
    Acc,
    Accum,
    Arith,
    BufferArg,
    ConstI,
    EndLoop,
    Fixed,
    Index,
    Instr,
    KernelIR,
    LoadI,
    Loop,
    LoopVar,
    Program,
    Range,
    Store,
    Term,
    Value,
)
from limn.compiler.kernel import Contraction, Custom, Elementwise, Fold, Scatter
from limn.compiler.schedule import Alu, Const, Expr, Gather, Kernel, Load, Schedule, schedule, walk_expr
from limn.dtypes import DType
from limn.graph.ops import Op, Shape
from limn.graph.view import View, row_major_strides

# ---- lowering ----

# how each reduce folds one more value into its total
FOLD = {Op.SUM: Op.ADD, Op.MAX: Op.MAX}


def identity(op: Op, dtype: DType) -> bool | int | float:
    """The value a reduce starts from: 0 for SUM, the lowest value of the dtype for MAX."""
    if op is Op.SUM:
        return 0.0 if dtype.is_float else 0
    return float("-inf") if dtype.is_float else int(np.iinfo(dtype.np).min)


@functools.lru_cache(maxsize=1024)
def loop_var(dim: int, reduce: bool) -> LoopVar:
    """The counter of the loop over `dim`: i<dim>, or r<dim> for a reduce dim. One object per name (and one
    per value name, `named_value`): the plans a process keeps hold thousands of uses of a few names."""
    return LoopVar(f"r{dim}" if reduce else f"i{dim}")


@functools.lru_cache(maxsize=4096)
def named_value(prefix: str, number: int) -> Value:
    """The value v<number>, or acc<number>, as one object per name."""
    return Value(f"{prefix}{number}")


def loop_order(
    shape: Shape, views: Sequence[View], reduce_axes: tuple[int, ...] = (), registers: bool = False
) -> list[int]:
    """Dims in loop order, outermost first, size-1 dims left out. The dim that is stride-1 in the most
    views moves innermost (a view that broadcasts counts half; ties go to the later dim); the rest keep
    their order. With registers=True the reduce dims go innermost instead, so each total can live in a
    register."""
    dims = [d for d, s in enumerate(shape) if s != 1]
    if registers:
        keep = [d for d in dims if d not in reduce_axes]
        return loop_order_plain(keep, views) + [d for d in dims if d in reduce_axes]
    return loop_order_plain(dims, views)


def loop_order_plain(dims: list[int], views: Sequence[View]) -> list[int]:
    if not dims:
        return dims

    def weight(v: View) -> float:
        # a buffer the nest reads whole counts 1; one it broadcasts (stride 0 along some loop) reads
        # fewer elements than the loop has, so it counts 1/2: a row's max, stretched over the row,
        # must not pull the loop across rows away from the row it sums
        return 0.5 if any(v.strides[d] == 0 for d in dims) else 1.0

    score = {d: sum(weight(v) for v in views if v.strides[d] == 1) for d in dims}
    best = max(dims, key=lambda d: (score[d], d))
    if score[best] == 0:
        return dims
    return [d for d in dims if d != best] + [best]


def view_index(view: View, names: Sequence[Term | None]) -> tuple[Index, tuple[Range, ...]]:
    """The index a view gives at terms `names`, one per dim (None: a size-1 dim, fixed at 0), and its
    mask checks."""
    terms = tuple((n, st) for n, st in zip(names, view.strides) if n is not None and st != 0)
    valid: list[Range] = []
    if view.mask is not None:
        for n, (lo, hi), size in zip(names, view.mask, view.shape):
            if (lo, hi) == (0, size):
                continue
            valid.append(Range(n if n is not None else Fixed(), lo, hi))
    return Index(terms, view.offset), tuple(valid)


class _Lowerer:
    def __init__(self, kernel: Kernel, sched: Schedule) -> None:
        self.kernel = kernel
        self.sched = sched
        self.order = kernel.exprs
        self.body: list[Instr] = []
        self.counter = 0
        self.names: dict[int, str] = {}  # slot -> name in this kernel
        self.inputs: list[BufferArg] = []
        out_slot = sched.slots[kernel.out]
        self.out = BufferArg("out", kernel.out, out_slot.dtype, out_slot.shape)
        self.names[kernel.out] = "out"
        self.also: list[BufferArg] = []  # the further outputs of a merged elementwise kernel: out1, out2, ...
        for slot in kernel.outputs[1:] if not isinstance(kernel.form, Custom) else ():
            info = sched.slots[slot]
            self.also.append(BufferArg(f"out{len(self.also) + 1}", slot, info.dtype, info.shape))
            self.names[slot] = self.also[-1].name

    def value(self, prefix: str = "v") -> Value:
        """A fresh value: v<n>, or acc<n> for a register total (one counter numbers both)."""
        name = named_value(prefix, self.counter)
        self.counter += 1
        return name

    def buf(self, slot: int) -> str:
        if slot not in self.names:
            info = self.sched.slots[slot]
            name = f"in{len(self.inputs)}"
            self.inputs.append(BufferArg(name, slot, info.dtype, info.shape))
            self.names[slot] = name
        return self.names[slot]

    def emit_expr(self, root: Expr, names: Sequence[Term | None], order: list[Expr] | None = None) -> Value:
        """Instructions computing `root` at loop variables `names`; returns the value's name. `order` is
        walk_expr([root]) when the caller has walked it already."""
        return self.emit_exprs([root], names, order)[0]

    def emit_exprs(
        self, roots: Sequence[Expr], names: Sequence[Term | None], order: list[Expr] | None = None
    ) -> list[Value]:
        """Instructions computing every root at loop variables `names`, each shared sub-expression once;
        returns the roots' value names. `order` is walk_expr(roots) when the caller has walked it."""
        values: dict[int, Value] = {}
        for e in walk_expr(list(roots)) if order is None else order:
            if isinstance(e, Gather):
                values[id(e)] = self._gather(e, names)
                continue
            dst = self.value()
            if isinstance(e, Load):
                index, valid = view_index(e.view, names)
                if any(r.lo >= r.hi for r in valid):  # a fully masked load reads only zeros
                    self.body.append(ConstI(dst, _zero(e.dtype), e.dtype))
                else:
                    self.body.append(LoadI(dst, self.buf(e.slot), index, e.dtype, valid))
            elif isinstance(e, Const):
                valid = view_index(e.mask_view, names)[1] if e.mask_view is not None else ()
                self.body.append(ConstI(dst, e.value, e.dtype, valid))
            elif isinstance(e, Alu):
                self.body.append(Arith(dst, e.op, tuple(values[id(s)] for s in e.srcs), e.dtype))
            values[id(e)] = dst
        return [values[id(root)] for root in roots]

    def _gather(self, e: Gather, names: Sequence[Term | None]) -> Value:
        idx_index, idx_valid = view_index(e.idx.view, names)
        assert not idx_valid, "gather indices are read unmasked"
        idx_name = self.value()
        self.body.append(LoadI(idx_name, self.buf(e.idx.slot), idx_index, e.idx.dtype))
        src_names = [n if d != e.axis else idx_name for d, n in enumerate(names)]
        index, valid = view_index(e.src.view, src_names)
        dst = self.value()
        self.body.append(LoadI(dst, self.buf(e.src.slot), index, e.dtype, valid))
        return dst

    def open_loops(self, dims: list[int], shape: Shape, reduce_axes: tuple[int, ...]) -> None:
        for d in dims:
            self.body.append(Loop(loop_var(d, d in reduce_axes), shape[d], d in reduce_axes))

    def close_loops(self, dims: list[int], reduce_axes: tuple[int, ...]) -> None:
        for d in reversed(dims):
            self.body.append(EndLoop(loop_var(d, d in reduce_axes)))

    def lower(self) -> KernelIR:
        k = self.kernel
        match k.form:
            case Custom() as custom:
                return self._custom(custom)
            case Fold() as fold:
                self._reduce(fold)
            case Scatter() as scatter:
                self._elementwise(k.loop_shape, self.order)  # out = the base, then the updates added
                self._scatter(scatter)
            case Elementwise():
                self._elementwise(k.loop_shape, self.order)
        outputs, matmul = (self.out, *self.also), isinstance(k.form, Contraction)
        return KernelIR(k.name, k.op, k.loop_shape, tuple(self.inputs), outputs, tuple(self.body), matmul=matmul)

    def _names(self, shape: Shape, reduce_axes: tuple[int, ...] = ()) -> list[Term | None]:
        return [loop_var(d, d in reduce_axes) if s != 1 else None for d, s in enumerate(shape)]

    def _elementwise(self, shape: Shape, order: list[Expr]) -> None:
        """One nest storing every root at each point. The stores come after every load of the point, so
        a merged kernel that reads a buffer it also writes (at that same point) reads the old value."""
        out_view = View(shape, row_major_strides(shape))
        dims = loop_order(shape, _views(order) + [out_view] * (1 + len(self.also)))
        names = self._names(shape)
        self.open_loops(dims, shape, ())
        values = self.emit_exprs(self.kernel.roots, names, order)
        index = view_index(out_view, names)[0]
        for buffer, v in zip([self.out, *self.also], values):
            self.body.append(Store(buffer.name, index, v))
        self.close_loops(dims, ())

    def _reduce(self, form: Fold) -> None:
        """The fold, in a register or in the output's memory, and then its epilogue (Fold.also) at each
        output cell: in the register form right after the cell's total is stored, in the memory form in a
        nest over the output cells after the whole fold."""
        k = self.kernel
        out_strides = row_major_strides(self.out.shape)  # reduce dims have size 1 there: stride 0
        fold = walk_expr([form.expr]) if form.also else self.order
        epilogue = [e for _, e in form.also]
        shape, axes, order, out_strides, epilogue = coalesce_reduce_dims(
            k.loop_shape, form.reduce_axes, fold, out_strides, epilogue
        )
        expr = order[-1]  # the root comes last
        out_view = View(shape, out_strides)
        views = _views(order) + [out_view]
        registers = self.out.dtype.is_half  # a half total stays float32 in a register, rounded once
        dims = loop_order(shape, views, axes, registers)
        reduce_dims = [d for d in dims if d in axes]
        keep_dims = [d for d in dims if d not in axes]
        names = self._names(shape, axes)
        cell_names = [None if d in axes else n for d, n in enumerate(names)]  # an output cell's
        out_index = view_index(out_view, names)[0]
        acc_dtype = self.out.dtype.compute
        start = identity(k.op, acc_dtype)
        if all(dims.index(r) > dims.index(d) for r in reduce_dims for d in keep_dims):
            # every reduce loop is inside every output loop: the total lives in a register
            self.open_loops(keep_dims, shape, axes)
            acc = self.value("acc")
            self.body.append(Acc(acc, start, acc_dtype))
            self.open_loops(reduce_dims, shape, axes)
            v = self.emit_expr(expr, names, order)
            self.body.append(Accum(acc, None, FOLD[k.op], v))
            self.close_loops(reduce_dims, axes)
            self.body.append(Store("out", out_index, acc))
            self._epilogue(epilogue, cell_names, out_index)
            self.close_loops(keep_dims, axes)
            return
        # a reduce loop has output loops inside it: fill the output with the identity, fold into memory
        fill_dims = [d for d in range(len(shape)) if d not in axes and shape[d] != 1]
        self.open_loops(fill_dims, shape, axes)
        c = self.value()
        self.body.append(ConstI(c, start, acc_dtype))
        self.body.append(Store("out", out_index, c))
        self.close_loops(fill_dims, axes)
        self.open_loops(dims, shape, axes)
        v = self.emit_expr(expr, names, order)
        self.body.append(Accum("out", out_index, FOLD[k.op], v))
        self.close_loops(dims, axes)
        if epilogue:  # then a nest over the output cells, each total final
            order = walk_expr(epilogue)
            cells = loop_order_plain(fill_dims, _views(order) + [out_view] * (1 + len(self.also)))
            self.open_loops(cells, shape, axes)
            self._epilogue(epilogue, cell_names, out_index, order)
            self.close_loops(cells, axes)

    def _epilogue(
        self, roots: list[Expr], names: Sequence[Term | None], index: Index, order: list[Expr] | None = None
    ) -> None:
        """The epilogue's values at one output cell (its loads of `out` read the total stored there), each
        stored to its output at `index`, the cell's, after every load of the cell."""
        values = self.emit_exprs(roots, names, order)
        for buffer, v in zip(self.also, values):
            self.body.append(Store(buffer.name, index, v))

    def _scatter(self, part: Scatter) -> None:
        shape = part.shape
        out_strides = row_major_strides(self.out.shape)
        dims = [d for d in range(len(shape)) if shape[d] != 1]  # colliding adds land in index order
        names = self._names(shape)
        self.open_loops(dims, shape, ())
        idx_index, _ = view_index(part.idx.view, names)
        idx_name = self.value()
        self.body.append(LoadI(idx_name, self.buf(part.idx.slot), idx_index, part.idx.dtype))
        u = self.emit_expr(part.upd, names)
        target_names = [n if d != part.axis else idx_name for d, n in enumerate(names)]
        terms = tuple((n, st) for n, st in zip(target_names, out_strides) if n is not None and st != 0)
        self.body.append(Accum("out", Index(terms), Op.ADD, u))
        self.close_loops(dims, ())

    def _custom(self, custom: Custom) -> KernelIR:
        k, slots = self.kernel, self.sched.slots
        ins = tuple(BufferArg(f"in{i}", s, slots[s].dtype, slots[s].shape) for i, s in enumerate(custom.inputs))
        outs = tuple(BufferArg(f"out{i}", s, slots[s].dtype, slots[s].shape) for i, s in enumerate(custom.outputs))
        return KernelIR(k.name, k.op, k.loop_shape, ins, outs, (), custom=custom.arg.name, params=custom.arg.params)


def _views(order: list[Expr]) -> list[View]:
    """The views a nest reads its buffers through, from walk_expr of its expression."""
    out = []
    for e in order:
        if isinstance(e, Load):
            out.append(e.view)
        elif isinstance(e, Gather):
            out.append(e.idx.view)  # the source is read off the loop's grid along the gather axis
    return out


def _zero(dtype: DType) -> bool | int | float:
    return False if dtype.kind == "b" else 0.0 if dtype.is_float else 0


def _lower_now(kernel: Kernel, sched: Schedule) -> KernelIR:
    return _Lowerer(kernel, sched).lower()


def lower(kernel: Kernel, sched: Schedule) -> KernelIR:
    """The loop nests of one scheduled kernel; with LIMN_DEBUG>=1 they pass checker.check first (an IRError
    prints the nest, marking the instruction that breaks a rule)."""
    nest = nest_memo.lowered(kernel, sched, _lower_now)
    return check(nest) if _debug_level() >= 1 else nest


def lower_schedule(sched: Schedule) -> Program:
    """The loop nests of every kernel of a schedule, as one printable Program."""
    checking = _debug_level() >= 1
    nests = [nest_memo.lowered(k, sched, _lower_now) for k in sched.kernels]
    return Program(sched, tuple(check(nest) if checking else nest for nest in nests))


def _debug_level() -> int:
    """LIMN_DEBUG, as limn.compiler.jit reads it (which imports this module, so cannot be imported here)."""
    try:
        return int(os.environ.get("LIMN_DEBUG", "0"))
    except ValueError:
        return 0


def ir(*tensors) -> Program:
    """The loop nests that realizing these tensors would run, as a printable Program.

    >>> from limn import Tensor
    >>> print(ir(Tensor.randn((4, 5)) @ Tensor.randn((5, 3))))  # doctest: +SKIP
    """
    return lower_schedule(schedule([t.node for t in tensors]))
