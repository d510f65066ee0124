"""Layout as arithmetic: a View maps a logical index to a position in a row-major buffer.

A View is (shape, strides, offset, mask). Element i of the view lives at offset + sum(i[d] * strides[d])
of the buffer it reads, unless the mask says i is outside the valid box, where it reads as zero (that is
how pad works). reshape, permute, expand, pad and shrink each build a new View from an old one without
touching data; reshape returns None where no single View can express it, and the caller copies instead.
Pipeline: tensor -> **graph (VIEW nodes)** -> schedule -> IR (index expressions) -> device.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

Shape = tuple[int, ...]
Strides = tuple[int, ...]
Box = tuple[tuple[int, int], ...]  # per dim, the half-open valid range [lo, hi)


def prod(xs: tuple[int, ...] | list[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


# Graph building, scheduling and lowering ask for the same few shapes' strides and contiguous views tens of
# thousands of times per new graph; both are pure functions of the shape returning immutable values.
def row_major_strides(shape: Shape) -> Strides:
    """Strides of a packed row-major array of this shape (size-1 dims get stride 0: they never move)."""
    return _row_major_strides(tuple(shape))


@functools.lru_cache(maxsize=4096)
def _row_major_strides(shape: Shape) -> Strides:
    strides = []
    step = 1
    for s in reversed(shape):
        strides.append(step if s != 1 else 0)
        step *= s
    return tuple(reversed(strides))


@dataclass(frozen=True)
class View:
    shape: Shape
    strides: Strides
    offset: int = 0
    mask: Box | None = None  # None: every index is valid

    @staticmethod
    def contiguous(shape: Shape) -> View:
        return _contiguous(tuple(shape))

    # ---- queries ----

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def is_contiguous(self) -> bool:
        """True when this view reads the buffer exactly as a packed row-major array of its shape."""
        return self.offset == 0 and self.mask is None and self.strides == row_major_strides(self.shape)

    def valid(self, index: tuple[int, ...]) -> bool:
        if self.mask is None:
            return True
        return all(lo <= i < hi for i, (lo, hi) in zip(index, self.mask))

    def position(self, index: tuple[int, ...]) -> int:
        """Where element `index` lives in the buffer (meaningful only where valid(index))."""
        return self.offset + sum(i * s for i, s in zip(index, self.strides))

    def __str__(self) -> str:
        mask = "" if self.mask is None else f", mask={list(map(list, self.mask))}"
        return f"View(shape={list(self.shape)}, strides={list(self.strides)}, offset={self.offset}{mask})"

    # ---- movement ----

    def permute(self, order: tuple[int, ...]) -> View:
        return View(
            tuple(self.shape[d] for d in order),
            tuple(self.strides[d] for d in order),
            self.offset,
            None if self.mask is None else tuple(self.mask[d] for d in order),
        )

    def expand(self, shape: Shape) -> View:
        """Size-1 dims stretch to the new size by reading the same element (stride 0)."""
        strides = tuple(st if old == new else 0 for old, new, st in zip(self.shape, shape, self.strides))
        mask = None
        if self.mask is not None:
            mask = tuple(
                m if old == new else ((0, new) if m == (0, 1) else (0, 0))
                for old, new, m in zip(self.shape, shape, self.mask)
            )
        return View(tuple(shape), strides, self.offset, mask)

    def shrink(self, box: Box) -> View:
        """Keep [start, end) of each dim."""
        offset = self.offset + sum(start * st for (start, _), st in zip(box, self.strides))
        shape = tuple(end - start for start, end in box)
        mask = None
        if self.mask is not None:
            mask = tuple(
                _clip_range(lo - start, hi - start, end - start) for (lo, hi), (start, end) in zip(self.mask, box)
            )
            if all(m == (0, s) for m, s in zip(mask, shape)):
                mask = None
        return View(shape, self.strides, offset, mask)

    def pad(self, widths: Box) -> View:
        """Add `before` and `after` zeros around each dim: the new cells are masked off."""
        if all(w == (0, 0) for w in widths):
            return self
        old_mask = self.mask if self.mask is not None else tuple((0, s) for s in self.shape)
        offset = self.offset - sum(before * st for (before, _), st in zip(widths, self.strides))
        shape = tuple(s + before + after for s, (before, after) in zip(self.shape, widths))
        mask = tuple((lo + before, hi + before) for (lo, hi), (before, _) in zip(old_mask, widths))
        return View(shape, self.strides, offset, mask)

    def reshape(self, shape: Shape) -> View | None:
        """The same elements in row-major order under a new shape, or None where strides cannot say it."""
        shape = tuple(shape)
        if shape == self.shape:
            return self
        if self.is_contiguous:
            return View.contiguous(shape)
        if self.mask is not None:
            return self._reshape_masked(shape)
        if self.size == 0:
            return View.contiguous(shape)
        # Strip size-1 dims, then walk old and new dims in step, grouping them into runs with equal
        # element counts. A run of old dims can be re-cut only if it is one strided line (each stride is
        # the next one's stride times its size); the new dims of the run then take strides along that line.
        old = [(s, st) for s, st in zip(self.shape, self.strides) if s != 1]
        new = [s for s in shape if s != 1]
        new_strides = [0] * len(new)
        oi = ni = 0
        while oi < len(old) and ni < len(new):
            oj, nj = oi + 1, ni + 1
            old_count, new_count = old[oi][0], new[ni]
            while old_count != new_count:
                if new_count < old_count:
                    new_count *= new[nj]
                    nj += 1
                else:
                    old_count *= old[oj][0]
                    oj += 1
            for k in range(oi, oj - 1):
                if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                    return None
            new_strides[nj - 1] = old[oj - 1][1]
            for k in range(nj - 1, ni, -1):
                new_strides[k - 1] = new_strides[k] * new[k]
            oi, ni = oj, nj
        it = iter(new_strides)
        strides = tuple(0 if s == 1 else next(it) for s in shape)
        return View(shape, strides, self.offset, None)

    def _reshape_masked(self, shape: Shape) -> View | None:
        """With a mask, only adding or removing size-1 dims keeps one View; anything else is a copy."""
        if [s for s in shape if s != 1] != [s for s in self.shape if s != 1]:
            return None
        kept = [(st, m) for s, st, m in zip(self.shape, self.strides, self.mask) if s != 1]
        dropped_ones = [m for s, m in zip(self.shape, self.mask) if s == 1]
        if any(lo >= hi for lo, hi in dropped_ones):
            return None  # a masked-off unit dim empties the view; leave that to a copy
        strides, mask = [], []
        k = 0
        for s in shape:
            if s == 1:
                strides.append(0)
                mask.append((0, 1))
            else:
                strides.append(kept[k][0])
                mask.append(kept[k][1])
                k += 1
        return View(shape, tuple(strides), self.offset, tuple(mask))


def _clip_range(lo: int, hi: int, size: int) -> tuple[int, int]:
    lo, hi = max(lo, 0), min(hi, size)
    return (lo, hi) if lo < hi else (0, 0)


@functools.lru_cache(maxsize=4096)
def _contiguous(shape: Shape) -> View:
    """The packed row-major view of a shape (one shared object per shape: a View is immutable)."""
    return View(shape, _row_major_strides(shape), 0, None)
