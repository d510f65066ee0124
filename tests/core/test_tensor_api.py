"""The Tensor API surface against numpy and torch: creation, indexing, iteration, joining and splitting,
lookups and losses composed from gather and scatter, realization and assignment, and laziness itself.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import limn
from limn import Tensor
from limn.graph.ops import Op

TOLERANCE = 1e-5


def close(got: Tensor | None, want: torch.Tensor | np.ndarray, what: str = "", tol: float = TOLERANCE) -> None:
    assert got is not None, f"{what}: limn has no value"
    want_np = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    assert got.shape == want_np.shape, f"{what}: shape {got.shape} != {want_np.shape}"
    np.testing.assert_allclose(got.numpy(), want_np, rtol=tol, atol=tol, err_msg=what)


def both(array: np.ndarray) -> tuple[Tensor, torch.Tensor]:
    """The same leaf in limn and in torch, both requiring grad."""
    return Tensor(array, requires_grad=True), torch.tensor(array, requires_grad=True)


RNG = np.random.default_rng(0)
X34 = RNG.standard_normal((3, 4)).astype(np.float32)
X345 = RNG.standard_normal((3, 4, 5)).astype(np.float32)


def test_the_spec_first_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    example = """
from limn import Tensor

x = Tensor.randn((4, 3), requires_grad=True)
loss = ((x @ Tensor.randn((3, 2))).relu() ** 2).sum()
loss.backward()          # gradients are lazy graphs too
print(x.grad.numpy())    # nothing computes until here
"""
    scope: dict = {}
    exec(example, scope)
    assert capsys.readouterr().out.count("[") == 5  # a (4, 3) array printed: one outer bracket, four rows
    x, loss = scope["x"], scope["loss"]
    assert x.grad.shape == (4, 3)
    assert loss.shape == ()


# ---- creation ----


@pytest.mark.parametrize(
    ("data", "dtype", "shape"),
    [
        ([[1.0, 2.0], [3.0, 4.0]], limn.float32, (2, 2)),  # python floats become float32, as in torch
        ([1, 2, 3], limn.int32, (3,)),
        ([True, False], limn.bool_, (2,)),
        (2.5, limn.float32, ()),
        (7, limn.int32, ()),
        (np.arange(6, dtype=np.float64).reshape(2, 3), limn.float64, (2, 3)),  # numpy keeps its dtype
        (np.ones(4, np.float16), limn.float16, (4,)),
        (np.ones(4, np.int8), limn.int8, (4,)),
        (np.float32(1.5), limn.float32, ()),
    ],
)
def test_tensor_from_data_takes_its_shape_and_dtype(data: object, dtype: limn.DType, shape: tuple) -> None:
    t = Tensor(data)
    assert (t.shape, t.dtype, t.device) == (shape, dtype, "numpy")
    np.testing.assert_array_equal(t.numpy(), np.asarray(data))


def test_tensor_from_numpy_copies_the_data() -> None:
    a = np.array([1.0, 2.0], np.float32)
    t = Tensor(a)
    a[0] = 100.0
    assert t.numpy()[0] == 1.0


def test_tensor_of_a_tensor_on_another_device_is_a_copy_there_as_torch_tensor() -> None:
    t = Tensor([1.0, 2.0]) * 3  # lazy, on numpy
    moved = Tensor(t, device="c")
    assert moved.device == "c" and moved.node.op is Op.BUFFER, "a copy on c, computed now"
    assert moved.tolist() == [3.0, 6.0]
    moved.assign(Tensor([0.0, 0.0], device="c")).realize()
    assert t.tolist() == [3.0, 6.0], "the copy is no alias of the original"


def test_tensor_of_a_tensor_on_its_own_device_shares_its_value() -> None:
    t = Tensor([1.0, 2.0]) * 3
    for same in (Tensor(t), Tensor(t, device="numpy")):
        assert same.node is t.node and same.device == "numpy" and same._ctx is None


def test_tensor_takes_an_explicit_dtype() -> None:
    t = Tensor([1.5, -2.5], dtype="float64")
    assert t.dtype == limn.float64 and t.numpy().dtype == np.float64
    assert Tensor([1, 2], dtype=limn.bfloat16).numpy().tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    ("limn_made", "numpy_made"),
    [
        (lambda: Tensor.zeros((2, 3)), lambda: np.zeros((2, 3), np.float32)),
        (lambda: Tensor.ones(4, dtype="int8"), lambda: np.ones(4, np.int8)),
        (lambda: Tensor.full((2, 2), 7), lambda: np.full((2, 2), 7, np.int32)),
        (lambda: Tensor.full((3,), 0.5), lambda: np.full(3, 0.5, np.float32)),
        (lambda: Tensor.full((2,), True), lambda: np.full(2, True)),
        (lambda: Tensor.arange(5), lambda: np.arange(5, dtype=np.int32)),
        (lambda: Tensor.arange(2, 11, 3), lambda: np.arange(2, 11, 3, dtype=np.int32)),
        (lambda: Tensor.arange(5, 0, -2), lambda: np.arange(5, 0, -2, dtype=np.int32)),
        (lambda: Tensor.arange(0.0, 1.0, 0.25), lambda: np.arange(0.0, 1.0, 0.25, dtype=np.float32)),
        (lambda: Tensor.eye(3), lambda: np.eye(3, dtype=np.float32)),
        (lambda: Tensor.eye(2, 4), lambda: np.eye(2, 4, dtype=np.float32)),
    ],
)
def test_creation_functions_match_numpy(limn_made, numpy_made) -> None:
    got, want = limn_made(), numpy_made()
    assert got.numpy().dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)


def test_manual_seed_makes_rand_and_randn_reproducible() -> None:
    limn.manual_seed(123)
    first = (Tensor.rand((3, 4)).numpy(), Tensor.randn(5).numpy())
    limn.manual_seed(123)
    second = (Tensor.rand((3, 4)).numpy(), Tensor.randn(5).numpy())
    limn.manual_seed(124)
    other = Tensor.rand((3, 4)).numpy()
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert not np.array_equal(first[0], other)


def test_rand_is_uniform_in_zero_one_and_randn_is_standard_normal() -> None:
    limn.manual_seed(0)
    u, n = Tensor.rand(10_000).numpy(), Tensor.randn((100, 100), dtype="float64").numpy()
    assert u.dtype == np.float32 and 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.02
    assert n.dtype == np.float64 and abs(n.mean()) < 0.05 and abs(n.std() - 1.0) < 0.05


def test_creation_with_requires_grad_makes_a_leaf() -> None:
    for t in (Tensor.randn((2, 2), requires_grad=True), Tensor.zeros(3, requires_grad=True)):
        assert t.requires_grad and t._ctx is None
        (t * t).sum().backward()
        assert t.grad is not None


# ---- properties, item, detach ----


def test_shape_dtype_and_device() -> None:
    t = Tensor(np.zeros((2, 3, 4), np.float16))
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.size == 24 and len(t) == 2
    assert t.dtype == limn.float16 and t.device == "numpy"
    assert (t.sum(axis=1)).shape == (2, 4)


def test_item_gives_a_python_scalar_of_the_right_kind() -> None:
    assert Tensor([[2.5]]).item() == 2.5 and isinstance(Tensor([[2.5]]).item(), float)
    assert Tensor(np.int8(-3)).item() == -3 and isinstance(Tensor(np.int8(-3)).item(), int)
    assert Tensor(True).item() is True
    assert (Tensor([1.0, 2.0]).sum()).item() == 3.0


def test_detach_shares_the_value_and_drops_the_history() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    d = y.detach()
    assert not d.requires_grad and d._ctx is None and d.node is y.node
    np.testing.assert_array_equal(d.numpy(), [3.0, 6.0])


def test_realize_returns_the_tensor_holding_a_buffer() -> None:
    t = Tensor([1.0]) + 1
    assert t.realize() is t
    assert t.node.op is limn.graph.ops.Op.BUFFER


def test_realizing_one_tensor_twice_in_a_batch_is_fine() -> None:
    t = Tensor([1.0, 2.0]) * 2
    limn.realize(t, t)
    np.testing.assert_array_equal(t.numpy(), [2.0, 4.0])


# ---- laziness ----


def test_building_ops_runs_nothing_until_bytes_are_asked_for() -> None:
    device = limn.get_device("numpy")
    x = Tensor(X34, requires_grad=True)
    before = device.nodes_run
    loss = ((x @ Tensor(X34).transpose()).softmax(axis=-1) * 2).sum()
    loss.backward()
    assert device.nodes_run == before, "building the graph or the gradient ran the device"
    x.grad.numpy()
    assert device.nodes_run > before


def test_a_realized_value_is_not_computed_again() -> None:
    device = limn.get_device("numpy")
    x = Tensor(X34)
    shared = x.exp() * 2
    later = shared + 1  # holds shared's graph, built before shared was realized
    fresh = x.exp() * 2 + 1
    before = device.nodes_run
    fresh.numpy()
    without_reuse = device.nodes_run - before
    shared.numpy()
    before = device.nodes_run
    later.numpy()
    assert device.nodes_run - before < without_reuse
    np.testing.assert_array_equal(later.numpy(), fresh.numpy())


# ---- assign ----


def test_assigns_realized_together_read_the_values_from_before_any_of_them() -> None:
    """A swap in one realize(): b gets a's old value though a's buffer is written in the same batch."""
    a, b = Tensor([1.0, 2.0]), Tensor([3.0, 4.0])
    old_a = a.detach()  # a's buffer, read at realize time
    a.assign(b)
    b.assign(old_a)
    limn.realize(a, b)
    np.testing.assert_array_equal(a.numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(b.numpy(), [1.0, 2.0])


def test_assign_updates_the_tensor_and_its_buffer_object() -> None:
    a = Tensor([1.0, 2.0])
    buffer = a.node.arg
    a.assign(a * 10 + 1).realize()
    np.testing.assert_array_equal(a.numpy(), [11.0, 21.0])
    assert a.node.arg is buffer, "an assign writes the tensor's own Buffer object (optimizers hold it)"


def test_a_detached_tensor_is_a_value_not_an_alias_unlike_torch() -> None:
    """Named difference from torch: torch's detach() shares storage, so a later in-place write shows
    through it. limn has value semantics (limn.runtime.snapshot): a tensor made before an assign keeps what it saw."""
    a = Tensor([1.0, 2.0])
    alias = a.detach()
    a.assign(a * 10 + 1).realize()
    np.testing.assert_array_equal(alias.numpy(), [1.0, 2.0])


def test_assign_casts_a_value_and_accepts_a_scalar() -> None:
    a = Tensor(np.zeros(3, np.float16))
    a.assign(Tensor([1.5, 2.5, 3.5])).realize()
    assert a.dtype == limn.float16 and a.numpy().tolist() == [1.5, 2.5, 3.5]
    a.assign(0.25).realize()
    assert a.numpy().tolist() == [0.25, 0.25, 0.25]


# ---- indexing and iteration ----

INDICES = {
    "int_and_slice": (0, slice(1, 3)),
    "negative_int": (-1,),
    "negative_slice": (slice(-2, None), slice(None, -1)),
    "ellipsis_last": (Ellipsis, 2),
    "ellipsis_middle": (1, Ellipsis, slice(0, 2)),
    "none": (None, 0, None),
    "none_and_ellipsis": (Ellipsis, None),
    "slice_past_the_end": (slice(1, 10),),
    "empty_slice": (slice(2, 1),),
    "all_ints": (2, 3, 4),
    "bare_int": 1,
}


@pytest.mark.parametrize("name", INDICES)
def test_basic_indexing_matches_numpy(name: str) -> None:
    index = INDICES[name]
    got = Tensor(X345)[index]
    assert got.shape == X345[index].shape
    np.testing.assert_array_equal(got.numpy(), X345[index])


def test_indexing_carries_gradients_as_torch() -> None:
    x, t = both(X345)
    (x[1, :, 2:4] * x[-1, 0:4, None, 1]).sum().backward()
    (t[1, :, 2:4] * t[-1, 0:4, None, 1]).sum().backward()
    close(x.grad, t.grad, "x.grad")


def test_iteration_walks_dim_zero() -> None:
    rows = list(Tensor(X34))
    assert len(rows) == 3
    for got, want in zip(rows, X34):
        np.testing.assert_array_equal(got.numpy(), want)


def test_unpacking_splits_qkv_and_carries_gradients() -> None:
    qkv_np = RNG.standard_normal((3, 2, 4)).astype(np.float32)
    qkv, t = both(qkv_np)
    q, k, v = qkv
    tq, tk, tv = t
    assert q.shape == (2, 4)
    ((q @ k.transpose()).softmax(axis=-1) @ v).sum().backward()
    ((tq @ tk.T).softmax(dim=-1) @ tv).sum().backward()
    close(qkv.grad, t.grad, "qkv.grad")


# ---- joining and splitting ----


def test_cat_matches_torch_with_gradients() -> None:
    a, ta = both(X34)
    b, tb = both(RNG.standard_normal((3, 2)).astype(np.float32))
    out, tout = Tensor.cat([a, b, a], axis=1), torch.cat([ta, tb, ta], dim=1)
    close(out, tout, "cat")
    (out * out.exp()).sum().backward()
    (tout * tout.exp()).sum().backward()
    close(a.grad, ta.grad, "a.grad")
    close(b.grad, tb.grad, "b.grad")


def test_stack_matches_torch() -> None:
    for axis in (0, 1, -1):
        close(
            Tensor.stack([Tensor(X34), Tensor(X34 * 2)], axis),
            torch.stack([torch.tensor(X34), torch.tensor(X34 * 2)], axis),
        )


@pytest.mark.parametrize(("sizes", "axis"), [(2, 1), ([1, 3, 1], 2), (3, 0), (4, -1)])
def test_split_matches_torch(sizes: int | list[int], axis: int) -> None:
    got, want = Tensor(X345).split(sizes, axis), torch.tensor(X345).split(sizes, axis)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        close(g, w, "split piece")


@pytest.mark.parametrize(("chunks", "axis"), [(2, 1), (3, 2), (4, 2), (5, 0)])
def test_chunk_matches_torch(chunks: int, axis: int) -> None:
    got, want = Tensor(X345).chunk(chunks, axis), torch.tensor(X345).chunk(chunks, axis)
    assert [g.shape for g in got] == [tuple(w.shape) for w in want]
    for g, w in zip(got, want):
        close(g, w, "chunk")


# ---- argmax, argmin, comparisons and composed elementwise ops ----


def test_argmax_and_argmin_pick_the_first_occurrence() -> None:
    ties = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 0.0, 0.0], [5.0, 5.0, 5.0, 5.0]], np.float32)
    for axis in (0, 1, None):
        np.testing.assert_array_equal(Tensor(ties).argmax(axis).numpy(), ties.argmax(axis))
        np.testing.assert_array_equal(Tensor(ties).argmin(axis).numpy(), ties.argmin(axis))
    assert Tensor(ties).argmax(1, keepdim=True).shape == (3, 1)
    assert Tensor(ties).argmax().dtype == limn.int32


def test_comparisons_and_logical_ops_match_numpy() -> None:
    a, b = X34, np.round(X34 * 2) / 2
    ta, tb = Tensor(a), Tensor(b)
    for got, want in [
        (ta < tb, a < b),
        (ta <= tb, a <= b),
        (ta > tb, a > b),
        (ta >= tb, a >= b),
        (ta == tb, a == b),
        (ta != tb, a != b),
        ((ta > 0).logical_and(tb > 0), (a > 0) & (b > 0)),
        ((ta > 0).logical_or(tb > 0), (a > 0) | (b > 0)),
        ((ta > 0).logical_not(), a <= 0),
    ]:
        np.testing.assert_array_equal(got.numpy(), want)


def test_maximum_minimum_and_clip_match_torch_with_gradients() -> None:
    a_np = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    b_np = np.array([1.0, 0.0, -0.5, 4.0], np.float32)  # a tie first: torch splits its gradient in half
    a, ta = both(a_np)
    b, tb = both(b_np)
    out = a.maximum(b) * 2 + a.minimum(b) * 3 + a.clip(-1.0, 2.0) * 5
    tout = torch.maximum(ta, tb) * 2 + torch.minimum(ta, tb) * 3 + ta.clamp(-1.0, 2.0) * 5
    close(out, tout, "value")
    out.sum().backward()
    tout.sum().backward()
    close(a.grad, ta.grad, "a.grad")
    close(b.grad, tb.grad, "b.grad")


def test_max_with_ties_shares_the_gradient_evenly_as_torch_amax() -> None:
    x_np = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, -1.0, 4.0]], np.float32)
    x, t = both(x_np)
    (x.max(axis=1) * Tensor([1.0, 2.0, 3.0])).sum().backward()
    (t.amax(dim=1) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    close(x.grad, t.grad, "x.grad")


@pytest.mark.parametrize("op", ["sigmoid", "tanh"])
def test_saturating_activations_keep_finite_gradients_far_out(op: str) -> None:
    """e**-x overflows to inf at x = -100; an exp-based composition must not turn inf * 0 into NaN."""
    x_np = np.array([-100.0, -50.0, -10.0, 0.0, 10.0, 50.0, 100.0], np.float32)
    x, t = both(x_np)
    out, tout = getattr(x, op)(), getattr(t, op)()
    close(out, tout, f"{op}(x)")
    out.sum().backward()
    tout.sum().backward()
    close(x.grad, t.grad, f"d {op}(x) / dx")


def test_pow_matches_torch_for_integer_negative_and_fractional_exponents() -> None:
    x_np = np.array([0.5, 1.5, 2.0], np.float32)
    x, t = both(x_np)
    out = x**3 + x**-2 + x**0.5 + x**1.7 + 2**x
    tout = t**3 + t**-2 + t**0.5 + t**1.7 + 2**t
    close(out, tout, "value")
    out.sum().backward()
    tout.sum().backward()
    close(x.grad, t.grad, "x.grad")


def test_var_and_std_match_torch_with_each_correction() -> None:
    for correction in (0, 1):
        close(
            Tensor(X345).var(axis=(0, 2), correction=correction),
            torch.tensor(X345).var(dim=(0, 2), correction=correction),
        )
        close(
            Tensor(X345).std(axis=1, keepdim=True, correction=correction),
            torch.tensor(X345).std(dim=1, keepdim=True, correction=correction),
        )


# ---- gather, scatter_add and what is composed from them ----


def test_gather_matches_torch_with_gradients() -> None:
    idx = np.array([[0, 2, 1], [2, 2, 0]], np.int32)  # (2, 3) picks along axis 1 of a (3, 4) source
    x, t = both(X34)
    out, tout = x.gather(1, Tensor(idx)), t.gather(1, torch.tensor(idx).long())
    close(out, tout, "gather")
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    close(x.grad, t.grad, "x.grad: repeated indices add up")


def test_scatter_add_matches_torch_with_gradients() -> None:
    idx = np.array([[0, 1, 2, 0], [0, 0, 0, 2]], np.int32)  # collisions on row 0
    base, tbase = both(X34)
    src, tsrc = both(RNG.standard_normal((2, 4)).astype(np.float32))
    out, tout = (
        base.scatter_add(0, Tensor(idx), src),
        tbase.scatter_add(0, torch.tensor(idx).long(), tsrc),
    )
    close(out, tout, "scatter_add")
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    close(base.grad, tbase.grad, "base.grad")
    close(src.grad, tsrc.grad, "src.grad")


def test_one_hot_matches_torch() -> None:
    ids = np.array([[0, 3], [2, 2]], np.int32)
    got = Tensor(ids).one_hot(4)
    want = F.one_hot(torch.tensor(ids).long(), 4).numpy()
    assert got.dtype == limn.int32
    np.testing.assert_array_equal(got.numpy(), want)


def test_embedding_and_its_gradient_match_torch() -> None:
    table_np = RNG.standard_normal((6, 3)).astype(np.float32)
    ids = np.array([[1, 5, 1], [0, 1, 4]], np.int32)  # id 1 three times: its gradient rows add
    table, ttable = both(table_np)
    out, tout = table.embedding(Tensor(ids)), F.embedding(torch.tensor(ids).long(), ttable)
    close(out, tout, "embedding")
    (out * out.tanh()).sum().backward()
    (tout * tout.tanh()).sum().backward()
    close(table.grad, ttable.grad, "table.grad")


CROSS_ENTROPY = [
    (0.0, "mean"),
    (0.0, "sum"),
    (0.0, "none"),
    (0.1, "mean"),
    (0.3, "sum"),
    (0.2, "none"),
]


@pytest.mark.parametrize(("smoothing", "reduction"), CROSS_ENTROPY)
def test_cross_entropy_with_ignore_index_and_label_smoothing_matches_torch(smoothing: float, reduction: str) -> None:
    logits_np = RNG.standard_normal((5, 4)).astype(np.float32)
    target = np.array([0, 3, -100, 2, 1], np.int32)  # -100: torch's default ignore_index
    x, t = both(logits_np)
    loss = x.cross_entropy(Tensor(target), label_smoothing=smoothing, reduction=reduction)
    tloss = F.cross_entropy(t, torch.tensor(target).long(), label_smoothing=smoothing, reduction=reduction)
    close(loss, tloss, "loss")
    (loss * Tensor(np.arange(1, loss.size + 1, dtype=np.float32).reshape(loss.shape))).sum().backward()
    (tloss * torch.arange(1, tloss.numel() + 1, dtype=torch.float32).reshape(tloss.shape)).sum().backward()
    close(x.grad, t.grad, "logits.grad")


def test_cross_entropy_over_extra_dims_with_a_custom_ignore_index_matches_torch() -> None:
    logits_np = RNG.standard_normal((2, 4, 3)).astype(np.float32)  # (N, C, T)
    target = np.array([[1, 7, 3], [0, 2, 7]], np.int32)
    x, t = both(logits_np)
    loss = x.cross_entropy(Tensor(target), ignore_index=7, label_smoothing=0.1)
    tloss = F.cross_entropy(t, torch.tensor(target).long(), ignore_index=7, label_smoothing=0.1)
    close(loss, tloss, "loss")
    loss.backward()
    tloss.backward()
    close(x.grad, t.grad, "logits.grad")


# ---- cat and stack: torch's list form, and the varargs and method forms beside it ----

CAT_FORMS = {
    "Tensor.cat([a, b], 1)": "torch.cat([a, b], 1)",
    "Tensor.cat((a, b), dim=0)": "torch.cat((a, b), dim=0)",
    "Tensor.cat(a, b, dim=1)": "torch.cat([a, b], dim=1)",
    "Tensor.cat(a, b, 1)": "torch.cat([a, b], 1)",
    "a.cat(b)": "torch.cat([a, b])",
    "a.cat(b, b, dim=-1)": "torch.cat([a, b, b], dim=-1)",
    "Tensor.stack([a, b], 2)": "torch.stack([a, b], 2)",
    "Tensor.stack(a, b)": "torch.stack([a, b])",
    "a.stack(b, dim=-1)": "torch.stack([a, b], dim=-1)",
}


@pytest.mark.parametrize("form", CAT_FORMS)
def test_cat_and_stack_take_a_list_varargs_or_the_method_form_as_torchs_list(form: str) -> None:
    a_np, b_np = np.arange(6, dtype=np.float32).reshape(2, 3), -np.arange(6, dtype=np.float32).reshape(2, 3)
    got = eval(form, {"Tensor": Tensor, "a": Tensor(a_np), "b": Tensor(b_np)})
    want = eval(CAT_FORMS[form], {"torch": torch, "a": torch.tensor(a_np), "b": torch.tensor(b_np)})
    np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=form)


def test_cat_of_a_0d_tensor_raises_as_torch() -> None:
    with pytest.raises(RuntimeError, match="position 1 is 0-d"):
        Tensor.cat([Tensor([1.0]), Tensor(2.0)])
    with pytest.raises(TypeError, match="one int dim"):
        Tensor.cat([Tensor([1.0])], 0, 1)


TORCH_MODULE_SPELLINGS = [
    "m.cat([a, a], 1)",
    "m.stack([a, a])",
    "m.zeros(2, 3)",
    "m.ones((2, 3))",
    "m.arange(5)",
    "m.exp(a)",
    "m.where(a > 2, a, 0.0)",
    "m.tril(a)",
    "m.maximum(a, a.T)",
    "m.sum(a, dim=1)",
]


@pytest.mark.parametrize("expr", TORCH_MODULE_SPELLINGS)
def test_torchs_module_level_functions_are_limns_tensor_functions(expr: str) -> None:
    a_np = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    got = eval(expr, {"m": limn, "a": Tensor(a_np)})
    want = eval(expr, {"m": torch, "a": torch.tensor(a_np)})
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=expr)  # exp: an ulp apart


def test_a_module_level_name_limn_lacks_raises_attributeerror_and_modules_still_import() -> None:
    # the names limn's own modules hold (limn.composed.reduce.einsum, limn.composed.indexed.scatter, limn.graph.view,
    # limn.runtime.device) stay modules: their functions are Tensor.einsum, Tensor.scatter, ...
    with pytest.raises(AttributeError, match="no attribute 'no_such_function'"):
        limn.no_such_function  # noqa: B018
    from limn import nn

    assert nn.__name__ == "limn.nn"


@pytest.mark.parametrize(
    "make",
    [lambda x: x * 2.0, lambda x: 1 - x, lambda x: x.gt(0).where(1.0, 0.0), lambda x: x.relu()],
    ids=["x*2", "1-x", "where(x>0, 1, 0)", "relu"],
)
def test_a_python_scalar_operand_is_made_at_the_result_shape_with_no_movement(make, monkeypatch) -> None:
    """A scalar beside a tensor is a CONST made at the tensor's shape, not a 0-d CONST reshaped and expanded
    (the same graph, but each movement cost the frontend about 5 us: relu went from 138 to 61 us)."""
    moved = []
    real = limn.Tensor._movement
    monkeypatch.setattr(limn.Tensor, "_movement", lambda self, kind, arg: moved.append(kind) or real(self, kind, arg))
    x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3) - 2)
    out = make(x)
    assert moved == [], f"movements made: {moved}"
    assert out.shape == (2, 3)
