"""limn.composed.functional.resample.interpolate (limn.nn.interpolate, Tensor.interpolate) and limn.nn.Upsample against
torch's F.interpolate and nn.Upsample: values and input gradients, on numpy and c.

Trap the nearest rows hold: with scale_factor given (and recompute_scale_factor not set) torch reads cell
floor(o / scale_factor), which can pick other cells than floor(o in / out); limn follows torch.
"""

import numpy as np
import pytest
import torch
from oracle import Table, case

import limn
import limn.nn as nn

F = "torch.nn.functional"
rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
X1 = X[:, :, 0]  # (N, C, L)
X3 = rng.standard_normal((1, 2, 3, 4, 2)).astype(np.float32)
EDGE = np.array([[[[1.0, np.nan, -np.inf], [-0.0, 2.0, np.inf]]]], np.float32)
# uint8: torch's CPU resizes it with int16 weights and a rounded shift per dim, saturating each pass
U8 = np.random.default_rng(1).integers(0, 256, (2, 3, 5, 4)).astype(np.uint8)
U8_WIDE = np.random.default_rng(2).integers(0, 256, (1, 6, 4, 5)).astype(np.uint8)  # C > 4: torch's generic path
CHECKER = (np.indices((1, 1, 4, 4)).sum(0) % 2 * 255).astype(np.uint8)  # bicubic overshoots: saturated at 0, 255


def _interp(args, id, x=X, **kw):
    return case(f"limn.nn.interpolate(x, {args})", f"{F}.interpolate(x, {args})", id=id, x=x, **kw)


TABLE = Table(
    [
        _interp("scale_factor=2", "nearest-x2"),
        _interp("size=(7, 3)", "nearest-size-up-and-down"),
        _interp("scale_factor=1.7", "nearest-scale-factor-picks-by-the-factor"),
        _interp("scale_factor=1.7, recompute_scale_factor=True", "nearest-recomputed-scale"),
        _interp("scale_factor=(0.5, 2.3)", "nearest-per-dim-factors"),
        _interp("size=(7, 9), mode='nearest-exact'", "nearest-exact"),
        _interp("size=(7, 9), mode='bilinear'", "bilinear-up"),
        _interp("size=(3, 2), mode='bilinear'", "bilinear-down"),
        _interp("size=(7, 9), mode='bilinear', align_corners=True", "bilinear-align-corners"),
        _interp("size=(1, 1), mode='bilinear', align_corners=True", "bilinear-align-corners-to-one-cell"),
        _interp("scale_factor=1.5, mode='bilinear'", "bilinear-scale-factor"),
        _interp("scale_factor=2, mode='nearest'", "nearest-edge-values", x=EDGE, signed_zeros=True),
        _interp("size=(3, 3), mode='area'", "area-is-adaptive-avg-pool"),
        _interp("size=9, mode='linear'", "linear-1d", x=X1),
        _interp("scale_factor=3, mode='nearest'", "nearest-1d", x=X1),
        _interp("size=(5, 3, 4), mode='trilinear', align_corners=True", "trilinear", x=X3),
        _interp("size=(2, 5, 3)", "nearest-3d", x=X3),
        _interp("size=(7, 9), mode='bilinear'", "bilinear-float64", x=X.astype(np.float64)),
        _interp("size=(7, 9), mode='bilinear'", "bilinear-empty-batch", x=np.zeros((0, 3, 5, 4), np.float32)),
        case(
            "x.interpolate((7, 9))", f"{F}.interpolate(x, (7, 9), mode='bilinear')", id="method-linear-is-bilinear", x=X
        ),
        case(
            "x.interpolate((7, 9), mode='nearest')",
            f"{F}.interpolate(x, (7, 9), mode='nearest')",
            id="method-nearest",
            x=X,
        ),
        _interp("size=(7, 9), mode='bicubic'", "bicubic-up"),
        _interp("size=(3, 2), mode='bicubic'", "bicubic-down"),
        _interp("size=(7, 9), mode='bicubic', align_corners=True", "bicubic-align-corners"),
        _interp("scale_factor=1.5, mode='bicubic'", "bicubic-scale-factor"),
        _interp("size=(7, 9), mode='bicubic'", "bicubic-float64", x=X.astype(np.float64)),
        _interp("size=(7, 9)", "uint8-nearest", x=U8),
        _interp("scale_factor=1.7", "uint8-nearest-scale-factor", x=U8),
        _interp("size=(7, 9), mode='nearest-exact'", "uint8-nearest-exact", x=U8),
        _interp("size=7", "uint8-nearest-1d", x=U8[:, :, 0]),
        _interp("size=(5, 3, 4), mode='nearest-exact'", "uint8-nearest-exact-3d", x=U8[:, :, None]),
        _interp("size=(7, 9), mode='bilinear'", "uint8-bilinear-up-rounds-as-torch", x=U8),
        _interp("size=(3, 2), mode='bilinear'", "uint8-bilinear-down", x=U8),
        _interp("size=(7, 9), mode='bilinear', align_corners=True", "uint8-bilinear-align-corners", x=U8),
        _interp("size=(5, 9), mode='bilinear'", "uint8-bilinear-one-dim-kept", x=U8),
        _interp("scale_factor=1.5, mode='bilinear'", "uint8-bilinear-scale-factor", x=U8),
        _interp("size=(7, 3), mode='bilinear'", "uint8-bilinear-many-channels", x=U8_WIDE),
        _interp("size=(7, 9), mode='bicubic'", "uint8-bicubic", x=U8),
        _interp("size=(3, 2), mode='bicubic', align_corners=True", "uint8-bicubic-down-align-corners", x=U8),
        _interp("size=(7, 3), mode='bicubic'", "uint8-bicubic-many-channels", x=U8_WIDE),
        _interp("size=(7, 7), mode='bicubic'", "uint8-bicubic-saturates", x=CHECKER),
        _interp("size=(5, 4), mode='bilinear'", "uint8-same-size-is-a-copy", x=U8),
        _interp("size=(3, 2), mode='bilinear', antialias=True", "antialias-bilinear-down", x=X),
        _interp("size=(2, 3), mode='bicubic', antialias=True", "antialias-bicubic-down", x=X),
        _interp("size=(7, 9), mode='bilinear', antialias=True", "antialias-bilinear-up", x=X),
        _interp("size=(3, 2), mode='bicubic', antialias=True, align_corners=True", "antialias-bicubic-corners", x=X),
        _interp("scale_factor=0.6, mode='bilinear', antialias=True", "antialias-scale-factor", x=X),
        _interp("size=(3, 2), mode='bilinear', antialias=True", "uint8-antialias-bilinear", x=U8),
        _interp("size=(2, 3), mode='bicubic', antialias=True", "uint8-antialias-bicubic", x=U8),
        case(
            "x.interpolate((7, 9))",
            f"{F}.interpolate(x, (7, 9), mode='bilinear')",
            id="uint8-method-linear-is-bilinear",
            x=U8,
        ),
        case("limn.nn.Upsample(scale_factor=2)(x)", "torch.nn.Upsample(scale_factor=2)(x)", x=X),
        case("limn.nn.UpsamplingNearest2d(size=(7, 3))(x)", "torch.nn.UpsamplingNearest2d(size=(7, 3))(x)", x=X),
        case(
            "limn.nn.UpsamplingBilinear2d(size=(7, 9))(x)",
            "torch.nn.UpsamplingBilinear2d(size=(7, 9))(x)",
            id="upsampling-bilinear-aligns-corners",
            x=X,
        ),
        case(
            "limn.nn.Upsample(size=(7, 9), mode='bilinear', align_corners=True)(x)",
            "torch.nn.Upsample(size=(7, 9), mode='bilinear', align_corners=True)(x)",
            x=X,
        ),
    ]
)


@pytest.mark.parametrize("name", TABLE.ids)
def test_interpolate_matches_torch(device, name):
    TABLE.assert_agrees(device, name)


def test_nearest_upsampling_by_a_factor_repeats_cells():
    x = limn.Tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    assert nn.interpolate(x, scale_factor=2).tolist() == [
        [[[1.0, 1.0, 2.0, 2.0], [1.0, 1.0, 2.0, 2.0], [3.0, 3.0, 4.0, 4.0], [3.0, 3.0, 4.0, 4.0]]]
    ]


# ---- errors, where torch raises ----


def test_size_and_scale_factor_together_or_neither_raise():
    x = limn.Tensor(X)
    with pytest.raises(ValueError, match="exactly one"):
        nn.interpolate(x, size=4, scale_factor=2)
    with pytest.raises(ValueError, match="exactly one"):
        nn.interpolate(x)


def test_align_corners_with_nearest_raises():
    with pytest.raises(ValueError, match="align_corners"):
        nn.interpolate(limn.Tensor(X), scale_factor=2, align_corners=True)


def test_a_linear_mode_of_the_wrong_rank_raises():
    with pytest.raises(ValueError, match="4-d input"):
        nn.interpolate(limn.Tensor(X1), size=3, mode="bilinear")
    with pytest.raises(ValueError, match="mode must be one of"):
        nn.interpolate(limn.Tensor(X), size=3, mode="cubic")


def test_antialias_outside_bilinear_and_bicubic_raises():
    with pytest.raises(ValueError, match="antialias"):
        nn.interpolate(limn.Tensor(X), size=3, mode="nearest", antialias=True)
    with pytest.raises(ValueError, match="Anti-alias"):
        torch.nn.functional.interpolate(torch.tensor(X), size=3, mode="nearest", antialias=True)


def test_antialias_to_width_1_is_torchs_width_2_column_unlike_torch():
    # torch's float antialias kernel gives every row the first row's value when the output width is 1 (torch
    # 2.15: arange(10) as (10, 1) -> (5, 1) gives 0.714 five times); limn gives what torch gives at width 2
    x = np.arange(10, dtype=np.float32).reshape(1, 1, 10, 1)
    ours = nn.interpolate(limn.Tensor(x), size=(5, 1), mode="bilinear", antialias=True).numpy()
    wide = torch.tensor(np.repeat(x, 2, axis=3))
    want = torch.nn.functional.interpolate(wide, size=(5, 2), mode="bilinear", antialias=True)[..., :1].numpy()
    np.testing.assert_allclose(ours, want, rtol=1e-6)


def test_bicubic_needs_a_4d_input():
    with pytest.raises(ValueError, match="4-d input"):
        nn.interpolate(limn.Tensor(X1), size=3, mode="bicubic")


def test_int_inputs_raise_as_in_torch():
    with pytest.raises(TypeError, match="int32"):
        nn.interpolate(limn.Tensor(np.ones((1, 1, 2, 2), np.int32)), scale_factor=2)
    with pytest.raises(RuntimeError):
        torch.nn.functional.interpolate(torch.ones((1, 1, 2, 2), dtype=torch.int32), scale_factor=2)


# torch's CPU takes uint8 in nearest, nearest-exact, bilinear and bicubic only (NotImplementedError otherwise);
# limn raises a TypeError naming the modes; other ints and bool raise in every mode
UINT8_REFUSED = [("linear", U8[:, :, 0], 7), ("trilinear", U8[:, :, None], (2, 5, 3)), ("area", U8, (3, 3))]


@pytest.mark.parametrize("mode, x, size", UINT8_REFUSED, ids=[m for m, _, _ in UINT8_REFUSED])
def test_uint8_in_a_mode_torch_refuses_it_raises(mode, x, size):
    with pytest.raises(TypeError, match=f"mode '{mode}' is not defined for uint8"):
        nn.interpolate(limn.Tensor(x), size=size, mode=mode)
    with pytest.raises(NotImplementedError):
        torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64, np.bool_])
def test_other_int_dtypes_raise_even_in_nearest(dtype):
    x = np.ones((1, 1, 2, 2), dtype)
    with pytest.raises(TypeError, match="not defined for"):
        nn.interpolate(limn.Tensor(x), scale_factor=2)
    with pytest.raises(NotImplementedError):
        torch.nn.functional.interpolate(torch.tensor(x), scale_factor=2)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_uint8_to_width_1_with_many_channels_is_torchs_few_channel_kernel_unlike_torch(mode):
    # torch's uint8 kernel for more than 4 channels (its generic path) gives every output row the first row's
    # value when the width shrinks to 1 (torch 2.15, an arange input: (4, 5) -> (2, 1) gives 5, 5 where floats give
    # 4.5, 14.5); limn resizes each channel as torch's kernel for up to 4 channels does, channel by channel
    x = U8_WIDE  # (1, 6, 4, 5)
    ours = nn.interpolate(limn.Tensor(x), size=(2, 1), mode=mode).numpy()
    per_channel = [
        torch.nn.functional.interpolate(torch.tensor(x[:, c : c + 1]), size=(2, 1), mode=mode).numpy()
        for c in range(x.shape[1])
    ]
    np.testing.assert_array_equal(ours, np.concatenate(per_channel, axis=1))
