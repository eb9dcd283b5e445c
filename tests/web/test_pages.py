"""The settings page as the server renders it, and its form post for browsers without JavaScript."""

from __future__ import annotations

import re

import pytest
from flask.testing import FlaskClient

from console_ha.capabilities.entity_budget import entity_cost
from console_ha.secret import Secret
from console_ha.store.config import ConfigStore
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import StoredToken, TokenStore
from tests.seed import seed_settings

from .conftest import page_csrf

PAGE = "/settings/home-assistant"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.stored-token.signature"


@pytest.fixture
def stored(data_dir: DataDir, hidden_secrets: list[str]) -> ConfigStore:
    """A household that saved settings before: URL, token, two entities, one with a friendly name."""
    seed_settings(data_dir, {
        "enabled": True,
        "base_url": "http://homeassistant.local:8123",
        "allowlisted_entities": ["light.kitchen", "sensor.hall_temperature"],
        "entity_names": {"light.kitchen": "Kitchen <light>"},
    }, token=TOKEN)
    hidden_secrets.append(TOKEN)
    return ConfigStore(data_dir)


def form(client: FlaskClient, **fields: object) -> dict[str, object]:
    """The page's form as a browser without JavaScript posts it."""
    return {"csrf_token": page_csrf(client), "revision": "", **fields}


def test_the_front_door_leads_to_the_settings_page(logged_in: FlaskClient) -> None:
    response = logged_in.get("/")
    assert response.status_code == 302
    assert response.location == PAGE


def test_the_page_renders_the_current_settings_and_never_the_token(
    logged_in: FlaskClient, stored: ConfigStore
) -> None:
    html = logged_in.get(PAGE).get_data(as_text=True)
    assert 'value="http://homeassistant.local:8123"' in html
    assert re.search(r'id="enabled"[^>]*checked', html)
    assert re.search(r'<input type="password" id="access-token" name="access_token" value=""', html)
    assert "A token is stored" in html
    assert f'name="revision" id="revision" value="{stored.read().revision}"' in html
    # Each allowlisted entity is listed, ticked, with its name escaped, removable without JavaScript.
    # Each box carries the server's cost of its entity, for the meter (issue 21).
    kitchen, hall = entity_cost("light.kitchen"), entity_cost("sensor.hall_temperature")
    assert f'value="light.kitchen" data-name="Kitchen &lt;light&gt;" data-cost="{kitchen}" checked' in html
    assert f'value="sensor.hall_temperature" data-name="" data-cost="{hall}" checked' in html
    assert "Hall temperature" in html
    assert TOKEN not in html


def test_the_page_passes_the_api_urls_to_its_script_in_data_attributes(logged_in: FlaskClient) -> None:
    html = logged_in.get(PAGE).get_data(as_text=True)
    assert 'data-entities-url="/api/v1/conversation/home-assistant/entities"' in html
    assert 'data-test-url="/api/v1/conversation/home-assistant/test"' in html
    assert '<script type="module" src="/static/settings/main.js">' in html
    assert "<script>" not in html  # no inline scripts: the Content-Security-Policy forbids them


def test_a_damaged_settings_file_shows_what_is_wrong_and_what_to_do(
    logged_in: FlaskClient, data_dir: DataDir
) -> None:
    data_dir.ha_config.parent.mkdir(parents=True)
    data_dir.ha_config.write_text('{"enabled": "yes"}')
    response = logged_in.get(PAGE)
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert "The Home Assistant settings file is damaged" in html
    assert str(data_dir.ha_config) in html
    assert "Start again with empty settings" in html
    assert "Traceback" not in html and "settings/main.js" not in html


def test_starting_again_moves_the_damaged_file_aside(logged_in: FlaskClient, data_dir: DataDir) -> None:
    data_dir.ha_config.parent.mkdir(parents=True)
    data_dir.ha_config.write_text("{broken")
    response = logged_in.post(PAGE, data=form(logged_in, action="reset"))
    assert response.status_code == 303
    assert ConfigStore(data_dir).read().config.enabled is False
    assert len(list(data_dir.capabilities.glob("home-assistant.json.broken-*"))) == 1
    assert "Started again" in logged_in.get(PAGE).get_data(as_text=True)


def test_the_form_saves_without_javascript_and_keeps_the_stored_token(
    logged_in: FlaskClient, stored: ConfigStore, data_dir: DataDir
) -> None:
    response = logged_in.post(PAGE, data=form(
        logged_in,
        revision=stored.read().revision,
        base_url="http://HomeAssistant.local:8123/api/",
        allowlisted_entities=["light.kitchen"],
        access_token="",
    ))  # `enabled` unticked: a checkbox that is off is not posted
    # Back to the page, listing the saved Home Assistant's entities to choose from (issue 21).
    assert response.status_code == 303 and response.location == PAGE + "?q="
    config = stored.load()
    assert config.enabled is False
    assert config.base_url == "http://homeassistant.local:8123"  # the same origin: the token stays usable
    assert config.allowlisted_entities == ("light.kitchen",)
    assert config.entity_names == {"light.kitchen": "Kitchen <light>"}
    assert TokenStore(data_dir).read_record() == StoredToken(Secret(TOKEN), "http://homeassistant.local:8123")
    assert "Saved." in logged_in.get(PAGE).get_data(as_text=True)


def test_the_form_replaces_or_forgets_the_token(
    logged_in: FlaskClient, stored: ConfigStore, data_dir: DataDir, hidden_secrets: list[str]
) -> None:
    new_token = "eyJhbGciOiJIUzI1NiJ9.new-token.signature"
    hidden_secrets.append(new_token)
    url = "http://homeassistant.local:8123"  # the URL field's value, posted as a browser posts it
    logged_in.post(PAGE, data=form(logged_in, base_url=url, access_token=new_token, enabled="on"))
    assert TokenStore(data_dir).read_record() == StoredToken(Secret(new_token), "http://homeassistant.local:8123")
    logged_in.post(PAGE, data=form(logged_in, base_url=url, remove_access_token="on", enabled="on"))
    assert TokenStore(data_dir).read_record() is None
    assert "No token is stored yet." in logged_in.get(PAGE).get_data(as_text=True)


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"base_url": "ftp://nas.local"}, "base-url", "must start with http"),
        ({"access_token": "has spaces in it"}, "access-token", "characters a Home Assistant token never has"),
        ({"allowlisted_entities": ["Kitchen Light"]}, None, "domain.object_id"),
    ],
    ids=["url", "token", "entity"],
)
def test_a_refused_form_writes_nothing_and_keeps_what_was_typed(
    logged_in: FlaskClient, stored: ConfigStore, data_dir: DataDir,
    fields: dict[str, object], field: str | None, message: str,
) -> None:
    before = data_dir.ha_config.read_bytes()
    posted = {"base_url": "http://ha.example:8123", "enabled": "on",
              "allowlisted_entities": ["light.kitchen"], **fields}
    response = logged_in.post(PAGE, data=form(logged_in, **posted))
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    assert message in html and "Nothing was saved." in html
    assert data_dir.ha_config.read_bytes() == before
    assert TokenStore(data_dir).read_record() == StoredToken(Secret(TOKEN), "http://homeassistant.local:8123")
    assert f'value="{posted["base_url"]}"' in html
    assert "has spaces in it" not in html  # a typed token is never sent back
    if field:
        assert re.search(rf'id="{field}"[^>]*aria-invalid=true', html, re.DOTALL)
    # The entity unticked by the household stays on the list, unticked.
    assert re.search(r'value="sensor.hall_temperature" data-name="" data-cost="\d+"\s*>', html)


def test_a_stale_form_saves_nothing_and_offers_to_save_again(
    logged_in: FlaskClient, stored: ConfigStore
) -> None:
    old_revision = stored.read().revision
    seed_settings(stored.data_dir, {"allowlisted_entities": ["light.kitchen"]})  # saved elsewhere meanwhile
    response = logged_in.post(PAGE, data=form(
        logged_in, revision=old_revision, base_url="http://homeassistant.local:8123",
        allowlisted_entities=["sensor.hall_temperature"],
    ))
    html = response.get_data(as_text=True)
    assert response.status_code == 409
    assert "changed these settings elsewhere" in html
    assert stored.load().allowlisted_entities == ("light.kitchen",)
    assert f'value="{stored.read().revision}"' in html  # saving again replaces, knowingly


def test_the_form_needs_the_csrf_token(logged_in: FlaskClient, stored: ConfigStore, data_dir: DataDir) -> None:
    before = data_dir.ha_config.read_bytes()
    response = logged_in.post(PAGE, data={"base_url": "http://evil.example", "enabled": "on"})
    assert response.status_code == 400
    assert data_dir.ha_config.read_bytes() == before
