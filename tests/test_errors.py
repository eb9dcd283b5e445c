"""The exception tree: each class owns its code, a raise names a class, and one builder makes the body."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import console_ha
from console_ha.errors import (
    CapabilityError,
    ConfirmationInvalid,
    ConfirmationReason,
    ConsoleHaError,
    HATimeout,
    HomeAssistantError,
    error_body,
    error_classes,
    http_statuses,
)

PACKAGE = Path(__file__).resolve().parent.parent / "console_ha"
CODE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")


def test_every_code_has_exactly_one_owner_and_every_owner_its_own_code() -> None:
    """One class per code, found by the code it owns."""
    for code, owner in error_classes().items():
        assert owner.code == code, owner.__name__
    assert len(set(error_classes().values())) == len(error_classes())


def test_the_http_statuses_come_from_the_classes() -> None:
    """The web layer's table is the classes' own statuses, for every code that crosses HTTP."""
    assert http_statuses() == {c: o.http_status for c, o in error_classes().items() if o.http_status is not None}


def test_a_subclass_keeps_its_parents_code() -> None:
    """A specialised error (a throttled login, a busy conversation) answers with the code it inherits."""
    from console_ha.conversation.turn_loop import ConversationBusy
    from console_ha.web.login_throttle import LoginThrottled

    assert LoginThrottled(3).code == ConversationBusy("x").code == "RATE_LIMITED"


def test_the_body_keeps_every_detail_field() -> None:
    """{"error": {"code", "message", ...detail}}: the one shape, for the web, the model and MCP."""
    err = ConfirmationInvalid(ConfirmationReason.EXPIRED, "That confirmation has expired.")
    assert error_body(err) == err.to_dict() == {
        "error": {"code": "CONFIRMATION_INVALID", "message": "That confirmation has expired.", "reason": "expired"}}


def test_reworded_keeps_the_class_and_replaces_the_words() -> None:
    """The model's words for a Home Assistant failure: same class and code, no detail when asked for none."""
    err = HATimeout("http://ha.local:8123 did not answer", reason="read")
    told = err.reworded("Home Assistant did not answer in time.", detail={})
    assert isinstance(told, HATimeout) and error_body(told) == {
        "error": {"code": "HA_TIMEOUT", "message": "Home Assistant did not answer in time."}}
    assert err.detail == {"reason": "read"}


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_raise_site_names_a_code_as_a_string(path: Path) -> None:
    """A raise names a class: no `code=` keyword and no code as CapabilityError's first argument."""
    named = {ConsoleHaError.__name__, CapabilityError.__name__}
    for call in _calls(ast.parse(path.read_text())):
        name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
        if name not in named and name not in {cls.__name__ for cls in error_classes().values()}:
            continue
        assert not any(keyword.arg == "code" for keyword in call.keywords), f"{path}:{call.lineno}"
        assert not (len(call.args) >= 2 and isinstance(call.args[0], ast.Constant)
                    and isinstance(call.args[0].value, str) and call.args[0].value in error_classes()), \
            f"{path}:{call.lineno}"


def test_any_error_can_be_reworded_whatever_its_class_takes_first() -> None:
    """Rewording keeps the class, code and detail of an error whose __init__ takes other arguments first."""
    original = ConfirmationInvalid(ConfirmationReason.EXPIRED, "That confirmation has expired. Ask again.")
    other = original.reworded("Ask again, please.")
    assert type(other) is ConfirmationInvalid and other.code == original.code
    assert other.message == "Ask again, please." and other.args == ("Ask again, please.",)
    assert other.detail == original.detail and original.message == "That confirmation has expired. Ask again."


def _code_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing an error's `.code` with a string literal (or literals) or with another `.code`."""

    def is_code(node: ast.expr) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "code"

    def is_literal(node: ast.expr) -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(is_literal(item) for item in node.elts)
        return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            codes = [operand for operand in operands if is_code(operand)]
            if codes and (len(codes) > 1 or any(is_literal(operand) for operand in operands)):
                found.append(node.lineno)
        elif isinstance(node, ast.Match) and is_code(node.subject):
            found.append(node.lineno)
    return found


@pytest.mark.parametrize("source", [
    'err.code == "HA_UNAUTHORIZED"',
    '"CONFIG_STALE" != err.code',
    'err.code in ("CONFIG_STALE", "INVALID_CONFIG")',
    'err.code not in {"CONFIG_STALE"}',
    'err.code == InvalidSettingsChange.code',
    'error.error.code == f"HA_{kind}"',
    'match err.code:\n    case "HA_TIMEOUT":\n        pass',
])
def test_the_code_comparison_check_finds_each_way_of_writing_one(source: str) -> None:
    """The check below is not blind: each of these is a comparison of codes as strings."""
    assert _code_comparisons(ast.parse(source)) == [1]


@pytest.mark.parametrize("source", [
    "isinstance(err, HAUnauthorized)",
    "language.code == code",  # a language's code, compared with a name
    "err.code not in STATUS",  # a lookup in the table built from the classes
    "response.status_code == 401",
    "err.error.code != SESSION_TERMINATED",  # the MCP SDK's JSON-RPC error number
    "err.code is not None",
])
def test_the_code_comparison_check_lets_the_rest_be(source: str) -> None:
    assert _code_comparisons(ast.parse(source)) == []


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_error_code_is_compared_as_a_string(path: Path) -> None:
    """Code asks which class an error is (`isinstance`, `except SomeError`), never which string its code is."""
    assert _code_comparisons(ast.parse(path.read_text())) == [], path


def _error_classes_in_the_package() -> list[type[ConsoleHaError]]:
    for module in pkgutil.walk_packages(console_ha.__path__, "console_ha."):
        if not module.name.endswith("__main__"):  # running it would start the command
            importlib.import_module(module.name)
    found: list[type[ConsoleHaError]] = []
    waiting: list[type[ConsoleHaError]] = [ConsoleHaError]
    while waiting:
        cls = waiting.pop()
        if cls not in found:
            found.append(cls)
            waiting += cls.__subclasses__()
    return found


def test_no_error_class_s_docstring_names_a_code_it_does_not_have() -> None:
    """A docstring that names a code names the class's own: HomeAssistantError's once named HA_BAD_RESPONSE."""
    classes = _error_classes_in_the_package()
    assert len(classes) > len(error_classes())  # the package's own subclasses (LoginThrottled, ...) are in
    wrong = {f"{cls.__module__}.{cls.__qualname__}": named
             for cls in classes
             if (named := set(CODE.findall(cls.__doc__ or "")) & set(error_classes()) - {cls.code})}
    assert wrong == {}


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_bases_that_own_no_code_are_never_raised_themselves(path: Path) -> None:
    """CapabilityError and HomeAssistantError would answer INTERNAL_ERROR: a raise names a subclass."""
    bases = {CapabilityError.__name__, HomeAssistantError.__name__}
    for call in _calls(ast.parse(path.read_text())):
        assert not (isinstance(call.func, ast.Name) and call.func.id in bases), f"{path}:{call.lineno}"
