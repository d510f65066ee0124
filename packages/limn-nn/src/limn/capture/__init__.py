"""limn.capture: record the kernel runs of one call of a step function, then replay them on each new batch's
buffers, so later steps skip building the Python graph. `capture(step, verify=N)` also checks its first N
replays against an eager run and names the first kernel where they part.
"""

from limn.capture.record import Captured, CaptureError, capture

__all__ = ["CaptureError", "Captured", "capture"]
