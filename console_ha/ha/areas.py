"""Areas for entities from Home Assistant's WebSocket registries; optional, so every failure is None."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from console_ha.ha import websocket as ha_ws
from console_ha.ha.client import ALL_ENTITIES_MAX_BYTES, CALL_LIMITS
from console_ha.ha.websocket import websocket_url
from console_ha.secret import Secret

log = logging.getLogger(__name__)

# The read-only list commands the picker sends, declared here where they are sent: the area connection
# sends these and nothing else (and ha_ws nothing that writes).
REGISTRY_COMMANDS = ("config/area_registry/list", "config/entity_registry/list", "config/device_registry/list")
ALLOWED_COMMANDS = frozenset(REGISTRY_COMMANDS)
DEFAULT_TIMEOUT = 4.0

EntityAreas = dict[str, str]

__all__ = ["AreaCache", "EntityAreas", "RegistryError", "entity_areas", "fetch_entity_areas", "fetch_key",
           "websocket_url"]


class RegistryError(Exception):
    """The registry lists were not what Home Assistant's protocol says."""


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
    """The three lists, over one WebSocket that lives for this call only (it follows no redirect: wsproto
    reports a 3xx as a refused upgrade, so the auth message, the token, never goes to another origin)."""
    with ha_ws.connect(base_url, token, timeout=timeout, max_bytes=ALL_ENTITIES_MAX_BYTES, ca_bundle=ca_bundle,
                       commands=ALLOWED_COMMANDS) as ws:
        results = {command: ws.command({"type": command}) for command in REGISTRY_COMMANDS}
    for command, result in results.items():
        if not isinstance(result, list):
            raise RegistryError(f"{command} answered something other than a list")
    return results


def fetch_key(base_url: str, token: Secret, ca_bundle: str | None) -> tuple[str, str, str]:
    """What makes two area fetches the same: the URL, the token and the CA bundle."""
    # A hash of the token, so a new token is a new key and the token itself is not kept in one.
    return base_url, token.digest(), ca_bundle or ""


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
        key = fetch_key(base_url, token, ca_bundle)
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
