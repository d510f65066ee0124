"""A griffe extension for docs/site.py: limn's docstrings, written as plain text, made into Markdown that says the same.

limn's docstrings are prose and doctest examples, not Markdown. Read as Markdown, `x[0](y)` is a link, `g["lr"]`
a reference, `<lambda>` a tag and an example's lines one paragraph. So before mkdocstrings renders a docstring,
each run of `>>>` lines and the output after them becomes a fenced code block, and in the prose outside code
spans the characters Markdown would take for syntax (brackets, asterisks, underscores) are escaped and angle
brackets written as entities, so the page shows the docstring's own characters. An attribute read at run time
(a dataclass field's default) would show its value's type's docstring (int's); it gets none instead.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import griffe

SPECIAL = re.compile(r"([\[\]*_\\])")  # what a backslash keeps literal; < and > become entities instead


def _literal(text: str) -> str:
    return SPECIAL.sub(r"\\\1", text).replace("<", "&lt;").replace(">", "&gt;")


def _prose(line: str) -> str:
    """The line with Markdown's special characters made literal outside `code` spans."""
    pieces = re.split(r"(`[^`]*`)", line)
    return "".join(p if len(p) > 1 and p[0] == p[-1] == "`" else _literal(p) for p in pieces)


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

    def on_instance(self, *, obj: griffe.Object, node: Any = None, **kwargs: Any) -> None:
        if obj.docstring is None:
            return
        value = getattr(node, "obj", None)
        if obj.is_attribute and value is not None and obj.docstring.value == inspect.getdoc(type(value)):
            obj.docstring = None  # an attribute inspected at run time gets its value's type's text (int's)
            return
        obj.docstring.value = markdown(obj.docstring.value)
