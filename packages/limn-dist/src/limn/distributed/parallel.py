"""Data parallelism: the gradients of every rank averaged between backward() and the optimizer's step.

`DataParallel(params)` keeps one gradient tensor per parameter that lives across steps. `reduce_gradients()`
realizes the gradients backward() made (with any extra tensors, such as the loss, in the same realize),
averages them across ranks in a few flat buckets (one allreduce each, limn.distributed.buckets), writes the means
into those tensors' buffers and points each `p.grad` at its tensor. Every rank then holds the gradient of
the whole global batch, so the step that follows is identical on every rank. Since the gradient tensors
keep their buffers from step to step, a captured optimizer step (limn.capture) reads them like any other
state it keeps.

`DataParallelOptimizer(opt)` does that inside step(), for loops that call `opt.step()`. `DistributedSampler`
gives each rank its own shard of a dataset's indices, as torch's does.
Pipeline: backward() -> **data parallel** (buckets, MPI) -> optimizer step -> device.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from limn.distributed import world as distributed
from limn.distributed.buckets import DEFAULT_BUCKET_BYTES, agree, plan, signature
from limn.frontend.tensor import Tensor
from limn.graph.ops import Op
from limn.runtime.engine import realize


@dataclass
class Stats:
    """What the collectives of the steps so far cost: calls of reduce_gradients, seconds spent in them (the
    host copies, buckets and allreduces together), and the bytes reduced (summed over buckets)."""

    steps: int = 0
    seconds: float = 0.0
    bytes: int = 0

    @property
    def bytes_per_step(self) -> float:
        return self.bytes / self.steps if self.steps else 0.0


class DataParallel:
    """Averages the gradients of `params` (tensors, named pairs or a dict) across the ranks of
    limn.distributed's world, in buckets of at most `bucket_bytes`."""

    def __init__(
        self, params: Iterable[Tensor] | Mapping[str, Tensor], bucket_bytes: int = DEFAULT_BUCKET_BYTES
    ) -> None:
        self.named = distributed._named(params)
        if not self.named:
            raise ValueError("DataParallel: no parameters given")
        self.bucket_bytes = bucket_bytes
        self.grads: list[Tensor | None] = [None] * len(self.named)  # the gradient tensors kept across steps
        self.stats = Stats()

    @property
    def params(self) -> list[Tensor]:
        return [p for _, p in self.named]

    def reduce_gradients(self, *extra: Tensor) -> None:
        """Averages every parameter's gradient across ranks, in place (see the module docstring). A parameter
        whose grad is None on every rank is left alone; None on some ranks only is an error naming it."""
        world = distributed._get()
        start = time.perf_counter()
        present = [(i, n, p.grad) for i, (n, p) in enumerate(self.named) if p.grad is not None]
        names = [n for _, n, _ in present]
        grads = [g for _, _, g in present]
        realize(*grads, *extra)
        grads = [g if g.node.op is Op.BUFFER else g.contiguous() for g in grads]  # a view: its own copy
        realize(*grads)
        dtypes, shapes = [g.dtype for g in grads], [g.shape for g in grads]
        agree(world.comm.allgather(signature(names, dtypes, shapes, "reduce_gradients")), "reduce_gradients")
        means = distributed.reduce_tensors(grads, "mean", self.bucket_bytes)  # host arrays, or NCCL's device tensors
        kept = []
        for k, (i, _, _) in enumerate(present):
            if self.grads[i] is None or self.grads[i].shape != shapes[k] or self.grads[i].dtype != dtypes[k]:
                self.grads[i] = Tensor(means[k], dtype=dtypes[k], device=self.named[i][1].device).realize()
            else:
                kept.append(self.grads[i].assign(means[k]))
            self.named[i][1].grad = self.grads[i]
        realize(*kept)
        self.stats.steps += 1
        self.stats.seconds += time.perf_counter() - start
        self.stats.bytes += sum(b.nbytes for b in plan(dtypes, [g.numel() for g in grads], self.bucket_bytes))


class DataParallelOptimizer:
    """An optimizer whose step() first averages the gradients across ranks (a DataParallel over its
    parameters); everything else (param_groups, state_dict, zero_grad, lr) is the optimizer's own."""

    def __init__(self, optimizer: Any, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self.optimizer = optimizer
        self.parallel = DataParallel(params, bucket_bytes)

    def step(self, *extra: Tensor) -> None:
        self.parallel.reduce_gradients(*extra)
        self.optimizer.step(*extra)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.optimizer, name)


class DistributedSampler:
    """Each rank's share of a dataset's `length` indices, as torch.utils.data.DistributedSampler: the indices
    (shuffled per epoch when `shuffle`) padded by repeating from the start to a multiple of the world size
    (or cut to one, with drop_last), and rank r taking every world-size-th from r. Shuffling draws from
    numpy's generator seeded by (seed, epoch), the same on every rank; its order is not torch's, which draws
    from torch's own generator. Call set_epoch(e) before each epoch for a new order."""

    def __init__(
        self,
        length: int,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None:
            num_replicas = distributed.world_size()
        if rank is None:
            rank = distributed.rank()
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: rank {rank} is outside [0, {num_replicas - 1}]")
        if length < 0:
            raise ValueError(f"DistributedSampler: length {length} is negative")
        self.length, self.num_replicas, self.rank = length, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        if drop_last and length % num_replicas:
            self.num_samples = length // num_replicas
        else:
            self.num_samples = -(-length // num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self) -> Iterator[int]:
        if self.shuffle:
            indices = np.random.default_rng([self.seed, self.epoch]).permutation(self.length).tolist()
        else:
            indices = list(range(self.length))
        if self.drop_last:
            indices = indices[: self.total_size]
        elif indices:
            pad = self.total_size - len(indices)
            indices += (indices * (-(-pad // len(indices))))[:pad]
        return iter(indices[self.rank : self.total_size : self.num_replicas])
