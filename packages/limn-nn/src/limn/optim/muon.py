"""Muon: momentum orthogonalized by a Newton-Schulz iteration, for 2D parameters, as torch.optim.Muon.
Pipeline: nn (model, loss.backward()) -> **optim** (ASSIGN graphs) -> realize -> schedule -> device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from limn import dtypes
from limn.dtypes import DType
from limn.frontend.tensor import Tensor
from limn.optim.optimizer import Optimizer, lerp
from limn.optim.param_groups import Params

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # Keller Jordan's quintic, as torch.optim.Muon
ADJUST_LR_FNS = (None, "original", "match_rms_adamw", "spectral_unclamped")


class Muon(Optimizer):
    """Momentum orthogonalized by Newton-Schulz, for 2D parameters, as torch.optim.Muon computes it:

        buf = lerp(buf, g, 1 - momentum);   u = lerp(g, buf, momentum) if nesterov else buf
        o = NS(u)            5 quintic Newton-Schulz steps in bfloat16, ~ the nearest orthogonal matrix
        p = p * (1 - lr * weight_decay) - lr * sqrt(max(1, rows / cols)) * o

    Muon is defined on matrices only: route a model's hidden 2D weights here and everything else (biases,
    norms, and by convention the embedding and the output head) to AdamW, and step both together with
    Chain(Muon(...), AdamW(...)). adjust_lr_fn picks torch's lr scaling: None/'original' (above),
    'match_rms_adamw' (0.2 sqrt(max(rows, cols))) or 'spectral_unclamped' (sqrt(rows / cols)). ns_dtype is
    the dtype the iteration rounds to (torch's is bfloat16). Each parameter group may set any of these;
    lr and weight_decay can change between steps.
    """

    kind = "muon"

    def __init__(
        self,
        params: Params,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
        eps: float = 1e-7,
        ns_steps: int = 5,
        adjust_lr_fn: str | None = None,
        ns_dtype: DType = dtypes.bfloat16,
        name: str | None = None,
    ) -> None:
        defaults = dict(
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            nesterov=nesterov,
            ns_coefficients=tuple(ns_coefficients),
            eps=eps,
            ns_steps=ns_steps,
            adjust_lr_fn=adjust_lr_fn,
            ns_dtype=ns_dtype,
        )
        super().__init__(params, defaults, name)
        for name, p in zip(self.names, self.params):
            if p.ndim != 2:
                raise ValueError(
                    f"Muon: parameter {name!r} has shape {p.shape}; Muon updates 2D matrices only. Give "
                    "biases, norms and other non-2D parameters to AdamW and step both with Chain(muon, adamw)"
                )
            self.state[name]["momentum_buffer"] = self._zeros_like(p)

    def _check(self, hyper: dict[str, Any]) -> None:
        lr, momentum, weight_decay = hyper["lr"], hyper["momentum"], hyper["weight_decay"]
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"Muon: lr ({lr}), momentum ({momentum}) and weight_decay ({weight_decay}) must be >= 0")
        if hyper["adjust_lr_fn"] not in ADJUST_LR_FNS:
            raise ValueError(
                f"Muon: adjust_lr_fn {hyper['adjust_lr_fn']!r} is not one of 'original', 'match_rms_adamw', "
                "'spectral_unclamped'"
            )
        if len(hyper["ns_coefficients"]) != 3 or not 0 <= hyper["ns_steps"] < 100:
            raise ValueError("Muon: ns_coefficients must be three floats and ns_steps in [0, 100)")

    def updates(self) -> list[Tensor]:
        out = [self._count_step()]
        for group in self.param_groups:
            lr, momentum = group.tensors["lr"], group["momentum"]
            decay = 1 - lr * group.tensors["weight_decay"]
            ns = (group["ns_coefficients"], group["ns_steps"], group["eps"], group["ns_dtype"])
            for name, p, g in self._with_grads(group):
                c = p.dtype.compute
                buf = self.state[name]["momentum_buffer"]
                g = g.cast(c)
                new_buf = lerp(buf.cast(c), g, 1 - momentum)
                u = lerp(g, new_buf, momentum) if group["nesterov"] else new_buf
                o = newton_schulz(u, *ns)
                scaled = lr * _lr_ratio(group["adjust_lr_fn"], p.shape)
                out += [buf.assign(new_buf), p.assign(p.cast(c) * decay.cast(c) - scaled.cast(c) * o.cast(c))]
        return out


def newton_schulz(g: Tensor, coefficients: Sequence[float], steps: int, eps: float, dtype: DType) -> Tensor:
    """The zeroth power (U V^T, roughly) of a matrix by the quintic Newton-Schulz iteration of
    torch.optim.Muon, rounding to `dtype` where torch rounds to bfloat16 (arithmetic runs in float32):

        X = G / max(|G|_F, eps)                      (transposed first when tall, so X X^T is the small Gram)
        X = a X + (b A + c A A) X,  A = X X^T        `steps` times

    The iteration pushes every singular value towards ~1 (into about [0.7, 1.2], not exactly 1)."""
    a, b, c = coefficients
    wide = dtype.compute
    x = g.cast(dtype)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T  # (m, n) -> (n, m): rows <= columns
    xw = x.cast(wide)
    norm = xw.square().sum().sqrt().cast(dtype).clip(lo=eps)  # torch: the norm is a bfloat16 value
    x = (xw / norm.cast(wide)).cast(dtype)
    for _ in range(steps):
        xw = x.cast(wide)
        gram = (xw @ xw.T).cast(dtype)  # A = X X^T: (rows, rows)
        gw = gram.cast(wide)
        poly = (b * gw + c * (gw @ gw)).cast(dtype)  # torch's addmm(A, A, A, beta=b, alpha=c): rounded once
        x = (a * xw + poly.cast(wide) @ xw).cast(dtype)  # addmm(X, B, X, beta=a)
    return x.T if tall else x


def _lr_ratio(adjust_lr_fn: str | None, shape: tuple[int, ...]) -> float:
    """torch.optim.Muon's learning-rate scale for a (rows, cols) matrix."""
    rows, cols = shape[:2]
    if adjust_lr_fn in (None, "original"):
        return math.sqrt(max(1.0, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return 0.2 * math.sqrt(max(rows, cols))
    return math.sqrt(rows / cols)  # spectral_unclamped
