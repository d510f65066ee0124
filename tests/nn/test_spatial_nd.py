"""The N-d spatial ops under torch's names (conv1d/3d, conv_transpose1d/3d, the 1-d and 3-d pools, max_unpool)
and tinygrad's N-d Tensor methods (Tensor.conv2d and friends read the spatial rank from the weight or the
kernel_size), against torch.nn.functional: values and input gradients, on numpy and c.

max_unpool's rule: each value is written at its index, and its gradient is the output's gradient at that
index, repeated indices included (their values agree when they come from a max pool).
"""

import math

import numpy as np
import pytest
from oracle import Table, case

import limn
import limn.nn as nn

F = "torch.nn.functional"
rng = np.random.default_rng(3)


def _randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


X1, W1, B1 = _randn(2, 4, 9), _randn(6, 2, 3), _randn(6)  # groups=2 fits
W1G = _randn(6, 4, 3)
X3, W3, B3 = _randn(1, 2, 4, 5, 4), _randn(3, 2, 2, 3, 2), _randn(3)
WT1, WT3 = _randn(4, 3, 3), _randn(2, 2, 2, 2, 3)  # (C_in, C_out / groups, *k)
X2 = _randn(2, 3, 7, 6)
TIES = np.array([[[[1, 3, 3, 0], [3, 2, 3, 3], [0, 0, 0, 0], [-1, -1, -1, -1]]]], np.float32)
INF_NAN = np.array([[[[math.inf, -math.inf, math.nan], [1.0, 2.0, 3.0]]]], np.float32)  # tinygrad's unpool test
EDGES = np.array(
    [[[[np.nan, 1, -np.inf, -np.inf], [2, np.nan, -np.inf, -np.inf], [5, 5, np.inf, 1], [5, 5, 2, np.inf]]]], np.float32
)
# indices into a 3 x 3 plane, cell 1 written three times with one value (as from a pool: torch's order of
# writes to a repeated index is not fixed, so their values agree); each write gets the gradient
V = np.array([[[[2.5, 2.5], [-1.0, 2.5]]]], np.float32)
DUPLICATES = np.array([[[[1, 1], [6, 1]]]], np.int64)


def _fn(name, args, id, **inputs):
    """limn.nn.<name>(args) against torch.nn.functional.<name>(args)."""
    return case(f"limn.nn.{name}({args})", f"{F}.{name}({args})", id=id, **inputs)


def _unpool(n, pool_args, unpool_args, id, **inputs):
    """max_unpool{n}d of max_pool{n}d's values and indices, both sides their own."""
    pool, unpool = f"max_pool{n}d(x, {pool_args}, return_indices=True)", f"max_unpool{n}d"
    return case(
        f"limn.nn.{unpool}(*limn.nn.{pool}, {unpool_args})",
        f"{F}.{unpool}(*{F}.{pool}, {unpool_args})",
        id=id,
        **inputs,
    )


TABLE = Table(
    [
        # torch's names, torch's rank checks
        _fn("conv1d", "x, w, b, 2, 1, 1, 2", "conv1d-stride-padding-groups", x=X1, w=W1, b=B1),
        _fn("conv1d", "x, w, None, 1, 'same', 2, 2", "conv1d-same-dilated", x=X1, w=W1),
        _fn("conv1d", "x[0], w, b", "conv1d-unbatched", x=X1, w=W1G, b=B1),
        _fn("conv3d", "x, w, b, 1, 1", "conv3d-padded", x=X3, w=W3, b=B3),
        _fn("conv3d", "x, w, None, (2, 1, 2), 0, (1, 2, 1)", "conv3d-strided-dilated", x=X3, w=W3),
        _fn("conv_transpose1d", "x, w, None, 2, 1, 1, 1, 1", "conv-transpose1d-output-padding", x=X1, w=WT1),
        _fn("conv_transpose3d", "x, w, None, 2, 1", "conv-transpose3d-strided", x=X3, w=WT3),
        _fn("conv_transpose3d", "x, w, b, 1, 0, 0, 1, 2", "conv-transpose3d-bias-dilated", x=X3, w=WT3, b=B3[:2]),
        _fn("max_pool1d", "x, 3, 2, 1", "max-pool1d", x=X1),
        _fn("max_pool3d", "x, (2, 3, 2), 2, 1, ceil_mode=True", "max-pool3d-ceil", x=X3),
        _fn("avg_pool1d", "x, 3, 2, 1", "avg-pool1d", x=X1),
        _fn("avg_pool3d", "x, 2, 1, 1, False, False", "avg-pool3d-padding-not-counted", x=X3),
        _fn("avg_pool3d", "x, 3, 2, 1, True, True, 7", "avg-pool3d-divisor-override", x=X3),
        # tinygrad's methods: the 2d names over any spatial rank
        # (each with the arguments of a row above, so the two share their compiled kernels)
        case(
            "x.conv2d(w, b, 2, 1, 1, 2)",
            f"{F}.conv1d(x, w, b, 2, 1, 1, 2)",
            id="method-conv2d-is-conv1d",
            x=X1,
            w=W1,
            b=B1,
        ),
        case(
            "x.conv2d(w, b, padding=[1, 1, 1, 1, 1, 1])",
            f"{F}.conv3d(x, w, b, padding=1)",
            id="method-conv2d-is-conv3d-per-side-padding",
            x=X3,
            w=W3,
            b=B3,
        ),
        case(
            "x.conv_transpose2d(w, None, 2, 1, 1, 1, 1)",
            f"{F}.conv_transpose1d(x, w, None, 2, 1, 1, 1, 1)",
            id="method-conv-t-1d",
            x=X1,
            w=WT1,
        ),
        case(
            "x.conv_transpose2d(w, None, 2, 1)",
            f"{F}.conv_transpose3d(x, w, None, 2, 1)",
            id="method-conv-t-3d",
            x=X3,
            w=WT3,
        ),
        case("x.max_pool2d((3,), 2, 1)", f"{F}.max_pool1d(x, 3, 2, 1)", id="method-max-pool-1d", x=X1),
        case(
            "x.max_pool2d((2, 3, 2), 2, 1, ceil_mode=True)",
            f"{F}.max_pool3d(x, (2, 3, 2), 2, 1, ceil_mode=True)",
            id="method-max-pool-3d",
            x=X3,
        ),
        case("x.avg_pool2d((3,), 2, 1)", f"{F}.avg_pool1d(x, 3, 2, 1)", id="method-avg-pool-1d", x=X1),
        case(
            "x.avg_pool2d((2, 2, 2), 1, 1, count_include_pad=False)",
            f"{F}.avg_pool3d(x, 2, 1, 1, count_include_pad=False)",
            id="method-avg-pool-3d",
            x=X3,
        ),
        case("x.conv1d(w, b, 2, 1, 1, 2)", f"{F}.conv1d(x, w, b, 2, 1, 1, 2)", id="method-conv1d", x=X1, w=W1, b=B1),
        case("x.conv3d(w, b, 1, 1)", f"{F}.conv3d(x, w, b, 1, 1)", id="method-conv3d", x=X3, w=W3, b=B3),
        case("x.max_pool1d(3, 2, 1)", f"{F}.max_pool1d(x, 3, 2, 1)", id="method-max-pool1d", x=X1),
        case(
            "x.avg_pool3d(2, 1, 1, False, False)",
            f"{F}.avg_pool3d(x, 2, 1, 1, False, False)",
            id="method-avg-pool3d",
            x=X3,
        ),
        # max_unpool: forward and backward through the pool
        _unpool(2, "2", "2", "unpool2d-k2", x=X2),
        _unpool(2, "3, 2, 1", "3, 2, 1, output_size=(7, 6)", "unpool2d-padded-output-size", x=X2),
        _unpool(
            2, "(3, 2), (2, 3)", "(3, 2), (2, 3), output_size=(99, 99, 7, 6)", "unpool2d-output-size-n-plus-2", x=X2
        ),
        _unpool(2, "2, 1", "2, 1", "unpool2d-ties-overlapping-windows", x=TIES),
        _unpool(2, "2", "2", "unpool2d-inf-nan-tinygrad", x=INF_NAN),
        _unpool(2, "2, 1", "2, 1", "unpool2d-nan-and-neg-inf-windows", x=EDGES),
        _unpool(2, "2", "2", "unpool2d-unbatched", x=X2[0]),
        _unpool(1, "3, 2, 1", "3, 2, 1", "unpool1d", x=X1),
        _unpool(3, "2", "2, output_size=(4, 5, 4)", "unpool3d-output-size", x=X3),
        case(
            "Tensor.max_unpool2d(*x.max_pool2d((2, 2), return_indices=True), (2, 2))",
            f"{F}.max_unpool2d(*{F}.max_pool2d(x, (2, 2), return_indices=True), (2, 2))",
            id="method-unpool2d",
            x=X2,
        ),
        case(
            "Tensor.max_unpool2d(*x.max_pool2d((3,), 2, 1, return_indices=True), (3,), 2, 1)",
            f"{F}.max_unpool1d(*{F}.max_pool1d(x, 3, 2, 1, return_indices=True), 3, 2, 1)",
            id="method-unpool-1d",
            x=X1,
        ),
        _fn("max_unpool2d", "v, i, 2, 1", "unpool2d-repeated-index-every-write-gets-the-gradient", v=V, i=DUPLICATES),
        case(
            "limn.nn.MaxUnpool2d(3, 2, 1)(*limn.nn.MaxPool2d(3, 2, 1, return_indices=True)(x), (7, 6))",
            "torch.nn.MaxUnpool2d(3, 2, 1)(*torch.nn.MaxPool2d(3, 2, 1, return_indices=True)(x), (7, 6))",
            id="unpool-layer",
            x=X2,
        ),
        case(
            "limn.nn.MaxUnpool1d(3, 2, 1)(*limn.nn.MaxPool1d(3, 2, 1, return_indices=True)(x))",
            "torch.nn.MaxUnpool1d(3, 2, 1)(*torch.nn.MaxPool1d(3, 2, 1, return_indices=True)(x))",
            id="unpool1d-layer",
            x=X1,
        ),
        _fn("adaptive_max_pool3d", "x, (2, 3, 3)", "adaptive-max-pool3d", x=X3),
        case(
            "limn.nn.AdaptiveMaxPool3d(2)(x)", "torch.nn.AdaptiveMaxPool3d(2)(x)", id="adaptive-max-pool3d-layer", x=X3
        ),
        # lp pools: (sum x^p)^(1/p) over each window, torch's formula step for step
        _fn("lp_pool2d", "x, 2, 2", "lp-pool2d-p2", x=np.abs(X2) + 0.5),
        _fn("lp_pool2d", "x, 3, (3, 2), 2, True", "lp-pool2d-p3-ceil", x=np.abs(X2) + 0.5),
        _fn("lp_pool1d", "x, 1.5, 3", "lp-pool1d", x=np.abs(X1) + 0.5),
        _fn("lp_pool3d", "x, 2, 2, 1", "lp-pool3d", x=np.abs(X3) + 0.5),
        _fn("lp_pool2d", "x, 2, 2", "lp-pool2d-negative-values", x=X2),
        case("limn.nn.LPPool2d(2, 3, 2)(x)", "torch.nn.LPPool2d(2, 3, 2)(x)", id="lp-pool2d-layer", x=np.abs(X2) + 0.5),
    ]
)


@pytest.mark.parametrize("name", TABLE.ids)
def test_spatial_nd_matches_torch(device, name):
    TABLE.assert_agrees(device, name)


# ---- errors, where torch raises ----


def test_torch_names_keep_torchs_rank_checks():
    with pytest.raises(limn.ArgumentError, match="5 dims"):
        nn.conv3d(limn.Tensor(X1), limn.Tensor(W1))
    with pytest.raises(limn.ArgumentError, match="5 dims"):
        nn.conv_transpose3d(limn.Tensor(X1), limn.Tensor(WT1))
    with pytest.raises(limn.ArgumentError, match="4 dims"):
        nn.conv2d(limn.Tensor(X1), limn.Tensor(W1))
    with pytest.raises(limn.ArgumentError, match="5-d"):
        nn.max_pool3d(limn.Tensor(X1), 2)
    with pytest.raises(limn.ArgumentError, match="3 or more dims"):
        limn.Tensor(X1).conv2d(limn.Tensor(W1[0]))


def test_unpool_output_size_outside_a_stride_of_the_default_raises():
    v, i = nn.max_pool2d(limn.Tensor(X2), 2, return_indices=True)  # (2, 3, 3, 3): the default output is 6 x 6
    with pytest.raises(limn.ArgumentError, match="dim 0 must be between 4 and 8"):
        nn.max_unpool2d(v, i, 2, output_size=(8, 8))
    with pytest.raises(limn.ArgumentError, match="2 or 4 entries"):
        nn.max_unpool2d(v, i, 2, output_size=(6, 6, 6))


def test_unpool_needs_indices_of_the_inputs_shape_and_float_values():
    v, i = nn.max_pool2d(limn.Tensor(X2), 2, return_indices=True)
    with pytest.raises(limn.ArgumentError, match="indices"):
        nn.max_unpool2d(v, i[..., :1], 2)
    with pytest.raises(TypeError, match="int32"):
        nn.max_unpool2d(v.cast(limn.int32), i, 2)


# conv mistakes torch raises a RuntimeError for: limn.ArgumentError is one (and a ValueError)
X16, W16 = np.ones((2, 16, 2, 2), np.float32), np.ones((32, 16, 3, 3), np.float32)
CONV_MISTAKES = {
    "kernel_larger_than_the_input": (lambda: nn.conv2d(limn.Tensor(X16), limn.Tensor(W16)), "smaller than the kernel"),
    "dilated_kernel_larger_than_the_input": (
        lambda: nn.conv2d(limn.Tensor(np.ones((2, 16, 5, 5), np.float32)), limn.Tensor(W16), dilation=3),
        r"spans \(7, 7\)",
    ),
    "negative_padding": (lambda: nn.conv2d(limn.Tensor(X16), limn.Tensor(W16), padding=-1), "padding must be >= 0"),
    "negative_padding_per_side": (
        lambda: limn.Tensor(X16).conv2d(limn.Tensor(W16), padding=(-1, 0, -1, 0)),
        "padding must be >= 0",
    ),
    "negative_padding_conv1d": (
        lambda: nn.conv1d(limn.Tensor(X1), limn.Tensor(W1G), padding=-1),
        "padding must be >= 0",
    ),
    "three_paddings_for_a_conv2d": (
        lambda: limn.Tensor(X16).conv2d(limn.Tensor(W16), padding=(1, 1, 1)),
        "an int or 2 ints",
    ),
    "conv_transpose_negative_padding": (
        lambda: limn.Tensor(X16).conv_transpose2d(limn.Tensor(W16).transpose(0, 1), padding=-1),
        "must be >= 0",
    ),
    "conv_transpose_three_paddings": (
        lambda: limn.Tensor(X16).conv_transpose2d(limn.Tensor(W16).transpose(0, 1), padding=(1, 1, 1)),
        "an int or 2 ints",
    ),
    "zero_stride": (lambda: nn.conv2d(limn.Tensor(X16), limn.Tensor(W16), stride=0), "must be >= 1"),
}


@pytest.mark.parametrize("mistake", CONV_MISTAKES)
def test_a_conv_mistake_raises_argument_error_a_runtime_error_as_torch(mistake):
    action, message = CONV_MISTAKES[mistake]
    with pytest.raises(limn.ArgumentError, match=message) as raised:
        action()
    assert isinstance(raised.value, RuntimeError) and isinstance(raised.value, ValueError)
