"""What the stage hooks cost a read (issue 30): with no plugin, no more than 1.02x of today's; with the two example
plugins installed and on, no more than 1.1x; measured in one run, against a real Home Assistant 2025.4.4.

Run on demand from the repository root (it is not a test):

    .venv/bin/python benchmarks/bench_plugins.py            # 300 rounds
    .venv/bin/python benchmarks/bench_plugins.py --quick    # 30

It starts its own Home Assistant in a temporary directory with the test harness (tests/real_ha), on 127.0.0.1
only, as benchmarks/bench_instances.py does. One read is `home_assistant.get_state` of one sensor as the
household's page runs it: proposed through the real executor, the card told to the plugins ("waiting"), allowed,
read and shaped, the card told again ("allowed"); the client kept open as the Console keeps it. Three kinds:

- **before**: an executor without plugins (`plugins=None`: no hook looked at) and no card told: the Console's
  path before issue 30;
- **no plugin**: what `Console.open` builds when none is installed: an empty `Plugins` (each hook's
  implementations looked up, none called) and its `StageHookRunner` (nothing queued);
- **two examples**: plugins/quiet_hours with quiet hours set away from now (so it lets every read through, as it
  does all day but its hours), and plugins/notify pointed at a loopback server that records each POST and
  answers at once.

Each round runs the three in a random order. A read is timed as the household waits for it: from the proposal to
the card told waiting (the card shown), then from its yes to the shaped result and the card told allowed. Between
the two the household reads the card, and that is when the plugins are told of it (on the Console's worker
thread, never waited for): notify's POST happens there, untimed, let finish before the yes, as it does while a
card waits for a person. Printed: each kind's median, and the paired median ratios no plugin / before
(<= 1.02x) and two examples / before (<= 1.1x), for wall time and for this process's CPU; and, as information,
the same with the plugins' own work (the POST, the hooks told allowed) counted in.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from _measure import Figure, harness_core, median, ms, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.real_ha.harness, tests.example_plugins

from console_ha.answers.card_events import HOUSEHOLD_PRINCIPAL, StageHookRunner  # noqa: E402
from console_ha.capabilities.confirmations import ConfirmationStore  # noqa: E402
from console_ha.capabilities.executor import Executor, Proposal  # noqa: E402
from console_ha.capabilities.get_state import NAME as GET_STATE  # noqa: E402
from console_ha.console import CONSOLE_READS  # noqa: E402
from console_ha.ha.kept_clients import LendClient  # noqa: E402
from console_ha.ha.rest_client import HomeAssistantClient  # noqa: E402
from console_ha.plugins.plugin_registry import Plugins  # noqa: E402
from console_ha.plugins.plugin_settings import PluginSettings  # noqa: E402
from console_ha.secret import Secret  # noqa: E402
from console_ha.store.audit import AuditLog  # noqa: E402
from console_ha.store.datadir import DataDir  # noqa: E402
from console_ha.store.instances import Instances  # noqa: E402
from console_ha.store.plugin_switches import PluginSwitches  # noqa: E402
from console_ha.store.plugin_values import PluginValuesFile  # noqa: E402
from tests.example_plugins import load_example  # noqa: E402
from tests.seed import seed_settings  # noqa: E402

ENTITY = "sensor.living_room_temperature"  # the harness's, and the stub's
CONVERSATION = "bench-plugins"
TARGETS = {"no plugin": 1.02, "two examples": 1.1}
KINDS = ("before", "no plugin", "two examples")


@dataclass(frozen=True)
class Core:
    """The Home Assistant read: its base URL and its token."""

    base_url: str
    token: str


@dataclass
class Kind:
    """One way to read: its executor, and the runner that tells its plugins of the card (None: before issue 30)."""

    executor: Executor
    hooks: StageHookRunner | None = None
    runs: list[dict[str, float]] = field(default_factory=list)
    proposal: Proposal | None = None  # the card last shown, to tell it allowed


def kept_client(client: HomeAssistantClient) -> LendClient:
    """Lends the one open client for every read, as the Console's kept clients do (no connection set up per read)."""
    @contextmanager
    def lend(_base_url: str, _token: Secret, _ca_bundle: str | None) -> Iterator[HomeAssistantClient]:
        yield client
    return lend


def shown(kind: Kind) -> str:
    """The card proposed and told waiting: what the household waits for before it sees the card; its token."""
    proposal = kind.executor.propose(GET_STATE, {"entity_id": ENTITY}, conversation_id=CONVERSATION)
    if kind.hooks is not None:
        kind.hooks.card("waiting", proposal, HOUSEHOLD_PRINCIPAL)
        kind.proposal = proposal
    return proposal.token


def allowed(kind: Kind, token: str) -> dict[str, Any]:
    """The household's yes: the read run and shaped, the card told allowed; what it waits for after its yes."""
    result = dict(kind.executor.answer(token, approve=True, conversation_id=CONVERSATION))
    if kind.hooks is not None and kind.proposal is not None:
        kind.hooks.card("allowed", kind.proposal, HOUSEHOLD_PRINCIPAL)
    if result.get("entity_id") != ENTITY:
        raise RuntimeError(f"the read answered {result}")
    return result


def settled(kind: Kind) -> tuple[float, float]:
    """Wait until the plugins have been told every card event so far (notify's POST has ended); wall and CPU."""
    wall, cpu, _ = timed(lambda: kind.hooks.settled() if kind.hooks is not None else None)
    return wall, cpu


def measured(kind: Kind) -> dict[str, float]:
    """One read as the household lives it, in wall and CPU seconds: the card shown, then (while the household reads
    it: untimed) the plugins told of it, then the yes and the result; and all of it with the plugins' work too."""
    shown_wall, shown_cpu, token = timed(partial(shown, kind))
    waiting_wall, waiting_cpu = settled(kind)  # notify's POST, while the card waits for the household
    answer_wall, answer_cpu, _ = timed(partial(allowed, kind, token))
    told_wall, told_cpu = settled(kind)
    return {"wall": shown_wall + answer_wall, "cpu": shown_cpu + answer_cpu,
            "all wall": shown_wall + waiting_wall + answer_wall + told_wall,
            "all cpu": shown_cpu + waiting_cpu + answer_cpu + told_cpu}


# The household's notification server, in a process of its own (its work is not the Console's): each POST counted
# and answered at once in one write (no Nagle wait on loopback); a GET is answered the count so far.
NOTIFY_SERVER = """
import socket, sys
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
posts = 0
while True:
    connection, _ = listener.accept()
    with connection:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        received = b""
        while b"\\r\\n\\r\\n" not in received:
            chunk = connection.recv(4096)
            if not chunk:
                break
            received += chunk
        posts += received.startswith(b"POST ")
        body = str(posts).encode() if received.startswith(b"GET ") else b"{}"
        connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n%s"
                           % (len(body), body))
"""


class NotifyServer:
    """The loopback server notify is pointed at, in its own process; `posts()` asks it how many POSTs came."""

    def __init__(self) -> None:
        self._process = subprocess.Popen([sys.executable, "-c", NOTIFY_SERVER], stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        self._base = f"http://127.0.0.1:{self._process.stdout.readline().strip()}"
        self.url = f"{self._base}/console-cards"

    def posts(self) -> int:
        with urllib.request.urlopen(f"{self._base}/count", timeout=10) as answer:
            return int(answer.read())

    def close(self) -> None:
        self._process.kill()
        self._process.wait()


def examples(data_dir: DataDir, notify_url: str) -> Plugins:
    """quiet_hours and notify registered as the Console registers an installed plugin, their settings saved."""
    plugins = Plugins(PluginSwitches(data_dir), PluginSettings(PluginValuesFile(data_dir)))
    quiet_hours = load_example("quiet_hours")
    plugins.register(quiet_hours, "quiet_hours")
    plugins.register(load_example("notify"), "notify")
    away = quiet_hours.now() + timedelta(hours=6)  # quiet for an hour, six hours from now: every read goes through
    plugins.save_settings("quiet_hours", {"start": f"{away:%H:%M}", "end": f"{away + timedelta(hours=1):%H:%M}"})
    plugins.save_settings("notify", {"url": notify_url})
    return plugins


def measure(core: Core, rounds: int, workdir: Path) -> tuple[dict[str, Kind], int]:
    """Every kind once a round, in a random order each round, after two warm reads each; and notify's POSTs."""
    data_dir = DataDir(workdir / "data")
    data_dir.ensure()
    seed_settings(data_dir, {"enabled": True, "base_url": core.base_url, "allowlisted_entities": [ENTITY]},
                  token=core.token)
    notify = NotifyServer()
    try:
        with HomeAssistantClient(core.base_url, Secret(core.token), reads=CONSOLE_READS) as client:
            audit = AuditLog(data_dir)

            def executor(plugins: Plugins | None) -> Executor:
                return Executor(Instances(data_dir), audit=audit, confirmations=ConfirmationStore(),
                                clients=kept_client(client), plugins=plugins)

            none = Plugins(PluginSwitches(data_dir))
            both = examples(data_dir, notify.url)
            kinds = {"before": Kind(executor(None)),
                     "no plugin": Kind(executor(none), StageHookRunner(none, audit)),
                     "two examples": Kind(executor(both), StageHookRunner(both, audit))}
            for kind in kinds.values():  # warm: the first reads open what later reads reuse
                measured(kind)
                measured(kind)
            warm_posts = notify.posts()
            order = list(kinds)
            shuffle = random.Random(30)
            for _ in range(rounds):
                shuffle.shuffle(order)
                for name in order:
                    kinds[name].runs.append(measured(kinds[name]))
            return kinds, notify.posts() - warm_posts
    finally:
        notify.close()


def report(kinds: dict[str, Kind], posts: int, notes: Sequence[str]) -> list[Figure]:
    """Each kind's medians, and the paired median ratios against before; printed, and returned (for a test)."""
    rounds = len(kinds["before"].runs)

    def med(name: str, key: str) -> float:
        return median([run[key] for run in kinds[name].runs])

    def paired(name: str, key: str) -> float:
        return median([run[key] / before[key] for run, before in zip(kinds[name].runs, kinds["before"].runs,
                                                                       strict=True)])

    figures = [Figure(f"{name}: a read (median)", ms(med(name, "wall"))) for name in KINDS]
    for name, target in TARGETS.items():
        ratio = paired(name, "wall")
        figures.append(Figure(f"{name} against before, wall (paired median)", f"{ratio:.3f}x",
                              f"<= {target:.2f}x", ratio <= target))
        figures.append(Figure("  ... CPU of this process, this / before (median)",
                              f"{ms(med(name, 'cpu'))} / {ms(med('before', 'cpu'))}"))
        cpu_ratio = paired(name, "cpu")
        figures.append(Figure("  ... CPU against before (paired median)", f"{cpu_ratio:.3f}x", f"<= {target:.2f}x",
                              cpu_ratio <= target))
    for name in TARGETS:
        figures.append(Figure(f"(info) {name} with the plugins' work too, wall (paired)",
                              f"{paired(name, 'all wall'):.3f}x"))
        figures.append(Figure("  ... CPU, all of it, this / before (median, paired)",
                              f"{ms(med(name, 'all cpu'))} / {ms(med('before', 'all cpu'))}, "
                              f"{paired(name, 'all cpu'):.3f}x"))
    print(f"load average (1 min) {os.getloadavg()[0]:.1f}; rounds {rounds}; notify's POSTs received {posts} "
          f"(one a read: {posts == rounds}); " + "; ".join(notes))
    for figure in figures:
        print(figure.line(56))
    return figures


@contextmanager
def real_core(notes: list[str]) -> Iterator[Core]:
    """A provisioned Home Assistant 2025.4.4 of the harness (`harness_core`), as this benchmark reads it."""
    with harness_core(notes, "plugins") as real_ha:
        yield Core(real_ha.base_url, real_ha.token)


def main(argv: Sequence[str] | None = None, *, core: Core | None = None) -> list[Figure]:
    """Measure and print; against `core` when given (a test's stub), else a real core it starts."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="30 rounds")
    parser.add_argument("--rounds", type=int, help="rounds (default 300)")
    options = parser.parse_args(argv)
    rounds = options.rounds or (30 if options.quick else 300)
    notes: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix="console-ha-bench-plugins-"))
    try:
        if core is not None:
            return report(*measure(core, rounds, workdir), [*notes, f"against {core.base_url}"])
        with real_core(notes) as started:
            return report(*measure(started, rounds, workdir), notes)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
