"""Rule: imports point down (docs/architecture.md). A distribution imports only from those beneath it, and
inside limn-core the op graph imports nothing above it and the runtime nothing above the graph. Every import
counts, the ones inside functions too; only those under `if TYPE_CHECKING:` (no import at run time) do not.
The rule also holds the folder layout itself: no module at limn's top level is named with a prefix that
does a folder's job (c_, cuda_, dist_, diagram_, lr_, nn_)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"

# what each distribution may import, itself included
BENEATH = {
    "limn-core": {"limn-core"},
    "limn-compiler": {"limn-core", "limn-compiler"},
    "limn-c": {"limn-core", "limn-compiler", "limn-c"},
    "limn-cuda": {"limn-core", "limn-compiler", "limn-cuda"},
    "limn-nn": {"limn-core", "limn-compiler", "limn-nn"},
    "limn-dist": {"limn-core", "limn-dist"},
    "limn-diagram": {"limn-core", "limn-compiler", "limn-diagram"},
    "limn-models": {"limn-core", "limn-compiler", "limn-nn", "limn-models"},
}
# inside limn-core: what the lowest folders may import ("" is a module at limn's top level: dtypes, errors)
CORE_BENEATH = {"graph": {"graph", "dtypes", "errors"}, "runtime": {"graph", "runtime", "dtypes", "errors"}}


def modules() -> dict[str, tuple[str, Path]]:
    """Every limn module by dotted name -> (its distribution, its file)."""
    found = {}
    for path in PACKAGES.glob("*/src/limn/**/*.py"):
        parts = path.relative_to(path.parents[len(path.relative_to(PACKAGES).parts) - 3]).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = (path.relative_to(PACKAGES).parts[0], path)
    return found


def imported(path: Path, known: dict) -> list[tuple[int, str]]:
    """(line, module) for each limn module `path` imports at run time."""
    tree = ast.parse(path.read_text())
    type_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for n in ast.walk(stmt)
    }
    out = []
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("limn.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("limn") and node.level == 0:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                out.append((node.lineno, full if full in known else node.module))
    return [(line, name) for line, name in out if name != "limn"]


def test_distributions_import_only_from_beneath():
    known = modules()
    wrong = []
    for name, (dist, path) in known.items():
        for line, target in imported(path, known):
            owner = known.get(target, (None,))[0]
            if owner is not None and owner not in BENEATH[dist]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {name} ({dist}) imports {target} ({owner})")
    assert not wrong, "imports that point up:\n" + "\n".join(wrong)


def test_core_graph_and_runtime_import_nothing_above_them():
    known = modules()
    wrong = []
    for name, (dist, path) in known.items():
        parts = name.split(".")
        if dist != "limn-core" or len(parts) < 3 or parts[1] not in CORE_BENEATH:
            continue
        for line, target in imported(path, known):
            folder = target.split(".")[1]
            if folder not in CORE_BENEATH[parts[1]]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {name} imports {target}")
    assert not wrong, "limn-core's lower folders import upward:\n" + "\n".join(wrong)


def test_no_prefix_does_a_folders_job():
    prefixes = ("c_", "cuda_", "dist_", "diagram_", "lr_", "nn_", "backend_")
    flat = [p.name for p in PACKAGES.glob("*/src/limn/*.py") if p.name.startswith(prefixes)]
    assert not flat, f"these modules name their folder in a prefix; put them in the folder: {flat}"


def test_only_core_ships_limn_init():
    inits = sorted(p.relative_to(PACKAGES).parts[0] for p in PACKAGES.glob("*/src/limn/__init__.py"))
    assert inits == ["limn-core"], f"limn/__init__.py must be limn-core's alone, found in {inits}"


def test_only_tensor_py_in_frontend_imports_the_composed_catalogue():
    # composed builds on frontend; the one import back is the class that lists composed's mixins as its bases
    known = modules()
    wrong = []
    for name, (_, path) in known.items():
        if name.startswith("limn.frontend.") and name != "limn.frontend.tensor":
            wrong += [
                f"{name}:{line} imports {t}" for line, t in imported(path, known) if t.startswith("limn.composed")
            ]
    assert not wrong, "frontend modules below Tensor import the catalogue built on them: " + "; ".join(wrong)
