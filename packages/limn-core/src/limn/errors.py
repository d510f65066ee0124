"""The error an op raises when its arguments cannot give what was asked: shapes that do not broadcast, a dim
out of range, a size that does not divide, a mode it does not know.

It is a ValueError, as Python's convention has it, and a RuntimeError too, since that is what torch raises for
the same mistakes: ported code that catches either keeps working (numpy's AxisError is both a ValueError and an
IndexError for the same reason). Pipeline: **tensor** -> graph -> schedule -> IR -> renderer -> device.
"""

from __future__ import annotations


class ArgumentError(ValueError, RuntimeError):
    """An op's arguments are wrong: the message says what was asked, what is wrong and what to do.

    >>> from limn import Tensor
    >>> try:
    ...     Tensor.ones((2, 3)) @ Tensor.ones((2, 3))
    ... except RuntimeError as e:  # torch's type; `except ValueError` catches it as well
    ...     print(type(e).__name__)
    ArgumentError
    """
