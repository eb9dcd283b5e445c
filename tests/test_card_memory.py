"""What a Console's cards know before a read is that Console's own, and bounded (card_facts.CardMemory)."""

from __future__ import annotations

from pathlib import Path

from console_ha.capabilities.card_facts import MAX_SEEN, NOTHING_KNOWN, CardMemory, Traits
from console_ha.capabilities.get_statistics import NAME as GET_STATISTICS
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.console import Console
from console_ha.ha.areas import build_area_index
from console_ha.ha.per_home_assistant import MAX_HOME_ASSISTANTS
from console_ha.store.datadir import DataDir
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

ALLOWED = ["sensor.energy_consumption", "light.living_room", "light.bedroom"]
KEY = ("http://homeassistant.local:8123", "digest", "")


def opened(data_dir: DataDir, stub: StubHomeAssistant) -> Console:
    """A Console over its own data dir, set up for the stub with ALLOWED."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url, "allowlisted_entities": ALLOWED},
                  token=stub.token)
    return Console.open(data_dir)


def test_a_second_console_in_the_process_never_sees_the_first_one_s_card_facts(
        data_dir: DataDir, tmp_path: Path, stub_ha: StubHomeAssistant) -> None:
    """Same Home Assistant, same token, two data dirs: what one Console's picker and reads learnt is its own."""
    stub_ha.serve_registries({"light.living_room": "Living room", "light.bedroom": "Bedroom"})
    first, second = opened(data_dir, stub_ha), opened(DataDir(tmp_path / "other"), stub_ha)
    try:
        first.settings.entities()  # the picker reads the rooms and every state
        listing = first.executor.propose(LIST_ENTITIES, {}, conversation_id="c")
        first.executor.answer(listing.token, approve=True, conversation_id="c")
        statistics = {"entity_id": "sensor.energy_consumption", "period": "last_month"}
        knows = first.executor.propose(GET_STATISTICS, statistics, conversation_id="c").card.body
        does_not = second.executor.propose(GET_STATISTICS, statistics, conversation_id="c").card.body
        rooms_first = first.household.ask("a program", LIST_ENTITIES, {"area": "Bedroom"}).proposal
        rooms_second = second.executor.propose(LIST_ENTITIES, {"area": "Bedroom"}, conversation_id="c")
    finally:
        first.settings.close()
        second.settings.close()
    assert "They say how much Energy consumption counted last month." in knows
    assert "is a meter or a measurement" in does_not and "how much Energy consumption counted" not in does_not
    # The household queue's executor shares its Console's memory; the other Console knows no room yet.
    assert rooms_first.card.body.startswith("The assistant wants to read the current state of 1 of the devices")
    assert "does not know yet which rooms" in rooms_second.card.body


def test_the_memory_keeps_at_most_max_seen_devices_however_many_reads() -> None:
    """5,000+ allowed devices read again and again: the traits kept stay within the bound."""
    memory = CardMemory()
    allowed = [f"sensor.s{i:05d}" for i in range(MAX_SEEN + 1500)]
    states = [{"entity_id": e, "attributes": {"device_class": "energy", "state_class": "total"}} for e in allowed]
    for start in range(0, len(states), 700):  # many reads, each of some of them
        memory.remember(KEY, states[start:start + 2000], allowed)
    kept = memory.facts(KEY).traits
    assert len(kept) == MAX_SEEN
    assert kept[allowed[-1]] == Traits("energy", "total")  # the latest read stays


def test_another_home_assistant_or_token_knows_nothing_of_the_first_which_keeps_its_own() -> None:
    """Facts of one Home Assistant are never said of another (a new key starts with nothing), and a read of
    another leaves the first one's areas and traits as they were (issue 29: a house and a cabin)."""
    memory = CardMemory()
    memory.keep_areas(KEY, build_area_index([{"area_id": "k", "name": "Kitchen"}],
                                            [{"entity_id": "light.a", "area_id": "k"}], []))
    memory.remember(KEY, [{"entity_id": "light.a", "attributes": {"device_class": "x"}}], ["light.a"])
    other = ("http://homeassistant.local:8123", "another token", "")
    assert memory.facts(other) == NOTHING_KNOWN
    memory.remember(other, [], ["light.a"])
    assert memory.facts(other).areas is None and memory.facts(other).traits == {}
    assert memory.facts(KEY).traits == {"light.a": Traits("x")} and memory.facts(KEY).areas is not None


def test_the_memory_keeps_at_most_eight_home_assistants_the_one_used_longest_ago_goes() -> None:
    """A household trying token after token in the picker does not grow the Console without bound."""
    memory = CardMemory()
    keys = [(f"http://ha{i}.local:8123", "digest", "") for i in range(MAX_HOME_ASSISTANTS + 1)]
    for key in keys:
        memory.remember(key, [{"entity_id": "light.a", "attributes": {"device_class": "x"}}], ["light.a"])
    assert memory.facts(keys[0]) == NOTHING_KNOWN
    assert all(memory.facts(key).traits == {"light.a": Traits("x")} for key in keys[1:])


def test_only_allowed_devices_are_remembered() -> None:
    """The picker reads every state; what is kept is of the devices the household allowed, nothing else."""
    memory = CardMemory()
    memory.remember(KEY, [{"entity_id": "sensor.a", "attributes": {"device_class": "energy"}},
                          {"entity_id": "sensor.b", "attributes": {"device_class": "energy"}}], ["sensor.a"])
    assert set(memory.facts(KEY).traits) == {"sensor.a"}


def test_a_device_seen_again_outlasts_those_no_read_has_seen_for_longer() -> None:
    """The bound drops what was seen longest ago, not what was first seen: a device every read sees stays."""
    memory = CardMemory(max_seen=3)
    allowed = ["sensor.a", "sensor.b", "sensor.c", "sensor.d"]

    def seen(*ids: str) -> list[dict[str, object]]:
        return [{"entity_id": e, "attributes": {"device_class": "energy"}} for e in ids]
    memory.remember(KEY, seen("sensor.a", "sensor.b", "sensor.c"), allowed)
    memory.remember(KEY, seen("sensor.a"), allowed)  # a read sees the first one again
    memory.remember(KEY, seen("sensor.d"), allowed)
    assert set(memory.facts(KEY).traits) == {"sensor.c", "sensor.a", "sensor.d"}
