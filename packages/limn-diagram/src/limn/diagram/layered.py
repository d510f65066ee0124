"""The layered layout of one level of a diagram: nodes of given sizes and acyclic edges, placed in layers.

It takes node sizes, edges (u above v) and optional ports (nodes pinned to the top or bottom layer, where a
cluster's edges cross its border) and gives a Level: each node's centre x and top y, the layers' tops and
heights, and the dummy nodes each edge passes through. Longest-path layering, a dummy in each layer an edge
spans, barycenter sweeps against crossings, then x from an isotonic fit toward each node's neighbours.
Pipeline: Graph -> diagram/layout (per cluster, then outer) -> **diagram/layered.layout_level** -> Level.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

DUMMY_WIDTH, DUMMY_GAP = 4, 8  # an edge passing through a layer takes this much room in it
NODE_GAP = 24  # pixels between neighbouring boxes in a layer
LAYER_GAP = 40  # pixels between layers, by default: room for the edge labels
PORT_GAP = 14  # between a layer of ports and its neighbour: only lines pass there
SWEEPS = 4  # barycenter sweeps (each down then up); crossings rarely improve much past a few
SWEEP_BUDGET = 600_000  # node visits per kind of sweep, past which a level gets fewer sweeps (see _sweeps)


@dataclass
class Level:
    """One level laid out: each node's centre x and top y (dummies after the given nodes), each node's layer,
    each layer's top and height, for each edge given the dummy nodes it passes through, top to bottom, and the
    level's width and height."""

    x: list[float]
    y: list[float]
    layer_top: list[float]
    layer_height: list[float]
    layer: list[int]
    chains: list[list[int]]
    width: float
    height: float


def _layers(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Longest path from a source (edges must be acyclic), then each source moved down to just above its
    nearest consumer: a constant read deep in the graph sits beside its use, not at the top with a long edge."""
    succ, indegree = defaultdict(list), [0] * n
    for u, v in edges:
        succ[u].append(v)
        indegree[v] += 1
    layer, order = [0] * n, [i for i in range(n) if indegree[i] == 0]
    remaining = indegree[:]
    for u in order:  # order grows while it is walked: Kahn's topological sort
        for v in succ[u]:
            layer[v] = max(layer[v], layer[u] + 1)
            remaining[v] -= 1
            if remaining[v] == 0:
                order.append(v)
    assert len(order) == n, f"the layering got a cycle ({n - len(order)} nodes unsorted); the caller breaks them"
    for u in range(n):
        if indegree[u] == 0 and succ[u]:
            layer[u] = min(layer[v] for v in succ[u]) - 1
    return layer


def _isotonic(desired: list[float], sep: list[float]) -> list[float]:
    """The xs closest to `desired` (least squares) with x[i+1] - x[i] >= sep[i]: pool-adjacent-violators on
    x[i] - offset[i], which must be non-decreasing. One pass, linear in the layer's size."""
    offset = [0.0]
    for s in sep:
        offset.append(offset[-1] + s)
    # blocks of pooled targets (their sum and count), merged while a block's mean falls below the one before
    sums: list[float] = []
    counts: list[int] = []
    for d, o in zip(desired, offset):
        total, count = d - o, 1
        while sums and sums[-1] * count > total * counts[-1]:
            total += sums.pop()
            count += counts.pop()
        sums.append(total)
        counts.append(count)
    out = []
    for total, count in zip(sums, counts):
        out.extend([total / count] * count)
    return [y + o for y, o in zip(out, offset)]


def _barycenters(row: list[int], neighbours: list[list[int]], value: list[float]) -> list[float]:
    """Each node's mean `value` over its neighbours (its own value where it has none). Most nodes of a large
    level are dummies with one neighbour, so that case goes first."""
    out = []
    for node in row:
        near = neighbours[node]
        if len(near) == 1:
            out.append(value[near[0]])
        elif near:
            out.append(sum(value[m] for m in near) / len(near))
        else:
            out.append(value[node])
    return out


def _sweeps(nodes: int) -> int:
    """SWEEPS, or fewer on a level of over SWEEP_BUDGET / SWEEPS nodes (dummies included, as long edges make
    them): each sweep costs a few microseconds a node, and a huge graph still lays out in seconds."""
    return max(1, min(SWEEPS, SWEEP_BUDGET // max(nodes, 1)))


def _order_layers(rows: list[list[int]], up: list[list[int]], down: list[list[int]]) -> None:
    """Barycenter sweeps, in place: each layer sorted by the mean position of its neighbours in the layer above
    (going down), then below (going up); a node with no neighbours there keeps its position as its key. Stops
    early when a sweep down and the sweep up after it move nothing."""
    position = [0.0] * len(up)
    for row in rows:
        for i, node in enumerate(row):
            position[node] = i
    still = 0  # sweeps in a row that moved nothing
    for sweep in range(2 * _sweeps(len(up))):
        going_down = sweep % 2 == 0
        sequence = range(1, len(rows)) if going_down else range(len(rows) - 2, -1, -1)
        neighbours = up if going_down else down
        moved = False
        for r in sequence:
            row = rows[r]
            keys = _barycenters(row, neighbours, position)
            order = sorted(range(len(row)), key=keys.__getitem__)  # stable: ties keep their order
            if any(i != k for i, k in enumerate(order)):
                moved = True
                row[:] = [row[k] for k in order]
                for i, node in enumerate(row):
                    position[node] = i
        still = 0 if moved else still + 1
        if still == 2:
            break


def _assign_x(rows, up, down, widths) -> list[float]:
    """Centre xs: each layer packed left to right, then sweeps that pull every node toward the mean x of its
    neighbours above (then below) without breaking the layer's order or its gaps."""
    x = [0.0] * len(widths)
    seps = []
    for row in rows:
        sep = [
            (widths[a] + widths[b]) / 2 + (NODE_GAP if min(widths[a], widths[b]) > DUMMY_WIDTH else DUMMY_GAP)
            for a, b in zip(row, row[1:])
        ]
        seps.append(sep)
        cursor = 0.0
        for node, s in zip(row, [0.0, *sep]):
            cursor += s
            x[node] = cursor
    for sweep in range(2 * _sweeps(len(widths))):
        going_down = sweep % 2 == 0
        sequence = range(1, len(rows)) if going_down else range(len(rows) - 2, -1, -1)
        neighbours = up if going_down else down
        for r in sequence:
            row = rows[r]
            for node, value in zip(row, _isotonic(_barycenters(row, neighbours, x), seps[r])):
                x[node] = value
    return x


def layout_level(
    sizes: list[tuple[float, float]],
    edges: list[tuple[int, int]],
    ports: dict[int, str] | None = None,
    layer_gap: float = LAYER_GAP,
) -> Level:
    """Lays out nodes 0..n-1 of the given (width, height) joined by acyclic edges (u, v), u drawn above v; x and
    y are relative to the level's top-left corner. `ports` maps a node to "top" or "bottom": it is pinned to a
    layer of its own above (below) every other node, where an edge crosses a cluster's border, and each of its
    edges must join it to a node that is not a port. `layer_gap` is the room between two layers of nodes."""
    ports = ports or {}
    n = len(sizes)
    inner = [(u, v) for u, v in edges if u not in ports and v not in ports]
    layer = _layers(n, inner)
    shift = 1 if "top" in ports.values() else 0
    layer = [value + shift for value in layer]
    bottom = max((layer[node] for node in range(n) if node not in ports), default=shift - 1) + 1
    for node, side in ports.items():
        layer[node] = 0 if side == "top" else bottom
    widths = [w for w, _ in sizes]
    up: list[list[int]] = [[] for _ in range(n)]
    down: list[list[int]] = [[] for _ in range(n)]
    chains: list[list[int]] = []
    for u, v in edges:
        chain, previous = [], u
        for lay in range(layer[u] + 1, layer[v]):  # a dummy node in each layer the edge passes through
            dummy = len(widths)
            widths.append(DUMMY_WIDTH)
            layer.append(lay)
            up.append([previous])
            down.append([])
            down[previous].append(dummy)
            chain.append(dummy)
            previous = dummy
        up[v].append(previous)
        down[previous].append(v)
        chains.append(chain)
    rows: list[list[int]] = [[] for _ in range(max(layer, default=-1) + 1)]
    for node in range(len(widths)):  # real nodes first, in index order: a topological-ish start for the sweeps
        rows[layer[node]].append(node)
    _order_layers(rows, up, down)
    x = _assign_x(rows, up, down, widths)
    left = min((x[node] - widths[node] / 2 for node in range(len(widths))), default=0.0)
    right = max((x[node] + widths[node] / 2 for node in range(len(widths))), default=0.0)
    x = [value - left for value in x]
    layer_height = [max((sizes[node][1] for node in row if node < n), default=0.0) for row in rows]
    port_rows = {layer[node] for node in ports}
    layer_top, cursor = [], 0.0
    for r, height in enumerate(layer_height):
        if r > 0:
            cursor += PORT_GAP if (r in port_rows or r - 1 in port_rows) else layer_gap
        layer_top.append(cursor)
        cursor += height
    # a node sits at the vertical middle of its layer; a dummy's y is its layer's top
    y = [layer_top[layer[node]] + (layer_height[layer[node]] - sizes[node][1]) / 2 for node in range(n)]
    y += [layer_top[layer[node]] for node in range(n, len(widths))]
    return Level(x, y, layer_top, layer_height, layer, chains, right - left, cursor)
