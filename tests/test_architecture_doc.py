"""docs/architecture.md's module table names every module of console_ha/ as it is, and nothing that is not there."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "console_ha"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
# A row of the table: its first cell names a package (`console_ha/ha/`) or a module (`console_ha/console.py`).
ROW = re.compile(r"^\| `(console_ha/[\w/]*?(?:\.py)?)`[^|]* \| (.*) \|\s*$")
MODULE_NAME = re.compile(r"`([\w]+\.py)`")


def table_rows(text: str) -> list[tuple[str, str]]:
    """The module table's rows under "## The map": (first cell's path, what the row holds)."""
    section = text.split("\n## The map\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    start = lines.index("| package | holds |")
    rows = []
    for line in lines[start + 2:]:
        if not line.strip():
            break  # the table ends at its first blank line
        match = ROW.match(line)
        assert match, f"a line of the module table that is not a row | `console_ha/...` | ... |: {line!r}"
        rows.append((match[1], match[2]))
    return rows


def modules_in_table(text: str) -> set[str]:
    """Every module the table names, as a path under the repository (console_ha/ha/rest_client.py)."""
    named: set[str] = set()
    for first, holds in table_rows(text):
        if first.endswith(".py"):
            named.add(first)
            continue
        package = first if first.endswith("/") else first + "/"
        named.update(package + name for name in MODULE_NAME.findall(holds))
    return named


def holds_code(init: Path) -> bool:
    """Whether a package's __init__.py holds more than its docstring (a re-export, `create_app`, a version)."""
    body = ast.parse(init.read_text(encoding="utf-8")).body
    return any(not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
               and not (isinstance(node, ast.ImportFrom) and node.module == "__future__") for node in body)


def modules_in_package() -> set[str]:
    """Every module of console_ha/: each .py file, and each __init__.py that holds code."""
    return {path.relative_to(ROOT).as_posix() for path in PACKAGE.rglob("*.py")
            if path.name != "__init__.py" or holds_code(path)}


def test_every_module_of_the_package_is_in_the_table_and_the_table_names_no_other() -> None:
    """A module added, moved or renamed without its row fails here; the message says which, both ways."""
    named = modules_in_table(ARCHITECTURE.read_text(encoding="utf-8"))
    present = modules_in_package()
    missing, gone = sorted(present - named), sorted(named - present)
    assert (missing, gone) == ([], []), (
        f"docs/architecture.md's module table (under '## The map') misses {missing} and names {gone}, "
        "which console_ha/ does not hold: give each module its row's `name.py` (what it holds)")


SAMPLE = """# x

## The map

| package | holds |
| --- | --- |
| `console_ha/` (base) | `errors.py` (the tree), `words.py` |
| `console_ha/ha/` | `rest_client.py` (GET only), `gone.py` |
| `console_ha/console.py` | `Console.open` |

## Next
| `console_ha/elsewhere/` | `not_read.py` |
"""


def test_the_table_is_read_from_its_rows_only() -> None:
    """The reading itself: both kinds of first cell, names only in backticks, nothing after the section."""
    assert modules_in_table(SAMPLE) == {"console_ha/errors.py", "console_ha/words.py", "console_ha/ha/rest_client.py",
                                        "console_ha/ha/gone.py", "console_ha/console.py"}


@pytest.mark.parametrize("broken", [
    "| `console_ha/ha/` `rest_client.py` |",  # one cell
    "`connection.py` (a row's tail on a line of its own) |",
    "| `settings/` | `saving.py` |",  # a package not named from the root
])
def test_a_broken_row_is_named_rather_than_skipped(broken: str) -> None:
    with pytest.raises(AssertionError, match="table"):
        modules_in_table(SAMPLE.replace("| `console_ha/console.py` | `Console.open` |", broken))
