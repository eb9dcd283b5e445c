"""Count what one Save of the Home Assistant settings does: config reads, token reads, lock takings, checks.

Run from the checkout:  .venv/bin/python benchmarks/bench_settings_save.py [--before 556a4a8] [--runs 30]

In one run it measures two trees, each in its own Python process: the code at `--before` (extracted with
`git archive` into a temporary directory) and this checkout. Each process opens a Console on a fresh data
dir and drives `SettingsService.save` as the settings API does (`SaveRequest.from_json`), with small
counting wrappers around `ConfigStore.read`, `TokenStore.read_record`, every `path_lock` (by the lock's
name), `check_revision`, and the changes' validation (`apply_changes` before issue 17; `with_changes`
after, which the file's parse and the save call; `apply_changes` itself is gone since issue 27). Nothing
talks to a network.

Scenarios: the page's Save on a set-up Console (the same Home Assistant, no new token, the revision it
loaded and the entities the picker showed); the first set-up Save (a new token); the page without
JavaScript (no review). Then the median wall time of the first scenario over `--runs` saves (each save
fsyncs its files, so this is mostly the disk).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parents[1]
URL = "http://ha.local:8123"
ENTITIES = [f"sensor.room_{i:02d}_temperature" for i in range(40)]


def _install_counters(counts: Counter[str]) -> None:
    """Wrap the functions a Save goes through, in every console_ha module that imported them by name."""
    from console_ha.store import atomic
    from console_ha.store import config as config_module
    from console_ha.store.config import ConfigStore
    from console_ha.store.ha_token import TokenStore

    def counting(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return function(*args, **kwargs)
        return counted

    read, read_record = ConfigStore.read, TokenStore.read_record
    ConfigStore.read = counting("config reads", read)  # type: ignore[method-assign]
    TokenStore.read_record = counting("token reads", read_record)  # type: ignore[method-assign]

    original_lock = atomic.path_lock

    @contextlib.contextmanager
    def path_lock(path: Path) -> Iterator[None]:
        counts["lock takings: the saves' lock" if Path(path).name == "settings-save"
               else "lock takings: a file's write lock"] += 1
        with original_lock(path):
            yield

    validation = "with_changes" if hasattr(config_module, "with_changes") else "apply_changes"
    replacements = {
        "path_lock": (original_lock, path_lock),
        "check_revision": (config_module.check_revision, counting("revision checks", config_module.check_revision)),
        validation: (getattr(config_module, validation),
                     counting("validations of the settings", getattr(config_module, validation))),
    }
    for module in [m for name, m in sys.modules.items() if name.startswith("console_ha")]:
        for attribute, (original, replacement) in replacements.items():
            if getattr(module, attribute, None) is original:
                setattr(module, attribute, replacement)


def _measure(runs: int) -> dict[str, Any]:
    """In this process (the tree under test first on sys.path): the counts per scenario and the timing."""
    from console_ha.console import Console
    from console_ha.settings.settings_service import SaveRequest
    from console_ha.store.datadir import DataDir

    counts: Counter[str] = Counter()
    _install_counters(counts)
    results: dict[str, Any] = {"module": __import__("console_ha").__file__, "scenarios": {}}

    def console_at(root: Path) -> Console:
        return Console.open(DataDir(root))

    def counted(console: Console, body: dict[str, Any]) -> dict[str, int]:
        counts.clear()
        console.settings.save(SaveRequest.from_json(body))
        return dict(sorted(counts.items()))

    page_save = {"enabled": True, "base_url": URL, "allowlisted_entities": ENTITIES[:20],
                 "entity_names": {e: e.split(".")[1].replace("_", " ") for e in ENTITIES[:20]}}
    with tempfile.TemporaryDirectory() as tmp:
        console = console_at(Path(tmp) / "first")
        results["scenarios"]["first set-up Save (new token, review)"] = counted(
            console, {**page_save, "access_token": "a-token-0123456789", "revision": "absent",
                      "reviewed_entities": ENTITIES})
        revision = console.settings.read().revision
        results["scenarios"]["the page's Save (same Home Assistant, review)"] = counted(
            console, {**page_save, "allowlisted_entities": ENTITIES[:25], "revision": revision,
                      "reviewed_entities": ENTITIES})
        revision = console.settings.read().revision
        results["scenarios"]["the page without JavaScript"] = counted(
            console, {"enabled": True, "base_url": URL, "allowlisted_entities": ENTITIES[:30],
                      "revision": revision})
        times = []
        for i in range(runs):
            body = {**page_save, "allowlisted_entities": ENTITIES[: 10 + i % 20],
                    "revision": console.settings.read().revision, "reviewed_entities": ENTITIES}
            start = time.perf_counter()
            console.settings.save(SaveRequest.from_json(body))
            times.append(time.perf_counter() - start)
        results["median_ms"] = round(statistics.median(times) * 1000, 2)
        console.settings.close()
    return results


def _run_tree(tree: Path, runs: int) -> dict[str, Any]:
    """`_measure` in a new process with `tree` first on sys.path."""
    here = str(CHECKOUT / "benchmarks")
    code = (f"import sys, json; sys.path.insert(0, {str(tree)!r}); sys.path.insert(1, {here!r});"
            f"import bench_settings_save as b; print(json.dumps(b._measure({runs})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    """Measure the tree at `--before` and this checkout, one after the other, and print them side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="556a4a8", help="the commit to compare with (default: before issue 17)")
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(CHECKOUT), "archive", args.before, "console_ha"],
                                 capture_output=True, check=True).stdout
        with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        before = _run_tree(Path(tmp), args.runs)
    after = _run_tree(CHECKOUT, args.runs)
    print(f"before: {args.before} ({before['module']})\nafter:  this checkout ({after['module']})\n")
    for scenario, counts_before in before["scenarios"].items():
        counts_after = after["scenarios"][scenario]
        print(scenario)
        for name in sorted(set(counts_before) | set(counts_after)):
            print(f"  {name:<38} {counts_before.get(name, 0):>3} -> {counts_after.get(name, 0):>3}")
    print(f"\nmedian wall time of the page's Save over {args.runs} saves: "
          f"{before['median_ms']} ms -> {after['median_ms']} ms")


if __name__ == "__main__":
    main()
