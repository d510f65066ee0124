"""Rule: every slot a kernel writes carries the Reason the fusion policy stored it for, naming the rule. Each
test builds a graph in which one rule fires and reads the reason of the slot that rule made, with the
schedule's explanation (what LIMN_DEBUG=2 prints) beside it."""

import numpy as np
import pytest

from limn import Tensor
from limn.compiler.explain import explain_schedule
from limn.compiler.fusion import ALWAYS_STORED, RECOMPUTE_LIMIT, WEIGHT
from limn.compiler.schedule import Rule, Schedule, schedule
from limn.dtypes import float32
from limn.graph.ops import ELEMENTWISE, MOVEMENT, SOURCES, Node, Op


def why(sched: Schedule) -> str:
    """The schedule explained, kernel by kernel (what LIMN_DEBUG=2 prints, less the loop nests)."""
    return explain_schedule(sched).brief()


def schedule_of(*values: Tensor | Node) -> Schedule:
    return schedule([v if isinstance(v, Node) else v.node for v in values])


def reason_of_kernel(sched: Schedule, op: Op, nth: int = 0):
    """The reason of the slot written by the nth kernel of this op."""
    kernel = [k for k in sched.kernels if k.op is op][nth]
    return sched.reasons[kernel.out]


def test_every_slot_a_kernel_writes_has_a_reason():
    x = Tensor.randn((4, 5))
    sched = schedule_of(x.softmax(-1), (x @ Tensor.randn((5, 3))).exp())
    written = {s for k in sched.kernels for s in k.outputs}
    assert set(sched.reasons) == written, f"reasons for {sorted(sched.reasons)}, written {sorted(written)}"


def test_the_table_covers_every_op_group_fusion_does_not_inline():
    always = set().union(*ALWAYS_STORED)
    fused = SOURCES | MOVEMENT | ELEMENTWISE
    assert always | fused == set(Op) and not always & fused, f"always stored {always}, fused {fused}"
    assert set(WEIGHT) == ELEMENTWISE | MOVEMENT, "the cost model weighs every op a kernel can inline"


def test_a_reduce_is_stored_by_its_op():
    sched = schedule_of(Tensor.randn((4, 6)).sum(1))
    reason = reason_of_kernel(sched, Op.SUM)
    assert reason.rule is Rule.OP and "a reduce is always stored" in str(reason), why(sched)


def test_a_sink_is_stored_because_the_caller_reads_it():
    sched = schedule_of(Tensor.randn((4, 6)) * 2)
    assert reason_of_kernel(sched, Op.MUL).rule is Rule.SINK, why(sched)


def test_an_expensive_shared_value_is_stored_with_its_cost():
    e = Tensor.randn((4, 6))
    for _ in range(8):  # 8 exps: past RECOMPUTE_LIMIT
        e = (e * 0.1).exp()
    sched = schedule_of(e.sum(1), e.max(axis=0))
    reason = reason_of_kernel(sched, Op.EXP)
    assert reason.rule is Rule.SHARED, why(sched)
    assert f"recompute cost over {RECOMPUTE_LIMIT}" in str(reason), why(sched)


def test_a_shared_sum_of_many_buffers_is_stored_for_its_reads():
    """A residual stream, x0 + f1 + f2 + f3: three adds, but each kernel recomputing it would read four buffers,
    so it is stored once (LOAD_WEIGHT); a sum of two buffers is still recomputed by each reader."""
    parts = [Tensor.randn((4, 6)).realize() for _ in range(4)]
    stream = parts[0] + parts[1] + parts[2] + parts[3]
    sched = schedule_of(stream.sum(1), stream.max(axis=0))
    reason = reason_of_kernel(sched, Op.ADD)
    assert reason.rule is Rule.SHARED and f"recompute cost over {RECOMPUTE_LIMIT}" in str(reason), explain_schedule(
        sched
    ).brief()
    pair = parts[0] + parts[1]
    sched = schedule_of(pair.sum(1), pair.max(axis=0))
    assert [k.op for k in sched.kernels] == [Op.SUM, Op.MAX], why(sched)


def test_a_chain_on_one_buffer_is_charged_its_ops_alone():
    """Recomputing a value from one buffer reads as much memory as reading it back once stored, so only the
    reads past the first are charged: a chain of 20 ops on one buffer (a GELU's pieces on a matmul's output,
    which the backward pass reads again) is recomputed by both readers, not stored; with a second buffer in
    it, the read it adds tips it over RECOMPUTE_LIMIT and it is stored."""
    x, y = Tensor.randn((4, 6)).realize(), Tensor.randn((4, 6)).realize()
    chain = x
    for _ in range(10):  # 20 ops, under RECOMPUTE_LIMIT
        chain = chain * 0.5 + 1.0
    sched = schedule_of(chain.sum(1), chain.max(axis=0))
    assert sorted(k.op.name for k in sched.kernels) == ["MAX", "SUM"], why(sched)
    two = chain + y  # 21 ops and a second full-size read (LOAD_WEIGHT)
    sched = schedule_of(two.sum(1), two.max(axis=0))
    reason = reason_of_kernel(sched, Op.ADD)
    assert reason.rule is Rule.SHARED and f"recompute cost over {RECOMPUTE_LIMIT}" in str(reason), explain_schedule(
        sched
    ).brief()


def test_a_broadcast_scalar_is_not_counted_as_a_read():
    """A shared value reading a small leaf through a broadcast (a bias, a scalar) is charged its ops alone."""
    x, bias = Tensor.randn((4, 6)).realize(), Tensor.randn((6,)).realize()
    shifted = (x + bias) * 3 + bias
    sched = schedule_of(shifted.sum(1), shifted.max(axis=0))
    assert sorted(k.op.name for k in sched.kernels) == ["MAX", "SUM"], why(sched)


def test_a_computed_matmul_operand_is_stored_as_stretched():
    # the broadcast of exp(x) into the (4, 3, 6) product would evaluate each exp 3 times
    sched = schedule_of(Tensor.randn((4, 6)).exp() @ Tensor.randn((6, 3)))
    reason = reason_of_kernel(sched, Op.EXP)
    assert reason.rule is Rule.STRETCHED and "24 elements to 72 into a reduce" in str(reason), explain_schedule(
        sched
    ).brief()


def test_gather_operands_are_stored_because_the_gather_reads_them_from_memory():
    x = Tensor.randn((4, 6))
    idx = Tensor(np.array([[0, 1, 2, 3, 0, 1]], np.int32))
    sched = schedule_of((x * 2).gather(0, idx + 1))
    for op in (Op.MUL, Op.ADD):  # the source, then the indices
        assert reason_of_kernel(sched, op).rule is Rule.OPERAND, why(sched)
    assert reason_of_kernel(sched, Op.GATHER).rule is Rule.OP, why(sched)


def test_a_view_that_does_not_compose_is_copied_first():
    # (y + 1) read through the reshape reads y's permuted view through it too: no single View says that
    y = Tensor.randn((4, 6)).permute(1, 0)
    sched = schedule_of((y + 1).reshape(3, 8) * 2)
    assert reason_of_kernel(sched, Op.VIEW).rule is Rule.VIEW_CHAIN, why(sched)


def test_a_pad_over_a_computed_value_stores_the_value():
    sched = schedule_of((Tensor.randn((4, 6)) * 2).pad(((1, 1), (0, 0))) + 1)
    reason = reason_of_kernel(sched, Op.MUL)
    assert reason.rule is Rule.PAD and "zeros, not f(0)" in str(reason), why(sched)


def _buffer(value: np.ndarray) -> Node:
    return Tensor(value).node


@pytest.mark.parametrize("case", ["reads elsewhere", "swap"])
def test_an_assign_that_cannot_write_in_place_writes_a_temp(case):
    if case == "reads elsewhere":  # p <- p.T: cell (0, 1) would read (1, 0) after it was overwritten
        p = Tensor(np.arange(4, dtype=np.float32).reshape(2, 2))
        sched = schedule_of(Node(Op.ASSIGN, (p.node, p.T.node), float32, (2, 2)))
        why = "reads the target at other cells"
    else:  # a <- b and b <- a: each in-place write would have to wait for the other's read
        a, b = _buffer(np.ones((2, 2), np.float32)), _buffer(np.zeros((2, 2), np.float32))
        sched = schedule_of(Node(Op.ASSIGN, (a, b), float32, (2, 2)), Node(Op.ASSIGN, (b, a), float32, (2, 2)))
        why = "precede a reader of the old value"
    temps = [s.number for s in sched.slots if s.kind == "assign"]
    assert len(temps) == 1, why(sched)
    reason = sched.reasons[temps[0]]
    assert reason.rule is Rule.ASSIGN_TEMP and why in str(reason), why(sched)


def test_explain_prints_one_line_per_slot_with_its_rule_and_readers():
    sched = schedule_of(Tensor.randn((4, 5)).softmax(-1))
    assert [line for line in why(sched).splitlines() if line.startswith(("k", "  stores"))] == [
        "k0  MAX  loop[4, 5]",
        "  stores buf1 float32[4, 1]: a reduce is always stored; read by k1, k2",
        "k1  SUM  loop[4, 5]",
        "  stores buf2 float32[4, 1]: a reduce is always stored; read by k2",
        "k2  MUL  loop[4, 5]",
        "  stores buf3 float32[4, 5]: a sink is read by the caller; sink 0",
    ], why(sched)
