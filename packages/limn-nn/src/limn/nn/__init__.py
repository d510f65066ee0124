"""limn.nn: layers, their functional forms, and the walk that finds a model's parameters, as torch.nn names them.

Each layer is a Module (forward, parameters(), state_dict(), train()/eval(), as torch's) keeping its parameters
as Tensor attributes. Nothing is registered: parameters(obj) and named_parameters(obj) walk any object's
attributes (modules, lists, tuples, dicts) and find every Tensor that requires grad, named by the path taken to
it (`layers.0.attn.weight`) as torch names it. limn.nn also holds torch.nn.functional's functions, as
limn.nn.functional does, and the submodules init (initializers) and utils (gradient clipping).
Pipeline: **nn** (model code) -> tensor -> graph -> schedule -> IR -> renderer -> device.
"""

from limn.nn import functional, init, utils
from limn.nn.activations import GELU, LeakyReLU, ReLU, Sigmoid, SiLU, Tanh
from limn.nn.containers import Flatten, Identity, ModuleDict, ModuleList, Sequential, Unflatten
from limn.nn.dropout import Dropout, Dropout1d, Dropout2d
from limn.nn.functional import *  # noqa: F403 (torch.nn.functional's names are limn.nn's too)
from limn.nn.functional import __all__ as _functional_names
from limn.nn.kv_cache import KVCache
from limn.nn.layers import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d, Embedding, LayerNorm, Linear
from limn.nn.losses import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from limn.nn.module import Module, Parameter
from limn.nn.norms import BatchNorm1d, BatchNorm2d, GroupNorm, InstanceNorm1d, InstanceNorm2d, RMSNorm
from limn.nn.spatial import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from limn.nn.utils import clip_grad_norm_, clip_grad_value_
from limn.nn.walk import load_state_dict, named_parameters, parameters, state_dict

__all__ = [
    *_functional_names,
    # layers with weights, containers, activations, losses, dropout, norms, pools
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "CrossEntropyLoss",
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Embedding",
    "Flatten",
    "GELU",
    "GroupNorm",
    "Identity",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "MSELoss",
    "ModuleDict",
    "ModuleList",
    "NLLLoss",
    "RMSNorm",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Tanh",
    "Unflatten",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
    # training: the parameter walk, Module, the KV cache, initializers and gradient clipping
    "KVCache",
    "Module",
    "Parameter",
    "clip_grad_norm_",
    "clip_grad_value_",
    "functional",
    "init",
    "load_state_dict",
    "named_parameters",
    "parameters",
    "state_dict",
    "utils",
]
