"""Rule: limn.distributed's pieces hold in a world of one process: buckets cut where they should and carry
every dtype there and back exactly, collectives are the identity (mean included) and refuse what they
cannot reduce, shard_rows and DistributedSampler split data as torch's DistributedSampler does (oracle:
torch.utils.data.DistributedSampler), and on_root runs once. The multi-rank rules are in test_distributed.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch.utils.data

import limn
import limn.distributed as dist
from limn import Tensor, dtypes
from limn.distributed.buckets import DistributedError, pack, plan, unpack, wire_dtype
from limn.distributed.parallel import DataParallel, DistributedSampler


@pytest.fixture(autouse=True)
def world():
    dist.init()
    assert dist.world_size() == 1 and dist.rank() == 0, "pytest runs as a world of one"


def test_buckets_group_by_wire_dtype_and_cut_at_the_byte_limit():
    kinds = [dtypes.float32, dtypes.float32, dtypes.bfloat16, dtypes.int64, dtypes.float32, dtypes.float16]
    sizes = [10, 20, 5, 3, 40, 7]
    buckets = plan(kinds, sizes, bucket_bytes=30 * 4)
    as_slots = [(b.wire.name, [s.index for s in b.slots]) for b in buckets]
    # float32 holds 10 + 20 = 30 elements (120 bytes); the bfloat16 (as float32) does not fit: a new one; the
    # int64 has its own wire; the 40-element float32 passes the limit alone, so the float16 after it starts anew
    expected = [("float32", [0, 1]), ("float32", [2]), ("int64", [3]), ("float32", [4]), ("float32", [5])]
    assert as_slots == expected, as_slots
    assert wire_dtype(dtypes.bfloat16) == np.float32 and wire_dtype(dtypes.bool_) == np.uint8
    with pytest.raises(ValueError, match="at least one byte"):
        plan(kinds, sizes, bucket_bytes=0)


@pytest.mark.parametrize("dtype", [dtypes.float32, dtypes.float64, dtypes.bfloat16, dtypes.float16, dtypes.int32, dtypes.uint8, dtypes.bool_])
def test_a_bucket_carries_each_dtype_there_and_back_exactly(dtype):
    rng = np.random.default_rng(0)
    arrays = [(rng.standard_normal(s) * 3).astype(dtype.np) for s in [(2, 3), (5,), (1, 1, 4)]]
    (bucket,) = plan([dtype] * 3, [a.size for a in arrays])
    back = unpack(bucket, pack(bucket, arrays), [dtype] * 3, [a.shape for a in arrays])
    for i, a in enumerate(arrays):
        assert back[i].dtype == a.dtype and back[i].shape == a.shape
        np.testing.assert_array_equal(back[i], a)


def test_collectives_in_a_world_of_one_change_nothing_and_return_the_tensors():
    a = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = Tensor([1, 5, 2])
    for op in ("sum", "max"):
        out = dist.all_reduce([a, b], op=op)
        assert out[0] is a and out[1] is b
        assert a.tolist() == [[0, 1, 2], [3, 4, 5]] and b.tolist() == [1, 5, 2]
    dist.all_reduce({"a": a}, op="mean")
    assert a.tolist() == [[0, 1, 2], [3, 4, 5]]
    lazy = a * 2  # a lazy value is realized, then reduced in place
    dist.all_reduce([lazy])
    assert lazy.tolist() == [[0, 2, 4], [6, 8, 10]]
    assert dist.broadcast_parameters([a])[0] is a


def test_collectives_refuse_what_they_cannot_reduce():
    with pytest.raises(ValueError, match="op is one of sum, mean, max"):
        dist.all_reduce([Tensor([1.0])], op="prod")
    with pytest.raises(DistributedError, match="a mean of integers is not one"):
        dist.all_reduce([Tensor([1, 2])], op="mean")
    with pytest.raises(DistributedError, match="bool, which reduces with 'max'"):
        dist.all_reduce([Tensor([True, False])], op="sum")
    base = Tensor(np.zeros((3, 4), np.float32)).realize()
    with pytest.raises(DistributedError, match="is a view of another tensor's buffer"):
        dist.all_reduce([base[1]])
    with pytest.raises(TypeError, match="not a Tensor"):
        dist.all_reduce([np.zeros(3)])
    with pytest.raises(ValueError, match="the world has ranks 0 to 0"):
        dist.broadcast_parameters([base], root=1)


def test_bools_reduce_with_max_as_logical_or():
    t = Tensor([True, False, True])
    dist.all_reduce([t], op="max")
    assert t.dtype == limn.bool_ and t.tolist() == [True, False, True]


def test_data_parallel_keeps_one_gradient_tensor_per_parameter_across_steps():
    w = Tensor(np.ones((2, 3), np.float32), requires_grad=True)
    parallel = DataParallel({"w": w})
    grads = []
    for scale in (1.0, 2.0):
        w.grad = None
        ((w * scale).sum()).backward()
        parallel.reduce_gradients()
        grads.append(w.grad)
        assert w.grad.tolist() == [[scale] * 3] * 2
    assert grads[0] is grads[1], "the same tensor, its buffer overwritten: a captured step reads it as kept state"
    assert parallel.stats.steps == 2 and parallel.stats.bytes_per_step == 2 * 3 * 4


def test_shard_rows_gives_a_world_of_one_the_whole_batch_and_refuses_an_uneven_split():
    x = np.arange(12).reshape(6, 2)
    np.testing.assert_array_equal(dist.shard_rows(x), x)
    assert dist.shard_rows(Tensor(x), axis=1).shape == (6, 2)


@pytest.mark.parametrize("length", [0, 1, 7, 10, 12])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("drop_last", [False, True])
def test_the_sampler_splits_indices_as_torchs_distributed_sampler(length: int, replicas: int, drop_last: bool):
    data = list(range(length))
    for rank in range(replicas):
        ours = DistributedSampler(length, replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = torch.utils.data.DistributedSampler(data, replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs), (length, replicas, rank, drop_last)


def test_a_shuffled_sampler_gives_every_rank_its_own_share_of_one_permutation_per_epoch():
    shares = [list(DistributedSampler(10, 2, r, shuffle=True, seed=3)) for r in range(2)]
    assert sorted(shares[0] + shares[1]) == list(range(10)) and not set(shares[0]) & set(shares[1])
    sampler = DistributedSampler(10, 2, 0, shuffle=True, seed=3)
    sampler.set_epoch(1)
    assert list(sampler) != shares[0], "a new epoch draws a new order"
    with pytest.raises(ValueError, match="rank 2 is outside"):
        DistributedSampler(10, 2, 2)


def test_on_root_runs_once_and_reraises_its_error():
    calls = []
    assert dist.on_root(lambda: calls.append(1) or "written") == "written" and calls == [1]

    def broken():
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        dist.on_root(broken)


def test_mpiexec_is_found_beside_this_python():
    assert dist.mpiexec().endswith("mpiexec")
