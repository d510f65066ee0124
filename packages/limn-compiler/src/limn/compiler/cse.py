"""Common values: equal computations in one graph become one node before the scheduler sees it.

Code written the way people write it computes some values twice: a layer norm takes `x.mean()` and then
`x.var()`, which takes the same mean again; each would be its own reduce kernel, reading x once more.
Two nodes are the same value when their op, dtype, shape and argument are equal and their sources are
the same nodes (after this rewrite), so the test is exact and a pass over the graph finds them all.
Leaves that are buffers keep their identity (a buffer is a buffer), constants compare by their
spelling (0.0 and -0.0 differ), and ASSIGN and CUSTOM nodes are never merged: each is an effect. A WHERE
choosing between one value and itself is that value (var's mean, live or detached by whether it is finite).
Pipeline: tensor -> graph -> **common values** -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from limn.graph.ops import ESCAPE, INDEXED, Node, Op, rebuilt, toposort

KEPT_APART = frozenset({Op.BUFFER, Op.ASSIGN}) | ESCAPE


def common_values(sinks: Sequence[Node], order: list[Node]) -> tuple[list[Node], list[Node] | None]:
    """The sinks over a graph in which equal values are one node, and that graph's order, or the sinks
    unchanged and None when no two values were equal. The order is the new nodes in the order their
    originals come in `order`, so the leaves keep the order the plan binds them in."""
    seen: dict[tuple, Node] = {}
    new: dict[int, Node] = {}
    new_order: list[Node] = []
    merged = False
    for node in order:
        image = rebuilt(node, tuple([new[id(s)] for s in node.srcs]))
        if image.op is Op.WHERE and image.srcs[1] is image.srcs[2] and image.srcs[1].shape == image.shape:
            new[id(node)], merged = image.srcs[1], True
            continue
        key = _key(image)
        if key is not None:
            try:
                first = seen.setdefault(key, image)
            except TypeError:  # an argument that does not hash: the node is only ever itself
                first = image
            if first is not image:
                new[id(node)], merged = first, True
                continue
        new[id(node)] = image
        new_order.append(image)
    if not merged:
        return list(sinks), None
    sinks = [new[id(s)] for s in sinks]
    # a collapsed WHERE's condition feeds nothing: keep what sinks, ASSIGNs and index checks (still to raise) reach
    reached = {id(n) for n in toposort(sinks + [n for n in new_order if n.op in INDEXED or n.op is Op.ASSIGN])}
    return sinks, [n for n in new_order if id(n) in reached or n.op is Op.BUFFER]


def _key(node: Node) -> tuple | None:
    """What makes two nodes the same value, or None for a node that is only ever itself."""
    if node.op in KEPT_APART:
        return None
    arg: Any = node.arg
    if node.op is Op.CONST:
        arg = (type(arg).__name__, repr(arg))
    return (node.op, node.dtype, node.shape, arg, tuple([id(s) for s in node.srcs]))
