"""A padded 3x3 conv2d beside its unpadded twin, on the c device, with numpy and torch (CPU) alongside, each
library timed in a process of its own.

    uv run python examples/bench_conv.py

The twin reads an input the caller padded already, so both convs compute the same output from the same
numbers; the only difference is that the padded one masks its reads at the border. The c device cuts
each masked innermost loop at the mask's edges, so the padded conv should cost about what its twin does
(the target is within 1.2x). numpy runs an im2col (sliding_window_view) and one tensordot; torch runs
its own conv2d. Figures are GFLOP/s (2 B O C kh kw H W / median seconds). A last row times a training
step's share, the padded conv's forward and both gradients (3x the forward's FLOPs), in limn and torch.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F
from _bench import first_call_seconds, in_own_process, median_seconds, only_this, table
from _limits import measure, report, share

import limn
from limn import Tensor
from limn.c.team import team_size
from limn.composed.functional.convolution import conv


def numpy_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))  # (B, C, H, W, kh, kw)
    return np.tensordot(windows, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)  # (B, O, H, W)


CONVS = ["padded conv (padding=1)", "unpadded twin"]  # the table's rows
TRAINED = "padded conv, forward + backward"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", choices=LIBRARIES, help=argparse.SUPPRESS)  # one library, in its own process
    args = parser.parse_args()
    b, c, s = args.batch, args.channels, args.size
    if args.only is not None:
        return only_this(LIBRARIES[args.only](*operands(b, c, s), args.repeats))
    limits = measure(limn.get_device("c"))
    threads = team_size()
    argv = ["--batch", str(b), "--channels", str(c), "--size", str(s), "--repeats", str(args.repeats)]
    figures = {name: in_own_process(__file__, name, argv) for name in LIBRARIES}
    flops = 2.0 * b * c * c * 9 * s * s
    rows = []
    for name in CONVS:
        t = [figures[lib][name] for lib in LIBRARIES]
        peak = share(flops / t[0] / 1e9, limits.fma_gflops)
        first = figures["limn"]["first " + name]
        rows.append(
            [name, *(f"{flops / v / 1e9:.1f}" for v in t), peak, f"{t[1] / t[0]:.2f}x", f"{first * 1e3:.0f} ms"]
        )
    ours, theirs = (3 * flops / figures[lib][TRAINED] / 1e9 for lib in ("limn", "torch"))
    first = f"{figures['limn']['first ' + TRAINED] * 1e3:.0f} ms"
    rows.append([TRAINED, f"{ours:.1f}", "-", f"{theirs:.1f}", share(ours, limits.fma_gflops), "-", first])
    print(report(limits))
    print(
        f"conv2d 3x3, ({b}, {c}, {s}, {s}) -> ({b}, {c}, {s}, {s}); GFLOP/s (median of {args.repeats}), each library "
        f"in a process of its own with {threads} threads; max abs diff vs numpy {figures['limn']['error']:.1e}"
    )
    print(table(["conv", "limn c", "numpy", "torch", "limn % peak", "limn/numpy", "limn first call"], rows))
    ratio = figures["limn"][CONVS[0]] / figures["limn"][CONVS[1]]
    print(f"padded / unpadded time: {ratio:.2f}x")


def operands(b: int, c: int, s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (B, C, S, S), w (C, C, 3, 3), and x padded by one on each side as the twin reads it."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, c, s, s)).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    return x, w, np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))


def time_limn(x_np: np.ndarray, w_np: np.ndarray, x_padded_np: np.ndarray, repeats: int) -> dict[str, float]:
    limn.set_device("c")
    x, x_padded, w = Tensor(x_np), Tensor(x_padded_np), Tensor(w_np)
    runs = [
        lambda: conv(x, w, None, (1, 1), (1, 1), (1, 1), 1).realize(),
        lambda: conv(x_padded, w, None, (1, 1), (0, 0), (1, 1), 1).realize(),
    ]
    out = {}
    for name, run in zip(CONVS, runs):
        out["first " + name] = first_call_seconds(run)
        out[name] = median_seconds(run, repeats)
    xg, wg = Tensor(x_np, requires_grad=True), Tensor(w_np, requires_grad=True)

    def trained() -> None:
        xg.grad = wg.grad = None
        y = conv(xg, wg, None, (1, 1), (1, 1), (1, 1), 1)
        (y * y).sum().backward()
        limn.realize(xg.grad, wg.grad)

    out["first " + TRAINED] = first_call_seconds(trained)
    out[TRAINED] = median_seconds(trained, repeats)
    got = conv(x, w, None, (1, 1), (1, 1), (1, 1), 1).numpy()
    out["error"] = float(np.abs(got - numpy_conv(x_padded_np, w_np)).max())  # after the timing
    return out


def time_numpy(x_np: np.ndarray, w_np: np.ndarray, x_padded_np: np.ndarray, repeats: int) -> dict[str, float]:
    seconds = median_seconds(lambda: numpy_conv(x_padded_np, w_np), repeats)  # numpy has no padded conv: it pads first
    return {name: seconds for name in CONVS}


def time_torch(x_np: np.ndarray, w_np: np.ndarray, x_padded_np: np.ndarray, repeats: int) -> dict[str, float]:
    torch.set_num_threads(team_size())
    x, x_padded, w = torch.from_numpy(x_np), torch.from_numpy(x_padded_np), torch.from_numpy(w_np)
    runs = [lambda: F.conv2d(x, w, padding=1), lambda: F.conv2d(x_padded, w)]
    out = {name: median_seconds(run, repeats) for name, run in zip(CONVS, runs)}
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()

    def trained() -> None:
        xg.grad = wg.grad = None
        (F.conv2d(xg, wg, padding=1) ** 2).sum().backward()

    out[TRAINED] = median_seconds(trained, repeats)
    return out


LIBRARIES = {"limn": time_limn, "numpy": time_numpy, "torch": time_torch}  # the table's order


if __name__ == "__main__":
    main()
