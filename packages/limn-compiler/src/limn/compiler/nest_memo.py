"""Nests lowered before: each distinct nest is lowered once, then rebound to other slots.

A nest depends on its kernel only up to the slots it is bound to: the same layer at another depth, or the
same kernel in another plan, lowers to the same instructions over other slots. So codegen lowers each
distinct nest once (nest_key says which are equal) and rebinds it after, sharing its instructions: a process
keeps every plan it builds, and fewer objects in them is less for the garbage collector to walk on every
full collection. KernelIR.nest carries the key's digest, which limn-c's source index files sources under.
Pipeline: schedule -> **IR** (lowered once per distinct nest) -> renderer -> device.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from limn.compiler.ir import BufferArg, KernelIR
from limn.compiler.kernel import Alu, Const, Custom, Expr, Fold, Kernel, Load, Scatter, Schedule, walk_expr
from limn.graph.view import View


@dataclass(frozen=True)
class Lowered:
    """A nest lowered once, and for each of its buffers (inputs, then outputs) the position of that
    buffer's slot in its nest_key's numbering, which another kernel of the same key binds anew."""

    nest: KernelIR
    positions: tuple[int, ...]
    digest: str  # sha256 of the nest_key: KernelIR.nest of every kernel bound to this nest


LOWERED_KEPT = 4096
"""How many nests the memo holds; past that it starts over (a GPT forward has about 45 distinct nests)."""

_lowered_before: dict[str, Lowered] = {}


def lowered(kernel: Kernel, sched: Schedule, lower_now: Callable[[Kernel, Schedule], KernelIR]) -> KernelIR:
    """`kernel`'s nest: lower_now's, or rebound from the nest of an equal nest_key lowered before."""
    if isinstance(kernel.form, Custom):
        return lower_now(kernel, sched)
    key, slots = nest_key(kernel, sched, kernel.exprs)
    known = _lowered_before.get(key)
    if known is None:
        nest = dataclasses.replace(lower_now(kernel, sched), nest=hashlib.sha256(key.encode()).hexdigest())
        position = {slot: i for i, slot in enumerate(slots)}
        if len(_lowered_before) >= LOWERED_KEPT:
            _lowered_before.clear()
        positions = tuple(position[b.slot] for b in nest.inputs + nest.outputs)
        _lowered_before[key] = Lowered(nest, positions, nest.nest)
        return nest
    nest, n_in = known.nest, len(known.nest.inputs)
    bound = [BufferArg(b.name, slots[p], b.dtype, b.shape) for b, p in zip(nest.inputs + nest.outputs, known.positions)]
    ins, outs = tuple(bound[:n_in]), tuple(bound[n_in:])
    return KernelIR(kernel.name, nest.op, nest.loop_shape, ins, outs, nest.body, nest=known.digest, matmul=nest.matmul)


def nest_key(kernel: Kernel, sched: Schedule, order: list[Expr] | None = None) -> tuple[str, list[int]]:
    """Everything a non-CUSTOM kernel's nest is made from, spelled out with its slots renumbered by first use
    (its output 0), and the slots in that order. Kernels of equal keys lower to the same instructions: their
    op, loop shape and reduce axes, their expressions node by node (sources by position, so what is shared
    stays shared; constants by type and repr, since 0.0 == -0.0), views, dtypes, and each slot's dtype and
    shape are equal. The key is the repr of plain tuples, so it says each of them exactly. `order` is
    walk_expr of the kernel's expression when the caller has walked it already."""
    assert not isinstance(kernel.form, Custom), f"{kernel.name} is a CUSTOM call, which has no nest to key"
    numbers: dict[int, int] = {slot: i for i, slot in enumerate(kernel.outputs)}

    def view(v: View | None) -> tuple | None:
        return None if v is None else (v.shape, v.strides, v.offset, v.mask)

    def load(e: Load) -> tuple:
        return (numbers.setdefault(e.slot, len(numbers)), view(e.view), e.dtype.name)

    at: dict[int, int] = {}

    def rows(order: list[Expr]) -> tuple:
        out: list[tuple] = []
        for e in order:
            at[id(e)] = len(out)
            if isinstance(e, Load):
                out.append(("load", *load(e)))
            elif isinstance(e, Const):
                out.append(("const", type(e.value).__name__, repr(e.value), e.dtype.name, view(e.mask_view)))
            elif isinstance(e, Alu):
                out.append((e.op.name, e.dtype.name, tuple([at[id(s)] for s in e.srcs])))
            else:
                out.append(("gather", load(e.src), load(e.idx), e.axis, e.dtype.name))
        return tuple(out)

    expr = rows(walk_expr(kernel.roots) if order is None else order)
    roots = tuple(at[id(root)] for root in kernel.roots)  # which rows the outputs store
    scatter, axes = None, kernel.form.reduce_axes if isinstance(kernel.form, Fold) else ()
    if isinstance(kernel.form, Scatter):
        part = kernel.form
        scatter = (load(part.idx), rows(walk_expr([part.upd])), part.axis, part.shape)
    slots = list(numbers)
    buffers = tuple((sched.slots[s].dtype.name, sched.slots[s].shape) for s in slots)
    return repr((kernel.op.name, kernel.loop_shape, axes, expr, roots, scatter, buffers)), slots
