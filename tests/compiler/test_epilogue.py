"""Rules for epilogues (limn.compiler.epilogue), each against an oracle:
- an elementwise kernel reading a reduce's totals at its own cells folds into the reduce's kernel: a linear
  layer's bias add, its gelu with the pre-activation kept, a residual add, a batched matmul's bias, and in a
  backward the add of two gradient contributions; the reduce still stores its total, and the values match
  numpy (through the IR interpreter, which checks every nest) and torch (on the c device);
- a fold happens only where it changes nothing any kernel sees and the nest stays one width: a consumer over
  other cells than the output's, one reading a total at another cell, a reader in between of what the
  consumer writes, a write in between of what it reads, a fold that reads what the consumer overwrites, an
  in-place write of a buffer read at another cell, a store of another width, and a consumer that is itself a
  reduce each keep the kernels apart;
- a value stored only for readers that all folded into the kernel computing it is no longer stored, nor
  given a buffer."""

import numpy as np
import pytest
import torch

import limn
from limn import Tensor
from limn.compiler.epilogue import fold_epilogues
from limn.compiler.kernel import Alu, Const, Elementwise, Fold, Kernel, Load
from limn.compiler.schedule import describe, schedule
from limn.dtypes import float32, int8
from limn.graph.ops import REDUCE, Op
from limn.graph.view import View

RNG = np.random.default_rng(0)


def _data(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _folded(*tensors: Tensor) -> list[Kernel]:
    """The schedule's reduce kernels that carry an epilogue."""
    return [k for k in schedule([t.node for t in tensors]).kernels if k.op in REDUCE and k.form.also]


# ---- which graphs fold, with their values ----


def test_a_bias_add_after_a_matmul_is_the_matmuls_kernel(ir_device):
    a_np, b_np, bias_np = _data(5, 7), _data(7, 9), _data(9)
    y = Tensor(a_np) @ Tensor(b_np) + Tensor(bias_np)
    sched = schedule([y.node])
    assert len(sched.kernels) == 1 and sched.kernels[0].op is Op.SUM, describe(sched)
    np.testing.assert_allclose(y.numpy(), a_np @ b_np + bias_np, rtol=1e-5, atol=1e-6)


def test_the_total_is_still_stored_for_the_kernels_that_read_it(ir_device):
    a_np, b_np, bias_np = _data(4, 6), _data(6, 8), _data(8)
    mm = Tensor(a_np) @ Tensor(b_np)
    y = mm + Tensor(bias_np)
    (k,) = _folded(mm, y)
    assert len(k.outputs) == 2, describe(schedule([mm.node, y.node]))
    limn.realize(mm, y)
    np.testing.assert_allclose(mm.numpy(), a_np @ b_np, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y.numpy(), a_np @ b_np + bias_np, rtol=1e-5, atol=1e-6)


def _linear_gelu(x: Tensor, w: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    h = x @ w.transpose() + b  # (B, T, C) @ (C, N) -> (B, T, N): the register form, w read along its rows
    return h, h.gelu()


@pytest.mark.parametrize("device", ["ir", "c"])
def test_bias_and_gelu_fold_storing_the_pre_activation_and_the_activation(device, ir_device):
    x_np, w_np, b_np = _data(2, 5, 12), _data(20, 12), _data(20)
    limn.set_device(device)
    h, y = _linear_gelu(Tensor(x_np), Tensor(w_np), Tensor(b_np))
    (k,) = _folded(h, y)
    assert len(schedule([h.node, y.node]).kernels) == 1 and len(k.form.also) == 2
    limn.realize(h, y)
    h_t = torch.tensor(x_np) @ torch.tensor(w_np).T + torch.tensor(b_np)
    np.testing.assert_allclose(h.numpy(), h_t.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y.numpy(), torch.nn.functional.gelu(h_t).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", ["ir", "c"])
def test_a_residual_add_folds_into_the_projection(device, ir_device):
    x_np, w_np = _data(3, 4, 16), _data(16, 16)
    limn.set_device(device)
    x = Tensor(x_np)
    y = x + x @ Tensor(w_np)  # the memory form: w read down its columns
    assert len(schedule([y.node]).kernels) == 1 and _folded(y)
    np.testing.assert_allclose(y.numpy(), x_np + x_np @ w_np, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", ["ir", "c"])
def test_two_gradient_contributions_add_in_the_second_matmuls_kernel(device, ir_device):
    x_np, w1_np, w2_np = _data(6, 8), _data(8, 5), _data(8, 3)
    limn.set_device(device)
    x = Tensor(x_np, requires_grad=True)
    ((x @ Tensor(w1_np)).sum() + ((x @ Tensor(w2_np)) ** 2).sum()).backward()
    # dx = ones @ w1.T + (2 x w2) @ w2.T: the add of the two is the second product's epilogue
    assert _folded(x.grad), describe(schedule([x.grad.node]))
    x_t = torch.tensor(x_np, requires_grad=True)
    ((x_t @ torch.tensor(w1_np)).sum() + ((x_t @ torch.tensor(w2_np)) ** 2).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), x_t.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", ["ir", "c"])
def test_a_value_every_reader_of_which_folded_into_its_kernel_is_not_stored(device, ir_device):
    """An MLP's gelu and its gradient fold into the first product's kernel: the erf both read was given a
    buffer for its two readers, and once both are in that one nest nothing reads the buffer, so no kernel
    writes it (a 4 MB pass over memory per layer in a GPT step). The gradients still match torch's."""
    x_np, w1_np, w2_np, g_np = _data(16, 8), _data(8, 32), _data(32, 8), _data(16, 8)
    limn.set_device(device)
    x, w1, w2 = (Tensor(a, requires_grad=True) for a in (x_np, w1_np, w2_np))
    (((x @ w1).gelu() @ w2) * Tensor(g_np)).sum().backward()
    sched = schedule([x.grad.node, w1.grad.node, w2.grad.node])
    read = {slot for k in sched.kernels for slot in k.inputs} | {sink.slot for sink in sched.sinks}
    unread = [(k.name, slot) for k in sched.kernels for slot in k.outputs[1:] if slot not in read]
    assert not unread, describe(sched)
    if device == "c":  # nor is a buffer allocated for it
        plan, _ = limn.get_device("c").plan([x.grad.node, w1.grad.node, w2.grad.node])
        touched = {b.slot for k in plan.program.kernels for b in k.inputs + k.outputs}
        assert not [number for number, *_ in plan.written if number not in touched], describe(plan.schedule)
    x_t, w1_t, w2_t = (torch.tensor(a, requires_grad=True) for a in (x_np, w1_np, w2_np))
    ((torch.nn.functional.gelu(x_t @ w1_t) @ w2_t) * torch.tensor(g_np)).sum().backward()
    for got, want in ((x, x_t), (w1, w1_t), (w2, w2_t)):
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_a_sum_over_the_first_axis_folds_over_the_cells_it_keeps(ir_device):
    x_np = _data(7, 3, 5)
    s = Tensor(x_np).sum(0) * 2 + 1  # loop (7, 3, 5) over axis 0, the consumer over (3, 5)
    assert len(schedule([s.node]).kernels) == 1, describe(schedule([s.node]))
    np.testing.assert_allclose(s.numpy(), x_np.sum(0) * 2 + 1, rtol=1e-5, atol=1e-5)


def test_a_half_width_total_is_read_rounded_as_it_was_stored(ir_device):
    x_np = _data(4, 33)
    x = Tensor(x_np, dtype="float16")
    s = x.sum(1)
    y = s * 3  # reads the float16 total, as a second kernel would have
    assert _folded(s, y)
    limn.realize(s, y)
    np.testing.assert_array_equal(y.numpy(), (s.numpy().astype(np.float32) * 3).astype(np.float16))


# ---- which graphs must not fold: hand-made kernels, one rule each ----

LOOP = (4, 8)  # a SUM over dim 1: output cells (4, 1)
CELLS = (4,)


def _load(slot: int, shape=CELLS, view: View | None = None, dtype=float32) -> Load:
    return Load(slot, view or View.contiguous(shape), dtype)


def _sum(out: int, src: int = 0) -> Kernel:
    return Kernel(f"k{out}", Op.SUM, out, LOOP, Fold(_load(src, LOOP), (1,)))


def _add(out: int, *srcs: Load, shape=CELLS) -> Kernel:
    expr = Alu(Op.ADD, (srcs[0], srcs[1] if len(srcs) > 1 else Const(1.0, float32)), float32)
    return Kernel(f"k{out}", Op.ADD, out, shape, Elementwise(expr))


def test_a_consumer_reading_the_total_at_its_cell_folds():
    (k,) = fold_epilogues([_sum(1), _add(2, _load(1))])
    assert k.op is Op.SUM and k.outputs == (1, 2) and k.inputs == (0,), k


def test_a_folded_consumer_says_which_reduce_took_it_and_why():
    joins = {}
    fold_epilogues([_sum(1), _add(2, _load(1))], joins)
    assert list(joins) == [2] and joins[2].rule == "epilogue", joins
    assert "the reduce writing buf1" in joins[2].detail and "consumer of its totals" in joins[2].detail


def test_a_consumer_over_other_cells_than_the_outputs_is_not_folded():
    total = View((4, 8), (1, 0))  # the row's total, stretched over the row: (4, 8) is not the cells (4, 1)
    kernels = fold_epilogues([_sum(1), _add(2, _load(1, LOOP, total), shape=LOOP)])
    assert len(kernels) == 2


def test_a_consumer_reading_a_total_at_another_cell_is_not_folded():
    flipped = View(CELLS, (-1,), 3)  # row 3's total at cell 0: a tile would not have finished it
    assert len(fold_epilogues([_sum(1), _add(2, _load(1, view=flipped))])) == 2


def test_a_reader_in_between_of_what_the_consumer_writes_keeps_them_apart():
    between = _add(3, _load(5))  # reads buf5, which the consumer then overwrites in place
    consumer = _add(5, _load(1), _load(5))
    assert len(fold_epilogues([_sum(1), between, consumer])) == 3


def test_a_write_in_between_of_what_the_consumer_reads_keeps_them_apart():
    between = _add(3, _load(6))  # writes buf3, which the consumer reads
    consumer = _add(2, _load(1), _load(3))
    assert len(fold_epilogues([_sum(1), between, consumer])) == 3


def test_a_consumer_overwriting_what_the_fold_reads_is_not_folded():
    consumer = _add(0, _load(1), _load(0))  # buf0 += total: the fold reads buf0 at other cells
    with_view = Kernel("k1", Op.SUM, 1, (4, 4), Fold(_load(0, (4, 4), View((4, 4), (0, 1))), (1,)))
    assert len(fold_epilogues([with_view, consumer])) == 2


def test_an_in_place_write_of_a_buffer_read_at_another_cell_is_not_folded():
    shifted = View(CELLS, (1,), 0, ((1, 4),))  # buf5 read one cell over (padded): written at this cell
    consumer = _add(5, _load(1), _load(5, view=shifted))
    assert len(fold_epilogues([_sum(1), consumer])) == 2


def test_a_store_of_another_width_is_not_folded():
    narrow = Kernel(
        "k2", Op.CAST, 2, CELLS, Elementwise(Alu(Op.CAST, (_load(1),), int8))
    )  # int8 beside the float32 total
    assert len(fold_epilogues([_sum(1), narrow])) == 2


def test_a_reduce_of_a_total_is_not_an_epilogue():
    second = Kernel("k2", Op.SUM, 2, (4,), Fold(_load(1), (0,)))
    assert len(fold_epilogues([_sum(1), second])) == 2
