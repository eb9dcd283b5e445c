"""Entity areas over Home Assistant's WebSocket, against a small WebSocket server speaking HA's protocol."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from wsproto import ConnectionType, WSConnection

from console_ha.deadline import Deadline
from console_ha.ha import areas as ha_registry
from console_ha.ha import websocket as ha_ws
from console_ha.ha.areas import AreaCache, entity_areas, fetch_entity_areas, websocket_url
from console_ha.ha.call_limits import CallLimits
from console_ha.secret import Secret
from tests.stub_ha_ws import TOKEN, StubWebSocket, running

_Server = StubWebSocket


@pytest.fixture
def ws_server() -> Iterator[StubWebSocket]:
    """A WebSocket server on 127.0.0.1 that answers like Home Assistant's /api/websocket."""
    with running() as server:
        yield server


def _base_url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_areas_join_the_three_registries(ws_server: _Server) -> None:
    """An entity's own area wins over its device's; entities without an area are left out."""
    areas = fetch_entity_areas(_base_url(ws_server), Secret(TOKEN), limits=CallLimits(), timeout=3)
    assert areas == {"sensor.living_room_temperature": "Living room", "binary_sensor.front_door": "Garage"}


def test_only_the_auth_message_and_the_three_list_commands_are_sent(ws_server: _Server) -> None:
    """The token travels in the auth message only; every other message is an allowlisted read."""
    fetch_entity_areas(_base_url(ws_server), Secret(TOKEN), limits=CallLimits(), timeout=3)
    auth, *commands = ws_server.received
    assert auth == {"type": "auth", "access_token": TOKEN}
    assert {c["type"] for c in commands} == set(ha_registry.ALLOWED_COMMANDS)
    assert all(TOKEN not in json.dumps(c) for c in commands)


def test_a_proxy_in_the_environment_never_sees_the_token(ws_server: _Server, monkeypatch) -> None:
    """Like the REST client, the WebSocket ignores http_proxy: the auth message goes straight to HA."""
    proxy = socket.socket()
    proxy.bind(("127.0.0.1", 0))
    proxy.listen()
    proxy.settimeout(0.2)
    proxy_url = f"http://127.0.0.1:{proxy.getsockname()[1]}"
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(name, proxy_url)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    try:
        areas = fetch_entity_areas(_base_url(ws_server), Secret(TOKEN), limits=CallLimits(), timeout=3)
        with pytest.raises(TimeoutError):
            proxy.accept()
    finally:
        proxy.close()
    assert areas, "the registries were read directly"


def test_a_command_outside_the_allowlist_is_never_sent() -> None:
    """The check is made before sending, whatever the caller asks for."""

    class NoSocket:
        def settimeout(self, seconds: float) -> None:
            raise AssertionError("about to send")

        def sendall(self, data: bytes) -> None:
            raise AssertionError("sent")

    connection = ha_ws.HomeAssistantWebSocket(NoSocket(), WSConnection(ConnectionType.CLIENT),  # type: ignore[arg-type]
                                              deadline=Deadline(5), max_bytes=1000)
    for message in ({"type": "call_service", "domain": "lock", "service": "unlock"},
                    {"type": "config/entity_registry/update", "entity_id": "lock.front_door"},
                    {"type": "auth", "access_token": "x"},
                    {"type": "history/history_during_period", "id": 7}):
        with pytest.raises(ValueError):
            connection.command(message)
        with pytest.raises(ValueError):
            connection.stream(message)


@pytest.mark.parametrize("behaviour", ["http", "silent", "fail"])
def test_any_failure_is_none(ws_server: _Server, behaviour: str) -> None:
    """Not a WebSocket, no answer within the bound, or a failed command: None, the silent one at its deadline."""
    ws_server.behaviour = behaviour
    assert fetch_entity_areas(_base_url(ws_server), Secret(TOKEN), limits=CallLimits(), timeout=0.5) is None
    assert not ws_server.silence_ended.is_set()  # a silent server was still silent: the deadline gave up on it
    ws_server.silence_ended.set()


def test_a_wrong_token_is_none(ws_server: _Server) -> None:
    """auth_invalid: None, and no command is sent."""
    assert fetch_entity_areas(_base_url(ws_server), Secret("wrong"), limits=CallLimits(), timeout=3) is None
    assert [m["type"] for m in ws_server.received] == ["auth"]


def test_nothing_listening_is_none() -> None:
    """A closed port: None."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert fetch_entity_areas(f"http://127.0.0.1:{port}", Secret(TOKEN), limits=CallLimits(), timeout=1) is None


@pytest.mark.parametrize(
    "base_url, expected",
    [
        ("http://ha.local:8123", "ws://ha.local:8123/api/websocket"),
        ("https://ha.example", "wss://ha.example/api/websocket"),
        ("http://10.0.0.2/ha", "ws://10.0.0.2/ha/api/websocket"),
    ],
)
def test_websocket_url(base_url: str, expected: str) -> None:
    """The stored base URL, as a WebSocket URL."""
    assert websocket_url(base_url) == expected


def test_registries_of_an_odd_shape_are_tolerated() -> None:
    """Missing names or ids: those entries are skipped."""
    assert entity_areas([{"area_id": "a"}], [{"entity_id": "x.y", "area_id": "a"}], []) == {}


def test_the_area_cache_keeps_answers_and_retries_failures_sooner() -> None:
    """One fetch per minute for a URL and token; a new token is a new fetch, beside the first; failures expire
    faster."""
    calls: list[str] = []
    answers: list[dict[str, str] | None] = [{"x.y": "Hall"}, {"x.y": "Kitchen"}, None, {"x.y": "Attic"}]

    def fetch(base_url: str, token: Secret, **kwargs: Any) -> dict[str, str] | None:
        calls.append(token.reveal())
        return answers.pop(0)

    cache = AreaCache(ttl=60, failure_ttl=0, fetch=fetch)
    assert cache.get("http://ha", Secret("a")) == {"x.y": "Hall"}
    assert cache.get("http://ha", Secret("a")) == {"x.y": "Hall"}
    assert cache.get("http://ha", Secret("b")) == {"x.y": "Kitchen"}
    assert cache.get("http://ha", Secret("a")) == {"x.y": "Hall"}, "each Home Assistant and token keeps its own"
    cache = AreaCache(ttl=60, failure_ttl=0, fetch=fetch)
    assert cache.get("http://ha", Secret("c")) is None
    assert cache.get("http://ha", Secret("c")) == {"x.y": "Attic"}
    assert calls == ["a", "b", "c", "c"]


def test_a_trickling_handshake_gives_its_place_back_at_the_deadline() -> None:
    """A server trickling its handshake, each byte within the read timeout, cannot hold the call past it.

    Each socket read has the timeout, but a trickle resets it on every byte: the whole call needs its
    own deadline, as the REST client's watchdog gives its calls.
    """
    limits = CallLimits()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop = threading.Event()
    whole_handshake_sent = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            for byte in b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n" * 4:  # 80 s of it
                if stop.wait(0.4):
                    return
                try:
                    conn.send(bytes([byte]))
                except OSError:
                    return
            whole_handshake_sent.set()

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    base_url = f"http://127.0.0.1:{port}"
    try:
        assert fetch_entity_areas(base_url, Secret(TOKEN), limits=limits, timeout=1.0) is None
        assert limits.in_flight(base_url) == 0
        # Given back before the trickle was done: the 1 s deadline ended the call, not the server's 80 s.
        assert not whole_handshake_sent.is_set()
    finally:
        stop.set()
        listener.close()
        server.join(5)
