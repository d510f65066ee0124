"""The losses (limn.composed.functional.losses, as Tensor methods and as limn.nn functions) against torch, on numpy and
c.

Each row runs one loss in limn and in torch from the same inputs and compares the value and the gradients of
its sum (tests/oracle.py), for every reduction and option: class targets with weight, ignore_index and label
smoothing over (C,), (N, C) and (N, C, d1, d2) inputs, probability targets, binary cross-entropy at 0 and 1,
the regression losses at their kinks, kl_div, cosine_similarity, zero-size batches and float64. Class weights
are detached on both sides: torch does not differentiate them. Where torch raises, limn raises a typed error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from oracle import Table, case
from test_higher_order import check_hvp

import limn
import limn.composed.functional.losses
import limn.nn
from limn import Tensor

# torch warns for the legacy size_average/reduce arguments, kl_div's "mean" and broadcast regression targets:
# those are the cases under test
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

nan, inf = math.nan, math.inf
F = "torch.nn.functional"
rng = np.random.default_rng(0)

LOGITS = rng.normal(0, 2, (6, 5)).astype(np.float32)
TARGETS = np.array([0, 4, -100, 2, 2, 1], np.int32)  # one ignored by default
WEIGHT = np.array([0.5, 2.0, 1.0, 0.0, 3.0], np.float32)
LOGITS_4D = rng.normal(0, 2, (2, 3, 2, 2)).astype(np.float32)  # (N, C, d1, d2)
TARGETS_4D = np.array([[[0, 2], [1, 1]], [[2, -100], [0, 1]]], np.int32)
LOGITS_1D = rng.normal(0, 2, (5,)).astype(np.float32)
TARGET_0D = np.array(3, np.int32)
EMPTY_LOGITS, EMPTY_TARGETS = np.zeros((0, 5), np.float32), np.zeros((0,), np.int32)
PROBS = rng.dirichlet(np.ones(5), 6).astype(np.float32)  # (6, 5), rows sum to 1
PROBS_4D = rng.dirichlet(np.ones(3), (2, 2, 2)).transpose(0, 3, 1, 2).astype(np.float32).copy()  # (2, 3, 2, 2)
LOGITS_F64 = LOGITS.astype(np.float64)

W = "w.detach()"  # a class weight, on both sides
REDUCE = {"none": "", "mean": ".mean()", "sum": ".sum()"}


def _class_rows() -> list:
    rows = []
    for r in ("none", "mean", "sum"):
        limn_nll, torch_nll = (
            f"x.log_softmax(1).nll_loss(t, reduction={r!r})",
            f"{F}.nll_loss(x.log_softmax(1), t.long(), reduction={r!r})",
        )
        rows += [
            case(limn_nll, torch_nll, x=LOGITS, t=TARGETS, id=f"nll_loss-{r}"),
            case(
                f"x.log_softmax(1).nll_loss(t, weight={W}, reduction={r!r})",
                f"{F}.nll_loss(x.log_softmax(1), t.long(), weight={W}, reduction={r!r})",
                x=LOGITS,
                t=TARGETS,
                w=WEIGHT,
                id=f"nll_loss-weight-{r}",
            ),
            case(
                f"x.nll_loss(t, ignore_index=2, reduction={r!r})",
                f"{F}.nll_loss(x, t.long(), ignore_index=2, reduction={r!r})",
                x=LOGITS,
                t=np.abs(TARGETS) % 5,
                id=f"nll_loss-ignore_index-{r}",
            ),
            case(
                f"x.nll_loss(t, weight={W}, reduction={r!r})",
                f"{F}.nll_loss(x, t.long(), weight={W}, reduction={r!r})",
                x=LOGITS_4D,
                t=TARGETS_4D,
                w=WEIGHT[:3].copy(),
                id=f"nll_loss-NCd1d2-weight-{r}",
            ),
            case(
                f"x.nll_loss(t, reduction={r!r})",
                f"{F}.nll_loss(x, t.long(), reduction={r!r})",
                x=LOGITS_1D,
                t=TARGET_0D,
                id=f"nll_loss-1d-input-0d-target-{r}",
            ),
            case(
                f"x.nll_loss(t, reduction={r!r})",
                f"{F}.nll_loss(x, t.long(), reduction={r!r})",
                x=EMPTY_LOGITS,
                t=EMPTY_TARGETS,
                id=f"nll_loss-zero-size-batch-{r}",
            ),
            case(
                f"x.cross_entropy(t, reduction={r!r})",
                f"{F}.cross_entropy(x, t.long(), reduction={r!r})",
                x=LOGITS,
                t=TARGETS,
                id=f"cross_entropy-{r}",
            ),
            case(
                f"x.cross_entropy(t, reduction={r!r})",
                f"{F}.cross_entropy(x, t.long(), reduction={r!r})",
                x=EMPTY_LOGITS,
                t=EMPTY_TARGETS,
                id=f"cross_entropy-zero-size-batch-{r}",
            ),
            case(
                f"x.cross_entropy(t, reduction={r!r})",
                f"{F}.cross_entropy(x, t.long(), reduction={r!r})",
                x=LOGITS_1D,
                t=TARGET_0D,
                id=f"cross_entropy-1d-input-{r}",
            ),
            case(
                f"x.cross_entropy(t, reduction={r!r})",
                f"{F}.cross_entropy(x, t.long(), reduction={r!r})",
                x=LOGITS_F64,
                t=TARGETS,
                id=f"cross_entropy-float64-{r}",
            ),
        ]
        for s in (0.0, 0.2):
            rows += [
                case(
                    f"x.cross_entropy(t, weight={W}, reduction={r!r}, label_smoothing={s})",
                    f"{F}.cross_entropy(x, t.long(), weight={W}, reduction={r!r}, label_smoothing={s})",
                    x=LOGITS,
                    t=TARGETS,
                    w=WEIGHT,
                    id=f"cross_entropy-weight-smoothing{s}-{r}",
                ),
                case(
                    f"x.cross_entropy(t, ignore_index=1, reduction={r!r}, label_smoothing={s})",
                    f"{F}.cross_entropy(x, t.long(), ignore_index=1, reduction={r!r}, label_smoothing={s})",
                    x=LOGITS_4D,
                    t=np.abs(TARGETS_4D) % 3,
                    id=f"cross_entropy-NCd1d2-ignore_index-smoothing{s}-{r}",
                ),
                case(
                    f"x.cross_entropy(p, reduction={r!r}, label_smoothing={s})",
                    f"{F}.cross_entropy(x, p, reduction={r!r}, label_smoothing={s})",
                    x=LOGITS,
                    p=PROBS,
                    id=f"cross_entropy-probabilities-smoothing{s}-{r}",
                ),
                case(
                    f"x.cross_entropy(p, weight={W}, reduction={r!r}, label_smoothing={s})",
                    f"{F}.cross_entropy(x, p, weight={W}, reduction={r!r}, label_smoothing={s})",
                    x=LOGITS_4D,
                    p=PROBS_4D,
                    w=WEIGHT[:3].copy(),
                    id=f"cross_entropy-probabilities-NCd1d2-weight-smoothing{s}-{r}",
                ),
                case(
                    f"x.cross_entropy(p, reduction={r!r}, label_smoothing={s})",
                    f"{F}.cross_entropy(x, p, reduction={r!r}, label_smoothing={s})",
                    x=LOGITS_1D,
                    p=PROBS[0].copy(),
                    id=f"cross_entropy-probabilities-1d-smoothing{s}-{r}",
                ),
                case(
                    f"x.cross_entropy(p, reduction={r!r}, label_smoothing={s})",
                    f"{F}.cross_entropy(x, p, reduction={r!r}, label_smoothing={s})",
                    x=EMPTY_LOGITS,
                    p=EMPTY_LOGITS,
                    id=f"cross_entropy-probabilities-zero-size-smoothing{s}-{r}",
                ),
            ]
    return rows


CLASS_TARGETS = Table(
    _class_rows()
    + [
        case(
            "x.cross_entropy(t)",
            f"{F}.cross_entropy(x, t.long())",
            x=LOGITS,
            t=np.full(6, -100, np.int32),
            id="cross_entropy-every-target-ignored-mean-is-nan",
        ),
        case(
            "x.cross_entropy(t, label_smoothing=1.0)",
            f"{F}.cross_entropy(x, t.long(), label_smoothing=1.0)",
            x=LOGITS,
            t=TARGETS,
            id="cross_entropy-smoothing-1",
        ),
        case(
            "x.cross_entropy(t, weight=w.detach(), ignore_index=4, label_smoothing=0.3)",
            f"{F}.cross_entropy(x, t.long(), weight=w.detach(), ignore_index=4, label_smoothing=0.3)",
            x=LOGITS,
            t=np.abs(TARGETS) % 5,
            w=WEIGHT,
            id="cross_entropy-weight-ignore_index-smoothing-mean",
        ),
        case(
            "x.cross_entropy(t, reduction='none')",
            f"{F}.cross_entropy(x, t.long(), reduction='none')",
            x=np.array([[0.0, -inf, 1.0], [-inf, -inf, 2.0], [nan, 0.0, 0.0], [inf, 0.0, 1.0]], np.float32),
            t=np.array([0, 2, 1, 2], np.int32),
            id="cross_entropy-minus-inf-logits-are-zero-probability-nan-and-inf-propagate",
        ),
        case(
            "x.cross_entropy(t, reduction='none', label_smoothing=0.1)",
            f"{F}.cross_entropy(x, t.long(), reduction='none', label_smoothing=0.1)",
            x=np.array([[0.0, -inf, 1.0], [1e30, -1e30, 0.0]], np.float32),
            t=np.array([0, 0], np.int32),
            id="cross_entropy-smoothing-over-minus-inf-and-huge-logits",
        ),
        case(
            "x.nll_loss(t, size_average=False)",
            f"{F}.nll_loss(x, t.long(), size_average=False)",
            x=LOGITS,
            t=TARGETS,
            id="nll_loss-legacy-size_average-false-sums",
        ),
        case(
            "x.cross_entropy(t, reduce=False)",
            f"{F}.cross_entropy(x, t.long(), reduce=False)",
            x=LOGITS,
            t=TARGETS,
            id="cross_entropy-legacy-reduce-false-keeps",
        ),
        case(
            "x.sparse_categorical_crossentropy(t, label_smoothing=0.1)",
            f"{F}.cross_entropy(x.permute(0, 2, 1), t.long(), ignore_index=-1, label_smoothing=0.1)",
            x=LOGITS.reshape(2, 3, 5),
            t=np.array([[0, -1, 4], [1, 3, -1]], np.int32),
            id="sparse_categorical_crossentropy-classes-last",
        ),
        case(
            "limn.nn.cross_entropy(x, t, None, None, -100, None, 'sum', 0.1)",
            f"{F}.cross_entropy(x, t.long(), None, None, -100, None, 'sum', 0.1)",
            x=LOGITS,
            t=TARGETS,
            id="nn.cross_entropy-torchs-positional-order",
        ),
        case(
            "limn.nn.nll_loss(x, t, reduction='sum')",
            f"{F}.nll_loss(x, t.long(), reduction='sum')",
            x=LOGITS,
            t=TARGETS,
            id="nn.nll_loss",
        ),
    ]
)


@pytest.mark.parametrize("name", CLASS_TARGETS.ids)
def test_nll_loss_and_cross_entropy_match_torch(device: str, name: str) -> None:
    CLASS_TARGETS.assert_agrees(device, name)


# ---- binary cross-entropy ----

P = rng.uniform(0.02, 0.98, (4, 5)).astype(np.float32)
Y = rng.uniform(0, 1, (4, 5)).astype(np.float32)
BW = np.array([1.0, 0.5, 2.0, 0.0, 1.5], np.float32)
# the ends: x = 0 and 1 (the logs clamp at -100), x below 1e-12 (torch's gradient caps x (1 - x) at 1e-12)
P_EDGE = np.array([0.0, 0.0, 1.0, 1.0, 1e-13, 1e-20, 1e-10, 1 - 6e-8, 0.5, 0.3], np.float32)
Y_EDGE = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.3, 1.0], np.float32)
LOGIT_EDGE = np.array([-3e38, -1e30, -100.0, -20.0, -0.0, 0.0, 20.0, 100.0, 1e30, 3e38], np.float32)
POS_WEIGHT = np.array([1.0, 3.0, 0.5, 2.0, 1.0], np.float32)


def _binary_rows() -> list:
    rows = []
    for r in ("none", "mean", "sum"):
        rows += [
            case(
                f"x.binary_cross_entropy(y, reduction={r!r})",
                f"{F}.binary_cross_entropy(x, y, reduction={r!r})",
                x=P,
                y=Y,
                id=f"bce-{r}",
            ),
            case(
                f"x.binary_cross_entropy(y, weight=w.detach(), reduction={r!r})",
                # torch's weight= calls torch.broadcast_shapes, whose first call imports sympy (seconds): the
                # same loss spelled as torch documents it, the unweighted loss times the weight, reduced
                f"({F}.binary_cross_entropy(x, y, reduction='none') * w.detach()){REDUCE[r]}",
                x=P,
                y=Y,
                w=BW,
                id=f"bce-weight-broadcast-{r}",
            ),
            case(
                f"x.binary_cross_entropy(y, reduction={r!r})",
                f"{F}.binary_cross_entropy(x, y, reduction={r!r})",
                x=P_EDGE,
                y=Y_EDGE,
                id=f"bce-at-0-and-1-logs-clamp-at-minus-100-{r}",
            ),
            case(
                f"x.binary_cross_entropy_with_logits(y, reduction={r!r})",
                f"{F}.binary_cross_entropy_with_logits(x, y, reduction={r!r})",
                x=P * 8 - 4,
                y=Y,
                id=f"bce_with_logits-{r}",
            ),
            case(
                f"x.binary_cross_entropy_with_logits(y, weight=w.detach(), pos_weight=q.detach(), reduction={r!r})",
                f"{F}.binary_cross_entropy_with_logits(x, y, w.detach(), reduction={r!r}, pos_weight=q.detach())",
                x=P * 8 - 4,
                y=Y,
                w=BW,
                q=POS_WEIGHT,
                id=f"bce_with_logits-weight-pos_weight-{r}",
            ),
            case(
                f"x.binary_cross_entropy_with_logits(y, pos_weight=q.detach(), reduction={r!r})",
                f"{F}.binary_cross_entropy_with_logits(x, y, pos_weight=q.detach(), reduction={r!r})",
                x=LOGIT_EDGE,
                y=Y_EDGE,
                q=POS_WEIGHT[:1].copy(),
                id=f"bce_with_logits-finite-for-huge-logits-{r}",
            ),
        ]
    return rows


BINARY = Table(
    _binary_rows()
    + [
        case("x.binary_crossentropy(y)", f"{F}.binary_cross_entropy(x, y)", x=P, y=Y, id="bce-tinygrad-spelling"),
        case(
            "x.binary_crossentropy_logits(y, 'sum')",
            f"{F}.binary_cross_entropy_with_logits(x, y, reduction='sum')",
            x=P,
            y=Y,
            id="bce_with_logits-tinygrad-spelling",
        ),
        case(
            "x.binary_cross_entropy(y)",
            f"{F}.binary_cross_entropy(x, y)",
            x=np.zeros(0, np.float32),
            y=np.zeros(0, np.float32),
            id="bce-zero-size-mean-is-nan",
        ),
        case(
            "x.binary_cross_entropy(y)",
            f"{F}.binary_cross_entropy(x, y)",
            x=np.array(0.25, np.float32),
            y=np.array(1.0, np.float32),
            id="bce-0d",
        ),
        case(
            "x.binary_cross_entropy(y)",
            f"{F}.binary_cross_entropy(x, y)",
            x=P.astype(np.float64),
            y=Y.astype(np.float64),
            id="bce-float64",
        ),
        case(
            "limn.nn.binary_cross_entropy(x, y, None, None, None, 'sum')",
            f"{F}.binary_cross_entropy(x, y, None, None, None, 'sum')",
            x=P,
            y=Y,
            id="nn.binary_cross_entropy",
        ),
        case(
            "limn.nn.binary_cross_entropy_with_logits(x, y, pos_weight=q.detach())",
            f"{F}.binary_cross_entropy_with_logits(x, y, pos_weight=q.detach())",
            x=P,
            y=Y,
            q=POS_WEIGHT,
            id="nn.binary_cross_entropy_with_logits",
        ),
    ]
)


@pytest.mark.parametrize("name", BINARY.ids)
def test_binary_cross_entropy_matches_torch(device: str, name: str) -> None:
    BINARY.assert_agrees(device, name)


def test_bce_of_an_input_or_target_outside_0_1_is_nan_where_torch_raises() -> None:
    # a named difference: torch checks the values and raises; limn cannot see values when it builds the
    # graph, and the logs make NaN of them
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        torch.nn.functional.binary_cross_entropy(torch.tensor([1.5, nan]), torch.tensor([1.0, 1.0]))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        torch.nn.functional.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([nan]))
    out = Tensor([1.5, nan]).binary_cross_entropy(Tensor([1.0, 1.0]), reduction="none")
    assert np.isnan(out.numpy()).all()
    assert np.isnan(Tensor([0.5]).binary_cross_entropy(Tensor([nan])).item())


def test_bce_target_gradient_at_0_and_1_is_torchs_unclamped_inf() -> None:
    x, y = Tensor([0.0, 1.0]), Tensor([0.5, 0.5], requires_grad=True)
    x.binary_cross_entropy(y, reduction="sum").backward()
    tx, ty = torch.tensor([0.0, 1.0]), torch.tensor([0.5, 0.5], requires_grad=True)
    torch.nn.functional.binary_cross_entropy(tx, ty, reduction="sum").backward()
    assert y.grad.tolist() == ty.grad.tolist() == [inf, -inf]


# ---- regression losses at their kinks, with every reduction ----

A = np.array([0.0, 1.0, -1.0, 0.5, 2.5, -3.0, 1.0, 0.25, 4.0, -0.5], np.float32)
B = np.array([0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 3.0, 0.0, 0.0, 0.0], np.float32)  # A - B: 0, +-1, 0.5, +-2, ...
RW = np.linspace(0.1, 2.0, 10).astype(np.float32)


def _regression_rows() -> list:
    rows = []
    for r in ("none", "mean", "sum"):
        for name, ours, theirs in [
            ("l1_loss", "x.l1_loss(y, reduction={r!r})", "{F}.l1_loss(x, y, reduction={r!r})"),
            ("mse_loss", "x.mse_loss(y, reduction={r!r})", "{F}.mse_loss(x, y, reduction={r!r})"),
            ("smooth_l1_loss", "x.smooth_l1_loss(y, reduction={r!r})", "{F}.smooth_l1_loss(x, y, reduction={r!r})"),
            (
                "smooth_l1_loss-beta-half",
                "x.smooth_l1_loss(y, reduction={r!r}, beta=0.5)",
                "{F}.smooth_l1_loss(x, y, reduction={r!r}, beta=0.5)",
            ),
            (
                "smooth_l1_loss-beta-0-is-l1",
                "x.smooth_l1_loss(y, reduction={r!r}, beta=0.0)",
                "{F}.smooth_l1_loss(x, y, reduction={r!r}, beta=0.0)",
            ),
            ("huber_loss", "x.huber_loss(y, reduction={r!r})", "{F}.huber_loss(x, y, reduction={r!r})"),
            ("huber_loss-delta-2", "x.huber_loss(y, {r!r}, 2.0)", "{F}.huber_loss(x, y, {r!r}, 2.0)"),
            (
                "l1_loss-weight",
                "x.l1_loss(y, reduction={r!r}, weight=w)",
                "{F}.l1_loss(x, y, reduction={r!r}, weight=w)",
            ),
            (
                "mse_loss-weight",
                "x.mse_loss(y, reduction={r!r}, weight=w)",
                "{F}.mse_loss(x, y, reduction={r!r}, weight=w)",
            ),
            (
                "huber_loss-weight",
                "x.huber_loss(y, {r!r}, 0.5, weight=w)",
                "{F}.huber_loss(x, y, {r!r}, 0.5, weight=w)",
            ),
        ]:
            inputs = {"x": A, "y": B} if "weight" not in name else {"x": A, "y": B, "w": RW}
            rows.append(case(ours.format(r=r), theirs.format(r=r, F=F), **inputs, id=f"{name}-kinks-{r}"))
    return rows


REGRESSION = Table(
    _regression_rows()
    + [
        case(
            "x.mse_loss(y)",
            f"{F}.mse_loss(x, y)",
            x=rng.normal(size=(3, 4)).astype(np.float32),
            y=rng.normal(size=4).astype(np.float32),
            id="mse_loss-target-broadcasts-as-torch",
        ),
        case(
            "x.l1_loss(y)",
            f"{F}.l1_loss(x, y)",
            x=np.zeros((0, 3), np.float32),
            y=np.zeros((0, 3), np.float32),
            id="l1_loss-zero-size-mean-is-nan",
        ),
        case(
            "x.smooth_l1_loss(y, reduction='sum')",
            f"{F}.smooth_l1_loss(x, y, reduction='sum')",
            x=np.zeros((0, 3), np.float32),
            y=np.zeros((0, 3), np.float32),
            id="smooth_l1_loss-zero-size-sum-is-0",
        ),
        case(
            "x.huber_loss(y)",
            f"{F}.huber_loss(x, y)",
            x=np.array(3.0, np.float32),
            y=np.array(0.5, np.float32),
            id="huber_loss-0d",
        ),
        case(
            "x.smooth_l1_loss(y)",
            f"{F}.smooth_l1_loss(x, y)",
            x=np.array([nan, inf, -inf, 1.0], np.float32),
            y=np.array([0.0, 0.0, 0.0, nan], np.float32),
            id="smooth_l1_loss-nan-and-inf",
        ),
        case(
            "x.huber_loss(y)",
            f"{F}.huber_loss(x, y)",
            x=np.array([nan, inf, -inf, 1e30], np.float32),
            y=np.zeros(4, np.float32),
            id="huber_loss-nan-and-inf",
        ),
        case(
            "x.mse_loss(y)",
            f"{F}.mse_loss(x, y)",
            x=A.astype(np.float64),
            y=B.astype(np.float64),
            id="mse_loss-float64",
        ),
        case(
            "x.l1_loss(y, size_average=False)",
            f"{F}.l1_loss(x, y, size_average=False)",
            x=A,
            y=B,
            id="l1_loss-legacy-size_average",
        ),
        case(
            "limn.nn.mse_loss(x, y, None, None, 'sum')",
            f"{F}.mse_loss(x, y, None, None, 'sum')",
            x=A,
            y=B,
            id="nn.mse_loss-torchs-positional-order",
        ),
        case(
            "limn.nn.smooth_l1_loss(x, y, beta=2.0)",
            f"{F}.smooth_l1_loss(x, y, beta=2.0)",
            x=A,
            y=B,
            id="nn.smooth_l1_loss",
        ),
        case("limn.nn.huber_loss(x, y, delta=0.25)", f"{F}.huber_loss(x, y, delta=0.25)", x=A, y=B, id="nn.huber_loss"),
        case("limn.nn.l1_loss(x, y)", f"{F}.l1_loss(x, y)", x=A, y=B, id="nn.l1_loss"),
    ]
)


SPECIAL_X = np.array([nan, inf, -inf, -0.0, 0.0, 3e38, -3e38, 1.0], np.float32)
SPECIAL_Y = np.array([0.0, 0.0, 1.0, -0.0, nan, 3e38, 0.0, inf], np.float32)
SPECIAL = [
    case(
        f"x.{name}(y, reduction='none')",
        f"{F}.{name}(x, y, reduction='none')",
        x=SPECIAL_X,
        y=SPECIAL_Y,
        id=f"{name}-nan-inf-signed-zero-huge",
    )
    for name in ("l1_loss", "mse_loss", "smooth_l1_loss", "huber_loss")
] + [
    case(
        "x.binary_cross_entropy_with_logits(y, reduction='none')",
        f"{F}.binary_cross_entropy_with_logits(x, y, reduction='none')",
        x=SPECIAL_X,
        y=np.array([0.0, 0.0, 1.0, 0.5, nan, 1.0, 0.0, 0.25], np.float32),
        id="bce_with_logits-nan-inf-signed-zero-huge",
    ),
    case(
        "x.binary_cross_entropy(y, reduction='none')",
        f"{F}.binary_cross_entropy(x, y, reduction='none')",
        x=np.array([0.5, 0.5, -0.0, 0.25], np.float32),
        y=np.array([0.0, 1.0, 1.0, -0.0], np.float32),
        id="bce-signed-zeros",
    ),
    case(
        "x.kl_div(q, reduction='none')",
        f"{F}.kl_div(x, q, reduction='none')",
        x=np.array([nan, -inf, 0.0, -1.0], np.float32),
        q=np.array([0.5, 0.5, nan, inf], np.float32),
        id="kl_div-nan-and-inf",
    ),
    case(
        "x.kl_div(q, reduction='batchmean')",
        f"{F}.kl_div(x, q, reduction='batchmean')",
        x=np.zeros((0, 3), np.float32),
        q=np.zeros((0, 3), np.float32),
        id="kl_div-batchmean-zero-size-batch-is-nan",
    ),
    case(
        "x.binary_cross_entropy_with_logits(y)",
        f"{F}.binary_cross_entropy_with_logits(x, y)",
        x=np.zeros((0, 3), np.float32),
        y=np.zeros((0, 3), np.float32),
        id="bce_with_logits-zero-size-mean-is-nan",
    ),
    case(
        "x.huber_loss(y)",
        f"{F}.huber_loss(x, y)",
        x=A.astype(np.float64),
        y=B.astype(np.float64),
        id="huber_loss-float64",
    ),
    case(
        "x.binary_cross_entropy_with_logits(y)",
        f"{F}.binary_cross_entropy_with_logits(x, y)",
        x=(P * 8 - 4).astype(np.float64),
        y=Y.astype(np.float64),
        id="bce_with_logits-float64",
    ),
]
SPECIALS = Table(SPECIAL)


@pytest.mark.parametrize("name", SPECIALS.ids)
def test_losses_over_nan_inf_signed_zeros_and_huge_values_match_torch(device: str, name: str) -> None:
    SPECIALS.assert_agrees(device, name)


@pytest.mark.parametrize("name", REGRESSION.ids)
def test_regression_losses_match_torch_at_their_kinks(device: str, name: str) -> None:
    REGRESSION.assert_agrees(device, name)


# ---- kl_div and cosine_similarity ----

LOGP = np.log(rng.dirichlet(np.ones(4), 3)).astype(np.float32)  # (3, 4) log-probabilities
Q = np.array([[0.5, 0.5, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4], [0.0, 1.0, 0.0, 0.0]], np.float32)  # with zeros
U = rng.normal(size=(3, 4)).astype(np.float32)
V = rng.normal(size=(3, 4)).astype(np.float32)
U_ZERO = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0], [1e-9, 0.0, 0.0, 0.0]], np.float32)


def _distribution_rows() -> list:
    rows = []
    for r in ("none", "mean", "sum", "batchmean"):
        rows += [
            # torch's gradient to a target of 0 is NaN (xlogy's t / t), and limn's too
            case(
                f"x.kl_div(q, reduction={r!r})",
                f"{F}.kl_div(x, q, reduction={r!r})",
                x=LOGP,
                q=Q,
                id=f"kl_div-target-with-zeros-{r}",
            ),
            case(
                f"x.kl_div(q, reduction={r!r})",
                f"{F}.kl_div(x, q, reduction={r!r})",
                x=LOGP,
                q=Q * 0.9 + 0.025,
                id=f"kl_div-{r}",
            ),
            case(
                f"x.kl_div(q, reduction={r!r}, log_target=True)",
                f"{F}.kl_div(x, q, reduction={r!r}, log_target=True)",
                x=LOGP,
                q=LOGP[::-1].copy(),
                id=f"kl_div-log_target-{r}",
            ),
        ]
    return rows


DISTRIBUTIONS = Table(
    _distribution_rows()
    + [
        case(
            "x.kl_div(q, reduction='batchmean')",
            f"{F}.kl_div(x, q, reduction='batchmean')",
            x=np.array(-1.0, np.float32),
            q=np.array(0.5, np.float32),
            id="kl_div-batchmean-0d",
        ),
        case(
            "limn.nn.kl_div(x, q, None, None, 'sum', True)",
            f"{F}.kl_div(x, q, None, None, 'sum', True)",
            x=LOGP,
            q=LOGP,
            id="nn.kl_div-torchs-positional-order",
        ),
        case("x.cosine_similarity(y)", f"{F}.cosine_similarity(x, y)", x=U, y=V, id="cosine_similarity-dim-1"),
        case(
            "x.cosine_similarity(y, dim=0)",
            f"{F}.cosine_similarity(x, y, dim=0)",
            x=U,
            y=V,
            id="cosine_similarity-dim-0",
        ),
        case(
            "x.cosine_similarity(y, dim=-1)",
            f"{F}.cosine_similarity(x, y, dim=-1)",
            x=U,
            y=V[0].copy(),
            id="cosine_similarity-broadcast",
        ),
        case(
            "x.cosine_similarity(y)",
            f"{F}.cosine_similarity(x, y)",
            x=U_ZERO,
            y=V,
            id="cosine_similarity-zero-vector-norm-clamps-to-eps-in-value-only",
        ),
        case(
            "x.cosine_similarity(y, eps=0.5)",
            f"{F}.cosine_similarity(x, y, eps=0.5)",
            x=U * 0.1,
            y=V,
            id="cosine_similarity-eps",
        ),
        case(
            "x.cosine_similarity(y)",
            f"{F}.cosine_similarity(x, y)",
            x=U.astype(np.float64),
            y=V.astype(np.float64),
            id="cosine_similarity-float64",
        ),
        case(
            "x.cosine_similarity(y)",
            f"{F}.cosine_similarity(x, y)",
            x=np.zeros((0, 4), np.float32),
            y=np.zeros((0, 4), np.float32),
            id="cosine_similarity-zero-size",
        ),
        case(
            "limn.nn.cosine_similarity(x, y, 0, 1e-6)",
            f"{F}.cosine_similarity(x, y, 0, 1e-6)",
            x=U,
            y=V,
            id="nn.cosine_similarity",
        ),
    ]
)


@pytest.mark.parametrize("name", DISTRIBUTIONS.ids)
def test_kl_div_and_cosine_similarity_match_torch(device: str, name: str) -> None:
    DISTRIBUTIONS.assert_agrees(device, name)


# ---- one_hot ----

IDS = np.array([[0, 3], [2, 2]], np.int32)
ONE_HOT = Table(
    [
        case(
            "x.one_hot()",
            f"{F}.one_hot(x.long()).int()",
            grad=False,
            x=IDS,
            id="one_hot-num_classes-inferred-from-the-max",
        ),
        case("x.one_hot(6)", f"{F}.one_hot(x.long(), 6).int()", grad=False, x=IDS, id="one_hot-num_classes-given"),
        case(
            "x.one_hot(3)",
            f"{F}.one_hot(x.long(), 3).int()",
            grad=False,
            x=np.zeros(0, np.int32),
            id="one_hot-empty-with-num_classes",
        ),
        case("x.one_hot()", f"{F}.one_hot(x.long()).int()", grad=False, x=np.array(4, np.int32), id="one_hot-0d"),
        case("limn.nn.one_hot(x, -1)", f"{F}.one_hot(x.long(), -1).int()", grad=False, x=IDS, id="nn.one_hot"),
    ]
)


@pytest.mark.parametrize("name", ONE_HOT.ids)
def test_one_hot_matches_torch(device: str, name: str) -> None:
    ONE_HOT.assert_agrees(device, name)


# ---- second derivatives (backward with create_graph=True), against torch's ----

Q34 = np.full((3, 4), 0.3, np.float32)
SECOND_ORDER = {
    "bce_with_logits": (
        lambda x: x.binary_cross_entropy_with_logits(Tensor(Q34)),
        lambda x: torch.nn.functional.binary_cross_entropy_with_logits(x, torch.tensor(Q34)),
    ),
    "bce": (
        lambda x: x.sigmoid().binary_cross_entropy(Tensor(Q34)),
        lambda x: torch.nn.functional.binary_cross_entropy(x.sigmoid(), torch.tensor(Q34)),
    ),
    "cross_entropy-probabilities-smoothing": (
        lambda x: x.cross_entropy(Tensor(Q34), label_smoothing=0.1),
        lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(Q34), label_smoothing=0.1),
    ),
    "nll_loss-weight": (
        lambda x: x.log_softmax(1).nll_loss(Tensor([0, 3, 1]), weight=Tensor([1.0, 2.0, 0.5, 3.0])),
        lambda x: torch.nn.functional.nll_loss(
            x.log_softmax(1), torch.tensor([0, 3, 1]), weight=torch.tensor([1.0, 2.0, 0.5, 3.0])
        ),
    ),
    "smooth_l1_loss": (
        lambda x: (x * 2).smooth_l1_loss(Tensor(np.zeros((3, 4), np.float32)), beta=0.7),
        lambda x: torch.nn.functional.smooth_l1_loss(x * 2, torch.zeros(3, 4), beta=0.7),
    ),
    "kl_div-batchmean": (
        lambda x: x.log_softmax(1).kl_div(Tensor(Q34), reduction="batchmean"),
        lambda x: torch.nn.functional.kl_div(x.log_softmax(1), torch.tensor(Q34), reduction="batchmean"),
    ),
    "cosine_similarity": (
        lambda x: x.cosine_similarity(x * x).sum(),
        lambda x: torch.nn.functional.cosine_similarity(x, x * x).sum(),
    ),
}


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_derivatives_match_torch(name: str) -> None:
    ours, theirs = SECOND_ORDER[name]
    check_hvp(ours, theirs, [(3, 4)])


# ---- errors: where torch raises, limn raises a typed error ----

L, T = Tensor(LOGITS), Tensor(TARGETS)
tL, tT = torch.tensor(LOGITS), torch.tensor(TARGETS).long()
Fn = torch.nn.functional
ERRORS = {
    "cross_entropy-target-batch-mismatch": (
        lambda: L.cross_entropy(Tensor([0, 1])),
        lambda: Fn.cross_entropy(tL, tT[:2]),
        ValueError,
        r"needs class targets of shape \(6,\)",
    ),
    "cross_entropy-float-class-target": (
        lambda: L.cross_entropy(Tensor([0.0] * 6)),
        lambda: Fn.cross_entropy(tL, tT.float()),
        RuntimeError,
        "float target holds class probabilities",
    ),
    "cross_entropy-int-probabilities": (
        lambda: L.cross_entropy(Tensor(np.zeros((6, 5), np.int32))),
        lambda: Fn.cross_entropy(tL, torch.zeros(6, 5, dtype=torch.long)),
        RuntimeError,
        "must be float",
    ),
    "cross_entropy-label_smoothing-above-1": (
        lambda: L.cross_entropy(T, label_smoothing=1.5),
        lambda: Fn.cross_entropy(tL, tT, label_smoothing=1.5),
        ValueError,
        r"label_smoothing must be in \[0, 1\]",
    ),
    "cross_entropy-bad-reduction": (
        lambda: L.cross_entropy(T, reduction="avg"),
        lambda: Fn.cross_entropy(tL, tT, reduction="avg"),
        ValueError,
        "reduction must be",
    ),
    "cross_entropy-weight-per-class": (
        lambda: L.cross_entropy(T, weight=Tensor([1.0, 2.0])),
        lambda: Fn.cross_entropy(tL, tT, weight=torch.ones(2)),
        ValueError,
        "one value per class",
    ),
    "cross_entropy-0d-input": (
        lambda: Tensor(1.0).cross_entropy(Tensor(0)),
        lambda: Fn.cross_entropy(torch.tensor(1.0), torch.tensor(0)),
        ValueError,
        "0-d",
    ),
    "nll_loss-0d-input": (
        lambda: Tensor(1.0).nll_loss(Tensor(0)),
        lambda: Fn.nll_loss(torch.tensor(1.0), torch.tensor(0)),
        ValueError,
        "0-d",
    ),
    "bce-target-shape": (
        lambda: Tensor([0.5, 0.5]).binary_cross_entropy(Tensor([1.0])),
        lambda: Fn.binary_cross_entropy(torch.tensor([0.5, 0.5]), torch.tensor([1.0])),
        ValueError,
        "must be the same",
    ),
    "bce_with_logits-target-shape": (
        lambda: Tensor([0.5, 0.5]).binary_cross_entropy_with_logits(Tensor([1.0])),
        lambda: Fn.binary_cross_entropy_with_logits(torch.tensor([0.5, 0.5]), torch.tensor([1.0])),
        ValueError,
        "must be the same",
    ),
    "smooth_l1_loss-negative-beta": (
        lambda: Tensor([1.0]).smooth_l1_loss(Tensor([0.0]), beta=-1.0),
        lambda: Fn.smooth_l1_loss(torch.ones(1), torch.zeros(1), beta=-1.0),
        ValueError,
        "beta must be >= 0",
    ),
    "huber_loss-delta-0": (
        lambda: Tensor([1.0]).huber_loss(Tensor([0.0]), delta=0.0),
        lambda: Fn.huber_loss(torch.ones(1), torch.zeros(1), delta=0.0),
        ValueError,
        "delta must be > 0",
    ),
    "mse_loss-shapes-that-do-not-broadcast": (
        lambda: Tensor.ones((2, 3)).mse_loss(Tensor.ones(4)),
        lambda: Fn.mse_loss(torch.ones(2, 3), torch.ones(4)),
        ValueError,
        "do not broadcast",
    ),
    "one_hot-infer-from-empty": (
        lambda: Tensor(np.zeros(0, np.int32)).one_hot(),
        lambda: Fn.one_hot(torch.zeros(0, dtype=torch.long)),
        ValueError,
        "empty tensor",
    ),
    "one_hot-infer-from-negative": (
        lambda: Tensor([-1, 2]).one_hot(),
        lambda: Fn.one_hot(torch.tensor([-1, 2])),
        ValueError,
        "non-negative",
    ),
    "one_hot-num_classes-below-minus-1": (
        lambda: Tensor([1, 2]).one_hot(-2),
        lambda: Fn.one_hot(torch.tensor([1, 2]), -2),
        ValueError,
        "num_classes must be >= 0",
    ),
}


@pytest.mark.parametrize("mistake", ERRORS)
def test_where_torch_raises_limn_raises_a_typed_error(mistake: str) -> None:
    ours, theirs, error, message = ERRORS[mistake]
    with pytest.raises((RuntimeError, ValueError, IndexError, TypeError)):
        theirs()
    with pytest.raises(error, match=message):
        ours()


@pytest.mark.parametrize(
    "loss",
    [
        lambda: L.cross_entropy(Tensor([0, 1, 2, 3, 4, 5])),
        lambda: L.log_softmax(1).nll_loss(Tensor([0, 1, 2, 3, 4, -1])),
        lambda: L.cross_entropy(Tensor([0, 1, 2, 3, 4, 7]), weight=Tensor(WEIGHT)),
    ],
    ids=["cross_entropy-past-the-classes", "nll_loss-negative", "cross_entropy-weighted-past-the-classes"],
)
def test_a_class_index_out_of_range_is_an_index_error_when_computed(loss) -> None:
    # torch raises at the call; limn cannot see the indices until they are computed, and raises then
    lazy = loss()
    with pytest.raises(IndexError, match="out of range"):
        lazy.numpy()


def test_the_functional_cross_entropy_is_the_tensor_method() -> None:
    # one definition: F.cross_entropy (torch's argument names around it), nn.CrossEntropyLoss and
    # x.cross_entropy all run LossesMixin's method
    assert limn.nn.functional.cross_entropy.__wrapped__ is Tensor.cross_entropy
    assert limn.nn.CrossEntropyLoss.function is Tensor.cross_entropy


def test_one_hot_num_classes_inferred_realizes_the_ids_as_documented() -> None:
    ids = Tensor([1, 4]) + 1  # lazy: one_hot must compute it to read the max
    assert ids.one_hot().shape == (2, 6)
    assert limn.nn.one_hot(Tensor([0]), 2).tolist() == [[1, 0]]
