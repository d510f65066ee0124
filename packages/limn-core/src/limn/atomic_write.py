"""Writing a file so that a reader finds all of it or the file it replaces, never a part.

The bytes go to a unique temp file in the destination's own folder (a rename within one filesystem is atomic),
are flushed and fsynced, and the temp file is renamed over the destination. A write that fails or is killed
leaves the old file as it was; the temp file is removed on failure. Two processes writing one path at once do
not collide: each has its own temp file, and the last rename wins. SVG pictures (limn.diagram.svg), kernel caches
(limn.compiler.cache_files) and anything else limn writes to disk go through here; checkpoints (limn.serialize) add a
temp-file naming of their own so a killed save's leftovers can be found and removed.
Pipeline: a writer's bytes -> **temp file, fsync, rename** -> the destination.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: str | os.PathLike, data: bytes) -> Path:
    """Writes `data` to `path` through a temp file and a rename (see the module docstring); returns the path.
    OSError propagates (a missing folder, a full disk), with the old file untouched."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return path
