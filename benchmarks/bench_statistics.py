"""Benchmark: get_statistics over a year of hourly rows, against Home Assistant's own WebSocket answer plus json.loads.

Run from the repository root:

    .venv/bin/python benchmarks/bench_statistics.py            # a real Home Assistant 2025.4.4 (about 4 minutes)
    .venv/bin/python benchmarks/bench_statistics.py --stub     # the stub's recorder, in a child process

The real Home Assistant is started in a temporary directory with the test harness, and a year and a day of
hourly energy sums and temperature means, minima and maxima are imported through its own recorder import
(`recorder/import_statistics`). Both variants then read the same period, alternating, in one run:

- **baseline**: connect and authenticate a WebSocket, send the same `recorder/statistics_during_period`
  (hourly, the same window and fields), take the whole answer and `json.loads` it;
- **get_statistics**: the capability's execute stage as the executor runs it: `/api/config` for the time
  zone, the metadata, the hourly rows streamed and folded into points and a summary.

Times are medians over the iterations; the ratio's target is ≤ 1.1x. The added peak memory of one
execute is tracemalloc's peak (target ≤ 16 MiB), beside the baseline's own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from _measure import timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console_ha.capabilities import get_statistics  # noqa: E402 - after the path is set
from console_ha.capabilities.time_zone import household_zone  # noqa: E402
from console_ha.deadline import Deadline  # noqa: E402
from console_ha.ha.rest_client import HomeAssistantClient  # noqa: E402
from console_ha.ha.statistics import StatisticsMeta, statistics_command  # noqa: E402
from console_ha.secret import Secret  # noqa: E402
from console_ha.store.config import HomeAssistantConfig  # noqa: E402

MAX_BYTES = 64 * 1024 * 1024
TIMEOUT = 120.0
ENERGY = "sensor.console_test_energy"
TEMPERATURE = "sensor.console_test_outdoor_temperature"
KINDS = {ENERGY: StatisticsMeta("meter", "kWh"), TEMPERATURE: StatisticsMeta("measurement", "°C")}


@contextmanager
def real_home_assistant() -> Iterator[tuple[str, str]]:
    """A real Home Assistant with a year of imported statistics: its URL and token."""
    from tests.real_ha.harness import RealHomeAssistant, default_venv, install_home_assistant
    from tests.real_ha.test_statistics_real import (
        ENERGY_METADATA,
        TEMPERATURE_METADATA,
        import_statistics,
        year_of_statistics,
    )

    with tempfile.TemporaryDirectory(prefix="bench-statistics-") as workdir:
        real_ha = RealHomeAssistant(install_home_assistant(default_venv()), Path(workdir) / "ha")
        try:
            began = time.perf_counter()
            real_ha.provision()
            year = year_of_statistics()
            import_statistics(real_ha, ENERGY_METADATA, year["energy"])
            import_statistics(real_ha, TEMPERATURE_METADATA, year["temperature"])
            print(f"real Home Assistant {real_ha.base_url}: {len(year['energy']):,} hourly rows of each imported "
                  f"in {time.perf_counter() - began:.0f} s")
            yield real_ha.base_url, real_ha.token
        finally:
            real_ha.stop()


@contextmanager
def stub_home_assistant() -> Iterator[tuple[str, str]]:
    """The stub, in a child process (its work is not this process's time or memory), with the same statistics."""
    child = subprocess.Popen([sys.executable, __file__, "--serve-stub"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert child.stdout is not None
        served = json.loads(child.stdout.readline())
        print(f"stub {served['base_url']}: hourly rows of each made in the child")
        yield served["base_url"], served["token"]
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=30)


def serve_stub() -> None:
    """(The child) the stub with the real test's year of statistics, until stdin closes."""
    from tests.real_ha.test_statistics_real import ENERGY_METADATA, TEMPERATURE_METADATA, year_of_statistics
    from tests.stub_ha import StubHomeAssistant

    year = year_of_statistics()
    with StubHomeAssistant() as stub:
        served = stub.serve_statistics(seeded=False)
        for metadata, rows in ((ENERGY_METADATA, year["energy"]), (TEMPERATURE_METADATA, year["temperature"])):
            stub_metadata = {**metadata, "display_unit_of_measurement": metadata["unit_of_measurement"],
                             "statistics_unit_of_measurement": metadata["unit_of_measurement"],
                             "mean_type": 1 if metadata["has_mean"] else 0}
            served.add(stub_metadata, [{**row, "start": int(row["start"].timestamp())} for row in rows])
        print(json.dumps({"base_url": stub.base_url, "token": stub.token}), flush=True)
        sys.stdin.read()


def baseline(base_url: str, token: str, entity_id: str, start: datetime, end: datetime) -> int:
    """Home Assistant's own answer to the same hourly request, whole, and json.loads: how many rows."""
    command = statistics_command(entity_id, KINDS[entity_id], start=start, end=end)
    with HomeAssistantClient(base_url, Secret(token)) as client, \
            client.websocket(timeout=TIMEOUT, max_bytes=MAX_BYTES) as connection:
        _, chunks = connection.stream(command)
        answer = json.loads(b"".join(chunks))
    return len(answer["result"].get(entity_id, []))


def capability(base_url: str, token: str, entity_id: str, period: str, now: datetime) -> dict[str, Any]:
    """The capability's execute stage, as the executor runs it."""
    with HomeAssistantClient(base_url, Secret(token)) as client:
        return get_statistics.execute(client, HomeAssistantConfig(), {"entity_id": entity_id, "period": period},
                                      Deadline(TIMEOUT), now)


def traced_peak(work: Callable[[], Any]) -> float:
    """tracemalloc's peak during `work`, in MiB."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def measure(base_url: str, token: str, entity_id: str, period: str, iterations: int) -> dict[str, Any]:
    now = datetime.now(UTC)
    zone = household_zone(HomeAssistantClient(base_url, Secret(token)).config(timeout=TIMEOUT))
    start, end = get_statistics.PERIODS[period].window(now.astimezone(zone))
    rows = baseline(base_url, token, entity_id, start, end)  # and a warm-up of each
    result = capability(base_url, token, entity_id, period, now)
    times: dict[str, list[float]] = {"baseline": [], "capability": []}
    for _ in range(iterations):
        times["baseline"].append(timed(lambda: baseline(base_url, token, entity_id, start, end))[0])
        times["capability"].append(timed(lambda: capability(base_url, token, entity_id, period, now))[0])
    base, ours = statistics.median(times["baseline"]), statistics.median(times["capability"])
    paired = statistics.median(c / b for b, c in zip(times["baseline"], times["capability"], strict=True))
    return {
        "entity_id": entity_id, "period": period, "rows": rows, "points": len(result["points"]),
        "baseline_ms": base * 1000, "capability_ms": ours * 1000, "ratio": ours / base, "paired_ratio": paired,
        "baseline_traced_mib": traced_peak(lambda: baseline(base_url, token, entity_id, start, end)),
        "capability_traced_mib": traced_peak(lambda: capability(base_url, token, entity_id, period, now)),
        "result_bytes": len(json.dumps(result, ensure_ascii=False).encode()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stub", action="store_true", help="the stub's recorder instead of a real Home Assistant")
    parser.add_argument("--iterations", type=int, default=15)
    parser.add_argument("--serve-stub", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_stub:
        serve_stub()
        return
    if not args.stub:
        os.environ.setdefault("CONSOLE_HA_HA_VENV", str(ROOT / ".cache" / "ha-venv"))
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    with (stub_home_assistant() if args.stub else real_home_assistant()) as (base_url, token):
        print(f"{'entity':42} {'period':15} {'rows':>6} {'HA+loads':>9} {'execute':>9} {'ratio':>6} {'paired':>6} "
              f"{'traced HA+loads/execute':>24} {'result':>7}")
        for entity_id, period in ((ENERGY, "past_12_months"), (TEMPERATURE, "past_12_months"),
                                  (ENERGY, "last_month")):
            f = measure(base_url, token, entity_id, period, args.iterations)
            print(f"{entity_id:42} {period:15} {f['rows']:6,} {f['baseline_ms']:7.1f}ms {f['capability_ms']:7.1f}ms "
                  f"{f['ratio']:5.2f}x {f['paired_ratio']:5.2f}x "
                  f"{f['baseline_traced_mib']:9.2f} / {f['capability_traced_mib']:5.2f} MiB {f['result_bytes']:5,} B")
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    print("targets: execute <= 1.1x Home Assistant's answer + json.loads; traced peak of execute <= 16 MiB")


if __name__ == "__main__":
    main()
