"""What the stage hooks cost a read when no plugin is installed (issue 30: no more than 1.02x of today's).

Run on demand from the repository root (it is not a test):

    .venv/bin/python benchmarks/bench_plugins.py            # 400 reads of each kind
    .venv/bin/python benchmarks/bench_plugins.py --quick    # 100

One read is `home_assistant.get_state` proposed and allowed through the real executor against the suite's stub
Home Assistant on loopback (tests/stub_ha.py), with the client kept open as the Console keeps it. "Before" is
an executor without plugins (`plugins=None`: no hook is looked at, the code path of the Console before issue
30); "no plugin" is the executor `Console.open` builds when none is installed (an empty `Plugins`: each hook's
implementations looked up, none called). Both run in one interpreter, alternately in a seeded random order,
and the medians are compared. The examples' 1.1x waits for the two example plugins.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from _measure import median, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # for tests.stub_ha

from console_ha.capabilities.confirmations import ConfirmationStore  # noqa: E402
from console_ha.capabilities.executor import Executor  # noqa: E402
from console_ha.capabilities.get_state import NAME as GET_STATE  # noqa: E402
from console_ha.console import CONSOLE_READS  # noqa: E402
from console_ha.ha.kept_clients import LendClient  # noqa: E402
from console_ha.ha.rest_client import HomeAssistantClient  # noqa: E402
from console_ha.plugins.plugin_registry import Plugins  # noqa: E402
from console_ha.secret import Secret  # noqa: E402
from console_ha.store.audit import AuditLog  # noqa: E402
from console_ha.store.datadir import DataDir  # noqa: E402
from console_ha.store.instances import Instances  # noqa: E402
from console_ha.store.plugin_switches import PluginSwitches  # noqa: E402
from tests.seed import seed_settings  # noqa: E402
from tests.stub_ha import StubHomeAssistant  # noqa: E402

ENTITY = "sensor.living_room_temperature"
TARGET = 1.02


def kept_client(client: HomeAssistantClient) -> LendClient:
    """Lends the one open client for every read, as the Console's kept clients do (no connection set up per read)."""
    @contextmanager
    def lend(_base_url: str, _token: Secret, _ca_bundle: str | None) -> Iterator[HomeAssistantClient]:
        yield client
    return lend


def one_read(executor: Executor) -> None:
    proposal = executor.propose(GET_STATE, {"entity_id": ENTITY}, conversation_id="bench")
    executor.answer(proposal.token, approve=True, conversation_id="bench")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 reads of each kind instead of 400")
    parser.add_argument("--reads", type=int, help="this many reads of each kind")
    options = parser.parse_args(argv)
    reads = options.reads or (100 if options.quick else 400)
    with tempfile.TemporaryDirectory() as directory, StubHomeAssistant() as stub:
        data_dir = DataDir(Path(directory) / "data")
        data_dir.ensure()
        seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url, "allowlisted_entities": [ENTITY]},
                      token=stub.token)
        with HomeAssistantClient(stub.base_url, Secret(stub.token), reads=CONSOLE_READS) as client:
            def executor(plugins: Plugins | None) -> Executor:
                return Executor(Instances(data_dir), audit=AuditLog(data_dir), confirmations=ConfirmationStore(),
                                clients=kept_client(client), plugins=plugins)
            kinds = {"before": executor(None), "no plugin": executor(Plugins(PluginSwitches(data_dir)))}
            for each in kinds.values():  # warm: the first read of each opens what later reads reuse
                one_read(each)
            order = [kind for kind in kinds for _ in range(reads)]
            random.Random(30).shuffle(order)
            times: dict[str, list[float]] = {kind: [] for kind in kinds}
            cpu: dict[str, list[float]] = {kind: [] for kind in kinds}
            for kind in order:
                wall, used, _ = timed(partial(one_read, kinds[kind]))
                times[kind].append(wall)
                cpu[kind].append(used)
    for kind, walls in times.items():
        ordered = sorted(walls)
        print(f"  {kind}: min {ordered[0] * 1000:.3f} ms, quartiles "
              f"{ordered[len(ordered) // 4] * 1000:.3f} / {ordered[3 * len(ordered) // 4] * 1000:.3f} ms")
    # Wall time is mostly the wait on loopback, which on some machines comes in two modes (a few ms, or about
    # 40 ms when delayed ACKs meet); the CPU time is the Console's own work, where the hooks would show.
    for label, figures in (("wall", times), ("CPU", cpu)):
        before, none = median(figures["before"]), median(figures["no plugin"])
        ratio = none / before
        print(f"a read's {label} time, median of {reads}: before {before * 1000:.3f} ms, no plugin "
              f"{none * 1000:.3f} ms: {ratio:.3f}x (target <= {TARGET}x) {'ok' if ratio <= TARGET else 'OVER'}")


if __name__ == "__main__":
    main()
