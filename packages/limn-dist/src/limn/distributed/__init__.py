"""limn.distributed: data-parallel training on MPI. `init()` joins the ranks mpiexec started, `all_reduce` and
`broadcast_parameters` keep them equal, and DataParallel (limn.distributed.parallel) averages every gradient in
a few flat buckets between backward() and the optimizer's step.
"""

from limn.distributed.world import (
    DistributedError,
    all_reduce,
    barrier,
    broadcast_parameters,
    init,
    is_initialized,
    mpiexec,
    on_root,
    rank,
    shard_rows,
    world_size,
)

__all__ = [
    "DistributedError",
    "all_reduce",
    "barrier",
    "broadcast_parameters",
    "init",
    "is_initialized",
    "mpiexec",
    "on_root",
    "rank",
    "shard_rows",
    "world_size",
]
