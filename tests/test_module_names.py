"""Each module of the package has a name of its own and stays short enough to read whole (issue 27)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "console_ha"
# A module longer than this is two modules: a reader should hold one whole in mind.
MOST_LINES = 500


def modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if ".venv" not in path.parts)


def test_no_two_modules_share_a_name() -> None:
    # `errors.py` beside `web/errors.py` made every search, import and traceback ask "which one?".
    where: defaultdict[str, list[str]] = defaultdict(list)
    for path in modules():
        if path.name != "__init__.py":
            where[path.stem].append(str(path.relative_to(PACKAGE.parent)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_no_module_is_over_the_limit() -> None:
    long = {str(path.relative_to(PACKAGE.parent)): lines for path in modules()
            if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MOST_LINES}
    assert long == {}
