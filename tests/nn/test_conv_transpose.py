"""limn.composed.functional.conv_transpose and the padding forms of limn.composed.functional.convolution against torch,
on numpy and c: the transposed convs (stride, padding, output_padding, dilation, groups) and their layers; conv padding
as "same", "valid" and per side (Tensor.conv2d); padding modes (limn.nn.pad and Conv2d's padding_mode).
"""

import numpy as np
import pytest
import torch
from oracle import Table, case
from test_layers import check_layer

import limn
import limn.nn as nn
from limn.composed.functional.convolution import padding_pairs

F = "torch.nn.functional"
rng = np.random.default_rng(0)


def _randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


X = _randn(2, 4, 5, 6)
X1 = _randn(2, 4, 7)


def _transposed(args, id, w_shape, x=X, bias=True, **kw):
    """conv_transpose2d (or 1d, by the weight's rank) of x by a weight of w_shape, with args after the bias."""
    name = "conv_transpose2d" if len(w_shape) == 4 else "conv_transpose1d"
    b = "b" if bias else "None"
    inputs = {"x": x, "w": _randn(*w_shape).astype(x.dtype)}
    if bias:
        inputs["b"] = _randn(w_shape[1] * kw.pop("groups", 1)).astype(x.dtype)
    return case(f"limn.nn.{name}(x, w, {b}, {args})", f"{F}.{name}(x, w, {b}, {args})", id=id, **inputs, **kw)


W_T = _randn(4, 3, 3, 2)  # (C_in, C_out / groups, kH, kW)
B_T = _randn(3)

# each conv compiles to large kernels on c, so the rows are few, and each combines several arguments
TRANSPOSED = Table(
    [
        case(
            "limn.nn.conv_transpose2d(x, w, b, 2, 1, 1)",
            f"{F}.conv_transpose2d(x, w, b, 2, 1, 1)",
            id="ct2d-stride-padding-output-padding",
            x=X,
            w=W_T,
            b=B_T,
        ),
        # H is padded by 5 > dilation (k - 1) = 4: the full conv's padding turns into a crop
        _transposed(
            "(3, 2), (5, 0), (1, 0), 2, (2, 1)", "ct2d-dilated-rectangular-groups-cropped", (4, 2, 3, 2), groups=2
        ),
        _transposed("2, 1, 1", "ct1d-stride-padding-output-padding", (4, 3, 4), x=X1),
        # Tensor.conv_transpose2d takes torch's order (bias, stride, padding, output_padding, groups, dilation)
        case("x.conv_transpose2d(w, b, 2, 1, 1)", f"{F}.conv_transpose2d(x, w, b, 2, 1, 1)", x=X, w=W_T, b=B_T),
    ]
)


@pytest.mark.parametrize("name", TRANSPOSED.ids)
def test_conv_transpose_matches_torch(device, name):
    TRANSPOSED.assert_agrees(device, name)


W = _randn(3, 4, 2, 1)  # an even kernel (kept small: each conv tap adds to the c kernels' source)

PADDING = Table(
    [
        case("limn.nn.conv2d(x, w, padding='same')", f"{F}.conv2d(x, w, padding='same')", x=X, w=W),
        # Tensor.conv2d takes torch's order (bias, stride, padding, dilation, groups); 4 ints pad per side
        case(
            "x.conv2d(w, b, 2, (1, 2, 0, 3))",
            f"{F}.conv2d({F}.pad(x, (1, 2, 0, 3)), w, b, 2)",
            id="conv2d-padding-per-side-left-right-top-bottom",
            x=X,
            w=W,
            b=_randn(3),
        ),
        case("limn.nn.pad(x, (2, 1, 3, 0), mode='reflect')", f"{F}.pad(x, (2, 1, 3, 0), mode='reflect')", x=X),
        case("limn.nn.pad(x, (2, 1, 3, 0), mode='replicate')", f"{F}.pad(x, (2, 1, 3, 0), mode='replicate')", x=X),
        case("limn.nn.pad(x, (6, 1, 0, 5), mode='circular')", f"{F}.pad(x, (6, 1, 0, 5), mode='circular')", x=X),
        case("limn.nn.pad(x, (1, -2, -1, 2), value=3.0)", f"{F}.pad(x, (1, -2, -1, 2), value=3.0)", x=X),
    ]
)


def test_valid_padding_is_none_and_same_puts_the_odd_cell_after():
    assert padding_pairs("valid", (4, 3), (1, 1), (1, 1), "conv2d") == ((0, 0), (0, 0))
    assert padding_pairs("same", (4, 3), (1, 1), (2, 1), "conv2d") == ((3, 3), (1, 1))
    assert padding_pairs("same", (4, 2), (1, 1), (1, 1), "conv2d") == ((1, 2), (0, 1))


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # torch's note on its own copy of the input
@pytest.mark.parametrize("name", PADDING.ids)
def test_conv_padding_forms_match_torch(device, name):
    PADDING.assert_agrees(device, name)


# ---- the layers, with torch's weights copied in by name ----


@pytest.mark.parametrize(
    "args, kw",
    [((4, 6, (2, 3)), dict(stride=(1, 2), padding=1, output_padding=(0, 1), groups=2, dilation=(2, 1)))],
    ids=["strided-padded-grouped-dilated"],
)
def test_conv_transpose2d_layer_matches_torch(device, args, kw):
    check_layer(nn.ConvTranspose2d(*args, **kw), torch.nn.ConvTranspose2d(*args, **kw), X)


def test_conv_transpose1d_layer_matches_torch(device):
    check_layer(
        nn.ConvTranspose1d(4, 2, 3, stride=3, padding=1), torch.nn.ConvTranspose1d(4, 2, 3, stride=3, padding=1), X1
    )


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv2d_padding_modes_match_torch(device, mode):
    kw = dict(padding=(2, 1), padding_mode=mode)
    check_layer(nn.Conv2d(4, 3, 3, **kw), torch.nn.Conv2d(4, 3, 3, **kw), X)


def test_conv1d_same_padding_with_reflect_matches_torch(device):
    kw = dict(padding="same", padding_mode="reflect", dilation=2)
    check_layer(nn.Conv1d(4, 3, 4, **kw), torch.nn.Conv1d(4, 3, 4, **kw), X1)


def test_conv_transpose_weight_layout_and_init_are_torchs():
    layer = nn.ConvTranspose2d(4, 6, (3, 2), groups=2)
    assert layer.weight.shape == (4, 3, 3, 2) and layer.bias.shape == (6,)
    bound = 1 / np.sqrt(3 * 3 * 2)  # torch's fan_in from the (in, out / groups, *k) layout: out / groups * k
    w = layer.weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound


# ---- errors, where torch raises ----


def test_output_padding_not_below_stride_or_dilation_raises():
    with pytest.raises(ValueError, match="output_padding"):
        nn.conv_transpose2d(limn.Tensor(X), limn.Tensor(_randn(4, 2, 3, 3)), stride=2, output_padding=2)


def test_conv_transpose_channel_mismatch_raises():
    with pytest.raises(ValueError, match="does not fit weight"):
        nn.conv_transpose2d(limn.Tensor(X), limn.Tensor(_randn(3, 2, 3, 3)))


def test_same_padding_with_a_stride_raises():
    with pytest.raises(ValueError, match="stride 1"):
        nn.conv2d(limn.Tensor(X), limn.Tensor(W), stride=2, padding="same")
    with pytest.raises(ValueError, match="stride 1"):
        nn.Conv2d(4, 3, 3, stride=2, padding="same")


def test_bad_padding_modes_and_widths_raise():
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(4, 3, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="below the size"):
        nn.pad(limn.Tensor(X), (6, 0), mode="reflect")  # W is 6: reflect needs widths < 6
    with pytest.raises(ValueError, match="even number"):
        nn.pad(limn.Tensor(X), (1, 2, 3))
