"""The closed op set and the Node DAG built from it.

Every Tensor operation becomes Nodes over these 19 primitives (CUSTOM is the one escape hatch). A Node
is immutable: its op, its srcs, its dtype and shape, and one op-specific `arg`. Backends implement the
primitives; everything else (sub, matmul, softmax, ...) is composed from them (limn.frontend.tensor lists where).
Pipeline: tensor -> **graph** -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from limn.dtypes import DType

Shape = tuple[int, ...]


class Op(Enum):
    # sources
    BUFFER = "BUFFER"  # a realized buffer on some device; arg = the Buffer
    CONST = "CONST"  # one value repeated over the node's shape; arg = the python value
    # movement
    VIEW = "VIEW"  # src's row-major bytes read through a View; arg = the View
    # elementwise unary
    NEG = "NEG"  # -x
    EXP = "EXP"  # e**x
    LOG = "LOG"  # natural log
    SQRT = "SQRT"  # square root
    RECIP = "RECIP"  # 1 / x
    CAST = "CAST"  # convert to the node's dtype (floats to ints truncate toward zero, ints wrap)
    # elementwise binary
    ADD = "ADD"  # a + b
    MUL = "MUL"  # a * b
    CMPLT = "CMPLT"  # a < b, as bool
    # elementwise ternary
    WHERE = "WHERE"  # cond ? a : b
    # reduce (arg = the reduced axes; reduced dims stay, with size 1)
    SUM = "SUM"  # sum over axes
    MAX = "MAX"  # max over axes
    # indexed (arg = the axis)
    GATHER = "GATHER"  # out[..j..] = src[..idx[..j..]..] along axis; out has idx's shape
    SCATTER = "SCATTER"  # out = base; out[..idx[..j..]..] += upd[..j..] along axis
    # barriers
    CONTIGUOUS = "CONTIGUOUS"  # materialize src in row-major order
    ASSIGN = "ASSIGN"  # write src[1] into the buffer of src[0] (a BUFFER node)
    # escape hatch
    CUSTOM = "CUSTOM"  # a kernel a device supplies whole; arg = CustomArg

    # An op is a singleton compared by identity, so its identity is its hash; Enum's hashes the name in
    # Python, and planning a GPT forward hashes ops some 15,000 times (op sets, tables keyed by op).
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Op.{self.name}"


# the groups, as the spec lists them; code that means "every unary" or "a source" iterates these
SOURCES = frozenset({Op.BUFFER, Op.CONST})  # leaves: a graph starts at them
MOVEMENT = frozenset({Op.VIEW})
UNARY = frozenset({Op.NEG, Op.EXP, Op.LOG, Op.SQRT, Op.RECIP, Op.CAST})
# the unaries defined on floats only (Tensor casts an int or bool first, so no int kernel spells them); each is
# a math-library call or a divide, the unaries that cost more than an add to recompute
TRANSCENDENTAL = frozenset({Op.EXP, Op.LOG, Op.SQRT, Op.RECIP})
BINARY = frozenset({Op.ADD, Op.MUL, Op.CMPLT})
TERNARY = frozenset({Op.WHERE})
ELEMENTWISE = UNARY | BINARY | TERNARY
REDUCE = frozenset({Op.SUM, Op.MAX})
INDEXED = frozenset({Op.GATHER, Op.SCATTER})
BARRIERS = frozenset({Op.CONTIGUOUS, Op.ASSIGN})
ESCAPE = frozenset({Op.CUSTOM})
PRIMITIVES = SOURCES | MOVEMENT | ELEMENTWISE | REDUCE | INDEXED | BARRIERS
assert len(PRIMITIVES) == 19 and len(Op) == 20, "the op set is closed: 19 primitives and CUSTOM"


class Movement(Enum):
    """Which movement made a VIEW node, each named after the View method that composes it. The graph keeps
    only the resulting View; autograd needs the movement (a pad's gradient is a shrink), so its rows for VIEW
    are keyed by these."""

    RESHAPE = "reshape"  # arg = the new shape
    PERMUTE = "permute"  # arg = the order of the dims
    EXPAND = "expand"  # arg = the new shape (size-1 dims grown)
    PAD = "pad"  # arg = (before, after) per dim
    SHRINK = "shrink"  # arg = [start, end) per dim

    __hash__ = object.__hash__  # a singleton, as Op is: Enum's hash runs in Python

    def __repr__(self) -> str:
        return f"Movement.{self.name}"


@dataclass(frozen=True)
class CustomArg:
    """What a CUSTOM node names: the kernel, which of its outputs this node is, and its parameters."""

    name: str
    output: int
    n_outputs: int
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, key: str) -> Any:
        return dict(self.params)[key]


on_create: Callable[[Node], None] | None = None
"""Set by limn.graph.provenance while it records: called with each new node. None otherwise, so making a node
costs one test of this global."""

on_rebuild: Callable[[Node, Node], None] | None = None
"""Set by limn.graph.provenance once it has recorded anything: called with each node a rewrite makes and the node
it replaces, so a rewrite after recording has stopped (a later realize, the scheduler's) keeps the record."""


@dataclass(frozen=True, eq=False)
class Node:
    """One value in the op graph. Identity is the object itself (eq=False), so a DAG shares by reference."""

    op: Op
    srcs: tuple[Node, ...]
    dtype: DType
    shape: Shape
    arg: Any = None

    def __post_init__(self) -> None:
        if on_create is not None:  # limn.graph.provenance is recording where nodes come from
            on_create(self)

    def __repr__(self) -> str:
        arg = "" if self.arg is None or self.op is Op.BUFFER else f", arg={self.arg!r}"
        return f"Node({self.op.name}, {self.dtype.name}{list(self.shape)}{arg}, srcs={len(self.srcs)})"

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


T = TypeVar("T")


def postorder(roots: Iterable[T], children: Callable[[T], Iterable[T]]) -> list[T]:
    """Everything reachable from roots through `children`, each once and after its children. Iterative,
    so graphs of any depth are fine. The one graph walk in limn: Nodes, kernel expressions and autograd
    contexts all go through it."""
    order: list[T] = []
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        # the path from root down to the item being expanded, each item with the children it has left
        stack = [(root, iter(children(root)))]
        while stack:
            item, left = stack[-1]
            for child in left:
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, iter(children(child))))
                    break
            else:  # every child is placed: the item follows them
                stack.pop()
                order.append(item)
    return order


def toposort(roots: Iterable[Node]) -> list[Node]:
    """Every node reachable from roots, each after its srcs."""
    return postorder(roots, lambda node: node.srcs)


def substitute(
    sinks: Sequence[Node], swap: Callable[[Node, tuple[Node, ...]], Node], order: list[Node] | None = None
) -> list[Node]:
    """The graph under `sinks` rebuilt bottom-up: each node becomes swap(node, srcs), where srcs are its srcs
    as already substituted (`rebuilt(node, srcs)` is the node over them). Returns the new sinks. `order` is
    toposort(sinks) when the caller has walked it already. The one graph rewrite in limn: realize swaps
    realized nodes for their buffers (limn.runtime.snapshot), limn.capture swaps leaf buffers for placeholders."""
    new: dict[int, Node] = {}
    for n in toposort(sinks) if order is None else order:
        new[id(n)] = swap(n, tuple([new[id(s)] for s in n.srcs]))
    return [new[id(s)] for s in sinks]


def rebuilt(node: Node, srcs: tuple[Node, ...]) -> Node:
    """`node` over `srcs`: the node itself when they are its own srcs, else a new node with them."""
    if srcs == node.srcs:
        return node
    new = Node(node.op, srcs, node.dtype, node.shape, node.arg)
    if on_rebuild is not None:
        on_rebuild(new, node)  # a rebuilt node comes from where the node it replaces came from
    return new
