"""Dependencies point one way: every import in the package, read from its syntax tree, goes down the layers.

    entry points (cli, __main__, wsgi.py)
    -> web -> console (the composition root) -> (conversation, mcp) -> answers -> settings -> capabilities
    -> plugins -> (store, ha) -> the base (errors, secret, deadline, unknown_keys, timestamps, words, hooks,
    the package itself)

A module imports only from lower layers, or from its own package; the base modules may use each other.
Besides: `store` takes only `ha.addresses` from `ha`, and nothing outside `web` imports Flask, Flask-WTF,
Werkzeug or Jinja (with one named exception). Imports inside functions count, and so do those under
TYPE_CHECKING: a dependency is a dependency, whenever it is loaded. So do the ways around an import statement:
a module named by a string (`importlib.import_module`, `__import__`, `pkgutil.resolve_name`; a name only known
when the code runs is refused, since this test cannot follow it), and a module reached through the attributes
of an imported package (`import console_ha.store.audit` binds `console_ha`, and `console_ha.web` is then web).
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
    # The household's answers (issue 27): each card's life, the queue MCP programs wait on, the pages' watch.
    frozenset({"answers"}),
    # The settings service may use what a capability declares (its budget, for the save check); a
    # capability never reads the settings service.
    frozenset({"settings"}),
    frozenset({"capabilities"}),
    # The household's plugins (issue 30): the executor and the conversation call their hooks; they keep
    # their switches in a store file and call through the deadline's threads.
    frozenset({"plugins"}),
    frozenset({"store", "ha"}),
    frozenset({"", "errors", "secret", "deadline", "unknown_keys", "timestamps", "words",
               "folding",  # issue 18: how household words are compared, for ha (areas) and capabilities
               "language",  # issue 26: the languages, their catalogs and Words, for every layer
               "hooks"}),  # issue 30: the stage hooks' specifications, which plugins import
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
    ("console_ha.store.console_secrets", "werkzeug.security"),
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


# Functions that import the module a string names (called by their own name or as an attribute).
IMPORT_BY_NAME = frozenset({"import_module", "__import__", "resolve_name"})
# What an import by a name computed at run time is recorded as: no layer, always a violation.
COMPUTED = "<a name computed at run time>"


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _imported_by_name(node: ast.Call) -> str:
    """The module an import_module/__import__/resolve_name call names, or COMPUTED where no literal says."""
    arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "name"), None)
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("."):
        return arg.value.split(":")[0]  # resolve_name's "package.module:attribute"
    return COMPUTED


def _dotted(node: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None for anything but names joined by dots."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _reached(modules: set[str], bound: dict[str, str], node: ast.Attribute) -> str | None:
    """The deepest module an attribute chain reaches from a name bound to a module (None if it stays put)."""
    parts = _dotted(node)
    if not parts or parts[0] not in bound:
        return None
    dotted = [bound[parts[0]], *parts[1:]]
    for end in range(len(dotted), 1, -1):
        name = ".".join(dotted[:end])
        if name in modules:
            return name if name != bound[parts[0]] else None
    return None


def imports_in(root: Path, files: list[Path]) -> Iterator[Import]:
    """Every import in `files` (paths under `root`), with `from a import b` resolved to a.b where b is a module."""
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    for path in files:
        importer = module_name(path, root)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        bound: dict[str, str] = {}  # a name the module binds to one of the package's modules, and which
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(importer, alias.name, node.lineno)
                    if alias.name.split(".")[0] == PACKAGE:
                        # `import a.b` binds `a`; `import a.b as c` binds `c` to a.b.
                        name = alias.asname or PACKAGE
                        bound[name] = alias.name if alias.asname else PACKAGE
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(importer, path.name == "__init__.py", node)
                for alias in node.names:
                    candidate = f"{target}.{alias.name}"
                    yield Import(importer, candidate if candidate in modules else target, node.lineno)
                    if candidate in modules:
                        bound[alias.asname or alias.name] = candidate
            elif isinstance(node, ast.Call) and _called_name(node.func) in IMPORT_BY_NAME:
                yield Import(importer, _imported_by_name(node), node.lineno)
        # Attribute chains are read once every binding is known: ast.walk does not visit in source order.
        # It visits a chain before the chains inside it (`a.b` in `a.b.c`), which are skipped: one import each.
        inner: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and id(node) not in inner:
                inner.add(id(node.value))
                reached = _reached(modules, bound, node)
                if reached is not None:
                    yield Import(importer, reached, node.lineno)
            elif isinstance(node, ast.Attribute):
                inner.add(id(node.value))


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
        if imp.imported == COMPUTED:
            found.append((imp, "an import by a name computed at run time, which this test cannot follow"))
            continue
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
    "console_ha/store/console_secrets.py": "from werkzeug.security import check_password_hash\n",
}


@pytest.mark.parametrize(("module", "text", "rule"), [
    ("console_ha/store/bad.py", "from console_ha.capabilities.registry import REGISTRY\n", "a layer above it"),
    ("console_ha/store/bad.py", "def f():\n    from console_ha import web\n", "a layer above it"),
    ("console_ha/store/bad.py", "from console_ha.ha import rest_client\n", "beside it in the same layer"),
    ("console_ha/ha/bad.py", "import console_ha.store.audit\n", "beside it in the same layer"),
    ("console_ha/ha/bad.py", "from ..store import audit\n", "beside it in the same layer"),
    ("console_ha/deadline.py", "from console_ha.ha.addresses import origin_of\n", "a layer above it"),
    ("console_ha/conversation/bad.py", "from console_ha.mcp import server\n", "beside it in the same layer"),
    ("console_ha/capabilities/bad.py", "from console_ha.settings.settings_service import x\n", "a layer above it"),
    ("console_ha/capabilities/bad.py", "from console_ha.console import Console\n", "a layer above it"),
    ("console_ha/console.py", "from console_ha.web import create_app\n", "a layer above it"),
    ("console_ha/capabilities/bad.py", "import flask\n", "only web/ imports a web framework"),
    ("console_ha/store/bad.py", "from werkzeug.wrappers import Response\n", "only web/ imports a web framework"),
    ("console_ha/ha/bad.py", "from flask_wtf.csrf import CSRFProtect\n", "only web/ imports a web framework"),
    ("console_ha/store/bad.py", "import importlib\nweb = importlib.import_module('console_ha.web')\n",
     "a layer above it"),
    ("console_ha/store/bad.py", "from importlib import import_module\nweb = import_module('console_ha.web')\n",
     "a layer above it"),
    ("console_ha/store/bad.py", "web = __import__('console_ha.web', fromlist=['x'])\n", "a layer above it"),
    ("console_ha/store/bad.py", "import pkgutil\nf = pkgutil.resolve_name('console_ha.web:create_app')\n",
     "a layer above it"),
    ("console_ha/capabilities/bad.py", "import importlib\nweb = importlib.import_module('fla' + 'sk')\n",
     "computed at run time"),
    ("console_ha/store/bad.py", "import console_ha.store.audit\ndef f():\n    return console_ha.web.create_app()\n",
     "a layer above it"),
    ("console_ha/store/bad.py", "import console_ha.ha.addresses\nx = console_ha.ha.rest_client.HomeAssistantClient\n",
     "beside it in the same layer"),
    ("console_ha/store/bad.py", "import console_ha as pkg\nx = pkg.capabilities.registry.REGISTRY\n",
     "a layer above it"),
    ("console_ha/store/bad.py", "if False:\n    try:\n        import flask\n    except ImportError:\n        pass\n",
     "only web/ imports a web framework"),
], ids=["store-capabilities", "store-web-in-a-function", "store-ha-client", "ha-store", "ha-store-relative",
        "base-ha", "conversation-mcp", "capabilities-settings",
        "capabilities-console", "console-web", "flask", "werkzeug", "flask-wtf",
        "import-module", "import-module-from-importlib", "dunder-import", "resolve-name", "computed-name",
        "attribute-of-the-package", "attribute-to-ha-client", "attribute-of-an-alias", "conditional-flask"])
def test_the_rule_catches_a_violation(tmp_path: Path, module: str, text: str, rule: str) -> None:
    """A fake package that keeps every rule, plus one module that breaks one: exactly that one is reported."""
    clean = _write(tmp_path, FAKE_PACKAGE)
    assert violations(list(imports_in(tmp_path, clean))) == []
    (bad,) = _write(tmp_path, {module: text})
    found = violations(list(imports_in(tmp_path, [bad])))
    assert len(found) == 1 and rule in found[0][1], found
