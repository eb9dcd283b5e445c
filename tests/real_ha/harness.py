"""A real Home Assistant core for tests: install, configure, start, onboard, drive and stop it.

Everything here listens on and talks to 127.0.0.1 only. Every wait is bounded; a Home Assistant
that does not come up raises `HomeAssistantStartError` with the tail of its log instead of hanging.
The write helpers (`call_service`, `set_state`, `load_history`) exist to arrange test scenes: they
belong to this harness, never to console_ha, which only reads.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import hashlib
import ipaddress
import json
import logging
import os
import secrets
import signal
import socket
import sqlite3
import struct
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import requests

logger = logging.getLogger(__name__)

HA_VERSION = "2025.4.4"
LOCATION_NAME = "Console Test Home"
REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install-ha.sh"
INSTALL_TIMEOUT = 900.0
START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0
HTTP_TIMEOUT = 10.0
LOG_TAIL_LINES = 40
RECORDER_DB = "home-assistant_v2.db"

T = TypeVar("T")


class HomeAssistantStartError(RuntimeError):
    """Home Assistant could not be installed, started or onboarded; the message ends with its log."""


@dataclass(frozen=True)
class ExpectedEntity:
    """An entity the configuration creates, and the area (by name) the harness assigns it to."""

    entity_id: str
    area: str | None


AREAS: tuple[str, ...] = ("Living Room", "Kitchen", "Hallway")

ENTITIES: tuple[ExpectedEntity, ...] = (
    ExpectedEntity("sensor.living_room_temperature", "Living Room"),
    ExpectedEntity("light.living_room_lamp", "Living Room"),
    ExpectedEntity("sensor.kitchen_temperature", "Kitchen"),
    ExpectedEntity("sensor.kitchen_humidity", "Kitchen"),
    ExpectedEntity("binary_sensor.kitchen_window", "Kitchen"),
    ExpectedEntity("switch.coffee_machine", "Kitchen"),
    ExpectedEntity("sensor.coffee_machine_power", "Kitchen"),
    ExpectedEntity("binary_sensor.front_door", "Hallway"),
    ExpectedEntity("binary_sensor.hallway_motion", "Hallway"),
    ExpectedEntity("counter.doorbell_rings", "Hallway"),
    ExpectedEntity("sensor.garage_temperature", None),
    ExpectedEntity("timer.laundry", None),
    ExpectedEntity("input_select.house_mode", None),
    ExpectedEntity("input_number.living_room_temperature_input", None),
    ExpectedEntity("input_number.kitchen_temperature_input", None),
    ExpectedEntity("input_number.kitchen_humidity_input", None),
    ExpectedEntity("input_boolean.front_door_open", None),
    ExpectedEntity("input_boolean.kitchen_window_open", None),
    ExpectedEntity("input_boolean.hallway_motion_detected", None),
    ExpectedEntity("input_boolean.living_room_lamp_power", None),
    ExpectedEntity("input_boolean.coffee_machine_power", None),
    # issue 18, part B: camera-like entities carrying a token in their attributes
    ExpectedEntity("image.driveway_snapshot", None),
    ExpectedEntity("camera.driveway_camera", None),
)

UNAVAILABLE_ENTITY = "sensor.garage_temperature"

_CORE_YAML = """\
# Written by tests/real_ha/harness.py. No default_config: it pulls integrations that pip-install
# at run time. Everything listens on 127.0.0.1.
homeassistant:
  name: {name}
  latitude: 52.3731
  longitude: 4.8922
  elevation: 2
  unit_system: metric
  time_zone: Europe/Amsterdam
  currency: EUR
  country: NL
  language: en
  internal_url: "http://127.0.0.1:{port}"

http:
  server_host: 127.0.0.1
  server_port: {port}

api:
websocket_api:
history:
# get_logbook (issue 19): the logbook's WebSocket command, and the causes it reports: a person (onboarding
# makes one for the owner), an automation and a script.
logbook:
person:
recorder:
  commit_interval: 1

logger:
  default: warning

"""

# The house's own entities, after the part every core shares.
_HOUSE_YAML = """\
input_number:
  living_room_temperature_input:
    name: Living room temperature input
    min: -20
    max: 50
    step: 0.1
    initial: 21.5
    unit_of_measurement: "°C"
    mode: box
  kitchen_temperature_input:
    name: Kitchen temperature input
    min: -20
    max: 50
    step: 0.1
    initial: 22.8
    unit_of_measurement: "°C"
    mode: box
  kitchen_humidity_input:
    name: Kitchen humidity input
    min: 0
    max: 100
    step: 1
    initial: 48
    unit_of_measurement: "%"
    mode: slider

input_boolean:
  front_door_open:
    name: Front door open
    initial: false
  kitchen_window_open:
    name: Kitchen window open
    initial: true
  hallway_motion_detected:
    name: Hallway motion detected
    initial: false
  living_room_lamp_power:
    name: Living room lamp power
    initial: true
  coffee_machine_power:
    name: Coffee machine power
    initial: false
  hall_light:
    name: Hall light
    initial: false
  night_motion:
    name: Night motion
    initial: false

# The webhook trigger's integration (default_config would load it; this core has none).
webhook:

automation:
  # Driven by tests/real_ha/test_logbook_real.py only.
  - id: console_ha_test_night_hall_light
    alias: Night hall light
    triggers:
      - trigger: state
        entity_id: input_boolean.night_motion
        to: "on"
    actions:
      - action: input_boolean.turn_on
        target:
          entity_id: input_boolean.hall_light
  # Issue 30: the household's own automation that the notify plugin's POST reaches
  # (tests/real_ha/test_notify_webhook_real.py). It keeps what came as a persistent notification: the title
  # as its title, and the whole JSON body and the query's names as its message.
  - id: console_ha_test_card_waiting
    alias: A card waits on the Console
    mode: queued
    triggers:
      - trigger: webhook
        webhook_id: {notify_webhook_id}
        allowed_methods: [POST]
        local_only: true
    actions:
      - action: persistent_notification.create
        data:
          notification_id: {notify_notification_id}
          title: "{{{{ trigger.json.message }}}}"
          message: "{{{{ {{'json': trigger.json, 'query': trigger.query | list}} | to_json }}}}"

script:
  hall_light_off:
    alias: Hall light off
    sequence:
      - action: input_boolean.turn_off
        target:
          entity_id: input_boolean.hall_light

input_select:
  house_mode:
    name: House mode
    options: [Home, Away, Night, Vacation]
    initial: Home

counter:
  doorbell_rings:
    name: Doorbell rings
    initial: 0
    step: 1

timer:
  laundry:
    name: Laundry
    duration: "01:30:00"

template:
  - sensor:
      - name: Living room temperature
        unique_id: console_ha_test_living_room_temperature
        state: "{{{{ states('input_number.living_room_temperature_input') }}}}"
        unit_of_measurement: "°C"
        device_class: temperature
        state_class: measurement
      - name: Kitchen temperature
        unique_id: console_ha_test_kitchen_temperature
        state: "{{{{ states('input_number.kitchen_temperature_input') }}}}"
        unit_of_measurement: "°C"
        device_class: temperature
        state_class: measurement
      - name: Kitchen humidity
        unique_id: console_ha_test_kitchen_humidity
        state: "{{{{ states('input_number.kitchen_humidity_input') | int(0) }}}}"
        unit_of_measurement: "%"
        device_class: humidity
        state_class: measurement
      - name: Coffee machine power
        unique_id: console_ha_test_coffee_machine_power
        state: "{{{{ 1450.0 if is_state('input_boolean.coffee_machine_power', 'on') else 0.8 }}}}"
        unit_of_measurement: "W"
        device_class: power
        state_class: measurement
      - name: Garage temperature
        unique_id: console_ha_test_garage_temperature
        state: "{{{{ 11.5 }}}}"
        availability: "{{{{ false }}}}"
        unit_of_measurement: "°C"
        device_class: temperature
        state_class: measurement
    binary_sensor:
      - name: Front door
        unique_id: console_ha_test_front_door
        state: "{{{{ is_state('input_boolean.front_door_open', 'on') }}}}"
        device_class: door
      - name: Kitchen window
        unique_id: console_ha_test_kitchen_window
        state: "{{{{ is_state('input_boolean.kitchen_window_open', 'on') }}}}"
        device_class: window
      - name: Hallway motion
        unique_id: console_ha_test_hallway_motion
        state: "{{{{ is_state('input_boolean.hallway_motion_detected', 'on') }}}}"
        device_class: motion
    light:
      - name: Living room lamp
        unique_id: console_ha_test_living_room_lamp
        state: "{{{{ is_state('input_boolean.living_room_lamp_power', 'on') }}}}"
        turn_on:
          action: input_boolean.turn_on
          target:
            entity_id: input_boolean.living_room_lamp_power
        turn_off:
          action: input_boolean.turn_off
          target:
            entity_id: input_boolean.living_room_lamp_power
    switch:
      - name: Coffee machine
        unique_id: console_ha_test_coffee_machine
        state: "{{{{ is_state('input_boolean.coffee_machine_power', 'on') }}}}"
        turn_on:
          action: input_boolean.turn_on
          target:
            entity_id: input_boolean.coffee_machine_power
        turn_off:
          action: input_boolean.turn_off
          target:
            entity_id: input_boolean.coffee_machine_power
    # Issue 18, part B: camera-like entities whose entity_picture and access_token carry a live token.
    # The image's URL is fetched only when its picture is asked for (nothing here asks), and on loopback.
    image:
      - name: Driveway snapshot
        unique_id: console_ha_test_driveway_snapshot
        url: "http://127.0.0.1:9/driveway.jpg"

# Issue 18, part B: a real camera with no hardware, from a file (imported into a config entry at start).
camera:
  - platform: local_file
    name: Driveway camera
    file_path: "{config_dir}/driveway.jpg"
"""


@dataclass(frozen=True)
class Site:
    """What one core is: its location name, its entities (configuration.yaml's own part) and their areas."""

    location_name: str
    configuration: str
    entities: tuple[ExpectedEntity, ...]
    areas: tuple[str, ...]
    # Placeholders of `configuration` beyond the core's ({name}, {port}, {config_dir}), so a value a test
    # expects is written once.
    values: Mapping[str, str] = field(default_factory=dict)


# Issue 30: the house's webhook automation (above) and the persistent notification it writes.
NOTIFY_WEBHOOK_ID = "console-card-waiting-test"
NOTIFY_NOTIFICATION_ID = "console_card_waiting"

HOUSE = Site(LOCATION_NAME, _HOUSE_YAML, ENTITIES, AREAS,
             {"notify_webhook_id": NOTIFY_WEBHOOK_ID, "notify_notification_id": NOTIFY_NOTIFICATION_ID})

# Issue 29: a second core beside the house. Its living room shares an entity_id with the house's and reads
# another temperature, so a test can tell which core answered; the rest is its own.
CABIN_LOCATION_NAME = "Console Test Cabin"
CABIN_LIVING_ROOM_TEMPERATURE = "12.5"
CABIN_TEMPERATURE = "4.0"
CABIN_ONLY_ENTITY = "sensor.cabin_temperature"

_CABIN_YAML = """\
input_number:
  living_room_temperature_input:
    name: Living room temperature input
    min: -20
    max: 50
    step: 0.1
    initial: {living_room_temperature}
    unit_of_measurement: "°C"
    mode: box
  cabin_temperature_input:
    name: Cabin temperature input
    min: -40
    max: 50
    step: 0.1
    initial: {cabin_temperature}
    unit_of_measurement: "°C"
    mode: box

input_boolean:
  porch_door_open:
    name: Porch door open
    initial: false

template:
  - sensor:
      - name: Living room temperature
        unique_id: console_ha_test_cabin_living_room_temperature
        state: "{{{{ states('input_number.living_room_temperature_input') }}}}"
        unit_of_measurement: "°C"
        device_class: temperature
        state_class: measurement
      - name: Cabin temperature
        unique_id: console_ha_test_cabin_temperature
        state: "{{{{ states('input_number.cabin_temperature_input') }}}}"
        unit_of_measurement: "°C"
        device_class: temperature
        state_class: measurement
    binary_sensor:
      - name: Porch door
        unique_id: console_ha_test_cabin_porch_door
        state: "{{{{ is_state('input_boolean.porch_door_open', 'on') }}}}"
        device_class: door
"""

CABIN = Site(
    CABIN_LOCATION_NAME,
    _CABIN_YAML,
    (
        ExpectedEntity("sensor.living_room_temperature", "Living Room"),
        ExpectedEntity(CABIN_ONLY_ENTITY, None),
        ExpectedEntity("binary_sensor.porch_door", "Porch"),
        ExpectedEntity("input_number.living_room_temperature_input", None),
        ExpectedEntity("input_number.cabin_temperature_input", None),
        ExpectedEntity("input_boolean.porch_door_open", None),
    ),
    ("Living Room", "Porch"),
    {"living_room_temperature": CABIN_LIVING_ROOM_TEMPERATURE, "cabin_temperature": CABIN_TEMPERATURE},
)


def _storage_file(key: str, data: Mapping[str, Any], *, version: int) -> str:
    return json.dumps({"version": version, "minor_version": 1, "key": key, "data": data}, indent=2)


def write_config_dir(config_dir: Path, port: int, site: Site = HOUSE) -> None:
    """Write configuration.yaml (the core's part and the site's) and the .storage files that keep the first
    start offline."""
    config_dir.mkdir(parents=True, exist_ok=True)
    configuration = _CORE_YAML + site.configuration
    (config_dir / "configuration.yaml").write_text(
        configuration.format(name=site.location_name, port=port, config_dir=config_dir, **site.values),
        encoding="utf-8",
    )
    # The local_file camera's picture: a JPEG's start and end markers are enough for its file check.
    (config_dir / "driveway.jpg").write_bytes(b"\xff\xd8\xff\xd9")
    storage = config_dir / ".storage"
    storage.mkdir(exist_ok=True)
    # The core_config onboarding step sets up integrations that pip-install at run time.
    (storage / "onboarding").write_text(
        _storage_file("onboarding", {"done": ["core_config"]}, version=4), encoding="utf-8"
    )
    # Only the loopback adapter: no mDNS or discovery sockets on real interfaces.
    (storage / "core.network").write_text(
        _storage_file("core.network", {"configured_adapters": ["lo"]}, version=1), encoding="utf-8"
    )


def default_venv() -> Path:
    """Where Home Assistant's venv lives: $CONSOLE_HA_HA_VENV, else <repo>/.cache/ha-venv."""
    return Path(os.environ.get("CONSOLE_HA_HA_VENV") or REPO_ROOT / ".cache" / "ha-venv")


def install_home_assistant(venv: Path) -> Path:
    """Run scripts/install-ha.sh (a no-op when the venv is current); return the `hass` executable."""
    try:
        result = subprocess.run(
            ["bash", str(INSTALL_SCRIPT), str(venv)],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as err:
        raise HomeAssistantStartError(
            f"installing Home Assistant took over {INSTALL_TIMEOUT:.0f} s"
        ) from err
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-LOG_TAIL_LINES:])
        raise HomeAssistantStartError(
            f"scripts/install-ha.sh exited {result.returncode}:\n{tail}"
        )
    return venv / "bin" / "hass"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def utc_iso(moment: datetime) -> str:
    """An ISO 8601 UTC timestamp ending in Z (a raw '+00:00' breaks in a query string)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def distinct_series(count: int, start: float, end: float) -> list[tuple[float, str]]:
    """`count` (epoch, value) pairs evenly spread over [start, end], no two neighbours equal."""
    if count < 1:
        return []
    step = (end - start) / max(count - 1, 1)
    return [(start + i * step, f"{15 + (i % 1000) / 100:.2f}") for i in range(count)]


class WebSocketClient:
    """A minimal RFC 6455 client over a stdlib socket: JSON text frames, masked sends, pings answered."""

    _GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    def __init__(self, host: str, port: int, path: str, *, timeout: float) -> None:
        self.timeout = timeout
        self._buffer = bytearray()
        self._deadline = time.monotonic() + timeout
        self._sock = socket.create_connection((host, port), timeout=timeout)
        try:
            self._handshake(f"{host}:{port}", path)
        except BaseException:
            self._sock.close()
            raise

    def _handshake(self, host: str, path: str) -> None:
        key = base64.b64encode(os.urandom(16)).decode("ascii")
        self._sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode("ascii")
        )
        while b"\r\n\r\n" not in self._buffer:
            self._fill()
        head, _, rest = bytes(self._buffer).partition(b"\r\n\r\n")
        self._buffer = bytearray(rest)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        if status_line.split(" ")[1:2] != ["101"]:
            raise ConnectionError(f"WebSocket upgrade refused: {status_line}")
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines)
        }
        accept = base64.b64encode(hashlib.sha1((key + self._GUID).encode("ascii")).digest()).decode("ascii")
        if headers.get("sec-websocket-accept") != accept:
            raise ConnectionError("WebSocket upgrade answered with a wrong Sec-WebSocket-Accept")

    def _fill(self) -> None:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("WebSocket read timed out")
        self._sock.settimeout(remaining)
        chunk = self._sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("WebSocket closed by the server")
        self._buffer += chunk

    def _read_exact(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._fill()
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    @staticmethod
    def _mask(payload: bytes, mask: bytes) -> bytes:
        size = len(payload)
        if size == 0:
            return payload
        repeated = (mask * (size // 4 + 1))[:size]
        return (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(size, "big")

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        header = bytearray([0x80 | opcode])
        size = len(payload)
        if size < 126:
            header.append(0x80 | size)
        elif size < 1 << 16:
            header.append(0x80 | 126)
            header += struct.pack("!H", size)
        else:
            header.append(0x80 | 127)
            header += struct.pack("!Q", size)
        mask = os.urandom(4)  # RFC 6455: every client frame is masked
        self._sock.sendall(bytes(header) + mask + self._mask(payload, mask))

    def send_json(self, message: Any) -> None:
        """Send one JSON message as a text frame."""
        self._send_frame(0x1, json.dumps(message).encode("utf-8"))

    def receive_json(self, *, timeout: float | None = None) -> Any:
        """The next JSON message; TimeoutError after `timeout` (default: the client's) seconds."""
        self._deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        parts: list[bytes] = []
        while True:
            first, second = self._read_exact(2)
            fin, opcode = first & 0x80, first & 0x0F
            size = second & 0x7F
            if size == 126:
                (size,) = struct.unpack("!H", self._read_exact(2))
            elif size == 127:
                (size,) = struct.unpack("!Q", self._read_exact(8))
            mask = self._read_exact(4) if second & 0x80 else b""
            payload = self._read_exact(size)
            if mask:
                payload = self._mask(payload, mask)
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise ConnectionError(f"WebSocket closed by the server (code {code})")
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            parts.append(payload)
            if fin:
                return json.loads(b"".join(parts))

    def close(self) -> None:
        """Send a normal close frame and close the socket."""
        try:
            self._send_frame(0x8, struct.pack("!H", 1000))
        except OSError:
            pass
        self._sock.close()


class AuthInvalid(ConnectionError):
    """Home Assistant's WebSocket answered `auth_invalid`."""


class HomeAssistantWebSocket:
    """Home Assistant's WebSocket API: authenticate, then commands with increasing ids."""

    def __init__(self, base_url: str, token: str, *, timeout: float = HTTP_TIMEOUT) -> None:
        url = urlsplit(base_url)
        self._ws = WebSocketClient(
            url.hostname or "127.0.0.1", url.port or 80, "/api/websocket", timeout=timeout
        )
        self._next_id = 1
        try:
            greeting = self._ws.receive_json()
            if greeting.get("type") != "auth_required":
                raise ConnectionError(f"expected auth_required, got {greeting.get('type')!r}")
            self._ws.send_json({"type": "auth", "access_token": token})
            answer = self._ws.receive_json()
            if answer.get("type") == "auth_invalid":
                raise AuthInvalid(answer.get("message", "auth_invalid"))
            if answer.get("type") != "auth_ok":
                raise ConnectionError(f"expected auth_ok, got {answer.get('type')!r}")
            self.ha_version: str = answer.get("ha_version", "")
        except BaseException:
            self._ws.close()
            raise

    def command(self, type_: str, **data: Any) -> Any:
        """Send one command and return its result; RuntimeError when Home Assistant refuses it."""
        message_id = self._next_id
        self._next_id += 1
        self._ws.send_json({"id": message_id, "type": type_, **data})
        while True:
            answer = self._ws.receive_json()
            if answer.get("id") == message_id and answer.get("type") == "result":
                break
        if not answer.get("success"):
            raise RuntimeError(f"{type_} refused: {answer.get('error')}")
        return answer.get("result")

    def close(self) -> None:
        """Close the connection."""
        self._ws.close()

    def __enter__(self) -> HomeAssistantWebSocket:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the test process dies without stopping Home Assistant."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass(frozen=True)
class SocketInfo:
    """One socket of a process: protocol, local and remote (address, port), and whether it listens."""

    proto: str
    local: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]
    remote: tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]
    listening: bool


def _proc_address(field: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """Decode /proc/net's "hex-address:hex-port" (each 32-bit word in host, little-endian, order)."""
    address, port = field.split(":")
    raw = b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, len(address), 8))
    return ipaddress.ip_address(raw), int(port, 16)


class RealHomeAssistant:
    """One real Home Assistant core on 127.0.0.1: its venv, config dir, port, process and token."""

    def __init__(self, hass: Path, config_dir: Path, port: int | None = None, site: Site = HOUSE) -> None:
        self.hass = hass
        self.site = site
        self.config_dir = config_dir
        self.port = port or free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.token = ""
        self.entities: tuple[ExpectedEntity, ...] = site.entities
        self.area_ids: dict[str, str] = {}
        self.log_path = config_dir / "hass-console.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._http = requests.Session()
        self._http.trust_env = False  # loopback only: no proxy from the environment
        atexit.register(self.stop)

    # --- lifecycle ---------------------------------------------------------------------------

    def provision(self) -> None:
        """Write the config dir, start, onboard, create areas, assign entities and mint a token."""
        write_config_dir(self.config_dir, self.port, self.site)
        self.start()
        try:
            access_token = self._onboard()
            self._wait_running(access_token)
            self._check_entities(access_token)
            with self.websocket(access_token) as ws:
                self._assign_areas(ws)
                self.token = ws.command(
                    "auth/long_lived_access_token", client_name="console-ha tests", lifespan=3650
                )
        except (requests.RequestException, OSError, RuntimeError, KeyError) as err:
            if isinstance(err, HomeAssistantStartError):
                raise
            raise HomeAssistantStartError(
                f"provisioning failed: {err!r}; last {LOG_TAIL_LINES} log lines:\n{self.log_tail()}"
            ) from err

    @property
    def running(self) -> bool:
        """Whether the Home Assistant process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self, *, timeout: float = START_TIMEOUT) -> None:
        """Start `hass` on the config dir; return once it serves HTTP (and is RUNNING, once onboarded)."""
        if self.running:
            return
        self._launch()
        self._wait_started(time.monotonic() + timeout)

    @staticmethod
    def start_together(cores: Sequence[RealHomeAssistant], *, timeout: float = START_TIMEOUT) -> None:
        """Start several cores at once: launch every one, then wait for each, all within one `timeout`.

        Not from threads: PR_SET_PDEATHSIG signals a core when the *thread* that started it ends, so a core
        started from a worker thread dies with it.
        """
        stopped = [core for core in cores if not core.running]
        for core in stopped:
            core._launch()
        deadline = time.monotonic() + timeout
        for core in stopped:
            core._wait_started(deadline)

    def _launch(self) -> None:
        self.config_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n=== harness: starting hass at {utc_iso(datetime.now(UTC))} ===\n".encode())
            log.flush()
            self._process = subprocess.Popen(
                [str(self.hass), "--config", str(self.config_dir), "--skip-pip", "--log-no-color"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def _wait_started(self, deadline: float) -> None:
        self._wait_for(self._http_answers, deadline, "Home Assistant's HTTP server")
        if self.token:
            self._wait_running(self.token, deadline=deadline)

    def stop(self, *, timeout: float = STOP_TIMEOUT) -> None:
        """Stop Home Assistant by its PID: SIGTERM, then SIGKILL if it outlives `timeout` seconds."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            logger.warning(
                "Home Assistant (pid %d) ignored SIGTERM for %.0f s; killing it", process.pid, timeout
            )
            process.kill()
            process.wait(timeout=10)

    def restart(self) -> None:
        """Stop, then start again on the same config dir and port."""
        self.stop()
        self.start()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last `lines` lines of Home Assistant's console output."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no log written)"
        return "\n".join(text.splitlines()[-lines:])

    def _wait_for(self, probe: Callable[[], T | None], deadline: float, what: str) -> T:
        """Poll `probe` until it returns a value; raise with the log tail on timeout or exit."""
        while True:
            if self._process is None or self._process.poll() is not None:
                code = None if self._process is None else self._process.returncode
                self._process = None
                raise HomeAssistantStartError(
                    f"Home Assistant exited (code {code}) while waiting for {what}; "
                    f"last {LOG_TAIL_LINES} log lines:\n{self.log_tail()}"
                )
            value = probe()
            if value is not None:
                return value
            if time.monotonic() >= deadline:
                self.stop()
                raise HomeAssistantStartError(
                    f"timed out waiting for {what}; last {LOG_TAIL_LINES} log lines:\n{self.log_tail()}"
                )
            time.sleep(0.25)

    def _http_answers(self) -> bool | None:
        try:
            self._http.get(f"{self.base_url}/api/onboarding", timeout=2)
        except requests.RequestException:
            return None
        return True

    def _wait_running(self, token: str, *, deadline: float | None = None) -> None:
        def probe() -> bool | None:
            try:
                response = self.get("/api/config", token=token, timeout=2)
            except requests.RequestException:
                return None
            if response.status_code == 200 and response.json().get("state") == "RUNNING":
                return True
            return None

        self._wait_for(probe, deadline or time.monotonic() + START_TIMEOUT, "state RUNNING")

    # --- inspection --------------------------------------------------------------------------

    def sockets(self) -> list[SocketInfo]:
        """Every TCP and UDP socket the Home Assistant process holds, read from /proc."""
        if self._process is None:
            return []
        pid = self._process.pid
        inodes = set()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
        found = []
        for proto in ("tcp", "tcp6", "udp", "udp6"):
            for line in Path(f"/proc/{pid}/net/{proto}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[9] in inodes:
                    local, remote = _proc_address(fields[1]), _proc_address(fields[2])
                    found.append(SocketInfo(proto, local, remote, listening=fields[3] == "0A"))
        return found

    # --- onboarding, areas, token ------------------------------------------------------------

    def _onboard(self) -> str:
        """Create the owner unattended, finish the remaining steps; return a short-lived token."""
        client_id = f"{self.base_url}/"
        response = self._post(
            "/api/onboarding/users",
            token="",
            json={
                "client_id": client_id,
                "name": "Console Test Owner",
                "username": "owner",
                "password": secrets.token_urlsafe(24),
                "language": "en",
            },
        )
        auth_code = response.json()["auth_code"]
        response = self._http.post(
            f"{self.base_url}/auth/token",
            data={"grant_type": "authorization_code", "code": auth_code, "client_id": client_id},
            timeout=HTTP_TIMEOUT,
        )
        response.raise_for_status()
        access_token = response.json()["access_token"]
        self._post("/api/onboarding/analytics", token=access_token, json={})
        self._post(
            "/api/onboarding/integration",
            token=access_token,
            json={"client_id": client_id, "redirect_uri": f"{self.base_url}/?auth_callback=1"},
        )
        return access_token

    def _check_entities(self, token: str) -> None:
        present = {state["entity_id"] for state in self.get("/api/states", token=token).json()}
        missing = [entity.entity_id for entity in self.entities if entity.entity_id not in present]
        if missing:
            raise HomeAssistantStartError(
                f"configured entities missing from /api/states: {missing}; "
                f"last {LOG_TAIL_LINES} log lines:\n{self.log_tail()}"
            )

    def _assign_areas(self, ws: HomeAssistantWebSocket) -> None:
        # Onboarding already made Living Room, Kitchen and Bedroom; names match as HA
        # compares them (case and spaces ignored).
        def key(name: str) -> str:
            return name.casefold().replace(" ", "")

        existing = {key(area["name"]): area["area_id"] for area in ws.command("config/area_registry/list")}
        for name in self.site.areas:
            if key(name) not in existing:
                existing[key(name)] = ws.command("config/area_registry/create", name=name)["area_id"]
            self.area_ids[name] = existing[key(name)]
        for entity in self.entities:
            if entity.area is not None:
                ws.command(
                    "config/entity_registry/update",
                    entity_id=entity.entity_id,
                    area_id=self.area_ids[entity.area],
                )

    # --- HTTP and WebSocket ------------------------------------------------------------------

    def _headers(self, token: str | None) -> dict[str, str]:
        token = self.token if token is None else token
        return {"Authorization": f"Bearer {token}"} if token else {}

    def get(
        self,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        token: str | None = None,
        timeout: float = HTTP_TIMEOUT,
        via: str | None = None,
    ) -> requests.Response:
        """GET `path` with the minted token (or `token`; "" sends none); the response, unchecked.

        `via` is another base URL that leads to this core (a recording proxy, tests/real_ha/wire.py).
        """
        return self._http.get(
            f"{via or self.base_url}{path}", params=params, headers=self._headers(token), timeout=timeout
        )

    def _post(self, path: str, *, token: str | None = None, json: Any = None) -> requests.Response:
        response = self._http.post(
            f"{self.base_url}{path}", json=json, headers=self._headers(token), timeout=HTTP_TIMEOUT
        )
        response.raise_for_status()
        return response

    @contextmanager
    def websocket(self, token: str | None = None, *, via: str | None = None) -> Iterator[HomeAssistantWebSocket]:
        """An authenticated WebSocket connection (through `via`, as `get`), closed on exit."""
        with HomeAssistantWebSocket(via or self.base_url, self.token if token is None else token) as ws:
            yield ws

    # --- arranging scenes (test-only writes) -------------------------------------------------

    def call_service(
        self, domain: str, service: str, data: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """POST /api/services/<domain>/<service>; the states that changed."""
        return self._post(f"/api/services/{domain}/{service}", json=dict(data or {})).json()

    def set_state(
        self, entity_id: str, state: str, attributes: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """POST /api/states/<entity_id>: a state-only entity (no registry entry; gone on restart)."""
        body = {"state": state, "attributes": dict(attributes or {})}
        return self._post(f"/api/states/{entity_id}", json=body).json()

    def history(
        self,
        entity_id: str,
        start: datetime,
        end: datetime,
        *,
        minimal_response: bool = False,
        no_attributes: bool = False,
        significant_changes_only: bool = True,
        timeout: float = 30.0,
    ) -> list[dict[str, Any]]:
        """GET /api/history/period/<start> for one entity; its rows (empty when none)."""
        params = {"filter_entity_id": entity_id, "end_time": utc_iso(end)}
        if minimal_response:
            params["minimal_response"] = ""
        if no_attributes:
            params["no_attributes"] = ""
        if not significant_changes_only:
            params["significant_changes_only"] = "0"
        response = self.get(f"/api/history/period/{utc_iso(start)}", params=params, timeout=timeout)
        response.raise_for_status()
        body = response.json()
        return body[0] if body else []

    def wait_recorded(
        self,
        entity_id: str,
        n: int,
        *,
        since: datetime | None = None,
        timeout: float = 15.0,
    ) -> list[dict[str, Any]]:
        """Wait until history holds at least `n` rows for `entity_id` since `since` (default: a day ago).

        Counts every recorded row (significant_changes_only=0, no attributes) and returns them.
        """
        since = since or datetime.now(UTC) - timedelta(days=1)
        deadline = time.monotonic() + timeout
        while True:
            rows = self.history(
                entity_id,
                since,
                datetime.now(UTC) + timedelta(minutes=1),
                no_attributes=True,
                significant_changes_only=False,
            )
            if len(rows) >= n:
                return rows
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"history of {entity_id} has {len(rows)} rows after {timeout:.0f} s, expected {n}"
                )
            time.sleep(0.25)

    def load_history(self, entity_id: str, values: Sequence[tuple[float, str]]) -> int:
        """Insert (epoch, state) rows for `entity_id` straight into the recorder DB; HA must be stopped.

        One transaction: `states_meta` gives the metadata_id, each row chains to the previous
        through `old_state_id`, and reuses the attributes row of the entity's latest state (or an
        empty one). `last_changed_ts` stays NULL ("same as last_updated") unless the state repeats.
        Returns the number of rows inserted.
        """
        if self.running:
            raise RuntimeError("load_history needs Home Assistant stopped: call stop() first")
        db_path = self.config_dir / RECORDER_DB
        if not db_path.exists():
            raise FileNotFoundError(f"no recorder database at {db_path}: start Home Assistant once first")
        rows = sorted(values)
        connection = sqlite3.connect(db_path, timeout=30, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            try:
                inserted = _insert_states(connection, entity_id, rows)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
        finally:
            connection.close()
        return inserted


def _metadata_id(connection: sqlite3.Connection, entity_id: str) -> int:
    """The entity's row in states_meta, created when the recorder has never seen it."""
    row = connection.execute(
        "SELECT metadata_id FROM states_meta WHERE entity_id = ?", (entity_id,)
    ).fetchone()
    if row is not None:
        return row[0]
    return _inserted_id(connection.execute("INSERT INTO states_meta (entity_id) VALUES (?)", (entity_id,)))


def _inserted_id(cursor: sqlite3.Cursor) -> int:
    """The row id an INSERT just made (sqlite3 types `lastrowid` as optional; after an INSERT it is set)."""
    row_id = cursor.lastrowid
    assert row_id is not None
    return row_id


def _fnv1a_32(data: bytes) -> int:
    """The hash the recorder keys state_attributes by."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def _empty_attributes_id(connection: sqlite3.Connection) -> int:
    row = connection.execute(
        "SELECT attributes_id FROM state_attributes WHERE shared_attrs = '{}' LIMIT 1"
    ).fetchone()
    if row is not None:
        return row[0]
    return _inserted_id(connection.execute(
        "INSERT INTO state_attributes (hash, shared_attrs) VALUES (?, '{}')", (_fnv1a_32(b"{}"),)
    ))


def _insert_states(
    connection: sqlite3.Connection, entity_id: str, rows: Sequence[tuple[float, str]]
) -> int:
    """Insert sorted (epoch, state) rows in the open transaction; the number inserted."""
    if not rows:
        return 0
    metadata_id = _metadata_id(connection, entity_id)
    # Chain to the entity's last row before the first new one, as the recorder would have.
    previous = connection.execute(
        "SELECT state_id, state, COALESCE(last_changed_ts, last_updated_ts) FROM states"
        " WHERE metadata_id = ? AND last_updated_ts <= ? ORDER BY last_updated_ts DESC LIMIT 1",
        (metadata_id, rows[0][0]),
    ).fetchone()
    latest = connection.execute(
        "SELECT attributes_id FROM states WHERE metadata_id = ? AND attributes_id IS NOT NULL"
        " ORDER BY last_updated_ts DESC LIMIT 1",
        (metadata_id,),
    ).fetchone()
    attributes_id = latest[0] if latest else _empty_attributes_id(connection)
    old_state_id, last_state, changed_at = previous or (None, None, None)
    next_id = connection.execute("SELECT COALESCE(MAX(state_id), 0) + 1 FROM states").fetchone()[0]
    records = []
    for offset, (updated_at, state) in enumerate(rows):
        state_id = next_id + offset
        if state != last_state:
            changed_at = updated_at
        records.append(
            (
                state_id,
                state,
                updated_at,
                None if changed_at == updated_at else changed_at,
                old_state_id,
                attributes_id,
                os.urandom(16),
                metadata_id,
            )
        )
        old_state_id, last_state = state_id, state
    connection.executemany(
        "INSERT INTO states (state_id, state, last_updated_ts, last_changed_ts, old_state_id,"
        " attributes_id, origin_idx, context_id_bin, metadata_id)"
        " VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?)",
        records,
    )
    return len(records)


def mint_and_revoke(real_ha: RealHomeAssistant, client_name: str) -> tuple[str, Callable[[], None]]:
    """A new long-lived token from the real Home Assistant, and a function that revokes it there.

    The revocation is Home Assistant's own WebSocket `auth/delete_refresh_token`, sent by the test with
    the harness's token (the Console never sends it: it is not a read).
    """
    with real_ha.websocket() as ws:
        token = ws.command("auth/long_lived_access_token", client_name=client_name, lifespan=30)

    def revoke() -> None:
        with real_ha.websocket() as ws:
            ids = [t["id"] for t in ws.command("auth/refresh_tokens") if t.get("client_name") == client_name]
            if len(ids) != 1:
                raise RuntimeError(f"expected one refresh token named {client_name!r}, found {len(ids)}")
            ws.command("auth/delete_refresh_token", refresh_token_id=ids[0])

    return token, revoke
