"""The pages stay answered while one program's token abuses `/mcp` (issue 16): the probe's load, measured.

Run from the checkout:  .venv/bin/python benchmarks/bench_mcp_load.py [--seconds 30] [--ttl 3]

It starts a stub Home Assistant and a Console served by waitress with the threads `console-ha serve`
gives it (`cli.server_threads`: 8 + MAX_WAITING + MAX_PROGRAM_MESSAGES), all on 127.0.0.1, and one API token. Then, for
`--seconds`, 16 MCP sessions of that token each loop: a tools/call with id 1 left waiting, and while it
waits the same id again as `"1"`, `1.0` and `true`, a second tool with id `"1"`, fresh ids, and every
fourth round a call whose client hangs up mid-wait. Nobody answers a card; each expires after `--ttl`.
Meanwhile one client asks for /health and /login in turn, 20 times a second. It prints the latency of
those pages during the load (max and p95, target < 1 s), how the MCP requests were answered, and, once
the last card has expired, the worker threads still held (target 0).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests
from _measure import Figure, ms

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console_ha.cli import DEFAULT_THREADS, server_threads
from console_ha.secret import Secret
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenStore
from console_ha.web import create_app
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

SESSIONS = 16
PAGE_TARGET = 1.0
PAGE_TIMEOUT = 5.0
LIST, HISTORY = "home_assistant_list_entities", "home_assistant_get_history"
ENTITY = "sensor.living_room_temperature"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


def call(request_id: Any, tool: str = LIST) -> dict[str, Any]:
    """A tools/call message; history for the one allowlisted entity."""
    arguments = {"entity_id": ENTITY, "period": "day"} if tool == HISTORY else {}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {"progressToken": 1}}}


def ping(request_id: Any) -> dict[str, Any]:
    """A ping message."""
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


class Program:
    """One MCP session of the token, sending the probe's requests and counting how they were answered."""

    def __init__(self, url: str, token: str, ttl: float) -> None:
        self.url, self.ttl = url, ttl
        headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}",
                   "Content-Type": "application/json"}
        opened = requests.post(url + "/mcp", json=INITIALIZE, headers=headers, timeout=5)
        self.headers = {**headers, "mcp-session-id": opened.headers["mcp-session-id"],
                        "mcp-protocol-version": "2025-06-18"}
        requests.post(url + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                      headers=self.headers, timeout=5)
        self.answers: Counter[str] = Counter()

    def post(self, message: dict[str, Any]) -> None:
        try:
            status = requests.post(self.url + "/mcp", json=message, headers=self.headers,
                                   timeout=self.ttl + 10).status_code
            self.answers[f"{status // 100}xx"] += 1
        except requests.RequestException:
            self.answers["no answer"] += 1

    def hang_up(self, message: dict[str, Any]) -> None:
        """Send `message` and close the socket after half a second, the call still waiting."""
        body = json.dumps(message).encode()
        host, port = self.url.removeprefix("http://").split(":")
        lines = "".join(f"{name}: {value}\r\n" for name, value in self.headers.items())
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            raw.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n{lines}Content-Length: {len(body)}\r\n\r\n"
                        .encode() + body)
            raw.settimeout(0.5)
            with contextlib.suppress(OSError):
                raw.recv(64)
        self.answers["hung up"] += 1

    def run(self, stop: threading.Event) -> None:
        with ThreadPoolExecutor(max_workers=1) as background:
            for round_no in range(2, 1_000_000):
                if stop.is_set():
                    return
                waiting = background.submit(self.post, call(1))
                time.sleep(0.1)
                for message in (ping("1"), call("1", HISTORY), ping(1.0), ping(True), call(round_no, HISTORY),
                                ping(round_no)):
                    self.post(message)
                if round_no % 4 == 0:
                    self.hang_up(call(10_000 + round_no, HISTORY))
                waiting.result()


def sample_pages(url: str, stop: threading.Event) -> dict[str, list[float]]:
    """/health and /login in turn every 50 ms until `stop`; each one's latencies (a failure counts 5 s)."""
    latencies: dict[str, list[float]] = {"/health": [], "/login": []}
    with requests.Session() as browser:
        while not stop.is_set():
            for path, seen in latencies.items():
                began = time.perf_counter()
                try:
                    ok = browser.get(url + path, timeout=PAGE_TIMEOUT).status_code == 200
                except requests.RequestException:
                    ok = False
                seen.append(time.perf_counter() - began if ok else PAGE_TIMEOUT)
            time.sleep(0.05)
    return latencies


def held(server: Any, app: Any) -> tuple[int, int | None, int | None]:
    """Busy worker threads, responses open at /mcp, and requests the event loop serves (None if unknown)."""
    endpoint = app.extensions["console_ha_mcp"]
    open_requests = getattr(endpoint, "open_requests", None)
    serving = getattr(endpoint, "serving", None)
    return (int(server.task_dispatcher.active_count), open_requests() if open_requests else None,
            serving() if serving else None)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the load runs")
    parser.add_argument("--ttl", type=float, default=3.0, help="how long a card waits before it expires")
    args = parser.parse_args()

    # The name console_ha/cli.py imports; types-waitress declares it only in waitress.server (servers lacking
    # the effective_port this reads).
    from waitress import create_server  # type: ignore[attr-defined]

    logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "Task queue depth is 2": expected here

    with tempfile.TemporaryDirectory() as tmp, StubHomeAssistant() as stub:
        data_dir = DataDir(Path(tmp))
        secrets = ConsoleSecrets(data_dir)
        secrets.set_password("benchmark password", method="pbkdf2:sha256:1000")
        token = secrets.create_api_token("probe")
        seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url, "allowlisted_entities": [ENTITY]})
        TokenStore(data_dir).write(Secret(stub.token), stub.base_url)
        app = create_app(data_dir, {"CONSOLE_HA_CONFIRMATION_TTL": args.ttl, "CONSOLE_HA_MCP_PROGRESS_INTERVAL": 1.0})
        threads = server_threads(DEFAULT_THREADS)
        server = create_server(app, host="127.0.0.1", port=0, threads=threads)
        threading.Thread(target=server.run, name="waitress", daemon=True).start()
        url = f"http://127.0.0.1:{server.effective_port}"

        programs = [Program(url, token, args.ttl) for _ in range(SESSIONS)]
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=SESSIONS + 1) as pool:
            pages = pool.submit(sample_pages, url, stop)
            loads = [pool.submit(program.run, stop) for program in programs]
            time.sleep(args.seconds)
            stop.set()
            latencies = pages.result()
            for load in loads:
                load.result(timeout=args.ttl + 30)
        # The last cards expire within the TTL; a response then gets AFTER_RESPONSE_SECONDS (5) to end.
        deadline = time.monotonic() + args.ttl + 10
        while held(server, app)[0] and time.monotonic() < deadline:
            time.sleep(0.1)
        after = held(server, app)

        answers: Counter[str] = Counter()
        for program in programs:
            answers.update(program.answers)
        print(f"{SESSIONS} sessions of one token for {args.seconds:.0f} s, cards expiring after {args.ttl:g} s, "
              f"{threads} worker threads")
        figures = []
        for path, seen in latencies.items():
            figures += [Figure(f"{path} during the load, max ({len(seen)} requests)", ms(max(seen)),
                               f"< {PAGE_TARGET:g} s", max(seen) < PAGE_TARGET),
                        Figure(f"{path} during the load, p95", ms(p95(seen)), f"< {PAGE_TARGET:g} s",
                               p95(seen) < PAGE_TARGET)]
        figures.append(Figure("MCP requests answered " + ", ".join(f"{k} {v}" for k, v in sorted(answers.items())),
                              str(sum(answers.values()))))
        figures.append(Figure("worker threads held once the cards expired", str(after[0]), "0", after[0] == 0))
        figures.append(Figure("responses open at /mcp, requests the loop serves, after", f"{after[1]}, {after[2]}",
                              "0, 0", after[1:] == (0, 0)))
        for figure in figures:
            print(figure.line())
        app.extensions["console_ha_mcp"].close()
        server.close()


if __name__ == "__main__":
    main()
