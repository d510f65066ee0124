"""x.size, an int that is also torch's size(): numpy's spelling and torch's, on one attribute."""

from __future__ import annotations

from limn.frontend.arguments import normalize_axis
from limn.graph.ops import Shape
from limn.graph.view import prod


class Size(int):
    """x.size: the element count, an int, as numpy's x.size (and limn's, before torch's spelling); called, it is
    torch's x.size(): the shape, or with a dim that dim's size. Trap: x.size == 6 and x.size() == (2, 3) both
    hold, so code that passes x.size along passes the count.

    >>> from limn import Tensor
    >>> x = Tensor.zeros((2, 3))
    >>> x.size, x.size(), x.size(-1)
    (6, (2, 3), 3)
    """

    shape: Shape

    def __new__(cls, shape: Shape) -> Size:
        count = super().__new__(cls, prod(shape))
        count.shape = shape
        return count

    def __reduce__(self) -> tuple:
        return int, (int(self),)  # pickled or copied, it is the plain count

    def __call__(self, dim: int | None = None) -> Shape | int:
        if dim is None:
            return self.shape
        if not self.shape:
            raise IndexError(f"size({dim}): a 0-d tensor has no dims (torch raises too); its shape is ()")
        return self.shape[normalize_axis(dim, len(self.shape), "size")]
