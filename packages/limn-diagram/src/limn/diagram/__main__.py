"""The command line: `python -m limn.diagram SCRIPT.py:FUNCTION -o out.svg` runs a function of the user's that
returns tensors (a loss, a training step) with provenance stacks recorded, and draws what it returns.
The format comes from the output's extension: .svg, .dot or .tex.
"""

from __future__ import annotations

import argparse
import inspect
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from limn.atomic_write import write_atomically
from limn.diagram.graph import FORMATS
from limn.diagram.views import build
from limn.graph import provenance


def _load_function(target: str):
    """SCRIPT.py:FUNCTION -> the function, from the script loaded as a module (its directory importable)."""
    script, sep, name = target.rpartition(":")
    if not sep or not script or not name:
        raise SystemExit(f"limn.diagram: expected SCRIPT.py:FUNCTION, got {target!r}")
    path = Path(script)
    if not path.is_file():
        raise SystemExit(f"limn.diagram: no script {script!r} (from {target!r}); give a path to a .py file")
    sys.path.insert(0, str(path.resolve().parent))  # the script's own imports, as `python SCRIPT.py` finds them
    names = runpy.run_path(str(path), run_name=path.stem)  # run as a module named after the file, not __main__
    fn = names.get(name)
    if not callable(fn):
        found = sorted(n for n, v in names.items() if callable(v) and not n.startswith("_"))
        raise SystemExit(f"limn.diagram: {script} has no function {name!r}; its functions: {', '.join(found)}")
    try:
        needed = [p.name for p in inspect.signature(fn).parameters.values() if _required(p)]
    except (TypeError, ValueError):  # a callable without a signature Python can read: call it and see
        needed = []
    if needed:
        raise SystemExit(
            f"limn.diagram: {target} takes arguments ({', '.join(needed)}) and is called with none; give them "
            "defaults, or draw a function of no arguments that calls it"
        )
    return fn


def _required(p: inspect.Parameter) -> bool:
    return p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m limn.diagram", description=main.__doc__.split(":")[0])
    parser.add_argument("target", help="SCRIPT.py:FUNCTION, a function taking no arguments returning tensors")
    parser.add_argument("-o", "--output", required=True, help=f"the file to write: {', '.join(FORMATS)}")
    views = parser.add_mutually_exclusive_group()
    views.add_argument("--schedule", action="store_true", help="draw kernels as clusters, buffers between them")
    views.add_argument("--modules", action="store_true", help="draw a box per layer call (nn.Module), as a model")
    parser.add_argument(
        "--fold-elementwise",
        "--no-arithmetic",
        action="store_true",
        help="draw elementwise ops as edges (--modules: no box for a layer's own elementwise work)",
    )
    parser.add_argument(
        "--expand",
        nargs="?",
        type=int,
        const=1,
        default=0,
        metavar="N",
        help="graph and schedule views: draw every layer of a repeated block; --modules: open layer calls N "
        "levels deep (0, the default, draws the model's own layers)",
    )
    parser.add_argument("--params", action="store_true", help="--modules: a box per parameter read")
    parser.add_argument("--device", default=None, help="the device to run FUNCTION on (numpy, c, ...)")
    parser.add_argument("--theme", default="light", choices=["light", "dark"], help="SVG colours")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """python -m limn.diagram SCRIPT.py:FUNCTION [--schedule | --modules] [--fold-elementwise] [--expand [N]]
    [--params] [--device D] [--theme light|dark] -o out.svg|.dot|.tex: runs FUNCTION() (no arguments) with
    provenance stacks recorded and draws the tensors it returns; the format comes from the output's extension."""
    args = _parser().parse_args(argv)
    suffix = Path(args.output).suffix.lower()
    if suffix not in FORMATS:
        raise SystemExit(
            f"limn.diagram: -o {args.output}: the format comes from the extension, one of {', '.join(FORMATS)}"
        )
    if not Path(args.output).resolve().parent.is_dir():
        raise SystemExit(
            f"limn.diagram: -o {args.output}: the folder {Path(args.output).parent} does not exist; make it first"
        )
    if args.device is not None:
        import limn

        try:
            limn.set_device(args.device)
        except limn.DeviceError as e:
            raise SystemExit(f"limn.diagram: --device {args.device}: {e}") from None
    fn = _load_function(args.target)
    with provenance.recording(stacks=True):
        result = fn()
        if result is None:
            raise SystemExit(
                f"limn.diagram: {args.target} returned None; return the tensors to draw (a loss, a step's)"
            )
        try:
            graph = build(
                result,
                schedule=args.schedule,
                modules=args.modules,
                fold_elementwise=args.fold_elementwise,
                expand=args.expand if args.modules else bool(args.expand),
                params=args.params,
            )
        except (TypeError, ValueError) as e:  # it returned something that holds no tensors
            raise SystemExit(f"limn.diagram: {args.target} returned no tensors to draw: {e}") from None
    graph.title = args.target
    if suffix == ".svg":
        path = write_atomically(args.output, graph.to_svg(args.theme).encode("utf-8"))
    else:
        path = graph.save(args.output)
    print(f"{path}: {graph!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
