"""A kernel's row pieces (limn.compiler.row_pieces) as one call: the c device's program for a kernel cut into them.

Each piece's function takes the kernel's buffers, as every kernel function does, at the addresses where the
piece's first row starts: each buffer's address moved on by its bytes per row times the row number.
Pipeline: IR -> row pieces -> C source -> cc -> **one call of the pieces**.
"""

from __future__ import annotations

from typing import Any

from limn.compiler import row_pieces


class RowPieces:
    """A kernel run as its row pieces: each piece's function is called with every buffer's address moved on
    to the piece's first row (the row's bytes times the row number)."""

    def __init__(self, cut: row_pieces.Split, functions: list[Any]) -> None:
        buffers = cut.kernels[0].inputs + cut.kernels[0].outputs
        row_bytes = [stride * b.dtype.itemsize for stride, b in zip(cut.rows.strides, buffers)]
        self.calls = [(f, [first * size for size in row_bytes]) for f, (first, _) in zip(functions, cut.runs)]

    def __call__(self, *addresses: int) -> None:
        for function, offsets in self.calls:
            function(*[address + offset for address, offset in zip(addresses, offsets)])
