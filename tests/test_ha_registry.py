"""Entity areas over Home Assistant's WebSocket, against a small WebSocket server speaking HA's protocol."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from wsproto import ConnectionType, WSConnection

from console_ha import ha_registry, ha_ws
from console_ha.ha_registry import (
    AreaCache,
    entity_areas,
    fetch_entity_areas,
    websocket_url,
)
from console_ha.secret_store import Secret

TOKEN = "ws-test-token-0123456789"
_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

AREAS = [{"area_id": "living_room", "name": "Living room"}, {"area_id": "garage", "name": "Garage"},
         {"area_id": "hall", "name": "Hall"}]
DEVICES = [{"id": "dev-thermo", "area_id": "living_room"}, {"id": "dev-door", "area_id": "hall"},
           {"id": "dev-none", "area_id": None}]
ENTITIES = [
    {"entity_id": "sensor.living_room_temperature", "device_id": "dev-thermo", "area_id": None},
    # The entity's own area wins over its device's.
    {"entity_id": "binary_sensor.front_door", "device_id": "dev-door", "area_id": "garage"},
    {"entity_id": "light.no_area", "device_id": "dev-none", "area_id": None},
    {"entity_id": "switch.lonely", "device_id": None, "area_id": None},
]
RESULTS = {
    "config/area_registry/list": AREAS,
    "config/device_registry/list": DEVICES,
    "config/entity_registry/list": ENTITIES,
}


class _Handler(socketserver.BaseRequestHandler):
    """One WebSocket connection speaking Home Assistant's auth-then-commands protocol."""

    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(5)
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = sock.recv(4096)
            if not chunk:
                return
            request += chunk
        headers = dict(
            line.split(": ", 1) for line in request.decode().split("\r\n")[1:] if ": " in line
        )
        key = headers.get("Sec-WebSocket-Key")
        if self.server.behaviour == "http" or key is None:
            sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        accept = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        sock.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode()
        )
        if self.server.behaviour == "silent":
            time.sleep(3)
            return
        self._send(sock, {"type": "auth_required", "ha_version": "2025.4.4"})
        auth = self._receive(sock)
        if auth is None:
            return
        if auth.get("access_token") != TOKEN:
            self._send(sock, {"type": "auth_invalid", "message": "Invalid access token or password"})
            return
        self._send(sock, {"type": "auth_ok", "ha_version": "2025.4.4"})
        while (message := self._receive(sock)) is not None:
            command = message["type"]
            if self.server.behaviour == "fail" and command == "config/device_registry/list":
                self._send(sock, {"id": message["id"], "type": "result", "success": False,
                                  "error": {"code": "unauthorized", "message": "Unauthorized"}})
                continue
            # An event in between, as HA may send; the client must skip it.
            self._send(sock, {"id": 999, "type": "event", "event": {}})
            self._send(sock, {"id": message["id"], "type": "result", "success": True,
                              "result": RESULTS.get(command)})

    def _receive(self, sock: socket.socket) -> dict[str, Any] | None:
        header = self._read(sock, 2)
        if header is None:
            return None
        opcode, length = header[0] & 0x0F, header[1] & 0x7F
        if length == 126:
            length = struct.unpack("!H", self._read(sock, 2) or b"\0\0")[0]
        elif length == 127:
            length = struct.unpack("!Q", self._read(sock, 8) or b"\0" * 8)[0]
        mask = self._read(sock, 4) or b"\0" * 4
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(self._read(sock, length) or b""))
        if opcode == 0x8:
            return None
        message = json.loads(payload)
        self.server.received.append(message)
        return message

    @staticmethod
    def _read(sock: socket.socket, size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            try:
                chunk = sock.recv(size - len(data))
            except OSError:
                return None
            if not chunk:
                return None
            data += chunk
        return data

    @staticmethod
    def _send(sock: socket.socket, message: dict[str, Any]) -> None:
        payload = json.dumps(message).encode()
        if len(payload) < 126:
            header = struct.pack("!BB", 0x81, len(payload))
        elif len(payload) < 65536:
            header = struct.pack("!BBH", 0x81, 126, len(payload))
        else:
            header = struct.pack("!BBQ", 0x81, 127, len(payload))
        sock.sendall(header + payload)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    behaviour = "ha"
    received: list[dict[str, Any]]


@pytest.fixture
def ws_server() -> Iterator[_Server]:
    """A WebSocket server on 127.0.0.1 that answers like Home Assistant's /api/websocket."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.received = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _base_url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_areas_join_the_three_registries(ws_server: _Server) -> None:
    """An entity's own area wins over its device's; entities without an area are left out."""
    areas = fetch_entity_areas(_base_url(ws_server), Secret(TOKEN), timeout=3)
    assert areas == {"sensor.living_room_temperature": "Living room", "binary_sensor.front_door": "Garage"}


def test_only_the_auth_message_and_the_three_list_commands_are_sent(ws_server: _Server) -> None:
    """The token travels in the auth message only; every other message is an allowlisted read."""
    fetch_entity_areas(_base_url(ws_server), Secret(TOKEN), timeout=3)
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
        areas = fetch_entity_areas(_base_url(ws_server), Secret(TOKEN), timeout=3)
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
                                              deadline=time.monotonic() + 5, timeout=5, max_bytes=1000)
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
    """Not a WebSocket, no answer within the bound, or a failed command: None, quickly."""
    ws_server.behaviour = behaviour
    started = time.monotonic()
    assert fetch_entity_areas(_base_url(ws_server), Secret(TOKEN), timeout=0.5) is None
    assert time.monotonic() - started < 2.0


def test_a_wrong_token_is_none(ws_server: _Server) -> None:
    """auth_invalid: None, and no command is sent."""
    assert fetch_entity_areas(_base_url(ws_server), Secret("wrong"), timeout=3) is None
    assert [m["type"] for m in ws_server.received] == ["auth"]


def test_nothing_listening_is_none() -> None:
    """A closed port: None."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert fetch_entity_areas(f"http://127.0.0.1:{port}", Secret(TOKEN), timeout=1) is None


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
    """One fetch per minute for a URL and token; a new token is a new fetch; failures expire faster."""
    calls: list[str] = []
    answers: list[dict[str, str] | None] = [{"x.y": "Hall"}, {"x.y": "Kitchen"}, None, {"x.y": "Attic"}]

    def fetch(base_url: str, token: Secret, **kwargs: Any) -> dict[str, str] | None:
        calls.append(token.reveal())
        return answers.pop(0)

    cache = AreaCache(ttl=60, failure_ttl=0, fetch=fetch)
    assert cache.get("http://ha", Secret("a")) == {"x.y": "Hall"}
    assert cache.get("http://ha", Secret("a")) == {"x.y": "Hall"}
    assert cache.get("http://ha", Secret("b")) == {"x.y": "Kitchen"}
    cache = AreaCache(ttl=60, failure_ttl=0, fetch=fetch)
    assert cache.get("http://ha", Secret("c")) is None
    assert cache.get("http://ha", Secret("c")) == {"x.y": "Attic"}
    assert calls == ["a", "b", "c", "c"]
