"""State has an owner: two Consoles in one process, each over its own stub Home Assistant (real HTTP on loopback),
keep their own clients, areas and call limits; one Console keeps each of its Home Assistants side by side.

Before issue 27 the areas and the call limits were the process's (`AREA_INDEXES`, `CALL_LIMITS`) and every
cache kept "one Home Assistant at a time"; each test here fails on that shape.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from console_ha.capabilities.list_areas import NAME as LIST_AREAS
from console_ha.console import Console, ConsoleOptions
from console_ha.errors import CapabilityError
from console_ha.ha.call_limits import CallCaps
from console_ha.ha.per_home_assistant import PerHomeAssistant
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from console_ha.settings.settings_service import SaveRequest
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import check_token
from tests.moving_clock import wait_for
from tests.stub_ha import StubHomeAssistant

ALLOWED = ["light.bedroom", "sensor.living_room_temperature"]
ROOMS = {"light.bedroom": "Bedroom", "sensor.living_room_temperature": "Kitchen"}
# Long enough that a hung call is still hung while the test looks; the stub lets go when it stops.
HANG = 30.0
PACKAGE = Path(__file__).resolve().parent.parent / "console_ha"


class Opened:
    """One Console over its own data dir and stub Home Assistant, and the clients it made."""

    def __init__(self, root: Path, ha: StubHomeAssistant, caps: CallCaps) -> None:
        self.ha = ha
        self.made: list[str] = []
        self.console = Console.open(DataDir(root), ConsoleOptions(call_caps=caps), make_client=self._make)
        # Seeded through the settings' own save (its token and allowlist rules), as the household saves.
        self.console.settings.save(SaveRequest({"enabled": True, "base_url": ha.base_url,
                                                "allowlisted_entities": ALLOWED}, token=check_token(ha.token)))
        ha.serve_registries(ROOMS)

    def _make(self, base_url: str, token: Secret, **parts: Any) -> HomeAssistantClient:
        self.made.append(base_url)
        return HomeAssistantClient(base_url, token, **parts)

    def rooms(self) -> list[str | None]:
        """The area names list_areas answers, read with the household's yes."""
        executor = self.console.executor
        proposal = executor.propose(LIST_AREAS, {}, conversation_id="c")
        result = executor.answer(proposal.token, approve=True, conversation_id="c")
        return sorted(line["area"] for line in result["areas"])

    def registry_rounds(self) -> int:
        """How many WebSockets the Console opened to its Home Assistant for the registries."""
        return len(self.ha.requests_to("/api/websocket"))


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Opened, Opened]]:
    """A Console allowed one call at a time, and one with the default caps, each over its own Home Assistant."""
    with StubHomeAssistant() as first, StubHomeAssistant(seed=1) as second:
        yield (Opened(tmp_path / "a", first, CallCaps(per_origin=1, in_all=1)),
               Opened(tmp_path / "b", second, CallCaps()))


def test_each_console_keeps_its_own_clients(two: tuple[Opened, Opened]) -> None:
    """Each Console's reads go through one client it made for its Home Assistant, with its own limits and areas."""
    a, b = two
    for _ in range(2):
        a.rooms()
        b.rooms()
    assert a.made == [a.ha.base_url] and b.made == [b.ha.base_url]
    kept_a = a.console.home_assistants.clients(a.ha.base_url, Secret(a.ha.token), None)
    assert kept_a.area_indexes is a.console.home_assistants.area_indexes
    assert kept_a.area_indexes is not b.console.home_assistants.area_indexes
    assert a.made == [a.ha.base_url], "the client the reads used is the one kept"


def test_an_area_renamed_in_one_home_assistant_is_not_seen_by_the_other_console(two: tuple[Opened, Opened]) -> None:
    """Each Console keeps its areas: alternating reads cost one registry round each, and a rename in one Home
    Assistant reaches its own Console (once its kept areas are stale) and never the other."""
    a, b = two
    assert a.rooms() == b.rooms() == ["Bedroom", "Kitchen"]
    assert a.rooms() == b.rooms() == ["Bedroom", "Kitchen"]
    assert (a.registry_rounds(), b.registry_rounds()) == (1, 1), "alternating reads pushed out each other's areas"
    a.ha.serve_registries({**ROOMS, "sensor.living_room_temperature": "Cuisine"})
    a.console.home_assistants.area_indexes.clear()  # as a minute later, for the first Console only
    assert a.rooms() == ["Bedroom", "Cuisine"]
    assert b.rooms() == ["Bedroom", "Kitchen"]
    assert (a.registry_rounds(), b.registry_rounds()) == (2, 1)


def test_one_console_s_full_slots_do_not_block_the_other(two: tuple[Opened, Opened]) -> None:
    """With the first Console's one place held by a hung call, its next read is HA_BUSY; the other reads."""
    a, b = two
    assert a.console.home_assistants.limits.caps == CallCaps(per_origin=1, in_all=1)
    assert b.console.home_assistants.limits.caps == CallCaps()
    a.ha.fault("slow", path_prefix="/api/config", delay=HANG)
    hung = a.console.home_assistants.clients(a.ha.base_url, Secret(a.ha.token), None)
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(hung.config, timeout=HANG)
        wait_for(lambda: a.console.home_assistants.limits.in_flight() == 1)
        with pytest.raises(CapabilityError) as caught:
            a.rooms()
        assert (caught.value.code, caught.value.stage) == ("HA_BUSY", 5)
        assert b.rooms() == ["Bedroom", "Kitchen"]
        assert b.console.home_assistants.limits.in_flight() == 0
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def test_one_console_keeps_each_of_its_home_assistants_side_by_side(tmp_path: Path) -> None:
    """A second Home Assistant (a cabin, or a URL tried in the picker) pushes out neither the first's client
    nor its areas: the keyed shape several instances (issue 29) will use."""
    with StubHomeAssistant() as house, StubHomeAssistant(seed=1) as cabin:
        home = Opened(tmp_path / "a", house, CallCaps())
        cabin.serve_registries({"light.bedroom": "Loft"})
        kept = home.console.home_assistants
        clients = {ha.base_url: kept.clients(ha.base_url, Secret(ha.token), None) for ha in (house, cabin, house)}
        assert home.made == [house.base_url, cabin.base_url]
        for client in (*clients.values(), *clients.values()):
            kept.area_indexes.get(client, timeout=5)
        assert (len(house.requests_to("/api/websocket")), len(cabin.requests_to("/api/websocket"))) == (1, 1)


def test_a_table_per_home_assistant_keeps_the_most_recently_used() -> None:
    """Bounded: past its size the Home Assistant used longest ago goes, whatever order they came in."""
    table: PerHomeAssistant[str, int] = PerHomeAssistant(most=2)
    table.put("house", 1)
    table.put("cabin", 2)
    assert table.get("house") == 1  # used now: the cabin is the oldest
    assert table.get_or_make("workshop", lambda: 3) == 3
    assert (table.get("house"), table.get("cabin"), table.get("workshop"), len(table)) == (1, None, 3, 2)


# --- no module holds state a second Console would share -----------------------------------------------------

# Module-level objects that do hold state, each a process resource rather than anything about a Home
# Assistant or a Console (docs/architecture.md, "State has an owner").
PROCESS_WIDE = {
    ("console_ha.deadline", "WATCHDOG"): "one thread that shuts sockets at their deadlines, for every call",
    ("console_ha.deadline", "WORKERS"): "the threads that run calls under a deadline, for every call",
    ("console_ha.ha.transport", "TAKEN"): "a thread-local: each thread's own connections, no one else's",
    ("console_ha.store.atomic", "_locks"): "one lock per file path: two Consoles on one data dir must share it",
    ("console_ha.store.atomic", "_locks_guard"): "guards `_locks`",
    ("console_ha.errors", "_OWNERS"): "each error class by its code, filled as the classes are defined, never after",
}
# Calls whose result at module level holds state (a lock, a cache, a count, a thread-local).
STATEFUL_CALLS = {"Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore", "Event", "local", "Counter",
                  "OrderedDict", "defaultdict", "deque", "CallLimits", "AreaCache", "AreaIndexCache",
                  "HomeAssistantClients", "HomeAssistants", "PerHomeAssistant", "Watchdog", "Workers"}


def _holds_state(value: ast.expr | None) -> bool:
    """A stateful call, or an empty dict, list or set (to be filled later), as a module-level value."""
    if isinstance(value, ast.Call):
        called = value.func
        name = called.attr if isinstance(called, ast.Attribute) else called.id if isinstance(called, ast.Name) else ""
        return name in STATEFUL_CALLS or (name in {"dict", "list", "set"} and not value.args and not value.keywords)
    if isinstance(value, ast.Dict):
        return not value.keys
    return isinstance(value, ast.List | ast.Set) and not value.elts


def _module_state() -> set[tuple[str, str]]:
    """Every module-level name the package binds to a stateful value."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and _holds_state(node.value):
                found |= {(module, t.id) for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _holds_state(node.value):
                found.add((module, node.target.id))
    return found


def test_no_module_holds_state_a_second_console_would_share() -> None:
    """Caches, limits and clients belong to the object the composition root builds; what is left module-wide
    is a process resource, each named here with its reason."""
    assert _module_state() == set(PROCESS_WIDE)
