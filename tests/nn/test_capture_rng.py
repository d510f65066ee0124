"""Random numbers inside a limn.capture'd step: the generator's counter is device state the step advances,
so each replay draws fresh numbers, and from one seed the captured loop draws exactly what the uncaptured
loop draws. The oracle is the uncaptured loop itself, on the same device (bit for bit).
"""

import numpy as np

import limn
import limn.nn as nn
import limn.optim as optim
from limn import Tensor
from limn.capture import capture

_rng = np.random.default_rng(8)
XS = _rng.standard_normal((5, 16, 6)).astype(np.float32)
YS = _rng.standard_normal((5, 16, 3)).astype(np.float32)


class DropoutMLP:
    def __init__(self):
        self.fc1 = nn.Linear(6, 12)
        self.fc2 = nn.Linear(12, 3)

    def __call__(self, x):
        h = self.fc1(x).relu().dropout(0.5)  # (B, 12), half of it dropped
        return self.fc2(h)


def run(captured, steps=5):
    """(loss, hidden mask) per step of a seeded dropout training loop."""
    limn.manual_seed(0)
    model = DropoutMLP()
    opt = optim.AdamW(nn.parameters(model), lr=0.01)
    probe = Tensor(np.ones((4, 12), np.float32))

    def step(x, y):
        loss = nn.mse_loss(model(x), y)
        loss.backward()
        opt.step(loss)
        return loss, probe.dropout(0.25)  # a second draw in the step: its mask, to compare

    step = capture(step, verify=1) if captured else step
    out = []
    for s in range(steps):
        loss, mask = step(Tensor(XS[s]), Tensor(YS[s]))
        out.append((loss.numpy(), mask.numpy()))
    return out, step


def test_a_captured_dropout_step_draws_fresh_masks_and_the_uncaptured_loops_numbers(device):
    eager, _ = run(captured=False)
    replayed, step = run(captured=True)
    assert step.replays == 3  # call 1 records, call 2 records again (the draws' index limbs are host data)
    for s, ((loss, mask), (loss_ref, mask_ref)) in enumerate(zip(replayed, eager)):
        np.testing.assert_array_equal(mask, mask_ref, err_msg=f"mask of step {s + 1}")
        np.testing.assert_array_equal(loss, loss_ref, err_msg=f"loss of step {s + 1}")
    masks = [mask for _, mask in replayed]
    assert all(not np.array_equal(masks[i], masks[j]) for i in range(5) for j in range(i))


def test_reseeding_between_replays_restarts_the_stream_the_recording_reads(device):
    def draw(x):
        return x * Tensor.rand(x.shape)

    step = capture(draw)
    x = Tensor(np.ones(8, np.float32))
    limn.manual_seed(3)
    first = [step(x).numpy() for _ in range(3)]
    limn.manual_seed(3)
    again = [step(x).numpy() for _ in range(3)]
    assert step.replays == 4
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


def test_a_lazy_draw_left_pending_before_the_capture_does_not_leak_into_the_recording(device):
    def draw(x):
        return x * Tensor.rand(x.shape)

    x = Tensor(np.ones(8, np.float32))
    limn.manual_seed(4)
    Tensor.ones(3).dropout(0.5)  # a lazy mask, never realized: the counter's advance is pending
    eager = [draw(x).numpy() for _ in range(3)]
    limn.manual_seed(4)
    Tensor.ones(3).dropout(0.5)
    step = capture(draw)
    for expected in eager:
        np.testing.assert_array_equal(step(x).numpy(), expected)


ATTENTION = [_rng.standard_normal((2, 2, 9, 8)).astype(np.float32) for _ in range(3)]


def _attention_loop(captured: bool, steps: int = 4):
    """A step of fused attention with dropout and its backward (the kernels draw the mask in the forward and
    again in both backward passes, from a counter the step advances): per step, O and dQ."""
    limn.manual_seed(1)
    q, k, v = (Tensor(a, requires_grad=True) for a in ATTENTION)

    def step():
        q.grad = k.grad = v.grad = None
        out = Tensor.scaled_dot_product_attention(q, k, v, causal=True, dropout_p=0.3)
        out.sum().backward()
        return out, q.grad

    step = capture(step) if captured else step
    return [[t.numpy() for t in step()] for _ in range(steps)]


def test_a_captured_attention_dropout_step_draws_fresh_masks_and_the_uncaptured_loops_numbers(device):
    eager, replayed = _attention_loop(captured=False), _attention_loop(captured=True)
    for s, (got, want) in enumerate(zip(replayed, eager)):
        for what, g, w in zip(("O", "dQ"), got, want):
            np.testing.assert_array_equal(g, w, err_msg=f"{what} of step {s + 1}")
    outs = [o for o, _ in replayed]
    assert all(not np.array_equal(outs[i], outs[j]) for i in range(4) for j in range(i))
