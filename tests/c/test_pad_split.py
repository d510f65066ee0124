"""Pads on the c device: every loop a mask names is cut at the mask's edges, so no conditional load is
left in the C. The oracle is the numpy device.

This matters beyond speed: gcc 12.2 at -O3 with -march/-mtune for znver3, skylake or icelake vectorizes a
small fixed-size loop whose loads are conditional on an outer loop's variable with one mask for every
vector, and drops rows of the answer (`pad(((1, 1), (0, 0)))` of a (5, 2) array lost its row 2).
"""

import numpy as np
import pytest

import limn
from limn import Tensor


def on(device: str, build, x: np.ndarray) -> np.ndarray:
    limn.set_device(device)
    return build(Tensor(x)).numpy()


def test_a_pad_of_the_outer_axis_of_narrow_rows_keeps_every_row():
    x = np.arange(1, 11, dtype=np.float32).reshape(5, 2)
    got = on("c", lambda t: t.pad(((1, 1), (0, 0))), x)
    np.testing.assert_array_equal(got, np.pad(x, ((1, 1), (0, 0))), err_msg="Tensor(x).pad(((1, 1), (0, 0))) on c")


def test_an_outer_loop_with_a_mask_is_split_so_the_c_has_no_conditional_load():
    from limn.c.device import CDevice
    from limn.compiler.codegen import lower_schedule
    from limn.compiler.schedule import schedule

    t = Tensor(np.ones((5, 2), np.float32)).pad(((1, 1), (0, 0)))
    kernel = lower_schedule(schedule([t.node])).kernels[0]
    source = CDevice().render(kernel)
    assert " ? " not in source, f"a pad left a conditional load in the C:\n{source}"


CASES = 40


@pytest.mark.parametrize("seed", range(CASES))
def test_random_pads_of_small_fixed_shapes_match_the_numpy_device(seed):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 10, rng.integers(1, 5)))
    pads = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in shape)
    x = rng.standard_normal(shape).astype(np.float32)
    builds = {
        "pad": lambda t: t.pad(pads),
        "relu(2 pad + 1)": lambda t: (t.pad(pads) * 2 + 1).relu(),
        "pad.sum(-1)": lambda t: t.pad(pads).sum(axis=-1),
        "pad.T * 3": lambda t: t.pad(pads).permute(tuple(reversed(range(len(shape))))) * 3,
    }
    name = list(builds)[seed % len(builds)]
    expected, got = on("numpy", builds[name], x), on("c", builds[name], x)
    np.testing.assert_allclose(
        got, expected, rtol=1e-6, atol=1e-6, err_msg=f"{name} with pads={pads} of x = rng.standard_normal({shape})"
    )
