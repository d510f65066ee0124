"""A padded 3x3 conv2d beside its unpadded twin, on the c device, with numpy and torch (CPU) alongside.

    uv run python examples/bench_conv.py

The twin reads an input the caller padded already, so both convs compute the same output from the same
numbers; the only difference is that the padded one masks its reads at the border. The c device cuts
each masked innermost loop at the mask's edges, so the padded conv should cost about what its twin does
(the target is within 1.2x). numpy runs an im2col (sliding_window_view) and one tensordot; torch runs
its own conv2d. Figures are GFLOP/s (2 B O C kh kw H W / median seconds).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F
from _bench import first_call_seconds, median_seconds, table
from _limits import measure, report, share

import limn
from limn import Tensor
from limn.c.toolchain import team_size
from limn.composed.functional.convolution import conv


def numpy_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))  # (B, C, H, W, kh, kw)
    return np.tensordot(windows, w, axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)  # (B, O, H, W)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--channels", type=int, default=32)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    limn.set_device("c")
    limits = measure(limn.get_device())
    threads = team_size()
    torch.set_num_threads(threads)
    b, c, s = args.batch, args.channels, args.size
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((b, c, s, s)).astype(np.float32)
    w_np = (rng.standard_normal((c, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    x_padded_np = np.pad(x_np, ((0, 0), (0, 0), (1, 1), (1, 1)))
    x, x_padded, w = Tensor(x_np), Tensor(x_padded_np), Tensor(w_np)
    flops = 2.0 * b * c * c * 9 * s * s

    runs = {
        "padded conv (padding=1)": (
            lambda: conv(x, w, None, (1, 1), (1, 1), (1, 1), 1).realize(),
            lambda: numpy_conv(x_padded_np, w_np),  # numpy has no padded conv: it pads first
            lambda: F.conv2d(torch.from_numpy(x_np), torch.from_numpy(w_np), padding=1),
        ),
        "unpadded twin": (
            lambda: conv(x_padded, w, None, (1, 1), (0, 0), (1, 1), 1).realize(),
            lambda: numpy_conv(x_padded_np, w_np),
            lambda: F.conv2d(torch.from_numpy(x_padded_np), torch.from_numpy(w_np)),
        ),
    }
    rows, seconds = [], {}
    for name, (run_limn, run_np, run_torch) in runs.items():
        first = first_call_seconds(run_limn)
        t = [median_seconds(f, args.repeats) for f in (run_limn, run_np, run_torch)]
        seconds[name] = t[0]
        figures = [f"{flops / v / 1e9:.1f}" for v in t]
        peak = share(flops / t[0] / 1e9, limits.fma_gflops)
        rows.append([name, *figures, peak, f"{t[1] / t[0]:.2f}x", f"{first * 1e3:.0f} ms"])
    got = conv(x, w, None, (1, 1), (1, 1), (1, 1), 1).numpy()
    err = np.abs(got - numpy_conv(x_padded_np, w_np)).max()
    print(report(limits))
    print(
        f"conv2d 3x3, ({b}, {c}, {s}, {s}) -> ({b}, {c}, {s}, {s}); GFLOP/s (median of {args.repeats}); "
        f"limn c device with {threads} threads; max abs diff vs numpy {err:.1e}"
    )
    print(table(["conv", "limn c", "numpy", "torch", "limn % peak", "limn/numpy", "limn first call"], rows))
    ratio = seconds["padded conv (padding=1)"] / seconds["unpadded twin"]
    print(f"padded / unpadded time: {ratio:.2f}x")


if __name__ == "__main__":
    main()
