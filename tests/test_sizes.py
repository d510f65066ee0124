"""Rule: a module holds one idea a reader takes in at once: no module over 500 lines and no function over 60,
anywhere in the packages' source (STYLE.md). The modules and functions that are still over carry today's size
as a ceiling here: they may shrink and leave the list, never grow, and no new one may join it."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_LINES, FUNCTION_LINES = 500, 60

# still over, at most this long (issue 27 brings each under the limit)
MODULES_OVER: dict[str, int] = {}  # none today: keep it so
FUNCTIONS_OVER: dict[str, int] = {}


def sources() -> list[tuple[str, str]]:
    """(path under packages/, text) of every module the distributions ship."""
    packages = ROOT / "packages"
    return [(str(p.relative_to(packages)), p.read_text()) for p in sorted(packages.glob("*/src/**/*.py"))]


def test_no_module_grows_past_500_lines():
    grown = []
    for path, text in sources():
        lines = len(text.splitlines())
        ceiling = MODULES_OVER.get(path, MODULE_LINES)
        if lines > ceiling:
            grown.append(f"{path}: {lines} lines, at most {ceiling}")
    assert not grown, "split these by idea (docs/architecture.md says where a new module goes): " + "; ".join(grown)


def test_no_function_grows_past_60_lines():
    grown = []
    for path, text in sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                ceiling = FUNCTIONS_OVER.get(f"{path} {node.name}", FUNCTION_LINES)
                if lines > ceiling:
                    grown.append(f"{path}:{node.lineno} {node.name}: {lines} lines, at most {ceiling}")
    assert not grown, "cut these into named steps: " + "; ".join(grown)


def test_the_ceilings_name_what_is_still_over():
    # a module or function that shrank under the limit leaves its list, so the lists say what is left to do
    over = {path for path, text in sources() if len(text.splitlines()) > MODULE_LINES}
    stale = sorted(set(MODULES_OVER) - over)
    assert not stale, f"under {MODULE_LINES} lines now: remove {stale} from MODULES_OVER"
    long_functions = set()
    for path, text in sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno - node.lineno + 1 > FUNCTION_LINES:
                    long_functions.add(f"{path} {node.name}")
    stale = sorted(set(FUNCTIONS_OVER) - long_functions)
    assert not stale, f"under {FUNCTION_LINES} lines now: remove {stale} from FUNCTIONS_OVER"
