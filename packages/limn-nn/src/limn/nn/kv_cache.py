"""KVCache: the keys and values an attention layer has seen while generating, in buffers of a fixed length.

Generating one token at a time, a layer attends from the new position to every position so far. Recomputing the
keys and values of the whole context for each token costs a full forward per token, and a graph of a new shape
for each (a compiled device builds a plan per shape). A KVCache keeps them instead: `length` slots per head,
filled one position per step by `update`, which returns the whole buffers and the mask of the filled slots for
fused attention's key_mask (limn.composed.functional.attention). The position is a tensor, so every step has the same
graph and a captured step (limn.capture) replays it: producing N tokens costs N one-token runs.
Pipeline: nn (a generation step) -> **KVCache.update** (ASSIGNs into the cache) -> attention -> realize.
"""

from __future__ import annotations

from limn import dtypes
from limn.dtypes import DType
from limn.errors import ArgumentError
from limn.frontend.tensor import Tensor

__all__ = ["KVCache"]


class KVCache:
    """Keys and values for `batch` sequences of up to `length` positions, `heads` heads of `head_dim` each.

    >>> cache = KVCache(batch=1, heads=2, length=4, head_dim=3)
    >>> k = v = Tensor.ones((1, 2, 1, 3))
    >>> keys, values, filled = cache.update(k, v, Tensor(0, dtype="int32"))
    >>> keys.shape, filled.tolist()
    ((1, 2, 4, 3), [True, False, False, False])
    """

    def __init__(
        self,
        batch: int,
        heads: int,
        length: int,
        head_dim: int,
        dtype: DType | str = dtypes.float32,
        device: str | None = None,
    ) -> None:
        if min(batch, heads, length, head_dim) < 1:
            raise ArgumentError(
                f"KVCache(batch={batch}, heads={heads}, length={length}, head_dim={head_dim}): every size must "
                "be at least 1"
            )
        shape = (batch, heads, length, head_dim)
        self.keys = Tensor.zeros(shape, dtype=dtype, device=device).realize()  # (B, H, L, hs)
        self.values = Tensor.zeros(shape, dtype=dtype, device=device).realize()
        self.length = length
        self.slots = Tensor.arange(length, dtype=dtypes.int32, device=self.keys.device).realize()  # (L,)

    def update(self, k: Tensor, v: Tensor, position: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Writes one position's keys and values, k and v (B, H, 1, hs), into slot `position` (a 0-d int
        tensor, 0 <= position < length) and returns (keys, values, filled): the whole (B, H, L, hs) buffers
        with the new slot in place, and (L,) bool, True for the slots 0..position, for key_mask. The writes are
        assigns, realized with the step that reads them (the step's attention reads the values returned here,
        not the buffers, so it sees this position too)."""
        want = (*self.keys.shape[:2], 1, self.keys.shape[3])
        if tuple(k.shape) != want or tuple(v.shape) != want:
            raise ArgumentError(
                f"KVCache.update: k and v must be one position, shape {want}, got {tuple(k.shape)} and "
                f"{tuple(v.shape)}; feed a prompt one position per step"
            )
        if position.ndim != 0 or not position.dtype.is_int:
            raise ArgumentError(
                f"KVCache.update: position must be a 0-d integer tensor (so every step has one graph), got "
                f"{position.dtype.name}{list(position.shape)}"
            )
        here = (self.slots == position).reshape(1, 1, self.length, 1)  # (1, 1, L, 1): the slot written now
        keys = here.where(k.cast(self.keys.dtype), self.keys)  # (B, H, L, hs)
        values = here.where(v.cast(self.values.dtype), self.values)
        self.keys.assign(keys)
        self.values.assign(values)
        return keys, values, self.slots <= position
