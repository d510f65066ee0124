"""The plan index (limn.compiler.plan_index): a graph structure one device planned is loaded, not scheduled or
lowered, by a device of a later process (here: a fresh device over the same cache folder), and computes the same
bits. The oracle is the first device's result and the stats; an entry that does not verify is planned again with a
warning and replaced, as is a folder in its slot; another limn's code and LIMN_DEBUG=2 plan anew; a program too
deep to pickle is not kept."""

from __future__ import annotations

import io
import pickle
import warnings

import numpy as np
import pytest
from ir_interpreter import IRInterpreter

import limn
import limn.compiler.jit
from limn import Tensor
from limn.compiler import cache_files, plan_index
from limn.compiler.cache_files import KernelCacheWarning
from limn.graph.ops import Node
from limn.runtime.device import Buffer


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LIMN_CACHE_DIR", str(tmp_path))
    return tmp_path


def step(x: Tensor, w: Tensor) -> Tensor:
    return ((x @ w).relu() * 0.5 - 0.25).softmax(-1).sum(0)


X = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
W = np.random.default_rng(1).standard_normal((5, 7)).astype(np.float32)


def fresh(label: str) -> IRInterpreter:
    """A new device (`label` says which in the test), its plan and program caches empty: what a later process
    starts with. Each is registered as "ir", the name its buffers carry, replacing the one before."""
    device = IRInterpreter()
    limn.register_device("ir", device)
    limn.set_device("ir")
    return device


def _refuse(*args):
    raise AssertionError("a plan the index holds was scheduled or lowered again")


def test_a_later_device_loads_the_plan_and_computes_the_same_bits(folder, monkeypatch, capsys):
    fresh("ir_first")
    first = step(Tensor(X), Tensor(W)).numpy()
    assert list(folder.glob("plans/*/*.plan")), "the plan was kept"
    monkeypatch.setattr(limn.compiler.jit, "schedule", _refuse)
    monkeypatch.setattr(limn.compiler.jit, "lower_schedule", _refuse)
    monkeypatch.setenv("LIMN_DEBUG", "1")
    device = fresh("ir_later")
    again = step(Tensor(X), Tensor(W)).numpy()
    assert again.tobytes() == first.tobytes()
    assert device.stats.plans_built == 1
    assert "(from the plan index)" in capsys.readouterr().err


class _NoGraph(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, (Node, Buffer, np.ndarray)):
            raise TypeError(f"a {type(obj).__name__} in a kept program")
        return None


def test_a_kept_program_holds_no_node_buffer_or_array(folder):
    """No tensor's bytes reach the disk: the program is the schedule's slots and views and the loop nests."""
    device = fresh("ir")
    step(Tensor(X), Tensor(W)).numpy()
    for plan in device.plans.values():
        _NoGraph(io.BytesIO()).dump(plan.program)


def test_an_entry_that_does_not_verify_is_planned_again_and_replaced(folder):
    fresh("ir_first")
    first = step(Tensor(X), Tensor(W)).numpy()
    (entry,) = folder.glob("plans/*/*.plan")
    data = bytearray(entry.read_bytes())
    data[-10] ^= 0xFF  # a bit flipped in the pickle: its checksum no longer matches
    entry.write_bytes(bytes(data))
    fresh("ir_later")
    with pytest.warns(KernelCacheWarning, match=r"plan index's entry .* does not verify"):
        again = step(Tensor(X), Tensor(W)).numpy()
    assert again.tobytes() == first.tobytes()
    fresh("ir_third")
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelCacheWarning)
        step(Tensor(X), Tensor(W)).numpy()  # the replaced entry verifies


def test_a_folder_in_the_slot_is_replaced(folder):
    fresh("ir_first")
    step(Tensor(X), Tensor(W)).numpy()
    (key_entry,) = folder.glob("plans/*/*.plan")
    key_entry.unlink()
    key_entry.mkdir()  # a folder where the entry goes: a miss, then the folder is removed for the entry
    fresh("ir_later")
    step(Tensor(X), Tensor(W)).numpy()
    assert key_entry.is_file()


def test_another_limns_code_plans_anew(folder, monkeypatch):
    fresh("ir_first")
    step(Tensor(X), Tensor(W)).numpy()
    monkeypatch.setattr(cache_files, "code_fingerprint", lambda folders: "another limn")
    device = fresh("ir_later")
    calls = []
    real = limn.compiler.jit.schedule
    monkeypatch.setattr(limn.compiler.jit, "schedule", lambda *a: calls.append(1) or real(*a))
    step(Tensor(X), Tensor(W)).numpy()
    assert calls == [1] and device.stats.plans_built == 1


def test_debug_2_plans_anew_so_it_can_explain(folder, monkeypatch, capsys):
    fresh("ir_first")
    step(Tensor(X), Tensor(W)).numpy()
    monkeypatch.setenv("LIMN_DEBUG", "2")
    fresh("ir_later")
    step(Tensor(X), Tensor(W)).numpy()
    err = capsys.readouterr().err
    assert "explained:" in err and "(from the plan index)" not in err


def test_a_program_too_deep_to_pickle_is_not_kept(folder):
    """A chain of thousands of ops nests as deep in a schedule's expressions (tests/compiler/test_schedule_limits.py
    runs such graphs): pickling it passes the recursion limit, and the index keeps nothing rather than raise."""
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    plan_index.store(plan_index.entry(("a key",)), deep)
    assert not list(folder.glob("plans/*/*.plan"))
