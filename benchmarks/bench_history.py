"""Benchmark: a week of 200,000 history rows read by requests' .json(), streamed over REST by fetch_history(),
and read over the WebSocket by fetch_history_ws() (one request/response, compressed rows).

Run from the repository root:

    .venv/bin/python benchmarks/bench_history.py                  # against the stub, 200,000 rows
    .venv/bin/python benchmarks/bench_history.py --base-url http://ha.local:8123 \\
        --token-file ~/.ha-token --entity-id sensor.grid_power     # against a real Home Assistant

Each measurement runs in a fresh subprocess so one variant's peak memory cannot hide in another's.
Wall time and peak RSS come from runs without tracemalloc (it slows allocation-heavy code several
times over); the tracemalloc peak comes from a separate run of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _measure import proc_status_kib, reset_peak_rss

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VARIANTS = {"json": "requests.get(...).json()", "digest": "fetch_history() via ijson",
            "ws": "fetch_history_ws() (WebSocket)"}
MAX_BYTES = 512 * 1024 * 1024  # no cap gets in the way of the comparison


def _iso_z(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def run_child(args: argparse.Namespace) -> None:
    """Measure one variant once and print the figures as JSON on stdout."""
    import requests

    from console_ha.ha.history import fetch_history, fetch_history_ws
    from console_ha.ha.rest_client import HomeAssistantClient
    from console_ha.secret import Secret

    token = Path(args.token_file).read_text(encoding="ascii").strip()
    start = datetime.fromisoformat(args.start)
    end = datetime.fromisoformat(args.end)
    url = f"{args.base_url}/api/history/period/{_iso_z(start)}"
    params = {"filter_entity_id": args.entity_id, "end_time": _iso_z(end), "minimal_response": "",
              "no_attributes": ""}
    # Both variants ask for the same uncompressed body, so they measure parsing, not HA's gzip.
    headers = {"Authorization": f"Bearer {token}", "Accept-Encoding": "identity"}

    def work() -> dict[str, Any]:
        if args.variant == "json":
            response = requests.get(url, params=params, headers=headers, timeout=300)
            response.raise_for_status()
            data = response.json()
            return {"rows": sum(len(series) for series in data), "body_bytes": len(response.content)}
        if args.variant == "ws":
            client = HomeAssistantClient(args.ws_url or args.base_url, Secret(token))
            with client.websocket(timeout=300, max_bytes=MAX_BYTES) as connection:
                digest = fetch_history_ws(connection, args.entity_id, start=start, end=end)
        else:
            client = HomeAssistantClient(args.base_url, Secret(token))
            digest = fetch_history(client, args.entity_id, start=start, end=end, timeout=300,
                                   max_bytes=MAX_BYTES)
        return {"rows": digest.total_changes + (digest.initial_state is not None), "points": len(digest.changes)}

    figures: dict[str, Any] = {"variant": args.variant}
    if args.tracemalloc:
        tracemalloc.start()
        figures.update(work())
        figures["tracemalloc_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    else:
        before = proc_status_kib("VmRSS")
        precise = reset_peak_rss()
        maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        began = time.perf_counter()
        figures.update(work())
        figures["wall_s"] = time.perf_counter() - began
        peak = proc_status_kib("VmHWM") if precise else None
        if peak is None or before is None:  # ru_maxrss: the peak of the whole process life
            peak, before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, maxrss_before
            figures["peak_source"] = "ru_maxrss"
        else:
            figures["peak_source"] = "VmHWM (reset via clear_refs)"
        figures["rss_delta_mib"] = (peak - before) / 1024
        figures["rss_floor_mib"] = before / 1024
    print(json.dumps(figures))


def measure(args: argparse.Namespace, variant: str, *, traced: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", "--variant", variant, "--base-url", args.base_url,
               "--token-file", args.token_file, "--entity-id", args.entity_id, "--start", args.start,
               "--end", args.end]
    if args.ws_url:
        command += ["--ws-url", args.ws_url]
    if traced:
        command.append("--tracemalloc")
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"{variant} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_parent(args: argparse.Namespace) -> None:
    """Set up the data (the stub unless a real HA is named), measure both variants, print a table."""
    stub = None
    ws_stub = None
    temp_token = None
    end = datetime.now(UTC).replace(microsecond=0)
    start = end - timedelta(days=args.days)
    args.start, args.end = start.isoformat(), end.isoformat()
    if args.base_url is None:
        from tests.stub_ha import StubHomeAssistant

        stub = StubHomeAssistant().start()
        began = time.perf_counter()
        # The rows run from an hour inside the window to a minute before its end, as in the notes.
        stub.add_numeric_history(args.entity_id, args.rows, start + timedelta(hours=1), end - timedelta(minutes=1),
                                 seed=1, low=0, high=5000)
        print(f"stub: {args.rows:,} rows for {args.entity_id} over {args.days} days, "
              f"made in {time.perf_counter() - began:.1f} s")
        args.base_url = stub.base_url
        # The same rows, compressed as HA's WebSocket sends them, from a WebSocket stub with the same token.
        from tests.stub_ha_ws import StubWebSocket

        ws_stub = StubWebSocket()
        ws_stub.token = stub.token
        ws_stub.history[args.entity_id] = [{"s": state, "lu": moment.timestamp()}
                                           for moment, state in stub.history[args.entity_id]]
        threading.Thread(target=ws_stub.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        args.ws_url = ws_stub.base_url
        fd, temp_token = tempfile.mkstemp(prefix="bench-token-")
        os.write(fd, stub.token.encode())
        os.close(fd)
        args.token_file = temp_token
    elif args.token_file is None:
        sys.exit("--token-file is required with --base-url")
    try:
        results: dict[str, dict[str, Any]] = {}
        for variant in VARIANTS:
            runs = [measure(args, variant, traced=False) for _ in range(args.repeat)]
            traced = measure(args, variant, traced=True)
            results[variant] = {
                "wall_s": statistics.median(r["wall_s"] for r in runs),
                "wall_all": [r["wall_s"] for r in runs],
                "rss_delta_mib": statistics.median(r["rss_delta_mib"] for r in runs),
                "rss_floor_mib": statistics.median(r["rss_floor_mib"] for r in runs),
                "tracemalloc_peak_mib": traced["tracemalloc_peak_mib"],
                "rows": runs[0]["rows"],
                "peak_source": runs[0]["peak_source"],
                **({"body_bytes": runs[0]["body_bytes"]} if "body_bytes" in runs[0] else {}),
            }
    finally:
        if stub is not None:
            stub.stop()
        if ws_stub is not None:
            ws_stub.shutdown()
            ws_stub.server_close()
        if temp_token is not None:
            os.unlink(temp_token)
    report(results, args)


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    body = results["json"].get("body_bytes", 0)
    print(f"history body: {body / 1e6:.1f} MB, {results['json']['rows']:,} rows "
          f"(fetch_history saw {results['digest']['rows']:,}); median of {args.repeat} runs, "
          f"python {sys.version.split()[0]}")
    header = f"{'variant':<28}{'wall s':>9}{'RSS peak +MiB':>15}{'tracemalloc MiB':>17}{'RSS floor MiB':>15}"
    print(header)
    print("-" * len(header))
    for variant, label in VARIANTS.items():
        r = results[variant]
        print(f"{label:<28}{r['wall_s']:>9.2f}{r['rss_delta_mib']:>15.1f}{r['tracemalloc_peak_mib']:>17.2f}"
              f"{r['rss_floor_mib']:>15.1f}")
    a, b, w = results["json"], results["digest"], results["ws"]

    def ratio(x: float, y: float) -> str:
        return f"{x / y:.1f}x" if y > 0 else "n/a"

    print(f"{'ratio .json() / digest':<28}{ratio(a['wall_s'], b['wall_s']):>9}"
          f"{ratio(a['rss_delta_mib'], b['rss_delta_mib']):>15}"
          f"{ratio(a['tracemalloc_peak_mib'], b['tracemalloc_peak_mib']):>17}")
    print(f"{'ratio .json() / WebSocket':<28}{ratio(a['wall_s'], w['wall_s']):>9}"
          f"{ratio(a['rss_delta_mib'], w['rss_delta_mib']):>15}"
          f"{ratio(a['tracemalloc_peak_mib'], w['tracemalloc_peak_mib']):>17}")
    print(f"RSS peak measured as {results['json']['peak_source']}, minus the RSS just before the call")
    print("wall times, all runs: " + "; ".join(
        f"{VARIANTS[v]}: " + ", ".join(f"{t:.2f}" for t in results[v]["wall_all"]) for v in VARIANTS))


def main() -> None:
    """Parse arguments and run as the coordinating parent or as one measuring child."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="a real Home Assistant (default: start the stub)")
    parser.add_argument("--token-file", help="file holding a long-lived access token (with --base-url)")
    parser.add_argument("--ws-url", help=argparse.SUPPRESS)  # the stub's WebSocket (set by the parent)
    parser.add_argument("--entity-id", default="sensor.grid_power")
    parser.add_argument("--rows", type=int, default=200_000, help="rows the stub records (stub only)")
    parser.add_argument("--days", type=float, default=7.0, help="length of the history window")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per variant")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--tracemalloc", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start", help=argparse.SUPPRESS)
    parser.add_argument("--end", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args)
    else:
        run_parent(args)


if __name__ == "__main__":
    main()
