"""float32 square matmul on the c device beside numpy (BLAS) and torch (CPU), each timed in a process of its
own; or on a GPU.

    uv run python examples/bench_matmul.py [--sizes 256 512 1024 2048]
    uv run python examples/bench_matmul.py --device cuda [--sizes 1024 2048 4096 8192]

Prints GFLOP/s (2 n**3 / median seconds) for each, limn's ratio to numpy, the thread count, and limn's
first call (schedule, render, cc, run) apart from its steady state. limn runs the register-tiled nest,
which is bit-identical to the plain i, r, j nest the IR prints. With --device cuda (or cuda-sim, to try the
script without a GPU on small sizes) the operands live on the device, limn runs the shared-memory tiles
(limn.cuda.matmul) and the comparison is torch's cuBLAS with TF32 off, both timed to the end of the stream.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
from _bench import first_call_seconds, in_own_process, median_seconds, only_this, table
from _limits import measure, report, share

import limn
from limn.c.team import team_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", help="256 512 1024 2048 (c), 1024 to 8192 (cuda)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device", default="c", help="c (the default), cuda, or cuda-sim")
    parser.add_argument("--only", choices=LIBRARIES, help=argparse.SUPPRESS)  # one library, in its own process
    args = parser.parse_args()
    if args.device != "c":
        return on_gpu(args)
    sizes = args.sizes or [256, 512, 1024, 2048]
    if args.only is not None:
        return only_this({str(n): LIBRARIES[args.only](n, args.repeats) for n in sizes})
    limits = measure(limn.get_device("c"))
    threads = team_size()
    argv = ["--sizes", *map(str, sizes), "--repeats", str(args.repeats)]
    figures = {name: in_own_process(__file__, name, argv) for name in LIBRARIES}
    rows = []
    for n in sizes:
        flops = 2.0 * n**3
        mine, t_np, t_torch = (figures[name][str(n)] for name in LIBRARIES)
        t_limn = mine["seconds"]
        rows.append(
            [
                str(n),
                f"{flops / t_limn / 1e9:.1f}",
                f"{flops / t_np['seconds'] / 1e9:.1f}",
                f"{flops / t_torch['seconds'] / 1e9:.1f}",
                share(flops / t_limn / 1e9, limits.fma_gflops),
                f"{t_np['seconds'] / t_limn:.2f}x",
                f"{mine['first'] * 1e3:.0f} ms",
                f"{mine['check']:.1e}",
            ]
        )
    print(report(limits))
    print(
        f"float32 matmul, GFLOP/s (median of {args.repeats}), each library in a process of its own with {threads} "
        f"threads; limn's c device (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')})"
    )
    headers = ["n", "limn c", "numpy", "torch", "limn % peak", "limn/numpy", "limn first call", "max rel diff"]
    print(table(headers, rows))


def operands(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)


def time_limn(n: int, repeats: int) -> dict[str, float]:
    limn.set_device("c")
    a_np, b_np = operands(n)
    a, b = limn.Tensor(a_np), limn.Tensor(b_np)
    first = first_call_seconds(lambda: (a @ b).realize())
    seconds = median_seconds(lambda: (a @ b).realize(), repeats)
    want = a_np @ b_np  # after the timing: numpy's threads must not run beside limn's
    check = float(np.abs((a @ b).numpy() - want).max() / np.abs(want).max())
    return {"seconds": seconds, "first": first, "check": check}


def time_numpy(n: int, repeats: int) -> dict[str, float]:
    a, b = operands(n)
    return {"seconds": median_seconds(lambda: a @ b, repeats)}


def time_torch(n: int, repeats: int) -> dict[str, float]:
    torch.set_num_threads(team_size())
    a, b = (torch.from_numpy(x) for x in operands(n))
    return {"seconds": median_seconds(lambda: a @ b, repeats)}


LIBRARIES = {"limn": time_limn, "numpy": time_numpy, "torch": time_torch}  # the table's order


def on_gpu(args: argparse.Namespace) -> None:
    """The cuda (or cuda-sim) rows: limn's tiles beside cuBLAS, operands resident on the device."""
    limn.set_device(args.device)
    gpu = args.device == "cuda" and torch.cuda.is_available()
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = False  # cuBLAS in full float32, as limn computes
        torch.backends.cudnn.allow_tf32 = False
    rows = []
    for n in args.sizes or [1024, 2048, 4096, 8192]:
        rng = np.random.default_rng(0)
        a_np = rng.standard_normal((n, n)).astype(np.float32)
        b_np = rng.standard_normal((n, n)).astype(np.float32)
        a, b = limn.Tensor(a_np, device=args.device), limn.Tensor(b_np, device=args.device)
        flops = 2.0 * n**3
        limn_matmul = lambda a=a, b=b: (a @ b).realize()  # noqa: E731 (a run ends waiting for its stream)
        first = first_call_seconds(limn_matmul)
        t_limn = median_seconds(limn_matmul, args.repeats)
        got = (a @ b).numpy()
        check = np.abs(got - a_np @ b_np).max() / np.abs(a_np @ b_np).max()
        row = [str(n), f"{flops / t_limn / 1e9:.1f}"]
        if gpu:
            a_t, b_t = torch.from_numpy(a_np).cuda(), torch.from_numpy(b_np).cuda()

            def cublas(a=a_t, b=b_t):
                out = a @ b
                torch.cuda.synchronize()
                return out

            t_torch = median_seconds(cublas, args.repeats)
            row += [f"{flops / t_torch / 1e9:.1f}", f"{t_torch / t_limn:.0%}"]
        else:
            row += ["-", "-"]
        rows.append(row + [f"{first * 1e3:.0f} ms", f"{check:.1e}"])
    name = torch.cuda.get_device_name() if gpu else args.device
    print(f"float32 matmul on {name}, GFLOP/s (median of {args.repeats}); torch: cuBLAS, TF32 off")
    headers = ["n", f"limn {args.device}", "torch cuBLAS", "limn / cuBLAS", "limn first call", "max rel diff"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
