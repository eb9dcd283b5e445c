"""How large list_entities' result is for a typical allowlist and for the worst one a save accepts.

Typical: entities shaped like the stub Home Assistant's realistic ones (names such as "Living room
temperature", short states and units). Worst: an allowlist at the accepted maximum whose every name,
state and unit is far over its cap and made of the costliest characters (quotes, backslashes, emoji).
The states are handed to list_entities directly: the transport is not what is measured.

Run: .venv/bin/python benchmarks/bench_list_entities_size.py
"""

from __future__ import annotations

import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console_ha.capabilities.entity_budget import BUDGET_BYTES, entity_cost, json_size
from console_ha.capabilities.list_entities import execute as list_entities
from console_ha.deadline import Deadline
from console_ha.store.config import HomeAssistantConfig
from tests.stub_ha import default_states  # noqa: E402


class _States:
    def __init__(self, states: list[dict[str, Any]]) -> None:
        self._states = states

    def states(self, *, timeout: float, max_bytes: int) -> list[dict[str, Any]]:
        return self._states


def _run(states: list[dict[str, Any]]) -> tuple[int, float]:
    allowlist = tuple(s["entity_id"] for s in states)
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123", allowlisted_entities=allowlist)
    began = time.perf_counter()
    result = list_entities(_States(states), config, {}, Deadline(8), datetime.now(UTC))  # type: ignore[arg-type]
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
        size, ms = _run(typical(count))
        print(f"typical, {count:>3} entities: {size:>6,} bytes ({size / count:.0f} per entity), {ms:.1f} ms")
    states = worst()
    size, ms = _run(states)
    print(f"worst,   {len(states)} entities: {size:>6,} bytes, {ms:.1f} ms")


if __name__ == "__main__":
    main()
