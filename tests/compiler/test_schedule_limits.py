"""Rules for graphs at the edges: ten thousand nodes schedule, lower and run without Python's
recursion limit; shared subgraphs do not blow up exponentially; bad indices and graphs the scheduler cannot
handle raise errors that name what is wrong instead of computing something else."""

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.compiler.schedule import ScheduleError, describe, kernel_count, schedule
from limn.dtypes import float32
from limn.graph.ops import Node, Op
from limn.graph.view import View

# Python's recursion limit is 1,000 frames: 10,000 nodes is ten times past what a recursive walk survives.


def test_10000_chained_adds_run_without_recursion_error(ir_device):
    x = Tensor(np.array([1.0, 2.0], np.float32))
    y = x
    for _ in range(10_000):
        y = y + 1
    got = y.numpy()
    assert ir_device.stats.kernels_run == 1, f"the chain is one fused kernel, ran {ir_device.stats.kernels_run}"
    np.testing.assert_array_equal(got, [10_001.0, 10_002.0])


def test_10000_node_chain_with_reuse_runs_without_recursion_error(ir_device):
    # each step is 4 nodes (MUL, ADD, NEG, ADD) that read y three times: a deep, reconverging chain
    start = np.array([1.0, 2.0], np.float32)
    y = Tensor(start)
    for _ in range(2_500):
        y = y * 1.0001 + y - y
    got = y.numpy()
    expected = start.copy()
    for _ in range(2_500):  # the same float32 operations in the same order
        expected = (expected * np.float32(1.0001) + expected) + (-expected)
    assert ir_device.stats.kernels_run == 1, f"the chain is one fused kernel, ran {ir_device.stats.kernels_run}"
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_2000_reduce_broadcast_pairs_run_without_recursion_error(ir_device):
    y = Tensor(np.array([1.0, 2.0], np.float32))
    for _ in range(2_000):
        y = y - y.max(keepdim=True) + 1  # [1, 2] -> [0, 1], then stays
    got = y.numpy()
    # per pair one MAX kernel; y, which the next max and the next y both read, is recomputed while the
    # chain behind it is cheap (RECOMPUTE_LIMIT) and stored once it is not
    runs = ir_device.stats.kernels_run
    assert 2_000 < runs <= 4_000, f"expected between 2000 and 4000 kernels, ran {runs}"
    np.testing.assert_array_equal(got, [0.0, 1.0])


@pytest.mark.parametrize("readers", [1, 2])
def test_diamond_graph_schedules_without_exponential_blowup(ir_device, readers):
    # y = y + y forty times has 2**40 paths from the sink to x; walking paths instead of nodes never ends
    y = Tensor(np.array([1.0, 2.0], np.float32))
    for _ in range(40):
        y = y + y
    sinks = [y] if readers == 1 else [y.sum(), y.max()]
    nodes = [s.node for s in sinks]
    expected_kernels = 1 if readers == 1 else 3  # with two readers y is a kernel both reduces read
    assert kernel_count(nodes) == expected_kernels, f"unexpected schedule:\n{describe(schedule(nodes))}"
    limn.realize(*sinks)
    values = [s.numpy().tolist() for s in sinks]
    expected = [[2.0**40, 2.0**41]] if readers == 1 else [3 * 2.0**40, 2.0**41]
    assert values == expected, f"{values} != {expected}"


@pytest.mark.parametrize("bad", [5, -1])
def test_out_of_range_gather_index_raises_before_any_kernel_runs(ir_device, bad):
    table = Tensor(np.ones((4, 2), np.float32))
    idx = Tensor(np.array([0, bad], np.int32))
    p = Tensor(np.array([1.0, 2.0], np.float32))
    p_buffer = p.node.arg
    p.assign(p + 1)
    rows = (table * 2).embedding(idx)  # the table's kernel would otherwise run first, and maybe the assign
    with pytest.raises(IndexError, match=rf"index {bad} is out of range for an axis of size 4"):
        limn.realize(p, rows)
    assert ir_device.stats.kernels_run == 0, f"{ir_device.stats.kernels_run} kernels ran before the check"
    assert p_buffer.numpy().tolist() == [1.0, 2.0], "the assign in the failed realize() wrote its target"


def test_assign_into_a_computed_value_names_the_op_and_shape():
    x = Tensor(np.ones((2, 3), np.float32))
    view = Node(Op.VIEW, (x.node,), float32, (3, 2), View.contiguous((3, 2)))
    bad = Node(Op.ASSIGN, (view, view), float32, (3, 2))
    with pytest.raises(ScheduleError, match=r"ASSIGN into a VIEW node of shape \(3, 2\)"):
        schedule([bad])
