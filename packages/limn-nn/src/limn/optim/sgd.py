"""SGD, with torch.optim.SGD's momentum, dampening, Nesterov and weight decay.
Pipeline: nn (model, loss.backward()) -> **optim** (ASSIGN graphs) -> realize -> schedule -> device.
"""

from __future__ import annotations

from typing import Any

from limn.frontend.tensor import Tensor
from limn.optim.optimizer import Optimizer, refuse_unsupported
from limn.optim.param_groups import Params


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov momentum and L2 weight decay, as
    torch.optim.SGD computes it:

        g = grad + weight_decay * p
        buf = g on the first step, else momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf          (when momentum != 0)
        p = p - lr * g

    Each parameter group may set any of these (see limn.optim.param_groups); lr and weight_decay can change
    between steps (opt.lr = ..., or param_groups[i]["lr"] = ...), the others are fixed.
    "The first step" is the optimizer's first, for every parameter (torch counts a parameter's first step
    with a gradient, which differs only with dampening, for a parameter that had no gradient at first).
    """

    kind = "sgd"

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        name: str | None = None,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        refuse_unsupported("SGD", maximize=maximize)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults, name)
        for group in self.param_groups:
            if group["momentum"]:
                for name, p in zip(group.names, group.params):
                    self.state[name]["momentum_buffer"] = self._zeros_like(p)

    def _check(self, hyper: dict[str, Any]) -> None:
        lr, momentum, weight_decay = hyper["lr"], hyper["momentum"], hyper["weight_decay"]
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr ({lr}), momentum ({momentum}) and weight_decay ({weight_decay}) must be >= 0")
        if hyper["nesterov"] and (momentum <= 0 or hyper["dampening"] != 0):
            raise ValueError("SGD: nesterov momentum needs momentum > 0 and dampening = 0 (as torch)")

    def updates(self) -> list[Tensor]:
        out = []
        first = self.steps.eq(0)
        for group in self.param_groups:
            lr, weight_decay = group.tensors["lr"], group.tensors["weight_decay"]
            momentum, dampening = group["momentum"], group["dampening"]
            for name, p, g in self._with_grads(group):
                c = p.dtype.compute
                x, g = p.cast(c), g.cast(c)
                g = g + weight_decay.cast(c) * x
                if momentum:
                    buf = self.state[name]["momentum_buffer"]
                    new_buf = first.where(g, momentum * buf.cast(c) + (1 - dampening) * g)
                    g = g + momentum * new_buf if group["nesterov"] else new_buf
                    out.append(buf.assign(new_buf))
                out.append(p.assign(x - lr.cast(c) * g))
        out.append(self._count_step())
        return out
