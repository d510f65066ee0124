"""Repeated blocks: the layers of a model, found in the graph from where its nodes were made, to draw as one box.

A GPT's training step has thousands of nodes, nearly all of them six copies of one transformer block. What
makes them copies is that one line of the user's code (the `x = block(x)` in a loop) called the same
function several times, and limn.graph.provenance records, when asked for stacks, each node's user call stack with
which call of each function it was. A block is then the nodes whose stacks pass through one such call
site, split by whether they are forward values or their gradients; its count is how many calls there were.
The outermost repeated call site wins (a loop inside a block stays inside its box). Leaves only the block
reads (its parameters, its constants) go in with it. A block whose box would put a cycle in the drawing
(something outside it computed between two of its layers) is left expanded.
Pipeline: graph (+ provenance stacks) -> **blocks** -> graph_view -> diagram/graph.Graph -> .svg.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path

from limn.graph import provenance
from limn.graph.ops import SOURCES, Node


@dataclass(frozen=True)
class Block:
    """One repeated block: the function called (`function`), from which line (`call_site`, file:line), how
    many times, whether these are its forward nodes or their gradients, and its nodes' ids."""

    key: tuple
    function: str
    call_site: str
    count: int
    backward: bool
    members: frozenset[int]

    @property
    def label(self) -> str:
        return f"{self.function} (x{self.count}){' backward' if self.backward else ''}"


def repeated_blocks(order: list[Node]) -> list[Block]:
    """The blocks of a graph (toposorted `order`) whose nodes were made under provenance.recording(stacks=True),
    each node in at most one; [] when no stacks were recorded."""
    calls: dict[tuple, set[int]] = defaultdict(set)  # (depth, site of the calling frame) -> calls made from it
    stacks: dict[int, tuple] = {}
    for node in order:
        site = provenance.site(node)
        if site is None or len(site.stack) < 2:
            continue
        stacks[id(node)] = site
        for depth in range(len(site.stack) - 1):
            callee = site.stack[depth + 1]
            calls[_call_key(site.stack, depth)].add((callee.function, callee.call))
    repeated = {key for key, made in calls.items() if len({c for _, c in made}) > 1}
    groups: dict[tuple, set[int]] = defaultdict(set)
    functions: dict[tuple, dict[str, None]] = defaultdict(dict)  # an ordered set: a loop may call several
    for nid, site in stacks.items():
        for depth in range(len(site.stack) - 1):
            key = _call_key(site.stack, depth)
            if key in repeated:
                group = (key, site.backward)
                groups[group].add(nid)
                functions[group].setdefault(site.stack[depth + 1].function)
                break
    blocks = []
    for group, members in groups.items():
        (_, caller_file, caller_line, *_), backward = group[0], group[1]
        count = len({c for _, c in calls[group[0]]})
        members |= _leaves_read_only_by(order, members)
        site = f"{Path(caller_file).name}:{caller_line}"
        blocks.append(Block(group, "/".join(functions[group]), site, count, backward, frozenset(members)))
    blocks.sort(key=lambda b: -len(b.members))
    return _acyclic(order, blocks)


def _call_key(stack: tuple, depth: int) -> tuple:
    """A calling frame's identity across calls of the same block: its depth, file, line and the lines of the
    frames above it (the same loop line in another caller is another call site)."""
    frame = stack[depth]
    return (depth, frame.file, frame.line, tuple((f.file, f.line) for f in stack[:depth]))


def _leaves_read_only_by(order: list[Node], members: set[int]) -> set[int]:
    readers: dict[int, set[int]] = defaultdict(set)
    for node in order:
        for s in node.srcs:
            readers[id(s)].add(id(node))
    leaves = [n for n in order if n.op in SOURCES and id(n) not in members]
    return {id(n) for n in leaves if readers[id(n)] and readers[id(n)] <= members}


def _acyclic(order: list[Node], blocks: list[Block]) -> list[Block]:
    """The blocks, largest first, each kept only if drawing it (and those kept before it) as one box leaves
    the graph acyclic."""
    kept: list[Block] = []
    owner: dict[int, int] = {}
    for block in blocks:
        trial = dict(owner)
        for nid in block.members:
            trial.setdefault(nid, len(kept))
        if not has_cycle(order, trial):
            owner = trial
            kept.append(block)
    shrunk = [
        Block(b.key, b.function, b.call_site, b.count, b.backward, frozenset(n for n in b.members if owner[n] == i))
        for i, b in enumerate(kept)
    ]
    return [b for b in shrunk if b.members]  # a block whose leaves a larger one took is no block


def has_cycle(order: list[Node], owner: dict[int, int]) -> bool:
    """Whether contracting each block's nodes to one vertex makes a cycle. Along the topological order, a
    path leaves a block and comes back exactly when a node outside it is reached from the block and
    reaches it in turn: tracked as, per node, the set of blocks it is downstream of."""
    after: dict[int, frozenset[int]] = {}  # node id -> blocks with a path to it that has left the block
    for node in order:
        mine = owner.get(id(node))
        reached: set[int] = set()
        for s in node.srcs:
            reached |= after[id(s)]
            theirs = owner.get(id(s))
            if theirs is not None and theirs != mine:
                reached.add(theirs)
        if mine is not None and mine in reached:
            return True
        after[id(node)] = frozenset(reached)
    return False


def cyclic(pairs: Iterable[tuple[Hashable, Hashable]]) -> bool:
    """Whether the directed edges (src, dst) close a cycle: Kahn's algorithm leaves some vertex waiting."""
    edges = {(a, b) for a, b in pairs}
    waiting: Counter[Hashable] = Counter(b for _, b in edges)
    after: dict[Hashable, list[Hashable]] = defaultdict(list)
    for a, b in edges:
        after[a].append(b)
    vertices = {v for e in edges for v in e}
    ready = [v for v in vertices if not waiting[v]]
    done = 0
    while ready:
        v = ready.pop()
        done += 1
        for w in after[v]:
            waiting[w] -= 1
            if not waiting[w]:
                ready.append(w)
    return done < len(vertices)
