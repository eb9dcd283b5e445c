"""Areas for entities from Home Assistant's WebSocket registries; optional, so every failure is None."""

from __future__ import annotations

import hashlib
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import websocket

from .ha_client import CALL_LIMITS
from .secret_store import Secret

log = logging.getLogger(__name__)

# Only these read-only list commands may ever be sent; checked before each send, not merely by convention.
ALLOWED_COMMANDS = frozenset(
    {"config/area_registry/list", "config/entity_registry/list", "config/device_registry/list"}
)
DEFAULT_TIMEOUT = 4.0
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
CLOSE_WAIT = 0.5

EntityAreas = dict[str, str]


class RegistryError(Exception):
    """The WebSocket conversation did not go as Home Assistant's protocol says."""


def websocket_url(base_url: str) -> str:
    """`http(s)://host[:port][/path]` → `ws(s)://host[:port][/path]/api/websocket`."""
    if base_url.startswith("https://"):
        return "wss://" + base_url[len("https://"):] + "/api/websocket"
    if base_url.startswith("http://"):
        return "ws://" + base_url[len("http://"):] + "/api/websocket"
    raise ValueError("base_url must be http or https")


def fetch_entity_areas(
    base_url: str, token: Secret, *, timeout: float = DEFAULT_TIMEOUT, ca_bundle: str | None = None
) -> EntityAreas | None:
    """entity_id → area name for every entity with an area; None when the registries cannot be read."""
    try:
        # The WebSocket holds one of the places the REST calls to this Home Assistant share.
        with CALL_LIMITS.slot(base_url):
            lists = _read_registries(base_url, token, timeout=timeout, ca_bundle=ca_bundle)
    except Exception as err:  # noqa: BLE001 - areas are optional: any failure just leaves them out
        log.info("entity areas unavailable from %s: %s", base_url, type(err).__name__)
        return None
    try:
        return entity_areas(
            lists["config/area_registry/list"],
            lists["config/entity_registry/list"],
            lists["config/device_registry/list"],
        )
    except (KeyError, TypeError, AttributeError) as err:
        log.info("entity areas unavailable from %s: registry lists of an unexpected shape (%s)",
                 base_url, type(err).__name__)
        return None


def _direct_socket(base_url: str, timeout: float, ca_bundle: str | None) -> socket.socket:
    """A connection straight to Home Assistant, TLS-verified for https.

    websocket-client would take a proxy from the environment (its no-proxy option is only read when a
    proxy is also given) and send the token's auth message through it; handing it a socket avoids that,
    as the REST client ignores the environment too (trust_env=False).
    """
    parts = urlsplit(base_url)
    secure = parts.scheme == "https"
    host = parts.hostname or ""
    sock = socket.create_connection((host, parts.port or (443 if secure else 80)), timeout=timeout)
    if not secure:
        return sock
    try:
        context = ssl.create_default_context(cafile=ca_bundle or None)
        return context.wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise


def entity_areas(
    areas: Iterable[Mapping[str, Any]],
    entities: Iterable[Mapping[str, Any]],
    devices: Iterable[Mapping[str, Any]],
) -> EntityAreas:
    """Join the three registries: an entity's own area_id wins over its device's."""
    area_names = {a["area_id"]: a["name"] for a in areas if a.get("area_id") and a.get("name")}
    device_areas = {d["id"]: d.get("area_id") for d in devices if d.get("id")}
    result: EntityAreas = {}
    for entity in entities:
        entity_id = entity.get("entity_id")
        area_id = entity.get("area_id") or device_areas.get(entity.get("device_id"))
        name = area_names.get(area_id) if area_id else None
        if entity_id and name:
            result[entity_id] = name
    return result


def _read_registries(
    base_url: str, token: Secret, *, timeout: float, ca_bundle: str | None
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    url = websocket_url(base_url)
    sock = _direct_socket(base_url, timeout, ca_bundle)
    # Each socket read has a timeout, but a server trickling bytes resets it with each one: at the
    # deadline the socket is shut, so the handshake and every message end there (as the REST client's).
    watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), _shut_socket, args=(sock,))
    watchdog.daemon = True
    watchdog.start()
    try:
        return _converse(url, sock, token, timeout=timeout, deadline=deadline)
    finally:
        watchdog.cancel()
        sock.close()


def _shut_socket(sock: socket.socket) -> None:
    """Shut `sock` so that a read blocked on it returns at once."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _converse(url: str, sock: socket.socket, token: Secret, *, timeout: float, deadline: float) -> dict[str, Any]:
    # redirect_limit=0: websocket-client follows a 3xx to any Location, and the `auth` message (the token)
    # would go to that origin; the REST client refuses redirects for the same reason.
    ws = websocket.create_connection(url, timeout=timeout, suppress_origin=True, redirect_limit=0, socket=sock)
    try:
        first = _receive(ws, deadline)
        if first.get("type") != "auth_required":
            raise RegistryError(f"expected auth_required, got {first.get('type')!r}")
        # The token goes into this one message and nowhere else.
        ws.send(json.dumps({"type": "auth", "access_token": token.reveal()}))
        answer = _receive(ws, deadline)
        if answer.get("type") != "auth_ok":
            raise RegistryError(f"authentication answered {answer.get('type')!r}")
        commands = dict(enumerate(sorted(ALLOWED_COMMANDS), start=1))
        for message_id, command in commands.items():
            _send_command(ws, message_id, command)
        results: dict[str, Any] = {}
        while len(results) < len(commands):
            message = _receive(ws, deadline)
            message_id = message.get("id")
            if message.get("type") != "result" or message_id not in commands:
                continue
            if not message.get("success"):
                raise RegistryError(f"{commands[message_id]} failed")
            results[commands[message_id]] = message["result"]
        return results
    finally:
        # A polite close waits for the server's close frame, but never past the deadline.
        ws.close(timeout=max(0.0, min(CLOSE_WAIT, deadline - time.monotonic())))


def _send_command(ws: websocket.WebSocket, message_id: int, command: str) -> None:
    if command not in ALLOWED_COMMANDS:
        raise RegistryError(f"refusing to send {command!r}: not a read-only registry list")
    ws.send(json.dumps({"id": message_id, "type": command}))


def _receive(ws: websocket.WebSocket, deadline: float) -> dict[str, Any]:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("the registries took too long")
    ws.settimeout(remaining)
    data = ws.recv()
    if len(data) > MAX_MESSAGE_BYTES:
        raise RegistryError("a registry message was too large")
    message = json.loads(data)
    if not isinstance(message, dict):
        raise RegistryError("a message was not a JSON object")
    return message


class AreaCache:
    """Entity areas per Home Assistant, kept a minute: areas change rarely and the picker reloads often."""

    def __init__(
        self,
        ttl: float = 60.0,
        failure_ttl: float = 10.0,
        fetch: Callable[..., EntityAreas | None] = fetch_entity_areas,
    ) -> None:
        self._ttl = ttl
        self._failure_ttl = failure_ttl
        self._fetch = fetch
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str, str], tuple[float, EntityAreas | None]] = {}

    def get(
        self, base_url: str, token: Secret, *, timeout: float = DEFAULT_TIMEOUT, ca_bundle: str | None = None
    ) -> EntityAreas | None:
        """Cached areas for this URL and token, fetched when absent or stale."""
        # Keyed by a hash of the token so a new token is a new entry and the token itself is not kept here.
        key = (base_url, hashlib.sha256(token.reveal().encode("utf-8")).hexdigest(), ca_bundle or "")
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and entry[0] > now:
            return entry[1]
        areas = self._fetch(base_url, token, timeout=timeout, ca_bundle=ca_bundle)
        expires = time.monotonic() + (self._ttl if areas is not None else self._failure_ttl)
        with self._lock:
            # One Home Assistant at a time: drop entries for other URLs or tokens.
            self._entries = {key: (expires, areas)}
        return areas
