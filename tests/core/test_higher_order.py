"""Derivatives of derivatives, against torch: backward(create_graph=True) builds a gradient graph that is
itself differentiable. Also the bookkeeping torch users rely on: gradients accumulate across backward
calls, they are lazy graphs until read, and no_grad records nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import limn
from limn import Tensor, autograd

TOLERANCE = 1e-4


def close(got: Tensor, want: torch.Tensor, what: str) -> None:
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=TOLERANCE, atol=TOLERANCE, err_msg=what)


def hvp_limn(fn: Callable, inputs: list[np.ndarray], v: list[np.ndarray]) -> list[Tensor | None]:
    """d/dx [sum_i (d fn / d x_i) . v_i] for every input x, by backward(create_graph=True) twice."""
    xs = [Tensor(a, requires_grad=True) for a in inputs]
    fn(*xs).backward(create_graph=True)
    grads = [x.grad for x in xs]
    for x in xs:
        x.grad = None
    dot = sum(((g * Tensor(w)).sum() for g, w in zip(grads, v)), Tensor(0.0))
    dot.backward()
    return [x.grad for x in xs]


def hvp_torch(fn: Callable, inputs: list[np.ndarray], v: list[np.ndarray]) -> list[torch.Tensor | None]:
    """The same through torch.autograd.grad(..., create_graph=True)."""
    ts = [torch.tensor(a, requires_grad=True) for a in inputs]
    grads = torch.autograd.grad(fn(*ts), ts, create_graph=True)
    dot = sum((g * torch.tensor(w)).sum() for g, w in zip(grads, v))
    return list(torch.autograd.grad(dot, ts, allow_unused=True))


def check_hvp(ours: Callable, theirs: Callable, shapes: list[tuple[int, ...]], positive: bool = False) -> None:
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(0.5, 2.0, s) if positive else rng.standard_normal(s) for s in shapes]
    inputs = [a.astype(np.float32) for a in inputs]
    v = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    for i, (got, want) in enumerate(zip(hvp_limn(ours, inputs, v), hvp_torch(theirs, inputs, v))):
        if want is None:  # torch: this input's second derivative is identically zero
            assert got is None or not got.numpy().any(), f"input {i}: limn has a second derivative, torch none"
        else:
            assert got is not None, f"input {i}: torch has a second derivative, limn none"
            close(got, want, f"Hessian-vector product, input {i}")


# name: (fn in limn, fn in torch, input shapes, whether the inputs must be positive)
ELEMENTWISE = {
    "exp": (lambda x: x.exp().sum(), None, [(3, 4)], False),
    "log": (lambda x: x.log().sum(), None, [(3, 4)], True),
    "sqrt": (lambda x: x.sqrt().sum(), None, [(3, 4)], True),
    "reciprocal": (lambda x: (1 / x).sum(), None, [(3, 4)], True),
    "tanh": (lambda x: x.tanh().sum(), None, [(3, 4)], False),
    "sigmoid": (lambda x: x.sigmoid().sum(), None, [(3, 4)], False),
    "gelu": (lambda x: x.gelu().sum(), lambda x: F.gelu(x).sum(), [(3, 4)], False),
    "gelu_tanh": (lambda x: x.gelu("tanh").sum(), lambda x: F.gelu(x, approximate="tanh").sum(), [(3, 4)], False),
    "integer_pow": (lambda x: (x**3).sum(), None, [(3, 4)], False),
    "fractional_pow": (lambda x: (x**1.5).sum(), None, [(3, 4)], True),
    "product_of_two": (lambda x, y: (x * y * y).sum(), None, [(3, 4), (4,)], False),
    "quotient": (lambda x, y: (x / y).sum(), None, [(3, 4), (3, 1)], True),
    "composed": (lambda x: (x.exp() * x.tanh() + (x * x + 1).log()).sum(), None, [(2, 3)], False),
    # values computed off the graph with a derivative formula carried (limn.composed.math.derivative): the formula is
    # built from the live input, so it differentiates again
    "sin": (lambda x: x.sin().sum(), None, [(3, 4)], False),
    "cos_of_sin": (lambda x: (x.sin() * 3).cos().sum(), None, [(3, 4)], False),
    "tan": (lambda x: (x * 0.5).tan().sum(), None, [(3, 4)], False),
    "atan_asinh_sinh": (lambda x: (x.atan() + x.asinh() + x.sinh()).sum(), None, [(3, 4)], False),
    "log1p_log2_expm1": (lambda x: (x.log1p() + x.log2() + x.expm1()).sum(), None, [(3, 4)], True),
    "atan2": (lambda x, y: x.atan2(y).sum(), lambda x, y: torch.atan2(x, y).sum(), [(3, 4), (4,)], True),
    "hypot_logaddexp": (
        lambda x, y: (x.hypot(y) + x.logaddexp(y)).sum(),
        lambda x, y: (torch.hypot(x, y) + torch.logaddexp(x, y)).sum(),
        [(3, 4), (3, 1)],
        False,
    ),
    "softplus_mish": (
        lambda x: (x.softplus() + x.mish()).sum(),
        lambda x: (F.softplus(x) + F.mish(x)).sum(),
        [(3, 4)],
        False,
    ),
}

REDUCE = {
    "sum_of_squares": (lambda x: (x.sum(axis=1) ** 2).sum(), lambda x: (x.sum(dim=1) ** 2).sum()),
    "mean": (lambda x: (x.mean(axis=0) ** 3).sum(), lambda x: (x.mean(dim=0) ** 3).sum()),
    "var": (lambda x: (x.var(axis=1) ** 2).sum(), lambda x: (x.var(dim=1) ** 2).sum()),
    "max": (lambda x: (x.max(axis=1) ** 3).sum(), lambda x: (x.amax(dim=1) ** 3).sum()),
    "min": (lambda x: (x.min(axis=0) ** 3).sum(), lambda x: (x.amin(dim=0) ** 3).sum()),
    "logsumexp": (lambda x: x.logsumexp(axis=1).sum(), lambda x: torch.logsumexp(x, dim=1).sum()),
    "softmax": (lambda x: (x.softmax(axis=1) ** 2).sum(), lambda x: (x.softmax(dim=1) ** 2).sum()),
    "log_softmax": (
        lambda x: (x.log_softmax(axis=0) * x).sum(),
        lambda x: (x.log_softmax(dim=0) * x).sum(),
    ),
}


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_second_derivative_of_elementwise_graphs_matches_torch(name: str) -> None:
    ours, theirs, shapes, positive = ELEMENTWISE[name]
    check_hvp(ours, theirs or ours, shapes, positive)


@pytest.mark.parametrize("name", REDUCE)
def test_second_derivative_of_reduce_graphs_matches_torch(name: str) -> None:
    ours, theirs = REDUCE[name]
    check_hvp(ours, theirs, [(3, 5)])


def test_second_derivative_of_matmul_graphs_matches_torch() -> None:
    """Cross terms too: d/dA of (d/dB f) . v for f = sum(tanh(A @ B) ** 2)."""
    fn = lambda a, b: ((a @ b).tanh() ** 2).sum()
    check_hvp(fn, fn, [(3, 4), (4, 2)])


def test_second_derivative_of_batched_matmul_matches_torch() -> None:
    fn = lambda a, b: ((a @ b) ** 2).sum()
    check_hvp(fn, fn, [(2, 3, 4), (4, 5)])


def test_second_derivative_of_cross_entropy_matches_torch() -> None:
    target = np.array([2, 0, 1], np.int32)
    ours = lambda x: x.cross_entropy(Tensor(target), label_smoothing=0.1)
    theirs = lambda x: F.cross_entropy(x, torch.tensor(target).long(), label_smoothing=0.1)
    check_hvp(ours, theirs, [(3, 4)])


def test_third_derivative_matches_the_formula() -> None:
    """Any order: d3/dx3 sum(x**4) = 24 x, by three nested backward calls."""
    x_np = np.array([0.5, -1.0, 2.0], np.float32)
    x = Tensor(x_np, requires_grad=True)
    (x**4).sum().backward(create_graph=True)  # 4 x**3
    g1, x.grad = x.grad, None
    g1.sum().backward(create_graph=True)  # 12 x**2
    g2, x.grad = x.grad, None
    g2.sum().backward()  # 24 x
    np.testing.assert_allclose(x.grad.numpy(), 24 * x_np, rtol=1e-5)


def test_hessian_vector_product_of_a_two_layer_tanh_mlp_matches_torch() -> None:
    rng = np.random.default_rng(2)
    data = rng.standard_normal((6, 3)).astype(np.float32)
    target = rng.standard_normal((6, 2)).astype(np.float32)
    shapes = [(3, 4), (4,), (4, 2), (2,)]
    params = [(rng.standard_normal(s) * 0.7).astype(np.float32) for s in shapes]
    v = [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def mlp_loss(w1, b1, w2, b2, x, y):
        hidden = (x @ w1 + b1).tanh()  # (6, 3) -> (6, 4)
        return ((hidden @ w2 + b2 - y) ** 2).mean()  # (6, 4) -> (6, 2) -> ()

    ours = hvp_limn(lambda *p: mlp_loss(*p, Tensor(data), Tensor(target)), params, v)
    theirs = hvp_torch(lambda *p: mlp_loss(*p, torch.tensor(data), torch.tensor(target)), params, v)
    for name, got, want in zip(["w1", "b1", "w2", "b2"], ours, theirs):
        close(got, want, f"Hessian-vector product for {name}")


# ---- gradient bookkeeping ----


def test_gradients_accumulate_across_backward_calls_as_torch() -> None:
    x_np = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    x, t = Tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    (x * x).sum().backward()
    (x.exp()).sum().backward()
    (t * t).sum().backward()
    (t.exp()).sum().backward()
    close(x.grad, t.grad, "x.grad after two backward calls")


def test_a_shared_leaf_sums_its_gradients_within_one_backward() -> None:
    x_np = np.array([1.0, 2.0, 3.0], np.float32)
    x, t = Tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    (x * x + x.exp() * x).sum().backward()
    (t * t + t.exp() * t).sum().backward()
    close(x.grad, t.grad, "x.grad")


def test_setting_grad_to_none_starts_accumulation_over() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    x.grad = None
    (x * 5).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [5.0, 5.0])


@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
def test_create_graph_accumulates_first_and_second_derivatives_as_torch() -> None:
    """Two backward calls on one leaf with create_graph: x.grad holds df/dx + d(df/dx . v)/dx, as in torch."""
    x_np, v_np = np.array([0.3, -1.2, 2.0], np.float32), np.array([1.0, 2.0, -1.0], np.float32)
    x, t = Tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    (x**3).sum().backward(create_graph=True)
    (x.grad * Tensor(v_np)).sum().backward()
    (t**3).sum().backward(create_graph=True)
    (t.grad * torch.tensor(v_np)).sum().backward()
    close(x.grad, t.grad, "x.grad")


def test_gradients_are_lazy_until_read() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.grad.node.op is not limn.graph.ops.Op.BUFFER, "backward() computed the gradient eagerly"
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])


def test_only_create_graph_makes_the_gradient_differentiable() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert not x.grad.requires_grad
    y = Tensor([1.0, 2.0], requires_grad=True)
    (y * y).sum().backward(create_graph=True)
    assert y.grad.requires_grad


def test_backward_takes_an_explicit_gradient_for_a_non_scalar() -> None:
    x_np, g_np = (
        np.array([[1.0, 2.0], [3.0, 4.0]], np.float32),
        np.array([[1.0, 0.5], [-1.0, 2.0]], np.float32),
    )
    x, t = Tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    (x * x).backward(Tensor(g_np))
    (t * t * torch.tensor(g_np)).sum().backward()  # torch's own gradient= path imports sympy: 2 seconds
    close(x.grad, t.grad, "x.grad")


def test_no_grad_records_nothing() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    with limn.no_grad():
        y = x * 2
        assert not limn.is_grad_enabled()
    assert limn.is_grad_enabled()
    assert not y.requires_grad and y._ctx is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


def test_no_grad_works_as_a_decorator_and_nests_with_enable_grad() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)

    @limn.no_grad()
    def double(t: Tensor) -> Tensor:
        with limn.enable_grad():
            inner = t * 3
        return t * 2, inner

    outer, inner = double(x)
    assert not outer.requires_grad
    assert inner.requires_grad
    assert limn.is_grad_enabled()


def test_no_grad_restores_recording_after_an_exception() -> None:
    with pytest.raises(ZeroDivisionError):
        with limn.no_grad():
            1 / 0  # noqa: B018
    assert limn.is_grad_enabled()


def test_detach_cuts_the_graph() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x.detach() * x).sum().backward()  # only the second factor carries a gradient
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0])


# ---- limn.autograd.grad, as torch.autograd.grad ----


def test_autograd_grad_returns_the_gradients_of_leaves_and_intermediates_and_touches_no_grad() -> None:
    x_np = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], np.float32)
    x, tx = Tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    h, th = x.tanh(), tx.tanh()
    out, tout = [(h * x).sum(0), h.exp().mean()], [(th * tx).sum(0), th.exp().mean()]
    weight = np.array([1.0, -2.0, 0.5], np.float32)
    ours = autograd.grad(out, [x, h], [Tensor(weight), None])
    theirs = torch.autograd.grad(tout, [tx, th], [torch.tensor(weight), None])
    for got, want in zip(ours, theirs):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)
    assert x.grad is None, "grad() returns the gradients; it adds into no .grad"


def test_autograd_grad_with_create_graph_differentiates_again_as_a_gradient_penalty() -> None:
    x_np = np.array([0.3, -1.2, 0.8], np.float32)
    x, tx = Tensor(x_np, requires_grad=True), torch.tensor(x_np, requires_grad=True)
    (g,) = autograd.grad((x.sin() * x).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad((tx.sin() * tx).sum(), tx, create_graph=True)
    ((g**2).sum()).backward()
    ((tg**2).sum()).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)


def test_autograd_grad_of_an_unreached_input_raises_unless_allow_unused() -> None:
    x, y = Tensor([1.0], requires_grad=True), Tensor([2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused"):
        autograd.grad((x * 3).sum(), [x, y])
    gx, gy = autograd.grad((x * 3).sum(), [x, y], allow_unused=True)
    assert gx.tolist() == [3.0] and gy is None
