"""A small WebSocket server on 127.0.0.1 speaking Home Assistant's /api/websocket protocol, for tests."""

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
from contextlib import contextmanager
from typing import Any

from tests.moving_clock import PATIENCE

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

    server: StubWebSocket

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(5)
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = sock.recv(4096)
            if not chunk:
                return
            request += chunk
        self.server.handshakes.append(request.decode("latin-1"))
        headers = dict(
            line.split(": ", 1) for line in request.decode().split("\r\n")[1:] if ": " in line
        )
        key = headers.get("Sec-WebSocket-Key")
        if self.server.behaviour == "redirect":
            sock.sendall(b"HTTP/1.1 302 Found\r\nLocation: " + self.server.redirect_to.encode()
                         + b"\r\nContent-Length: 0\r\n\r\n")
            return
        if self.server.behaviour == "hang_up":
            return  # closes the connection on the upgrade, as a proxy without WebSockets may
        if self.server.behaviour == "huge_greeting":
            accept = base64.b64encode(hashlib.sha1((key or "").encode() + _GUID.encode()).digest()).decode()
            sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         + f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode())
            self._send_raw(sock, b'{"type": "auth_required", "padding": "' + b"x" * 10_000_000 + b'"}')
            return
        if self.server.behaviour == "http" or key is None:
            sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        accept = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        sock.sendall(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode()
        )
        if self.server.behaviour == "silent":
            # Silent until the test ends it. A silence that runs out ends itself, before the server hangs up,
            # so a test that asks whether its client gave up first sees that the client waited it out.
            if not self.server.silence_ended.wait(PATIENCE):
                self.server.silence_ended.set()
            return
        self._send(sock, {"type": "auth_required", "ha_version": "2025.4.4"})
        auth = self._receive(sock)
        if auth is None:
            return
        if auth.get("access_token") != self.server.token:
            self._send(sock, {"type": "auth_invalid", "message": "Invalid access token or password"})
            return
        self._send(sock, {"type": "auth_ok", "ha_version": "2025.4.4"})
        while (message := self._receive(sock)) is not None:
            command = message["type"]
            if self.server.behaviour == "fail" and command == "config/device_registry/list":
                self._send(sock, {"id": message["id"], "type": "result", "success": False,
                                  "error": {"code": "unauthorized", "message": "Unauthorized"}})
                continue
            if command == "history/history_during_period":
                self._history(sock, message)
                continue
            # An event in between, as HA may send; the client must skip it.
            self._send(sock, {"id": 999, "type": "event", "event": {}})
            self._send(sock, {"id": message["id"], "type": "result", "success": True,
                              "result": RESULTS.get(command)})

    def _history(self, sock: socket.socket, message: dict[str, Any]) -> None:
        server = self.server
        if server.history_error is not None:
            self._send(sock, {"id": message["id"], "type": "result", "success": False,
                              "error": {"code": server.history_error, "message": "no"}})
            return
        if server.history_body is not None:
            self._send_raw(sock, server.history_body(message["id"]))
            return
        if server.history_delay:
            time.sleep(server.history_delay)
        if server.trickle:
            payload = json.dumps({"id": message["id"], "type": "result", "success": True, "result": {}}).encode()
            sock.sendall(struct.pack("!BB", 0x81, 126) + struct.pack("!H", len(payload) * 50))
            for byte in payload * 50:
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    return
                time.sleep(0.05)
            return
        result = {entity_id: rows for entity_id, rows in server.history.items() if entity_id in message["entity_ids"]}
        # Compact, as HA's orjson writes it, unless a test asks for the spaces of json.dumps.
        separators = (",", ":") if server.compact else (", ", ": ")
        payload = json.dumps({"id": message["id"], "type": "result", "success": True, "result": result},
                             separators=separators).encode()
        self._send_raw(sock, payload)

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

    @classmethod
    def _send(cls, sock: socket.socket, message: dict[str, Any]) -> None:
        cls._send_raw(sock, json.dumps(message).encode())

    @staticmethod
    def _send_raw(sock: socket.socket, payload: bytes) -> None:
        if len(payload) < 126:
            header = struct.pack("!BB", 0x81, len(payload))
        elif len(payload) < 65536:
            header = struct.pack("!BBH", 0x81, 126, len(payload))
        else:
            header = struct.pack("!BBQ", 0x81, 127, len(payload))
        try:
            sock.sendall(header)
            sock.sendall(payload)
        except OSError:
            pass  # the client gave up (a byte cap, a deadline): nothing more to say


class StubWebSocket(socketserver.ThreadingTCPServer):
    """Home Assistant's WebSocket: auth, the registry lists, and history/history_during_period."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.behaviour = "ha"
        # Set by a test once a "silent" server may speak again (its client must have given up by then), or by
        # the server itself when the silence ran out first.
        self.silence_ended = threading.Event()
        self.token = TOKEN
        self.received: list[dict[str, Any]] = []
        self.handshakes: list[str] = []
        # entity_id → compressed rows ({"s", "lu"}), as HA answers with minimal_response and no_attributes.
        self.history: dict[str, list[dict[str, Any]]] = {}
        self.history_error: str | None = None
        self.history_body: Any = None  # message id → raw bytes of the answer, to send instead
        self.history_delay = 0.0
        self.compact = True
        self.trickle = False
        self.redirect_to = ""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextmanager
def running() -> Iterator[StubWebSocket]:
    """A StubWebSocket serving on a thread for the duration."""
    server = StubWebSocket()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
