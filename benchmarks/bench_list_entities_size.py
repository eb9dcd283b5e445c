"""How large list_entities' result is for a typical allowlist and for the worst one a save accepts.

Typical: entities shaped like the stub Home Assistant's realistic ones (names such as "Living room
temperature", short states and units). Worst: an allowlist at the accepted maximum whose every name,
state, unit and area name is far over its cap and made of the costliest characters (quotes, backslashes,
emoji). Since issue 18 each entity is placed in an area (typical: four room names; worst: one per entity).
The states are handed to list_entities directly: the transport is not what is measured.

Run: .venv/bin/python benchmarks/bench_list_entities_size.py
"""

from __future__ import annotations

import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console_ha.capabilities.entity_budget import BUDGET_BYTES, entity_cost, json_size
from console_ha.capabilities.list_entities import execute as list_entities
from console_ha.deadline import Deadline
from console_ha.store.config import HomeAssistantConfig
from tests.stub_ha import default_states


class _States:
    """Hands list_entities the states, and registries placing every entity in an area named `area(i)`."""

    def __init__(self, states: list[dict[str, Any]], area: Callable[[int], str]) -> None:
        self._states = states
        names = {s["entity_id"]: area(i) for i, s in enumerate(states)}
        self._registries = {
            "config/area_registry/list": [{"area_id": name, "name": name} for name in set(names.values())],
            "config/entity_registry/list": [{"entity_id": e, "area_id": name} for e, name in names.items()],
            "config/device_registry/list": [],
        }
        self.cache_key = ("http://ha.local:8123", uuid.uuid4().hex, "")  # no two runs share kept areas

    def states(self, *, timeout: float, max_bytes: int) -> list[dict[str, Any]]:
        return self._states

    @contextmanager
    def websocket(self, *, timeout: float, max_bytes: int) -> Iterator[_States]:
        yield self

    def command(self, message: dict[str, Any]) -> Any:
        return self._registries[message["type"]]


def _run(states: list[dict[str, Any]], area: Callable[[int], str]) -> tuple[int, float]:
    allowlist = tuple(s["entity_id"] for s in states)
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123", allowlisted_entities=allowlist)
    client = _States(states, area)
    began = time.perf_counter()
    result = list_entities(client, config, {}, Deadline(8), datetime.now(UTC))  # type: ignore[arg-type]
    return json_size(result), (time.perf_counter() - began) * 1000


def typical(count: int) -> list[dict[str, Any]]:
    """`count` realistic entities, cycling through the stub's kinds with numbered ids."""
    base = default_states(datetime.now(UTC), random.Random(0))
    return [{**base[i % len(base)], "entity_id": f"{base[i % len(base)]['entity_id']}_{i}"} for i in range(count)]


def worst() -> list[dict[str, Any]]:
    """The accepted maximum of `sensor.bulk_<n>` entities, every text far over its cap."""
    text = '"\\😀' * 200
    states: list[dict[str, Any]] = []
    used = 0
    while True:
        entity_id = f"sensor.bulk_{len(states):03d}"
        if used + entity_cost(entity_id) > BUDGET_BYTES:
            return states
        used += entity_cost(entity_id)
        states.append({"entity_id": entity_id, "state": text[:255], "last_changed": "2026-11-30T10:00:00.123+00:00",
                       "attributes": {"friendly_name": text, "unit_of_measurement": text}})


def main() -> None:
    print(f"budget: {BUDGET_BYTES:,} bytes")
    for count in (15, 50, 100, 250):
        size, ms = _run(typical(count), lambda i: ("Living room", "Kitchen", "Master bedroom", "Hallway")[i % 4])
        print(f"typical, {count:>3} entities: {size:>6,} bytes ({size / count:.0f} per entity), {ms:.1f} ms")
    states = worst()
    size, ms = _run(states, lambda i: '"\\😀' * 200 + str(i))  # every area's name far over its cap
    print(f"worst,   {len(states)} entities: {size:>6,} bytes, {ms:.1f} ms")


if __name__ == "__main__":
    main()
