"""The numpy device holds only the values still to be read: each intermediate is dropped after its last
reader, and an op copies no input it only reads. The oracle is numpy's own allocation count (tracemalloc)
against the size of one value, so the reference stays usable on the models people port."""

import tracemalloc

import numpy as np

from limn import Tensor

N = 1 << 20  # one float32 value of the chain: 4 MiB


def peak_bytes(build) -> int:
    x = Tensor(np.linspace(-1.0, 1.0, N, dtype=np.float32))
    y = build(x)
    tracemalloc.start()
    try:
        y.numpy()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_elementwise_chain_holds_a_few_values_not_one_per_node():
    def chain(x):
        for _ in range(40):
            x = (x * 1.0001 + 0.001).exp().log()  # 3 nodes a round, each a 4 MiB value
        return x

    peak = peak_bytes(chain)
    one = N * 4
    assert peak < 8 * one, f"a 120-node chain of float32[{N}] peaked at {peak / one:.1f} values ({peak} bytes)"


def test_a_float32_op_does_not_copy_its_inputs_to_widen_them():
    peak = peak_bytes(lambda x: x * x)
    one = N * 4
    assert peak < 3.5 * one, f"x * x on float32[{N}] peaked at {peak / one:.1f} values: an input was copied"
