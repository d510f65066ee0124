"""limn/c/addresses.py: the address passed for a host buffer is its first byte's, numpy's own `ctypes.data`,
also when a new array has taken the id of one that died (the remembered entry is another array's), and the
table starts over once it holds KEPT entries."""

from __future__ import annotations

import weakref

import numpy as np

from limn.c import addresses


class _Gone:
    pass


def test_the_address_is_numpys_and_is_remembered():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    view = a[1:]
    assert addresses.address(a) == a.ctypes.data
    assert addresses.address(view) == view.ctypes.data == a.ctypes.data + 16
    assert addresses.of([a, view]) == [a.ctypes.data, view.ctypes.data]


def test_an_array_that_took_a_dead_arrays_id_gets_its_own_address(monkeypatch):
    a = np.zeros(4, np.float32)
    gone = _Gone()
    stale = (weakref.ref(gone), 12345)  # what the table would hold had a dead array had this id
    del gone
    monkeypatch.setitem(addresses._known, id(a), stale)
    assert addresses.address(a) == a.ctypes.data != 12345


def test_the_table_starts_over_when_full(monkeypatch):
    monkeypatch.setattr(addresses, "KEPT", 3)
    monkeypatch.setattr(addresses, "_known", {})
    arrays = [np.zeros(2) for _ in range(5)]
    for a in arrays:
        assert addresses.address(a) == a.ctypes.data
    assert len(addresses._known) <= 3
