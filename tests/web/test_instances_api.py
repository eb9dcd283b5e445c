"""The settings API for several Home Assistants: create and rename by a save, the list, remove, discovery, tokens."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from zeroconf import ServiceInfo

from console_ha.ha.discovery import SERVICE_TYPE, Instance, instance_from_info
from console_ha.settings.instance_rules import not_added
from console_ha.store.datadir import DataDir
from console_ha.store.instances import MAX_INSTANCES, Instances
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

from .conftest import API, error_of
from .conftest import snapshot as every_file

INSTANCES = f"{API}/instances"
Homes = tuple[StubHomeAssistant, StubHomeAssistant]


def snapshot(data_dir: DataDir) -> dict[Any, bytes]:
    """The data dir's Home Assistant files with their bytes; lock files (empty, made by any lock) left out."""
    return {path: raw for path, raw in every_file(data_dir).items() if not path.name.endswith(".lock")}


def listed(household: FlaskClient) -> list[dict[str, Any]]:
    response = household.get(INSTANCES)
    assert response.status_code == 200, response.get_data(as_text=True)
    instances: list[dict[str, Any]] = response.get_json()["instances"]
    return instances


@pytest.fixture
def house_and_cabin(household: FlaskClient, two_homes: Homes) -> Homes:
    """`home` saved with the house's URL and token; `cabin` ("Cabin") made through the API with its own."""
    house, cabin = two_homes
    assert household.post(API, json={"base_url": house.base_url, "access_token": house.token, "enabled": True,
                                     "allowlisted_entities": ["light.living_room"]}).status_code == 200
    made = household.post(f"{API}?instance=cabin", json={"name": "Cabin", "base_url": cabin.base_url,
                                                          "access_token": cabin.token})
    assert made.status_code == 200, made.get_data(as_text=True)
    house.requests.clear()
    cabin.requests.clear()
    return house, cabin


# --- create and rename ----------------------------------------------------------------------------------


def test_a_post_naming_a_new_id_with_a_name_creates_it(household: FlaskClient, two_homes: Homes) -> None:
    """The answer is the new instance's settings: its id and name, and its token by its presence only."""
    _house, cabin = two_homes
    made = household.post(f"{API}?instance=cabin", json={"name": "Cabin", "base_url": cabin.base_url,
                                                          "access_token": cabin.token, "enabled": True})
    assert made.status_code == 200
    answer = made.get_json()
    assert (answer["instance"], answer["name"], answer["base_url"]) == ("cabin", "Cabin", cabin.base_url)
    assert answer["has_access_token"] is True and answer["enabled"] is True
    assert household.get(f"{API}?instance=cabin").get_json()["name"] == "Cabin"
    assert household.get(API).get_json()["has_access_token"] is False  # home untouched


def test_a_new_id_without_a_name_is_refused_and_nothing_is_written(household: FlaskClient, data_dir: DataDir,
                                                                   two_homes: Homes) -> None:
    """400 INVALID_CONFIG on `name`; no settings file, no token."""
    _house, cabin = two_homes
    before = snapshot(data_dir)
    response = household.post(f"{API}?instance=cabin", json={"base_url": cabin.base_url, "access_token": cabin.token})
    assert error_of(response, 400, "INVALID_CONFIG")["field"] == "name"
    assert snapshot(data_dir) == before
    assert [i["id"] for i in listed(household)] == ["home"]


def test_the_ninth_is_refused_on_instance_saying_how_many(household: FlaskClient) -> None:
    """`home` and seven more; the ninth: 400 on `instance`, the message naming 8."""
    for i in range(1, MAX_INSTANCES):
        assert household.post(f"{API}?instance=place_{i}", json={"name": f"Place {i}"}).status_code == 200
    error = error_of(household.post(f"{API}?instance=place_9", json={"name": "Place 9"}), 400, "INVALID_CONFIG")
    assert error["field"] == "instance" and str(MAX_INSTANCES) in error["message"]
    assert len(listed(household)) == MAX_INSTANCES


def test_a_name_like_another_s_is_refused_and_a_rename_is_a_save(household: FlaskClient) -> None:
    """Names compared without case or accents; a save with `name` renames, home included ("" is "Home")."""
    assert household.post(f"{API}?instance=cabin", json={"name": "Chalet"}).status_code == 200
    error = error_of(household.post(f"{API}?instance=shed", json={"name": "CHÂLET"}), 400, "INVALID_CONFIG")
    assert error["field"] == "name" and "Chalet" in error["message"]
    assert household.post(f"{API}?instance=cabin", json={"name": "Cabin"}).get_json()["name"] == "Cabin"
    assert household.post(API, json={"name": "House"}).get_json()["name"] == "House"
    assert household.post(API, json={"name": ""}).get_json()["name"] == "Home"
    assert household.get(f"{API}?instance=cabin", headers={"Accept-Language": "fr"}).get_json()["name"] == "Cabin"
    assert household.get(API, headers={"Accept-Language": "fr"}).get_json()["name"] == "Maison"


# --- the list -------------------------------------------------------------------------------------------


def test_the_list_names_every_instance_in_order_and_never_a_token(
        household: FlaskClient, house_and_cabin: Homes, hidden_secrets: list[str]) -> None:
    """`home` first, then the others by id; each with its name, URL, switch, token presence and allowlist."""
    house, cabin = house_and_cabin
    assert household.post(f"{API}?instance=attic", json={"name": "Attic"}).status_code == 200
    hidden_secrets.extend([house.token, cabin.token])
    assert listed(household) == [
        {"id": "home", "name": "Home", "base_url": house.base_url, "enabled": True, "has_access_token": True,
         "allowlisted_entities": ["light.living_room"], "config_error": None},
        {"id": "attic", "name": "Attic", "base_url": "", "enabled": False, "has_access_token": False,
         "allowlisted_entities": [], "config_error": None},
        {"id": "cabin", "name": "Cabin", "base_url": cabin.base_url, "enabled": False, "has_access_token": True,
         "allowlisted_entities": [], "config_error": None},
    ]


def test_a_damaged_settings_file_is_listed_with_its_error_not_a_500(household: FlaskClient, data_dir: DataDir,
                                                                    house_and_cabin: Homes) -> None:
    """Its id, its default name (the id: its own name is in the file that cannot be read), and `config_error`."""
    Instances(data_dir).get("cabin").config.path.write_text("{not json")
    [home, cabin] = listed(household)
    assert home["config_error"] is None
    assert (cabin["id"], cabin["name"], cabin["base_url"]) == ("cabin", "cabin", "")
    assert cabin["config_error"]["code"] == "CONFIG_INVALID"


# --- remove ---------------------------------------------------------------------------------------------


def test_delete_removes_an_instance_with_its_token_and_ca(household: FlaskClient, data_dir: DataDir,
                                                         house_and_cabin: Homes) -> None:
    """200 with the instances left; the cabin's settings, token and CA are gone; home's are as they were."""
    cabin = Instances(data_dir).get("cabin")
    cabin.files.ca_bundle.write_text("a CA")
    home_files = {p: b for p, b in snapshot(data_dir).items() if "home-assistant-instances" not in p.parts}
    response = household.delete(f"{API}?instance=cabin")
    assert response.status_code == 200
    assert [i["id"] for i in response.get_json()["instances"]] == ["home"]
    assert not cabin.config.path.exists() and not cabin.files.secrets.exists()
    assert snapshot(data_dir) == home_files
    error_of(household.get(f"{API}?instance=cabin"), 400, "INVALID_CONFIG")


def test_a_page_left_open_on_a_removed_instance_does_not_make_it_again(household: FlaskClient,
                                                                       data_dir: DataDir) -> None:
    """Its save carries the revision it loaded, which the absent file no longer has: 409 CONFIG_STALE."""
    loaded = household.post(f"{API}?instance=cabin", json={"name": "Cabin"}).get_json()
    assert household.delete(f"{API}?instance=cabin").status_code == 200
    response = household.post(f"{API}?instance=cabin", json={"name": "Cabin", "enabled": True,
                                                              "revision": loaded["revision"]})
    error_of(response, 409, "CONFIG_STALE")
    assert Instances(data_dir).ids() == ("home",)


@pytest.mark.parametrize("query", ["", "?instance=home", "?instance=cabin", "?instance=Not-An-Id",
                                   "?instance=" + "x" * 33])
def test_home_a_bad_id_or_an_unknown_one_cannot_be_removed(household: FlaskClient, data_dir: DataDir,
                                                           query: str) -> None:
    """400 INVALID_CONFIG on `instance`; nothing changes."""
    seed_settings(data_dir, {"base_url": "http://house.local:8123"})
    before = snapshot(data_dir)
    assert error_of(household.delete(API + query), 400, "INVALID_CONFIG")["field"] == "instance"
    assert snapshot(data_dir) == before


def test_a_program_may_neither_list_nor_remove(bearer: FlaskClient, logged_in: FlaskClient,
                                               data_dir: DataDir) -> None:
    """A Bearer token: 403 FORBIDDEN on both; a session without its CSRF token cannot remove either."""
    seed_settings(data_dir, {"name": "Cabin"}, instance="cabin")
    error_of(bearer.get(INSTANCES), 403, "FORBIDDEN")
    error_of(bearer.delete(f"{API}?instance=cabin"), 403, "FORBIDDEN")
    assert logged_in.delete(f"{API}?instance=cabin").status_code in (400, 403)
    assert Instances(data_dir).ids() == ("home", "cabin")


# --- discovery ------------------------------------------------------------------------------------------


def test_discovery_offers_only_the_home_assistants_not_added_yet(app: Flask, household: FlaskClient,
                                                                 house_and_cabin: Homes) -> None:
    """One advertised at an instance's origin, one whose advertisement also names it, one new: the new one alone."""
    house, cabin = house_and_cabin
    app.extensions["console_ha"].settings.discover = lambda **kwargs: [
        Instance("House", house.base_url + "/", "2025.4.4"),
        Instance("Cabin", "http://cabin.local:8123", "2025.4.4", also_at=(cabin.base_url,)),
        Instance("Workshop", "http://192.168.1.30:8123", "2025.4.4"),
    ]
    found = household.get(f"{API}/discover?instance=cabin").get_json()["instances"]
    assert found == [{"name": "Workshop", "base_url": "http://192.168.1.30:8123", "version": "2025.4.4"}]
    assert household.delete(f"{API}?instance=cabin").status_code == 200
    found = household.get(f"{API}/discover").get_json()["instances"]
    assert [i["name"] for i in found] == ["Cabin", "Workshop"]


def test_a_home_assistant_added_by_its_address_is_known_by_its_advertisement(data_dir: DataDir) -> None:
    """An advertisement choosing its `.local` URL, added by its address: every URL it names is matched."""
    info = ServiceInfo(SERVICE_TYPE, f"House.{SERVICE_TYPE}", addresses=[socket.inet_aton("192.168.1.20")],
                       port=8123, properties={"location_name": "House", "version": "2025.4.4",
                                              "internal_url": "http://homeassistant.local:8123"})
    found = instance_from_info(info)
    assert found is not None and found.base_url == "http://homeassistant.local:8123"
    assert not_added([found], Instances(data_dir)) == [found]
    seed_settings(data_dir, {"base_url": "http://192.168.1.20:8123"})
    assert not_added([found], Instances(data_dir)) == []


# --- a token never goes to another instance's origin ------------------------------------------------------


def test_the_cabin_saved_with_the_house_s_url_is_refused(household: FlaskClient, data_dir: DataDir,
                                                        house_and_cabin: Homes) -> None:
    """Without a token or with one: the house is added already (400 on `base_url`), and nothing is sent."""
    house, cabin = house_and_cabin
    before = snapshot(data_dir)
    for body in ({"base_url": house.base_url}, {"base_url": house.base_url, "access_token": "typed-for-it-123"}):
        error = error_of(household.post(f"{API}?instance=cabin", json=body), 400, "INVALID_CONFIG")
        assert (error["field"], error["reason"], error["instance"]) == ("base_url", "url_of_another_instance", "home")
    assert snapshot(data_dir) == before
    assert house.requests == [] and cabin.requests == []


def test_a_test_of_the_cabin_with_the_house_s_url_sends_the_cabin_s_token_nowhere(
        household: FlaskClient, house_and_cabin: Homes) -> None:
    """The cabin's token is bound to the cabin's origin: a test at the house's URL without a token is refused."""
    house, cabin = house_and_cabin
    error = error_of(household.post(f"{API}/test?instance=cabin", json={"base_url": house.base_url}),
                     400, "INVALID_CONFIG")
    assert (error["field"], error["reason"]) == ("access_token", "token_for_another_origin")
    error_of(household.post(f"{API}/entities/preview?instance=cabin", json={"base_url": house.base_url}),
             400, "INVALID_CONFIG")
    assert house.requests == [] and cabin.requests == []
    # Each instance's own test goes to its own Home Assistant with its own token (the stubs refuse the other's).
    assert household.post(f"{API}/test?instance=cabin").get_json()["ok"] is True
    assert household.post(f"{API}/test").get_json()["ok"] is True
    assert [r.headers["Authorization"] for r in cabin.requests] == [f"Bearer {cabin.token}"]
    assert [r.headers["Authorization"] for r in house.requests] == [f"Bearer {house.token}"]


def test_an_instance_without_a_token_never_borrows_another_s(household: FlaskClient, house_and_cabin: Homes) -> None:
    """A new instance with no token, tested at the house's URL: told to enter a token; the house hears nothing."""
    house, _cabin = house_and_cabin
    assert household.post(f"{API}?instance=attic", json={"name": "Attic"}).status_code == 200
    error = error_of(household.post(f"{API}/test?instance=attic", json={"base_url": house.base_url}),
                     409, "CAPABILITY_NOT_CONFIGURED")
    assert error["field"] == "access_token"
    error_of(household.get(f"{API}/entities?instance=attic"), 409, "CAPABILITY_NOT_CONFIGURED")
    assert house.requests == []
