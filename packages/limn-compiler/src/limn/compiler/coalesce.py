"""Reduce dims merged into one loop: where every buffer a reduce reads walks neighbouring reduce dims as one
strided line, lowering folds them as one loop, visiting the same elements in the same order. A weight
gradient summed over (batch, time) becomes one reduce loop a backend can treat as a matmul's.
Pipeline: tensor -> graph -> schedule -> **IR (a kernel lowered)** -> renderer -> device.
"""

from __future__ import annotations

import numpy as np

from limn.compiler.kernel import Alu, Const, Expr, Load, walk_expr
from limn.graph.ops import Shape
from limn.graph.view import View


def coalesce_reduce_dims(
    shape: Shape,
    axes: tuple[int, ...],
    order: list[Expr],
    out_strides: tuple[int, ...],
    epilogue: list[Expr] = (),
) -> tuple[Shape, tuple[int, ...], list[Expr], tuple[int, ...], list[Expr]]:
    """Merges neighbouring reduce dims into one loop where every buffer walks them as one strided line
    (stride of the outer = stride of the inner * its size, no mask on either). The fold visits the same
    elements in the same order, so nothing changes but the nest's depth: a weight gradient that sums
    over (batch, time) becomes one reduce loop that the backends can treat as a matmul's. The expression
    comes and goes as walk_expr's order of it (its root last), rebuilt over the merged dims; the epilogue's
    roots (Kernel.also, stride 0 along every reduce dim, so they never decide) come back rebuilt too."""
    views = [e.view for e in order if isinstance(e, Load)]
    views += [e.mask_view for e in order if isinstance(e, Const) and e.mask_view is not None]
    all_strides = [v.strides for v in views] + [out_strides]
    masked = any(v.mask is not None for v in views)

    def mergeable(d: int) -> bool:  # may dim d fold into dim d - 1?
        if d - 1 not in axes or d not in axes or masked:
            return False
        return all(st[d - 1] == st[d] * shape[d] for st in all_strides)

    groups: list[list[int]] = []
    for d in range(len(shape)):
        if groups and mergeable(d) and groups[-1][-1] == d - 1:
            groups[-1].append(d)
        else:
            groups.append([d])
    if len(groups) == len(shape):
        return shape, axes, order, out_strides, list(epilogue)
    new_shape = tuple(int(np.prod([shape[d] for d in g])) for g in groups)
    new_axes = tuple(i for i, g in enumerate(groups) if g[0] in axes)
    rebuilt = _over_groups(order + walk_expr(list(epilogue)), groups)
    new_order = [rebuilt[id(e)] for e in order]  # each node once, as walk_expr met it: the old order
    new_strides = tuple(out_strides[g[-1]] for g in groups)
    return new_shape, new_axes, new_order, new_strides, [rebuilt[id(e)] for e in epilogue]


def _over_groups(order: list[Expr], groups: list[list[int]]) -> dict[int, Expr]:
    """Each node of `order` (sources first) by id, its views over the merged dims: a group of dims is one
    dim of their sizes' product and the innermost's stride (a mask can only span a group whole)."""

    def merged(v: View) -> View:
        shape = tuple(int(np.prod([v.shape[d] for d in g])) for g in groups)
        mask = None
        if v.mask is not None:
            assert all(len(g) == 1 or all(v.mask[d] == (0, v.shape[d]) for d in g) for g in groups), v
            mask = tuple(v.mask[g[0]] if len(g) == 1 else (0, n) for g, n in zip(groups, shape))
        return View(shape, tuple(v.strides[g[-1]] for g in groups), v.offset, mask)

    rebuilt: dict[int, Expr] = {}
    for e in order:
        if isinstance(e, Load):
            rebuilt[id(e)] = Load(e.slot, merged(e.view), e.dtype)
        elif isinstance(e, Alu):
            rebuilt[id(e)] = Alu(e.op, tuple(rebuilt[id(x)] for x in e.srcs), e.dtype)
        elif isinstance(e, Const) and e.mask_view is not None:
            rebuilt[id(e)] = Const(e.value, e.dtype, merged(e.mask_view))
        else:
            rebuilt[id(e)] = e
    return rebuilt
