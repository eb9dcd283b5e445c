"""A stub Home Assistant on 127.0.0.1: real HTTP, realistic payloads, faults on demand."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import secrets
import socket
import ssl
import string
import struct
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

from tests.stub_ha_everyday import StubEveryday
from tests.stub_ha_statistics import StubStatistics

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455's fixed key suffix

FAULT_KINDS = frozenset(
    {"401", "403", "404", "500", "slow", "slow_body", "trickle_headers", "trickle_body", "invalid_json",
     "oversized", "wrong_shape", "drop"}
)

# Body pieces are gathered into writes of about this size: few syscalls, little memory per request.
CHUNK_BYTES = 64 * 1024
OVERSIZED_BYTES = 64 * 1024 * 1024
# A slow fault's delay that outlasts any deadline a test sets (the stub lets go when it stops): a timeout the
# client reports can then only be its deadline's, whatever the machine's speed.
OUTLASTS_ANY_DEADLINE = 60.0


class StubRequest(NamedTuple):
    """One request as the stub received it; `path` is percent-decoded and without the query."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


@dataclass(frozen=True)
class Fault:
    """A misbehaviour to apply to requests whose path starts with `path_prefix` (all when None)."""

    kind: str
    path_prefix: str | None = None
    delay: float = 0.0

    def matches(self, path: str) -> bool:
        return self.path_prefix is None or path.startswith(self.path_prefix)


@dataclass
class _Response:
    """A response still to be written: `length` None means a chunked (streamed) body."""

    status: int
    body: Iterable[bytes]
    length: int | None
    content_type: str = "application/json"


def _dumps(payload: Any) -> bytes:
    """Compact JSON, as HA's orjson writes it."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def _json_response(status: int, payload: Any) -> _Response:
    raw = _dumps(payload)
    return _Response(status, [raw], len(raw))


def _text_response(status: int, text: str) -> _Response:
    raw = text.encode()
    return _Response(status, [raw], len(raw), "text/plain; charset=utf-8")


def _iso(moment: datetime) -> str:
    """Home Assistant's own timestamp format: isoformat() of an aware UTC datetime (+00:00)."""
    return moment.astimezone(UTC).isoformat()


def _parse_ha_datetime(text: str) -> datetime | None:
    """Like HA's dt_util.parse_datetime: ISO 8601, naive means UTC; None when unparsable."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _fake_jwt() -> str:
    """A token shaped like a HA long-lived access token (a HS256 JWT), random each time."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(b'{"alg":"HS256","typ":"JWT"}')
    now = int(time.time())
    payload = b64(
        json.dumps({"iss": secrets.token_hex(16), "iat": now, "exp": now + 315360000}).encode()
    )
    return f"{header}.{payload}.{b64(secrets.token_bytes(32))}"


def _context_id(rng: random.Random) -> str:
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # ULID's Crockford base32
    return "".join(rng.choice(alphabet) for _ in range(26))


def _chunked(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """Gather small pieces into ~CHUNK_BYTES writes."""
    buffer: list[bytes] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= CHUNK_BYTES:
            yield b"".join(buffer)
            buffer.clear()
            size = 0
    if buffer:
        yield b"".join(buffer)


def default_states(now: datetime, rng: random.Random) -> list[dict[str, Any]]:
    """About fifteen entities across domains, in Home Assistant's /api/states shape."""
    spec: list[tuple[str, str, dict[str, Any], float]] = [
        ("sensor.living_room_temperature", "21.4", {"state_class": "measurement",
         "unit_of_measurement": "°C", "device_class": "temperature",
         "friendly_name": "Living room temperature"}, 0.2),
        ("sensor.outdoor_humidity", "63", {"state_class": "measurement", "unit_of_measurement": "%",
         "device_class": "humidity", "friendly_name": "Outdoor humidity"}, 0.5),
        ("sensor.energy_consumption", "4521.37", {"state_class": "total_increasing",
         "unit_of_measurement": "kWh", "device_class": "energy",
         "friendly_name": "Energy consumption"}, 0.1),
        ("binary_sensor.front_door", "off", {"device_class": "door", "friendly_name": "Front door"}, 3.0),
        ("binary_sensor.kitchen_window", "off", {"device_class": "window",
         "friendly_name": "Kitchen window"}, 20.0),
        ("binary_sensor.hallway_motion", "on", {"device_class": "motion",
         "friendly_name": "Hallway motion"}, 0.05),
        ("light.living_room", "on", {"supported_color_modes": ["brightness"], "color_mode": "brightness",
         "brightness": 180, "friendly_name": "Living room light", "supported_features": 32}, 2.0),
        ("light.bedroom", "off", {"supported_color_modes": ["color_temp"], "color_mode": None,
         "brightness": None, "friendly_name": "Bedroom light", "supported_features": 44}, 9.0),
        ("switch.coffee_machine", "off", {"friendly_name": "Coffee machine"}, 5.0),
        ("lock.front_door", "locked", {"friendly_name": "Front door lock", "supported_features": 0}, 1.0),
        ("person.alex", "home", {"editable": True, "id": "alex", "device_trackers": ["device_tracker.alex_phone"],
         "latitude": 52.3731, "longitude": 4.8922, "gps_accuracy": 14, "source": "device_tracker.alex_phone",
         "user_id": secrets.token_hex(16), "friendly_name": "Alex"}, 4.0),
        ("camera.driveway", "idle", {"access_token": secrets.token_hex(32), "frontend_stream_type": "hls",
         "entity_picture": "/api/camera_proxy/camera.driveway?token=" + secrets.token_hex(32),
         "friendly_name": "Driveway", "supported_features": 2}, 30.0),
        ("cover.garage_door", "closed", {"current_position": 0, "device_class": "garage",
         "friendly_name": "Garage door", "supported_features": 15}, 11.0),
        ("climate.thermostat", "heat", {"hvac_modes": ["off", "heat", "auto"], "min_temp": 7, "max_temp": 35,
         "current_temperature": 21.4, "temperature": 21.5, "hvac_action": "heating",
         "friendly_name": "Thermostat", "supported_features": 387}, 6.0),
        ("sensor.garden_soil_moisture", "unavailable", {"unit_of_measurement": "%", "device_class": "moisture",
         "friendly_name": "Garden soil moisture"}, 48.0),
        ("sensor.washing_machine_status", "unknown", {"friendly_name": "Washing machine status"}, 2.5),
    ]
    states = []
    for entity_id, state, attributes, hours_ago in spec:
        changed = now - timedelta(hours=hours_ago, microseconds=rng.randrange(1_000_000))
        states.append({
            "entity_id": entity_id,
            "state": state,
            "attributes": attributes,
            "last_changed": _iso(changed),
            "last_reported": _iso(changed),
            "last_updated": _iso(changed),
            "context": {"id": _context_id(rng), "parent_id": None, "user_id": None},
        })
    return states


def default_config() -> dict[str, Any]:
    """What /api/config answers on a HA 2025.4.4 that is running."""
    return {
        "allowlist_external_dirs": ["/config/www", "/media"],
        "allowlist_external_urls": [],
        "components": ["api", "binary_sensor", "camera", "climate", "cover", "history", "http",
                       "light", "lock", "person", "recorder", "sensor", "switch", "websocket_api"],
        "config_dir": "/config",
        "config_source": "storage",
        "country": "NL",
        "currency": "EUR",
        "debug": False,
        "elevation": 2,
        "external_url": None,
        "internal_url": None,
        "language": "en",
        "latitude": 52.3731,
        "location_name": "Home",
        "longitude": 4.8922,
        "radius": 100,
        "recovery_mode": False,
        "safe_mode": False,
        "state": "RUNNING",
        "time_zone": "Europe/Amsterdam",
        "unit_system": {"length": "km", "accumulated_precipitation": "mm", "area": "m²", "mass": "g",
                        "pressure": "Pa", "temperature": "°C", "volume": "L", "wind_speed": "m/s"},
        "version": "2025.4.4",
        "whitelist_external_dirs": ["/config/www", "/media"],
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: StubHomeAssistant

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake happens here, in the connection's own thread, so a client that rejects
        # the certificate costs that thread an exception and not the accept loop.
        if self.stub._tls is not None:
            try:
                request = self.stub._tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                return
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up early are expected here (byte caps, deadlines, drops)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    server_version = "Python/3.13 aiohttp/3.11.16"  # what HA 2025.4 answers with

    def version_string(self) -> str:
        return self.server_version

    def setup(self) -> None:
        super().setup()
        self.server.stub._connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.stub._connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def do_OPTIONS(self) -> None:
        self._serve("OPTIONS")

    def _serve(self, method: str) -> None:
        stub = self.server.stub
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        stub.requests.append(StubRequest(method, path, query, dict(self.headers.items())))
        stub._guard(f"{method} {self.path}", "\n".join(f"{k}: {v}" for k, v in self.headers.items()))
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            stub._guard(f"{method} {self.path} body", self.rfile.read(length).decode("utf-8", "replace"))
        if (path == "/api/websocket" and (stub.registries is not None or stub.statistics is not None
                                          or stub.logbook is not None or stub.everyday is not None)
                and self.headers.get("Upgrade", "").lower() == "websocket"):
            self._websocket()
            return
        fault = stub._fault_for(path)
        if fault is not None and fault.kind == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if fault is not None and fault.kind == "slow":
            stub._stopping.wait(fault.delay)
        if fault is not None and fault.kind in ("trickle_headers", "trickle_body"):
            self._trickle(fault)
            return
        response = stub._respond(method, path, query, self.headers.get("Authorization"), fault)
        self._write(response, head=method == "HEAD",
                    pace=fault.delay if fault is not None and fault.kind == "slow_body" else 0.0)

    # --- the WebSocket API: auth, then the three registry lists the picker asks for ---------

    def _websocket(self) -> None:
        """Home Assistant's WebSocket protocol, as far as the Console speaks it (RFC 6455 framing by hand)."""
        stub = self.server.stub
        self.close_connection = True
        if stub.ws_redirect:
            # A proxy or an impostor sending the WebSocket elsewhere: a client that follows it takes its
            # `auth` message (the token) to another origin.
            self.wfile.write(f"HTTP/1.1 302 Found\r\nLocation: {stub.ws_redirect}\r\nContent-Length: 0\r\n\r\n"
                             .encode())
            return
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        self.wfile.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         + f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode())
        self._ws_send({"type": "auth_required", "ha_version": stub.config["version"]})
        try:
            auth = self._ws_receive()
            if auth is None:
                return
            if auth.get("type") != "auth" or (auth.get("access_token") != stub.token and not stub.rogue):
                self._ws_send({"type": "auth_invalid", "message": "Invalid access token or password"})
                return
            self._ws_send({"type": "auth_ok", "ha_version": stub.config["version"]})
            late: list[dict[str, Any]] = []
            while (message := self._ws_receive()) is not None:
                if stub.statistics is not None and message.get("type") in stub.statistics.COMMANDS:
                    self._ws_statistics(message)
                    for answer in late:
                        self._ws_send({"id": 999, "type": "event", "event": {}})
                        self._ws_send(answer)
                    late.clear()
                    continue
                if message.get("type") == "get_config":  # what /api/config answers
                    config_answer = {"id": message.get("id"), "type": "result", "success": True,
                                     "result": stub.config}
                    if stub.ws_config_late:
                        # Answered after the next command's answer and an event, as Home Assistant may.
                        late.append(config_answer)
                    else:
                        self._ws_send(config_answer)
                    continue
                if stub.everyday is not None and message.get("type") in stub.everyday.COMMANDS:
                    for answer in stub.everyday.answer(message):
                        self._ws_send(answer)
                    continue
                if message.get("type") == "logbook/get_events" and stub.logbook is not None:
                    self._ws_send({"id": message.get("id"), "type": "result", "success": True,
                                   "result": stub.logbook_entries(message)})
                    continue
                result = (stub.registries or {}).get(str(message.get("type")))
                if result is None:
                    # As Home Assistant answers a command it does not have (history here: REST serves it).
                    self._ws_send({"id": message.get("id"), "type": "result", "success": False,
                                   "error": {"code": "unknown_command", "message": "Unknown command."}})
                    continue
                self._ws_send({"id": message.get("id"), "type": "result", "success": True, "result": result})
        except (OSError, ValueError):
            return

    def _ws_statistics(self, message: dict[str, Any]) -> None:
        """The recorder's statistics commands (tests/stub_ha_statistics.py); a raw answer when a test set one."""
        statistics = self.server.stub.statistics
        assert statistics is not None
        if statistics.raw_answer is not None and message.get("type") == "recorder/statistics_during_period":
            self._ws_send_payload(statistics.raw_answer(int(message.get("id") or 0)))
            return
        success, answer = statistics.answer(message)
        self._ws_send({"id": message.get("id"), "type": "result", "success": success,
                       ("result" if success else "error"): answer})

    def _ws_send(self, message: dict[str, Any]) -> None:
        self._ws_send_payload(_dumps(message))

    def _ws_send_payload(self, payload: bytes) -> None:
        size = len(payload)
        if size < 126:
            header = bytes([0x81, size])
        elif size < 65536:
            header = bytes([0x81, 126]) + struct.pack("!H", size)
        else:
            header = bytes([0x81, 127]) + struct.pack("!Q", size)
        self.wfile.write(header + payload)
        self.wfile.flush()

    def _ws_receive(self) -> dict[str, Any] | None:
        """The next text message from the client (masked, as clients must), or None when it closes."""
        stub = self.server.stub
        head = self.rfile.read(2)
        if len(head) < 2:
            return None
        opcode, length = head[0] & 0x0F, head[1] & 0x7F
        if length == 126:
            length = struct.unpack("!H", self.rfile.read(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", self.rfile.read(8))[0]
        mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
        if opcode == 0x8:
            return None
        text = payload.decode("utf-8", "replace")
        stub.ws_messages.append(text)
        stub._guard("WebSocket message", text)
        message = json.loads(text)
        return message if isinstance(message, dict) else {}

    def _trickle(self, fault: Fault) -> None:
        """One byte every `delay` seconds: of the status line and headers, or of a chunked body's framing."""
        stub = self.server.stub
        if fault.kind == "trickle_headers":
            data = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]"
        else:
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            self.wfile.write(head)
            data = b"".join(b"1\r\n%s\r\n" % bytes([c]) for c in b'[{"entity_id": "a.b", "state": "x"}]')
            data += b"0\r\n\r\n"
        self.close_connection = True
        try:
            for byte in data:
                if stub._stopping.wait(fault.delay):
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
        except OSError:
            pass

    def _write(self, response: _Response, *, head: bool, pace: float) -> None:
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            if response.length is not None:
                self.send_header("Content-Length", str(response.length))
            else:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if head:
                return
            body: Iterable[bytes] = response.body
            if pace:
                body = _paced(body, pace, self.server.stub._stopping)
            for piece in body:
                if not piece:
                    continue
                if response.length is None:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                else:
                    self.wfile.write(piece)
                self.server.stub.body_bytes_written += len(piece)
            if response.length is None:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True


def _paced(body: Iterable[bytes], seconds: float, stopping: threading.Event) -> Iterator[bytes]:
    """The body cut into small pieces spread over `seconds`: headers arrive at once, the body trickles."""
    data = b"".join(body)
    pieces = 20
    step = max(1, -(-len(data) // pieces))
    for offset in range(0, len(data), step):
        if stopping.wait(seconds / pieces):
            return
        yield data[offset:offset + step]


class StubHomeAssistant:
    """A stub Home Assistant 2025.4 REST API on 127.0.0.1, started on enter and stopped on exit."""

    def __init__(self, *, certfile: str | None = None, keyfile: str | None = None, seed: int = 0,
                 port: int = 0) -> None:
        self._rng = random.Random(seed)
        # 0: any free port. A fixed one serves a data dir whose token is bound to that origin (tests/fixtures).
        self._port = port
        now = datetime.now(UTC)
        self.token: str = _fake_jwt()
        self.states: list[dict[str, Any]] = default_states(now, self._rng)
        self.config: dict[str, Any] = default_config()
        self.history: dict[str, list[tuple[datetime, str]]] = {}
        self.requests: list[StubRequest] = []
        # Every text message a WebSocket client sent, the `auth` message with its token among them.
        self.ws_messages: list[str] = []
        # Registry lists the WebSocket answers with (command -> result); None: no WebSocket API (404), as
        # most tests expect. `serve_registries()` turns it on.
        self.registries: dict[str, Any] | None = None
        # The recorder's long-term statistics (issue 19); None: not served. `serve_statistics()` turns them on
        # (and the WebSocket with them).
        self.statistics: StubStatistics | None = None
        # The WebSocket answers get_config only after the next command's answer (answers in any order).
        self.ws_config_late = False
        # Logbook entries per entity as Home Assistant 2025.4's `logbook/get_events` answers them ("when" in
        # epoch seconds); None: no logbook over the WebSocket. `serve_logbook()` turns it on.
        self.logbook: dict[str, list[dict[str, Any]]] | None = None
        # Calendars (REST), to-do lists and forecasts (WebSocket) of issue 28; None: not served.
        # `serve_everyday()` turns them on.
        self.everyday: StubEveryday | None = None
        # Tokens of other Home Assistants: this stub must never see one (see `foreign_tokens_seen`).
        self.foreign_tokens: set[str] = set()
        # Where the WebSocket handshake redirects to (302), when set.
        self.ws_redirect: str | None = None
        # An impostor on the network: accepts any token and echoes it back in /api/config's location_name.
        self.rogue = False
        self.foreign_tokens_seen: list[str] = []
        # Bytes of answer bodies written to a client so far: a client that stops reading stops them.
        self.body_bytes_written = 0
        self._faults: list[Fault] = []
        self._overrides: dict[str, _Override] = {}
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._tls: ssl.SSLContext | None = None
        if certfile:
            self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._tls.load_cert_chain(certfile, keyfile)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.base_url = ""
        self._seed_history(now)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> StubHomeAssistant:
        """Listen on loopback (an ephemeral port unless one was given) and serve in a daemon thread."""
        server = _Server(("127.0.0.1", self._port), _Handler)
        server.stub = self
        self._server = server
        self._stopping.clear()
        scheme = "https" if self._tls else "http"
        self.base_url = f"{scheme}://127.0.0.1:{server.server_address[1]}"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="stub-ha", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and hang up on every open connection."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        for conn in list(self._connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server = None

    def __enter__(self) -> StubHomeAssistant:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- test controls ---------------------------------------------------------------------

    def fault(self, kind: str, path_prefix: str | None = None, delay: float = 0.0) -> None:
        """Misbehave on matching paths until clear_faults(); the first matching fault wins."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; one of {sorted(FAULT_KINDS)}")
        self._faults.append(Fault(kind, path_prefix, delay))

    def clear_faults(self) -> None:
        """Behave again."""
        self._faults.clear()

    def override(self, path: str, body: bytes | Callable[[], Iterable[bytes]], *, status: int = 200,
                 content_type: str = "application/json") -> None:
        """Answer GET `path` (exact, decoded, no query) with `body`; a callable body is streamed chunked."""
        self._overrides[path] = _Override(body, status, content_type)

    def serve_registries(self, areas: dict[str, str] | None = None) -> None:
        """Answer the WebSocket API, with `areas` (entity_id -> area name) in the registries."""
        areas = areas or {}
        names = sorted(set(areas.values()))
        self.registries = {
            "config/area_registry/list": [{"area_id": f"area_{i}", "name": name} for i, name in enumerate(names)],
            "config/entity_registry/list": [
                {"entity_id": entity_id, "area_id": f"area_{names.index(name)}", "device_id": None}
                for entity_id, name in areas.items()
            ],
            "config/device_registry/list": [],
        }

    def serve_statistics(self, *, seeded: bool = True) -> StubStatistics:
        """Serve the recorder's statistics over the WebSocket: (seeded) two years of hourly rows for the living
        room's temperature (a measurement, °C) and an energy meter (kWh); more through what it returns."""
        if self.statistics is None:
            self.statistics = StubStatistics()
            if seeded:
                self.statistics.seed_year("sensor.living_room_temperature", "measurement", unit="°C")
                self.statistics.seed_year("sensor.energy_consumption", "meter", unit="kWh", seed=1)
        return self.statistics
    def serve_everyday(self, *, seeded: bool = True) -> StubEveryday:
        """Serve calendars, to-do lists and forecasts: (seeded) calendar.family, todo.shopping_list, weather.home."""
        if self.everyday is None:
            self.everyday = StubEveryday()
            if seeded:
                self.everyday.seed(datetime.now(UTC))
                moment = _iso(datetime.now(UTC))
                self.states.append({"entity_id": "weather.home", "state": "rainy", "last_changed": moment,
                                    "last_updated": moment,
                                    "context": {"id": "x", "parent_id": None, "user_id": None},
                                    "attributes": {"friendly_name": "Home", "temperature_unit": "°C",
                                                   "precipitation_unit": "mm", "wind_speed_unit": "km/h",
                                                   "supported_features": 3}})
        return self.everyday

    def serve_logbook(self, entries: dict[str, list[dict[str, Any]]] | None = None) -> None:
        """Answer `logbook/get_events` over the WebSocket with `entries` (entity_id -> its entries, in time order)."""
        self.logbook = dict(entries or {})

    def logbook_entries(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """The entries of the asked entities in [start_time, end_time), as Home Assistant selects them."""
        start = _parse_ha_datetime(str(message.get("start_time")))
        end = _parse_ha_datetime(str(message.get("end_time")))
        if start is None or end is None:
            return []
        low, high = start.timestamp(), end.timestamp()
        asked = message.get("entity_ids") or []
        found = [entry for entity_id in asked for entry in (self.logbook or {}).get(entity_id, [])
                 if low <= entry["when"] < high]
        return sorted(found, key=lambda entry: entry["when"])

    def refuse_tokens_of(self, *others: StubHomeAssistant) -> None:
        """Record it as a violation whenever a request or WebSocket message holds another stub's token."""
        self.foreign_tokens.update(other.token for other in others)

    def _guard(self, where: str, text: str) -> None:
        if any(token in text for token in self.foreign_tokens):
            # Only where it was seen: the token itself must not reach a test report either.
            self.foreign_tokens_seen.append(where)

    def requests_to(self, path_prefix: str) -> list[StubRequest]:
        """The recorded requests whose path starts with `path_prefix`."""
        return [r for r in self.requests if r.path.startswith(path_prefix)]

    def set_state(self, entity_id: str, state: str, attributes: dict[str, Any] | None = None,
                  when: datetime | None = None) -> dict[str, Any]:
        """Create or change an entity's state, and record the change in its history."""
        when = when or datetime.now(UTC)
        existing = next((s for s in self.states if s["entity_id"] == entity_id), None)
        if existing is None:
            existing = {"entity_id": entity_id, "attributes": {}}
            self.states.append(existing)
        if attributes is not None:
            existing["attributes"] = attributes
        if existing.get("state") != state:
            existing["last_changed"] = _iso(when)
        existing.update(state=state, last_updated=_iso(when), last_reported=_iso(when),
                        context={"id": _context_id(self._rng), "parent_id": None, "user_id": None})
        self.add_history(entity_id, [(when, state)])
        return existing

    def add_history(self, entity_id: str, rows: Iterable[tuple[datetime, str]]) -> None:
        """Record state rows for an entity, kept sorted by time."""
        series = self.history.setdefault(entity_id, [])
        last = series[-1][0] if series else None
        added = list(rows)
        series.extend(added)
        if added and (last is not None and added[0][0] < last or
                      any(a[0] > b[0] for a, b in zip(added, added[1:], strict=False))):
            series.sort(key=lambda row: row[0])

    def add_numeric_history(self, entity_id: str, count: int, start: datetime, end: datetime, seed: int = 0,
                            *, low: float = 15.0, high: float = 25.0, decimals: int = 2,
                            unavailable_every: int = 0) -> None:
        """Quickly record `count` numeric rows (a bounded random walk) between `start` and `end`.

        Consecutive values always differ, so every row is a change; every `unavailable_every`-th row
        (when non-zero) is `unavailable` instead.
        """
        rng = random.Random(seed)
        span_us = int((end - start) / timedelta(microseconds=1))
        step = span_us / max(count, 1)
        value = (low + high) / 2
        previous = ""
        rows: list[tuple[datetime, str]] = []
        fmt = f"{{:.{decimals}f}}"
        for i in range(count):
            offset = int(i * step + rng.random() * step * 0.9)
            if unavailable_every and i % unavailable_every == unavailable_every - 1:
                state = "unavailable"
            else:
                value = min(high, max(low, value + rng.gauss(0, (high - low) / 50)))
                state = fmt.format(value)
                if state == previous:
                    nudge = 10 ** -decimals
                    value = value + nudge if value + nudge <= high else value - nudge
                    state = fmt.format(value)
            rows.append((start + timedelta(microseconds=offset), state))
            previous = state
        self.add_history(entity_id, rows)

    # --- serving ---------------------------------------------------------------------------

    def _fault_for(self, path: str) -> Fault | None:
        return next((f for f in list(self._faults) if f.matches(path)), None)

    def _respond(self, method: str, path: str, query: dict[str, list[str]], authorization: str | None,
                 fault: Fault | None) -> _Response:
        if fault is not None and fault.kind in ("401", "403", "404", "500"):
            text = {"401": "401: Unauthorized", "403": "403: Forbidden", "404": "404: Not Found",
                    "500": "500 Internal Server Error\n\nServer got itself in trouble"}[fault.kind]
            return _text_response(int(fault.kind), text)
        if fault is not None and fault.kind == "invalid_json":
            raw = b'[{"entity_id": "sensor.living_room_temperature", "state": "21.'
            return _Response(200, [raw], len(raw))
        if fault is not None and fault.kind == "oversized":
            return _Response(200, _oversized_body(), None)
        if self.rogue and path == "/api/config":
            # What an impostor does with a token it is sent: print it back where the Console shows a name.
            return _json_response(200, {**self.config, "location_name": str(authorization)})
        if authorization != f"Bearer {self.token}" and not self.rogue:
            return _text_response(401, "401: Unauthorized")
        if method not in ("GET", "HEAD"):
            return _json_response(405, {"message": "Method not allowed."})
        response = self._route(path, query)
        if fault is not None and fault.kind == "wrong_shape" and response.status == 200:
            # Valid JSON, wrong type: an object where a list belongs and the other way round.
            wants_list = path == "/api/states" or path.startswith("/api/history/")
            return _json_response(200, {"message": "API running."} if wants_list else ["API running."])
        return response

    def _route(self, path: str, query: dict[str, list[str]]) -> _Response:
        if path in self._overrides:
            return self._overrides[path].response()
        if path == "/api/":
            return _json_response(200, {"message": "API running."})
        if path == "/api/config":
            return _json_response(200, self.config)
        if path == "/api/states":
            return _json_response(200, self.states)
        if path.startswith("/api/states/"):
            entity_id = path[len("/api/states/"):]
            state = next((s for s in self.states if s["entity_id"] == entity_id), None)
            if state is None:
                return _json_response(404, {"message": "Entity not found."})
            return _json_response(200, state)
        if path.startswith("/api/calendars/") and self.everyday is not None:
            status, body = self.everyday.calendar(path[len("/api/calendars/"):], query)
            return _json_response(status, body) if body is not None else _text_response(status, "")
        if path == "/api/history/period" or path.startswith("/api/history/period/"):
            return self._history(path[len("/api/history/period/"):], query)
        return _text_response(404, "404: Not Found")

    def _history(self, start_text: str, query: dict[str, list[str]]) -> _Response:
        """GET /api/history/period/<start> as HA 2025.4's history view answers it."""
        now = datetime.now(UTC)
        if start_text:
            start = _parse_ha_datetime(start_text)
            if start is None:
                return _json_response(400, {"message": "Invalid datetime"})
        else:
            start = now - timedelta(days=1)
        end = start + timedelta(days=1)
        if "end_time" in query:
            # A raw "+00:00" arrives as " 00:00" and fails here, exactly as it does in HA.
            parsed_end = _parse_ha_datetime(query["end_time"][0])
            if parsed_end is None:
                return _json_response(400, {"message": "Invalid end_time"})
            end = parsed_end
        if "filter_entity_id" not in query:
            return _json_response(400, {"message": "filter_entity_id is missing"})
        entity_ids = [e.strip().lower() for e in query["filter_entity_id"][0].split(",")]
        if not all(_valid_entity_id(e) for e in entity_ids):
            return _json_response(400, {"message": "Invalid filter_entity_id"})
        if start > now:
            return _json_response(200, [])
        minimal = "minimal_response" in query
        no_attributes = "no_attributes" in query
        series = [(e, self._window_rows(e, start, end)) for e in entity_ids if self._has_rows(e, start, end)]
        attributes = {s["entity_id"]: s.get("attributes", {}) for s in self.states}
        pieces = _history_pieces(series, minimal, no_attributes, attributes)
        return _Response(200, _chunked(pieces), None)

    def _has_rows(self, entity_id: str, start: datetime, end: datetime) -> bool:
        """Whether HA would list the entity at all: a state before the start or a row inside."""
        series = self.history.get(entity_id, [])
        first = bisect_right(series, start, key=lambda row: row[0])
        return first > 0 or bisect_left(series, end, key=lambda row: row[0], lo=first) > first

    def _window_rows(self, entity_id: str, start: datetime, end: datetime) -> Iterator[tuple[datetime, str]]:
        """The start-time state (clamped to `start`, as HA does) and every row in (start, end), lazily."""
        series = self.history.get(entity_id, [])
        first = bisect_right(series, start, key=lambda row: row[0])
        last = bisect_left(series, end, key=lambda row: row[0], lo=first)
        if first > 0:
            yield start, series[first - 1][1]
        for index in range(first, last):  # by index: no copy of a 200,000-row slice per request
            yield series[index]

    # --- canned history --------------------------------------------------------------------

    def _seed_history(self, now: datetime) -> None:
        """A week of front door openings and a day of hourly temperatures, reproducible."""
        rng = self._rng
        moment = now - timedelta(days=7, hours=1)
        door: list[tuple[datetime, str]] = []
        while True:
            moment += timedelta(minutes=rng.randrange(60, 900), seconds=rng.random() * 60)
            if moment >= now - timedelta(hours=3):
                break
            door.append((moment, "on"))
            door.append((moment + timedelta(seconds=rng.randrange(5, 90)), "off"))
        self.add_history("binary_sensor.front_door", door)
        temperature: list[tuple[datetime, str]] = []
        for hours in range(25, 0, -1):
            value = 20.0 + 2.0 * rng.random()
            temperature.append((now - timedelta(hours=hours, seconds=rng.random() * 60), f"{value:.1f}"))
        temperature.append((now - timedelta(minutes=12), "21.4"))
        self.add_history("sensor.living_room_temperature", temperature)


@dataclass(frozen=True)
class _Override:
    body: bytes | Callable[[], Iterable[bytes]]
    status: int
    content_type: str

    def response(self) -> _Response:
        if isinstance(self.body, bytes):
            return _Response(self.status, [self.body], len(self.body), self.content_type)
        return _Response(self.status, _chunked(self.body()), None, self.content_type)


_ENTITY_CHARS = frozenset(string.ascii_lowercase + string.digits + "_")


def _valid_entity_id(entity_id: str) -> bool:
    domain, dot, object_id = entity_id.partition(".")
    return bool(dot and domain and object_id and set(domain) <= _ENTITY_CHARS and set(object_id) <= _ENTITY_CHARS)


def _history_pieces(series: list[tuple[str, Iterator[tuple[datetime, str]]]], minimal: bool,
                    no_attributes: bool, attributes: dict[str, dict[str, Any]]) -> Iterator[bytes]:
    """The history body `[[...], ...]` serialised row by row, never whole in memory."""
    yield b"["
    for index, (entity_id, rows) in enumerate(series):
        attrs = {} if no_attributes else attributes.get(entity_id, {})
        yield b"[" if index == 0 else b",["

        def full(moment: datetime, state: str, entity_id: str = entity_id,
                 attrs: dict[str, Any] = attrs) -> bytes:
            stamp = _iso(moment)
            return _dumps({"entity_id": entity_id, "state": state, "attributes": attrs,
                           "last_changed": stamp, "last_updated": stamp})

        if not minimal:
            for i, (moment, state) in enumerate(rows):
                yield (b"," if i else b"") + full(moment, state)
        else:
            # Only state changes survive; the first and last entries are full states, the ones
            # between just {"state", "last_changed"}.
            kept: Iterator[tuple[datetime, str]] = _dedupe(rows)
            pending = next(kept, None)
            if pending is not None:
                yield full(*pending)
                pending = next(kept, None)
                while pending is not None:
                    following = next(kept, None)
                    moment, state = pending
                    if following is None:
                        yield b"," + full(moment, state)
                    else:
                        yield b',{"state":%s,"last_changed":"%s"}' % (_dumps(state), _iso(moment).encode())
                    pending = following
        yield b"]"
    yield b"]"


def _dedupe(rows: Iterable[tuple[datetime, str]]) -> Iterator[tuple[datetime, str]]:
    previous: str | None = None
    for moment, state in rows:
        if state != previous:
            yield moment, state
            previous = state


def _oversized_body() -> Iterator[bytes]:
    """A valid but enormous /api/states-like array, generated as it is sent."""
    row = _dumps({"entity_id": "sensor.padding", "state": "x" * 200, "attributes": {},
                  "last_changed": "2025-04-01T00:00:00+00:00", "last_updated": "2025-04-01T00:00:00+00:00"})
    block = b",".join([row] * (CHUNK_BYTES // len(row) + 1))
    yield b"["
    sent = 0
    while sent < OVERSIZED_BYTES:
        yield (b"," if sent else b"") + block
        sent += len(block)
    yield b"]"
