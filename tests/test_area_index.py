"""The capabilities' area layer: folding, the registry join, one registry round per read, the cache's rules."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from console_ha.errors import HABadResponse, HAUnauthorized, HomeAssistantError
from console_ha.folding import fold
from console_ha.ha.areas import (
    REGISTRY_COMMANDS,
    Area,
    AreaIndex,
    AreaIndexCache,
    area_index,
    build_area_index,
    read_area_index,
)
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from tests.stub_ha import StubHomeAssistant

REGISTRIES: dict[str, Any] = {
    "config/area_registry/list": [
        {"area_id": "kitchen", "name": "Küche", "aliases": ["Cooking place"]},
        {"area_id": "living_room", "name": "Living room", "aliases": []},
        {"area_id": "garage", "name": "Garage"},  # before registry 1.3 an area had no aliases
        {"area_id": "nameless", "name": ""},
    ],
    "config/entity_registry/list": [
        {"entity_id": "light.ceiling", "area_id": None, "device_id": "dev_kitchen"},
        {"entity_id": "sensor.temperature", "area_id": "living_room", "device_id": "dev_kitchen"},
        {"entity_id": "switch.pump", "area_id": None, "device_id": None},
        {"entity_id": "switch.ghost", "area_id": "removed_area", "device_id": None},
        {"entity_id": "switch.nameless", "area_id": "nameless", "device_id": None},
    ],
    "config/device_registry/list": [{"id": "dev_kitchen", "area_id": "kitchen"}],
}


@pytest.mark.parametrize(("written", "folded"), [
    ("Küche", "kuche"), ("KÜCHE", "kuche"), ("kuche", "kuche"), ("İstanbul", "istanbul"),
    ("  Living \t Room ", "living room"), ("Straße", "strasse"), ("ﬁre", "fire"), ("Salle à manger", "salle a manger"),
])
def test_fold_ignores_case_accents_and_spacing(written: str, folded: str) -> None:
    assert fold(written) == folded


def index() -> AreaIndex:
    return build_area_index(*(REGISTRIES[c] for c in ("config/area_registry/list", "config/entity_registry/list",
                                                      "config/device_registry/list")))


def test_an_entitys_own_area_wins_over_its_devices() -> None:
    areas = index()
    assert areas.area_name("sensor.temperature") == "Living room"
    assert areas.area_name("light.ceiling") == "Küche"


def test_no_area_an_unknown_area_and_a_nameless_area_are_all_none() -> None:
    areas = index()
    assert [areas.area_of(e) for e in ("switch.pump", "switch.ghost", "switch.nameless", "light.absent")] == [None] * 4


@pytest.mark.parametrize("words", ["Küche", "kuche", "KUCHE", "kitchen", "cooking  PLACE", "Cooking place"])
def test_an_area_is_named_by_its_name_id_or_alias_folded(words: str) -> None:
    assert index().named(words) == {"kitchen"}


@pytest.mark.parametrize("words", ["", "kuch", "garden", "living", "removed_area", "nameless"])
def test_other_words_name_no_area(words: str) -> None:
    assert index().named(words) == frozenset()


def test_the_picker_view_is_the_same_join() -> None:
    assert index().entity_area_names() == {"light.ceiling": "Küche", "sensor.temperature": "Living room"}


def test_area_answers_to_folded_words_only() -> None:
    assert Area("a", "Bureau d'été").answers_to(fold("BUREAU D'ETE"))


@pytest.fixture
def stub() -> Iterator[StubHomeAssistant]:
    with StubHomeAssistant() as ha:
        ha.registries = dict(REGISTRIES)
        yield ha


def _client(stub: StubHomeAssistant, commands: tuple[str, ...] = REGISTRY_COMMANDS,
            area_indexes: AreaIndexCache | None = None) -> HomeAssistantClient:
    return HomeAssistantClient(stub.base_url, Secret(stub.token), reads=Reads(commands=commands),
                               area_indexes=area_indexes)


def test_one_registry_round_reads_the_three_lists_over_one_websocket(stub: StubHomeAssistant) -> None:
    with _client(stub) as client:
        areas = read_area_index(client, timeout=3)
    assert areas == index()
    assert len(stub.requests_to("/api/websocket")) == 1
    sent = [json.loads(m)["type"] for m in stub.ws_messages]
    assert sent == ["auth", *REGISTRIES]


def test_a_client_that_did_not_declare_the_registries_sends_nothing(stub: StubHomeAssistant) -> None:
    with _client(stub, commands=()) as client, pytest.raises(ValueError):
        read_area_index(client, timeout=3)
    assert not any("registry" in m for m in stub.ws_messages)


def test_registries_of_the_wrong_shape_are_a_bad_response(stub: StubHomeAssistant) -> None:
    stub.registries = {**REGISTRIES, "config/device_registry/list": {"not": "a list"}}
    with _client(stub) as client, pytest.raises(HABadResponse):
        read_area_index(client, timeout=3)


def test_no_websocket_is_an_ha_error(stub: StubHomeAssistant) -> None:
    stub.registries = None  # the stub answers 404 to the upgrade, as a proxy without WebSockets would
    with _client(stub) as client, pytest.raises(HomeAssistantError):
        read_area_index(client, timeout=3)


def test_the_cache_reads_once_per_home_assistant_and_token(stub: StubHomeAssistant) -> None:
    cache = AreaIndexCache()
    with _client(stub) as client, _client(stub) as same:
        assert cache.get(client, timeout=3) == cache.get(same, timeout=3) == index()
    assert len(stub.requests_to("/api/websocket")) == 1
    other = HomeAssistantClient(stub.base_url, Secret(stub.token + "x"), reads=Reads(commands=tuple(REGISTRIES)))
    with other, pytest.raises(HAUnauthorized):
        cache.get(other, timeout=3)
    assert len(stub.requests_to("/api/websocket")) == 2


def test_a_failure_is_kept_briefly_and_raised_again_as_a_new_error(stub: StubHomeAssistant) -> None:
    calls: list[int] = []

    def read(client: HomeAssistantClient, *, timeout: float) -> AreaIndex:
        calls.append(1)
        raise HAUnauthorized("refused")

    cache = AreaIndexCache(failure_ttl=60, read=read)
    with _client(stub) as client:
        with pytest.raises(HAUnauthorized) as first:
            cache.get(client, timeout=1)
        with pytest.raises(HAUnauthorized) as second:
            cache.get(client, timeout=1)
    assert len(calls) == 1 and first.value is not second.value and second.value.code == "HA_UNAUTHORIZED"


def test_a_stale_entry_is_read_again(stub: StubHomeAssistant) -> None:
    cache = AreaIndexCache(ttl=0)
    with _client(stub) as client:
        cache.get(client, timeout=3)
        stub.registries = {**REGISTRIES, "config/device_registry/list": []}
        assert cache.get(client, timeout=3).area_of("light.ceiling") is None


@pytest.mark.parametrize("registries", [
    {**REGISTRIES, "config/entity_registry/list": [{"entity_id": "light.x", "device_id": ["not", "hashable"]}]},
    {**REGISTRIES, "config/device_registry/list": ["not an object"]},
], ids=["device-id-a-list", "device-not-an-object"])
def test_registries_of_odd_shapes_are_a_bad_response_not_a_crash(stub: StubHomeAssistant,
                                                                  registries: dict[str, Any]) -> None:
    stub.registries = registries
    with _client(stub) as client, pytest.raises(HABadResponse):
        read_area_index(client, timeout=3)


def test_an_area_whose_id_is_not_text_places_nothing(stub: StubHomeAssistant) -> None:
    stub.registries = {**REGISTRIES, "config/area_registry/list": [{"area_id": {"id": 1}, "name": "Odd"}]}
    with _client(stub) as client:
        areas = read_area_index(client, timeout=3)
    assert areas.areas == {} and areas.placements == {}


def test_odd_aliases_and_names_are_left_out() -> None:
    areas = build_area_index([{"area_id": "a", "name": "Attic", "aliases": "not a list"},
                              {"area_id": "b", "name": 7},
                              {"area_id": "c", "name": "Cellar", "aliases": [None, 3, "Cave"]}],
                             [{"entity_id": "light.a", "area_id": "a"}, {"entity_id": "light.b", "area_id": "b"}], [])
    assert areas.area_name("light.a") == "Attic" and areas.area_of("light.b") is None
    assert areas.named("cave") == {"c"} and areas.named("not a list") == frozenset()


def test_a_kept_failure_holds_no_traceback(stub: StubHomeAssistant) -> None:
    stub.registries = None
    cache = AreaIndexCache()
    with _client(stub) as client:
        with pytest.raises(HomeAssistantError):
            cache.get(client, timeout=3)
        entry = cache._entries.get(client.cache_key)
    assert entry is not None
    kept = entry[1]
    assert isinstance(kept, HomeAssistantError) and kept.__traceback__ is None


def test_a_read_finds_the_areas_its_console_keeps_through_its_client(stub: StubHomeAssistant) -> None:
    """A client made with its Console's cache shares that cache's round; a client made alone reads every time."""
    kept = AreaIndexCache()
    with _client(stub, area_indexes=kept) as client, _client(stub, area_indexes=kept) as same:
        assert area_index(client, timeout=3) == area_index(same, timeout=3) == index()
    assert len(stub.requests_to("/api/websocket")) == 1
    with _client(stub) as alone:
        assert area_index(alone, timeout=3) == area_index(alone, timeout=3) == index()
    assert len(stub.requests_to("/api/websocket")) == 3
