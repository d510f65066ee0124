"""Rule: docs/reading.md lists the reading path (docs/reading_path.py) with today's line counts, every module on
it exists, and the path and the speed layer after it stay within their budgets, which only move down (the
redesign's target for the path is 6,000)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("reading_path", ROOT / "docs" / "reading_path.py")
reading_path = importlib.util.module_from_spec(spec)
spec.loader.exec_module(reading_path)


def test_every_module_on_the_path_exists():
    missing = [
        f"packages/{dist}/src/limn/{module}"
        for dist, module, _ in reading_path.PATH + reading_path.SPEED
        if not (ROOT / "packages" / dist / "src" / "limn" / module).is_file()
    ]
    assert not missing, f"the reading path names modules that do not exist: {missing}"


def test_the_page_lists_the_path_with_todays_counts():
    page = reading_path.PAGE.read_text()
    assert page == reading_path.page_with_table(page), (
        "docs/reading.md differs from the path and its line counts; run `uv run python docs/reading_path.py --write`"
    )
    for _, module, _ in reading_path.PATH + reading_path.SPEED:
        assert f"`limn/{module}`" in page, f"limn/{module} is on the path but not on the page"


def test_the_path_is_within_its_budget():
    total = reading_path.total_lines()
    assert total <= reading_path.BUDGET, (
        f"the reading path is {total:,} lines, over its budget of {reading_path.BUDGET:,}: shrink a module on it "
        "rather than raising the budget"
    )


def test_the_speed_layer_is_within_its_budget():
    total = reading_path.total_lines(reading_path.SPEED)
    assert total <= reading_path.SPEED_BUDGET, (
        f"the speed layer is {total:,} lines, over its budget of {reading_path.SPEED_BUDGET:,}: shrink a rewrite "
        "rather than raising the budget"
    )
