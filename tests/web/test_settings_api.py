"""The Home Assistant settings API against a stub Home Assistant over real HTTP on loopback."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Callable
from typing import Any

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient

from console_ha.capabilities.entity_budget import BUDGET_BYTES, entity_cost
from console_ha.ha.areas import AreaCache
from console_ha.ha.discovery import Instance
from console_ha.store.datadir import DataDir
from tests.stub_ha import StubHomeAssistant

from .conftest import API, configure, error_of, files_under, log_in, page_csrf, snapshot, unused_port

ENTITY_KEYS = {"entity_id", "friendly_name", "domain", "state", "unavailable", "allowlisted", "area", "sensitive",
               "cost"}
SENSITIVE = {
    "lock.front_door", "person.alex", "camera.driveway", "cover.garage_door",
    "binary_sensor.front_door", "binary_sensor.kitchen_window",
}


# --- GET and POST -------------------------------------------------------------------------------


def test_get_answers_the_defaults_before_anything_is_saved(household: FlaskClient) -> None:
    """An unconfigured Console: disabled, no URL, no token, nothing allowlisted."""
    assert household.get(API).get_json() == {
        "enabled": False,
        "base_url": "",
        "has_access_token": False,
        "access_token_origin": None,
        "allowlisted_entities": [],
        "entity_names": {},
        "instance": "home",
        "name": "Home",  # what its cards call it until the household names it
        "revision": "absent",
        "config_error": None,
    }


def test_post_saves_the_settings_and_keeps_the_token_apart(
    household: FlaskClient, data_dir: DataDir, hidden_secrets: list[str]
) -> None:
    """The file holds the contract's keys (never the token); the token file is 0600 in a 0700 directory."""
    token = "eyJhbGciOiJIUzI1NiJ9.secret-part.signature"
    hidden_secrets.append(token)
    response = household.post(API, json={
        "enabled": True,
        "base_url": "http://homeassistant.local:8123/api/",
        "access_token": token,
        "allowlisted_entities": ["sensor.a", "sensor.b", "sensor.a"],
        "entity_names": {"sensor.a": "Sensor A", "sensor.other": "Not allowlisted"},
    })
    assert response.status_code == 200
    body = response.get_json()
    assert body["enabled"] is True
    assert body["base_url"] == "http://homeassistant.local:8123"
    assert body["has_access_token"] is True
    assert body["allowlisted_entities"] == ["sensor.a", "sensor.b"]
    assert body["entity_names"] == {"sensor.a": "Sensor A"}
    assert body["revision"] != "absent" and body["config_error"] is None
    assert household.get(API).get_json() == body

    on_disk = json.loads(data_dir.ha_config.read_text())
    assert on_disk["enabled"] is True and on_disk["allowlisted_entities"] == ["sensor.a", "sensor.b"]
    assert token not in data_dir.ha_config.read_text()
    # One record: the token, then the origin it was saved for (the port written out).
    assert data_dir.ha_token.read_text() == f"{token}\nhttp://homeassistant.local:8123\n"
    assert stat.S_IMODE(data_dir.ha_token.stat().st_mode) == 0o600
    assert stat.S_IMODE(data_dir.ha_secrets.stat().st_mode) == 0o700


@pytest.mark.parametrize("omitted", [{}, {"access_token": ""}, {"access_token": "   "}, {"access_token": None}],
                         ids=["omitted", "empty", "blank", "null"])
def test_an_omitted_or_empty_token_leaves_the_stored_one(
    household: FlaskClient, data_dir: DataDir, omitted: dict[str, Any]
) -> None:
    """Re-saving the allowlist needs no token: the page's token field is empty when it loads."""
    configure(household, "http://ha.local:8123", "stored-token")
    response = household.post(API, json={"allowlisted_entities": ["light.kitchen"], **omitted})
    assert response.get_json()["has_access_token"] is True
    assert data_dir.ha_token.read_text().splitlines()[0] == "stored-token"


def test_remove_access_token_forgets_it(household: FlaskClient, data_dir: DataDir) -> None:
    """`"remove_access_token": true` is the way to remove the token."""
    configure(household, "http://ha.local:8123", "stored-token")
    response = household.post(API, json={"remove_access_token": True})
    assert response.status_code == 200
    assert response.get_json()["has_access_token"] is False
    assert not data_dir.ha_token.exists()


@pytest.mark.parametrize(
    "body, field",
    [
        ({"base_url": "ftp://ha.local"}, "base_url"),
        ({"base_url": "http://user:pw@ha.local"}, "base_url"),
        ({"base_url": "http://ha.local/?q=1"}, "base_url"),
        ({"base_url": 8123}, "base_url"),
        ({"enabled": "yes"}, "enabled"),
        ({"allowlisted_entities": ["Sensor.Bad"]}, "allowlisted_entities"),
        ({"allowlisted_entities": "sensor.a"}, "allowlisted_entities"),
        ({"entity_names": {"sensor.a": 5}}, "entity_names"),
        ({"access_token": "has a space"}, "access_token"),
        ({"access_token": 12345}, "access_token"),
        ({"access_token": "new-token", "remove_access_token": True}, "access_token"),
        ({"remove_access_token": "yes"}, "remove_access_token"),
        ({"reset": 1}, "reset"),
        ({"revision": 5}, "revision"),
        ({"ca_bundle": "/etc/ssl/ca.pem"}, "ca_bundle"),
        ({"surprise": True}, "surprise"),
    ],
)
def test_invalid_input_is_invalid_config_with_its_field_and_writes_nothing(
    household: FlaskClient, data_dir: DataDir, body: dict[str, Any], field: str
) -> None:
    """400 INVALID_CONFIG naming the field; the files on disk are byte for byte as before."""
    configure(household, "http://ha.local:8123", "stored-token", allowlisted_entities=["sensor.kept"])
    before = snapshot(data_dir)
    changes = {"enabled": True, "allowlisted_entities": ["sensor.new"], **body}
    error = error_of(household.post(API, json=changes), 400, "INVALID_CONFIG")
    assert error["field"] == field
    assert snapshot(data_dir) == before


def test_a_bad_token_leaves_a_first_save_unwritten(household: FlaskClient, data_dir: DataDir) -> None:
    """The token is checked before anything is written: no half-saved configuration."""
    error = error_of(household.post(API, json={"base_url": "http://ha.local:8123", "enabled": True,
                                             "access_token": "bad token"}), 400, "INVALID_CONFIG")
    assert error["field"] == "access_token"
    assert files_under(data_dir.capabilities) == [] and not data_dir.ha_token.exists()


def test_a_stale_revision_is_refused(household: FlaskClient, data_dir: DataDir) -> None:
    """Saving over a change made elsewhere since the page loaded: 409 CONFIG_STALE, nothing written."""
    first = household.get(API).get_json()["revision"]
    second = household.post(API, json={"enabled": True, "revision": first}).get_json()["revision"]
    assert second != first
    before = data_dir.ha_config.read_bytes()
    error_of(household.post(API, json={"enabled": False, "revision": first}), 409, "CONFIG_STALE")
    assert data_dir.ha_config.read_bytes() == before
    assert household.post(API, json={"enabled": False, "revision": second}).status_code == 200


def test_a_broken_file_is_reported_by_get_and_refused_by_post(household: FlaskClient, data_dir: DataDir) -> None:
    """GET answers 200 with config_error (so the page can explain); POST answers 409 CONFIG_INVALID."""
    data_dir.capabilities.mkdir(parents=True)
    data_dir.ha_config.write_text('{"enabled": tru')
    body = household.get(API).get_json()
    assert body["config_error"]["code"] == "CONFIG_INVALID"
    assert body["config_error"]["action"] == "reset"
    assert "reset" in body["config_error"]["message"]
    assert body["enabled"] is False and body["revision"] is None
    error = error_of(household.post(API, json={"enabled": True}), 409, "CONFIG_INVALID")
    assert error["action"] == "reset"
    assert data_dir.ha_config.read_text() == '{"enabled": tru'


def test_reset_moves_the_broken_file_aside_and_applies_the_changes(
    household: FlaskClient, data_dir: DataDir
) -> None:
    """`"reset": true` keeps the damaged file beside the new one, which holds the defaults plus the changes."""
    configure(household, "http://ha.local:8123", "stored-token")
    data_dir.ha_config.write_text('{"enabled": "maybe"}')
    response = household.post(API, json={"reset": True, "allowlisted_entities": ["sensor.a"]})
    assert response.status_code == 200
    body = response.get_json()
    assert body["config_error"] is None
    assert body["allowlisted_entities"] == ["sensor.a"] and body["base_url"] == ""
    assert body["has_access_token"] is True  # the token is not part of the reset
    aside = [p for p in data_dir.capabilities.iterdir() if ".broken-" in p.name]
    assert len(aside) == 1 and aside[0].read_text() == '{"enabled": "maybe"}'


def test_a_reset_with_an_invalid_field_writes_nothing(household: FlaskClient, data_dir: DataDir) -> None:
    """Validation comes before the reset too."""
    data_dir.capabilities.mkdir(parents=True)
    data_dir.ha_config.write_text("not json")
    error_of(household.post(API, json={"reset": True, "base_url": "ftp://x"}), 400, "INVALID_CONFIG")
    assert data_dir.ha_config.read_text() == "not json"
    assert [p.name for p in data_dir.capabilities.iterdir() if not p.name.startswith(".")] == [
        "home-assistant.json"
    ]


# --- the picker's proxy ---------------------------------------------------------------------------


def test_entities_needs_a_url_and_a_token(household: FlaskClient) -> None:
    """Not configured: 409 CAPABILITY_NOT_CONFIGURED, naming what is missing."""
    error = error_of(household.get(f"{API}/entities"), 409, "CAPABILITY_NOT_CONFIGURED")
    assert error["field"] == "base_url"
    household.post(API, json={"base_url": "http://ha.local:8123"})
    error = error_of(household.get(f"{API}/entities"), 409, "CAPABILITY_NOT_CONFIGURED")
    assert error["field"] == "access_token"


def test_entities_with_a_broken_file_is_config_invalid(household: FlaskClient, data_dir: DataDir) -> None:
    """The picker cannot guess a URL from a damaged file."""
    data_dir.capabilities.mkdir(parents=True)
    data_dir.ha_config.write_text("[]")
    error_of(household.get(f"{API}/entities"), 409, "CONFIG_INVALID")


def test_entities_are_narrowed_flagged_and_missing_ones_listed(
    household: FlaskClient, stub_ha: StubHomeAssistant
) -> None:
    """Only the picker's fields; sensitive, unavailable and allowlisted flags; allowlisted ids HA lost."""
    configure(household, stub_ha.base_url, stub_ha.token,
              allowlisted_entities=["sensor.living_room_temperature", "sensor.removed_long_ago"],
              entity_names={"sensor.removed_long_ago": "Old sensor"})
    response = household.get(f"{API}/entities")
    assert response.status_code == 200
    body = response.get_json()
    entities = {e["entity_id"]: e for e in body["entities"]}
    assert set(entities) == {s["entity_id"] for s in stub_ha.states}
    assert [e["entity_id"] for e in body["entities"]] == sorted(entities)
    assert all(set(e) == ENTITY_KEYS for e in entities.values())
    assert {e for e, v in entities.items() if v["sensitive"]} == SENSITIVE
    assert {e for e, v in entities.items() if v["unavailable"]} == {
        "sensor.garden_soil_moisture", "sensor.washing_machine_status"}
    assert {e for e, v in entities.items() if v["allowlisted"]} == {"sensor.living_room_temperature"}
    temperature = entities["sensor.living_room_temperature"]
    assert temperature == {
        "entity_id": "sensor.living_room_temperature", "friendly_name": "Living room temperature",
        "domain": "sensor", "state": "21.4", "unavailable": False, "allowlisted": True, "area": None,
        "sensitive": False, "cost": entity_cost("sensor.living_room_temperature"),
    }
    assert body["missing"] == [{"entity_id": "sensor.removed_long_ago", "friendly_name": "Old sensor",
                                "domain": "sensor", "sensitive": False,
                                "cost": entity_cost("sensor.removed_long_ago")}]
    assert body["budget_bytes"] == BUDGET_BYTES
    assert body["areas_known"] is False
    # UTC in the one form every answer uses (timestamps.utc_z), not +00:00 here and Z elsewhere.
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body["retrieved_at"])
    # Attributes never pass through: the camera's own access token stays in Home Assistant.
    camera = next(s for s in stub_ha.states if s["entity_id"] == "camera.driveway")
    assert camera["attributes"]["access_token"].encode() not in response.get_data()


def test_entities_answer_is_at_most_half_the_bytes_of_homes_assistants(
    household: FlaskClient, stub_ha: StubHomeAssistant
) -> None:
    """The narrowing pays for itself: the picker gets at most half of what /api/states sends."""
    for i in range(500):
        stub_ha.set_state(f"sensor.room_{i}_temperature", "20.5", {
            "unit_of_measurement": "°C", "device_class": "temperature", "state_class": "measurement",
            "friendly_name": f"Room {i} temperature"})
    configure(household, stub_ha.base_url, stub_ha.token)
    raw = requests.get(f"{stub_ha.base_url}/api/states", headers={"Authorization": f"Bearer {stub_ha.token}"},
                       timeout=5).content
    ours = household.get(f"{API}/entities").get_data()
    assert len(ours) <= len(raw) / 2


def test_entities_carry_areas_when_the_registries_give_them(
    app: Flask, household: FlaskClient, stub_ha: StubHomeAssistant
) -> None:
    """Areas come from the WebSocket registries (faked here at that boundary; tested in test_areas)."""
    calls: list[str] = []

    def fetch(base_url: str, token: Any, **kwargs: Any) -> dict[str, str]:
        calls.append(base_url)
        return {"sensor.living_room_temperature": "Living room"}

    app.extensions["console_ha"].settings.areas = AreaCache(fetch=fetch)
    configure(household, stub_ha.base_url, stub_ha.token)
    body = household.get(f"{API}/entities").get_json()
    entities = {e["entity_id"]: e for e in body["entities"]}
    assert body["areas_known"] is True
    assert entities["sensor.living_room_temperature"]["area"] == "Living room"
    assert entities["light.bedroom"]["area"] is None
    household.get(f"{API}/entities")
    assert calls == [stub_ha.base_url]  # cached for the next picker load


@pytest.mark.parametrize(
    "kind, code",
    [
        ("401", "HA_UNAUTHORIZED"),
        ("403", "HA_UNAUTHORIZED"),
        ("404", "HA_NOT_FOUND"),
        ("500", "HA_BAD_RESPONSE"),
        ("invalid_json", "HA_BAD_RESPONSE"),
        ("wrong_shape", "HA_BAD_RESPONSE"),
        ("oversized", "HA_BAD_RESPONSE"),
        ("drop", "HA_UNREACHABLE"),
    ],
)
def test_home_assistant_failures_are_502_with_their_code(
    household: FlaskClient, stub_ha: StubHomeAssistant, kind: str, code: str
) -> None:
    """Whatever goes wrong on HA's side answers 502 and the HA_* code."""
    configure(household, stub_ha.base_url, stub_ha.token)
    stub_ha.fault(kind, path_prefix="/api/states")
    error_of(household.get(f"{API}/entities"), 502, code)


def test_a_slow_home_assistant_is_a_timeout(
    make_app: Callable[..., Flask], stub_ha: StubHomeAssistant, password: str
) -> None:
    """Past the bound: 502 HA_TIMEOUT, answered within about the bound."""
    app = make_app(CONSOLE_HA_STATES_TIMEOUT=0.3)
    from .conftest import log_in, page_csrf

    client = app.test_client()
    log_in(client, password)
    client.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(client)
    configure(client, stub_ha.base_url, stub_ha.token)
    stub_ha.fault("slow", path_prefix="/api/states", delay=1.0)
    error_of(client.get(f"{API}/entities"), 502, "HA_TIMEOUT")


def test_an_unreachable_home_assistant_is_502_unreachable(household: FlaskClient) -> None:
    """Nothing listening at the stored URL."""
    configure(household, f"http://127.0.0.1:{unused_port()}", "some-token")
    error_of(household.get(f"{API}/entities"), 502, "HA_UNREACHABLE")


# --- discovery -------------------------------------------------------------------------------------


def test_discover_answers_the_instances_found(app: Flask, household: FlaskClient) -> None:
    """The browse (faked at the zeroconf boundary; real in tests/test_discovery.py) with its bound."""
    seen: list[float] = []

    def fake_discover(timeout: float) -> list[Instance]:
        seen.append(timeout)
        return [Instance("Home", "http://192.168.1.20:8123", "2025.4.4")]

    app.extensions["console_ha"].settings.discover = fake_discover
    response = household.get(f"{API}/discover")
    assert response.status_code == 200
    assert response.get_json() == {
        "instances": [{"name": "Home", "base_url": "http://192.168.1.20:8123", "version": "2025.4.4"}]
    }
    assert seen == [0.5]


def test_discover_browses_for_real(household: FlaskClient) -> None:
    """The real browse on 127.0.0.1 (the tests' interface) answers.

    What it finds depends on what else advertises on this machine's loopback, so only the shape is checked.
    Its bound is checked off clocks: the view hands the browse 0.5 s (above), which ends the browse on its
    clock (tests/test_discovery.py).
    """
    response = household.get(f"{API}/discover")
    assert response.status_code == 200
    instances = response.get_json()["instances"]
    assert all(set(i) == {"name", "base_url", "version"} for i in instances)


# --- the connection test ---------------------------------------------------------------------------


def test_the_stored_connection_tests_ok(household: FlaskClient, stub_ha: StubHomeAssistant) -> None:
    """With no body: the stored URL and token; answers HA's version and location name."""
    configure(household, stub_ha.base_url, stub_ha.token)
    response = household.post(f"{API}/test")
    assert response.status_code == 200
    assert response.get_json() == {"ok": True, "version": "2025.4.4", "location_name": "Home",
                                   "base_url": stub_ha.base_url}


def test_a_given_url_and_token_are_tested_without_saving_them(
    household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir
) -> None:
    """Before saving: the page tests what the household typed; nothing is written."""
    response = household.post(f"{API}/test", json={"base_url": stub_ha.base_url + "/api/",
                                                   "access_token": stub_ha.token})
    assert response.get_json()["ok"] is True
    assert files_under(data_dir.capabilities) == [] and not data_dir.ha_token.exists()


def test_a_given_url_of_the_same_origin_uses_the_stored_token(
    household: FlaskClient, stub_ha: StubHomeAssistant
) -> None:
    """Fixing the URL's path or spelling does not need the token pasted again: the origin is the same."""
    configure(household, stub_ha.base_url, stub_ha.token)
    response = household.post(f"{API}/test", json={"base_url": stub_ha.base_url.upper() + "/api/",
                                                    "access_token": ""})
    assert response.get_json()["ok"] is True


def test_a_wrong_token_is_named_as_such(household: FlaskClient, stub_ha: StubHomeAssistant) -> None:
    """502 HA_UNAUTHORIZED with a message that says what to do."""
    error = error_of(household.post(f"{API}/test", json={"base_url": stub_ha.base_url,
                                                       "access_token": "wrong-token"}),
                   502, "HA_UNAUTHORIZED")
    assert "access token" in error["message"]


def test_an_unreachable_address_is_named_as_such(household: FlaskClient) -> None:
    """502 HA_UNREACHABLE."""
    error_of(household.post(f"{API}/test", json={"base_url": f"http://127.0.0.1:{unused_port()}",
                                               "access_token": "t"}), 502, "HA_UNREACHABLE")


def test_an_untrusted_certificate_is_a_tls_error(
    household: FlaskClient, self_signed_cert: tuple[str, str], hidden_secrets: list[str]
) -> None:
    """https with a certificate nothing trusts: 502 HA_TLS_ERROR."""
    cert, key = self_signed_cert
    with StubHomeAssistant(certfile=cert, keyfile=key) as stub:
        hidden_secrets.append(stub.token)
        assert stub.base_url.startswith("https://")
        error_of(household.post(f"{API}/test", json={"base_url": stub.base_url, "access_token": stub.token}),
               502, "HA_TLS_ERROR")


@pytest.mark.parametrize(
    "override",
    [
        None,  # a 404 at /api/config
        (b"<html><body>My router</body></html>", "text/html"),
        (b'{"hello": "world"}', "application/json"),
        (b"[1, 2, 3]", "application/json"),
    ],
    ids=["404", "html", "other-json", "array"],
)
def test_something_that_is_not_home_assistant_is_named_as_such(
    household: FlaskClient, stub_ha: StubHomeAssistant, override: tuple[bytes, str] | None
) -> None:
    """502 HA_BAD_RESPONSE with reason not_home_assistant."""
    if override is None:
        stub_ha.fault("404", path_prefix="/api/config")
    else:
        stub_ha.override("/api/config", override[0], content_type=override[1])
    error = error_of(household.post(f"{API}/test", json={"base_url": stub_ha.base_url,
                                                       "access_token": stub_ha.token}),
                   502, "HA_BAD_RESPONSE")
    assert error["reason"] == "not_home_assistant"


def test_a_server_error_is_a_bad_response_not_a_misidentification(
    household: FlaskClient, stub_ha: StubHomeAssistant
) -> None:
    """HA answering 500 is Home Assistant in trouble, not "not Home Assistant"."""
    stub_ha.fault("500", path_prefix="/api/config")
    error = error_of(household.post(f"{API}/test", json={"base_url": stub_ha.base_url,
                                                       "access_token": stub_ha.token}),
                   502, "HA_BAD_RESPONSE")
    assert error.get("reason") != "not_home_assistant"


def test_a_slow_answer_to_the_test_is_a_timeout(
    make_app: Callable[..., Flask], stub_ha: StubHomeAssistant, password: str
) -> None:
    """502 HA_TIMEOUT within the bound."""
    client = make_app(CONSOLE_HA_TEST_TIMEOUT=0.3).test_client()
    log_in(client, password)
    stub_ha.fault("slow", path_prefix="/api/config", delay=1.0)
    response = client.post(f"{API}/test", json={"base_url": stub_ha.base_url, "access_token": stub_ha.token},
                           headers={"X-CSRFToken": page_csrf(client)})
    error_of(response, 502, "HA_TIMEOUT")


@pytest.mark.parametrize(
    "body, status, code, field",
    [
        ({}, 409, "CAPABILITY_NOT_CONFIGURED", "base_url"),
        ({"base_url": "http://ha.local:8123"}, 409, "CAPABILITY_NOT_CONFIGURED", "access_token"),
        ({"base_url": "not a url", "access_token": "t"}, 400, "INVALID_CONFIG", "base_url"),
        ({"base_url": "http://ha.local", "access_token": "t", "enabled": True}, 400, "INVALID_CONFIG", "enabled"),
    ],
)
def test_the_test_needs_a_url_and_a_token(
    household: FlaskClient, body: dict[str, Any], status: int, code: str, field: str
) -> None:
    """Nothing to test with, or invalid input: refused before any request goes out."""
    error = error_of(household.post(f"{API}/test", json=body), status, code)
    assert error["field"] == field


def test_a_program_s_token_can_neither_read_the_picker_nor_change_or_test_the_settings(
    bearer: FlaskClient, household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir
) -> None:
    """Issue 16: every entity, the allowlist, the switch and the token are the household's; a program gets 403.

    The probe read all entities through the picker with an API token, widened the allowlist, turned the
    assistant on and removed the Home Assistant token. Now each is refused, nothing is written, and Home
    Assistant hears nothing from any of them.
    """
    configure(household, stub_ha.base_url, stub_ha.token, allowlisted_entities=["sensor.living_room_temperature"])
    saved = data_dir.ha_config.read_bytes()
    asked_before = len(stub_ha.requests)
    attempts = [
        bearer.get(f"{API}/entities"),
        bearer.post(f"{API}/entities/preview", json={"base_url": stub_ha.base_url, "access_token": stub_ha.token}),
        bearer.post(API, json={"allowlisted_entities": ["sensor.living_room_temperature", "lock.front_door"],
                               "enabled": True}),
        bearer.post(API, json={"remove_access_token": True}),
        bearer.post(f"{API}/test"),
        bearer.get(f"{API}/discover"),
        bearer.get(API),
    ]
    for response in attempts:
        error_of(response, 403, "FORBIDDEN")
    assert data_dir.ha_config.read_bytes() == saved
    assert household.get(API).get_json()["has_access_token"] is True
    assert len(stub_ha.requests) == asked_before


# --- the picker before saving ------------------------------------------------------------------------


def test_the_picker_preview_lists_what_was_typed_before_anything_is_saved(
    household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir
) -> None:
    """A first set-up: the picker from the typed URL and token, with nothing saved before or after."""
    response = household.post(f"{API}/entities/preview", json={"base_url": stub_ha.base_url,
                                                                "access_token": stub_ha.token})
    assert response.status_code == 200
    body = response.get_json()
    assert body["entities"] and set(body["entities"][0]) == ENTITY_KEYS
    assert body["missing"] == [] and body["budget_bytes"] == BUDGET_BYTES
    assert files_under(data_dir.capabilities) == [] and not data_dir.ha_token.exists()


def test_the_picker_preview_refuses_what_it_cannot_use(household: FlaskClient, stub_ha: StubHomeAssistant) -> None:
    """No URL: not configured; a URL without any token: not configured; unknown fields: invalid; a bad token: 502."""
    error_of(household.post(f"{API}/entities/preview", json={}), 409, "CAPABILITY_NOT_CONFIGURED")
    error_of(household.post(f"{API}/entities/preview", json={"base_url": stub_ha.base_url}),
           409, "CAPABILITY_NOT_CONFIGURED")
    error_of(household.post(f"{API}/entities/preview", json={"base_url": stub_ha.base_url, "enabled": True}),
           400, "INVALID_CONFIG")
    error_of(household.post(f"{API}/entities/preview", json={"base_url": stub_ha.base_url,
                                                           "access_token": "wrong-token"}), 502, "HA_UNAUTHORIZED")
