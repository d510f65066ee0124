"""Builds limn's documentation site with MkDocs (Material theme, mkdocstrings for the API reference).

    uv run --group docs python docs/site.py            # build/site/html/index.html, in strict mode
    uv run --group docs python docs/site.py --serve    # the same, served at http://127.0.0.1:8000 while you edit

The pages are the repository's own Markdown, gathered into build/site/src: the README as the home page, the
tour, the reading path and the architecture from docs/, and each package's README. Links between them are
rewritten to the site's pages, and links to other files of the repository go to them on GitHub. The API
reference is generated from the docstrings (mkdocstrings imports the installed packages): Tensor a page per
family of its methods (the mixins of limn.composed, in the order limn/frontend/tensor.py lists them), then
nn, optim, capture, serialize, the devices, distributed, the IR, models and diagrams. Before MkDocs runs, every
public name a reference page documents must have a docstring; MkDocs then builds with --strict, so a broken
link or a reference that does not resolve fails the build. Search is Material's, made to work from files on
disk (its offline plugin): open build/site/html/index.html in a browser, no server needed.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "site"
SOURCE, HTML = BUILD / "src", BUILD / "html"
GITHUB = "https://github.com/jiffies64/limn/blob/main/"

# repository file -> the site page it becomes
PAGES = {
    "README.md": "index.md",
    "docs/tour.md": "tour.md",
    "docs/reading.md": "reading.md",
    "docs/architecture.md": "architecture.md",
    **{f"packages/{p.name}/README.md": f"packages/{p.name}.md" for p in sorted((ROOT / "packages").iterdir())},
}

FAMILIES = {  # the folder of limn.composed a Tensor mixin lives in -> its reference page's title
    "creation": "creation and dtypes",
    "conversions": "creation and dtypes",
    "math": "elementwise math",
    "movement": "shapes and views",
    "indexed": "indexing",
    "reduce": "reductions, scans, sorting, matmul",
    "random": "random",
    "functional": "functional: activations, attention, convolution, losses, pooling",
}

# reference page -> the objects it documents, each a dotted name (a module documents its __all__)
REFERENCE = {
    "nn: layers and Module": ["limn.nn.module.Module", "limn.nn.layers", "limn.nn.norms", "limn.nn.containers"],
    "nn: activations, dropout, losses, pooling": [
        "limn.nn.activations",
        "limn.nn.dropout",
        "limn.nn.losses",
        "limn.nn.spatial",
    ],
    "nn: functional": ["limn.nn.functional"],
    "nn: init, utils, KV cache": ["limn.nn.init", "limn.nn.utils", "limn.nn.kv_cache.KVCache"],
    "optim": ["limn.optim", "limn.optim.lr_scheduler"],
    "capture": ["limn.capture"],
    "serialize": ["limn.serialize"],
    "devices": [
        "limn.runtime.device",
        "limn.compiler.jit.CompiledDevice",
        "limn.c.device.CDevice",
        "limn.cuda.device.CudaDevice",
    ],
    "distributed": ["limn.distributed"],
    "IR": ["limn.compiler.ir"],
    "models": ["limn.models"],
    "diagram": ["limn.diagram"],
}


INTRO = {  # a reference page's words before its objects
    "limn": "What `import limn` gives: Tensor, the dtypes, devices, gradient modes and realize. torch's module-level "
    "spellings work too (`limn.cat([a, b], 1)`, `limn.zeros(2, 3)`, `limn.exp(x)`): each is the Tensor method of "
    "the same name, documented on the Tensor pages. `limn.device(name)` takes torch.device's place: the device "
    "object called `name` (the current one when None), which a tensor's `device=` argument also takes.\n",
}
ALONE = {"limn.c.device.CDevice", "limn.cuda.device.CudaDevice"}  # documented as classes: their methods are
# CompiledDevice's hooks, documented there


def top_level() -> list[str]:
    """The functions and classes `import limn` names (limn.__all__), where each is defined; Tensor has pages of its
    own, the dtypes are instances of DType, documented once, and limn.device is the page's introduction's."""
    import limn

    entries = []
    for name in limn.__all__:
        obj = getattr(limn, name)
        obj = type(obj) if isinstance(obj, limn.DType) else obj
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj not in (limn.Tensor, limn.device):
            entries.append(f"{obj.__module__}.{obj.__qualname__}")
    return list(dict.fromkeys(entries))


def tensor_pages() -> dict[str, list[str]]:
    """Tensor's reference: its primitives, then a page per family of the mixins it is built from."""
    from limn import Tensor

    pages: dict[str, list[str]] = {"Tensor: the class and its primitives": ["limn.frontend.primitives.Primitives"]}
    for base in Tensor.__bases__:
        parts = base.__module__.split(".")
        if parts[1] == "composed":
            pages.setdefault(f"Tensor: {FAMILIES[parts[2]]}", []).append(f"{base.__module__}.{base.__qualname__}")
    return pages


def resolve(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError:
        return getattr(importlib.import_module(module), name)


def _defined_in(value: object, module: str) -> bool:
    return getattr(value, "__module__", "") == module


def public_members(dotted: str) -> list[tuple[str, object]]:
    """(name, object) for what a reference entry documents: a module's __all__ (its own definitions when it
    has none), or a class with the methods it defines itself."""
    obj = resolve(dotted)
    if inspect.ismodule(obj):
        names = getattr(obj, "__all__", None)
        if names is None:  # what the module defines itself
            names = [n for n, v in vars(obj).items() if not n.startswith("_") and _defined_in(v, dotted)]
        members = [(f"{dotted}.{n}", getattr(obj, n)) for n in names]
        found = []
        for n, v in members:
            if inspect.isclass(v):
                found.extend(public_members(n) if v.__module__ == dotted or n in ALONE else [(n, v)])
            elif callable(v) and not inspect.ismodule(v):
                found.append((n, v))
        return found
    found = [(dotted, obj)]
    if dotted in ALONE:
        return found
    for name, value in vars(obj).items():
        if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, (property, staticmethod))):
            found.append((f"{dotted}.{name}", value))
    return found


def undocumented(pages: dict[str, list[str]]) -> list[str]:
    """The public names the reference documents that have no docstring, of their own or (a method overriding
    one, as a layer's forward) of the method they override."""
    missing = []
    for entries in pages.values():
        for entry in entries:
            for name, obj in public_members(entry):
                owner = resolve(name.rpartition(".")[0]) if "." in name else None
                doc = inspect.getdoc(getattr(owner, name.rpartition(".")[2])) if inspect.isclass(owner) else None
                if not (doc or inspect.getdoc(obj) or "").strip():
                    missing.append(name)
    return missing


def rewrite_links(text: str, source: str) -> str:
    """Markdown links of the page made from `source` pointed at the site's pages (and images), or at GitHub."""
    here = os.path.dirname(PAGES[source])  # the page's folder in the site

    def target(match: re.Match) -> str:
        label, link = match.group(1), match.group(2)
        if re.match(r"[a-z]+:|#|/", link):  # a URL, an anchor on this page, an absolute path
            return match.group(0)
        path, hashmark, anchor = link.partition("#")
        repo = os.path.normpath(os.path.join(os.path.dirname(source), path))
        if repo in PAGES:
            new = os.path.relpath(PAGES[repo], here or ".")
        elif repo.startswith("docs/") and repo.endswith(".svg"):
            new = os.path.relpath(os.path.basename(repo), here or ".")
        else:
            new = GITHUB + repo
        return f"{label}({new}{hashmark}{anchor})"

    return re.sub(r"(!?\[[^\]]*\])\(([^)\s]+)\)", target, text)


def gather(reference: dict[str, list[str]]) -> list:
    """Writes every page into SOURCE; returns MkDocs' nav."""
    shutil.rmtree(SOURCE, ignore_errors=True)
    (SOURCE / "packages").mkdir(parents=True)
    (SOURCE / "reference").mkdir()
    for source, page in PAGES.items():
        (SOURCE / page).write_text(rewrite_links((ROOT / source).read_text(), source))
    for svg in (ROOT / "docs").glob("*.svg"):
        shutil.copy(svg, SOURCE / svg.name)
    nav_reference = []
    for title, entries in reference.items():
        slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        alone = "    options:\n      members: false\n"
        body = [f"# {title}\n", INTRO.get(title, "")]
        body += [f"::: {entry}\n" + (alone if entry in ALONE else "") for entry in entries]
        (SOURCE / "reference" / f"{slug}.md").write_text("\n".join(body))
        nav_reference.append({title: f"reference/{slug}.md"})
    packages = [{p.split("/")[1]: page} for p, page in PAGES.items() if p.startswith("packages/")]
    return [
        {"Home": "index.md"},
        {"Tour": "tour.md"},
        {"Reading path": "reading.md"},
        {"Architecture": "architecture.md"},
        {"Packages": packages},
        {"API reference": nav_reference},
    ]


def config(nav: list) -> dict:
    return {
        "site_name": "limn",
        "site_description": "A deep learning framework built to be read",
        "repo_url": "https://github.com/jiffies64/limn",
        "docs_dir": str(SOURCE),
        "site_dir": str(HTML),
        "use_directory_urls": False,  # pages open from disk, no server
        "theme": {"name": "material", "features": ["navigation.sections", "search.highlight", "content.code.copy"]},
        "plugins": [
            "search",
            "offline",  # the search index ships as a script beside the pages: nothing is fetched
            {
                "mkdocstrings": {
                    "handlers": {
                        "python": {
                            "options": {
                                "force_inspection": True,  # limn's packages share one import name: import them
                                "show_source": False,
                                "members_order": "source",
                                "heading_level": 2,
                                "show_root_heading": True,
                                "filters": ["!^_"],
                                "merge_init_into_class": False,
                                "separate_signature": True,
                                "show_signature_annotations": True,
                                "docstring_style": None,
                                "extensions": [f"{ROOT / 'docs' / 'docstrings_markdown.py'}:PlainDocstrings"],
                            }
                        }
                    }
                }
            },
        ],
        "markdown_extensions": ["tables", "admonition", "pymdownx.superfences", "toc"],
        "validation": {"links": {"absolute_links": "warn", "unrecognized_links": "warn", "anchors": "warn"}},
        "nav": nav,
    }


def main() -> int:
    reference = {"limn": top_level()} | tensor_pages() | REFERENCE
    missing = undocumented(reference)
    if missing:
        print(f"{len(missing)} public names in the API reference have no docstring:", *missing, sep="\n  ")
        return 1
    nav = gather(reference)
    (BUILD / "mkdocs.yml").write_text(json.dumps(config(nav), indent=1))  # JSON is YAML
    command = "serve" if sys.argv[1:] == ["--serve"] else "build"
    flags = ["--strict"] if command == "build" else []
    return subprocess.run([sys.executable, "-m", "mkdocs", command, *flags, "-f", str(BUILD / "mkdocs.yml")]).returncode


if __name__ == "__main__":
    sys.exit(main())
