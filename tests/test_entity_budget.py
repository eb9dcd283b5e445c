"""list_entities within its 64 KiB for every allowlist a save accepts, whatever Home Assistant's states hold."""

from __future__ import annotations

import json
import string
import unicodedata
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.entity_budget import (
    BUDGET_BYTES,
    CAP_LEVELS,
    CUT_MARK,
    FIT_BYTES,
    GUARANTEED,
    check_fits,
    cut,
    entity_cost,
    json_size,
    listed,
    timestamp,
    worst_entry_bytes,
)
from console_ha.capabilities.list_entities import CAPABILITY as LIST_ENTITIES_CAPABILITY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.list_entities import execute as list_entities
from console_ha.capabilities.narrow import narrow_state
from console_ha.deadline import Deadline
from console_ha.errors import InvalidConfig
from console_ha.settings.saving import save_settings
from console_ha.store.config import MAX_ALLOWLIST, ConfigStore, HomeAssistantConfig
from console_ha.store.datadir import MAX_INSTANCE_ID_LENGTH, DataDir
from console_ha.store.ha_token import TokenStore
from tests.executors import executor_over
from tests.result_schemas import assert_matches_result_schema
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

BOUND = LIST_ENTITIES_CAPABILITY.bounds.max_result_bytes
# The longest instance id there can be (`^[a-z0-9_]{1,32}$`): every result carries its instance's.
LONGEST_ID = "x" * MAX_INSTANCE_ID_LENGTH
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ID_CHARS = string.ascii_lowercase + string.digits + "_"

# Text a hostile or careless Home Assistant could put in a name, state or unit: quotes and backslashes
# (escaped to two bytes), controls (six as \u00XX, though they are dropped), bidi overrides, 2-4 byte
# characters, lone surrogates.
NASTY = st.text(
    alphabet=st.one_of(
        st.sampled_from(['"', "\\", "\n", "\x00", "\x1f", "\u202e", "\u200d", "é", "€", "日", "😀", "\ud800"]),
        st.characters(codec=None),
    ),
    max_size=400,
)
# Long text is the danger, and a random one is rarely long: a short nasty piece, repeated.
LONG_NASTY = st.builds(lambda piece, times: (piece or '"') * times, NASTY.map(lambda t: t[:12]),
                       st.integers(min_value=1, max_value=120))
entity_ids = st.builds(
    lambda domain, object_id: f"{domain}.{object_id}",
    st.text(ID_CHARS, min_size=1, max_size=40),
    st.text(ID_CHARS, min_size=1, max_size=200),
)


def filled_allowlist(start: Sequence[str]) -> list[str]:
    """`start` (as far as it fits) topped up with more ids until one more would not fit: the accepted maximum."""
    chosen: list[str] = []
    used = 0
    for entity_id in list(dict.fromkeys(start)):
        if used + entity_cost(entity_id) <= BUDGET_BYTES:
            chosen.append(entity_id)
            used += entity_cost(entity_id)
    i = 0
    while True:
        filler = f"sensor.f{i}"
        i += 1
        if filler in chosen:
            continue
        if used + entity_cost(filler) > BUDGET_BYTES:
            break
        chosen.append(filler)
        used += entity_cost(filler)
    return chosen


def worst_state(entity_id: str, text: str = '"\\😀' * 200) -> dict[str, Any]:
    """A state whose every text is far over its cap, made of the characters that cost the most bytes."""
    return {"entity_id": entity_id, "state": text[:255],
            "attributes": {"friendly_name": text, "unit_of_measurement": text},
            "last_changed": "2026-11-30T10:00:00.123456+00:00"}


class StatesClient:
    """Stands in for the Home Assistant client (the transport is tested over real HTTP below): its states, and
    registries placing each entity of `areas` in the area of that name."""

    def __init__(self, states: list[dict[str, Any]], areas: dict[str, str] | None = None) -> None:
        self._states = states
        names = sorted(set((areas or {}).values()))
        self._registries: dict[str, Any] = {
            "config/area_registry/list": [{"area_id": f"a{i}", "name": name} for i, name in enumerate(names)],
            "config/entity_registry/list": [{"entity_id": e, "area_id": f"a{names.index(name)}"}
                                            for e, name in (areas or {}).items()],
            "config/device_registry/list": [],
        }
        # A key of its own (the areas' cache is keyed by it): no two stand-ins share kept areas.
        self.cache_key = ("http://ha.local:8123", uuid.uuid4().hex, "")
        self.area_indexes = None  # made by no Console: each read reads its registries

    def states(self, *, timeout: float, max_bytes: int) -> list[dict[str, Any]]:
        return self._states

    @contextmanager
    def websocket(self, *, timeout: float, max_bytes: int) -> Iterator[StatesClient]:
        yield self

    def command(self, message: dict[str, Any]) -> Any:
        return self._registries[message["type"]]


def run_list_entities(allowlist: Sequence[str], states: list[dict[str, Any]],
                      areas: dict[str, str] | None = None) -> dict[str, Any]:
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123", allowlisted_entities=tuple(allowlist))
    return list_entities(StatesClient(states, areas), config, {}, Deadline(8), NOW)  # type: ignore[arg-type]


# --- the pieces -------------------------------------------------------------------------------


@given(text=NASTY, cap=st.integers(min_value=4, max_value=120))
@settings(max_examples=300, deadline=None)  # what is tested is the size, not the time: no flakes under load
def test_cut_text_never_exceeds_its_cap_and_says_when_it_was_cut(text: str, cap: int) -> None:
    """Measured as the executor measures (compact UTF-8 JSON), cut text fits; cut text ends in the mark."""
    result = cut(text, cap)
    assert json_size(result) - 2 <= cap
    assert not any(c in result for c in "\x00\x1f\n\u202e\u200d\ud800")
    visible = "".join("\ufffd" if unicodedata.category(c) == "Cs" else c for c in text
                      if unicodedata.category(c) not in ("Cc", "Cf"))
    if result != visible:
        kept = result.removesuffix(CUT_MARK)
        assert result.endswith(CUT_MARK) and visible.startswith(kept) and len(kept) < len(visible)


def test_short_text_is_kept_whole_and_long_text_is_cut_at_a_character() -> None:
    """Nothing is cut that fits; a cut never splits a character and ends in …."""
    assert cut("Living room temperature", 24) == "Living room temperature"
    assert cut("Température du séjour, capteur nord", 24) == "Température du séjo…"
    assert cut("日本語のテキストです", 12) == "日本語…"
    assert cut('say "hi"', 7) == "say …"
    assert cut("a\u202eb\x00c", 24) == "abc"


@pytest.mark.parametrize("value, expected", [
    ("2026-11-30T10:00:00.123456+00:00", "2026-11-30T10:00:00Z"),
    ("2026-11-30T11:00:00+01:00", "2026-11-30T10:00:00Z"),
    ("2026-11-30T10:00:00", "2026-11-30T10:00:00Z"),
    ("2026-11-30T10:00:00Z", "2026-11-30T10:00:00Z"),
    ("yesterday", None),
    ("2026-11-30T10:00:00+00:00" + " " * 100, None),
    ("9999-12-31T23:59:59-05:00", None),
    (1743469200, None),
    (None, None),
])
def test_last_changed_is_always_twenty_bytes_or_null(value: object, expected: str | None) -> None:
    """Home Assistant's times become UTC to the second; anything else is null, never passed through."""
    assert timestamp(value) == expected


@given(entity_id=entity_ids)
@settings(deadline=None)
def test_the_cost_formula_is_the_worst_entry_for_any_id(entity_id: str) -> None:
    """entity_cost (a formula, for speed) equals the serialised worst entry plus its comma."""
    assert entity_cost(entity_id) == worst_entry_bytes(entity_id) + 1


@given(entity_id=entity_ids, name=st.one_of(st.none(), NASTY, st.integers()), state=NASTY,
       unit=st.one_of(st.none(), NASTY, st.lists(st.integers())),
       last_changed=st.one_of(st.none(), NASTY, st.datetimes().map(lambda d: d.isoformat())),
       attributes_broken=st.booleans(), area=st.one_of(st.none(), NASTY, LONG_NASTY))
@settings(max_examples=300, deadline=None)
def test_no_state_makes_an_entry_larger_than_its_cost(entity_id: str, name: object, state: str, unit: object,
                                                      last_changed: object, attributes_broken: bool,
                                                      area: str | None) -> None:
    """At the tightest caps, whatever Home Assistant sends (its area's name too), an entry and its comma are at
    most its cost."""
    attributes: Any = "not a mapping" if attributes_broken else {"friendly_name": name, "unit_of_measurement": unit}
    raw = {"entity_id": entity_id, "state": state, "attributes": attributes, "last_changed": last_changed}
    shaped = listed(narrow_state(raw, GUARANTEED), area, GUARANTEED)
    assert json_size(shaped) + 1 <= entity_cost(entity_id)
    assert_matches_result_schema(LIST_ENTITIES, {"entities": [shaped], "missing_entities": [], "total": 1,
                                                 "retrieved_at": "2026-12-01T12:00:00Z"})


# --- the guarantee ----------------------------------------------------------------------------


@given(start=st.lists(entity_ids, max_size=60), text=LONG_NASTY, missing_every=st.integers(min_value=0, max_value=5))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_allowlist_a_save_accepts_fits_whatever_the_states(start: list[str], text: str,
                                                                 missing_every: int) -> None:
    """An allowlist at the accepted maximum, adversarial states (some entities missing): within 64 KiB."""
    allowlist = filled_allowlist(start)
    check_fits(allowlist)  # a save accepts it...
    with pytest.raises(InvalidConfig):
        check_fits([*allowlist, "sensor.one_more"])  # ...and it is the maximum
    states = [worst_state(e, text) for i, e in enumerate(allowlist)
              if not (missing_every and i % missing_every == 0)]
    # Every entity in an area, each area's name as long and costly as a name can be.
    result = run_list_entities(allowlist, states, {e: f"{text}{i}" for i, e in enumerate(allowlist)})
    assert all(e["area"] is not None for e in result["entities"])
    assert json_size({**result, "instance": LONGEST_ID}) <= BOUND  # as the executor hands it on
    assert_matches_result_schema(LIST_ENTITIES, result)


def test_a_typical_household_keeps_whole_names_and_the_worst_case_is_cut_only_as_far_as_needed() -> None:
    """A few dozen ordinary entities keep their text; at the maximum, worst-case text is cut to fit."""
    ordinary: list[dict[str, Any]] = [{"entity_id": f"sensor.room_{i}_temperature", "state": "21.4",
                                       "attributes": {"friendly_name": f"Room {i} temperature, north wall sensor",
                                                      "unit_of_measurement": "°C"},
                                       "last_changed": "2026-11-30T10:00:00+00:00"} for i in range(60)]
    result = run_list_entities([s["entity_id"] for s in ordinary], ordinary)
    assert [e["friendly_name"] for e in result["entities"]] == [s["attributes"]["friendly_name"] for s in ordinary]

    allowlist = filled_allowlist([])
    worst = run_list_entities(allowlist, [worst_state(e) for e in allowlist],
                              {e: '"\\😀' * 200 + str(i) for i, e in enumerate(allowlist)})
    names = {e["friendly_name"] for e in worst["entities"]}
    assert all(name.endswith(CUT_MARK) for name in names)
    assert BOUND - 2_000 < json_size(worst) <= BOUND  # tight: the guarantee does not waste the bound


@pytest.fixture
def stub_at_the_maximum() -> Iterator[tuple[StubHomeAssistant, list[str]]]:
    """A stub Home Assistant whose states for an allowlist at the accepted maximum are all worst cases."""
    allowlist = filled_allowlist([f"sensor.{'x' * 200}", "light.kitchen", "binary_sensor.front_door"])
    with StubHomeAssistant() as stub:
        stub.states.extend(worst_state(e) for e in allowlist)
        yield stub, allowlist


def test_over_real_http_the_executor_answers_the_maximum_allowlist_within_the_bound(
        data_dir, clock, stub_at_the_maximum: tuple[StubHomeAssistant, list[str]]) -> None:
    """Saved through the config store, read through the client and all six stages: no RESULT_TOO_LARGE."""
    stub, allowlist = stub_at_the_maximum
    seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url, "allowlisted_entities": allowlist},
                  token=stub.token)
    executor = executor_over(data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock)
    proposal = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert [e["entity_id"] for e in result["entities"]] == allowlist
    assert json_size(result) <= BOUND
    assert_matches_result_schema(LIST_ENTITIES, result)


def test_the_longest_instance_id_fits_beside_the_roomiest_result_that_would_fit_without_it(
        data_dir: DataDir, clock, stub_ha: StubHomeAssistant) -> None:
    """States whose roomiest result ends a few bytes under 64 KiB: the longest id would push it over, so
    list_entities cuts one level further, and the executor's result (id included) is within the bound."""
    states = _states_whose_roomiest_result_is(BOUND - 4)
    allowlist = [state["entity_id"] for state in states]
    check_fits(allowlist)  # a save accepts it
    areas = {e: "a" * CAP_LEVELS[0].area for e in allowlist}
    assert json_size({**run_list_entities(allowlist, states, areas), "instance": LONGEST_ID}) <= BOUND
    # Through the six stages over real HTTP, the instance named by the longest id there can be.
    stub_ha.states[:] = states
    stub_ha.serve_registries(areas)
    seed_settings(data_dir, {"name": "Far away", "enabled": True, "base_url": stub_ha.base_url,
                             "allowlisted_entities": allowlist}, token=stub_ha.token, instance=LONGEST_ID)
    executor = executor_over(data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock)
    proposal = executor.propose(LIST_ENTITIES, {"instance": LONGEST_ID}, conversation_id="c")
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert result["instance"] == LONGEST_ID and len(result["entities"]) == len(allowlist)
    assert json_size(result) <= BOUND


def test_an_allowlist_filled_to_the_last_byte_fits_with_the_longest_instance_id() -> None:
    """The budget counts the id every result carries: the worst result of an allowlist costing exactly the budget,
    with `instance` at its longest, is within 64 KiB."""
    allowlist = filled_allowlist([])
    slack = BUDGET_BYTES - sum(entity_cost(e) for e in allowlist)
    allowlist[-1] += "x" * slack  # each character of an id costs one byte more
    assert sum(entity_cost(e) for e in allowlist) == BUDGET_BYTES
    check_fits(allowlist)
    # One byte a character, so every text is cut to exactly its cap (a 4-byte character may leave bytes over).
    worst = run_list_entities(allowlist, [worst_state(e, "x" * 300) for e in allowlist],
                              {e: "x" * 300 for e in allowlist})
    assert BOUND - 100 < json_size({**worst, "instance": LONGEST_ID}) <= BOUND


def _states_whose_roomiest_result_is(size: int) -> list[dict[str, Any]]:
    """ASCII states, each text within the roomiest caps (kept whole), whose roomiest result is `size` bytes."""
    roomy = CAP_LEVELS[0]

    def state(i: int, name_length: int) -> dict[str, Any]:
        return {"entity_id": f"sensor.e{i:03d}", "state": "s" * roomy.state,
                "attributes": {"friendly_name": "n" * name_length, "unit_of_measurement": "u" * roomy.unit},
                "last_changed": "2026-11-30T10:00:00+00:00"}

    def roomiest(states: list[dict[str, Any]]) -> int:
        entries = [listed(narrow_state(s, roomy), "a" * roomy.area, roomy) for s in states]
        return json_size({"entities": entries, "missing_entities": [], "total": len(entries),
                          "retrieved_at": "2026-12-01T12:00:00Z"})

    states = [state(0, roomy.name)]
    while roomiest(states) < size:
        states.append(state(len(states), roomy.name))
    over = roomiest(states) - size
    for i, one in enumerate(states):  # shorten names (one byte a character) until the size is exact
        cut_by = min(over, roomy.name - 1)
        states[i] = state(int(one["entity_id"][-3:]), roomy.name - cut_by)
        over -= cut_by
    assert roomiest(states) == size and FIT_BYTES < size <= BOUND
    return states


# --- the save check (the settings save's, not the file's: settings.saving.checked_changes) ----------


def test_a_save_past_the_budget_is_refused_saying_how_many_fit_and_nothing_is_written(data_dir) -> None:
    """INVALID_CONFIG on allowlisted_entities, with the number that fits, and the file as it was."""
    store = ConfigStore(data_dir)
    fitting = filled_allowlist([])
    save_settings(store, TokenStore(data_dir), {"allowlisted_entities": fitting})
    before = data_dir.ha_config.read_bytes()
    too_many = [f"sensor.living_room_temperature_{i:03d}" for i in range(400)]
    with pytest.raises(InvalidConfig) as caught:
        save_settings(store, TokenStore(data_dir), {"allowlisted_entities": too_many})
    err = caught.value
    assert (err.code, err.detail["field"]) == ("INVALID_CONFIG", "allowlisted_entities")
    fits = BUDGET_BYTES // entity_cost(too_many[0])
    assert err.detail["fits"] == fits and err.detail["chosen"] == 400
    assert f"about {fits:,} entities" in err.message and "400" in err.message
    assert data_dir.ha_config.read_bytes() == before


def test_a_file_saved_before_the_check_still_opens(data_dir) -> None:
    """An allowlist over the budget already on disk is read, so the household can see it and trim it."""
    too_many = [f"sensor.s{i}" for i in range(MAX_ALLOWLIST)]
    data_dir.ha_config.parent.mkdir(parents=True)
    data_dir.ha_config.write_text(json.dumps({"allowlisted_entities": too_many}))
    assert ConfigStore(data_dir).load().allowlisted_entities == tuple(too_many)


def test_an_allowlist_saved_before_the_check_can_be_saved_again_unchanged_but_not_grown(data_dir) -> None:
    """Other settings can still be saved (and a failed save put back); a changed list must fit."""
    too_many = [f"sensor.s{i:04d}" for i in range(400)]
    data_dir.ha_config.parent.mkdir(parents=True)
    data_dir.ha_config.write_text(json.dumps({"allowlisted_entities": too_many}))
    store, tokens = ConfigStore(data_dir), TokenStore(data_dir)
    save_settings(store, tokens, {"enabled": True})
    save_settings(store, tokens, {"enabled": False, "allowlisted_entities": too_many})
    with pytest.raises(InvalidConfig):
        save_settings(store, tokens, {"allowlisted_entities": too_many[:-1]})  # trimmed, but still too many
    trimmed = too_many[:BUDGET_BYTES // entity_cost(too_many[0])]
    assert save_settings(store, tokens, {"allowlisted_entities": trimmed}).config.allowlisted_entities == tuple(trimmed)


def test_the_caps_run_from_roomiest_to_the_guaranteed() -> None:
    """Each level is no roomier than the one before; the last is the one costs are computed at."""
    for roomier, tighter in zip(CAP_LEVELS, CAP_LEVELS[1:], strict=False):
        assert tighter.name <= roomier.name and tighter.state <= roomier.state and tighter.unit <= roomier.unit
        assert tighter.area <= roomier.area
    assert CAP_LEVELS[-1] == GUARANTEED
    # 270 before each entity carried its area (issue 18: 34 bytes more at the tightest caps).
    assert BUDGET_BYTES // entity_cost("sensor.living_room_temperature") >= 230


def test_a_megabyte_of_text_is_read_no_further_than_needed() -> None:
    """A name or state of a megabyte is cut from its start; the rest is never looked at."""
    assert cut("a" * 1_000_000, 24) == "a" * 21 + CUT_MARK
    assert cut("\x00" * 1_000_000 + "Kitchen", 24) == CUT_MARK
    huge = {"entity_id": "sensor.huge", "state": "7" * 1_000_000,
            "attributes": {"friendly_name": "\u202e" * 1_000_000, "unit_of_measurement": "°" * 1_000_000}}
    shaped = narrow_state(huge, GUARANTEED)
    assert shaped["state"] == "7" * 29 + CUT_MARK and shaped["friendly_name"] == CUT_MARK
    assert json_size(shaped) + 1 <= entity_cost("sensor.huge")
