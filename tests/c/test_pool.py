"""Rules for the c device's host block pool (limn.c.pool):
- a block of at least MIN_BYTES goes back to the pool when the last array over it goes, and the next
  allocation of that byte size takes it; smaller arrays are plain numpy arrays;
- a block is never handed out while any view of it lives (nothing writes into bytes something still reads);
- the pool holds at most `limit` bytes; LIMN_C_POOL_MB sets the limit, 0 turns the pool off, and a value that
  is not a whole number of megabytes is refused with a message naming it; release() lets every block go;
- every handle starts on a 64-byte boundary (ALIGN), small or pooled, a kernel's output or a Tensor made from a
  numpy array (whose own memory starts 16 bytes past one), so no vector a kernel loads spans two cache lines;
- threads allocating and freeing at once never get one block twice;
- on the device, a loop realizing a big result reuses its output block, and every answer matches the numpy
  device (the oracle), including results kept while later ones are computed.
"""

import threading

import numpy as np
import pytest

import limn
from limn import Tensor
from limn.c.device import CDevice
from limn.c.pool import ALIGN, MIN_BYTES, HostPool
from limn.dtypes import float32, int8

BIG = (MIN_BYTES // 4,)  # float32 cells of exactly MIN_BYTES


def test_a_freed_big_block_is_the_next_allocation_of_its_size():
    pool = HostPool(limit=1 << 30)
    a = pool.alloc(float32, BIG)
    address = a.ctypes.data
    del a
    assert pool.free_bytes == MIN_BYTES
    b = pool.alloc(float32, (2, BIG[0] // 2))  # another shape, the same bytes
    assert b.ctypes.data == address and b.shape == (2, BIG[0] // 2) and b.dtype == np.float32
    assert pool.reused == 1 and pool.free_bytes == 0
    assert b.flags.c_contiguous and b.flags.writeable


def test_small_arrays_are_not_pooled():
    pool = HostPool(limit=1 << 30)
    a = pool.alloc(float32, (MIN_BYTES // 4 - 1,))
    del a
    assert pool.free_bytes == 0 and pool.free == {}


def test_a_block_is_not_reused_while_a_view_of_it_lives():
    pool = HostPool(limit=1 << 30)
    a = pool.alloc(float32, BIG)
    a[:] = 7.0
    view = a[10:20]
    del a
    assert pool.free_bytes == 0, "the view still reads the block"
    b = pool.alloc(float32, BIG)
    b[:] = 0.0
    assert not np.shares_memory(b, view)
    np.testing.assert_array_equal(view, np.full(10, 7.0, np.float32))
    del view
    assert pool.free_bytes == MIN_BYTES


def test_the_pool_keeps_at_most_its_limit():
    pool = HostPool(limit=2 * MIN_BYTES)
    arrays = [pool.alloc(int8, (MIN_BYTES,)) for _ in range(3)]
    del arrays
    assert pool.free_bytes == 2 * MIN_BYTES
    assert len(pool.free[MIN_BYTES]) == 2


def test_release_lets_every_block_go():
    pool = HostPool(limit=1 << 30)
    arrays = [pool.alloc(int8, (MIN_BYTES * n,)) for n in (1, 2)]
    del arrays
    assert pool.release() == 3 * MIN_BYTES
    assert pool.free_bytes == 0 and pool.free == {}


def test_limit_from_the_environment(monkeypatch):
    monkeypatch.setenv("LIMN_C_POOL_MB", "3")
    assert HostPool().limit == 3 << 20
    monkeypatch.setenv("LIMN_C_POOL_MB", "0")
    off = HostPool()
    a = off.alloc(float32, BIG)
    del a
    assert off.free_bytes == 0, "0 turns the pool off"
    for bad, said in (("lots", "'lots' is not a whole number"), ("-5", "-5 is negative")):
        monkeypatch.setenv("LIMN_C_POOL_MB", bad)
        with pytest.raises(ValueError, match=said):
            HostPool()


def test_threads_never_share_a_block():
    pool = HostPool(limit=8 * MIN_BYTES)
    errors: list[str] = []

    def work(tag: int) -> None:
        for round_ in range(200):
            a = pool.alloc(int8, (MIN_BYTES,))
            a[:] = tag
            a[::4096] = tag  # touch it again after other threads ran
            if not (a == tag).all():
                errors.append(f"thread {tag} round {round_}: another thread wrote into its block")
            del a

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert pool.reused > 0


def test_a_realize_loop_reuses_its_output_block_and_stays_right():
    device = CDevice()
    limn.register_device("c_pool", lambda: device)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(MIN_BYTES // 2).astype(np.float32)  # 2 MiB of float32

    def step(x: Tensor, k: float) -> Tensor:
        return (x * k).exp() - x

    limn.set_device("numpy")
    want = [step(Tensor(x_np), k).numpy() for k in (0.5, 1.0, 1.5, 2.0)]
    limn.set_device("c_pool")
    x = Tensor(x_np)
    kept = step(x, 0.5).realize()  # held while the others are computed
    for k, expected in zip((1.0, 1.5, 2.0), want[1:]):
        y = step(x, k).realize()
        np.testing.assert_allclose(y.numpy(), expected, rtol=2e-6, err_msg=f"step(x, {k})")
        del y
    assert device.pool.reused >= 2, "the dropped outputs' blocks should serve the next results"
    np.testing.assert_allclose(kept.numpy(), want[0], rtol=2e-6, err_msg="a result kept across later runs")


@pytest.mark.parametrize("cells", [1, 3, 1000, 64 * 1024, MIN_BYTES // 4, MIN_BYTES // 4 + 3])
def test_every_handle_starts_on_a_cache_line(cells):
    pool = HostPool(limit=1 << 30)
    for _ in range(3):  # fresh, then (for the big ones) taken back from the pool
        a = pool.alloc(float32, (cells,))
        start = a.ctypes.data % ALIGN
        assert start == 0, f"pool.alloc(float32, ({cells},)) starts at {start} mod {ALIGN}"
        a[:] = 1.0  # all of it is writable memory of its own
        del a


def test_a_tensor_made_from_numpy_starts_on_a_cache_line_and_holds_a_copy():
    data = np.arange(64 * 1024, dtype=np.float32)[1:]  # 4 bytes past numpy's own start
    t = Tensor(data, device="c")
    handle = t.node.arg.handle
    assert handle.ctypes.data % ALIGN == 0 and not np.shares_memory(handle, data)
    data[:] = -1.0
    np.testing.assert_array_equal(t.numpy(), np.arange(1, 64 * 1024, dtype=np.float32))
