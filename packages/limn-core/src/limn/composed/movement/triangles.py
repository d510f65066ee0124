"""Triangles and diagonals of matrices: tril, triu, diagonal, diag, diag_embed, with torch's arguments.

Each takes a tensor whose last two dims (or the two named) are the matrix and gives a tensor: tril and triu
a WHERE against a constant triangle, diagonal a view (the matrix flattened, padded by one per row, read
down the first column), diag and diag_embed its reverse, so gradients are exact views back.
Pipeline: **tensor (composed ops)** -> graph (VIEW, WHERE) -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import limn  # limn.Tensor, named at call time: the class is built from this module's mixin
from limn import dtypes
from limn.errors import ArgumentError
from limn.frontend.arguments import normalize_axis

if TYPE_CHECKING:
    from limn.frontend.tensor import Tensor


def _zero(x: Tensor) -> bool | int:
    """A python 0 that keeps x's dtype in where(): False for a bool tensor, 0 otherwise."""
    return False if x.dtype == dtypes.bool_ else 0


def _triangle(x: Tensor, keep: np.ndarray, what: str) -> Tensor:
    if x.ndim < 2:
        raise ArgumentError(f"{what}: needs a tensor of at least 2 dims (a matrix), got shape {x.shape}")
    mask = limn.Tensor(keep, device=x.device)  # (n, m), broadcast over the leading dims
    return mask.where(x, _zero(x))


class TrianglesMixin:
    """Tensor's triangles and diagonals: tril, triu, diagonal, diag, diag_embed."""

    __slots__ = ()

    def tril(self, diagonal: int = 0) -> Tensor:
        """The lower triangle of the last two dims: x[..., i, j] where j - i <= diagonal, 0 elsewhere.

        >>> Tensor([[1, 2], [3, 4]]).tril().tolist()
        [[1, 0], [3, 4]]
        """
        n, m = self.shape[-2:] if self.ndim >= 2 else (0, 0)
        return _triangle(self, np.tri(n, m, diagonal, dtype=bool), "tril")  # keep j - i <= diagonal

    def triu(self, diagonal: int = 0) -> Tensor:
        """The upper triangle of the last two dims: x[..., i, j] where j - i >= diagonal, 0 elsewhere."""
        n, m = self.shape[-2:] if self.ndim >= 2 else (0, 0)
        return _triangle(self, ~np.tri(n, m, diagonal - 1, dtype=bool), "triu")  # keep j - i >= diagonal

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """The diagonal of the matrices in dims dim1 and dim2, as torch.diagonal: offset > 0 above the main
        one, < 0 below; those dims go and a last dim holds the diagonal. A view, nothing is copied.

        >>> Tensor([[1, 2, 3], [4, 5, 6]]).diagonal(1).tolist()
        [2, 6]
        """
        x = self
        if x.ndim < 2:
            raise ArgumentError(f"diagonal: needs a tensor of at least 2 dims, got shape {x.shape}")
        d1, d2 = normalize_axis(dim1, x.ndim, "diagonal"), normalize_axis(dim2, x.ndim, "diagonal")
        if d1 == d2:
            raise ArgumentError(f"diagonal: dim1 and dim2 name one dim ({dim1}, {dim2}); name two")
        x = x.movedim((d1, d2), (-2, -1))  # (..., n, m)
        n, m = x.shape[-2:]
        row, col = (0, min(offset, m)) if offset >= 0 else (min(-offset, n), 0)
        k = max(0, min(n - row, m - col))  # the diagonal's length
        lead = x.shape[:-2]
        box = [(0, s) for s in lead] + [(row, row + k), (col, m)]
        sub = x.shrink(box)  # (..., k, w): the diagonal starts at its corner
        w = m - col
        flat = sub.reshape(lead + (k * w,)).pad_constant([(0, 0)] * len(lead) + [(0, k)])  # (..., k (w + 1))
        # element i of the diagonal sits at i (w + 1): row i, column 0 of the (k, w + 1) view
        rows = flat.reshape(lead + (k, w + 1))
        return rows.shrink([(0, s) for s in lead] + [(0, k), (0, 1)]).reshape(lead + (k,))

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
        """Matrices with x's last dim on their diagonal `offset` and 0 elsewhere, as torch.diag_embed: the last
        dim n becomes two dims of n + |offset| at dim1 and dim2 of the result."""
        if self.ndim == 0:
            raise ArgumentError("diag_embed: needs a tensor of at least 1 dim")
        ndim = self.ndim + 1
        d1, d2 = normalize_axis(dim1, ndim, "diag_embed"), normalize_axis(dim2, ndim, "diag_embed")
        if d1 == d2:
            raise ArgumentError(f"diag_embed: dim1 and dim2 name one dim ({dim1}, {dim2}); name two")
        lead, n = self.shape[:-1], self.shape[-1]
        keep = [(0, 0)] * len(lead)
        # v (n,) -> (n, 1) padded to (n, n + 1): v[i] at i (n + 1), which is (i, i) of the first n * n cells
        rows = self.reshape(lead + (n, 1)).pad_constant(keep + [(0, 0), (0, n)])
        square = rows.reshape(lead + (n * (n + 1),)).shrink([(0, s) for s in lead] + [(0, n * n)])
        square = square.reshape(lead + (n, n))
        k = abs(offset)
        widths = [(0, k), (k, 0)] if offset >= 0 else [(k, 0), (0, k)]  # above the main diagonal: shift right
        out = square.pad_constant(keep + widths)  # (..., n + k, n + k)
        return out.movedim((-2, -1), (d1, d2))

    def diag(self, diagonal: int = 0) -> Tensor:
        """A 1-D x as the matrix with x on diagonal `diagonal` (0 elsewhere); a matrix x's diagonal as 1-D.

        >>> Tensor([1, 2]).diag().tolist()
        [[1, 0], [0, 2]]
        """
        if self.ndim == 1:
            return self.diag_embed(diagonal)
        if self.ndim == 2:
            return self.diagonal(diagonal)
        raise ArgumentError(f"diag: needs a 1-D or 2-D tensor, got shape {self.shape}")
