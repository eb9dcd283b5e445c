"""Benchmark: a week's logbook of one entity, get_logbook against Home Assistant's own answer plus json.loads.

Starts a real Home Assistant 2025.4.4 with the test harness (tests/real_ha/harness.py) on 127.0.0.1, loads
`--rows` changes of `input_boolean.hall_light` over the past week into its recorder, and measures, alternating
in one run:

- `ha`: `logbook/get_events` for the week over the Console's WebSocket, the answer's bytes joined and
  `json.loads`-ed: what reading Home Assistant's own answer costs at the least;
- `get_logbook`: the capability's `execute` (the entity's state, the same request streamed through ijson's
  events, 50 entries spread by the history Digester, causes and shaping).

Run from the repository root (the harness installs Home Assistant into .cache/ha-venv, or $CONSOLE_HA_HA_VENV):

    .venv/bin/python benchmarks/bench_logbook.py [--rows 5000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ENTITY = "input_boolean.hall_light"
MAX_BYTES = 512 * 1024 * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000, help="changes over the week (default 5,000: one "
                                                                 "every two minutes)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from console_ha.capabilities import get_logbook
    from console_ha.deadline import Deadline
    from console_ha.ha.logbook import logbook_command
    from console_ha.ha.rest_client import HomeAssistantClient
    from console_ha.secret import Secret
    from console_ha.store.config import HomeAssistantConfig
    from tests.real_ha.harness import RealHomeAssistant, default_venv, install_home_assistant

    with tempfile.TemporaryDirectory(prefix="bench-logbook-") as scratch:
        hass = RealHomeAssistant(install_home_assistant(default_venv()), Path(scratch))
        hass.provision()
        try:
            end = datetime.now(UTC).replace(microsecond=0)
            first, last = (end - timedelta(days=7, minutes=-60)).timestamp(), (end - timedelta(minutes=1)).timestamp()
            step = (last - first) / max(args.rows - 1, 1)
            hass.stop()
            loaded = hass.load_history(ENTITY, [(first + i * step, "on" if i % 2 else "off")
                                                for i in range(args.rows)])
            hass.start()
            print(f"Home Assistant {hass.base_url}: {loaded:,} changes of {ENTITY} over the week")
            client = HomeAssistantClient(hass.base_url, Secret(hass.token))
            config = HomeAssistantConfig(enabled=True, base_url=hass.base_url, allowlisted_entities=(ENTITY,))
            now = datetime.now(UTC)
            start = now - timedelta(weeks=1)

            def ha_answer() -> dict[str, Any]:
                with client.websocket(timeout=120, max_bytes=MAX_BYTES) as connection:
                    _, chunks = connection.stream(logbook_command(ENTITY, start=start, end=now))
                    body = b"".join(chunks)
                answer = json.loads(body)
                return {"entries": len(answer["result"]), "bytes": len(body)}

            def capability() -> dict[str, Any]:
                result = get_logbook.execute(client, config, {"entity_id": ENTITY, "period": "week"},
                                             Deadline(120), now)
                return {"entries": result["total"], "bytes": len(json.dumps(result))}

            variants: dict[str, Callable[[], dict[str, Any]]] = {"ha": ha_answer, "get_logbook": capability}
            for work in variants.values():
                work()  # warm Home Assistant's caches and the imports
            times: dict[str, list[float]] = {name: [] for name in variants}
            sizes: dict[str, dict[str, Any]] = {}
            for _ in range(args.repeats):
                for name, work in variants.items():
                    began = time.perf_counter()
                    sizes[name] = work()
                    times[name].append(time.perf_counter() - began)
            peaks = {}
            for name, work in variants.items():
                tracemalloc.start()
                work()
                peaks[name] = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.stop()
            ratios = [c / h for c, h in zip(times["get_logbook"], times["ha"], strict=True)]
            print(f"{'variant':<12} {'median ms':>10} {'best ms':>8} {'tracemalloc peak MiB':>21}  what")
            for name in variants:
                print(f"{name:<12} {statistics.median(times[name]) * 1000:>10.1f} {min(times[name]) * 1000:>8.1f} "
                      f"{peaks[name]:>21.2f}  {sizes[name]}")
            print(f"get_logbook / ha: median of paired ratios {statistics.median(ratios):.2f}x "
                  f"(range {min(ratios):.2f}-{max(ratios):.2f}x over {args.repeats} pairs)")
        finally:
            hass.stop()


if __name__ == "__main__":
    main()
