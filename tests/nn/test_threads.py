"""Threads: graphs run from several threads at once give what each gives alone.

The oracle is the same work run single-threaded. Threads running graphs of one structure share one
cached plan, so its intermediate buffers must be per thread; grad mode is per thread, as in torch.
"""

import threading

import numpy as np
import pytest

import limn
import limn.nn as nn
from limn import Tensor, no_grad

THREADS, ROUNDS = 4, 6


def forward_backward(model: nn.Linear, x: np.ndarray) -> list[np.ndarray]:
    w = Tensor(model.weight.numpy(), requires_grad=True)
    b = Tensor(model.bias.numpy(), requires_grad=True)
    h = (Tensor(x) @ w.T + b).tanh()  # (B, IN) -> (B, OUT)
    loss = (h * h).mean()
    loss.backward()
    return [loss.numpy(), w.grad.numpy(), b.grad.numpy()]


def run_in_threads(work, inputs: list) -> list:
    results: list = [None] * len(inputs)
    errors: list = []
    barrier = threading.Barrier(len(inputs))

    def body(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(inputs[i])
        except Exception as e:  # reported below, with the thread that raised
            errors.append((i, e))

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, f"threads raised: {errors}"
    return results


@pytest.mark.parametrize("device", ["numpy", "c"])
def test_four_threads_of_forward_and_backward_match_the_single_threaded_run(device):
    limn.set_device(device)
    limn.manual_seed(0)
    model = nn.Linear(16, 8)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((32, 16)).astype(np.float32) for _ in range(THREADS * ROUNDS)]
    expected = [forward_backward(model, x) for x in inputs]

    def rounds(first: int) -> list:
        return [forward_backward(model, inputs[first + THREADS * r]) for r in range(ROUNDS)]

    got = run_in_threads(rounds, list(range(THREADS)))
    wrong = []
    for first, per_round in enumerate(got):
        for r, values in enumerate(per_round):
            k = first + THREADS * r
            for name, a, b in zip(("loss", "w.grad", "b.grad"), values, expected[k]):
                if not np.array_equal(a, b):
                    wrong.append(f"input {k} (thread {first}, round {r}): {name}")
    assert not wrong, f"{len(wrong)} results differ from the single-threaded run:\n" + "\n".join(wrong)


def test_no_grad_in_one_thread_leaves_another_threads_graph_alone():
    inside = threading.Event()
    done = threading.Event()

    def hold_no_grad() -> None:
        with no_grad():
            inside.set()
            done.wait(timeout=10)

    other = threading.Thread(target=hold_no_grad)
    other.start()
    try:
        inside.wait(timeout=10)
        assert limn.is_grad_enabled(), "grad mode is per thread: another thread's no_grad turned it off here"
        x = Tensor([1.0, 2.0], requires_grad=True)
        (x * x).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    finally:
        done.set()
        other.join()


def test_a_new_thread_starts_with_grad_on_even_inside_no_grad():
    seen = []
    with no_grad():
        t = threading.Thread(target=lambda: seen.append(limn.is_grad_enabled()))
        t.start()
        t.join()
        assert not limn.is_grad_enabled()
    assert seen == [True], "a thread's grad mode starts on, as in torch"


def test_enable_grad_as_a_decorator_turns_grad_on():
    @limn.enable_grad()
    def inner() -> bool:
        return limn.is_grad_enabled()

    with no_grad():
        assert inner(), "enable_grad() used as a decorator ran its function with grad off"
