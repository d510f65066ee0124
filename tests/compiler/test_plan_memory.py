"""A plan's intermediates share buffers where their lives do not meet (jit.Plan.owners), checked on the c device:
- slots sharing a buffer have one dtype and shape, and no kernel touches two of them (nothing is read after
  another value overwrote it, no kernel reads and writes one buffer under two names);
- a chain of same-shape intermediates needs fewer buffers than it has slots;
- the values are the numpy device's, and an MLP training step's plan (forward, GELU, backward) keeps the rules."""

from __future__ import annotations

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.runtime.device import get_device


@pytest.fixture
def c_device():
    limn.set_device("c")
    yield get_device("c")
    limn.set_device("numpy")


def chain(x: Tensor) -> Tensor:
    y = x
    for _ in range(6):  # each round stores a (4, 1) maximum and a (4, 6) value two kernels read
        y = (y - y.max(axis=1, keepdim=True)).exp() * 2
    return y.sum()


def check_owners(plan) -> None:
    slots = plan.schedule.slots
    by_owner: dict[int, list[int]] = {}
    for slot, owner in plan.owners.items():
        by_owner.setdefault(owner, []).append(slot)
        assert (slots[slot].dtype, tuple(slots[slot].shape)) == (slots[owner].dtype, tuple(slots[owner].shape))
    for i, kernel in enumerate(plan.program.kernels):
        touched = {b.slot for b in kernel.inputs + kernel.outputs if b.slot in plan.owners}
        owners = [plan.owners[s] for s in touched]
        assert len(owners) == len(set(owners)), f"kernel {i} touches two slots of one buffer: {sorted(touched)}"
    for owner, members in by_owner.items():  # lives of one buffer's slots do not meet
        lives = []
        for slot in members:
            used = [i for i, k in enumerate(plan.program.kernels) if slot in {b.slot for b in k.inputs + k.outputs}]
            lives.append((min(used), max(used)))
        lives.sort()
        assert all(a[1] < b[0] for a, b in zip(lives, lives[1:])), f"buffer of slot {owner}: lives {lives} meet"


def test_same_shape_intermediates_share_buffers_whose_lives_do_not_meet(c_device):
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    out = chain(Tensor(x))
    plan, _ = c_device.plan([out.node])
    check_owners(plan)
    assert len(set(plan.owners.values())) < len(plan.owners), f"no buffer shared among {len(plan.owners)} slots"
    got = out.numpy()
    limn.set_device("numpy")
    np.testing.assert_allclose(got, chain(Tensor(x)).numpy(), rtol=1e-5)


def test_a_training_steps_plan_shares_buffers_safely(c_device):
    from limn import nn

    model = [nn.Linear(16, 64), nn.Linear(64, 64), nn.Linear(64, 1)]
    x = Tensor(np.random.default_rng(1).standard_normal((32, 16)).astype(np.float32))
    h = x
    for layer in model[:-1]:
        h = layer(h).gelu()
    loss = (model[-1](h) ** 2).mean()
    loss.backward()
    grads = [p.grad for p in nn.parameters(model)]
    plan, _ = c_device.plan([loss.node, *(g.node for g in grads)])
    check_owners(plan)
