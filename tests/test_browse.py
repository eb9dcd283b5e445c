"""The picker without JavaScript: search, kind, area and pages over the catalogue (settings.browse)."""

from __future__ import annotations

from typing import Any

import pytest

from console_ha.settings.browse import NO_AREA, PAGE_SIZE, BrowseQuery, area_value, browse
from console_ha.words import KIND_NAMES, kind_name


def entry(entity_id: str, name: str, area: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"entity_id": entity_id, "friendly_name": name, "domain": entity_id.partition(".")[0], "state": "on",
            "unavailable": False, "area": area, "sensitive": False, "cost": 1, **extra}


CATALOGUE = {
    "entities": [
        entry("light.kitchen", "Kitchen light", "Kitchen"),
        entry("sensor.kitchen_temperature", "Kitchen temperature", "Kitchen"),
        entry("light.hall", "Hall light", "Hall"),
        entry("binary_sensor.front_door", "Front door", "Hall", sensitive=True),
        entry("switch.lonely", "Lonely switch"),
    ],
    "missing": [{"entity_id": "light.gone", "friendly_name": "Gone light", "sensitive": False}],
    "areas_known": True,
}


def ids(query: BrowseQuery, chosen: tuple[str, ...] = ()) -> list[str]:
    return [row.entity_id for row in browse(CATALOGUE, chosen, query).rows]


def test_every_word_of_the_search_is_in_the_name_id_or_area() -> None:
    assert ids(BrowseQuery(search="kitchen LIGHT")) == ["light.kitchen"]
    assert ids(BrowseQuery(search="hall")) == ["binary_sensor.front_door", "light.hall"]  # by area
    assert ids(BrowseQuery(search="nothing like it")) == []


def test_kind_and_area_narrow_the_list_and_missing_entities_come_first() -> None:
    assert ids(BrowseQuery(kind="light")) == ["light.gone", "light.hall", "light.kitchen"]
    assert ids(BrowseQuery(area=area_value("Kitchen"))) == ["light.kitchen", "sensor.kitchen_temperature"]
    assert ids(BrowseQuery(area=NO_AREA)) == ["switch.lonely"]
    # An area's value cannot be mistaken for "no area", whatever the area is called.
    assert ids(BrowseQuery(area="none")) == ["switch.lonely"] and area_value("none") != NO_AREA


def test_the_filters_offer_household_words_with_counts() -> None:
    listing = browse(CATALOGUE, (), BrowseQuery())
    assert [(c.value, c.label, c.count) for c in listing.kinds] == [
        ("light", "Lights", 3),
        ("binary_sensor", KIND_NAMES["binary_sensor"], 1),
        ("sensor", KIND_NAMES["sensor"], 1),
        ("switch", KIND_NAMES["switch"], 1),
    ]
    assert [(c.label, c.count) for c in listing.areas] == [("Hall", 2), ("Kitchen", 2), ("No area", 1)]
    assert [heading for heading, _ in listing.groups()] == ["No longer in Home Assistant", "Hall", "Kitchen",
                                                             "No area"]


@pytest.mark.parametrize(("domain", "words"), [("light", "Lights"), ("stt", "Speech to text"),
                                                ("input_number", "Helpers: numbers"),
                                                ("brand_new_thing", "Brand new thing")])
def test_a_kind_is_named_as_a_household_would(domain: str, words: str) -> None:
    assert kind_name(domain) == words


def test_pages_hold_at_most_200_and_a_page_past_the_last_shows_the_last() -> None:
    catalogue = {"entities": [entry(f"sensor.s{i:04d}", f"Sensor {i:04d}") for i in range(450)], "missing": []}
    first = browse(catalogue, ("sensor.s0001",), BrowseQuery())
    assert (len(first.rows), first.matched, first.pages, first.first) == (PAGE_SIZE, 450, 3, 1)
    assert [row.chosen for row in first.rows[:3]] == [False, True, False]
    last = browse(catalogue, (), BrowseQuery(page=99))
    assert (last.page, len(last.rows), last.first, last.rows[-1].entity_id) == (3, 50, 401, "sensor.s0449")


@pytest.mark.parametrize(("args", "query"), [
    ({}, BrowseQuery()),
    ({"q": "  kitchen  ", "kind": "light", "area": "area:Hall", "page": "2"},
     BrowseQuery("kitchen", "light", "area:Hall", 2)),
    ({"page": "two"}, BrowseQuery()),
    ({"page": "-5"}, BrowseQuery()),
    ({"q": "x" * 5000}, BrowseQuery("x" * 200)),
])
def test_the_get_form_is_read_forgivingly(args: dict[str, str], query: BrowseQuery) -> None:
    assert BrowseQuery.from_args(args) == query


def test_an_area_whose_name_has_spaces_at_its_ends_is_found_by_its_own_option() -> None:
    """Home Assistant keeps an area's name as typed ("Kitchen "): the option's value comes back exactly."""
    catalogue = {"entities": [entry("light.pantry", "Pantry light", " Pantry "), entry("light.hall", "Hall", "Hall")]}
    listing = browse(catalogue, (), BrowseQuery())
    option = next(choice for choice in listing.areas if choice.label.strip() == "Pantry")
    query = BrowseQuery.from_args({"area": option.value, "q": ""})
    assert [row.entity_id for row in browse(catalogue, (), query).rows] == ["light.pantry"]


def test_the_names_go_along_for_the_rows_shown_and_every_chosen_entity() -> None:
    """A save without JavaScript stores Home Assistant's names (issue 25): those shown, and those chosen elsewhere."""
    listing = browse(CATALOGUE, ("light.hall", "light.gone"), BrowseQuery(search="kitchen"))
    assert listing.names == {"light.kitchen": "Kitchen light", "sensor.kitchen_temperature": "Kitchen temperature",
                             "light.hall": "Hall light", "light.gone": "Gone light"}
    nameless = {"entities": [entry("sensor.x", "sensor.x")], "missing": []}
    assert browse(nameless, ("sensor.x",), BrowseQuery()).names == {}  # an id is no name
