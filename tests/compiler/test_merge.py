"""Rules for multi-output kernels (limn.compiler.merge), each against an oracle:
- an AdamW step is one kernel per parameter (m, v and the parameter in one pass), a gelu kept for its
  backward is one kernel, and both still match numpy and torch;
- a kernel folds into a later one only where that changes nothing any kernel sees: a reader of its output
  in between, a write of its input in between, a read of its output through a view other than the cell
  itself, a reduce, and a write of a buffer read at another cell each keep the kernels apart;
- the merged nest stores each value at its cell after every load of that cell, and the IR interpreter
  running the merged schedule gives numpy's answers."""

import numpy as np
import pytest
import torch

import limn
from limn import Tensor, optim
from limn.compiler.kernel import Alu, Const, Elementwise, Fold, Kernel, Load
from limn.compiler.merge import merge_kernels
from limn.compiler.schedule import describe, schedule
from limn.dtypes import float32
from limn.graph.ops import Op
from limn.graph.view import View

SHAPE = (4, 8)
CELL = View.contiguous(SHAPE)


def _load(slot: int, view: View = CELL) -> Load:
    return Load(slot, view, float32)


def _plus_one(slot: int, view: View = CELL) -> Alu:
    return Alu(Op.ADD, (_load(slot, view), Const(1.0, float32)), float32)


def _kernel(name: str, out: int, expr, op: Op = Op.ADD) -> Kernel:
    return Kernel(name, op, out, SHAPE, Elementwise(expr))


def test_a_kernel_reading_an_earlier_ones_output_at_its_cell_absorbs_it():
    p = _kernel("k0", 1, _plus_one(0))  # buf1 = buf0 + 1
    c = _kernel("k1", 2, Alu(Op.MUL, (_load(1), _load(0)), float32))  # buf2 = buf1 * buf0
    (merged,) = merge_kernels([p, c])
    assert merged.outputs == (2, 1) and merged.inputs == (0,), merged
    assert merged.form.expr.srcs[0] is merged.form.also[0][1], "the consumer uses the value it stores, not a reload"


def test_each_value_a_merge_moves_carries_why():
    # the producer's value moves into its reader's nest, a sibling's beside the earlier kernel; a value
    # that stays in its own kernel has no join
    joins = {}
    merge_kernels([_kernel("k0", 1, _plus_one(0)), _kernel("k1", 2, Alu(Op.MUL, (_load(1), _load(0)), float32))], joins)
    assert list(joins) == [1] and joins[1].rule == "producer" and "stores buf2" in joins[1].detail, joins
    joins = {}
    merge_kernels([_kernel("k0", 1, _plus_one(0)), _kernel("k1", 2, Alu(Op.MUL, (_load(0), _load(0)), float32))], joins)
    assert list(joins) == [2] and joins[2].rule == "sibling" and "cells of buf1" in joins[2].detail, joins
    joins = {}
    between = Kernel("k1", Op.SUM, 3, SHAPE, Fold(_load(1), (1,)))
    merge_kernels([_kernel("k0", 1, _plus_one(0)), between, _kernel("k2", 2, _plus_one(1))], joins)
    assert joins == {}, joins


def test_a_reader_in_between_keeps_the_producer_where_it_is():
    p = _kernel("k0", 1, _plus_one(0))
    between = Kernel("k1", Op.SUM, 3, SHAPE, Fold(_load(1), (1,)))  # a reduce reads buf1: not merged
    c = _kernel("k2", 2, _plus_one(1))
    kernels = merge_kernels([p, between, c])
    assert [k.outputs for k in kernels] == [(1,), (3,), (2,)], [str(k) for k in kernels]


def test_a_write_of_the_producers_input_in_between_keeps_them_apart():
    p = _kernel("k0", 1, _plus_one(0))
    overwrite = Kernel("k1", Op.SUM, 0, SHAPE, Fold(_load(5), (1,)))  # buf0 rewritten after p read it
    c = _kernel("k2", 2, _plus_one(1))
    kernels = merge_kernels([p, overwrite, c])
    assert [k.outputs for k in kernels] == [(1,), (0,), (2,)]


def test_a_read_through_another_view_is_not_the_cell_and_keeps_them_apart():
    p = _kernel("k0", 1, _plus_one(0))
    flipped = View(SHAPE, (-8, 1), 24)  # buf1 read upside down: a cell p has not computed yet there
    c = _kernel("k1", 2, _plus_one(1, flipped))
    kernels = merge_kernels([p, c])
    assert len(kernels) == 2


def test_an_in_place_write_of_a_buffer_read_at_another_cell_is_not_merged():
    shifted = View(SHAPE, (8, 1), 0, ((0, 4), (1, 8)))  # a pad-shifted read of buf0
    p = _kernel("k0", 1, _plus_one(0, shifted))
    c = _kernel("k1", 0, Alu(Op.ADD, (_load(1), _load(0)), float32))  # writes buf0 in place
    kernels = merge_kernels([p, c])
    assert len(kernels) == 2


def test_siblings_sharing_an_input_merge_at_the_earlier_place():
    a = _kernel("k0", 1, _plus_one(0))
    b = _kernel("k1", 2, Alu(Op.MUL, (_load(0), _load(0)), float32))
    (merged,) = merge_kernels([a, b])
    assert merged.outputs == (1, 2) and merged.inputs == (0,)


def test_an_adamw_step_is_one_kernel_per_parameter_and_matches_torch(ir_device):
    # through realize(): the optimizer's state is written in place there, as opt.step() does it
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((16, 8)).astype(np.float32)
    w = Tensor(w0, requires_grad=True)
    opt = optim.AdamW([w], lr=1e-2, weight_decay=0.1)
    w_t = torch.tensor(w0, requires_grad=True)
    opt_t = torch.optim.AdamW([w_t], lr=1e-2, weight_decay=0.1)
    for step in range(3):
        opt.zero_grad()
        (w * w * (step + 1)).sum().backward()
        w.grad.realize()
        before = ir_device.stats.kernels_run
        opt.step()
        # the parameter with m and v, the step count, and the two bias-correction powers
        assert ir_device.stats.kernels_run - before == 4
        opt_t.zero_grad()
        (w_t * w_t * (step + 1)).sum().backward()
        opt_t.step()
        np.testing.assert_allclose(w.numpy(), w_t.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", ["numpy", "c"])
def test_a_gelu_kept_for_its_backward_is_one_kernel_and_matches_torch(device):
    limn.set_device(device)
    try:
        x_np = np.random.default_rng(1).standard_normal((8, 32)).astype(np.float32)
        x = Tensor(x_np, requires_grad=True)
        y = x.gelu()
        y.sum().backward()
        sched = schedule([y.node, x.grad.node])
        assert len(sched.kernels) == 1, describe(sched)
        x_t = torch.tensor(x_np, requires_grad=True)
        y_t = torch.nn.functional.gelu(x_t)
        y_t.sum().backward()
        x = Tensor(x_np, requires_grad=True)
        y = x.gelu()
        y.sum().backward()
        limn.realize(y, x.grad)
        np.testing.assert_allclose(y.numpy(), y_t.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), rtol=1e-5, atol=1e-6)
    finally:
        limn.set_device("numpy")


def test_the_merged_schedule_runs_in_the_ir_interpreter_as_numpy_computes(ir_device):
    rng = np.random.default_rng(2)
    a_np, b_np = rng.standard_normal(SHAPE).astype(np.float32), rng.standard_normal(SHAPE).astype(np.float32)
    a, b = Tensor(a_np), Tensor(b_np)
    s = (a * b).exp()  # stored: a sink
    t = s + a  # reads s at its cell: merged with it
    u = (s * 2).sum(1)  # a reduce reads s
    sched = schedule([s.node, t.node, u.node])
    assert any(len(k.outputs) == 2 for k in sched.kernels), describe(sched)
    limn.realize(s, t, u)
    e = np.exp(a_np * b_np)
    for value, want in zip([s, t, u], [e, e + a_np, (e * 2).sum(1)]):
        np.testing.assert_allclose(value.numpy(), want, rtol=1e-6)
