"""A checkpoint's metadata read back as typed fields, every key checked in one place.

safetensors' metadata is strings. A program that keeps its settings there (a step count, a width, a run's
history as JSON) reads them back through `read_fields`, which parses each with the program's parser and turns
any failure into one CheckpointError naming the file, the key, the value and why, so every program loading
a damaged checkpoint, for training or for sampling, says the same thing instead of raising from deep inside.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from limn.serialize.header import SafetensorsError

__all__ = ["CheckpointError", "json_object", "natural", "positive", "rate", "read_fields"]


class CheckpointError(SafetensorsError):
    """A checkpoint's metadata cannot be used: the message names the file, the key and what is wrong."""


def read_fields(
    path: str | os.PathLike, metadata: Mapping[str, str], parsers: Mapping[str, Callable[[str], Any]]
) -> dict[str, Any]:
    """Each key of `parsers` parsed from `metadata` (read from the checkpoint at `path`). A parser refuses a
    value by raising ValueError, TypeError or KeyError; a missing key or a refused value is a CheckpointError.

    >>> read_fields("ckpt.safetensors", {"step": "12"}, {"step": natural})
    {'step': 12}
    >>> read_fields("ckpt.safetensors", {"step": "twelve"}, {"step": natural})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    limn.serialize.fields.CheckpointError: ckpt.safetensors: metadata 'step' is 'twelve', not a whole number >= 0; ...
    """
    values = {}
    for key, parse in parsers.items():
        if key not in metadata:
            raise CheckpointError(f"{os.fspath(path)}: metadata has no {key!r}; the checkpoint is from another program")
        try:
            values[key] = parse(metadata[key])
        except (ValueError, TypeError, KeyError) as e:
            shown = metadata[key] if len(metadata[key]) <= 60 else metadata[key][:57] + "..."
            raise CheckpointError(
                f"{os.fspath(path)}: metadata {key!r} is {shown!r}, {e}; the checkpoint is damaged or from "
                "another program"
            ) from e
    return values


def natural(text: str) -> int:
    """A whole number >= 0, written in decimal."""
    if not text.strip().isdigit():
        raise ValueError("not a whole number >= 0")
    return int(text)


def positive(text: str) -> int:
    """A whole number >= 1."""
    if natural(text) < 1:
        raise ValueError("not a whole number >= 1")
    return int(text)


def rate(text: str) -> float:
    """A float in [0, 1)."""
    value = float(text)
    if not 0 <= value < 1:
        raise ValueError("not a rate in [0, 1)")
    return value


def json_object(text: str) -> dict:
    """A JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at character {e.pos})") from e
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object (a {type(value).__name__})")
    return value
