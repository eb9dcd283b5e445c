"""The settings page with several Home Assistants (issue 29): add, switch, set up, rename and remove, without JS.

Every form is a plain POST that comes back by a redirect, and names the page's instance in a hidden field; the
scripts' API URLs name it too (`?instance=`, none for home), so the page with JavaScript reads and saves the same
one. The rules a save keeps for names (a name, unique, at most 8 Home Assistants) are the save's own.
"""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from console_ha.store.config import MAX_INSTANCE_NAME_LENGTH
from console_ha.store.datadir import DataDir
from console_ha.store.instances import MAX_INSTANCES, Instances
from console_ha.web.settings_page import new_instance_id
from console_ha.words import CA_ADDED
from tests.certs import make_ca
from tests.stub_ha import StubHomeAssistant

from .conftest import page_csrf

PAGE = "/settings/home-assistant"
CABIN_PAGE = PAGE + "?instance=cabin"
STOVE = "sensor.cabin_stove"


def post(client: FlaskClient, path: str = PAGE, **fields: object) -> tuple[int, str, str | None]:
    response = client.post(path, data={"csrf_token": page_csrf(client), **fields})
    return response.status_code, response.get_data(as_text=True), response.location


def add(client: FlaskClient, name: str) -> str | None:
    status, _, location = post(client, action="instance-add", name=name)
    assert status == 303, status
    return location


def nav(html: str) -> list[tuple[str, str, bool]]:
    """The instance navigation's links: (name, href, marked current)."""
    found = re.search(r'<nav class="card instance-nav"[^>]*>(.*?)</nav>', html, re.S)
    if found is None:
        return []
    links = re.findall(r'<a href="([^"]+)"( aria-current="page")?>([^<]+)</a>', found.group(1))
    return [(html_lib.unescape(name), html_lib.unescape(href), bool(current)) for href, current, name in links]


def page_forms(html: str) -> list[str]:
    """Every form of the page that posts to the settings page itself."""
    return re.findall(r'<form[^>]*method="post" action="/settings/home-assistant[^"]*".*?</form>', html, re.S)


def script_urls(html: str) -> dict[str, str]:
    """The API URLs the page hands its scripts (the form's and the CA section's data- attributes)."""
    urls = dict(re.findall(r'data-(config|entities|discover|test|preview|ca)-url="([^"]+)"', html))
    return {key: html_lib.unescape(url) for key, url in urls.items()}


@pytest.fixture
def cabin(two_homes: tuple[StubHomeAssistant, StubHomeAssistant]) -> StubHomeAssistant:
    """The second stub Home Assistant, with a stove the house does not have."""
    stub = two_homes[1]
    stub.states.append({"entity_id": STOVE, "state": "61", "attributes": {"friendly_name": "Stove"},
                        "last_changed": "2026-01-01T00:00:00+00:00", "last_updated": "2026-01-01T00:00:00+00:00"})
    return stub


@pytest.mark.parametrize(("name", "taken", "made"), [
    ("Cabin", {"home"}, "cabin"),
    ("Chalet d’été", {"home"}, "chalet_d_ete"),
    ("  Workshop 2 ", {"home"}, "workshop_2"),
    ("小屋", {"home"}, "home_assistant"),
    ("Home", {"home"}, "home_2"),
    ("Cabin", {"home", "cabin", "cabin_2"}, "cabin_3"),
    ("x" * 40, {"home"}, "x" * 32),
    ("x" * 40, {"home", "x" * 32}, "x" * 30 + "_2"),
])
def test_an_id_is_made_from_the_name_unique_and_within_32(name: str, taken: set[str], made: str) -> None:
    assert new_instance_id(name, taken) == made


def test_with_one_home_assistant_the_page_offers_only_to_add_another(household: FlaskClient) -> None:
    html = household.get(PAGE).get_data(as_text=True)
    assert nav(html) == [] and "instance-this" not in html
    assert '<details class="card instance-add">' in html and "Add another Home Assistant" in html
    # Home's URLs are those of a single Home Assistant: the scripts' calls name no instance.
    assert all("instance" not in url for url in script_urls(html).values())
    assert 'name="instance" value="home"' in html


def test_adding_cabin_shows_its_own_page_named_in_the_navigation(household: FlaskClient, data_dir: DataDir) -> None:
    assert add(household, "Cabin") == CABIN_PAGE
    assert Instances(data_dir).names() == {"home": "Home", "cabin": "Cabin"}
    html = household.get(CABIN_PAGE).get_data(as_text=True)
    assert "Added Cabin." in html
    assert nav(html) == [("Home", PAGE, False), ("Cabin", CABIN_PAGE, True)]
    assert nav(household.get(PAGE).get_data(as_text=True)) == [("Home", PAGE, True), ("Cabin", CABIN_PAGE, False)]
    # Every call of the page's scripts is about the cabin; every form names it.
    urls = script_urls(html)
    assert set(urls) == {"config", "entities", "discover", "test", "preview", "ca"}
    assert all(url.endswith("?instance=cabin") for url in urls.values()), urls
    assert all('<input type="hidden" name="instance" value="cabin">' in form for form in page_forms(html))
    assert len(page_forms(html)) == 4  # rename, remove, the settings, add
    assert '<input type="hidden" name="instance" value="cabin">' in html.split('class="card language-choice"')[1]
    # The script saves the settings form's fields; the name has its own form, so a Save never blanks it.
    fields = json.loads(html_lib.unescape(re.search(r"data-fields='([^']+)'", html).group(1)))  # type: ignore[union-attr]
    assert "name" not in {field["name"] for field in fields}


def test_cabin_is_set_up_and_saved_without_javascript_leaving_home_as_it_was(
        household: FlaskClient, data_dir: DataDir, two_homes: tuple[StubHomeAssistant, StubHomeAssistant],
        cabin: StubHomeAssistant) -> None:
    house = two_homes[0]
    status, _, _ = post(household, base_url=house.base_url, access_token=house.token, enabled="on",
                        allowlisted_entities="light.living_room", revision="")
    assert status == 303
    home_before = Instances(data_dir).home.config.path.read_bytes()
    add(household, "Cabin")
    status, _, location = post(household, CABIN_PAGE, instance="cabin", base_url=cabin.base_url,
                               access_token=cabin.token, revision="")
    assert status == 303 and location == CABIN_PAGE + "&q="
    # The list of the cabin's page is the cabin's: its stove is there; ticked and saved, it is the cabin's alone.
    listed = household.get(location).get_data(as_text=True)
    assert f'value="{STOVE}"' in listed
    status, _, _ = post(household, CABIN_PAGE, instance="cabin", base_url=cabin.base_url, enabled="on",
                        allowlisted_entities=STOVE, revision="")
    assert status == 303
    cabin_stores = Instances(data_dir).get("cabin")
    assert cabin_stores.config.load().allowlisted_entities == (STOVE,)
    assert cabin_stores.config.load().name == "Cabin"  # the save of the settings form kept the name
    assert cabin_stores.token.read_record().origin == cabin.base_url  # type: ignore[union-attr]
    assert Instances(data_dir).home.config.path.read_bytes() == home_before
    assert Instances(data_dir).home.config.load().allowlisted_entities == ("light.living_room",)
    # What the page's script reads and lists through its URLs is the cabin's too.
    urls = script_urls(household.get(CABIN_PAGE).get_data(as_text=True))
    assert household.get(urls["config"]).get_json()["allowlisted_entities"] == [STOVE]
    assert STOVE in household.get(urls["entities"]).get_data(as_text=True)
    assert household.get(script_urls(household.get(PAGE).get_data(as_text=True))["config"]).get_json()[
        "allowlisted_entities"] == ["light.living_room"]


def test_renaming_changes_only_the_name(household: FlaskClient, data_dir: DataDir) -> None:
    add(household, "Cabin")
    status, _, location = post(household, CABIN_PAGE, instance="cabin", action="instance-rename",
                               name="Lake cabin")
    assert status == 303 and location == CABIN_PAGE
    assert Instances(data_dir).names() == {"home": "Home", "cabin": "Lake cabin"}
    status, _, location = post(household, action="instance-rename", instance="home", name="House")
    assert status == 303 and location == PAGE
    assert [name for name, _, _ in nav(household.get(PAGE).get_data(as_text=True))] == ["House", "Lake cabin"]


def test_a_name_the_save_refuses_is_said_beside_its_form_and_nothing_is_added(household: FlaskClient,
                                                                             data_dir: DataDir) -> None:
    status, html, _ = post(household, action="instance-add", name="x" * (MAX_INSTANCE_NAME_LENGTH + 1))
    assert status == 400
    assert '<details class="card instance-add" open>' in html
    assert re.search(r'<p class="field-error" id="instance-add-error">[^<]*at most 40 characters', html)
    assert Instances(data_dir).ids() == ("home",)


def test_remove_asks_first_then_deletes_the_token_and_the_settings(
        household: FlaskClient, data_dir: DataDir, cabin: StubHomeAssistant) -> None:
    add(household, "Cabin")
    post(household, CABIN_PAGE, instance="cabin", base_url=cabin.base_url, access_token=cabin.token, revision="")
    stores = Instances(data_dir).get("cabin")
    assert stores.files.token.exists()
    status, html, _ = post(household, CABIN_PAGE, instance="cabin", action="instance-remove")
    assert status == 200 and "Remove Cabin? Its access token and CA certificate are deleted" in html
    assert Instances(data_dir).ids() == ("home", "cabin")  # asking removed nothing
    status, _, location = post(household, CABIN_PAGE, instance="cabin", action="instance-remove-confirmed")
    assert status == 303 and location == PAGE
    assert Instances(data_dir).ids() == ("home",)
    assert not stores.files.token.exists() and not stores.config.path.exists()
    html = household.get(PAGE).get_data(as_text=True)
    assert "Removed Cabin, with its access token and CA certificate." in html and nav(html) == []


def test_home_is_never_removed(household: FlaskClient, data_dir: DataDir) -> None:
    add(household, "Cabin")
    assert "instance-remove" not in household.get(PAGE).get_data(as_text=True)
    status, html, _ = post(household, instance="home", action="instance-remove-confirmed")
    assert status == 400 and "The first Home Assistant cannot be removed" in html
    assert Instances(data_dir).ids() == ("home", "cabin")


@pytest.mark.parametrize("instance", ["nowhere", "../secrets"])
def test_a_page_of_a_home_assistant_there_is_not_goes_home_saying_so(household: FlaskClient,
                                                                     instance: str) -> None:
    response = household.get(PAGE, query_string={"instance": instance})
    assert response.status_code == 303 and response.location == PAGE
    html = household.get(PAGE).get_data(as_text=True)
    said = r'notice--error" role="status">\s*<p>(This Console has no Home Assistant|A Home Assistant&#39;s id)'
    assert re.search(said, html), html


def test_a_save_for_a_home_assistant_removed_meanwhile_writes_nothing(household: FlaskClient,
                                                                      data_dir: DataDir) -> None:
    add(household, "Cabin")
    page = household.get(CABIN_PAGE).get_data(as_text=True)
    assert "cabin" in page
    post(household, CABIN_PAGE, instance="cabin", action="instance-remove-confirmed")
    files = sorted(p for p in data_dir.root.rglob("*") if p.is_file() and "console" not in p.parts)
    status, _, location = post(household, CABIN_PAGE, instance="cabin", base_url="http://cabin.local:8123",
                               revision="")
    assert status == 303 and location == PAGE
    assert sorted(p for p in data_dir.root.rglob("*") if p.is_file() and "console" not in p.parts) == files


def test_with_as_many_as_the_console_reads_the_page_offers_no_more(household: FlaskClient,
                                                                   data_dir: DataDir) -> None:
    for number in range(1, MAX_INSTANCES):
        add(household, f"Cabin {number}")
    assert len(Instances(data_dir).ids()) == MAX_INSTANCES
    html = household.get(PAGE).get_data(as_text=True)
    assert 'value="instance-add"' not in html
    assert f"This Console already reads as many Home Assistants as it can ({MAX_INSTANCES})." in html
    assert len(nav(html)) == MAX_INSTANCES


def test_the_ca_buttons_without_javascript_store_the_certificate_of_the_instance_shown(
        household: FlaskClient, data_dir: DataDir, tmp_path: Path) -> None:
    add(household, "Cabin")
    pem = make_ca(tmp_path / "ca").ca_pem
    status, html, _ = post(household, CABIN_PAGE, instance="cabin", action="ca-add", ca_pem=pem, revision="")
    assert status == 200 and CA_ADDED in html
    instances = Instances(data_dir)
    assert instances.get("cabin").files.ca_bundle.exists() and not instances.home.files.ca_bundle.exists()
    assert "CN=Test household CA" in html and "CN=Test household CA" not in household.get(PAGE).get_data(as_text=True)


def test_a_damaged_cabin_file_is_said_and_reset_on_the_cabin_s_page_alone(household: FlaskClient,
                                                                          data_dir: DataDir) -> None:
    add(household, "Cabin")
    instances = Instances(data_dir)
    home_before = instances.home.config.path.read_bytes() if instances.home.config.path.exists() else None
    instances.get("cabin").config.path.write_text("{not json")
    html = household.get(CABIN_PAGE).get_data(as_text=True)
    assert "The Home Assistant settings file is damaged" in html and "cabin.json" in html
    assert "The Home Assistant settings file is damaged" not in household.get(PAGE).get_data(as_text=True)
    assert 'id="reset-name" name="name" maxlength="40" required>' in html  # its name went with the file
    status, _, location = post(household, CABIN_PAGE, instance="cabin", action="reset", name="Cabin")
    assert status == 303 and location == CABIN_PAGE
    assert instances.get("cabin").config.load().base_url == ""  # readable again
    assert instances.names()["cabin"] == "Cabin"
    assert (instances.home.config.path.read_bytes() if instances.home.config.path.exists() else None) == home_before


def test_the_language_form_comes_back_to_the_instance_shown(household: FlaskClient) -> None:
    add(household, "Cabin")
    status, _, location = post(household, "/settings/language", instance="cabin", language="fr")
    assert status == 303 and location == CABIN_PAGE
    assert "Paramètres de Cabin" in household.get(CABIN_PAGE).get_data(as_text=True)
    status, _, location = post(household, "/settings/language", instance="../x", language="automatic")
    assert status == 303 and location == PAGE


def test_an_add_whose_id_another_add_took_meanwhile_makes_its_own(household: FlaskClient, data_dir: DataDir,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tabs add at once and both make the id `cabin`: the second adds its own, never renames the first's."""
    add(household, "Cabin")
    made = iter(["cabin"])  # the id the second tab made before the first one's add was saved

    def racing(name: str, taken: set[str]) -> str:
        return next(made, None) or new_instance_id(name, taken)

    monkeypatch.setattr("console_ha.web.settings_page.new_instance_id", racing)
    location = add(household, "Lake house")
    assert Instances(data_dir).names() == {"home": "Home", "cabin": "Cabin", "lake_house": "Lake house"}
    assert location == PAGE + "?instance=lake_house"


API = "/api/v1/conversation/home-assistant"


def test_a_reset_keeps_the_name_rules(household: FlaskClient, data_dir: DataDir) -> None:
    """A damaged file's name is lost with it: a reset is named again, and never two Home Assistants alike."""
    assert household.post(API, json={"name": "House"}).status_code == 200
    assert household.post(API + "?instance=cabin", json={"name": "Home"}).status_code == 200
    instances = Instances(data_dir)
    instances.home.config.path.write_text("{not json")
    # Unnamed again, the house would read "Home", as the cabin does: refused, the damaged file kept as it is.
    response = household.post(API, json={"reset": True})
    assert response.status_code == 400 and response.get_json()["error"]["field"] == "name"
    assert instances.home.config.path.read_text() == "{not json"
    assert 'id="reset-name" name="name" maxlength="40">' in household.get(PAGE).get_data(as_text=True)
    assert post(household, action="reset", name="House")[0] == 303
    assert instances.names() == {"home": "House", "cabin": "Home"}

    instances.get("cabin").config.path.write_text("{not json")
    status, html, location = post(household, CABIN_PAGE, instance="cabin", action="reset")
    assert (status, location) == (303, CABIN_PAGE)
    assert "Give this Home Assistant a name" in household.get(CABIN_PAGE).get_data(as_text=True)
    assert instances.get("cabin").config.path.read_text() == "{not json"
    status, html, location = post(household, CABIN_PAGE, instance="cabin", action="reset", name="house")
    assert (status, location) == (303, CABIN_PAGE)
    assert "already called House" in household.get(CABIN_PAGE).get_data(as_text=True)
    assert post(household, CABIN_PAGE, instance="cabin", action="reset", name="Cabin")[0] == 303
    assert instances.names() == {"home": "House", "cabin": "Cabin"}


def test_the_list_leaves_out_a_home_assistant_removed_while_it_is_made(
        app: Flask, household: FlaskClient, data_dir: DataDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """A remove in another tab between the list's ids and their settings: listed without it, never a 400."""
    assert household.post(API + "?instance=cabin", json={"name": "Cabin"}).status_code == 200
    instances = app.extensions["console_ha"].instances
    real_ids = Instances.ids
    stale = iter([("home", "barn", "cabin")])  # what `ids()` said just before another tab removed `barn`
    monkeypatch.setattr(instances, "ids", lambda: next(stale, None) or real_ids(instances))
    response = household.get(API + "/instances")
    assert response.status_code == 200, response.get_json()
    assert [listed["id"] for listed in response.get_json()["instances"]] == ["home", "cabin"]
    assert not (data_dir.instance_configs / "barn.json").exists()
