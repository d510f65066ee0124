"""The bytes examples/train_stories.py trains on: the TinyStories sample in examples/data, or the full files.

A Corpus is a train split and a validation split of bytes, memory-mapped from disk (the full TinyStories train
file is 1.9 GB: it is never read whole into Python objects). Batches are windows of context + 1 bytes at random
offsets; the offsets of training batch s come from a generator seeded by (seed, s), so a run resumed at step s
draws what the uninterrupted run drew there, and the validation batches are one fixed set.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAMPLE = Path(__file__).resolve().parent / "data" / "tinystories-sample.txt"  # see data/README.md
FULL_NAMES = ("TinyStories-train.txt", "TinyStories-valid.txt")
SAMPLE_VALID = 0.1  # the share of the sample (its end) held out for validation


class DataError(ValueError):
    """The data cannot be used as asked: the message says which file and why."""


@dataclass(frozen=True)
class Corpus:
    train: np.ndarray  # uint8 bytes, usually a read-only memmap
    valid: np.ndarray
    source: str  # what was read, for the log

    def check(self, context: int) -> None:
        for name, split in (("train", self.train), ("validation", self.valid)):
            if len(split) < context + 1:
                raise DataError(
                    f"{self.source}: the {name} split has {len(split):,} bytes, fewer than one window of "
                    f"context + 1 = {context + 1}; use more data or a shorter --context"
                )

    def batch(self, split: str, batch: int, context: int, seed: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        """(x, y), each (batch, context) int32: windows of `split` at offsets drawn from (seed, step), y one
        byte ahead of x."""
        data = self.train if split == "train" else self.valid
        rng = np.random.default_rng([seed, step, split == "train"])
        starts = rng.integers(0, len(data) - context, size=batch)
        rows = np.stack([np.asarray(data[s : s + context + 1]) for s in starts]).astype(np.int32)  # (B, T+1)
        return rows[:, :-1], rows[:, 1:]


def _mapped(path: Path) -> np.ndarray:
    if not path.exists():
        raise DataError(f"{path}: no such file")
    if not path.is_file():  # a FIFO would block and /dev/zero never ends: only a file has a size to map
        raise DataError(
            f"{path}: not a regular file (a FIFO, a device or a socket); --data takes a text file or a folder"
        )
    if path.stat().st_size == 0:
        raise DataError(f"{path}: the file is empty")
    return np.memmap(path, dtype=np.uint8, mode="r")


def open_corpus(path: str | None) -> Corpus:
    """The sample when `path` is None; the two TinyStories files when it is their folder; or one text file,
    its last tenth held out for validation."""
    if path is None:
        data = _mapped(SAMPLE)
        cut = int(len(data) * (1 - SAMPLE_VALID))
        return Corpus(data[:cut], data[cut:], f"{SAMPLE.name} (the sample in the repository)")
    where = Path(path)
    if where.is_dir():
        train, valid = (where / name for name in FULL_NAMES)
        missing = [str(p) for p in (train, valid) if not p.is_file()]
        if missing:
            raise DataError(f"{where}: a TinyStories folder needs {' and '.join(FULL_NAMES)}; missing {missing}")
        return Corpus(_mapped(train), _mapped(valid), f"{train} and {valid.name}")
    if not where.exists():
        raise DataError(f"{where}: no such file or folder")
    data = _mapped(where)
    cut = int(len(data) * (1 - SAMPLE_VALID))
    return Corpus(data[:cut], data[cut:], str(where))
