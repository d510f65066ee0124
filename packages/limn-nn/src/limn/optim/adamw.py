"""AdamW and Adam as torch.optim's: AdamW's decay decoupled from the gradient, Adam's added to it.
Pipeline: nn (model, loss.backward()) -> **optim** (ASSIGN graphs) -> realize -> schedule -> device.
"""

from __future__ import annotations

from typing import Any

from limn.frontend.tensor import Tensor
from limn.optim.optimizer import Optimizer, lerp, refuse_unsupported
from limn.optim.param_groups import ParamGroup, Params


class AdamW(Optimizer):
    """Adam with decoupled weight decay, as torch.optim.AdamW (amsgrad off) computes it:

        p = p * (1 - lr * weight_decay)
        m = lerp(m, g, 1 - beta1);   v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    beta1**t and beta2**t are float64 device tensors multiplied by beta each step (1 - beta2**t loses
    digits in float32 early on), so a resumed run bias-corrects where it left off; each parameter group
    keeps its own (groups may set their own betas). One beta**t serves every parameter of a group: torch
    counts steps per parameter, which differs only for a parameter that goes without a gradient in some step.
    """

    kind = "adamw"
    decoupled = True  # weight decay shrinks the parameter (AdamW); False adds weight_decay * p to the gradient (Adam)

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        name: str | None = None,
        *,
        amsgrad: bool = False,
        maximize: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        refuse_unsupported("AdamW", amsgrad=amsgrad, maximize=maximize)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay), name)
        for name, p in zip(self.names, self.params):
            self.state[name]["exp_avg"] = self._zeros_like(p)
            self.state[name]["exp_avg_sq"] = self._zeros_like(p)

    def _check(self, hyper: dict[str, Any]) -> None:
        lr, betas, eps, weight_decay = hyper["lr"], tuple(hyper["betas"]), hyper["eps"], hyper["weight_decay"]
        if lr < 0 or eps < 0 or weight_decay < 0 or len(betas) != 2 or not all(0 <= b < 1 for b in betas):
            raise ValueError(
                f"AdamW: needs lr, eps, weight_decay >= 0 and betas in [0, 1); got lr={lr}, "
                f"eps={eps}, weight_decay={weight_decay}, betas={betas}"
            )

    def _group_scalars(self, hyper: dict[str, Any]) -> dict[str, Tensor]:
        return {"beta1_power": self._scalar(1.0), "beta2_power": self._scalar(1.0)}

    @property
    def beta1_power(self) -> Tensor:
        """The first group's beta1**t (each group keeps its own in param_groups[i].tensors)."""
        return self.param_groups[0].tensors["beta1_power"]

    @property
    def beta2_power(self) -> Tensor:
        return self.param_groups[0].tensors["beta2_power"]

    def updates(self) -> list[Tensor]:
        out = [self._count_step()]
        for group in self.param_groups:
            out += self._group_updates(group)
        return out

    def _group_updates(self, group: ParamGroup) -> list[Tensor]:
        beta1, beta2 = group["betas"]
        lr, weight_decay = group.tensors["lr"], group.tensors["weight_decay"]
        power1_before, power2_before = group.tensors["beta1_power"], group.tensors["beta2_power"]
        power1, power2 = power1_before * beta1, power2_before * beta2  # beta**t, t counting this step
        step_size = lr / (1 - power1)  # float64, as torch's python floats
        correction2 = (1 - power2).sqrt()
        decay = 1 - lr * weight_decay
        out = [power1_before.assign(power1), power2_before.assign(power2)]
        for name, p, g in self._with_grads(group):
            c = p.dtype.compute
            m, v = self.state[name]["exp_avg"], self.state[name]["exp_avg_sq"]
            g, x = g.cast(c), p.cast(c)
            if self.decoupled:
                x = x * decay.cast(c)
            else:
                g = g + weight_decay.cast(c) * x  # Adam's L2 decay: the gradient of weight_decay / 2 * |p|^2
            new_m = lerp(m.cast(c), g, 1 - beta1)
            new_v = v.cast(c) * beta2 + (1 - beta2) * g * g
            denom = new_v.sqrt() / correction2.cast(c) + group["eps"]
            out += [m.assign(new_m), v.assign(new_v), p.assign(x - step_size.cast(c) * new_m / denom)]
        return out


class Adam(AdamW):
    """Adam, as torch.optim.Adam (amsgrad off) computes it: AdamW's step with L2 weight decay, the gradient
    g = grad + weight_decay * p feeding both moments, in place of the decoupled p = p * (1 - lr * weight_decay)
    (decoupled_weight_decay=True, as torch's, is AdamW). weight_decay defaults to 0, as torch's.

    >>> w = Tensor([1.0, -2.0], requires_grad=True)
    >>> opt = Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> [round(v, 4) for v in w.tolist()]  # the first step moves each entry by lr against its gradient's sign
    [0.9, -1.9]
    """

    kind = "adam"

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        name: str | None = None,
        *,
        decoupled_weight_decay: bool = False,
        amsgrad: bool = False,
        maximize: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
    ) -> None:
        refuse_unsupported("Adam", amsgrad=amsgrad, maximize=maximize)
        self.decoupled = decoupled_weight_decay
        super().__init__(params, lr, betas, eps, weight_decay, name)
