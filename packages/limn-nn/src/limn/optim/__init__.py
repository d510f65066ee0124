"""limn.optim: SGD, Adam, AdamW and Muon, each step one batch of ASSIGNs realized together, and lr_scheduler.

An optimizer holds parameters (Tensors, (name, Tensor) pairs from nn.named_parameters, or torch's list of
group dicts, see limn.optim.param_groups) and their state as realized device tensors. step(*extra) builds every
update as an assign into the parameter's and the state's own buffers and realizes them all, with `extra`,
in one limn.realize(): every update reads the values from before the step, and a logged loss shares the
forward pass with the gradients. What a step changes (the step count, AdamW's beta**t) and what a schedule
changes (each group's lr and weight_decay) are 0-d device tensors, so a new learning rate changes no graph
and a compiled device replays the plan it has.
Pipeline: nn (model, loss.backward()) -> **optim** (ASSIGN graphs) -> realize -> schedule -> device.
"""

from limn.optim import lr_scheduler
from limn.optim.adamw import Adam, AdamW
from limn.optim.muon import NS_COEFFICIENTS, Muon, newton_schulz
from limn.optim.optimizer import Chain, Optimizer
from limn.optim.param_groups import ParamGroup
from limn.optim.sgd import SGD

__all__ = [
    "NS_COEFFICIENTS",
    "SGD",
    "Adam",
    "AdamW",
    "Chain",
    "Muon",
    "Optimizer",
    "ParamGroup",
    "lr_scheduler",
    "newton_schulz",
]
