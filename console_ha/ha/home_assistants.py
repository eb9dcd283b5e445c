"""One Console's state about the Home Assistants it reads: kept clients, areas and call limits, each keyed by
the Home Assistant it serves (URL, token hash, CA bundle: `rest_client.cache_key`).

`Console.open` builds one; nothing else builds or holds such state, so two Consoles in one process (or the
several Home Assistants of one Console, issue 29) never see each other's.
"""

from __future__ import annotations

from functools import partial
from typing import Protocol

from console_ha.ha.areas import AreaCache, AreaIndexCache, KeepAreas, fetch_entity_areas
from console_ha.ha.call_limits import CallCaps, CallLimits
from console_ha.ha.kept_clients import HomeAssistantClients
from console_ha.ha.reads import UNDECLARED_READS, Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret


class ClientMaker(Protocol):
    """Makes one client of a Console: `HomeAssistantClient` itself, or a test's or benchmark's wrapper of it."""

    def __call__(self, base_url: str, token: Secret, *, ca_bundle: str | None, reads: Reads, limits: CallLimits,
                 area_indexes: AreaIndexCache) -> HomeAssistantClient: ...


class HomeAssistants:
    """What one Console keeps about the Home Assistants it reads, each part keyed by the one it serves.

    - `limits`: the calls in flight, counted per origin under the Console's caps (its worker threads are shared);
    - `clients`: one kept client per URL, token and CA bundle, each reading `reads` only, counting against
      `limits` and finding its areas in `area_indexes`;
    - `area_indexes`: the capabilities' areas, reached through the client a read is given (`areas.area_index`);
    - `entity_areas`: the picker's areas, fetched over a WebSocket that counts against `limits` too.
    """

    def __init__(self, *, reads: Reads = UNDECLARED_READS, caps: CallCaps | None = None,
                 keep: KeepAreas | None = None, make: ClientMaker = HomeAssistantClient) -> None:
        self.limits = CallLimits(caps)
        self.area_indexes = AreaIndexCache()
        self._reads = reads
        self._make = make
        self.clients = HomeAssistantClients(self._new_client)
        # `keep` hands what the picker read to the Console's card memory, so a card may name those rooms.
        self.entity_areas = AreaCache(fetch=partial(fetch_entity_areas, limits=self.limits, keep=keep))

    def _new_client(self, base_url: str, token: Secret, ca_bundle: str | None) -> HomeAssistantClient:
        return self._make(base_url, token, ca_bundle=ca_bundle, reads=self._reads, limits=self.limits,
                          area_indexes=self.area_indexes)
