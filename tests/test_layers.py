"""Dependencies point one way: every import in the package, read from its syntax tree, goes down the layers.

    entry points (cli, __main__, wsgi.py)
    -> web -> console (the composition root) -> (conversation, mcp) -> settings -> capabilities
    -> (store, ha) -> the base (errors, secret, deadline, unknown_keys, timestamps, words, the package itself)

A module imports only from lower layers, or from its own package; the base modules may use each other.
Besides: `store` takes only `ha.addresses` from `ha`, and nothing outside `web` imports Flask, Flask-WTF,
Werkzeug or Jinja (with one named exception). Imports inside functions count, and so do those under
TYPE_CHECKING: a dependency is a dependency, whenever it is loaded.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "console_ha"

# The layers, top first. A group is a subpackage or a top-level module of the package ("" is the package's
# own __init__). Modules outside the package that import it (wsgi.py) are entry points too.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"cli", "__main__", "wsgi"}),
    frozenset({"web"}),
    frozenset({"console"}),
    frozenset({"conversation", "mcp"}),
    # The settings service may use what a capability declares (its budget, for the save check); a
    # capability never reads the settings service.
    frozenset({"settings"}),
    frozenset({"capabilities"}),
    frozenset({"store", "ha"}),
    frozenset({"", "errors", "secret", "deadline", "unknown_keys", "timestamps", "words"}),
)
BASE = LAYERS[-1]

# Across groups of one layer, only these (importer group, imported module) pairs.
SIBLING_ALLOWED = frozenset({
    ("store", "console_ha.ha.addresses"),  # URL and entity-id rules, which the client needs too
    ("__main__", "console_ha.cli"),  # `python -m console_ha` is the console-ha command
})

WEB_FRAMEWORKS = frozenset({"flask", "flask_wtf", "werkzeug", "jinja2", "wtforms"})
# (importing module, imported module) outside web/ that may still use a web framework.
WEB_FRAMEWORK_ALLOWED = frozenset({
    # Werkzeug's password hashing (scrypt with its salt format), not its web machinery.
    ("console_ha.store.console_credentials", "werkzeug.security"),
})

# Violations on main that other branches of issue 9 remove; emptied once they are merged. Never hide a
# new violation here: an entry that no longer occurs fails the test, so the list can only shrink.
EXPECTED_TO_BE_REMOVED: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Import:
    """One import statement's target, as seen in one module."""

    importer: str  # dotted module name, e.g. console_ha.store.config
    imported: str  # dotted module name (the module itself where `from package import module` names one)
    line: int


def module_name(path: Path, root: Path) -> str:
    """The dotted name of a source file under `root` (a package's __init__ is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names, relative ones included."""
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_in(root: Path, files: list[Path]) -> Iterator[Import]:
    """Every import in `files` (paths under `root`), with `from a import b` resolved to a.b where b is a module."""
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    for path in files:
        importer = module_name(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(importer, alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(importer, path.name == "__init__.py", node)
                for alias in node.names:
                    candidate = f"{target}.{alias.name}"
                    yield Import(importer, candidate if candidate in modules else target, node.lineno)


def _group(module: str) -> str:
    """A package module's group: its subpackage or top-level module; "" for the package itself."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return parts[0]  # an entry point outside the package, e.g. wsgi
    return parts[1] if len(parts) > 1 else ""


def _rank(group: str) -> int:
    for rank, layer in enumerate(LAYERS):
        if group in layer:
            return rank
    raise AssertionError(f"{group!r} is in no layer: add it to LAYERS in tests/test_layers.py")


def violations(imports: list[Import]) -> list[tuple[Import, str]]:
    """Each import that breaks a rule, with the rule it breaks."""
    found = []
    for imp in imports:
        top = imp.imported.split(".")[0]
        if top in WEB_FRAMEWORKS:
            allowed = (imp.importer, imp.imported) in WEB_FRAMEWORK_ALLOWED
            if _group(imp.importer) not in ("web", "wsgi") and not allowed:
                found.append((imp, "only web/ imports a web framework"))
            continue
        if top != PACKAGE:
            continue
        mine, theirs = _group(imp.importer), _group(imp.imported)
        if mine == theirs:
            continue
        mine_rank, theirs_rank = _rank(mine), _rank(theirs)
        if theirs_rank < mine_rank:
            found.append((imp, f"{mine} may not import {theirs}, a layer above it"))
        elif theirs_rank == mine_rank and mine_rank != len(LAYERS) - 1 and (mine, imp.imported) not in SIBLING_ALLOWED:
            found.append((imp, f"{mine} may not import {theirs}, beside it in the same layer"))
    return found


def package_imports() -> list[Import]:
    """The imports of every module of the package, and of wsgi.py."""
    files = sorted((ROOT / PACKAGE).rglob("*.py")) + [ROOT / "wsgi.py"]
    return list(imports_in(ROOT, files))


def test_every_import_points_down_the_layers() -> None:
    found = [(imp, rule) for imp, rule in violations(package_imports())
             if (imp.importer, imp.imported) not in EXPECTED_TO_BE_REMOVED]
    assert not found, "\n".join(f"{imp.importer}:{imp.line} imports {imp.imported}: {rule}" for imp, rule in found)


def test_each_expected_violation_still_occurs_so_the_list_only_shrinks() -> None:
    occurring = {(imp.importer, imp.imported) for imp, _ in violations(package_imports())}
    assert EXPECTED_TO_BE_REMOVED <= occurring, f"gone, remove from the list: {EXPECTED_TO_BE_REMOVED - occurring}"


def test_every_group_of_the_package_is_in_a_layer() -> None:
    groups = {_group(module_name(p, ROOT)) for p in (ROOT / PACKAGE).rglob("*.py")}
    for group in groups:
        _rank(group)


def _write(root: Path, files: dict[str, str]) -> list[Path]:
    paths = []
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    for directory in {p.parent for p in paths if p.parent != root}:
        (directory / "__init__.py").touch()
    return paths


FAKE_PACKAGE = {
    "console_ha/capabilities/registry.py": "",
    "console_ha/ha/addresses.py": "",
    "console_ha/ha/client.py": "",
    "console_ha/web/views.py": "import flask\nfrom console_ha.store import audit\n",
    "console_ha/errors.py": "from console_ha import secret\n",
    "console_ha/secret.py": "",
    "console_ha/store/audit.py": "from console_ha.ha.addresses import origin_of\n",
    "console_ha/store/console_credentials.py": "from werkzeug.security import check_password_hash\n",
}


@pytest.mark.parametrize(("module", "text", "rule"), [
    ("console_ha/store/bad.py", "from console_ha.capabilities.registry import REGISTRY\n", "a layer above it"),
    ("console_ha/store/bad.py", "def f():\n    from console_ha import web\n", "a layer above it"),
    ("console_ha/store/bad.py", "from console_ha.ha import client\n", "beside it in the same layer"),
    ("console_ha/ha/bad.py", "import console_ha.store.audit\n", "beside it in the same layer"),
    ("console_ha/ha/bad.py", "from ..store import audit\n", "beside it in the same layer"),
    ("console_ha/deadline.py", "from console_ha.ha.addresses import origin_of\n", "a layer above it"),
    ("console_ha/conversation/bad.py", "from console_ha.mcp import server\n", "beside it in the same layer"),
    ("console_ha/capabilities/bad.py", "from console_ha.settings.service import x\n", "a layer above it"),
    ("console_ha/capabilities/bad.py", "from console_ha.console import Console\n", "a layer above it"),
    ("console_ha/console.py", "from console_ha.web import create_app\n", "a layer above it"),
    ("console_ha/capabilities/bad.py", "import flask\n", "only web/ imports a web framework"),
    ("console_ha/store/bad.py", "from werkzeug.wrappers import Response\n", "only web/ imports a web framework"),
    ("console_ha/ha/bad.py", "from flask_wtf.csrf import CSRFProtect\n", "only web/ imports a web framework"),
], ids=["store-capabilities", "store-web-in-a-function", "store-ha-client", "ha-store", "ha-store-relative",
        "base-ha", "conversation-mcp", "capabilities-settings",
        "capabilities-console", "console-web", "flask", "werkzeug", "flask-wtf"])
def test_the_rule_catches_a_violation(tmp_path: Path, module: str, text: str, rule: str) -> None:
    """A fake package that keeps every rule, plus one module that breaks one: exactly that one is reported."""
    clean = _write(tmp_path, FAKE_PACKAGE)
    assert violations(list(imports_in(tmp_path, clean))) == []
    (bad,) = _write(tmp_path, {module: text})
    found = violations(list(imports_in(tmp_path, [bad])))
    assert len(found) == 1 and rule in found[0][1], found
