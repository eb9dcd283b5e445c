"""The stored token belongs to the Home Assistant it was saved for, on every path that could send it.

Two stub Home Assistants on two ports (`two_homes`), each with its own token; each fails the test if it
ever sees the other's token, over REST or in a WebSocket message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from console_ha.ha.addresses import origin_of
from console_ha.ha.discovery import Instance
from console_ha.secret import Secret
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import StoredToken, TokenStore
from tests.seed import hand_edit, seed_settings
from tests.stub_ha import StubHomeAssistant

from .conftest import API, configure, error_of, log_in, page_csrf, snapshot

PAGE = "/settings/home-assistant"
Homes = tuple[StubHomeAssistant, StubHomeAssistant]


def _sent_to(stub: StubHomeAssistant) -> list[str]:
    return [f"{r.method} {r.path}" for r in stub.requests]


@pytest.fixture
def homes(household: FlaskClient, two_homes: Homes) -> Homes:
    """The household saved `home` (URL and its token); `other` is another Home Assistant on the network."""
    home, other = two_homes
    configure(household, home.base_url, home.token, enabled=True, allowlisted_entities=["light.living_room"])
    home.requests.clear()
    return home, other


def _refused_for_another_origin(error: dict[str, Any], home: StubHomeAssistant, other: StubHomeAssistant) -> None:
    assert error["field"] == "access_token"
    assert error["reason"] == "token_for_another_origin"
    # Both addresses, so the household knows which token to fetch; never the token.
    assert origin_of(home.base_url) in error["message"] and origin_of(other.base_url) in error["message"]


# --- test and save ------------------------------------------------------------------------------------


def test_test_connection_refuses_the_stored_token_for_another_origin(household: FlaskClient, homes: Homes) -> None:
    """`test` with another origin and no token: 400 on access_token, and no request goes anywhere."""
    home, other = homes
    for body in ({"base_url": other.base_url}, {"base_url": other.base_url, "access_token": ""},
                 {"base_url": other.base_url + "/api/", "access_token": "   "}):
        error = error_of(household.post(f"{API}/test", json=body), 400, "INVALID_CONFIG")
        _refused_for_another_origin(error, home, other)
    assert _sent_to(other) == [] and _sent_to(home) == []


@pytest.mark.parametrize("variant", ["another port", "https", "another host name"])
def test_any_other_scheme_host_or_port_is_another_origin(household: FlaskClient, homes: Homes, variant: str) -> None:
    """The origin is scheme, host and port: changing any one of them needs the token again."""
    home, _other = homes
    port = home.base_url.rsplit(":", 1)[1]
    url = {"another port": f"http://127.0.0.1:{int(port) + 1}", "https": f"https://127.0.0.1:{port}",
           "another host name": f"http://localhost:{port}"}[variant]
    error = error_of(household.post(f"{API}/test", json={"base_url": url}), 400, "INVALID_CONFIG")
    assert error["field"] == "access_token"
    assert _sent_to(home) == []


def test_test_connection_with_the_other_home_assistants_own_token_works(household: FlaskClient,
                                                                        homes: Homes) -> None:
    """A token typed for the other origin is the one sent there: the household can still try a new address."""
    home, other = homes
    response = household.post(f"{API}/test", json={"base_url": other.base_url, "access_token": other.token})
    assert response.status_code == 200 and response.get_json()["ok"] is True
    assert _sent_to(other) == ["GET /api/config"] and _sent_to(home) == []
    assert other.requests[0].headers["Authorization"] == f"Bearer {other.token}"


def test_a_default_port_written_out_is_the_same_origin(household: FlaskClient, data_dir: DataDir) -> None:
    """http://h and http://h:80 are one origin, as are https://h and https://h:443."""
    configure(household, "http://ha.local", "stored-token-0123")
    assert household.post(API, json={"base_url": "http://HA.local:80/"}).status_code == 200
    configure(household, "https://ha.local:443", "stored-token-0123")
    assert household.post(API, json={"base_url": "https://ha.local/"}).status_code == 200
    assert TokenStore(data_dir).read_record() == StoredToken(Secret("stored-token-0123"), "https://ha.local:443")


def test_saving_another_origin_without_a_token_is_refused_and_writes_nothing(
    household: FlaskClient, homes: Homes, data_dir: DataDir
) -> None:
    """Save with another origin and no new token: 400 on access_token; both files as they were."""
    home, other = homes
    before = snapshot(data_dir)
    for body in ({"base_url": other.base_url}, {"base_url": other.base_url, "access_token": "",
                                                 "allowlisted_entities": ["sensor.a"], "enabled": False}):
        error = error_of(household.post(API, json=body), 400, "INVALID_CONFIG")
        _refused_for_another_origin(error, home, other)
    assert snapshot(data_dir) == before
    assert household.get(f"{API}/entities").status_code == 200  # still the household's own Home Assistant
    assert _sent_to(other) == []


def test_saving_another_origin_with_its_token_binds_that_token_to_it(
    household: FlaskClient, homes: Homes, data_dir: DataDir
) -> None:
    """A new URL with its own token: the record holds the new pair; the picker reads the new Home Assistant."""
    home, other = homes
    body = configure(household, other.base_url, other.token)
    assert body["access_token_origin"] == origin_of(other.base_url)
    assert TokenStore(data_dir).read_record() == StoredToken(Secret(other.token), origin_of(other.base_url))
    assert household.get(f"{API}/entities").status_code == 200
    assert "GET /api/states" in _sent_to(other) and _sent_to(home) == []


def test_the_same_origin_with_another_path_keeps_the_token(household: FlaskClient, homes: Homes) -> None:
    """Only the origin matters: a path (a reverse proxy's prefix) or letter case is the same Home Assistant."""
    home, _other = homes
    assert household.post(API, json={"base_url": home.base_url.upper() + "/api"}).status_code == 200
    assert household.post(API, json={"base_url": home.base_url}).status_code == 200


def test_forgetting_the_token_with_another_origin_is_allowed(household: FlaskClient, homes: Homes) -> None:
    """Removing the token sends it nowhere, so a new URL may be saved with it; the picker then has no token."""
    home, other = homes
    body = household.post(API, json={"base_url": other.base_url, "remove_access_token": True}).get_json()
    assert body["base_url"] == other.base_url and body["has_access_token"] is False
    assert error_of(household.get(f"{API}/entities"), 409, "CAPABILITY_NOT_CONFIGURED")["field"] == "access_token"
    assert _sent_to(other) == [] and _sent_to(home) == []


def test_a_new_token_needs_a_url_to_belong_to(household: FlaskClient, data_dir: DataDir) -> None:
    """A token saved without any URL would belong to nothing: 400 on base_url, nothing written."""
    error = error_of(household.post(API, json={"access_token": "a-token-for-nowhere"}), 400, "INVALID_CONFIG")
    assert error["field"] == "base_url"
    assert not data_dir.ha_token.exists()


def test_a_reset_with_another_origin_and_no_token_writes_nothing(
    household: FlaskClient, homes: Homes, data_dir: DataDir
) -> None:
    """A reset is validated first too: a URL the stored token does not belong to refuses before the reset."""
    _home, other = homes
    data_dir.ha_config.write_text("not json")
    before = snapshot(data_dir)
    error = error_of(household.post(API, json={"reset": True, "base_url": other.base_url}), 400, "INVALID_CONFIG")
    assert error["field"] == "access_token"
    assert snapshot(data_dir) == before


def test_the_form_without_javascript_refuses_another_origin_and_says_why(
    household: FlaskClient, homes: Homes, data_dir: DataDir
) -> None:
    """The no-JS form: 400, the page shows the refusal under the token field, nothing is written."""
    home, other = homes
    before = snapshot(data_dir)
    response = household.post(PAGE, data={"csrf_token": page_csrf(household), "base_url": other.base_url,
                                          "enabled": "on", "allowlisted_entities": ["light.living_room"]})
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    assert 'id="access-token-error" >The stored access token was saved for the Home Assistant at' in html
    assert 'aria-invalid=true' in html and "Nothing was saved." in html
    assert f'value="{other.base_url}"' in html  # what was typed stays in the field
    assert snapshot(data_dir) == before
    assert _sent_to(other) == [] and _sent_to(home) == []


def test_the_page_says_when_the_saved_url_and_the_token_disagree(
    household: FlaskClient, homes: Homes, data_dir: DataDir
) -> None:
    """After a crash or a hand edit left another origin in the file, the page asks for the token again."""
    home, other = homes
    tag, _note = _token_note(household.get(PAGE).get_data(as_text=True))
    assert "hidden" in tag  # URL and token agree: nothing to say
    hand_edit(data_dir, {"base_url": other.base_url})  # a save would refuse it: a hand edit, or a crash
    html = household.get(PAGE).get_data(as_text=True)
    tag, note = _token_note(html)
    assert "hidden" not in tag
    assert f'data-token-origin="{origin_of(home.base_url)}"' in tag
    assert origin_of(other.base_url) in note and "enter the access token of that Home Assistant" in note
    assert 'aria-describedby="token-status token-origin-note token-hint"' in html
    assert "A token is stored, but for another Home Assistant." in html


def _token_note(html: str) -> tuple[str, str]:
    """The note's opening tag and its content."""
    rest = html.split('<p class="field-warning" id="token-origin-note"', 1)[1]
    tag, _, content = rest.partition(">")
    return tag, content.split("</p>", 1)[0]


# --- the picker, its WebSocket, and the capabilities ------------------------------------------------------


def test_the_picker_and_its_websocket_go_to_the_saved_home_assistant(household: FlaskClient, homes: Homes) -> None:
    """The positive case: states over REST and the areas over the WebSocket, both with home's own token."""
    home, _other = homes
    body = household.get(f"{API}/entities").get_json()
    assert body["areas_known"] is True
    assert next(e for e in body["entities"] if e["entity_id"] == "light.living_room")["area"] == "Living room"
    assert {"GET /api/states", "GET /api/websocket"} <= set(_sent_to(home))
    auth = [json.loads(m) for m in home.ws_messages if '"auth"' in m]
    assert auth and auth[0]["access_token"] == home.token


def test_the_picker_refuses_a_token_saved_for_another_origin(
    household: FlaskClient, homes: Homes, data_dir: DataDir
) -> None:
    """URL in the file ≠ the token's origin: 409 not configured, saying why; no REST, no WebSocket, anywhere."""
    home, other = homes
    hand_edit(data_dir, {"base_url": other.base_url})  # as a hand edit (or an old release's crash) leaves it
    error = error_of(household.get(f"{API}/entities"), 409, "CAPABILITY_NOT_CONFIGURED")
    _refused_for_another_origin(error, home, other)
    assert _sent_to(other) == [] and _sent_to(home) == []
    assert len(other.ws_messages) == len(home.ws_messages) == 0
    settings = household.get(API).get_json()
    assert settings["has_access_token"] is True
    assert settings["access_token_origin"] == origin_of(home.base_url) != origin_of(settings["base_url"])


def test_a_websocket_redirect_to_another_origin_is_not_followed(household: FlaskClient, homes: Homes) -> None:
    """The REST client refuses redirects; the WebSocket must too, or its `auth` message follows the Location."""
    home, other = homes
    home.ws_redirect = other.base_url.replace("http://", "ws://") + "/api/websocket"
    body = household.get(f"{API}/entities").get_json()
    assert body["areas_known"] is False  # areas are optional: the picker answers without them
    assert "GET /api/websocket" in _sent_to(home)
    assert _sent_to(other) == [] and len(other.ws_messages) == 0


def test_the_test_with_no_body_uses_the_saved_pair_only(
    household: FlaskClient, homes: Homes, data_dir: DataDir
) -> None:
    """`test` with no body tests the saved URL with the saved token, and refuses when they disagree."""
    home, other = homes
    assert household.post(f"{API}/test").get_json()["ok"] is True
    hand_edit(data_dir, {"base_url": other.base_url})  # a save would refuse it: a hand edit, or a crash
    _refused_for_another_origin(error_of(household.post(f"{API}/test"), 400, "INVALID_CONFIG"), home, other)
    assert _sent_to(other) == [] and _sent_to(home) == ["GET /api/config"]


# --- discovery: an impostor on the network ----------------------------------------------------------------


def test_a_rogue_discovered_instance_never_gets_the_stored_token(
    app: Flask, household: FlaskClient, homes: Homes, data_dir: DataDir
) -> None:
    """A `_home-assistant._tcp` advertisement named "Home": "Use" then "Test connection" sends it nothing."""
    home, rogue = homes
    rogue.rogue = True  # accepts any token and prints it back as its location name
    app.extensions["console_ha"].settings.discover = lambda **kwargs: [Instance("Home", rogue.base_url, "2025.4.4")]
    found = household.get(f"{API}/discover").get_json()["instances"]
    assert found == [{"name": "Home", "base_url": rogue.base_url, "version": "2025.4.4"}]
    # What the page sends after "Use": the discovered URL and an empty token field.
    error = error_of(household.post(f"{API}/test", json={"base_url": found[0]["base_url"], "access_token": ""}),
                   400, "INVALID_CONFIG")
    _refused_for_another_origin(error, home, rogue)
    error_of(household.post(API, json={"base_url": found[0]["base_url"]}), 400, "INVALID_CONFIG")
    assert _sent_to(rogue) == [] and len(rogue.ws_messages) == 0
    assert TokenStore(data_dir).read_record() == StoredToken(Secret(home.token), origin_of(home.base_url))


def test_an_answer_that_says_the_token_back_is_not_home_assistant(
    household: FlaskClient, homes: Homes, hidden_secrets: list[str]
) -> None:
    """A token the household typed for an impostor is not printed back on the page: 502 not_home_assistant."""
    _home, rogue = homes
    rogue.rogue = True
    typed = "typed-for-the-impostor-0123456789"
    hidden_secrets.append(typed)
    response = household.post(f"{API}/test", json={"base_url": rogue.base_url, "access_token": typed})
    error = error_of(response, 502, "HA_BAD_RESPONSE")
    assert error["reason"] == "not_home_assistant"


# --- a token file written before origins were stored ------------------------------------------------------


def test_a_legacy_token_file_belongs_to_the_configured_origin_and_is_bound_at_start(
    make_app: Callable[..., Flask], data_dir: DataDir, two_homes: Homes, password: str
) -> None:
    """One line, no origin (the previous release): usable for the configured URL only; start writes the origin."""
    home, other = two_homes
    seed_settings(data_dir, {"base_url": home.base_url})
    data_dir.ha_secrets.mkdir(parents=True, mode=0o700)
    data_dir.ha_token.write_text(home.token + "\n")
    store = TokenStore(data_dir)
    assert store.read_for(home.base_url, configured_url=home.base_url) == Secret(home.token)
    assert store.read_for(other.base_url, configured_url=home.base_url) is None

    client = make_app().test_client()  # a start: the legacy record is bound to the configured origin
    assert data_dir.ha_token.read_text() == f"{home.token}\n{origin_of(home.base_url)}\n"
    assert log_in(client, password).status_code == 302
    client.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(client)
    assert client.get(f"{API}/entities").status_code == 200
    hand_edit(data_dir, {"base_url": other.base_url})  # the file edited afterwards: the binding holds
    assert client.get(f"{API}/entities").status_code == 409
    assert _sent_to(other) == []


def test_a_legacy_token_is_bound_by_the_first_save(household: FlaskClient, two_homes: Homes,
                                                    data_dir: DataDir) -> None:
    """Written by hand while running: the first save binds it, so clearing the URL cannot unbind it."""
    home, other = two_homes
    household.post(API, json={"base_url": home.base_url})
    data_dir.ha_secrets.mkdir(parents=True, mode=0o700, exist_ok=True)
    data_dir.ha_token.write_text(home.token + "\n")
    assert household.post(API, json={"base_url": ""}).status_code == 200
    assert TokenStore(data_dir).read_record() == StoredToken(Secret(home.token), origin_of(home.base_url))
    assert household.post(API, json={"base_url": other.base_url}).status_code == 400
    assert household.post(API, json={"base_url": home.base_url}).status_code == 200


def test_a_legacy_token_without_any_url_must_be_entered_again_with_one(
    household: FlaskClient, two_homes: Homes, data_dir: DataDir
) -> None:
    """A token alone, with no URL configured, belongs to nothing: the first URL needs the token again."""
    home, _other = two_homes
    data_dir.ha_secrets.mkdir(parents=True, mode=0o700)
    data_dir.ha_token.write_text(home.token + "\n")
    error = error_of(household.post(API, json={"base_url": home.base_url}), 400, "INVALID_CONFIG")
    assert error["field"] == "access_token" and "saved without a Home Assistant URL" in error["message"]
    response = household.post(PAGE, data={"csrf_token": page_csrf(household), "base_url": home.base_url})
    tag, note = _token_note(response.get_data(as_text=True))
    assert response.status_code == 400 and "hidden" not in tag
    assert '<span id="token-origin-unbound" >The stored access token was saved without' in note
    assert configure(household, home.base_url, home.token)["access_token_origin"] == origin_of(home.base_url)
    assert _sent_to(home) == []


# --- temporary files left by killed writes ----------------------------------------------------------------


def test_leftover_temporary_files_are_swept_at_start(make_app: Callable[..., Flask], data_dir: DataDir) -> None:
    """`.access-token.*.tmp` (a full copy of a token) and every other atomic-write leftover go at start."""
    TokenStore(data_dir).write(Secret("a-stored-token-123"), "http://ha.local:8123")
    seed_settings(data_dir, {"base_url": "http://ha.local:8123"})
    leftovers = [data_dir.ha_secrets / ".access-token.k3j_x9a2.tmp",
                 data_dir.capabilities / ".home-assistant.json.abcdefgh.tmp",
                 data_dir.console_secrets / ".api-tokens.json.0a1b2c3d.tmp"]
    kept = [data_dir.ha_secrets / "access-token.tmp", data_dir.capabilities / ".notes.tmp",
            data_dir.capabilities / ".home-assistant.json.lock", data_dir.capabilities / ".x.TOOLONG12.tmp"]
    for path in leftovers + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("a-stored-token-123\n" if path in leftovers else "not ours to remove\n")
    make_app()
    assert [p for p in leftovers if p.exists()] == []
    assert all(p.exists() for p in kept)
    assert TokenStore(data_dir).read_for("http://ha.local:8123", configured_url="") == Secret("a-stored-token-123")


# --- the picker before saving (set-up in one save) ----------------------------------------------------------


def test_the_picker_preview_sends_a_typed_token_only_to_the_url_typed_beside_it(
    household: FlaskClient, homes: Homes, data_dir: DataDir
) -> None:
    """The other Home Assistant's list with its own token, typed; home hears nothing; nothing is written."""
    home, other = homes
    before = snapshot(data_dir)
    response = household.post(f"{API}/entities/preview", json={"base_url": other.base_url,
                                                                "access_token": other.token})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert any(e["entity_id"] == "light.living_room" for e in response.get_json()["entities"])
    assert "GET /api/states" in _sent_to(other) and _sent_to(home) == []
    assert other.requests_to("/api/states")[0].headers["Authorization"] == f"Bearer {other.token}"
    assert snapshot(data_dir) == before


def test_the_picker_preview_refuses_the_stored_token_for_another_origin(household: FlaskClient, homes: Homes) -> None:
    """Without a typed token, the stored one only for its own origin: 400 on access_token, no request anywhere."""
    home, other = homes
    for body in ({"base_url": other.base_url}, {"base_url": other.base_url, "access_token": " "}):
        error = error_of(household.post(f"{API}/entities/preview", json=body), 400, "INVALID_CONFIG")
        _refused_for_another_origin(error, home, other)
    assert _sent_to(other) == [] and _sent_to(home) == []
    assert len(other.ws_messages) == len(home.ws_messages) == 0


def test_the_picker_preview_uses_the_stored_token_for_its_own_origin(household: FlaskClient, homes: Homes) -> None:
    """The saved origin with another path: the stored token, and the allowlist saved beside it."""
    home, other = homes
    response = household.post(f"{API}/entities/preview", json={"base_url": home.base_url + "/api/"})
    assert response.status_code == 200
    rows = {e["entity_id"]: e for e in response.get_json()["entities"]}
    assert rows["light.living_room"]["allowlisted"] is True
    assert home.requests_to("/api/states")[0].headers["Authorization"] == f"Bearer {home.token}"
    assert _sent_to(other) == []


@pytest.mark.parametrize("where", ["friendly_name", "state"])
def test_an_entity_list_that_says_the_token_back_is_not_home_assistant(
    household: FlaskClient, homes: Homes, hidden_secrets: list[str], where: str
) -> None:
    """An impostor that puts the typed token in an entity, to have the picker show it: 502, the token unsaid."""
    _home, rogue = homes
    rogue.rogue = True
    typed = "typed-for-the-impostor-0123456789"
    hidden_secrets.append(typed)
    rogue.set_state("sensor.bait", typed if where == "state" else "1",
                    {"friendly_name": typed} if where == "friendly_name" else {})
    response = household.post(f"{API}/entities/preview", json={"base_url": rogue.base_url, "access_token": typed})
    assert typed not in response.get_data(as_text=True)
    assert error_of(response, 502, "HA_BAD_RESPONSE")["reason"] == "not_home_assistant"


def test_an_entity_list_that_says_back_a_token_with_quotes_or_backslashes_is_not_home_assistant(
    household: FlaskClient, homes: Homes, hidden_secrets: list[str]
) -> None:
    """A typed token with `"` or `\\` (printable ASCII, so accepted) is escaped in the JSON: still caught."""
    _home, rogue = homes
    rogue.rogue = True
    typed = 'typed"for\\the-impostor-0123456789'
    hidden_secrets.append(typed)
    rogue.set_state("sensor.bait", "1", {"friendly_name": typed})
    response = household.post(f"{API}/entities/preview", json={"base_url": rogue.base_url, "access_token": typed})
    text = response.get_data(as_text=True)
    assert typed not in text and json.dumps(typed)[1:-1] not in text
    assert error_of(response, 502, "HA_BAD_RESPONSE")["reason"] == "not_home_assistant"
