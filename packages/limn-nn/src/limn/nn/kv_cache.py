"""KVCache: the keys and values an attention layer has seen while generating, in buffers of a fixed length.

Generating one token at a time, a layer attends from the new position to every position so far. Recomputing the
keys and values of the whole context for each token costs a full forward per token, and a graph of a new shape
for each (a compiled device builds a plan per shape). A KVCache keeps them instead: `length` slots per head,
filled by `update` (a prompt's positions at once, then one position per step), which returns the whole buffers
and the mask of the filled slots for fused attention's key_mask (limn.composed.functional.attention). The
position is a tensor, so every step has the same graph and a captured step (limn.capture) replays it:
producing N tokens costs N one-token runs.
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
        """Writes the keys and values of T positions, k and v (B, H, T, hs), into slots position .. position + T - 1
        (`position` a 0-d int tensor; the caller keeps position + T <= length, which a lazy position cannot be
        checked against) and returns (keys, values, filled): the whole (B, H, L, hs) buffers with the new slots
        in place, and (L,) bool, True for the slots up to the last one written, for key_mask. A prompt goes in as
        one update of all its positions (their queries attend with `visible`), a generated token as an update
        of one. The writes are assigns, realized with the step that reads them (the step's attention reads the
        values returned here, not the buffers, so it sees these positions too)."""
        b, h, length, hs = self.keys.shape
        t = k.shape[2] if k.ndim == 4 else 0
        if tuple(k.shape) != (b, h, t, hs) or tuple(v.shape) != (b, h, t, hs) or not 1 <= t <= length:
            raise ArgumentError(
                f"KVCache.update: k and v must be (B, H, T, hs) = ({b}, {h}, T, {hs}) with 1 <= T <= {length} (the "
                f"cache's length), got {tuple(k.shape)} and {tuple(v.shape)}; feed a longer prompt in pieces"
            )
        if position.ndim != 0 or not position.dtype.is_int:
            raise ArgumentError(
                f"KVCache.update: position must be a 0-d integer tensor (so every step has one graph), got "
                f"{position.dtype.name}{list(position.shape)}"
            )
        if t == 1:  # a generated token: (B, H, 1, hs) broadcasts over the slots
            here, filled, new_k, new_v = self.slots == position, self.slots <= position, k, v
        else:  # a prompt: (B, H, T, hs) -> (B, H, L, hs), slot j taking position j - position (clipped elsewhere)
            offset = self.slots - position.cast(self.slots.dtype)  # (L,)
            here, filled, index = (offset >= 0) & (offset < t), offset < t, offset.clip(0, t - 1)
            new_k, new_v = k.index_select(2, index), v.index_select(2, index)
        here = here.reshape(1, 1, length, 1)  # (1, 1, L, 1): the slots written now
        keys = here.where(new_k.cast(self.keys.dtype), self.keys)  # (B, H, L, hs)
        values = here.where(new_v.cast(self.values.dtype), self.values)
        self.keys.assign(keys)
        self.values.assign(values)
        return keys, values, filled

    def visible(self, position: Tensor, t: int) -> Tensor:
        """(T, L) bool for attn_mask: the query of position + i sees slots 0 .. position + i (causal over the
        prompt and everything cached before it)."""
        if not 1 <= t <= self.length:
            raise ArgumentError(f"KVCache.visible: T must be 1 .. {self.length} (the cache's length), got {t}")
        # the slot numbers are on the device already: no host data, which a captured step would check twice
        queries = self.slots[:t] + position.cast(self.slots.dtype)  # (T,): each query's position
        return self.slots.reshape(1, self.length) <= queries.reshape(t, 1)
