"""Areas for entities from Home Assistant's WebSocket registries; optional, so every failure is None."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from console_ha.errors import HABadResponse, HomeAssistantError
from console_ha.folding import fold
from console_ha.ha import websocket as ha_ws
from console_ha.ha.call_limits import CallLimits
from console_ha.ha.per_home_assistant import PerHomeAssistant
from console_ha.ha.rest_client import ALL_ENTITIES_MAX_BYTES, HomeAssistantClient, cache_key
from console_ha.ha.websocket import websocket_url
from console_ha.secret import Secret

log = logging.getLogger(__name__)

# The read-only list commands the picker sends, declared here where they are sent: the area connection
# sends these and nothing else (and ha_ws nothing that writes).
REGISTRY_COMMANDS = ("config/area_registry/list", "config/entity_registry/list", "config/device_registry/list")
ALLOWED_COMMANDS = frozenset(REGISTRY_COMMANDS)
DEFAULT_TIMEOUT = 4.0
# How long areas are kept, for the picker and the capabilities alike: areas change rarely and the picker
# reloads often; a failure is tried again sooner.
AREAS_TTL = 60.0
AREAS_FAILURE_TTL = 10.0

EntityAreas = dict[str, str]

__all__ = ["Area", "AreaCache", "AreaIndex", "AreaIndexCache", "EntityAreas", "KeepAreas",
           "RegistryError", "area_index", "build_area_index", "entity_areas", "fetch_entity_areas", "fetch_key",
           "read_area_index", "websocket_url"]


class RegistryError(Exception):
    """The registry lists were not what Home Assistant's protocol says."""


# Given what a registry round found, with its `fetch_key`: the Console's card memory keeps it for its cards.
KeepAreas = Callable[[tuple[str, str, str], "AreaIndex"], None]


def fetch_entity_areas(
    base_url: str, token: Secret, *, limits: CallLimits, timeout: float = DEFAULT_TIMEOUT,
    ca_bundle: str | None = None, keep: KeepAreas | None = None,
) -> EntityAreas | None:
    """entity_id → area name for every entity with an area; None when the registries cannot be read.

    `limits` are the Console's (its clients count against the same); `keep` is handed the whole index of a
    round that worked (the picker's areas, which a card may name).
    """
    try:
        # The WebSocket holds one of the places the REST calls to this Home Assistant share.
        with limits.slot(base_url):
            lists = _read_registries(base_url, token, timeout=timeout, ca_bundle=ca_bundle)
    except Exception as err:  # areas are optional: any failure just leaves them out
        log.info("entity areas unavailable from %s: %s", base_url, type(err).__name__)
        return None
    try:
        index = build_area_index(
            lists["config/area_registry/list"],
            lists["config/entity_registry/list"],
            lists["config/device_registry/list"],
        )
    except (KeyError, TypeError, AttributeError) as err:
        log.info("entity areas unavailable from %s: registry lists of an unexpected shape (%s)",
                 base_url, type(err).__name__)
        return None
    if keep is not None:
        # What the picker just read is what a card may name before its read (the same key: URL, token, CA).
        keep(fetch_key(base_url, token, ca_bundle), index)
    return index.entity_area_names()


def entity_areas(
    areas: Iterable[Mapping[str, Any]],
    entities: Iterable[Mapping[str, Any]],
    devices: Iterable[Mapping[str, Any]],
) -> EntityAreas:
    """Join the three registries: an entity's own area_id wins over its device's."""
    return build_area_index(areas, entities, devices).entity_area_names()


@dataclass(frozen=True)
class Area:
    """One area of Home Assistant's area registry, as the household may name it."""

    area_id: str
    name: str
    aliases: tuple[str, ...] = ()

    def answers_to(self, folded: str) -> bool:
        """Whether `folded` (already `fold`ed) is this area's name, id or one of its aliases, folded."""
        return any(fold(text) == folded for text in (self.name, self.area_id, *self.aliases))


@dataclass(frozen=True)
class AreaIndex:
    """Where each entity is: `placements` maps entity_id → area_id (its own area before its device's)."""

    areas: Mapping[str, Area]
    placements: Mapping[str, str]

    def area_of(self, entity_id: str) -> Area | None:
        """The area `entity_id` is in, or None when it has none."""
        area_id = self.placements.get(entity_id)
        return self.areas.get(area_id) if area_id is not None else None

    def area_name(self, entity_id: str) -> str | None:
        """The name of the area `entity_id` is in, or None."""
        area = self.area_of(entity_id)
        return area.name if area is not None else None

    def named(self, words: str) -> frozenset[str]:
        """The ids of the areas whose name, id or alias is `words` (case, accents and spacing ignored).

        Every area of Home Assistant is looked at: a caller narrows to allowlisted entities afterwards, so
        an answer built from this never says whether an area without allowlisted entities exists.
        """
        folded = fold(words)
        return frozenset(area.area_id for area in self.areas.values() if area.answers_to(folded))

    def entity_area_names(self) -> EntityAreas:
        """entity_id → area name for every entity with an area (the picker's view)."""
        return {entity_id: self.areas[area_id].name for entity_id, area_id in self.placements.items()}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def build_area_index(
    areas: Iterable[Mapping[str, Any]],
    entities: Iterable[Mapping[str, Any]],
    devices: Iterable[Mapping[str, Any]],
) -> AreaIndex:
    """Join the three registry lists; an area without an id or a name, and what it would place, is left out."""
    known: dict[str, Area] = {}
    for area in areas:
        area_id, name = _text(area.get("area_id")), _text(area.get("name"))
        if area_id and name:
            aliases = area.get("aliases")
            known[area_id] = Area(area_id, name, tuple(a for a in aliases if _text(a))
                                  if isinstance(aliases, list) else ())
    device_areas = {d["id"]: d.get("area_id") for d in devices if _text(d.get("id"))}
    placements: dict[str, str] = {}
    for entity in entities:
        entity_id = _text(entity.get("entity_id"))
        area_id = entity.get("area_id") or device_areas.get(entity.get("device_id"))
        if entity_id and isinstance(area_id, str) and area_id in known:
            placements[entity_id] = area_id
    return AreaIndex(known, placements)


def read_area_index(client: HomeAssistantClient, *, timeout: float) -> AreaIndex:
    """One registry round through `client` (the three lists over one WebSocket); an HA* error if it fails.

    Unlike the picker's fetch, a failure is raised: a capability says what went wrong. The client sends
    only the commands its reads declare, so a capability using this declares REGISTRY_COMMANDS.
    """
    with client.websocket(timeout=timeout, max_bytes=ALL_ENTITIES_MAX_BYTES) as ws:
        lists = [ws.command({"type": command}) for command in REGISTRY_COMMANDS]
    if not all(isinstance(result, list) for result in lists):
        raise HABadResponse("Home Assistant's area registries were not lists.", reason="wrong_shape")
    try:
        return build_area_index(*lists)
    except (KeyError, TypeError, AttributeError):
        raise HABadResponse("Home Assistant's area registries were not of the expected shape.",
                            reason="wrong_shape") from None


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
    """What makes two area fetches the same: the URL, the token and the CA bundle (`client.cache_key`)."""
    return cache_key(base_url, token, ca_bundle)


class AreaCache:
    """The picker's entity areas per Home Assistant, kept a minute: areas change rarely and the picker reloads
    often. Keyed by URL, token (as a hash) and CA bundle, so each Home Assistant keeps its own."""

    def __init__(
        self,
        ttl: float = AREAS_TTL,
        failure_ttl: float = AREAS_FAILURE_TTL,
        fetch: Callable[..., EntityAreas | None] = fetch_entity_areas,
    ) -> None:
        self._ttl = ttl
        self._failure_ttl = failure_ttl
        self._fetch = fetch
        self._entries: PerHomeAssistant[tuple[str, str, str], tuple[float, EntityAreas | None]] = PerHomeAssistant()

    def get(
        self, base_url: str, token: Secret, *, timeout: float = DEFAULT_TIMEOUT, ca_bundle: str | None = None
    ) -> EntityAreas | None:
        """Cached areas for this URL and token, fetched when absent or stale."""
        key = fetch_key(base_url, token, ca_bundle)
        entry = self._entries.get(key)
        if entry is not None and entry[0] > time.monotonic():
            return entry[1]
        areas = self._fetch(base_url, token, timeout=timeout, ca_bundle=ca_bundle)
        self._entries.put(key, (time.monotonic() + (self._ttl if areas is not None else self._failure_ttl), areas))
        return areas


class AreaIndexCache:
    """The capabilities' areas, kept by the picker's rules: per URL, token (as a hash) and CA bundle, a minute
    after a success and ten seconds after a failure (which is raised again).

    So a read costs at most one registry round, and a conversation's reads in a row share one. A Console has
    one (`HomeAssistants`), and hands it to every client it makes: a capability finds it through its client.
    """

    def __init__(self, ttl: float = AREAS_TTL, failure_ttl: float = AREAS_FAILURE_TTL,
                 read: Callable[..., AreaIndex] = read_area_index) -> None:
        self._ttl = ttl
        self._failure_ttl = failure_ttl
        self._read = read
        self._entries: PerHomeAssistant[tuple[str, str, str], tuple[float, AreaIndex | HomeAssistantError]] = (
            PerHomeAssistant())

    def get(self, client: HomeAssistantClient, *, timeout: float) -> AreaIndex:
        """The areas of `client`'s Home Assistant: kept ones, else one registry round (its HA* error if it fails)."""
        key = client.cache_key
        entry = self._entries.get(key)
        if entry is None or entry[0] <= time.monotonic():
            try:
                value: AreaIndex | HomeAssistantError = self._read(client, timeout=timeout)
                ttl = self._ttl
            except HomeAssistantError as err:
                # Kept without its traceback: its frames would keep the client (and its token) alive.
                value, ttl = err.with_traceback(None), self._failure_ttl
            entry = (time.monotonic() + ttl, value)
            self._entries.put(key, entry)
        if isinstance(entry[1], HomeAssistantError):
            # The kept failure, as a new error of its kind, so no traceback grows on a shared exception.
            raise entry[1].reworded(entry[1].message)
        return entry[1]

    def clear(self) -> None:
        """Forget every kept area list (tests that change a stub's registries)."""
        self._entries.clear()


def area_index(client: HomeAssistantClient, *, timeout: float) -> AreaIndex:
    """The areas of `client`'s Home Assistant for a capability's read: kept, or read once within `timeout`.

    Kept by the Console that made the client (`client.area_indexes`), so the capability's signature stays the
    same for every read and no cache is the process's; a client made without a Console reads them each time.
    """
    kept = client.area_indexes
    return kept.get(client, timeout=timeout) if kept is not None else read_area_index(client, timeout=timeout)
