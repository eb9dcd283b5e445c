"""Issue 29: a read with two Home Assistants configured costs no more than 1.05x the same read with one, against
a real Home Assistant 2025.4.4.

Run on demand from the repository root (it is not a test):

    .venv/bin/python benchmarks/bench_instances.py            # 100 rounds
    .venv/bin/python benchmarks/bench_instances.py --quick    # 10 rounds

It starts its own Home Assistant in a temporary directory with the test harness (tests/real_ha), on 127.0.0.1
only, and opens two Consoles (`Console.open`) over two data dirs saved through the settings save: **one** knows
only `home` (that core, every entity of the harness allowlisted); **two** knows the same `home` and a second
instance, `cabin`, named and allowlisted too, at an address nothing answers (it is never read: the subject is
what knowing a second instance costs a read of the first). Each round runs, in a random order, the same read on
both Consoles: `get_state` of one sensor and `list_entities` of the allowlist, each proposed and allowed through
the Console's executor, its kept clients and its audit log, as the conversation page runs it. Printed: the median
time of each, the paired median ratio two / one (the target, <= 1.05x) and the same for the CPU of this process.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _measure import Figure, harness_core, median, ms, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.real_ha.harness

TARGET = 1.05
ENTITY = "sensor.living_room_temperature"  # the harness's, and the stub's
CONVERSATION = "bench-instances"
# Never read: the second instance's address (its token is made afresh each run, and never sent).
CABIN_URL = "http://127.0.0.1:9"
# (information) get_state's card alone, proposed and withdrawn: what a second instance adds to the Console's own
# work, without Home Assistant's answer and its spread.
CARD_ONLY = "get_state's card alone"
READS: dict[str, dict[str, Any]] = {
    "get_state": {"entity_id": ENTITY},
    "list_entities": {},
}


@dataclass(frozen=True)
class Core:
    """The Home Assistant read: its base URL, its token and the entities to allowlist."""

    base_url: str
    token: str
    entities: tuple[str, ...]


def open_console(root: Path, core: Core, *, with_cabin: bool) -> Any:
    """A Console over a fresh data dir with `home` saved for `core` (and, if asked, a second instance)."""
    from console_ha.console import Console
    from console_ha.settings.saving import save_settings
    from console_ha.store.datadir import DataDir
    from console_ha.store.ha_token import check_token
    from console_ha.store.instances import Instances

    data_dir = DataDir(root)
    data_dir.ensure()
    instances = Instances(data_dir)
    allowlist = list(core.entities)
    save_settings(instances.home.config, instances.home.token,
                  {"enabled": True, "base_url": core.base_url, "allowlisted_entities": allowlist},
                  token=check_token(core.token))
    if with_cabin:
        cabin = instances.get("cabin")
        save_settings(cabin.config, cabin.token, {"enabled": True, "base_url": CABIN_URL, "name": "Cabin",
                                                  "allowlisted_entities": allowlist},
                      token=check_token(secrets.token_urlsafe(32)))
    console = Console.open(data_dir)
    if console.instances.ids() != (("home", "cabin") if with_cabin else ("home",)):
        raise RuntimeError(f"the Console at {root} knows {console.instances.ids()}")
    return console


def reader(console: Any, capability: str, arguments: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """One read as the household's page runs it: proposed, allowed, executed; its wall and CPU seconds."""
    executor = console.executor

    def read() -> dict[str, Any]:
        def once() -> dict[str, Any]:
            proposal = executor.propose(capability, arguments, conversation_id=CONVERSATION)
            return dict(executor.answer(proposal.token, approve=True, conversation_id=CONVERSATION))

        seconds, cpu, result = timed(once)
        if result.get("instance") != "home":
            raise RuntimeError(f"{capability} read {result.get('instance')!r}, not home")
        return {"total": seconds, "cpu": cpu}
    return read


def proposer(console: Any, capability: str, arguments: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """Stages 1-4 alone (the card, then withdrawn): the Console's own part, with no Home Assistant in it."""
    executor = console.executor

    def propose() -> dict[str, Any]:
        def once() -> None:
            proposal = executor.propose(capability, arguments, conversation_id=CONVERSATION)
            executor.withdraw(proposal.token, conversation_id=CONVERSATION)

        seconds, cpu, _ = timed(once)
        return {"total": seconds, "cpu": cpu}
    return propose


def measure(core: Core, rounds: int, workdir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every (read, Console) pair once a round, in a random order each round, after two warm-up reads each."""
    from console_ha.capabilities.registry import REGISTRY

    consoles = {"one": open_console(workdir / "one", core, with_cabin=False),
                "two": open_console(workdir / "two", core, with_cabin=True)}
    names = {short: next(name for name in REGISTRY if name.endswith("." + short)) for short in READS}
    work = {f"{read} {which}": reader(console, names[read], arguments)
            for read, arguments in READS.items() for which, console in consoles.items()}
    for which, console in consoles.items():
        work[f"{CARD_ONLY} {which}"] = proposer(console, names["get_state"], READS["get_state"])
    for each in work.values():  # connections, the areas' cache and imports warm
        each()
        each()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in work}
    order = list(work)
    shuffle = random.Random(29)
    for _ in range(rounds):
        shuffle.shuffle(order)
        for name in order:
            runs[name].append(work[name]())
    return runs


def report(runs: dict[str, list[dict[str, Any]]], notes: Sequence[str]) -> None:
    """Each read's medians with one and two instances, and the paired ratios against the target."""
    def med(name: str, key: str) -> float:
        return median([run[key] for run in runs[name]])

    def paired(read: str, key: str) -> float:
        return median([two[key] / one[key] for one, two in zip(runs[f"{read} one"], runs[f"{read} two"],
                                                                strict=True)])

    figures: list[Figure] = []
    for read in READS:
        figures.append(Figure(f"{read}, one instance (median)", ms(med(f"{read} one", "total"))))
        figures.append(Figure(f"{read}, two instances (median)", ms(med(f"{read} two", "total"))))
        ratio = paired(read, "total")
        figures.append(Figure(f"{read}: two against one (paired median)", f"{ratio:.3f}x",
                              f"<= {TARGET:.2f}x", ratio <= TARGET))
        figures.append(Figure("  ... CPU of this process, one / two (median)",
                              f"{ms(med(f'{read} one', 'cpu'))} / {ms(med(f'{read} two', 'cpu'))}"))
        figures.append(Figure("  ... CPU, two against one (paired median)", f"{paired(read, 'cpu'):.3f}x"))
    one, two = med(f"{CARD_ONLY} one", "total"), med(f"{CARD_ONLY} two", "total")
    figures.append(Figure(f"(info) {CARD_ONLY}, one / two (median)", f"{one * 1e6:.0f} / {two * 1e6:.0f} us"))
    figures.append(Figure("  ... two against one (paired median)", f"{paired(CARD_ONLY, 'total'):.3f}x"))
    print(f"load average (1 min) {os.getloadavg()[0]:.1f}; rounds {len(runs['get_state one'])}; " + "; ".join(notes))
    for figure in figures:
        print(figure.line(56))


@contextmanager
def real_core(notes: list[str]) -> Iterator[Core]:
    """A provisioned Home Assistant 2025.4.4 of the harness (`harness_core`), as this benchmark reads it."""
    with harness_core(notes, "instances") as real_ha:
        yield Core(real_ha.base_url, real_ha.token, tuple(entity.entity_id for entity in real_ha.entities))


def main(argv: Sequence[str] | None = None, *, core: Core | None = None) -> None:
    """Measure and print; against `core` when given (a test's stub), else a real core it starts."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 rounds")
    parser.add_argument("--rounds", type=int, help="rounds (default 100)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (10 if args.quick else 100)
    notes: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix="console-ha-bench-instances-"))
    try:
        if core is not None:
            report(measure(core, rounds, workdir), [*notes, f"against {core.base_url}"])
            return
        with real_core(notes) as started:
            report(measure(started, rounds, workdir), notes)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
