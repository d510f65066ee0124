"""Lookups and the loss built on them, composed from GATHER and SCATTER: embedding, one_hot, cross_entropy.

Each takes a tensor and int indices (a tensor, or host data that becomes one) and gives a tensor: rows of
a table, one-hot rows, or torch's cross-entropy of logits against class targets. An index out of range is
an IndexError when the value is computed (the numpy device and the compiled ones check before writing).
Pipeline: **tensor (composed ops)** -> graph (GATHER, SCATTER) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from limn import dtypes
from limn.primitives import Tensor, index_tensor


def embedding(x: Tensor, idx: Tensor) -> Tensor:
    """Rows of this (V, D) table picked by int indices of any shape S: (V, D), S -> (*S, D).

    >>> Tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]).embedding(Tensor([2, 0])).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    """
    if x.ndim != 2:
        raise ValueError(f"embedding: the table must be (vocab, dim), got {x.shape}")
    idx = index_tensor(idx, "embedding")
    flat = idx.reshape(idx.size, 1).expand(idx.size, x.shape[1])  # (N,) -> (N, D)
    return x.gather(flat, axis=0).reshape(idx.shape + (x.shape[1],))


def one_hot(x: Tensor, num_classes: int) -> Tensor:
    """Int class ids of shape S -> (*S, num_classes) int32 with a 1 at each id. It is a scatter, so an id
    outside [0, num_classes) is an IndexError when the value is computed, not a silent row of zeros."""
    idx = index_tensor(x, "one_hot").unsqueeze(-1)  # S -> (*S, 1)
    ones = Tensor.ones(idx.shape, dtype=dtypes.int32, device=x.device)
    zeros = Tensor.zeros(idx.shape[:-1] + (num_classes,), dtype=dtypes.int32, device=x.device)
    return zeros.scatter_add(idx, ones, axis=-1)  # (*S, num_classes)


def cross_entropy(
    x: Tensor, target: Tensor, ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean"
) -> Tensor:
    """torch.nn.functional.cross_entropy for logits (N, C) or (N, C, ...) and int class targets (N, ...).
    loss = (1 - s) * -log p[target] + s * mean_c(-log p[c]); targets equal to ignore_index count nothing,
    and "mean" divides by the targets that count (NaN when none does, as torch)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', not {reduction!r}")
    logits = x if x.ndim > 1 else x.unsqueeze(0)
    target = index_tensor(target, "cross_entropy")
    target = target if x.ndim > 1 else target.reshape(1)
    if target.shape != logits.shape[:1] + logits.shape[2:]:
        raise ValueError(
            f"cross_entropy: logits {x.shape} need targets of shape "
            f"{logits.shape[:1] + logits.shape[2:]}, got {target.shape}"
        )
    logp = logits.log_softmax(axis=1)  # (N, C, ...)
    valid = target.ne(ignore_index)
    safe = valid.where(target, 0).cast(target.dtype).unsqueeze(1)  # ignored rows read class 0
    nll = -logp.gather(safe, axis=1).squeeze(1)  # (N, ...)
    loss = nll if label_smoothing == 0 else (1 - label_smoothing) * nll - label_smoothing * logp.mean(axis=1)
    loss = valid.where(loss, 0.0)
    if reduction == "none":
        return loss if x.ndim > 1 else loss.reshape(())
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / valid.cast(loss.dtype).sum()
