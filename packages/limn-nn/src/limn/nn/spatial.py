"""Layers without weights that resize the spatial dims: the pools, unpools and Upsample, as torch.nn names them.

Each is a limn.nn.module.Module holding torch's constructor arguments under torch's attribute names, and calls
the function of limn.composed.functional.pooling, limn.composed.functional.unpooling or
limn.composed.functional.resample in forward: (N, C, *in) -> (N, C, *out). limn.nn re-exports them.
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from limn.composed.functional import adaptive_pooling, pooling, resample, unpooling
from limn.composed.functional.pooling import IntOrSeq, OutputSize
from limn.frontend.tensor import Tensor
from limn.nn.module import Module


class _MaxPoolNd(Module):
    dims = 0

    def __init__(
        self,
        kernel_size: IntOrSeq,
        stride: IntOrSeq | None = None,
        padding: IntOrSeq = 0,
        dilation: IntOrSeq = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ):
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride, padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return pooling.max_pool(
            x,
            self.dims,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
            self.return_indices,
        )


class MaxPool1d(_MaxPoolNd):
    """torch.nn.MaxPool1d: limn.composed.functional.pooling.max_pool1d with these arguments."""

    dims = 1


class MaxPool2d(_MaxPoolNd):
    """torch.nn.MaxPool2d: limn.composed.functional.pooling.max_pool2d with these arguments.

    >>> MaxPool2d(2)(Tensor.ones((1, 3, 4, 5))).shape
    (1, 3, 2, 2)
    """

    dims = 2


class MaxPool3d(_MaxPoolNd):
    """torch.nn.MaxPool3d: limn.composed.functional.pooling.max_pool3d with these arguments."""

    dims = 3


class _AvgPoolNd(Module):
    dims = 0

    def __init__(
        self,
        kernel_size: IntOrSeq,
        stride: IntOrSeq | None = None,
        padding: IntOrSeq = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad, self.divisor_override = ceil_mode, count_include_pad, divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return pooling.avg_pool(
            x,
            self.dims,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class AvgPool1d(_AvgPoolNd):
    """torch.nn.AvgPool1d: the avg_pool1d function with these arguments (torch's has no divisor_override)."""

    dims = 1

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """torch.nn.AvgPool2d: limn.composed.functional.pooling.avg_pool2d with these arguments."""

    dims = 2


class AvgPool3d(_AvgPoolNd):
    """torch.nn.AvgPool3d: limn.composed.functional.pooling.avg_pool3d with these arguments."""

    dims = 3


class AdaptiveAvgPool1d(Module):
    """torch.nn.AdaptiveAvgPool1d: limn.composed.functional.adaptive_pooling.adaptive_avg_pool1d to output_size."""

    def __init__(self, output_size: OutputSize):
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_pooling.adaptive_avg_pool(x, 1, self.output_size)


class AdaptiveAvgPool2d(Module):
    """torch.nn.AdaptiveAvgPool2d: limn.composed.functional.adaptive_pooling.adaptive_avg_pool2d to output_size
    (None keeps a dim).

    >>> AdaptiveAvgPool2d((1, None))(Tensor.ones((2, 3, 5, 4))).shape
    (2, 3, 1, 4)
    """

    def __init__(self, output_size: OutputSize):
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_pooling.adaptive_avg_pool(x, 2, self.output_size)


class AdaptiveAvgPool3d(Module):
    """torch.nn.AdaptiveAvgPool3d: limn.composed.functional.adaptive_pooling.adaptive_avg_pool3d to output_size."""

    def __init__(self, output_size: OutputSize):
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return adaptive_pooling.adaptive_avg_pool(x, 3, self.output_size)


class _AdaptiveMaxPoolNd(Module):
    dims = 0

    def __init__(self, output_size: OutputSize, return_indices: bool = False):
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return adaptive_pooling.adaptive_max_pool(x, self.dims, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """torch.nn.AdaptiveMaxPool1d: limn.composed.functional.adaptive_pooling.adaptive_max_pool1d to output_size."""

    dims = 1


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """torch.nn.AdaptiveMaxPool2d: limn.composed.functional.adaptive_pooling.adaptive_max_pool2d to output_size."""

    dims = 2


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """torch.nn.AdaptiveMaxPool3d: limn.composed.functional.adaptive_pooling.adaptive_max_pool3d to output_size."""

    dims = 3


class _MaxUnpoolNd(Module):
    dims = 0

    def __init__(self, kernel_size: IntOrSeq, stride: IntOrSeq | None = None, padding: IntOrSeq = 0):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor, indices: Tensor, output_size=None) -> Tensor:
        return unpooling.max_unpool(x, indices, self.dims, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool1d(_MaxUnpoolNd):
    """torch.nn.MaxUnpool1d: limn.composed.functional.unpooling.max_unpool1d with these arguments."""

    dims = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """torch.nn.MaxUnpool2d: limn.composed.functional.unpooling.max_unpool2d with these arguments; call it on a
    MaxPool2d's values and indices (return_indices=True).

    >>> out, idx = MaxPool2d(2, return_indices=True)(Tensor.ones((1, 1, 4, 4)))
    >>> MaxUnpool2d(2)(out, idx).shape
    (1, 1, 4, 4)
    """

    dims = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """torch.nn.MaxUnpool3d: limn.composed.functional.unpooling.max_unpool3d with these arguments."""

    dims = 3


class _LPPoolNd(Module):
    dims = 0

    def __init__(self, norm_type: float, kernel_size: IntOrSeq, stride: IntOrSeq | None = None, ceil_mode=False):
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, x: Tensor) -> Tensor:
        return pooling.lp_pool(x, self.dims, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool1d(_LPPoolNd):
    """torch.nn.LPPool1d: limn.composed.functional.pooling.lp_pool1d with these arguments."""

    dims = 1


class LPPool2d(_LPPoolNd):
    """torch.nn.LPPool2d: limn.composed.functional.pooling.lp_pool2d with these arguments."""

    dims = 2


class LPPool3d(_LPPoolNd):
    """torch.nn.LPPool3d: limn.composed.functional.pooling.lp_pool3d with these arguments."""

    dims = 3


class Upsample(Module):
    """torch.nn.Upsample: limn.composed.functional.resample.interpolate with these arguments.

    >>> Upsample(scale_factor=2, mode="bilinear")(Tensor.ones((1, 1, 2, 3))).shape
    (1, 1, 4, 6)
    """

    def __init__(
        self,
        size: OutputSize = None,
        scale_factor: float | tuple[float, ...] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ):
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return resample.interpolate(
            x, self.size, self.scale_factor, self.mode, self.align_corners, self.recompute_scale_factor
        )


class UpsamplingNearest2d(Upsample):
    """torch.nn.UpsamplingNearest2d: Upsample with mode "nearest"."""

    def __init__(self, size: OutputSize = None, scale_factor: float | tuple[float, ...] | None = None):
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """torch.nn.UpsamplingBilinear2d: Upsample with mode "bilinear" and align_corners=True, as torch's."""

    def __init__(self, size: OutputSize = None, scale_factor: float | tuple[float, ...] | None = None):
        super().__init__(size, scale_factor, "bilinear", align_corners=True)
