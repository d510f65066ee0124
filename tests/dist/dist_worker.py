"""One rank of a distributed test: `mpiexec -n N python dist_worker.py SCENARIO OUT [options]`.

Each scenario is a function below; it writes what the test compares into OUT (a folder), one file per
rank, and prints progress lines the tests read. tests/dist/test_distributed.py starts it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

import limn
import limn.distributed as dist
from limn import Tensor, nn, optim, serialize
from limn.distributed.parallel import DataParallelOptimizer

STEPS_DATA_SEED = 1234


def mlp(seed: int):
    limn.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def batches(steps: int, global_batch: int) -> np.ndarray:
    """The global batches every rank draws alike: (steps, global_batch, 6)."""
    return np.random.default_rng(STEPS_DATA_SEED).standard_normal((steps, global_batch, 6)).astype(np.float32)


def targets(steps: int, global_batch: int) -> np.ndarray:
    return np.random.default_rng(STEPS_DATA_SEED + 1).standard_normal((steps, global_batch, 3)).astype(np.float32)


def train(args) -> None:
    """AdamW steps on an MLP, each rank on its shard of the global batch, from an optional checkpoint;
    rank 0 writes the parameters (and, with --save, a checkpoint)."""
    model = mlp(seed=args.seed + dist.rank())  # every rank starts apart: the broadcast must make them equal
    named = list(nn.named_parameters(model))
    params = [p for _, p in named]
    dist.broadcast_parameters(dict(named))
    inner = optim.AdamW(params, lr=1e-2, weight_decay=0.1)
    opt = DataParallelOptimizer(inner)
    if args.load:
        serialize.load_into(args.load, {**dict(named), **inner.state_dict()})
    xs, ys = batches(args.first + args.steps, args.batch), targets(args.first + args.steps, args.batch)
    for step in range(args.first, args.first + args.steps):
        x, y = Tensor(dist.shard_rows(xs[step])), Tensor(dist.shard_rows(ys[step]))
        opt.zero_grad()
        loss = (model(x) - y).square().mean()
        loss.backward()
        opt.step(loss)
    out = Path(args.out)
    np.save(out / f"params-{dist.rank()}.npy", np.concatenate([p.numpy().ravel() for p in params]))
    if args.save:
        dist.on_root(lambda: serialize.save(args.save, {**dict(named), **inner.state_dict()}))
    print(f"rank {dist.rank()} done", flush=True)


def broadcast(args) -> None:
    """Each rank starts from its own weights; after broadcast_parameters(root) every rank writes its own."""
    model = mlp(seed=100 + dist.rank())
    params = nn.parameters(model)
    before = np.concatenate([p.numpy().ravel() for p in params])
    np.save(Path(args.out) / f"before-{dist.rank()}.npy", before)
    dist.broadcast_parameters(params, root=args.root)
    np.save(Path(args.out) / f"after-{dist.rank()}.npy", np.concatenate([p.numpy().ravel() for p in params]))


def fail(args) -> None:
    """Allreduces in a loop; rank 1 raises (or is killed) at step 3, rank 0 would print 'rank 0 done'."""
    t = Tensor(np.ones(1000, np.float32))
    for step in range(200):
        if dist.rank() == 1 and step == 3:
            if args.how == "raise":
                raise ValueError("rank 1 raised on purpose at step 3")
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce([t], op="mean")
        time.sleep(0.01)
    print(f"rank {dist.rank()} done", flush=True)


def leave(args) -> None:
    """Rank 1 leaves at step 3 (its loop ends early: --how return, or sys.exit(3): --how exit) while rank 0
    goes on reducing; rank 0 must abort, naming rank 1, not wait for it."""
    t = Tensor(np.ones(1000, np.float32))
    for step in range(200):
        if dist.rank() == 1 and step == 3:
            if args.how == "exit":
                sys.exit(3)
            return
        dist.all_reduce([t], op="mean")
    print(f"rank {dist.rank()} done", flush=True)


def crossed(args) -> None:
    """Rank 0 calls barrier() where rank 1 calls all_reduce: both must raise, naming the two calls."""
    if dist.rank() == 0:
        dist.barrier()
    else:
        dist.all_reduce([Tensor(np.ones(4, np.float32))])
    print(f"rank {dist.rank()} done", flush=True)


def stall(args) -> None:
    """Rank 1 computes for a minute before its first collective; with a 2 s timeout rank 0 must give up."""
    if dist.rank() == 1:
        time.sleep(60)
    dist.all_reduce([Tensor(np.ones(4, np.float32))])
    print(f"rank {dist.rank()} done", flush=True)


def mismatch(args) -> None:
    """Rank 1 passes a tensor of another shape (or dtype): every rank must get the same error, and nothing
    must have moved."""
    a = Tensor(np.full(4, dist.rank() + 1.0, np.float32))
    if args.how == "shape":
        b = Tensor(np.zeros(3 if dist.rank() == 1 else 5, np.float32))
    else:
        b = Tensor(np.zeros(5, np.float64 if dist.rank() == 1 else np.float32))
    try:
        dist.all_reduce({"a": a, "b": b})
    except dist.DistributedError as e:
        message = str(e)
    else:
        message = "no error"
    result = {"message": message, "a": a.tolist()}
    (Path(args.out) / f"mismatch-{dist.rank()}.json").write_text(json.dumps(result))


def order(args) -> None:
    """The same allreduce repeated with the ranks arriving in a different order each time: every rank writes
    every repetition's result, which must all be the same bits."""
    data = np.random.default_rng(dist.rank()).standard_normal((3, 4099)).astype(np.float32) * 10.0 ** np.arange(3)[:, None]
    sleeper = np.random.default_rng(99)
    results = []
    for _ in range(args.steps):
        delays = sleeper.uniform(0, 0.05, size=dist.world_size())
        time.sleep(float(delays[dist.rank()]))  # a different rank arrives last each time
        t = Tensor(data.copy())
        dist.all_reduce([t], op="sum")
        results.append(t.numpy())
    np.save(Path(args.out) / f"order-{dist.rank()}.npy", np.stack(results))


SCENARIOS = {
    "train": train,
    "broadcast": broadcast,
    "fail": fail,
    "mismatch": mismatch,
    "order": order,
    "leave": leave,
    "crossed": crossed,
    "stall": stall,
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("out")
    p.add_argument("--device", default="numpy")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--root", type=int, default=0)
    p.add_argument("--how", default="raise")
    p.add_argument("--save")
    p.add_argument("--load")
    p.add_argument("--timeout", type=float)
    args = p.parse_args()
    dist.init(timeout=args.timeout)
    limn.set_device(args.device)
    SCENARIOS[args.scenario](args)


if __name__ == "__main__":
    sys.exit(main())
