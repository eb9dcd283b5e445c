"""The exception tree: each class owns its code, a raise names a class, and one builder makes the body."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from console_ha.errors import (
    CapabilityError,
    ConfirmationInvalid,
    ConfirmationReason,
    ConsoleHaError,
    HATimeout,
    error_body,
    error_classes,
    http_statuses,
)

PACKAGE = Path(__file__).resolve().parent.parent / "console_ha"


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
