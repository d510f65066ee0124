"""The numpy device: the reference interpreter every compiled backend is diffed against.

It walks the graph in topological order and makes one numpy call per node, with no fusion and no
cleverness, so its answer is the definition of what a graph means. Half widths are widened to float32
for each op and rounded back once; a reduce sums in float32 and rounds once; ints wrap. Being a
reference costs it memory: a matmul builds its whole (m, n, k) product before reducing it.
Pipeline: tensor -> graph -> **numpy device**.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from limn.dtypes import DType, int64
from limn.graph import custom
from limn.graph.ops import Node, Op, Shape, toposort
from limn.graph.view import View
from limn.runtime.device import Buffer, DeviceError


def view_array(base: np.ndarray, view: View) -> np.ndarray:
    """Reads `base` (any shape, taken as its row-major elements) through `view`; masked cells are zero."""
    flat = np.ascontiguousarray(base).reshape(-1)
    item = flat.itemsize
    if view.mask is None:
        if view.size == 0:
            return np.zeros(view.shape, flat.dtype)
        return np.lib.stride_tricks.as_strided(
            flat[view.offset :], view.shape, tuple(s * item for s in view.strides), writeable=False
        )
    out = np.zeros(view.shape, flat.dtype)
    box = tuple(slice(lo, hi) for lo, hi in view.mask)
    inner = tuple(hi - lo for lo, hi in view.mask)
    if 0 in inner:
        return out
    start = view.offset + sum(lo * st for (lo, _), st in zip(view.mask, view.strides))
    out[box] = np.lib.stride_tricks.as_strided(
        flat[start:], inner, tuple(s * item for s in view.strides), writeable=False
    )
    return out


def _widened(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Runs fn in the node's compute dtype and stores the result in the node's dtype (one rounding)."""

    def kernel(node: Node, *xs: np.ndarray) -> np.ndarray:
        wide = [x.astype(node.dtype.compute.np, copy=False) if x.dtype != np.bool_ else x for x in xs]
        return np.asarray(fn(*wide)).astype(node.dtype.np, copy=False)

    return kernel


def _cast(node: Node, x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f" and node.dtype.is_int:
        return _float_to_int(x, node.dtype)
    return x.astype(node.dtype.np)  # an int narrowed wraps modulo 2**bits


def _float_to_int(x: np.ndarray, dtype: DType) -> np.ndarray:
    """A float cast to an int dtype as torch's on x86: truncated toward zero into int64 (dtype int64) or
    int32 (every narrower dtype, which then wraps); a NaN, an inf or a value past that range gives the
    range's lowest value, the hardware's "indefinite" integer (the same rule as cstyle.float_to_int)."""
    whole = np.trunc(x.astype(np.float64))
    via = np.int64 if dtype == int64 else np.int32
    low, high = float(np.iinfo(via).min), -float(np.iinfo(via).min)
    valid = (whole >= low) & (whole < high)  # NaN and inf fail
    return np.where(valid, whole, low).astype(via).astype(dtype.np)


def _cmplt(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if node.srcs[0].dtype.is_half:
        a, b = a.astype(np.float32, copy=False), b.astype(np.float32, copy=False)  # exact: halves are float32s
    return np.less(a, b)


def _where(node: Node, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(c, a, b).astype(node.dtype.np, copy=False)


def _reduce(op: Op) -> Callable[..., np.ndarray]:
    def kernel(node: Node, x: np.ndarray) -> np.ndarray:
        # a 0-d value reduced over its dim 0 is the value itself, as on the compiled devices (numpy has no
        # axis 0 to name there)
        axes = tuple(a for a in node.arg if a < x.ndim)
        if node.dtype.is_int:
            if op is Op.SUM:
                return np.sum(x, axis=axes, keepdims=True, dtype=node.dtype.np)
            initial = np.iinfo(node.dtype.np).min
            return np.max(x, axis=axes, keepdims=True, initial=initial)
        wide = x.astype(node.dtype.compute.np, copy=False)  # half widths keep their running total in float32
        if op is Op.SUM:
            return np.sum(wide, axis=axes, keepdims=True).astype(node.dtype.np, copy=False)
        return np.max(wide, axis=axes, keepdims=True, initial=-np.inf).astype(node.dtype.np, copy=False)

    return kernel


def _full_index(idx: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
    """numpy fancy-index tuple that reads element idx[j] along `axis` at every position j."""
    grids = list(np.indices(idx.shape, sparse=True))
    grids[axis] = idx.astype(np.intp)
    return tuple(grids)


def _check_indices(op: str, idx: np.ndarray, size: int, axis: int) -> None:
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        bad = idx[(idx < 0) | (idx >= size)].reshape(-1)[0]
        raise IndexError(
            f"{op}: index {int(bad)} is out of range for axis {axis} of size {size} (valid indices are 0..{size - 1})"
        )


def _gather(node: Node, src: np.ndarray, idx: np.ndarray) -> np.ndarray:
    axis = node.arg
    _check_indices("gather", idx, src.shape[axis], axis)
    return src[_full_index(idx, axis)]


def _scatter(node: Node, base: np.ndarray, idx: np.ndarray, upd: np.ndarray) -> np.ndarray:
    axis = node.arg
    _check_indices("scatter", idx, base.shape[axis], axis)
    wide = base.astype(node.dtype.compute.np)  # copies; collisions add in index order
    np.add.at(wide, _full_index(idx, axis), upd.astype(node.dtype.compute.np))
    return wide.astype(node.dtype.np)


# One row per op: how the reference computes it. Sources, VIEW, ASSIGN and CUSTOM are handled in run().
KERNELS: dict[Op, Callable[..., np.ndarray]] = {
    Op.NEG: _widened(np.negative),
    Op.EXP: _widened(np.exp),
    Op.LOG: _widened(np.log),
    Op.SQRT: _widened(np.sqrt),
    Op.RECIP: _widened(np.reciprocal),
    Op.CAST: _cast,
    Op.ADD: _widened(np.add),
    Op.MUL: _widened(np.multiply),
    Op.CMPLT: _cmplt,
    Op.WHERE: _where,
    Op.SUM: _reduce(Op.SUM),
    Op.MAX: _reduce(Op.MAX),
    Op.GATHER: _gather,
    Op.SCATTER: _scatter,
    Op.CONTIGUOUS: lambda node, x: np.ascontiguousarray(x),
}


class NumpyDevice:
    """The reference device. Buffers are numpy arrays; graphs are interpreted node by node."""

    name = "numpy"
    host = True

    def __init__(self) -> None:
        self.nodes_run = 0  # how many nodes this device has interpreted, for tests and curiosity

    @property
    def custom_kernels(self) -> frozenset[str]:
        return frozenset(custom.REGISTRY)

    # ---- the five hooks for moving bytes ----

    def alloc(self, dtype: DType, shape: Shape) -> np.ndarray:
        return np.empty(shape, dtype.np)

    def free(self, handle: np.ndarray) -> None:
        pass  # numpy arrays are freed by the garbage collector

    def copyin(self, handle: np.ndarray, array: np.ndarray) -> None:
        handle[...] = array

    def copyout(self, handle: np.ndarray, dtype: DType, shape: Shape) -> np.ndarray:
        return np.array(handle, copy=True)

    def synchronize(self) -> None:
        pass

    # ---- running a graph ----

    def run(self, sinks: Sequence[Node]) -> list[Buffer]:
        """Computes every sink. ASSIGNs are a transaction: all values are computed from the pre-step
        buffers first, then every write lands at once. Each intermediate is dropped after the last node
        that reads it, so a training step holds only the values still to be read."""
        order = toposort(sinks)
        last_read = {id(s): i for i, n in enumerate(order) for s in n.srcs}
        keep = {id(s) for s in sinks}
        values: dict[int, np.ndarray] = {}
        writes: list[tuple[np.ndarray, np.ndarray]] = []
        with np.errstate(all="ignore"):
            for i, node in enumerate(order):
                values[id(node)] = self._eval(node, values, writes)
                self.nodes_run += 1
                for s in node.srcs:
                    if last_read[id(s)] == i and id(s) not in keep:
                        values.pop(id(s), None)
            # sinks that alias a buffer about to be written must keep the pre-step values
            results = [np.array(values[id(s)], copy=True) for s in sinks]
        for target, value in writes:
            target[...] = value
        out = []
        for sink, arr in zip(sinks, results):
            if sink.op is Op.ASSIGN:
                out.append(sink.srcs[0].arg)  # the target buffer itself, now holding the new value
            else:
                out.append(Buffer(self.name, sink.dtype, sink.shape, arr.reshape(sink.shape)))
        return out

    def _eval(self, node: Node, values: dict[int, np.ndarray], writes: list) -> np.ndarray:
        srcs = [values[id(s)] for s in node.srcs]
        op = node.op
        if op is Op.BUFFER:
            buf: Buffer = node.arg
            if buf.device != self.name and not _is_host(buf.device):
                raise DeviceError(
                    f"a tensor on device {buf.device!r} reached the numpy device; move it first with .to('numpy')"
                )
            return buf.handle
        if op is Op.CONST:
            return np.full(node.shape, node.arg, node.dtype.np)
        if op is Op.VIEW:
            return view_array(srcs[0], node.arg)
        if op is Op.ASSIGN:
            target: Buffer = node.srcs[0].arg
            value = srcs[1].astype(node.dtype.np)
            writes.append((target.handle, value))
            return value
        if op is Op.CUSTOM:
            return custom.run_reference(node, srcs, values)
        return KERNELS[op](node, *srcs)


def _is_host(device_name: str) -> bool:
    from limn.runtime.device import get_device

    return get_device(device_name).host
