"""Value semantics for assign: a value built before an assign computes what it saw when it was built.

An ASSIGN writes into its target's buffer, and a lazy graph that read the buffer before the assign
must not see the write (`y = w * 2; w.assign(0).realize(); y` is still 2 * the old w). So a run that
assigns is copy-on-write: the target buffer gets other memory for the write (the Buffer object stays,
which optimizers, load_into and limn.capture hold on to), every read in the run goes to the old bytes,
and afterwards each BUFFER node that read the old bytes is redirected to them, for as long as such a
node lives. Nothing is copied; the old bytes go back to the buffer as its spare with their last reader.

A buffer marked `in_place` (an optimizer's state, which nothing outside the optimizer reads) is written
where it is instead, which saves a training step the memory traffic of a second block; a value built
from its old bytes then cannot be computed, and says so when it is realized instead of reading the new.
Pipeline: tensor -> **realize (limn.runtime.engine; the assign transaction)** -> device.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from limn.errors import ArgumentError
from limn.graph.ops import Node, Op, rebuilt, substitute, toposort
from limn.runtime.device import Buffer


@dataclass
class Fork:
    """One assigned buffer in one run: `target` is written, `before` holds the bytes it had (which every
    read in the run sees; None when the target is written in place), `stale` the nodes that read those
    bytes, and `owners` the tensors whose assign it was (they read the new bytes after the run)."""

    target: Buffer
    before: Buffer | None
    stale: list[weakref.ref[Node]]
    owners: list[weakref.ref] = field(default_factory=list)


@dataclass(frozen=True)
class Overwritten:
    """What a node that read an in-place buffer's old bytes holds after the assign: no bytes at all."""

    target: Buffer


class StaleReadError(RuntimeError):
    """A value was built from a buffer that an assign then overwrote in place; it cannot be computed."""


def fork(target: Buffer) -> Fork:
    """Takes `target`'s readers and, unless it is written in place, gives it other memory for the write."""
    stale = target.take_nodes()
    return Fork(target, None if target.in_place else target.swap_out(), stale)


def check_readable(node: Node) -> Node:
    """The node, unless it read bytes an in-place assign has overwritten since: then StaleReadError."""
    if node.op is Op.BUFFER and isinstance(node.arg, Overwritten):
        buf = node.arg.target
        raise StaleReadError(
            f"a value was built from a {buf.dtype.name}{list(buf.shape)} buffer that an assign then overwrote in "
            "place (optimizer state is written where it is); realize the value before the step that assigns "
            "it, or pass it to step() so the step computes it"
        )
    return node


def prepare(sinks: Sequence[Node], realized: Callable[[Node], Node | None]) -> tuple[list[Node], list[Fork]]:
    """The sinks of one realize() ready to run, in one walk of the graph: each node `realized` gives a
    BUFFER node for is swapped for it (so nothing runs twice), every ASSIGN target is forked, and every
    read of an assigned buffer goes to its old bytes. Returns the sinks and the Forks made."""
    order = toposort(sinks)
    targets: dict[int, Buffer] = {}
    for n in order:
        if n.op is Op.ASSIGN and realized(n) is None:  # an assign realized before only names its result
            buf: Buffer = n.srcs[0].arg
            if id(buf) in targets:
                raise ArgumentError(
                    f"realize(): two assigns write one {buf.dtype.name}{list(buf.shape)} buffer in one run, so "
                    "which one lands is undefined; realize the first before making the second"
                )
            targets[id(buf)] = buf
    forks = {key: fork(buf) for key, buf in targets.items()}
    try:
        return _rewritten(order, sinks, forks, realized), list(forks.values())
    except BaseException:
        undo(list(forks.values()))  # a stale read refused: nothing runs, nothing is forked
        raise


def _rewritten(
    order: list[Node], sinks: Sequence[Node], forks: dict[int, Fork], realized: Callable[[Node], Node | None]
) -> list[Node]:
    before = {key: f.before.node() for key, f in forks.items() if f.before is not None}

    def swap(n: Node, srcs: tuple[Node, ...]) -> Node:
        done = realized(n)  # a training step swaps every node here, so the common case comes first
        if done is None:
            if n.op is Op.ASSIGN:  # its own target is the write, not a read: it names the buffer itself
                srcs = (n.srcs[0], *srcs[1:])
            done = rebuilt(n, srcs)
        if done.op is Op.BUFFER and id(done.arg) in before:
            done = before[id(done.arg)]
        return check_readable(done)

    return substitute(sinks, swap, order)


def undo(forks: Sequence[Fork]) -> None:
    """A run that failed wrote nothing: each target takes its old bytes and its readers back."""
    for f in forks:
        if f.before is not None:
            f.target.swap_back(f.before)
        for ref in f.stale:
            n = ref()
            if n is not None:
                f.target.nodes.add(n)


def settle(forks: Sequence[Fork], redirect: Callable[[Node, Node], None]) -> None:
    """After the run: every node that read a target's old bytes and is still alive reads them from now
    on, or, where they were overwritten in place, holds Overwritten (`redirect(stale, node)` records it)."""
    for f in forks:
        old = None
        for ref in f.stale:
            n = ref()
            if n is None:
                continue
            if old is None:
                gone = Overwritten(f.target)
                old = f.before.node() if f.before is not None else Node(Op.BUFFER, (), n.dtype, n.shape, gone)
            redirect(n, old)
