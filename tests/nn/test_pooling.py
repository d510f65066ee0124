"""limn.composed.functional.pooling (max, avg and adaptive pools; Tensor.max_pool2d and avg_pool2d) and limn.nn's pool
layers against torch.nn.functional and torch.nn: values, input gradients and indices, on numpy and c.

The rule a max pool's gradient follows is torch's loop: the whole gradient of a window goes to one cell,
the first maximum in row-major order, or the last NaN; a window of -infs sends it to its first cell.
"""

import numpy as np
import pytest
import torch
from oracle import Table, case

import limn
import limn.nn as nn

F = "torch.nn.functional"
rng = np.random.default_rng(0)


def _randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


X = _randn(2, 3, 7, 6)  # H odd, W even: ceil_mode and padding both change the count
X1 = _randn(2, 3, 9)
X3 = _randn(1, 2, 3, 5, 4)
# the edge inputs share one shape, so rows that pool them alike share their compiled kernels
TIES = np.array([[[[1, 3, 3, 0], [3, 2, 3, 3], [0, 0, 0, 0], [-1, -1, -1, -1]]]], np.float32)
NAN = np.array([[[[1, np.nan, 2, np.nan], [np.nan, 5, 0, 1], [3, 1, 2, 0], [0, 0, np.nan, 7]]]], np.float32)
NEG_INF = np.full((1, 1, 4, 4), -np.inf, np.float32)
ZEROS = np.array([[[[-0.0, -0.0, 0.0, -0.0], [-0.0, -1.0, -0.0, -0.0], [0.0] * 4, [-0.0] * 4]]], np.float32)
INTS = np.random.default_rng(1).integers(-50, 50, X.shape).astype(np.int32)
EMPTY = np.zeros((0, 2, 4, 4), np.float32)


def _pool(name, args, id, tensor="x", **kw):
    """A case of limn.nn.<name>(x, args) against torch.nn.functional.<name>(x, args)."""
    return case(f"limn.nn.{name}({tensor}, {args})", f"{F}.{name}({tensor}, {args})", id=id, **kw)


def _indices(name, args, id, **kw):
    """A case comparing the indices a pool with return_indices=True gives (int32 here, int64 in torch)."""
    return case(f"limn.nn.{name}(x, {args})[1]", f"{F}.{name}(x, {args})[1]", id=id, grad=False, **kw)


MAX = Table(
    [
        _pool("max_pool2d", "2", "max2d-k2", x=X),
        _pool("max_pool2d", "3, 2, 1", "max2d-k3-s2-p1", x=X),
        _pool("max_pool2d", "3, 2, 1, ceil_mode=True", "max2d-ceil-window-starting-in-the-padding", x=X),
        _pool("max_pool2d", "2, 3, ceil_mode=True", "max2d-ceil-stride-past-kernel", x=X),
        _pool("max_pool2d", "(7, 6)", "max2d-kernel-is-the-input", x=X),
        _pool("max_pool2d", "(3, 2), 1, 1, (2, 1)", "max2d-dilated-rectangular", x=X),
        _pool("max_pool2d", "2, 1", "max2d-ties-first-in-row-major", x=TIES),
        _pool("max_pool2d", "2, 1", "max2d-nan-last-nan-wins", x=NAN),
        _pool("max_pool2d", "2, 1", "max2d-signed-zeros", signed_zeros=True, x=ZEROS),
        _pool("max_pool2d", "3, 1, 1", "max2d-ties-overlapping-windows-add", x=TIES),
        _pool("max_pool2d", "3, 1, 1", "max2d-all-neg-inf-first-cell", x=NEG_INF),
        _pool("max_pool2d", "3, 2, 1", "max2d-int32", grad=False, x=INTS),
        _pool("max_pool2d", "3, 2, 1", "max2d-float64", x=X.astype(np.float64)),
        _pool("max_pool2d", "2", "max2d-empty-batch", x=EMPTY),
        _pool("max_pool2d", "2", "max2d-unbatched", x=X[0]),
        _indices("max_pool2d", "3, 2, 1, return_indices=True", "max2d-indices", x=X),
        _indices("max_pool2d", "2, 1, return_indices=True", "max2d-indices-ties-nan", x=NAN),
        _pool("max_pool1d", "4, 2, 2, ceil_mode=True", "max1d-ceil-padded", x=X1),
        _pool("max_pool3d", "2, 1, 1", "max3d", x=X3),
        case("x.max_pool2d()", f"{F}.max_pool2d(x, (2, 2))", id="method-default-kernel", x=X),
        case(
            "x.max_pool2d(kernel_size=3, padding=(1, 1, 0, 0))",
            f"{F}.max_pool2d({F}.pad(x, (1, 1), value=-math.inf), 3)",
            id="method-padding-per-side",
            x=X,
        ),
    ]
)


@pytest.mark.parametrize("name", MAX.ids)
def test_max_pool_matches_torch(device, name):
    MAX.assert_agrees(device, name)


AVG = Table(
    [
        _pool("avg_pool2d", "2", "avg2d-k2", x=X),
        _pool("avg_pool2d", "3, 2, 1", "avg2d-padding-counted", x=X),
        _pool("avg_pool2d", "3, 2, 1, count_include_pad=False", "avg2d-padding-not-counted", x=X),
        _pool("avg_pool2d", "3, 2, 1, ceil_mode=True", "avg2d-ceil-counted-but-not-past-the-padding", x=X),
        _pool("avg_pool2d", "3, 2, 1, ceil_mode=True, count_include_pad=False", "avg2d-ceil-not-counted", x=X),
        _pool("avg_pool2d", "(3, 2), 1, (1, 0), divisor_override=5", "avg2d-divisor-override", x=X),
        _pool("avg_pool2d", "(7, 6)", "avg2d-kernel-is-the-input", x=X),
        _pool("avg_pool2d", "2, 1", "avg2d-nan-stays-in-its-windows", x=NAN),
        _pool("avg_pool2d", "3, 2, 1", "avg2d-float64", x=X.astype(np.float64)),
        _pool("avg_pool2d", "2", "avg2d-empty-batch", x=EMPTY),
        _pool("avg_pool1d", "4, 3, 2, True, False", "avg1d-ceil-not-counted", x=X1),
        _pool("avg_pool3d", "2, 1, 1", "avg3d", x=X3),
        case("x.avg_pool2d()", f"{F}.avg_pool2d(x, (2, 2))", id="method-avg-default-kernel", x=X),
    ]
)


@pytest.mark.parametrize("name", AVG.ids)
def test_avg_pool_matches_torch(device, name):
    AVG.assert_agrees(device, name)


ADAPTIVE = Table(
    [
        _pool("adaptive_avg_pool2d", "(3, 4)", "adaptive-avg-overlapping-windows", x=X),
        _pool("adaptive_avg_pool2d", "1", "adaptive-avg-global", x=X),
        _pool("adaptive_avg_pool2d", "(9, 4)", "adaptive-avg-more-cells-than-input", x=X),
        _pool("adaptive_avg_pool2d", "(None, 2)", "adaptive-avg-none-keeps-a-dim", x=X),
        _pool("adaptive_avg_pool2d", "(0, 2)", "adaptive-avg-output-size-0", grad=False, x=X),
        _pool("adaptive_max_pool2d", "(3, 0)", "adaptive-max-output-size-0", grad=False, x=X),
        _pool("adaptive_avg_pool1d", "4", "adaptive-avg1d", x=X1),
        _pool("adaptive_avg_pool3d", "(2, 3, 2)", "adaptive-avg3d", x=X3),
        _pool("adaptive_max_pool2d", "(3, 4)", "adaptive-max", x=X),
        _pool("adaptive_max_pool2d", "(3, 3)", "adaptive-max-ties", x=TIES),
        _pool("adaptive_max_pool2d", "(3, 3)", "adaptive-max-nan", x=NAN),
        _indices("adaptive_max_pool2d", "(3, 4), True", "adaptive-max-indices", x=X),
        _pool("adaptive_max_pool1d", "4", "adaptive-max1d", x=X1),
    ]
)


@pytest.mark.parametrize("name", ADAPTIVE.ids)
def test_adaptive_pool_matches_torch(device, name):
    ADAPTIVE.assert_agrees(device, name)


# ---- the layers: each calls its function with its arguments (the same as rows above, so kernels are shared) ----

LAYERS = Table(
    [
        case("limn.nn.MaxPool2d(3, 2, 1, ceil_mode=True)(x)", "torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)(x)", x=X),
        case("limn.nn.MaxPool1d(4, 2, 2, ceil_mode=True)(x)", "torch.nn.MaxPool1d(4, 2, 2, ceil_mode=True)(x)", x=X1),
        case(
            "limn.nn.AvgPool2d(3, 2, 1, count_include_pad=False)(x)",
            "torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False)(x)",
            x=X,
        ),
        case("limn.nn.AvgPool1d(4, 3, 2, True, False)(x)", "torch.nn.AvgPool1d(4, 3, 2, True, False)(x)", x=X1),
        case("limn.nn.AdaptiveAvgPool2d((None, 2))(x)", "torch.nn.AdaptiveAvgPool2d((None, 2))(x)", x=X),
        case("limn.nn.AdaptiveAvgPool1d(4)(x)", "torch.nn.AdaptiveAvgPool1d(4)(x)", x=X1),
        case("limn.nn.AdaptiveMaxPool2d((3, 4))(x)", "torch.nn.AdaptiveMaxPool2d((3, 4))(x)", x=X),
        case("limn.nn.AdaptiveMaxPool1d(4)(x)", "torch.nn.AdaptiveMaxPool1d(4)(x)", x=X1),
        case("limn.nn.MaxPool3d(2, 1, 1)(x)", "torch.nn.MaxPool3d(2, 1, 1)(x)", x=X3),
        case("limn.nn.AvgPool3d(2, 1, 1)(x)", "torch.nn.AvgPool3d(2, 1, 1)(x)", x=X3),
        case("limn.nn.AdaptiveAvgPool3d((2, 3, 2))(x)", "torch.nn.AdaptiveAvgPool3d((2, 3, 2))(x)", x=X3),
    ]
)


@pytest.mark.parametrize("name", LAYERS.ids)
def test_pool_layers_match_torch(device, name):
    LAYERS.assert_agrees(device, name)


def test_max_pool_layer_with_indices_gives_torchs_indices():
    out, idx = nn.MaxPool2d(2, return_indices=True)(limn.Tensor(X))
    want, want_idx = torch.nn.MaxPool2d(2, return_indices=True)(torch.tensor(X))
    np.testing.assert_array_equal(idx.numpy(), want_idx.numpy())
    assert idx.dtype == limn.int32  # torch's are int64: limn's widest int is int32
    np.testing.assert_allclose(out.numpy(), want.numpy())


# ---- errors, where torch raises ----


def test_padding_past_half_the_kernel_raises():
    with pytest.raises(ValueError, match="at most half the kernel"):
        nn.max_pool2d(limn.Tensor(X), 2, padding=2)
    with pytest.raises(ValueError, match="at most half the kernel"):
        nn.avg_pool2d(limn.Tensor(X), 3, padding=(2, 0))


def test_an_output_too_small_raises():
    with pytest.raises(ValueError, match="too small"):
        nn.max_pool2d(limn.Tensor(X), (8, 2))


def test_bool_max_pool_and_int_avg_pool_raise_as_in_torch():
    with pytest.raises(TypeError, match="bool"):
        nn.max_pool2d(limn.Tensor(np.zeros((1, 1, 2, 2), bool)), 2)
    with pytest.raises(TypeError, match="int32"):
        nn.avg_pool2d(limn.Tensor(INTS), 2)
    with pytest.raises(TypeError, match="int32"):
        nn.adaptive_max_pool2d(limn.Tensor(INTS), 2)


def test_wrong_ranks_and_empty_channels_raise():
    with pytest.raises(ValueError, match="3-d"):
        nn.max_pool2d(limn.Tensor(X1[0, 0]), 2)  # 1-d
    with pytest.raises(ValueError, match="only the batch dim"):
        nn.max_pool2d(limn.Tensor(np.zeros((2, 0, 4, 4), np.float32)), 2)
    with pytest.raises(ValueError, match="kernel_size"):
        nn.max_pool2d(limn.Tensor(X), (2, 2, 2))


# ---- half widths: the numpy device only (the c device declines float16 and bfloat16) ----

HALF = Table(
    [
        _pool("max_pool2d", "3, 2, 1", "max2d-float16", x=X.astype(np.float16)),
        _pool("avg_pool2d", "3, 2, 1", "avg2d-float16-sums-in-float32", tol=1e-3, x=X.astype(np.float16)),
        _pool("adaptive_avg_pool2d", "(3, 4)", "adaptive-avg-float16", tol=1e-3, x=X.astype(np.float16)),
    ]
)


@pytest.mark.parametrize("name", HALF.ids)
def test_half_width_pools_match_torch_on_numpy(name):
    HALF.assert_agrees("numpy", name)
