"""Benchmark: get_calendar, get_todo and get_forecast against Home Assistant's own answers, in one run.

Starts a real Home Assistant 2025.4.4 with the demo integration and a shopping list (as
tests/real_ha/test_everyday_real.py does) on 127.0.0.1, and measures, alternating pairs in one run:

- `calendar`: `execute` (GET /api/calendars/calendar.calendar_1 for the next 7 days, shaped; the time zone is
  the kept client's, `kept_config`) against that one GET through one kept requests session, its body
  `json.loads`-ed, the zone read once before the run as the Console keeps it;
- `todo`: `execute` (one WebSocket, `todo/item/list`, shaped) against the same command on the Console's
  WebSocket, its answer's bytes `json.loads`-ed;
- `forecast`: `execute` (GET the entity's state for its units; one WebSocket: `weather/subscribe_forecast`'s
  first event and `unsubscribe_events`, shaped; the zone kept) against the same reads made bare: the state
  GET through the requests session `json.loads`-ed and the subscription's first event on a WebSocket.

Each read needs the same round trips as its baseline, which are Home Assistant's own answer to the question:
the ratio is what the Console adds (its deadlines, checks and shaping).

Run from the repository root (the harness installs Home Assistant into .cache/ha-venv, or $CONSOLE_HA_HA_VENV):

    .venv/bin/python benchmarks/bench_everyday.py [--repeats 21]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CALENDAR = "calendar.calendar_1"
TODO = "todo.shopping_list"
WEATHER = "weather.demo_weather_north"
MAX_BYTES = 4 * 1024 * 1024


def pairs(variants: dict[str, tuple[Callable[[], Any], Callable[[], Any]]], repeats: int) -> None:
    """Each read and its baseline alternately, `repeats` times; their medians and the median paired ratio."""
    print(f"{'read':<10} {'HA own ms':>10} {'Console ms':>11} {'paired ratio':>13}  range")
    for name, (own, console) in variants.items():
        own(), console()  # warm the imports, the pools and Home Assistant's caches
        own_times: list[float] = []
        console_times: list[float] = []
        for _ in range(repeats):
            for work, into in ((own, own_times), (console, console_times)):
                began = time.perf_counter()
                work()
                into.append(time.perf_counter() - began)
        ratios = [c / h for c, h in zip(console_times, own_times, strict=True)]
        own_ms, console_ms = statistics.median(own_times) * 1000, statistics.median(console_times) * 1000
        print(f"{name:<10} {own_ms:>10.2f} {console_ms:>11.2f} {statistics.median(ratios):>12.2f}x  "
              f"{min(ratios):.2f}-{max(ratios):.2f}x over {repeats} pairs")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)

    from console_ha.capabilities import get_calendar, get_forecast, get_todo
    from console_ha.capabilities.registry import HOME_ASSISTANT_READS
    from console_ha.deadline import Deadline
    from console_ha.ha.rest_client import HomeAssistantClient
    from console_ha.ha.websocket import FORECAST_COMMAND, TODO_COMMAND
    from console_ha.secret import Secret
    from console_ha.store.config import HomeAssistantConfig
    from tests.real_ha.test_everyday_real import demo_home_assistant

    with tempfile.TemporaryDirectory(prefix="bench-everyday-") as scratch:
        hass = demo_home_assistant(Path(scratch))
        try:
            client = HomeAssistantClient(hass.base_url, Secret(hass.token), reads=HOME_ASSISTANT_READS)
            config = HomeAssistantConfig(enabled=True, base_url=hass.base_url,
                                         allowlisted_entities=(CALENDAR, TODO, WEATHER))
            session = requests.Session()
            session.trust_env = False
            headers = {"Authorization": f"Bearer {hass.token}"}

            def get(path: str, **params: str) -> Any:
                return json.loads(session.get(f"{hass.base_url}{path}", params=params, headers=headers,
                                              timeout=10).content)

            zone = ZoneInfo(get("/api/config")["time_zone"])

            def own_calendar() -> Any:
                start = datetime.now(zone).replace(hour=0, minute=0, second=0, microsecond=0)
                return get(f"/api/calendars/{CALENDAR}", start=start.astimezone(UTC).isoformat(),
                           end=(start + timedelta(days=7)).astimezone(UTC).isoformat())

            def own_todo() -> Any:
                with client.websocket(timeout=10, max_bytes=MAX_BYTES) as connection:
                    _, chunks = connection.stream({"type": TODO_COMMAND, "entity_id": TODO})
                    return json.loads(b"".join(chunks))

            def own_forecast() -> Any:
                state = get(f"/api/states/{WEATHER}")
                with client.websocket(timeout=10, max_bytes=MAX_BYTES) as connection:
                    return state, connection.first_event({"type": FORECAST_COMMAND, "entity_id": WEATHER,
                                                          "forecast_type": "daily"})

            def read(capability: Any, arguments: dict[str, str]) -> Callable[[], Any]:
                return lambda: capability.execute(client, config, arguments, Deadline(10), datetime.now(UTC))

            print(f"Home Assistant {hass.base_url} (demo): {CALENDAR}, {TODO}, {WEATHER}")
            pairs({
                "calendar": (own_calendar, read(get_calendar, {"entity_id": CALENDAR, "period": "next_7_days"})),
                "todo": (own_todo, read(get_todo, {"entity_id": TODO, "status": "all"})),
                "forecast": (own_forecast, read(get_forecast, {"entity_id": WEATHER, "kind": "daily"})),
            }, args.repeats)
        finally:
            hass.stop()


if __name__ == "__main__":
    main()
