"""Tensor, the class a user holds: the primitives and one mixin per module of the composed catalogue.

Tensor methods never compute. The primitives (limn.frontend.primitives) build one Node each; every other
method is defined in a mixin class of one module per idea, composed from primitives with its formula in a
comment, so a device that implements the 19 primitives runs all of it. The bases below are the map of the
API: "where is Tensor.softmax?" is answered by go-to-definition, or here (ActivationsMixin, in
limn.composed.functional.activations). Bytes appear only at .numpy(), .item() or .realize().
Pipeline: **tensor** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from limn.composed.conversions import ConversionsMixin
from limn.composed.creation import CreationMixin, manual_seed
from limn.composed.functional import sdpa  # noqa: F401 (registers the fused attention CUSTOM ops, called by name)
from limn.composed.functional.activations import ActivationsMixin
from limn.composed.functional.attention import AttentionMixin
from limn.composed.functional.conv_transpose import ConvTransposeMixin
from limn.composed.functional.convolution import ConvolutionMixin
from limn.composed.functional.losses import LossesMixin
from limn.composed.functional.pooling import PoolingMixin
from limn.composed.functional.resample import ResampleMixin
from limn.composed.functional.unpooling import UnpoolingMixin
from limn.composed.indexed.in_place import InPlaceMixin
from limn.composed.indexed.indexing import IndexingMixin
from limn.composed.indexed.lookups import LookupsMixin
from limn.composed.indexed.scatter import ScatterMixin
from limn.composed.math.bitwise import BitwiseMixin
from limn.composed.math.elementwise import ElementwiseMixin
from limn.composed.math.infinity import InfinityMixin
from limn.composed.math.logexp import LogExpMixin
from limn.composed.math.power import PowerMixin
from limn.composed.math.rounding import RoundingMixin
from limn.composed.math.trig import TrigMixin
from limn.composed.movement.padding import PaddingMixin
from limn.composed.movement.rearrange import RearrangeMixin
from limn.composed.movement.shaping import ShapingMixin
from limn.composed.movement.triangles import TrianglesMixin
from limn.composed.random.sampling import SamplingMixin
from limn.composed.reduce.einsum import EinsumMixin
from limn.composed.reduce.matmul import MatmulMixin
from limn.composed.reduce.moments import MomentsMixin
from limn.composed.reduce.reductions import ReductionsMixin
from limn.composed.reduce.scans import ScansMixin
from limn.composed.reduce.sorting import SortingMixin
from limn.frontend.arguments import Scalar, TensorLike
from limn.frontend.primitives import Primitives
from limn.runtime.engine import observers, realize

__all__ = ["Scalar", "Tensor", "TensorLike", "manual_seed", "observers", "realize"]


class Tensor(
    # creation and dtypes (limn.composed)
    CreationMixin,
    ConversionsMixin,
    # elementwise math (limn.composed.math)
    ElementwiseMixin,
    PowerMixin,
    TrigMixin,
    LogExpMixin,
    RoundingMixin,
    BitwiseMixin,
    InfinityMixin,
    # shapes and views (limn.composed.movement)
    ShapingMixin,
    RearrangeMixin,
    PaddingMixin,
    TrianglesMixin,
    # reading and writing at indices (limn.composed.indexed)
    IndexingMixin,
    ScatterMixin,
    LookupsMixin,
    InPlaceMixin,
    # folds over dims (limn.composed.reduce)
    ReductionsMixin,
    MomentsMixin,
    ScansMixin,
    SortingMixin,
    MatmulMixin,
    EinsumMixin,
    # random numbers from the device generator (limn.composed.random)
    SamplingMixin,
    # nn layers as methods, as tinygrad's (limn.composed.functional)
    ActivationsMixin,
    LossesMixin,
    AttentionMixin,
    ConvolutionMixin,
    ConvTransposeMixin,
    PoolingMixin,
    UnpoolingMixin,
    ResampleMixin,
    # the state and the primitives, each one Node (limn.frontend.primitives), and the way to the host
    Primitives,
):
    """A lazy n-dimensional array. Build expressions; call .numpy()/.item()/.realize() to compute.

    Tensor(data) copies `data` (a numpy array, nested lists or a python scalar) into a buffer on `device`
    (the current device when None). A numpy array keeps its dtype; python floats become float32, as in torch,
    and python ints int32 (torch's are int64: pass dtype=limn.int64). Tensor(t) of a tensor is t's value as
    a new leaf: nothing is copied or computed, unless `device` names another device, where it is a copy of
    t's value there, computed now (t.to(device)).
    Attributes: `node`, this value's Node in the graph; `requires_grad`; and `grad`, what backward() has
    accumulated for this leaf (a lazy Tensor), or None.

    >>> x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad.numpy()
    array([[2., 4.],
           [6., 8.]], dtype=float32)
    """

    __slots__ = ()
