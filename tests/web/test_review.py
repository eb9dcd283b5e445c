"""New entities since the last review: remembered at each save, told on the picker, never allowlisted."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from flask.testing import FlaskClient

from console_ha.store.config import ConfigStore
from console_ha.store.datadir import DataDir
from console_ha.store.review import MAX_REVIEWED, ReviewStore
from tests.stub_ha import StubHomeAssistant

from .conftest import API, configure


def _ids(stub: StubHomeAssistant) -> list[str]:
    return [state["entity_id"] for state in stub.states]


def _entities(household: FlaskClient) -> dict[str, Any]:
    response = household.get(f"{API}/entities")
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_before_any_review_nothing_is_called_new(household: FlaskClient, stub_ha: StubHomeAssistant) -> None:
    """A Console set up before this (or saved without the picker): no notice, not every entity "new"."""
    configure(household, stub_ha.base_url, stub_ha.token)
    body = _entities(household)
    assert body["new_entities"] == [] and body["reviewed_at"] is None


def test_an_entity_gained_since_the_last_save_is_new_and_not_allowlisted(
    household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir
) -> None:
    """Save with what the picker showed; HA gains one: it is new, unticked, and the allowlist is unchanged."""
    configure(household, stub_ha.base_url, stub_ha.token, allowlisted_entities=["light.living_room"],
              reviewed_entities=_ids(stub_ha))
    stub_ha.set_state("input_boolean.guest_mode", "off", {"friendly_name": "Guest mode"})
    body = _entities(household)
    assert body["new_entities"] == ["input_boolean.guest_mode"] and body["reviewed_at"]
    row = next(e for e in body["entities"] if e["entity_id"] == "input_boolean.guest_mode")
    assert row["allowlisted"] is False
    assert ConfigStore(data_dir).load().allowlisted_entities == ("light.living_room",)

    # The next save with the picker's list is the new review: nothing is new any more.
    configure(household, stub_ha.base_url, stub_ha.token, reviewed_entities=_ids(stub_ha))
    assert _entities(household)["new_entities"] == []


def test_the_review_file_is_private_compact_and_bound_to_its_home_assistant(
    household: FlaskClient, stub_ha: StubHomeAssistant, two_homes: tuple[StubHomeAssistant, StubHomeAssistant],
    data_dir: DataDir,
) -> None:
    """0600 beside the configuration; against another Home Assistant's URL nothing is called new."""
    configure(household, stub_ha.base_url, stub_ha.token, reviewed_entities=["light.living_room"])
    path = ReviewStore(data_dir).path
    assert path.parent == data_dir.capabilities and oct(os.stat(path).st_mode & 0o777) == "0o600"
    record = json.loads(path.read_text())
    assert record["entity_ids"] == ["light.living_room"] and record["origin"] == stub_ha.base_url
    other = two_homes[1]
    configure(household, other.base_url, other.token)  # saved without the picker: the old review stays
    assert _entities(household)["new_entities"] == []


@pytest.mark.parametrize("bad", ["light.a", ["Not An Id"], [1], ["x" * 300]])
def test_a_bad_review_list_is_invalid_config_and_nothing_is_written(
    household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir, bad: object
) -> None:
    """Refused as a whole on its field, before the settings or the review are written."""
    response = household.post(API, json={"base_url": stub_ha.base_url, "access_token": stub_ha.token,
                                         "reviewed_entities": bad})
    assert response.status_code == 400
    assert response.get_json()["error"]["field"] == "reviewed_entities"
    assert not data_dir.ha_config.exists() and not ReviewStore(data_dir).path.exists()


def test_the_review_is_bounded(household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir) -> None:
    """More ids than MAX_REVIEWED: refused, nothing written."""
    too_many = [f"sensor.s{i}" for i in range(MAX_REVIEWED + 1)]
    response = household.post(API, json={"base_url": stub_ha.base_url, "access_token": stub_ha.token,
                                         "reviewed_entities": too_many})
    assert response.status_code == 400 and not ReviewStore(data_dir).path.exists()


def test_a_damaged_review_file_means_nothing_reviewed(
    household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir
) -> None:
    """Half a file (a crash of a writer that was not atomic, or a hand edit): no notice, no error."""
    configure(household, stub_ha.base_url, stub_ha.token, reviewed_entities=["light.living_room"])
    path = ReviewStore(data_dir).path
    path.write_text(path.read_text()[:20])
    assert _entities(household)["new_entities"] == []


@pytest.mark.parametrize("damage", ["[" * 100_000 + "]" * 100_000, '{"entity_ids": ' + "[" * 100_000])
def test_a_deeply_nested_review_file_means_nothing_reviewed(
    household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir, damage: str
) -> None:
    """Deep nesting (within the size bound) makes the JSON reader recurse too far: still no notice, no 500."""
    configure(household, stub_ha.base_url, stub_ha.token, reviewed_entities=["light.living_room"])
    ReviewStore(data_dir).path.write_text(damage)
    assert _entities(household)["new_entities"] == []


def test_a_review_that_cannot_be_written_does_not_undo_the_save(
    household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The review only feeds a notice: a disk that refuses it leaves the settings saved and the old review whole."""
    configure(household, stub_ha.base_url, stub_ha.token, reviewed_entities=["light.living_room"])
    path = ReviewStore(data_dir).path
    before = path.read_bytes()

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("console_ha.store.review.atomic_write", full_disk)
    response = household.post(API, json={"enabled": True, "reviewed_entities": _ids(stub_ha)})
    assert response.status_code == 200 and response.get_json()["enabled"] is True
    assert ConfigStore(data_dir).load().enabled is True
    assert path.read_bytes() == before


def test_each_home_assistant_keeps_its_own_review(
    household: FlaskClient, two_homes: tuple[StubHomeAssistant, StubHomeAssistant], data_dir: DataDir
) -> None:
    """A save of the cabin with its picker's list leaves the house's review as it was: its new entity stays new."""
    house, cabin = two_homes
    configure(household, house.base_url, house.token, reviewed_entities=_ids(house))
    house.set_state("input_boolean.guest_mode", "off", {"friendly_name": "Guest mode"})
    response = household.post(f"{API}?instance=cabin", json={"name": "Cabin", "base_url": cabin.base_url,
                                                             "access_token": cabin.token,
                                                             "reviewed_entities": _ids(cabin)})
    assert response.status_code == 200, response.get_json()
    assert _entities(household)["new_entities"] == ["input_boolean.guest_mode"]
    cabin.set_state("sensor.stove", "61", {"friendly_name": "Stove"})
    response = household.get(f"{API}/entities?instance=cabin")
    assert response.get_json()["new_entities"] == ["sensor.stove"]
    review = data_dir.instance("cabin").review
    assert review.exists() and review != data_dir.instance("home").review
    assert household.delete(f"{API}?instance=cabin").status_code == 200
    assert not review.exists() and data_dir.instance("home").review.exists()  # removed with its Home Assistant
