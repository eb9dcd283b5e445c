"""One definition per fixture: no two test modules define a fixture of the same name with the same body.

A copied fixture drifts: one copy is fixed, the others keep the bug. A fixture two modules need lives in
their nearest conftest.py (tests/, tests/web/, tests/e2e/, tests/mcp/) or a helper module beside them.
"Same body" is the syntax tree without the docstring, and the same value for every module constant it
reads (two `configured` fixtures that allow different entities are two fixtures, not one copied).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target) in ("pytest.fixture", "fixture")


def _constants(tree: ast.Module) -> dict[str, str]:
    """Each module-level name assigned once, with the syntax of its value."""
    values: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        values.update({target.id: ast.dump(value) for target in targets if isinstance(target, ast.Name)})
    return values


def _body(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    first = function.body[0]
    has_docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
        first.value.value, str)
    return function.body[1:] if has_docstring else function.body


def fixture_key(function: ast.FunctionDef | ast.AsyncFunctionDef, constants: dict[str, str]) -> str:
    """What makes two fixture definitions copies: name, arguments, body and the module constants it reads."""
    body = ast.Module(body=_body(function), type_ignores=[])
    read = sorted({node.id for node in ast.walk(body) if isinstance(node, ast.Name) and node.id in constants})
    return "\n".join([function.name, ast.dump(function.args), ast.dump(body),
                      *(f"{name}={constants[name]}" for name in read)])


def fixture_definitions(source: str) -> list[tuple[str, int, str]]:
    """(name, line, key) of every module-level fixture in `source`."""
    tree = ast.parse(source)
    constants = _constants(tree)
    return [(node.name, node.lineno, fixture_key(node, constants)) for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and any(_is_fixture(decorator) for decorator in node.decorator_list)]


def copies(sources: dict[str, str]) -> list[list[str]]:
    """Groups of "module:line" that define the same fixture with the same body, in two or more modules."""
    places: dict[str, list[str]] = defaultdict(list)
    for module, source in sources.items():
        for name, line, key in fixture_definitions(source):
            places[key].append(f"{module}:{line} {name}")
    return [where for where in places.values() if len(where) > 1]


def test_no_fixture_is_defined_twice_with_the_same_body() -> None:
    """Every fixture is defined once; a second module that needs it takes it from a conftest.py."""
    sources = {str(path.relative_to(TESTS)): path.read_text() for path in sorted(TESTS.rglob("*.py"))}
    assert copies(sources) == []


def test_the_check_finds_a_copy_and_tells_a_different_constant_apart() -> None:
    """Two modules with the same fixture are found; the same body reading different constants is not a copy."""
    fixture = '@pytest.fixture\ndef configured(stub):\n    """Words."""\n    return save(stub, ALLOWED)\n'
    same = {"a.py": f"ALLOWED = ['light.a']\n{fixture}",
            "b.py": f"ALLOWED = ['light.a']\n{fixture.replace('Words.', 'Other words.')}"}
    assert copies(same) == [["a.py:3 configured", "b.py:3 configured"]]
    assert copies({**same, "b.py": f"ALLOWED = ['light.b']\n{fixture}"}) == []
    assert copies({"a.py": fixture, "b.py": fixture.replace("save(stub, ALLOWED)", "save(stub, ALLOWED, 1)")}) == []
