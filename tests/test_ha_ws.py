"""The WebSocket sends the auth message and allowlisted read-only commands, and nothing else: by its source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from console_ha.errors import HATLSError
from console_ha.ha import websocket as ha_ws
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret

PACKAGE = Path(__file__).resolve().parent.parent / "console_ha"
WS_MODULE = PACKAGE / "ha" / "websocket.py"
# Calls that put bytes on a socket whatever their receiver.
RAW_SOCKET_CALLS = {"sendall", "sendto", "sendmsg"}
# Calls that write to a WebSocket when their receiver (or, for a bare function, an argument) is one.
WIRE_CALLS = {"send", "_send", "_send_json", "_send_command", "send_text", "send_bytes"}
SOCKET_WORDS = ("sock", "ws", "websocket", "connection")

READ_ONLY_COMMANDS = {
    "config/area_registry/list",
    "config/entity_registry/list",
    "config/device_registry/list",
    "history/history_during_period",
    # issue 19, get_statistics: both select from the recorder's database (recorder/websocket_api.py)
    "recorder/statistics_during_period",
    "recorder/get_statistics_metadata",
    "get_config",  # websocket_api/commands.py: hass.config.as_dict(), as /api/config
    # get_logbook (issue 19): ws_get_events reads in a read-only recorder session and subscribes to nothing.
    "logbook/get_events",
    # issue 28: todo/item/list answers the entity's items once (todo/__init__.py); weather/subscribe_forecast adds
    # an in-memory listener and pushes the forecast the entity has (weather/websocket_api.py); unsubscribe_events
    # removes this connection's own listener (websocket_api/commands.py). None of them writes.
    "todo/item/list",
    "weather/subscribe_forecast",
    "unsubscribe_events",
}


def _calls(tree: ast.AST) -> list[tuple[ast.Call, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            found.append((node, name))
    return found


def _wire_calls(tree: ast.AST) -> list[str]:
    """Calls writing to a socket or a WebSocket (an ASGI `send` answering the Console's own client is not one)."""
    offenders = []
    for node, name in _calls(tree):
        if isinstance(node.func, ast.Attribute):
            near = ast.unparse(node.func.value).lower()
        else:
            near = " ".join(ast.unparse(argument).lower() for argument in node.args)
        if name in RAW_SOCKET_CALLS or name == "_send_command" or (
                name in WIRE_CALLS and any(word in near for word in SOCKET_WORDS)):
            offenders.append(f"line {node.lineno}: {ast.unparse(node.func)}(")
    return offenders


def _enclosing_functions(tree: ast.AST) -> dict[int, str]:
    """id(node) → the name of the innermost function holding it (ast.walk meets outer functions first)."""
    owner: dict[int, str] = {}
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                owner[id(node)] = function.name
    return owner


def test_the_allowlist_holds_only_read_only_commands() -> None:
    assert ha_ws.ALLOWED_COMMANDS == READ_ONLY_COMMANDS


def test_no_module_but_the_websocket_module_writes_to_a_socket() -> None:
    """Every byte to Home Assistant's WebSocket goes through ha_ws (REST has its own GET-only test)."""
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == WS_MODULE:
            continue
        if calls := _wire_calls(ast.parse(path.read_text(encoding="utf-8"))):
            offenders[str(path.relative_to(PACKAGE))] = calls
    assert offenders == {}


def test_every_message_the_websocket_module_sends_is_the_auth_or_an_allowlisted_command() -> None:
    """A message is only built in _send_json, which only the allowlist check and the auth step call."""
    tree = ast.parse(WS_MODULE.read_text(encoding="utf-8"))
    owner = _enclosing_functions(tree)
    for node, name in _calls(tree):
        where = owner.get(id(node))
        if name == "TextMessage" or name == "BytesMessage":
            assert where == "_send_json", f"line {node.lineno}: a message built in {where}"
        if name == "_send_json":
            if where == "_send_command":
                continue
            (argument,) = node.args
            assert isinstance(argument, ast.Dict), f"line {node.lineno}: _send_json of a computed message"
            fields = {ast.literal_eval(k): v for k, v in zip(argument.keys, argument.values, strict=True) if k}
            assert ast.literal_eval(fields["type"]) == "auth" and set(fields) == {"type", "access_token"}, (
                f"line {node.lineno}: only the auth message may bypass the allowlist")
    check = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_send_command")
    first = check.body[0]
    assert isinstance(first, ast.If) and "ALLOWED_COMMANDS" in ast.unparse(first.test), (
        "_send_command must check the allowlist before anything else")
    assert isinstance(first.body[0], ast.Raise)


def test_no_module_but_the_websocket_module_speaks_the_websocket_protocol() -> None:
    """wsproto (framing, the upgrade) is imported by ha_ws alone."""
    importers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(name.split(".")[0] in ("wsproto", "websocket", "websockets", "aiohttp") for name in names):
                importers.append(str(path.relative_to(PACKAGE)))
    assert sorted(set(importers)) == ["ha/websocket.py"]


def test_the_scan_would_catch_a_send_elsewhere() -> None:
    tree = ast.parse("ws.send('x')\nself._sock.sendall(b'x')\nconnection._send_json({'type': 'call_service'})\n"
                     "_send_json(ws, {'type': 'call_service'})\n_send_command(x, 'call_service')")
    assert len(_wire_calls(tree)) == 5
    assert _wire_calls(ast.parse("service.send(conversation_id, text)\ncoro.send(chunk)\n"
                                 "await _send_json(send, 401, body)")) == []


def test_an_unreadable_ca_bundle_is_a_tls_error_before_connecting(tmp_path: Path) -> None:
    """As over REST: the household's CA file cannot be read, so nothing is sent."""
    client = HomeAssistantClient("https://127.0.0.1:9", Secret("t"), ca_bundle=str(tmp_path / "missing.pem"))
    with pytest.raises(HATLSError) as caught, client.websocket(timeout=1, max_bytes=1000):
        pass
    assert caught.value.detail["reason"] == "ca_bundle"
