"""How long the Activity page's walk over a big audit log takes: `summarise` over 200,000 lines (issue 29).

Run on demand from the repository root (it is not a test):

    .venv/bin/python benchmarks/bench_activity.py              # 200,000 lines, best of 5
    .venv/bin/python benchmarks/bench_activity.py --lines 20000 --rounds 3

The lines are random but seeded: every event, every capability, a few programs and reason codes; a third
written by a Console that knew one Home Assistant (no `instance`), the rest `home`'s or `cabin`'s. Printed,
best of the rounds: the walk over lines already read (`summarise` alone), the same reading the file as the
page does (`AuditLog.events()`, each line's JSON included), and, where this Console's `summarise` takes an
`instance`, the walk that keeps only `cabin`'s lines.
"""

from __future__ import annotations

import argparse
import inspect
import json
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _measure import timed

from console_ha.capabilities.registry import REGISTRY
from console_ha.conversation.activity import summarise
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.datadir import DataDir

CODES = ("ENTITY_NOT_ALLOWLISTED", "HA_TIMEOUT", "CONFIRMATION_DENIED", None, None, None)
CLIENTS = ("desk", "kitchen-tablet", None, None)
INSTANCES = (None, "home", "cabin")


def lines(count: int, seed: int = 29) -> list[dict[str, Any]]:
    """`count` audit lines as the executor writes them, seeded."""
    rng = random.Random(seed)
    events, capabilities = list(AuditEvent), list(REGISTRY)
    made = []
    for n in range(count):
        line: dict[str, Any] = {"time": f"2026-12-04T10:{n // 60 % 60:02d}:{n % 60:02d}Z",
                                "event": rng.choice(events).value, "capability": rng.choice(capabilities),
                                "classification": "read_only/external/required", "stage": rng.randint(1, 6),
                                "invocation": f"{rng.getrandbits(64):016x}"}
        extra = {"code": rng.choice(CODES), "client": rng.choice(CLIENTS), "instance": rng.choice(INSTANCES)}
        line.update({name: value for name, value in extra.items() if value is not None})
        made.append(line)
    return made


def best(rounds: int, work: Callable[[], object]) -> float:
    """The fastest of `rounds` calls, in ms (the machine is shared: the least disturbed run)."""
    return min(timed(work)[0] for _ in range(rounds)) * 1000


def main() -> None:
    """Write the log, then time the walks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    made = lines(args.lines)
    with tempfile.TemporaryDirectory() as root:
        log = AuditLog(DataDir(Path(root)))
        log.path.parent.mkdir(parents=True)
        log.path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in made))
        print(f"{args.lines:,} lines, best of {args.rounds}")
        print(f"  summarise(lines read)        {best(args.rounds, lambda: summarise(made)):8.1f} ms")
        print(f"  summarise(AuditLog.events()) {best(args.rounds, lambda: summarise(log.events())):8.1f} ms")
        if "instance" in inspect.signature(summarise).parameters:
            only = best(args.rounds, lambda: summarise(made, instance="cabin"))
            print(f"  the same, only cabin's lines {only:8.1f} ms")


if __name__ == "__main__":
    main()
