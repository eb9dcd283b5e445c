"""Benchmark find_entities over 5,000 states against Home Assistant's own /api/states fetch plus json.loads.

Run from the checkout:  .venv/bin/python benchmarks/bench_find_entities.py [--entities 5000] [--runs 15] [--real]

With --real, a real Home Assistant 2025.4.4 (tests/real_ha's harness, in a temporary directory) is given
state-only entities up to --entities (bench_household's household, which has no areas) instead of the stub.

A stub Home Assistant on 127.0.0.1 serves `bench_picker.make_states` (5,000 entities over 25 areas, the
registries on its WebSocket). In one run, alternating, it times

- raw: `GET /api/states` with requests, then `json.loads` of the body (what a client of Home Assistant pays
  at least to see every state);
- find_entities' execute stage with a kept client (as the Console lends one), for an allowlist of 150 and
  of 400 entities and three queries, the areas kept per Home Assistant as the Console keeps them (the first,
  cold, round is printed apart);

and prints the medians and the ratio of each to raw (target: at most 1.1x).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import requests
from _measure import median, timed
from bench_picker import make_states

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console_ha.capabilities.entity_budget import json_size
from console_ha.capabilities.find_entities import execute as find_entities
from console_ha.capabilities.find_entities import find
from console_ha.deadline import Deadline
from console_ha.ha.areas import AreaIndexCache
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from console_ha.store.config import HomeAssistantConfig
from tests.stub_ha import StubHomeAssistant

QUERIES = ("kitchen lights", "thermometer in the bedroom", "Garage door lock")
TARGET = 1.1


class Measured(NamedTuple):
    """Each variant's times, its paired ratios to the floor, the search's own times, result sizes, the cold read."""

    times: dict[str, list[float]]
    ratios: dict[str, list[float]]
    own: dict[str, list[float]]
    sizes: dict[str, int]
    cold: float


def measure_real(count: int, runs: int) -> Measured:
    """`count` state-only entities posted to a real Home Assistant (as bench_household builds them), measured."""
    from bench_household import create_entities

    from tests.real_ha.harness import RealHomeAssistant, default_venv, install_home_assistant

    workdir = Path(tempfile.mkdtemp(prefix="console-ha-bench-find-"))
    real_ha = RealHomeAssistant(install_home_assistant(default_venv()), workdir / "ha")
    try:
        real_ha.provision()
        create_entities(real_ha, count - len(real_ha.get("/api/states").json()))
        states = real_ha.get("/api/states").json()
        return measure(real_ha.base_url, real_ha.token, states, runs)
    finally:
        real_ha.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def measure(base_url: str, token: str, states: list[dict[str, Any]], runs: int) -> Measured:
    """Alternating reads of the floor and of find_entities against the Home Assistant at `base_url`."""
    count = len(states)
    raw_session = requests.Session()
    raw_session.trust_env = False
    headers = {"Authorization": f"Bearer {token}", "Accept-Encoding": "identity"}
    # The areas kept as a Console keeps them for its clients: one registry round, then a minute of reads.
    area_indexes = AreaIndexCache()
    client = HomeAssistantClient(base_url, Secret(token), area_indexes=area_indexes)
    # Every 12th entity, then every 5th: a household's picks spread over the house.
    configs = {size: HomeAssistantConfig(enabled=True, base_url=base_url,
                                         allowlisted_entities=tuple(s["entity_id"] for s in states[::step][:size]))
               for size, step in ((150, 12), (400, 5))}

    def raw() -> float:
        seconds, _, body = timed(lambda: raw_session.get(f"{base_url}/api/states", headers=headers,
                                                         timeout=30).content)
        loads, _, data = timed(lambda: json.loads(body))
        assert len(data) == count
        return seconds + loads

    sizes: dict[str, int] = {}

    def search(size: int, query: str) -> float:
        seconds, _, result = timed(lambda: find_entities(client, configs[size], {"query": query}, Deadline(8),
                                                         datetime.now(UTC)))
        sizes[f"{size}/{query}"] = json_size(result)
        assert "areas_known" not in result, "the registries answered"
        return seconds

    area_indexes.clear()
    cold, _, _ = timed(lambda: find_entities(client, configs[150], {"query": QUERIES[0]}, Deadline(8),
                                             datetime.now(UTC)))
    raw()
    raw()
    variants = [(size, query) for size in configs for query in QUERIES]
    times: dict[str, list[float]] = {"raw": []}
    ratios: dict[str, list[float]] = {}
    for _ in range(runs):
        for size, query in variants:
            before = raw()
            ours = search(size, query)
            after = raw()
            name = f"{size}/{query}"
            times.setdefault(name, []).append(ours)
            times["raw"] += [before, after]
            # Paired: each read against the mean of the raw fetches either side of it.
            ratios.setdefault(name, []).append(ours / ((before + after) / 2))
    client.close()
    # The search's own work, over states already parsed: what find_entities adds to a fetch and a parse.
    index = area_indexes.get(HomeAssistantClient(base_url, Secret(token)), timeout=8)
    own: dict[str, list[float]] = {}
    for _ in range(runs):
        for size, query in variants:
            config = configs[size]
            seconds, _, _ = timed(partial(find, states, config, index.area_name, query))
            own.setdefault(f"{size}/{query}", []).append(seconds)

    return Measured(times, ratios, own, sizes, cold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--real", action="store_true",
                        help="against a real Home Assistant 2025.4.4 with state-only entities, instead of the stub")
    args = parser.parse_args()

    if args.real:
        where = "real Home Assistant on 127.0.0.1 (state-only entities: no areas)"
        measured = measure_real(args.entities, args.runs)
    else:
        where = "stub Home Assistant on 127.0.0.1"
        states, areas = make_states(args.entities)
        with StubHomeAssistant() as stub:
            stub.states = states
            stub.serve_registries(areas)
            measured = measure(stub.base_url, stub.token, states, args.runs)
    times, ratios, own, sizes, cold = measured
    print(f"entities: {args.entities}, runs: {args.runs} (medians), {where}")
    print(f"  raw GET /api/states + json.loads          {median(times['raw']) * 1000:7.1f} ms")
    print(f"  find_entities, areas cold (first read)    {cold * 1000:7.1f} ms")
    worst = 0.0
    for name, samples in times.items():
        if name == "raw":
            continue
        ratio = median(ratios[name])
        worst = max(worst, ratio)
        print(f"  find_entities {name:<28} {median(samples) * 1000:7.1f} ms   {ratio:5.2f}x paired   "
              f"search alone {median(own[name]) * 1000:5.1f} ms   {sizes[name]:5d} B result")
    pooled = median([r for samples in ratios.values() for r in samples])
    print(f"  all reads, paired median ratio: {pooled:.2f}x (target <= {TARGET}x): "
          f"{'met' if pooled <= TARGET else 'MISSED'}; the worst query's: {worst:.2f}x")
    sys.stdout.flush()
    summary: dict[str, Any] = {"pooled_ratio": pooled, "worst_ratio": worst}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
