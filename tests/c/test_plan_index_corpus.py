"""The plan index (limn.compiler.plan_index) over the whole graph corpus on c: every case planned by one process
and loaded by a later one (the c device's caches emptied, the plan index kept) gives the first run's bits, so a
program that went through the disk is the program that was built. Slow (every case twice, compiled kernels
loaded): nox -s isa runs it."""

from __future__ import annotations

import corpus
import pytest

import limn
import limn.compiler.jit
from limn.compiler import cache_files, row_pieces
from limn.runtime.device import get_device

pytestmark = pytest.mark.isa


def _run_every_case() -> tuple[dict[str, list[bytes]], int]:
    """Each case's outputs' bytes on the c device, its plan and program caches emptied first (what a new
    process starts with), and how many plans it built or loaded."""
    limn.set_device("c")
    device = get_device("c")
    device.plans.clear()
    device.programs.clear()
    device.families = row_pieces.Families()
    before = device.stats.plans_built
    out = {c.name: [a.tobytes() for a in corpus.run_case(c)] for c in corpus.CASES}
    return out, device.stats.plans_built - before


def test_every_corpus_case_gives_the_same_bits_from_a_loaded_plan(tmp_path, monkeypatch):
    real = cache_files.cache_dir
    monkeypatch.setattr(cache_files, "cache_dir", lambda name: tmp_path / name if name == "plans" else real(name))
    built, planned = _run_every_case()
    kept = list(tmp_path.glob("plans/*/*.plan"))
    assert len(kept) == planned == len(corpus.CASES), f"{planned} plans, {len(kept)} kept"
    calls = []
    monkeypatch.setattr(limn.compiler.jit, "schedule", lambda *a: calls.append(a) or pytest.fail("scheduled"))
    loaded, _ = _run_every_case()
    assert calls == []
    differ = [name for name in built if built[name] != loaded[name]]
    assert differ == [], f"cases whose loaded plan gives other bits: {differ}"
