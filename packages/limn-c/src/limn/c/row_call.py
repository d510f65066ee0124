"""A kernel's row pieces (limn.compiler.row_pieces) as one call: the c device's program for a kernel cut into them.

Each piece's function takes the kernel's buffers, as every kernel function does, at the addresses where its
call starts: each buffer's address moved on by the call's offset (the first row's, and a peeled loop's value's).
Pipeline: IR -> row pieces -> C source -> cc -> **one call of the pieces**.
"""

from __future__ import annotations

from typing import Any

from limn.compiler import row_pieces


class RowPieces:
    """A kernel run as calls of its pieces: each call's function gets every buffer's address moved on by the
    call's offset, in elements times the buffer's bytes per element."""

    def __init__(self, cut: row_pieces.Split, functions: list[Any]) -> None:
        self.calls = [(functions[i], offsets) for i, offsets in cut.byte_calls()]

    def __call__(self, *addresses: int) -> None:
        for function, offsets in self.calls:
            function(*[address + offset for address, offset in zip(addresses, offsets)])
