"""Value semantics for assign: a value built before an assign computes what it saw when it was built.

An ASSIGN writes into its target's buffer, and a lazy graph that read the buffer before the assign
must not see the write (`y = w * 2; w.assign(0).realize(); y` is still 2 * the old w). So every run
that assigns is copy-on-write: the target buffer gets fresh memory for the write (the Buffer object
stays, which optimizers, load_into and limn.capture hold on to), every read in the run goes to the
old bytes, and afterwards each BUFFER node that read the old bytes is redirected to them, for as long
as such a node lives. Nothing is copied; the old bytes are freed when their last reader goes.
Pipeline: tensor -> **realize (assign transaction)** -> device.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from limn.device import Buffer
from limn.ops import Node, Op, toposort


@dataclass
class Fork:
    """One assigned buffer in one run: `target` holds fresh memory for the write, `before` the bytes it
    had (which every read in the run sees), `stale` the nodes that read those bytes, and `owners` the
    tensors whose assign it was (they read the new bytes after the run)."""

    target: Buffer
    before: Buffer
    stale: list[weakref.ref[Node]]
    owners: list[weakref.ref] = field(default_factory=list)


def fork(target: Buffer) -> Fork:
    """Gives `target` fresh memory and returns the Fork that remembers its old bytes and their readers."""
    return Fork(target, target.swap_out(), target.take_nodes())


def prepare(sinks: Sequence[Node], realized: Callable[[Node], Node | None]) -> tuple[list[Node], list[Fork]]:
    """The sinks of one realize() ready to run, in one walk of the graph: each node `realized` gives a
    BUFFER node for is swapped for it (so nothing runs twice), every ASSIGN target is forked, and every
    read of an assigned buffer goes to its old bytes. Returns the sinks and the Forks made."""
    order = toposort(sinks)
    targets: dict[int, Buffer] = {}
    for n in order:
        if n.op is Op.ASSIGN:
            buf: Buffer = n.srcs[0].arg
            if id(buf) in targets:
                raise ValueError(
                    f"realize(): two assigns write one {buf.dtype.name}{list(buf.shape)} buffer in one run, so "
                    "which one lands is undefined; realize the first before making the second"
                )
            targets[id(buf)] = buf
    forks = {key: fork(buf) for key, buf in targets.items()}
    before = {key: f.before.node() for key, f in forks.items()}
    new: dict[int, Node] = {}
    for n in order:
        done = realized(n)
        if done is None and n.op is not Op.BUFFER:
            # an ASSIGN's own target is the write, not a read: it keeps naming the buffer itself
            srcs = tuple(s if n.op is Op.ASSIGN and i == 0 else new[id(s)] for i, s in enumerate(n.srcs))
            same = all(a is b for a, b in zip(srcs, n.srcs))
            done = n if same else Node(n.op, srcs, n.dtype, n.shape, n.arg)
        elif done is None:
            done = n
        if done.op is Op.BUFFER and id(done.arg) in before:
            done = before[id(done.arg)]
        new[id(n)] = done
    return [new[id(s)] for s in sinks], list(forks.values())


def undo(forks: Sequence[Fork]) -> None:
    """A run that failed wrote nothing: each target takes its old bytes and its readers back."""
    for f in forks:
        f.target.swap_back(f.before)
        for ref in f.stale:
            n = ref()
            if n is not None:
                f.target.nodes.add(n)


def settle(forks: Sequence[Fork], redirect: Callable[[Node, Node], None]) -> None:
    """After the run: every node that read a target's old bytes and is still alive reads them from now
    on (`redirect(stale_node, node_of_old_bytes)` records it)."""
    for f in forks:
        old = None
        for ref in f.stale:
            n = ref()
            if n is not None:
                if old is None:
                    old = f.before.node()
                redirect(n, old)
