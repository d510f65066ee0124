"""Value semantics for assign: a value built before an assign computes what it saw when it was built.

The oracle is what an eager framework computes: torch, or the value read before the assign. Each rule
runs on the numpy and the c device, over each kind of reader: an elementwise graph, a view, a reduce, a
gradient built by backward(), and the readers of a tensor that load_into writes.
"""

import numpy as np
import pytest
import torch

import limn
import limn.nn as nn
import limn.optim as optim
from limn import Tensor, serialize

DEVICES = ["numpy", "c"]


@pytest.fixture(params=DEVICES)
def device(request):
    limn.set_device(request.param)
    return request.param


W = np.array([1.0, 2.0], np.float32)

READERS = {
    "elementwise": (lambda w: w * 2, lambda w: w * 2),
    "reshape view": (lambda w: w.reshape(2, 1), lambda w: w.reshape(2, 1)),
    "permuted view": (lambda w: w.reshape(1, 2).T, lambda w: w.reshape(1, 2).T),
    "reduce": (lambda w: w.sum(), lambda w: w.sum()),
    "detach": (lambda w: w.detach(), lambda w: w.copy()),
}


@pytest.mark.parametrize("reader", READERS)
def test_a_reader_built_before_an_assign_computes_the_old_value(device, reader):
    build, oracle = READERS[reader]
    w = Tensor(W).realize()
    y = build(w)
    w.assign(Tensor([0.0, 0.0])).realize()
    np.testing.assert_array_equal(
        y.numpy(), oracle(W), err_msg=f"y = {reader} of w; w.assign(0).realize(); y.numpy() saw the assign"
    )
    np.testing.assert_array_equal(w.numpy(), [0.0, 0.0], err_msg="the assigned tensor reads its new value")


def test_an_assign_pending_beside_a_reader_leaves_the_reader_the_old_value(device):
    w = Tensor(W).realize()
    y = w * 2
    w.assign(w + 10)
    limn.realize(w)  # y is not in this run, it reads w later
    np.testing.assert_array_equal(y.numpy(), W * 2, err_msg="y = w * 2 built before w.assign(w + 10)")
    np.testing.assert_array_equal(w.numpy(), W + 10)


def test_a_chain_of_assigns_leaves_each_reader_its_own_version(device):
    w = Tensor(W).realize()
    readers = []
    for _ in range(4):
        readers.append(w * 1)
        w.assign(w + 1).realize()
    for k, r in enumerate(readers):
        np.testing.assert_array_equal(r.numpy(), W + k, err_msg=f"reader {k}, built after {k} assigns of w + 1")


def test_the_assigned_tensor_keeps_its_buffer_object(device):
    w = Tensor(W).realize()
    buffer = w.node.arg
    keep = w * 1  # a live reader makes the assign fork
    w.assign(w * 3).realize()
    assert w.node.arg is buffer, "optimizers, load_into and capture hold the Buffer object: it must stay"
    np.testing.assert_array_equal(buffer.numpy(), W * 3)
    np.testing.assert_array_equal(keep.numpy(), W)


def test_a_run_that_fails_leaves_the_assigned_buffer_untouched(device):
    w = Tensor(W).realize()
    y = w * 2
    bad = Tensor(np.array([[0], [5]], np.int32))  # index 5 is out of range for 2 rows
    w.assign(w + Tensor([[1.0], [2.0]]).gather(0, bad).reshape(2))
    with pytest.raises(IndexError):
        w.realize()
    w.node = w.node.srcs[0]  # drop the failed assign; the tensor still names its buffer
    np.testing.assert_array_equal(w.numpy(), W, err_msg="a failed assign wrote into its target")
    np.testing.assert_array_equal(y.numpy(), W * 2)


def test_two_assigns_into_one_buffer_in_one_run_are_refused(device):
    w = Tensor(W).realize()
    alias = w.detach()
    w.assign(Tensor([1.0, 1.0]))
    alias.assign(Tensor([2.0, 2.0]))
    with pytest.raises(ValueError, match="two assigns write one float32\\[2\\] buffer"):
        limn.realize(w, alias)


# ---- the readers a training loop makes: gradients, the loss, and checkpoints ----


def torch_loss_and_grad(w0: np.ndarray, x: np.ndarray) -> tuple[float, np.ndarray]:
    w = torch.tensor(w0, requires_grad=True)
    loss = (torch.tensor(x) @ w).tanh().sum()
    loss.backward()
    return loss.item(), w.grad.numpy()


X = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
W0 = np.random.default_rng(1).standard_normal((3, 2)).astype(np.float32)


def test_the_loss_read_after_the_step_is_the_loss_before_it(device):
    w = Tensor(W0.copy(), requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    loss = (Tensor(X) @ w).tanh().sum()
    loss.backward()
    opt.step()  # the loss is not passed to step(): it is read afterwards, as torch code does
    expected, grad = torch_loss_and_grad(W0, X)
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-5, err_msg="loss.item() after opt.step()")
    np.testing.assert_allclose(w.numpy(), W0 - 0.5 * grad, rtol=1e-5, atol=1e-6)


def test_a_gradient_built_before_the_step_and_read_after_it_is_the_old_gradient(device):
    w = Tensor(W0.copy(), requires_grad=True)
    opt = optim.SGD([w], lr=0.5)
    (Tensor(X) @ w).tanh().sum().backward()
    grad = w.grad  # held by the user; step() drops w.grad
    opt.step()
    _, expected = torch_loss_and_grad(W0, X)
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-5, atol=1e-6, err_msg="w.grad read after the step")


def test_an_activation_read_after_the_step_is_the_one_the_step_used(device):
    w = Tensor(W0.copy(), requires_grad=True)
    opt = optim.AdamW([w], lr=0.1)
    hidden = Tensor(X) @ w
    hidden.tanh().sum().backward()
    opt.step()
    np.testing.assert_allclose(hidden.numpy(), X @ W0, rtol=1e-5, atol=1e-6)


def test_load_into_leaves_readers_built_before_it_the_old_value(device, tmp_path):
    path = tmp_path / "w.safetensors"
    serialize.save(path, {"w": Tensor(np.full(2, 7.0, np.float32))})
    w = Tensor(W).realize()
    y = w * 2
    serialize.load_into(path, {"w": w})
    np.testing.assert_array_equal(y.numpy(), W * 2, err_msg="y = w * 2 built before load_into")
    np.testing.assert_array_equal(w.numpy(), [7.0, 7.0])


def test_load_into_a_pending_tensor_leaves_its_readers_the_old_value(device, tmp_path):
    path = tmp_path / "t.safetensors"
    serialize.save(path, {"t": Tensor(np.full(2, 7.0, np.float32))})
    t = Tensor(W) + 1  # pending: load_into realizes it first, then writes its buffer
    y = t * 2
    serialize.load_into(path, {"t": t})
    np.testing.assert_array_equal(y.numpy(), (W + 1) * 2, err_msg="y = t * 2 built before load_into(t)")
    np.testing.assert_array_equal(t.numpy(), [7.0, 7.0])


def test_a_model_trains_as_in_torch_while_the_loop_keeps_its_losses(device):
    """The loop torch users write: the loss is read after the step, every step."""
    limn.manual_seed(0)
    layer = nn.Linear(3, 2)
    ref = torch.nn.Linear(3, 2)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(layer.weight.numpy()))
        ref.bias.copy_(torch.tensor(layer.bias.numpy()))
    opt, ref_opt = optim.SGD(nn.parameters(layer), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(3):
        loss = (layer(Tensor(X)) ** 2).mean()
        loss.backward()
        opt.step()
        ref_loss = (ref(torch.tensor(X)) ** 2).mean()
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        np.testing.assert_allclose(loss.item(), ref_loss.item(), rtol=1e-5, err_msg=f"loss of step {step}")


def test_a_reader_built_between_captured_replays_keeps_what_it_saw(device):
    from limn.capture import capture

    w = Tensor(W).realize()

    def step(x):
        w.assign(w * 2 + x)
        return (w * 1).sum()

    captured = capture(step)
    captured(Tensor([1.0, 1.0]))  # recorded: w = [3, 5]
    seen = w * 1  # built between calls, e.g. an average of the weights
    captured(Tensor([1.0, 1.0]))  # replayed: w = [7, 11]
    np.testing.assert_array_equal(seen.numpy(), [3.0, 5.0], err_msg="a reader built before a replayed assign")
    np.testing.assert_array_equal(w.numpy(), [7.0, 11.0], err_msg="the tensor a replay assigns reads its new value")
    assert captured.replays == 1


def test_a_value_built_from_optimizer_state_before_a_step_raises_instead_of_reading_the_new_state(device):
    """Optimizer state is written in place (nothing outside the optimizer reads it), so a value built
    from its old bytes cannot be computed after the step: it raises, where torch would raise too for a
    saved tensor modified in place, rather than reading the new state."""
    from limn.runtime.snapshot import StaleReadError

    w = Tensor(W0.copy(), requires_grad=True)
    opt = optim.AdamW([w], lr=0.1)
    exp_avg = opt.state_dict()["0.exp_avg"]
    early = exp_avg * 1  # built before the step
    (Tensor(X) @ w).tanh().sum().backward()
    opt.step()
    with pytest.raises(StaleReadError, match=r"float32\[3, 2\] buffer that an assign then overwrote in place"):
        early.numpy()
    assert np.abs(exp_avg.numpy()).sum() > 0, "the state itself reads its new value"


def test_optimizer_state_read_after_the_step_is_the_state_torch_has(device):
    w = Tensor(W0.copy(), requires_grad=True)
    opt = optim.AdamW([w], lr=0.1, weight_decay=0.0)
    (Tensor(X) @ w).tanh().sum().backward()
    opt.step()
    ref = torch.tensor(W0, requires_grad=True)
    ref_opt = torch.optim.AdamW([ref], lr=0.1, weight_decay=0.0)
    (torch.tensor(X) @ ref).tanh().sum().backward()
    ref_opt.step()
    state = opt.state_dict()
    np.testing.assert_allclose(state["0.exp_avg"].numpy(), ref_opt.state[ref]["exp_avg"].numpy(), rtol=1e-5)
    np.testing.assert_allclose(state["0.exp_avg_sq"].numpy(), ref_opt.state[ref]["exp_avg_sq"].numpy(), rtol=1e-5)


def test_a_refused_stale_read_in_an_assigning_run_leaves_the_assigned_buffers_as_they_were(device):
    from limn.runtime.snapshot import StaleReadError

    w = Tensor(W0.copy(), requires_grad=True)
    opt = optim.AdamW([w], lr=0.1)
    early = opt.state_dict()["0.exp_avg"] * 1
    (Tensor(X) @ w).tanh().sum().backward()
    opt.step()
    p = Tensor(W).realize()
    p.assign(p + early.sum())  # reads the overwritten state: refused before anything runs
    with pytest.raises(StaleReadError):
        p.realize()
    p.node = p.node.srcs[0]
    np.testing.assert_array_equal(p.numpy(), W, err_msg="a refused run changed the buffer it would assign")
