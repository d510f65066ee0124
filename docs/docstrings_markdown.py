"""A griffe extension for docs/site.py: limn's docstrings, written as plain text, made into Markdown that says the same.

limn's docstrings are prose and doctest examples, not Markdown. Read as Markdown, `x[0](y)` is a link, `g["lr"]`
a reference, `<lambda>` a tag and an example's lines one paragraph. So before mkdocstrings renders a docstring,
each run of `>>>` lines and the output after them becomes a fenced code block, and in the prose outside code
spans the characters Markdown would take for syntax (brackets, angle brackets, asterisks, underscores) are
escaped, so the page shows the docstring's own characters.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

SPECIAL = re.compile(r"([\[\]<>*_\\])")


def _prose(line: str) -> str:
    """The line with Markdown's special characters escaped outside `code` spans."""
    pieces = re.split(r"(`[^`]*`)", line)
    return "".join(p if len(p) > 1 and p[0] == p[-1] == "`" else SPECIAL.sub(r"\\\1", p) for p in pieces)


def markdown(text: str) -> str:
    """A plain-text docstring as Markdown (see the module docstring)."""
    out: list[str] = []
    in_example = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(">>>") and not in_example:
            out += ["", "```pycon"]
            in_example = True
        elif in_example and not stripped:
            out += ["```", ""]
            in_example = False
        verbatim = in_example or line.startswith("    ")  # an example, or an indented (code) block
        out.append(line if verbatim else _prose(line))
    if in_example:
        out.append("```")
    return "\n".join(out)


class PlainDocstrings(griffe.Extension):
    """Rewrites each object's docstring as markdown() says, as griffe loads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
