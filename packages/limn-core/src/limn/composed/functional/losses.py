"""The losses of torch.nn.functional, composed from primitives: nll_loss, cross_entropy, binary cross-entropy,
l1, mse, smooth_l1, huber, kl_div, cosine_similarity, with torch's signatures, defaults and reductions.

Each takes an input tensor and a target (class indices as an int tensor, or values of the input's shape) and
gives the loss per element (reduction="none") or its mean or sum as a 0-d tensor, with torch's gradients.
A class index out of range is an IndexError when the value is computed (torch raises at the call).
Pipeline: **tensor (composed ops)** -> graph (GATHER for class targets) -> schedule -> IR -> device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn.composed.math.stable import log1p, log1p_value, with_gradient_of
from limn.errors import ArgumentError
from limn.frontend.arguments import TensorLike
from limn.frontend.primitives import index_tensor

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor

REDUCTIONS = ("none", "mean", "sum")


def _reduction(what: str, reduction: str, size_average: bool | None = None, reduce: bool | None = None) -> str:
    """The reduction asked for: torch's legacy size_average/reduce pair wins when either is given, as in torch."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else ("mean" if size_average else "sum")
    if reduction not in REDUCTIONS:
        raise ArgumentError(f"{what}: reduction must be 'none', 'mean' or 'sum', not {reduction!r}")
    return reduction


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    """loss as it is, summed, or averaged over every element (NaN for none, as torch)."""
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _as_tensor(value: TensorLike, like: Tensor) -> Tensor:
    return value if isinstance(value, limn.Tensor) else limn.Tensor(value, dtype=like.dtype, device=like.device)


def _float_input(x: Tensor, what: str) -> Tensor:
    if not x.dtype.is_float:
        raise TypeError(f"{what}: the input must be a float tensor (torch's is too), got {x.dtype.name}")
    return x


# ---- helpers of the class-target losses ----


def _class_view(x: Tensor, target: TensorLike, what: str) -> tuple[Tensor, Tensor]:
    """x as (N, C, d...) and int targets as (N, d...): a 1-D x (C,) with a 0-d target gains N = 1."""
    if x.ndim == 0:
        raise ArgumentError(f"{what}: the input is 0-d; it needs a class dim, (C,), (N, C) or (N, C, d1, ...)")
    target = index_tensor(target, what)
    if x.ndim == 1:
        x, target = x.unsqueeze(0), target.reshape(1) if target.ndim == 0 else target
    want = x.shape[:1] + x.shape[2:]
    if target.shape != want:
        raise ArgumentError(
            f"{what}: an input of shape {x.shape} (N, C, d...) needs class targets of shape {want} (N, d...), "
            f"got {target.shape}"
        )
    return x, target


def _class_weight(weight: TensorLike | None, x: Tensor, what: str) -> Tensor | None:
    if weight is None:
        return None
    weight = _as_tensor(weight, x).cast(x.dtype)
    if weight.shape != (x.shape[1],):
        raise ArgumentError(f"{what}: weight must have one value per class, shape ({x.shape[1]},), got {weight.shape}")
    return weight


def _picked(
    logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int | None
) -> tuple[Tensor, Tensor, Tensor]:
    """-w[t] logp[t] per target (0 where ignored), w[t] (0 where ignored) and whether each counts, (N, d...)."""
    valid = (
        limn.Tensor.full(target.shape, True, device=target.device) if ignore_index is None else target.ne(ignore_index)
    )
    safe = valid.where(target, 0).cast(target.dtype)  # an ignored target reads class 0, then counts nothing
    nll = -logp.gather(1, safe.unsqueeze(1)).squeeze(1)  # (N, C, d...) -> (N, d...)
    if weight is None:
        w = valid.cast(logp.dtype)
    else:
        w = valid.where(weight.gather(0, safe.reshape(-1)).reshape(safe.shape), 0.0)  # w[t], (N, d...)
    return valid.where(w * nll, 0.0), w, valid


def _cross_entropy_probabilities(
    x: Tensor, target: Tensor, weight: TensorLike | None, reduction: str, label_smoothing: float
) -> Tensor:
    """cross_entropy against class probabilities of x's shape (the class dim is 0 for a 1-D x, else 1)."""
    if not target.dtype.is_float:
        raise ArgumentError(
            f"cross_entropy: a target of the input's shape {x.shape} holds class probabilities and must be "
            f"float, got {target.dtype.name}; class indices have shape (N, d...)"
        )
    class_dim = 0 if x.ndim == 1 else 1
    n_classes = x.shape[class_dim]
    logp = x.log_softmax(dim=class_dim)
    t = target.cast(x.dtype)
    if label_smoothing:
        t = t * (1 - label_smoothing) + label_smoothing / n_classes
    terms = logp * t
    if weight is not None:
        w = _as_tensor(weight, x).cast(x.dtype)
        if w.shape != (n_classes,):
            raise ArgumentError(f"cross_entropy: weight must have one value per class, ({n_classes},), got {w.shape}")
        terms = terms * w.reshape((n_classes,) + (1,) * (x.ndim - class_dim - 1))
    if reduction == "none":
        return -terms.sum(class_dim)
    if reduction == "sum":
        return -terms.sum()
    rows = x.size // n_classes if n_classes else 0
    return -terms.sum() * (1.0 / rows if rows else math.nan)  # mean over N * d..., NaN for none


# ---- helpers of binary cross-entropy ----


def _same_shape(x: Tensor, target: TensorLike, what: str) -> Tensor:
    target = _as_tensor(target, x)
    if target.shape != x.shape:
        raise ArgumentError(
            f"{what}: the target has shape {target.shape} and the input {x.shape}; they must be the same "
            "(torch raises too)"
        )
    return target.cast(x.dtype)


def _bce_edge(x: Tensor, t: Tensor, w: Tensor | float, smooth: Tensor) -> Tensor:
    """binary_cross_entropy where x (1 - x) < 1e-12: the clamped value, with torch's gradients carried by
    z = x - x and t - t (exactly +-0, so the value stays the clamped one): z * d for a finite d, and
    sqrt(z) * sign(d) (gradient inf) for the infinite target gradient at x = 0 and 1."""
    xd, td = x.detach(), t.detach()
    log_x, log_1mx = xd.log(), log1p_value(-xd)  # unclamped: -inf at the ends
    wd = w.detach() if isinstance(w, limn.Tensor) else w
    clamped = -(td * log_x.clip(-100.0) + (1 - td) * log_1mx.clip(-100.0)) * w
    dx = smooth.where(0.0, (xd - td) * (xd * (1 - xd)).clip(1e-12).reciprocal() * wd)  # torch's, finite
    dt = smooth.where(0.0, (log_1mx - log_x) * wd)  # torch's, +-inf at x = 0 and 1
    finite = dt.isfinite()
    zt = t - td
    by_t = finite.where(zt * finite.where(dt, 0.0), finite.where(1.0, zt).sqrt() * dt.gt(0).where(1.0, -1.0))
    return clamped - (0.0 - ((x - xd) * dx + by_t))  # exactly `clamped`: the carried terms are +-0


# ---- helpers of the regression losses ----


def _difference(x: Tensor, target: TensorLike, what: str) -> Tensor:
    x = _float_input(x, what)
    return x - _as_tensor(target, x)  # broadcast as torch (which warns when the shapes differ)


def _weighted(loss: Tensor, weight: TensorLike | None, reduction: str, what: str, mean_by_weight: bool) -> Tensor:
    """torch 2.x's optional per-element weight: of loss's shape, multiplied in; "mean" divides by the weights'
    sum (l1, mse) or by the count (huber), as torch."""
    if weight is None:
        return _reduce(loss, reduction)
    w = _as_tensor(weight, loss)
    if w.shape != loss.shape:
        raise ArgumentError(f"{what}: weight has shape {w.shape}, and must have the input's, {loss.shape}")
    loss = loss * w
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


def _quadratic_then_linear(d: Tensor, knee: float, slope: float) -> Tensor:
    """0.5 d**2 for |d| < knee, slope (|d| - knee / 2) from there; NaN takes the quadratic branch, so its
    gradient is NaN, as torch's. The quadratic branch never sees a large d (its gradient would be inf)."""
    linear = d.abs().ge(knee)
    dq = linear.where(0.0, d)
    return linear.where(slope * (d.abs() - 0.5 * knee), 0.5 * dq * dq)


def _l2_norm(x: Tensor, axis: int) -> Tensor:
    """sqrt(sum x**2) over axis, kept, with gradient 0 where it is 0 (torch's), not 0/0."""
    total = (x * x).sum(axis, keepdim=True)
    nonzero = total.gt(0)
    return nonzero.where(nonzero.where(total, 1.0).sqrt(), total)


class LossesMixin:
    """Tensor's losses, as torch.nn.functional's: x.cross_entropy(target) is F.cross_entropy(x, target)."""

    __slots__ = ()

    # ---- class targets: nll_loss and cross_entropy ----
    def nll_loss(
        self,
        target: TensorLike,
        weight: TensorLike | None = None,
        size_average: bool | None = None,
        ignore_index: int | None = -100,
        reduce: bool | None = None,
        reduction: str = "mean",
    ) -> Tensor:
        """torch.nn.functional.nll_loss: -w[t] input[t] for log-probabilities input (C,), (N, C) or (N, C, d...)
        and int class targets (), (N,) or (N, d...). Targets equal to ignore_index count nothing (None: none is
        ignored, tinygrad's spelling); "mean" divides by the sum of w[t] over the targets that count (NaN when
        none does, as torch).

        Trap: a target outside [0, C) (other than ignore_index) is an IndexError when the value is computed,
        not at this call as in torch.

        >>> round(Tensor([[-1.0, -2.0], [-3.0, -0.5]]).nll_loss(Tensor([0, 1])).item(), 4)
        0.75
        """
        reduction = _reduction("nll_loss", reduction, size_average, reduce)
        x, target_ = _class_view(_float_input(self, "nll_loss"), target, "nll_loss")
        loss, w, _ = _picked(x, target_, _class_weight(weight, x, "nll_loss"), ignore_index)
        if reduction == "none":
            return loss.reshape(()) if self.ndim == 1 else loss
        return loss.sum() if reduction == "sum" else loss.sum() / w.sum()

    def cross_entropy(
        self,
        target: TensorLike,
        weight: TensorLike | None = None,
        size_average: bool | None = None,
        ignore_index: int | None = -100,
        reduce: bool | None = None,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ) -> Tensor:
        """torch.nn.functional.cross_entropy of logits (C,), (N, C) or (N, C, d...), as torch.

        A float target of the input's shape holds class probabilities: loss = -sum_c w[c] t[c] log p[c], with
        t smoothed to (1 - s) t + s / C, and "mean" divides by N * d... . Any other target holds int class
        indices, (N, d...): loss = (1 - s) nll + s / C * sum_c w[c] (-log p[c]), ignore_index and weight as in
        nll_loss, and "mean" divides both terms by the sum of w[t] over the targets that count.

        Trap: a class index outside [0, C) is an IndexError when the value is computed, not at this call.

        >>> round(Tensor([[0.0, 0.0]]).cross_entropy(Tensor([1])).item(), 4)
        0.6931
        """
        reduction = _reduction("cross_entropy", reduction, size_average, reduce)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ArgumentError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
        x = _float_input(self, "cross_entropy")
        target = target if isinstance(target, limn.Tensor) else limn.Tensor(target)
        if x.ndim == 0:
            raise ArgumentError(
                "cross_entropy: the input is 0-d; it needs a class dim, (C,), (N, C) or (N, C, d1, ...)"
            )
        if target.shape == x.shape:
            return _cross_entropy_probabilities(x, target, weight, reduction, label_smoothing)
        if target.dtype.is_float:
            raise ArgumentError(
                f"cross_entropy: a float target holds class probabilities and must have the input's shape {x.shape}, "
                f"got {target.shape}; for class indices pass an int tensor"
            )
        logits, target_ = _class_view(x, target, "cross_entropy")
        w = _class_weight(weight, logits, "cross_entropy")
        logp = logits.log_softmax(dim=1)  # (N, C, d...)
        nll, picked_w, valid = _picked(logp, target_, w, ignore_index)
        if label_smoothing:
            every = -(logp if w is None else logp * w.reshape((1, -1) + (1,) * (logp.ndim - 2))).sum(1)  # (N, d...)
            smooth = valid.where(every, 0.0) * (label_smoothing / logits.shape[1])
            nll = (1 - label_smoothing) * nll + smooth  # each row's share of both terms
        if reduction == "none":
            return nll.reshape(()) if x.ndim == 1 else nll
        return nll.sum() if reduction == "sum" else nll.sum() / picked_w.sum()

    def sparse_categorical_crossentropy(
        self, target: TensorLike, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean"
    ) -> Tensor:
        """tinygrad's spelling of cross_entropy with class indices, its classes on the LAST dim: logits
        (..., C), targets (...). Targets equal to ignore_index count nothing (tinygrad instead ignores nothing
        when ignore_index is -1, its default, and a -1 target there adds only its smoothing term).

        >>> round(Tensor([[0.0, 0.0]]).sparse_categorical_crossentropy(Tensor([1])).item(), 4)
        0.6931
        """
        x = self
        if x.ndim >= 3:
            x = x.permute((0, x.ndim - 1) + tuple(range(1, x.ndim - 1)))  # (N, d..., C) -> (N, C, d...)
        return x.cross_entropy(target, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)

    # ---- binary cross-entropy ----
    def binary_cross_entropy(
        self,
        target: TensorLike,
        weight: TensorLike | None = None,
        size_average: bool | None = None,
        reduce: bool | None = None,
        reduction: str = "mean",
    ) -> Tensor:
        """-w (t log x + (1 - t) log(1 - x)) for probabilities x, with each log clamped at -100, as torch.

        Gradients as torch's: to x, w (x - t) / max(x (1 - x), 1e-12), finite at x = 0 and 1; to t, w (log(1 - x)
        - log x) unclamped, so +-inf at x = 0 and 1. Difference: an x or t outside [0, 1] gives NaN, where torch
        raises (limn cannot see the values when it builds the graph).

        >>> round(Tensor([0.5]).binary_cross_entropy(Tensor([1.0])).item(), 4)
        0.6931
        """
        reduction = _reduction("binary_cross_entropy", reduction, size_average, reduce)
        x = _float_input(self, "binary_cross_entropy")
        t = _same_shape(x, target, "binary_cross_entropy")
        w = 1.0 if weight is None else _as_tensor(weight, x).cast(x.dtype)
        xd = x.detach()
        # where x (1 - x) >= 1e-12 both logs are above -100 and the formula's own gradients are torch's
        smooth = (xd * (1 - xd)).ge(1e-12)
        xs = smooth.where(x, 0.5)  # the other branch's x never reaches a log here, so no inf * 0 in its gradient
        inside = -(t * xs.log() + (1 - t) * log1p(-xs)) * w
        return _reduce(smooth.where(inside, _bce_edge(x, t, w, smooth)), reduction)

    def binary_cross_entropy_with_logits(
        self,
        target: TensorLike,
        weight: TensorLike | None = None,
        size_average: bool | None = None,
        reduce: bool | None = None,
        reduction: str = "mean",
        pos_weight: TensorLike | None = None,
    ) -> Tensor:
        """binary_cross_entropy(sigmoid(x), t) computed from the logits x as torch does, stable for any |x|:
        (1 - t) x - (1 + (pos_weight - 1) t) logsigmoid(x), times weight. pos_weight broadcasts (one per class
        on the last dim).

        >>> round(Tensor([0.0]).binary_cross_entropy_with_logits(Tensor([1.0])).item(), 4)
        0.6931
        """
        reduction = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
        x = _float_input(self, "binary_cross_entropy_with_logits")
        t = _same_shape(x, target, "binary_cross_entropy_with_logits")
        log_sigmoid = x.logsigmoid()
        if pos_weight is not None:
            log_sigmoid = log_sigmoid * ((_as_tensor(pos_weight, x) - 1) * t + 1)
        loss = (1 - t) * x - log_sigmoid
        if weight is not None:
            loss = loss * _as_tensor(weight, x)
        return _reduce(loss, reduction)

    def binary_crossentropy(self, target: TensorLike, reduction: str = "mean") -> Tensor:
        """tinygrad's spelling of binary_cross_entropy(x, target, reduction=reduction)."""
        return self.binary_cross_entropy(target, reduction=reduction)

    def binary_crossentropy_logits(
        self, target: TensorLike, reduction: str = "mean", pos_weight: TensorLike | None = None
    ) -> Tensor:
        """tinygrad's spelling of binary_cross_entropy_with_logits(x, target, reduction=..., pos_weight=...)."""
        return self.binary_cross_entropy_with_logits(target, reduction=reduction, pos_weight=pos_weight)

    # ---- regression losses: elementwise, input and target broadcast as in torch ----
    def l1_loss(
        self,
        target: TensorLike,
        size_average: bool | None = None,
        reduce: bool | None = None,
        reduction: str = "mean",
        weight: TensorLike | None = None,
    ) -> Tensor:
        """|input - target|, reduced; gradient sign(input - target), 0 at 0, as torch.

        >>> Tensor([1.0, -2.0]).l1_loss(Tensor([0.0, 0.0])).item()
        1.5
        """
        reduction = _reduction("l1_loss", reduction, size_average, reduce)
        return _weighted(_difference(self, target, "l1_loss").abs(), weight, reduction, "l1_loss", True)

    def mse_loss(
        self,
        target: TensorLike,
        size_average: bool | None = None,
        reduce: bool | None = None,
        reduction: str = "mean",
        weight: TensorLike | None = None,
    ) -> Tensor:
        """(input - target)**2, reduced, as torch.

        >>> Tensor([1.0, -2.0]).mse_loss(Tensor([0.0, 0.0])).item()
        2.5
        """
        reduction = _reduction("mse_loss", reduction, size_average, reduce)
        return _weighted(_difference(self, target, "mse_loss").square(), weight, reduction, "mse_loss", True)

    def smooth_l1_loss(
        self,
        target: TensorLike,
        size_average: bool | None = None,
        reduce: bool | None = None,
        reduction: str = "mean",
        beta: float = 1.0,
    ) -> Tensor:
        """0.5 d**2 / beta where |d| < beta, |d| - beta / 2 elsewhere (d = input - target), as torch; beta = 0
        is l1_loss. Gradient d / beta inside, sign(d) outside (so +-1 at |d| = beta).

        >>> Tensor([0.5, 3.0]).smooth_l1_loss(Tensor([0.0, 0.0]), reduction="sum").item()
        2.625
        """
        reduction = _reduction("smooth_l1_loss", reduction, size_average, reduce)
        if beta < 0:
            raise ArgumentError(f"smooth_l1_loss: beta must be >= 0 (torch raises too), got {beta}")
        d = _difference(self, target, "smooth_l1_loss")
        if beta == 0:
            return _reduce(d.abs(), reduction)
        return _reduce(_quadratic_then_linear(d, beta, beta) * (1 / beta), reduction)  # huber(delta=beta) / beta

    def huber_loss(
        self, target: TensorLike, reduction: str = "mean", delta: float = 1.0, weight: TensorLike | None = None
    ) -> Tensor:
        """0.5 d**2 where |d| < delta, delta (|d| - delta / 2) elsewhere (d = input - target), as torch: it is
        delta * smooth_l1_loss(beta=delta). Gradient d inside, delta sign(d) outside.

        >>> Tensor([0.5, 3.0]).huber_loss(Tensor([0.0, 0.0]), reduction="sum").item()
        2.625
        """
        reduction = _reduction("huber_loss", reduction)
        if delta <= 0:
            raise ArgumentError(f"huber_loss: delta must be > 0 (torch raises too), got {delta}")
        loss = _quadratic_then_linear(_difference(self, target, "huber_loss"), delta, delta)
        return _weighted(loss, weight, reduction, "huber_loss", False)

    # ---- distributions: kl_div, cosine_similarity ----
    def kl_div(
        self,
        target: TensorLike,
        size_average: bool | None = None,
        reduce: bool | None = None,
        reduction: str = "mean",
        log_target: bool = False,
    ) -> Tensor:
        """KL(target || input) pointwise for log-probabilities input: t (log t - input), 0 where t = 0 (torch's
        xlogy), or e**t (t - input) with log_target. "batchmean" divides the sum by input.shape[0] (torch's
        advice; "mean" averages over every element, as torch). The gradient to a target of 0 is NaN, as
        torch's (its xlogy's t / t).

        >>> round(Tensor([0.0, 0.0]).kl_div(Tensor([0.5, 0.5]), reduction="sum").item(), 4)
        -0.6931
        """
        batchmean = reduction == "batchmean" and size_average is None and reduce is None
        reduction = "sum" if batchmean else _reduction("kl_div", reduction, size_average, reduce)
        x = _float_input(self, "kl_div")
        t = _as_tensor(target, x)
        if log_target:
            loss = t.exp() * (t - x)  # kl: e**t (t - x)
        else:
            zero = t.eq(0)
            xlogy = zero.where(0.0, t * zero.where(1.0, t).log())  # t log t, 0 at t = 0
            # torch's gradient there is 0 / 0: s - s with s = sqrt(t - t) is +0 with gradient (1 - 1) * inf = NaN
            root = zero.where(t - t.detach(), 1.0).sqrt()
            xlogy = xlogy - (0.0 - zero.where(root - root, 0.0))  # exactly xlogy: the carried term is +0
            loss = xlogy - t * x  # kl: t log t - t x
        out = _reduce(loss, reduction)
        return out / x.shape[0] if batchmean and x.ndim else out

    def cosine_similarity(self, x2: TensorLike, dim: int = 1, eps: float = 1e-8) -> Tensor:
        """sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps)) over dim, x1 and x2 broadcast, as torch: each norm is
        clamped to eps in value only, so the gradient still flows through the norm (torch clamps under no_grad).

        >>> Tensor([[1.0, 0.0]]).cosine_similarity(Tensor([[1.0, 1.0]])).tolist()
        [0.7071067690849304]
        """
        x1 = self
        x1 = x1._float()
        a, b = x1._operands(x2, "cosine_similarity")
        a, b = a._float(), b._float()
        axis = dim if dim >= 0 else dim + a.ndim
        if not 0 <= axis < a.ndim:
            raise IndexError(f"cosine_similarity: dim {dim} is out of range for inputs of shape {a.shape}")
        na, nb = _l2_norm(a, axis), _l2_norm(b, axis)
        na, nb = with_gradient_of(na.clip(eps), na), with_gradient_of(nb.clip(eps), nb)
        return ((a / na) * (b / nb)).sum(axis)  # (..., D, ...) -> (..., ...)
