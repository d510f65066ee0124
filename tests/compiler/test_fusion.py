"""Rule: the scheduler cuts the graph only where a value has to exist in memory. Each test builds a known
graph and counts its kernels, or reads the loop nest one of them lowers to, so a fusion or loop-order
regression shows up as a changed number with the schedule printed beside it."""

from limn import Tensor
from limn.compiler.codegen import ir
from limn.compiler.ir import Acc, Accum, ConstI, EndLoop, Loop, Store
from limn.compiler.schedule import Alu, Load, Schedule, Sink, describe, kernel_count, schedule, walk_expr
from limn.graph.ops import Op


def schedule_of(*tensors: Tensor) -> Schedule:
    return schedule([t.node for t in tensors])


def ops_of(sched: Schedule) -> list[Op]:
    return [k.op for k in sched.kernels]


def elementwise_chain(x: Tensor) -> Tensor:
    """Ten elementwise ops (each a primitive: EXP, MUL, ADD, NEG, SQRT, RECIP)."""
    y = x.exp()  # 1
    y = y * 0.5  # 2
    y = y + 1.0  # 3
    y = -y  # 4
    y = y * y  # 5
    y = y.sqrt()  # 6
    y = y.reciprocal()  # 7
    y = y + x  # 8
    y = y * x  # 9
    return y.exp()  # 10


def test_matmul_is_one_kernel():
    sched = schedule_of(Tensor.randn((4, 5)) @ Tensor.randn((5, 3)))
    assert ops_of(sched) == [Op.SUM], (
        f"broadcast, multiply and reduce must fuse into one SUM kernel:\n{describe(sched)}"
    )


def test_elementwise_chain_into_reduce_is_one_kernel():
    sched = schedule_of(elementwise_chain(Tensor.randn((4, 5))).sum())
    assert ops_of(sched) == [Op.SUM], f"ten elementwise ops must fuse into the reduce:\n{describe(sched)}"
    alus = [e for e in walk_expr([sched.kernels[0].form.expr]) if isinstance(e, Alu)]
    assert len(alus) == 10, f"the reduce kernel should compute all 10 ops, found {len(alus)}"


def test_elementwise_chain_alone_is_one_kernel():
    y = elementwise_chain(Tensor.randn((4, 5)))
    assert kernel_count([y.node]) == 1, f"an elementwise chain is one kernel:\n{describe(schedule_of(y))}"


def test_sum_of_padded_view_does_not_copy():
    x = Tensor.randn((4, 5))
    sched = schedule_of(x.pad(((1, 2), (0, 3))).sum())
    assert ops_of(sched) == [Op.SUM], f"a pad is a masked read, not a copy:\n{describe(sched)}"
    (kernel,) = sched.kernels
    assert isinstance(kernel.form.expr, Load), f"the reduce should load straight from the input, got {kernel.form.expr}"
    assert kernel.form.expr.slot == sched.inputs[0], "the load must read the input buffer itself"
    assert kernel.form.expr.view.mask == ((1, 5), (0, 5)), (
        f"the load's view must carry the pad: {kernel.form.expr.view}"
    )
    assert kernel.loop_shape == (7, 8), f"the loop walks the padded shape, not {kernel.loop_shape}"


def test_matmul_sink_aliases_the_kernel_buffer():
    sched = schedule_of(Tensor.randn((4, 5)) @ Tensor.randn((5, 3)))
    (kernel,) = sched.kernels
    assert sched.sinks == [Sink(kernel.out, (4, 3))], (
        f"sink 0 should read the kernel's output slot {kernel.out} as (4, 3), got {sched.sinks}"
    )
    assert sched.slots[kernel.out].shape == (4, 3, 1), "the kernel's buffer keeps the reduced dim"


def test_sink_reshaping_a_callers_buffer_is_a_copy():
    # a leaf buffer can be assigned later; a sink sharing its bytes would change with it
    x = Tensor.randn((2, 3))
    sched = schedule_of(x.reshape(6))
    assert len(sched.kernels) == 1, f"the reshape of a leaf is copied into its own buffer:\n{describe(sched)}"
    assert sched.sinks[0].slot not in sched.inputs, f"sink {sched.sinks} must not alias input slots {sched.inputs}"


def test_softmax_is_three_kernels():
    # softmax = exp(x - max) / sum. The max is a reduce (k0); exp(x - max) feeds both the sum and the
    # divide, and is cheap enough (under RECOMPUTE_LIMIT) that each recomputes it rather than reading it
    # back from memory: the sum (k1) and the divide (k2).
    sched = schedule_of(Tensor.randn((4, 5)).softmax(-1))
    assert ops_of(sched) == [Op.MAX, Op.SUM, Op.MUL], f"softmax kernels changed:\n{describe(sched)}"


def _exp_kernels(sched):
    return [
        (k.name, k.out)
        for k in sched.kernels
        for node in walk_expr(k.roots)
        if isinstance(node, Alu) and node.op is Op.EXP
    ]


def test_a_cheap_value_two_kernels_need_is_recomputed_in_each():
    x = Tensor.randn((4, 5))
    e = (x * 2).exp()  # 5 units of work, under RECOMPUTE_LIMIT
    sched = schedule_of(e.sum(1), e.max(axis=0))
    assert len(sched.kernels) == 2 and len(_exp_kernels(sched)) == 2, describe(sched)


def test_an_expensive_value_two_kernels_need_is_materialized_once():
    x = Tensor.randn((4, 5))
    e = x
    for _ in range(8):  # 8 exps: 32 units of work, past RECOMPUTE_LIMIT
        e = (e * 0.1).exp()
    sched = schedule_of(e.sum(1), e.max(axis=0))
    exps = {name for name, _ in _exp_kernels(sched)}
    assert len(exps) == 1, f"the exps must be computed in exactly one kernel, found {exps}:\n{describe(sched)}"
    exp_slot = next(k.out for k in sched.kernels if k.name in exps)
    readers = [k.name for k in sched.kernels if exp_slot in k.inputs]
    assert len(readers) == 2, f"both reduces should read buf{exp_slot}, readers: {readers}\n{describe(sched)}"


def test_view_of_a_buffered_value_is_not_copied():
    # a broadcast of a reduce's result is index arithmetic on its buffer, however many kernels read it
    x = Tensor.randn((4, 5))
    m = x.max(axis=1, keepdim=True).expand(4, 5)
    sched = schedule_of((m + x).sum(), (m * x).max())
    assert ops_of(sched) == [Op.MAX, Op.SUM, Op.MAX], f"the expanded max must not get a kernel:\n{describe(sched)}"


def test_reshape_that_cannot_be_a_view_makes_a_contiguous_kernel():
    x = Tensor.randn((4, 6))
    sched = schedule_of(x.permute(1, 0).reshape(3, 8) * 2)  # (6, 4) in column order -> (3, 8): no strides say it
    assert ops_of(sched) == [Op.CONTIGUOUS, Op.MUL], f"the reshape needs a copy first:\n{describe(sched)}"


def nest_loops(body) -> list[list[str]]:
    """The loop variables of each top-level nest, outermost first, as printed."""
    nests, depth = [], 0
    for ins in body:
        if isinstance(ins, Loop):
            if depth == 0:
                nests.append([])
            nests[-1].append(str(ins.var))
            depth += 1
        elif isinstance(ins, EndLoop):
            depth -= 1
    return nests


def test_matmul_loop_order_is_i1_innermost_with_fill_then_accum_into_memory():
    program = ir(Tensor.randn((4, 5)) @ Tensor.randn((5, 3)))
    (kernel,) = program.kernels
    fill, fold = nest_loops(kernel.body)
    assert fill == ["i0", "i1"], f"the first nest fills the output:\n{kernel}"
    assert fold == ["i0", "r2", "i1"], f"i1 is stride-1 in in1 and out, so it goes innermost:\n{kernel}"
    consts = [ins for ins in kernel.body if isinstance(ins, ConstI)]
    assert [c.value for c in consts] == [0.0], f"the fill stores the SUM identity:\n{kernel}"
    accums = [ins for ins in kernel.body if isinstance(ins, Accum)]
    assert len(accums) == 1 and accums[0].target == "out" and accums[0].index is not None, (
        f"with i1 inside r2 the total folds into memory with ACCUM:\n{kernel}"
    )
    assert not any(isinstance(ins, Acc) for ins in kernel.body), f"no register accumulator here:\n{kernel}"


def test_row_sum_keeps_the_reduce_loop_innermost_in_a_register():
    program = ir(Tensor.randn((64, 64)).sum(-1))
    (kernel,) = program.kernels
    assert nest_loops(kernel.body) == [["i0", "r1"]], f"r1 is stride-1 in the input, so it goes innermost:\n{kernel}"
    assert any(isinstance(ins, Acc) for ins in kernel.body), f"the total lives in a register (ACC):\n{kernel}"
    accums = [ins for ins in kernel.body if isinstance(ins, Accum)]
    assert all(a.index is None for a in accums), f"ACCUM folds into the register, not memory:\n{kernel}"


def test_half_width_reduce_always_uses_a_register_accumulator():
    # a column sum: the kept dim i1 is stride-1, so float32 folds into memory with r0 outside i1
    wide = ir(Tensor.randn((64, 64)).sum(0)).kernels[0]
    assert not any(isinstance(ins, Acc) for ins in wide.body), f"float32 column sum should fold in memory:\n{wide}"
    for dtype in ("float16", "bfloat16"):
        for total in (Tensor.randn((64, 64), dtype=dtype).sum(0), Tensor.randn((64, 64), dtype=dtype).max(axis=0)):
            (kernel,) = ir(total).kernels
            accs = [ins for ins in kernel.body if isinstance(ins, Acc)]
            assert len(accs) == 1 and accs[0].dtype.name == "float32", (
                f"a {dtype} total must stay float32 in a register and round once:\n{kernel}"
            )
            assert nest_loops(kernel.body) == [["i1", "r0"]], f"{dtype}: the reduce loop goes inside:\n{kernel}"
            stores = [ins for ins in kernel.body if isinstance(ins, Store)]
            assert len(stores) == 1 and stores[0].src == accs[0].dst, f"{dtype}: one store of the total:\n{kernel}"


# ---- the matmul form: the graph states it, the schedule records it ----

CONTRACTIONS = {
    "a @ b": (lambda a, b: a @ b, True),
    "batched a @ b": (lambda a, b: a.reshape(2, 2, 4) @ b.reshape(1, 4, 6).expand(2, 4, 6), True),
    "a @ b.T written as an einsum": (lambda a, b: Tensor.einsum("ik,jk->ij", a, b.T), True),
    "two summed axes": (lambda a, b: Tensor.einsum("ikl,klj->ij", a.reshape(4, 2, 2), b.reshape(2, 2, 6)), True),
    "a row-wise dot product": (lambda a, b: (a * a).sum(-1), False),
    "an outer product summed": (lambda a, b: (a[:, :, None] * a[:, None, :]).sum(0), True),
    "a matmul plus one": (lambda a, b: (a @ b) + 1.0, True),
    "a sum of a square": (lambda a, b: (a.reshape(4, 4, 1) * 2.0).sum(1), False),
    "a max over products": (lambda a, b: (a.reshape(4, 4, 1) * b.reshape(1, 4, 6)).amax(1), False),
}


def test_a_sum_of_a_product_of_two_broadcast_views_is_a_contraction_in_the_schedule():
    """Rule: the schedule marks a SUM kernel as a Contraction (the matmul form the C and CUDA renderers tile)
    exactly when the graph states a matmul: the MUL of two loads, each broadcast along a kept axis the
    other reads. IR lowering carries the mark (KernelIR.matmul), and explain prints it."""
    from limn.compiler.codegen import lower_schedule
    from limn.compiler.kernel import Contraction

    for name, (make, expected) in CONTRACTIONS.items():
        a, b = Tensor.randn((4, 4)), Tensor.randn((4, 6))
        sched = schedule_of(make(a, b))
        marked = [isinstance(k.form, Contraction) for k in sched.kernels]
        assert any(marked) == expected, f"{name}: Contraction kernels {marked}\n{describe(sched)}"
        program = lower_schedule(sched)
        assert [k.matmul for k in program.kernels] == marked, f"{name}: KernelIR.matmul differs from the form"
    import limn

    assert "(a matmul)" in str(limn.explain(Tensor.randn((4, 4)) @ Tensor.randn((4, 6)))), "explain names the form"
