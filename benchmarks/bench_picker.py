"""Benchmark the entity picker with 5,000 entities: the proxy against a raw /api/states, and search in the browser.

Run from the checkout:  .venv/bin/python benchmarks/bench_picker.py [--entities 5000] [--runs 15]

It starts a stub Home Assistant and a Console (waitress, as `console-ha serve` runs it) on 127.0.0.1, then

1. fetches the picker's `GET .../entities` through the Console, as the household's logged-in browser session
   (the picker is the household's alone: an API token gets 403), and `GET /api/states` straight from the
   stub (+ json.loads), alternating, and prints the medians of time and bytes;
2. opens the settings page in Debian's Chromium, waits for the picker, then types into `Search entities`
   one key at a time and measures, per keystroke, the time from keydown to the filter handler having run
   and to the next frame (requestAnimationFrame, then a task: after style, layout and paint).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from _measure import household_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console_ha.ha.areas import AreaCache
from console_ha.secret import Secret
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenStore
from console_ha.web import create_app
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant
from tests.web.conftest import FAST_HASH, PASSWORD

API = "/api/v1/conversation/home-assistant"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1 , EXCLUDE localhost",
]
AREAS = [
    "Living room", "Kitchen", "Hallway", "Bedroom", "Bathroom", "Office", "Garage", "Garden", "Attic",
    "Basement", "Laundry", "Dining room", "Guest room", "Kids room", "Porch", "Shed", "Loft", "Study",
    "Utility", "Landing", "Nursery", "Gym", "Workshop", "Driveway", "Terrace",
]
KINDS: list[tuple[str, int, str, Callable[[random.Random], str], dict[str, Any]]] = [
    # domain, share, name, state maker, attributes
    ("sensor", 40, "temperature", lambda r: f"{r.uniform(15, 25):.1f}",
     {"state_class": "measurement", "unit_of_measurement": "°C", "device_class": "temperature"}),
    ("sensor", 10, "power", lambda r: f"{r.uniform(0, 2000):.0f}",
     {"state_class": "measurement", "unit_of_measurement": "W", "device_class": "power"}),
    ("binary_sensor", 12, "motion", lambda r: r.choice(["on", "off"]), {"device_class": "motion"}),
    ("binary_sensor", 4, "window", lambda r: r.choice(["on", "off"]), {"device_class": "window"}),
    ("light", 12, "light", lambda r: r.choice(["on", "off"]),
     {"supported_color_modes": ["brightness", "color_temp"], "color_mode": "brightness", "brightness": 180,
      "min_color_temp_kelvin": 2000, "max_color_temp_kelvin": 6535, "supported_features": 44}),
    ("switch", 8, "plug", lambda r: r.choice(["on", "off"]), {"device_class": "outlet"}),
    ("automation", 6, "automation", lambda r: "on",
     {"id": "1700000000000", "last_triggered": "2026-11-29T07:00:00+00:00", "mode": "single", "current": 0}),
    ("climate", 2, "thermostat", lambda r: "heat",
     {"hvac_modes": ["off", "heat", "auto"], "min_temp": 7, "max_temp": 35, "current_temperature": 21.0,
      "temperature": 21.5, "hvac_action": "heating", "supported_features": 387}),
    ("cover", 2, "blind", lambda r: r.choice(["open", "closed"]),
     {"current_position": 0, "device_class": "blind", "supported_features": 15}),
    ("lock", 1, "lock", lambda r: "locked", {"supported_features": 0}),
    ("camera", 1, "camera", lambda r: "idle", {"frontend_stream_type": "hls", "supported_features": 2}),
    ("person", 1, "person", lambda r: r.choice(["home", "not_home"]), {"editable": True}),
    ("update", 1, "firmware", lambda r: "off",
     {"installed_version": "1.2.3", "latest_version": "1.2.3", "release_url": "https://example.invalid/notes",
      "title": "Firmware", "auto_update": False, "in_progress": False}),
]


def make_states(count: int, seed: int = 1) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """`count` entities in /api/states' shape across domains and 25 areas (a tenth without one)."""
    rng = random.Random(seed)
    weights = [kind[1] for kind in KINDS]
    states, areas = [], {}
    now = "2026-11-30T08:00:00.000000+00:00"
    for n in range(count):
        domain, _, noun, state_of, attributes = rng.choices(KINDS, weights)[0]
        area = rng.choice(AREAS)
        slug = f"{area.lower().replace(' ', '_')}_{noun}_{n}"
        entity_id = f"{domain}.{slug}"
        state = "unavailable" if rng.random() < 0.05 else state_of(rng)
        states.append({
            "entity_id": entity_id,
            "state": state,
            "attributes": {**attributes, "friendly_name": f"{area} {noun} {n}"},
            "last_changed": now,
            "last_reported": now,
            "last_updated": now,
            "context": {"id": f"01JD{n:022d}", "parent_id": None, "user_id": None},
        })
        if rng.random() > 0.1:
            areas[entity_id] = area
    return states, areas


def serve(app: Any) -> tuple[str, Any]:
    # The name console_ha/cli.py imports; types-waitress declares it only in waitress.server (servers lacking
    # the effective_port this reads).
    from waitress import create_server  # type: ignore[attr-defined]

    server = create_server(app, host="127.0.0.1", port=0, threads=8)
    threading.Thread(target=server.run, name="console", daemon=True).start()
    return f"http://127.0.0.1:{server.effective_port}", server


def median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:7.1f} ms"


def bench_proxy(console_url: str, stub: StubHomeAssistant, runs: int) -> None:
    # The household's session cookie where a Bearer token was sent before (the picker is the household's
    # alone). The Console then checks the signed cookie against its password and sessions files, not an
    # API token's file, and sends the cookie back refreshed: about half a millisecond more a request
    # (GET /api/v1/confirmations, served alike, either way), small beside this proxy's tens of milliseconds.
    console = household_session(console_url)
    direct = requests.Session()
    direct.headers["Authorization"] = f"Bearer {stub.token}"
    proxy_t, raw_t, proxy_bytes, raw_bytes = [], [], 0, 0
    for i in range(runs + 2):
        start = time.perf_counter()
        answer = console.get(console_url + API + "/entities", timeout=30)
        answer.raise_for_status()
        body = json.loads(answer.content)
        p = time.perf_counter() - start
        start = time.perf_counter()
        raw = direct.get(stub.base_url + "/api/states", timeout=30)
        raw.raise_for_status()
        json.loads(raw.content)
        r = time.perf_counter() - start
        if i >= 2:  # two warm-up rounds: the area cache, connection pools, import-time work
            proxy_t.append(p)
            raw_t.append(r)
        proxy_bytes, raw_bytes = len(answer.content), len(raw.content)
    print(f"entities: {len(body['entities'])}, runs: {runs} (medians)")
    print(f"  raw HA  GET /api/states + json.loads : {median_ms(raw_t)}   {raw_bytes / 1024:8.1f} KiB")
    print(f"  Console GET .../entities + json.loads: {median_ms(proxy_t)}   {proxy_bytes / 1024:8.1f} KiB")
    print(f"  proxy overhead: {median_ms([p - r for p, r in zip(proxy_t, raw_t, strict=True)])}, "
          f"bytes {proxy_bytes / raw_bytes:.0%} of raw")


# Installed before the page's own scripts: timestamps for the picker's load and for each keystroke.
INSTRUMENT = """
window.__bench = {keys: [], ready: null};
new MutationObserver(() => {
  const s = document.getElementById("picker-status");
  if (s && s.textContent.startsWith("Loaded") && window.__bench.ready === null) {
    window.__bench.ready = performance.now();
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
document.addEventListener("DOMContentLoaded", () => {
  const input = document.getElementById("entity-search");
  let t0 = 0;
  input.addEventListener("keydown", () => { t0 = performance.now(); }, true);
  // Added after the picker's own listener has been added (module scripts run before DOMContentLoaded),
  // so it runs after the filter: the handler's time, then the next frame's.
  setTimeout(() => input.addEventListener("input", () => {
    const handled = performance.now();
    const query = input.value;
    requestAnimationFrame(() => setTimeout(() => {
      const shown = document.querySelectorAll("#entity-groups li.entity:not([hidden])").length;
      window.__bench.keys.push({query, handler: handled - t0, frame: performance.now() - t0, shown});
    }));
  }), 0);
});
"""


def bench_browser(console_url: str, rounds: int) -> None:
    from playwright.sync_api import expect, sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        print("browser: skipped, chromium is not installed (apt-get install -y chromium)")
        return
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(console_url + "/login")
        page.get_by_label("Password", exact=True).fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.add_init_script(INSTRUMENT)
        loads, renders = [], []
        for _ in range(3):
            page.goto(console_url + "/settings/home-assistant")
            expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=30_000)
            timing = page.evaluate("""() => {
                const r = performance.getEntriesByType("resource").find(e => e.name.endsWith("/entities"));
                return {ready: window.__bench.ready, fetched: r.responseEnd, started: r.startTime};
            }""")
            loads.append((timing["fetched"] - timing["started"]) / 1000)
            renders.append((timing["ready"] - timing["fetched"]) / 1000)
        print("browser: settings page with the picker (medians of 3 loads)")
        print(f"  fetch .../entities in the page  : {median_ms(loads)}")
        print(f"  build the list (parse + DOM)    : {median_ms(renders)}")

        search = page.get_by_label("Search entities")
        text = "kitchen light 4"
        for _ in range(rounds):
            search.click()
            # One key at a time, each measured alone: the next key waits for the last one's frame.
            for key in [*text, *["Backspace"] * len(text)]:
                before = page.evaluate("window.__bench.keys.length")
                page.keyboard.press(key)
                page.wait_for_function("n => window.__bench.keys.length > n", arg=before)
        keys = page.evaluate("window.__bench.keys")
        narrowing = [k for k in keys if k["query"] and len(k["query"]) > 0]
        handler = [k["handler"] / 1000 for k in keys]
        frame = [k["frame"] / 1000 for k in keys]
        widest = [k["frame"] / 1000 for k in keys if k["query"] == ""]
        print(f"browser: keystroke in Search entities ({len(keys)} keystrokes: typing and deleting "
              f"{text!r}, {rounds} rounds)")
        print(f"  keydown -> filter handler done  : median {median_ms(handler)}, "
              f"p95 {sorted(handler)[int(len(handler) * 0.95) - 1] * 1000:.1f} ms")
        print(f"  keydown -> next frame rendered  : median {median_ms(frame)}, "
              f"p95 {sorted(frame)[int(len(frame) * 0.95) - 1] * 1000:.1f} ms, max {max(frame) * 1000:.1f} ms")
        first = [k["frame"] / 1000 for k in keys if k["query"] == text[:1]]
        print(f"  first key (all -> {keys[0]['shown']} shown)     : median {median_ms(first)}")
        print(f"  last Backspace (back to all {keys[-1]['shown']}): median {median_ms(widest)}")
        print(f"  narrowest query shown {min(k['shown'] for k in narrowing)} entities")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3, help="typing rounds in the browser")
    args = parser.parse_args()

    states, areas = make_states(args.entities)
    with tempfile.TemporaryDirectory() as tmp, StubHomeAssistant() as stub:
        stub.states = states
        data_dir = DataDir(Path(tmp))
        ConsoleSecrets(data_dir).set_password(PASSWORD, method=FAST_HASH)
        seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url})
        TokenStore(data_dir).write(Secret(stub.token), stub.base_url)
        app = create_app(data_dir)
        # The stub has no WebSocket registries: hand the Console the areas as the registry cache would.
        app.extensions["console_ha"].settings.areas = AreaCache(fetch=lambda *a, **k: dict(areas))
        console_url, server = serve(app)
        bench_proxy(console_url, stub, args.runs)
        bench_browser(console_url, args.rounds)
        server.close()


if __name__ == "__main__":
    main()
