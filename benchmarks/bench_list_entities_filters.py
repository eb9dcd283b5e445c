"""Issue 18: list_entities with a filter costs no more than without one, against a real Home Assistant 2025.4.4.

Run on demand from the repository root (it is not a test):

    .venv/bin/python benchmarks/bench_list_entities_filters.py           # 5,000 entities, 25 rounds
    .venv/bin/python benchmarks/bench_list_entities_filters.py --quick   # 1,000 entities, 5 rounds

It starts its own Home Assistant in a temporary directory with the test harness (tests/real_ha), on
127.0.0.1 only, adds state-only entities as bench_household.py does, and allowlists 200 entities: the
harness's own (which its registry places in the Living Room, the Kitchen and the Hallway) and state-only
ones. Measured in one run, interleaved in a random order each round, medians over the rounds: Home
Assistant's own answer (a raw `GET /api/states` and its json.loads), and list_entities' execute stage
without arguments and with each filter (domain; area; name; area, domain and limit together). Each variant
is printed against the raw answer, and its CPU (the Console's own cost) against the unfiltered read's in
the same round (paired median); the wall-time ratio is printed beside it for information. The areas come from the
capabilities' cache, as in use; one cold registry round (the three lists over one WebSocket) is timed apart.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests
from _measure import Figure, median, ms, timed
from bench_household import create_entities

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.real_ha.harness

ALLOWLISTED = 200
# Filtered reads may cost this much more than the unfiltered one (paired median) and still be "no more,
# within noise": the spread between two unfiltered runs on this shared machine is about that.
NOISE = 1.05
VARIANTS: dict[str, dict[str, Any]] = {
    "no arguments": {},
    "domain": {"domain": "light"},
    "area": {"area": "kitchen"},
    "name": {"name": "lamp"},
    "area, domain, limit": {"area": "Living room", "domain": "light", "limit": 5},
}


def measure(real_ha: Any, allowlist: list[str], rounds: int) -> tuple[dict[str, list[dict[str, Any]]], float]:
    """Every variant once a round, in the same order each round; and one cold registry round's seconds."""
    from console_ha.capabilities.list_entities import execute as list_entities
    from console_ha.deadline import Deadline
    from console_ha.ha.areas import AreaIndexCache, read_area_index
    from console_ha.ha.rest_client import HomeAssistantClient
    from console_ha.secret import Secret
    from console_ha.store.config import HomeAssistantConfig

    config = HomeAssistantConfig(enabled=True, base_url=real_ha.base_url, allowlisted_entities=tuple(allowlist))
    ha = requests.Session()
    ha.trust_env = False
    headers = {"Authorization": f"Bearer {real_ha.token}", "Accept-Encoding": "identity"}
    # The areas kept as a Console keeps them for its clients: one registry round, then a minute of reads.
    area_indexes = AreaIndexCache()
    client = HomeAssistantClient(real_ha.base_url, Secret(real_ha.token), area_indexes=area_indexes)

    def raw() -> dict[str, Any]:
        fetch, fetch_cpu, body = timed(lambda: ha.get(f"{real_ha.base_url}/api/states", headers=headers,
                                                      timeout=30).content)
        loads, loads_cpu, data = timed(lambda: json.loads(body))
        return {"total": fetch + loads, "cpu": fetch_cpu + loads_cpu, "count": len(data)}

    def execute(arguments: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        def work() -> dict[str, Any]:
            seconds, cpu, result = timed(lambda: list_entities(client, config, arguments, Deadline(8),
                                                               datetime.now(UTC)))
            return {"total": seconds, "cpu": cpu, "entities": len(result["entities"]), "matched": result["total"],
                    "bytes": len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())}
        return work

    cold, _, _ = timed(lambda: read_area_index(client, timeout=8))
    work = {"raw": raw, **{name: execute(arguments) for name, arguments in VARIANTS.items()}}
    area_indexes.clear()
    for each in work.values():  # connections, the areas' cache and imports warm
        each()
        each()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in work}
    order = list(work)
    shuffle = random.Random(18)
    for _ in range(rounds):
        shuffle.shuffle(order)  # no variant always runs right after another: a round's order is random
        for name in order:
            runs[name].append(work[name]())
    client.close()
    return runs, cold


def report(runs: dict[str, list[dict[str, Any]]], cold: float, notes: list[str]) -> None:
    def med(name: str, key: str = "total") -> float:
        return median([run[key] for run in runs[name]])

    def paired(name: str, base: str, key: str = "total") -> float:
        return median([a[key] / b[key] for a, b in zip(runs[name], runs[base], strict=True)])

    raw = med("raw")
    figures = [Figure(f"Home Assistant's own answer: GET /api/states + json.loads ({runs['raw'][0]['count']:,})",
                      ms(raw))]
    for name in VARIANTS:
        first = runs[name][0]
        figures.append(Figure(f"list_entities, {name} ({first['entities']} of {first['matched']} shown, "
                              f"{first['bytes']:,} B)", ms(med(name))))
        figures.append(Figure("  ... against raw fetch + json.loads (paired)", f"{paired(name, 'raw'):.2f}x"))
        figures.append(Figure("  ... CPU of this process (median)", ms(med(name, "cpu"))))
        if name != "no arguments":
            # The Console's own cost is its CPU: the wall time adds Home Assistant's answer, the same request
            # whatever the filter, and on this shared machine its spread hides a few per cent either way.
            ratio = paired(name, "no arguments", "cpu")
            figures.append(Figure("  ... CPU against no arguments (paired)", f"{ratio:.2f}x", f"<= {NOISE:.2f}x",
                                  ratio <= NOISE))
            figures.append(Figure("  ... (info) wall time against no arguments (paired)",
                                  f"{paired(name, 'no arguments'):.2f}x"))
    figures.append(Figure("(info) one cold registry round (3 lists, 1 WebSocket)", ms(cold)))
    print(f"load average (1 min) {os.getloadavg()[0]:.1f}; " + "; ".join(notes))
    for figure in figures:
        print(figure.line(62))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 entities, 5 rounds")
    parser.add_argument("--entities", type=int, help="state-only entities to create (default 5,000)")
    parser.add_argument("--rounds", type=int, help="rounds (default 25)")
    args = parser.parse_args()
    entities = args.entities or (1_000 if args.quick else 5_000)
    rounds = args.rounds or (5 if args.quick else 25)
    from tests.real_ha.harness import RealHomeAssistant, default_venv, install_home_assistant

    workdir = Path(tempfile.mkdtemp(prefix="console-ha-bench-filters-"))
    real_ha = RealHomeAssistant(install_home_assistant(default_venv()), workdir / "ha")
    notes: list[str] = []
    try:
        began = time.monotonic()
        real_ha.provision()
        created = create_entities(real_ha, entities)
        notes.append(f"HA provisioned and {len(created):,} entities created in {time.monotonic() - began:.0f} s")
        own = [entity.entity_id for entity in real_ha.entities]
        step = max(1, len(created) // (ALLOWLISTED - len(own)))
        allowlist = [*own, *created[::step]][:ALLOWLISTED]
        runs, cold = measure(real_ha, allowlist, rounds)
        report(runs, cold, notes)
    finally:
        real_ha.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
