"""The settings page's plain forms (issue 21): the picker's GET form, Test connection and the CA buttons."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from console_ha.settings.browse import PAGE_SIZE
from console_ha.store.ca_certificate import DAMAGED
from console_ha.store.config import ConfigStore
from console_ha.store.datadir import DataDir
from console_ha.words import (
    CA_ADDED,
    CA_REMOVE_QUESTION,
    CA_REMOVED,
    NOTHING_CHOSEN,
    PASTE_TOKEN_AGAIN,
    PICKER_NEEDS_SAVED_CONNECTION,
    SENSITIVE_QUESTION,
    SETTINGS_WORDS,
)
from tests.certs import make_ca
from tests.stub_ha import StubHomeAssistant

from .conftest import API, configure, page_csrf

PAGE = "/settings/home-assistant"


def boxes(html: str) -> dict[str, bool]:
    """The entity checkboxes a page holds: entity_id -> ticked."""
    found = re.findall(r'<input type="checkbox" id="(?:row|allow)-[^"]+" name="allowlisted_entities"\s+'
                       r'value="([^"]+)"[^>]*?( checked)?>', html)
    return {entity_id: bool(checked) for entity_id, checked in found}


def kept(html: str) -> list[str]:
    return re.findall(r'<input type="hidden" name="allowlisted_entities" value="([^"]+)"', html)


def post(client: FlaskClient, path: str = PAGE, **fields: object) -> tuple[int, str, str | None]:
    response = client.post(path, data={"csrf_token": page_csrf(client), "revision": "", **fields})
    return response.status_code, response.get_data(as_text=True), response.location


@pytest.fixture
def saved(household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir) -> StubHomeAssistant:
    """A household that saved the stub's URL and token, with 450 more sensors in its Home Assistant."""
    for i in range(450):
        stub_ha.states.append({"entity_id": f"sensor.extra_{i:03d}", "state": str(i), "attributes": {},
                               "last_changed": "2026-01-01T00:00:00+00:00",
                               "last_updated": "2026-01-01T00:00:00+00:00"})
    configure(household, stub_ha.base_url, stub_ha.token,
              allowlisted_entities=["sensor.extra_000", "light.living_room"])
    return stub_ha


def test_without_a_query_the_page_does_not_ask_home_assistant(household: FlaskClient,
                                                              saved: StubHomeAssistant) -> None:
    """The page with JavaScript stays as quick as before: only a query lists entities on the server.

    Without JavaScript the list is there at once all the same: the page refreshes to the whole list, inside
    <noscript>, which a browser running the script ignores.
    """
    before = len(saved.requests_to("/api/states"))
    html = household.get(PAGE).get_data(as_text=True)
    assert len(saved.requests_to("/api/states")) == before
    assert boxes(html) == {"sensor.extra_000": True, "light.living_room": True}
    assert "Show entities" in html
    assert '<noscript><meta http-equiv="refresh" content="0; url=/settings/home-assistant?q="></noscript>' in html


def test_without_a_saved_connection_the_page_does_not_refresh(household: FlaskClient) -> None:
    """Nothing to list yet: the page stays as it is, with its form to fill in."""
    assert 'http-equiv="refresh"' not in household.get(PAGE).get_data(as_text=True)


def test_the_get_form_lists_a_page_and_keeps_the_chosen_ones_not_on_it(household: FlaskClient,
                                                                      saved: StubHomeAssistant) -> None:
    html = household.get(PAGE, query_string={"q": "extra", "kind": "sensor", "area": "", "page": "2"}).get_data(
        as_text=True)
    shown = boxes(html)
    assert len(shown) == PAGE_SIZE and "sensor.extra_200" in shown and "sensor.extra_000" not in shown
    assert "Showing 201–400 of 450 matching" in html
    # The chosen entities not on this page go along hidden, so a Save cannot lose them.
    assert kept(html) == ["sensor.extra_000", "light.living_room"]
    assert '<option value="sensor" selected>Sensors (temperature, energy, humidity…) (' in html
    # The page buttons post the form, so the ticks go along (test_settings_held.py follows them).
    assert '<button type="submit" name="action" value="page-3">Next 200</button>' in html
    assert '<button type="submit" name="action" value="page-1">Previous 200</button>' in html
    # The settings form posts back to the same list.
    assert 'action="/settings/home-assistant?q=extra&amp;kind=sensor&amp;area=&amp;page=2"' in html


def test_a_save_from_a_page_of_the_list_keeps_every_entity_chosen_elsewhere(
    household: FlaskClient, saved: StubHomeAssistant, data_dir: DataDir
) -> None:
    query = "?q=extra_2&kind=&area=&page=1"
    html = household.get(PAGE + query).get_data(as_text=True)
    status, _, location = post(household, PAGE + query, base_url=saved.base_url, enabled="on",
                               allowlisted_entities=[*kept(html), "sensor.extra_201"])
    assert status == 303 and location == PAGE + query
    assert ConfigStore(data_dir).load().allowlisted_entities == (
        "sensor.extra_000", "light.living_room", "sensor.extra_201")


def test_the_list_needs_a_saved_url_and_token(household: FlaskClient) -> None:
    html = household.get(PAGE, query_string={"q": ""}).get_data(as_text=True)
    assert PICKER_NEEDS_SAVED_CONNECTION in html


def test_a_failing_home_assistant_is_said_in_the_households_words(household: FlaskClient,
                                                                  saved: StubHomeAssistant) -> None:
    saved.stop()
    html = household.get(PAGE, query_string={"q": ""}).get_data(as_text=True)
    assert SETTINGS_WORDS["HA_UNREACHABLE"] in html
    assert boxes(html) == {"sensor.extra_000": True, "light.living_room": True}  # nothing chosen is lost


def test_switching_on_with_nothing_chosen_says_the_assistant_can_read_nothing(household: FlaskClient,
                                                                                stub_ha: StubHomeAssistant) -> None:
    status, _, location = post(household, base_url=stub_ha.base_url, access_token=stub_ha.token, enabled="on")
    assert status == 303
    assert location == PAGE + "?q="  # the saved Home Assistant's entities, to choose from at once
    assert NOTHING_CHOSEN in household.get(location).get_data(as_text=True)


def test_test_connection_uses_what_is_typed_and_never_sends_the_token_back(
    household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir
) -> None:
    status, html, _ = post(household, action="test", base_url=stub_ha.base_url, access_token=stub_ha.token,
                           allowlisted_entities=["light.kitchen"])
    assert status == 200
    assert "Connected to “Home”" in html and PASTE_TOKEN_AGAIN not in html
    assert stub_ha.token not in html and 'id="access-token" name="access_token" value=""' in html
    assert f'value="{stub_ha.base_url}"' in html and boxes(html) == {"light.kitchen": True}
    assert not ConfigStore(data_dir).path.exists()  # a test saves nothing


def test_test_connection_without_a_token_says_what_to_type(household: FlaskClient,
                                                           stub_ha: StubHomeAssistant) -> None:
    _, html, _ = post(household, action="test", base_url=stub_ha.base_url)
    assert "Paste an access token from Home Assistant above, then press Test connection." in html
    assert re.search(r'<input type="password" id="access-token"[^>]*aria-invalid=true', html)
    assert re.search(r'id="access-token-error" >Paste an access token', html)
    assert "save an access token first" not in html
    # Hints fit the page: the API's words lead to the script's live picker, which this page has not. They are
    # handed to that script in a data- attribute (static/settings/picker.js), never shown as the page's text.
    shown = re.sub(r'data-not-configured="[^"]*"', "", html)
    assert SETTINGS_WORDS["CAPABILITY_NOT_CONFIGURED"] not in shown
    assert re.search(r'id="test-status" role="status" aria-live="polite">Paste an access token', html)


def test_the_ca_buttons_work_as_plain_forms_and_remove_asks_first(
    household: FlaskClient, data_dir: DataDir, tmp_path: Path
) -> None:
    pem = make_ca(tmp_path / "ca").ca_pem
    lines = pem.strip().split("\n")
    damaged = "\n".join([*lines[:2], lines[2][:10] + "!" + lines[2][11:], *lines[3:]])
    status, html, _ = post(household, action="ca-add", ca_pem=damaged)
    assert status == 400 and DAMAGED in html
    assert "It should start with" not in html and not data_dir.ha_ca_bundle.exists()

    status, html, _ = post(household, action="ca-add", ca_pem=pem, base_url="http://typed.example:8123")
    assert status == 200 and CA_ADDED in html and "CN=Test household CA" in html
    assert 'value="http://typed.example:8123"' in html  # what was typed is still there
    assert data_dir.ha_ca_bundle.exists()

    _, html, _ = post(household, action="ca-remove")
    assert CA_REMOVE_QUESTION in html
    assert data_dir.ha_ca_bundle.exists()  # asked, not done
    _, html, _ = post(household, action="ca-keep")
    assert data_dir.ha_ca_bundle.exists()
    _, html, _ = post(household, action="ca-remove-confirmed")
    assert CA_REMOVED in html and not data_dir.ha_ca_bundle.exists()


def _revision(html: str) -> str:
    match = re.search(r'name="revision" id="revision" value="([^"]*)"', html)
    assert match
    return match.group(1)


@pytest.mark.parametrize("action", ["test", "ca-remove", "ca-keep"])
def test_a_button_besides_save_keeps_the_revision_the_page_was_opened_with(
    household: FlaskClient, saved: StubHomeAssistant, data_dir: DataDir, action: str
) -> None:
    """Two tabs: a button that answers in place must not let the old tab's Save replace the other's change."""
    opened = household.get(PAGE).get_data(as_text=True)
    old_ticks = list(boxes(opened))
    # Another tab adds an entity meanwhile.
    answer = household.post(API, json={"allowlisted_entities": [*old_ticks, "sensor.extra_001"]})
    assert answer.status_code == 200
    # The first tab presses a button that answers on the page, with its old ticks...
    status, html, _ = post(household, base_url=saved.base_url, enabled="on", revision=_revision(opened),
                           allowlisted_entities=old_ticks, action=action)
    assert status in (200, 400)
    assert _revision(html) == _revision(opened)
    # ...then Save: the other tab's change is not replaced unseen.
    status, html, _ = post(household, base_url=saved.base_url, enabled="on", revision=_revision(html),
                           allowlisted_entities=old_ticks)
    assert status == 409
    assert "sensor.extra_001" in ConfigStore(data_dir).load().allowlisted_entities


# --- sensitive entities ask first, as the script's picker does ------------------------------------------


def nonce(html: str) -> str:
    """What the question's "Save anyway" posts: a nonce, good once."""
    found = re.search(r'<button type="submit" name="confirm_sensitive" value="([^"]+)"', html)
    assert found is not None
    return found.group(1)


def question(html: str) -> list[str]:
    """The entity ids the page asks about before saving, in the order named ([] when it does not ask)."""
    found = re.search(r'<div class="notice notice--warn" role="alert" id="sensitive-question">(.*?)</div>\s*</div>',
                      html, re.S)
    return re.findall(r"<code>([^<]+)</code>", found.group(1)) if found else []


def test_a_save_that_newly_adds_sensitive_entities_asks_first_and_saves_nothing(
    household: FlaskClient, saved: StubHomeAssistant, data_dir: DataDir
) -> None:
    query = "?q=&kind=&area=&page=1"
    chosen = ["sensor.extra_000", "light.living_room", "binary_sensor.front_door", "lock.front_door",
              "binary_sensor.hallway_motion", "sensor.extra_001"]
    revision_before = data_dir.ha_config.read_bytes()
    status, html, _ = post(household, PAGE + query, base_url=saved.base_url, enabled="on",
                           allowlisted_entities=chosen)
    assert status == 200
    # The door sensor by its device class (from Home Assistant), the lock by its domain; motion is not sensitive.
    assert question(html) == ["binary_sensor.front_door", "lock.front_door"]
    assert SENSITIVE_QUESTION in html and "Front door lock" in html
    assert data_dir.ha_config.read_bytes() == revision_before  # nothing saved
    # What was ticked stays chosen: ticked on the page shown, or posted along hidden.
    assert {e for e, ticked in boxes(html).items() if ticked} | set(kept(html)) == set(chosen)
    assert 'href="/settings/home-assistant?q=&amp;kind=&amp;area=&amp;page=1">Go back without saving' in html
    assert re.search(r'id="enabled" name="enabled" value="on" checked', html)

    # "Save anyway" posts the same form with the entities it confirms.
    status, _, location = post(household, PAGE + query, base_url=saved.base_url, enabled="on",
                               allowlisted_entities=chosen,
                               confirm_sensitive=nonce(html))
    assert status == 303 and location == PAGE + query
    config = ConfigStore(data_dir).load()
    assert config.enabled and list(config.allowlisted_entities) == chosen


def test_already_allowlisted_sensitive_entities_and_plain_ones_are_saved_without_asking(
    household: FlaskClient, saved: StubHomeAssistant, data_dir: DataDir
) -> None:
    configure(household, saved.base_url, saved.token, allowlisted_entities=["lock.front_door"])
    status, _, _ = post(household, base_url=saved.base_url,
                        allowlisted_entities=["lock.front_door", "sensor.extra_002"])
    assert status == 303
    assert ConfigStore(data_dir).load().allowlisted_entities == ("lock.front_door", "sensor.extra_002")


def test_a_confirmation_covers_only_the_entities_it_names(household: FlaskClient, saved: StubHomeAssistant,
                                                          data_dir: DataDir) -> None:
    """Ticking another sensitive entity on the question page, then "Save anyway", asks about that one."""
    before = len(saved.requests_to("/api/states"))
    _, html, _ = post(household, base_url=saved.base_url, allowlisted_entities=["lock.front_door"])
    assert question(html) == ["lock.front_door"]
    status, html, _ = post(household, base_url=saved.base_url,
                           allowlisted_entities=["lock.front_door", "camera.driveway", "person.alex"],
                           confirm_sensitive=nonce(html))
    assert status == 200 and question(html) == ["camera.driveway", "person.alex"]
    assert len(saved.requests_to("/api/states")) == before  # their domains decide: Home Assistant is not asked
    assert ConfigStore(data_dir).load().allowlisted_entities == ("sensor.extra_000", "light.living_room")


def test_without_the_catalogue_the_domain_decides(household: FlaskClient, saved: StubHomeAssistant) -> None:
    saved.stop()
    status, html, _ = post(household, base_url=saved.base_url,
                           allowlisted_entities=["lock.front_door", "binary_sensor.front_door", "sensor.x"])
    assert status == 200 and question(html) == ["lock.front_door"]


def test_the_question_keeps_forget_the_token_and_a_typed_token_without_sending_it_back(
    household: FlaskClient, saved: StubHomeAssistant, data_dir: DataDir
) -> None:
    status, html, _ = post(household, base_url=saved.base_url, access_token=saved.token, remove_access_token="on",
                           allowlisted_entities=["camera.driveway"])
    assert status == 200 and question(html) == ["camera.driveway"]
    assert saved.token not in html
    assert PASTE_TOKEN_AGAIN not in html and "The access token you pasted is kept on this Console" in html
    assert re.search(r'name="remove_access_token" value="on" checked', html)


def test_a_token_typed_without_a_url_is_asked_for_again(household: FlaskClient, saved: StubHomeAssistant) -> None:
    """With no URL typed there is no origin to keep it for: the page says to paste it again."""
    _, html, _ = post(household, access_token=saved.token, allowlisted_entities=["camera.driveway"])
    assert question(html) == ["camera.driveway"] and PASTE_TOKEN_AGAIN in html and saved.token not in html


def test_the_question_needs_the_csrf_token_to_be_answered(household: FlaskClient, saved: StubHomeAssistant,
                                                          data_dir: DataDir) -> None:
    del household.environ_base["HTTP_X_CSRFTOKEN"]  # the fixture sends it with every request
    response = household.post(PAGE, data={"revision": "", "base_url": saved.base_url,
                                          "allowlisted_entities": ["lock.front_door"],
                                          "confirm_sensitive": "lock.front_door"})
    assert response.status_code in (400, 403)
    assert ConfigStore(data_dir).load().allowlisted_entities == ("sensor.extra_000", "light.living_room")


def test_save_anyway_still_finds_a_change_made_elsewhere_meanwhile(household: FlaskClient, saved: StubHomeAssistant,
                                                                    data_dir: DataDir) -> None:
    seen = re.search(r'name="revision" id="revision" value="([^"]+)"', household.get(PAGE).get_data(as_text=True))
    assert seen is not None
    configure(household, saved.base_url, saved.token, allowlisted_entities=["sensor.extra_003"])  # elsewhere
    fields = {"base_url": saved.base_url, "allowlisted_entities": ["lock.front_door"]}
    response = household.post(PAGE, data={"csrf_token": page_csrf(household), "revision": seen.group(1), **fields})
    html = response.get_data(as_text=True)
    assert question(html) == ["lock.front_door"]
    assert f'name="revision" id="revision" value="{seen.group(1)}"' in html  # the page's own, kept
    response = household.post(PAGE, data={"csrf_token": page_csrf(household), "revision": seen.group(1),
                                          "confirm_sensitive": nonce(html), **fields})
    assert response.status_code == 409
    assert ConfigStore(data_dir).load().allowlisted_entities == ("sensor.extra_003",)
