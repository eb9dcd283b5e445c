"""The settings page without JavaScript, without friction (issue 25): a token pasted once, ticks carried across
searches and pages, Home Assistant's names stored, and a sensitive question's "Save anyway" good once."""

from __future__ import annotations

import re

import pytest
from flask import Flask
from flask.testing import FlaskClient

from console_ha.settings.held import HOLD_SECONDS, SessionHolds
from console_ha.store.config import ConfigStore
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenStore
from console_ha.web.auth import SESSION_ID
from console_ha.words import CONFIRMATION_SPENT, SENSITIVE_QUESTION, SETTINGS_WORDS, token_kept
from tests.stub_ha import StubHomeAssistant

from .conftest import API, PASSWORD, configure, household_client, page_csrf
from .test_settings_without_javascript import PAGE, boxes, kept, nonce, post, question

KEPT = "The access token you pasted is kept"


def kept_words(origin: str) -> str:
    return token_kept(HOLD_SECONDS // 60, origin)[0]


def stored_token(data_dir: DataDir) -> str | None:
    record = TokenStore(data_dir).read_record()
    return record.token.reveal() if record is not None else None


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(app: Flask) -> Clock:
    """The settings page's holds on a clock of the test's own."""
    moved = Clock()
    app.extensions["console_ha"].settings.holds = SessionHolds(clock=moved)
    return moved


# --- the token is pasted once -------------------------------------------------------------------------


def test_a_token_pasted_for_test_connection_is_saved_without_a_second_paste(
    household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir
) -> None:
    status, html, _ = post(household, action="test", base_url=stub_ha.base_url, access_token=stub_ha.token)
    assert status == 200 and "Connected to “Home”" in html
    # Never sent back: the field is empty, and the page says the token is kept for this address.
    assert stub_ha.token not in html and 'id="access-token" name="access_token" value=""' in html
    assert kept_words(stub_ha.base_url) in html
    assert 'aria-describedby="token-status token-kept token-origin-note token-hint"' in html  # read out with it
    assert stored_token(data_dir) is None  # a test saves nothing

    status, _, _ = post(household, base_url=stub_ha.base_url, enabled="on")
    assert status == 303
    assert stored_token(data_dir) == stub_ha.token
    assert ConfigStore(data_dir).load().base_url == stub_ha.base_url


def test_a_saved_token_is_not_kept_for_another_save(household: FlaskClient, stub_ha: StubHomeAssistant,
                                                    data_dir: DataDir) -> None:
    """Spent by the save that stored it: once the household forgets the token, an empty field stores none."""
    post(household, action="test", base_url=stub_ha.base_url, access_token=stub_ha.token)
    assert post(household, base_url=stub_ha.base_url)[0] == 303
    assert household.post(API, json={"remove_access_token": True}).status_code == 200
    assert post(household, base_url=stub_ha.base_url)[0] == 303
    assert stored_token(data_dir) is None


def test_a_kept_token_goes_to_the_origin_it_was_pasted_for_only(
    household: FlaskClient, two_homes: tuple[StubHomeAssistant, StubHomeAssistant], data_dir: DataDir
) -> None:
    """Typed for one Home Assistant, it is never tested with, nor saved beside, another (`two_homes` checks)."""
    home, other = two_homes
    post(household, action="test", base_url=home.base_url, access_token=home.token)
    _, html, _ = post(household, action="test", base_url=other.base_url)
    assert "Paste an access token from Home Assistant above" in html and KEPT not in html
    assert post(household, base_url=other.base_url)[0] == 303
    assert stored_token(data_dir) is None
    # Back to the address it was pasted for, it is still there to save.
    _, html, _ = post(household, action="test", base_url=home.base_url)
    assert "Connected to" in html
    assert post(household, base_url=home.base_url)[0] == 303
    assert stored_token(data_dir) == home.token


def test_a_kept_token_expires(household: FlaskClient, stub_ha: StubHomeAssistant, data_dir: DataDir,
                              clock: Clock) -> None:
    post(household, action="test", base_url=stub_ha.base_url, access_token=stub_ha.token)
    clock.now += HOLD_SECONDS - 1
    assert KEPT in post(household, action="browse", base_url=stub_ha.base_url)[1]
    clock.now += 1
    assert KEPT not in post(household, action="browse", base_url=stub_ha.base_url)[1]
    assert post(household, base_url=stub_ha.base_url)[0] == 303
    assert stored_token(data_dir) is None


def test_logging_out_drops_the_kept_token(app: Flask, household: FlaskClient, stub_ha: StubHomeAssistant,
                                          data_dir: DataDir) -> None:
    holds = app.extensions["console_ha"].settings.holds
    post(household, action="test", base_url=stub_ha.base_url, access_token=stub_ha.token)
    assert len(holds) == 1
    household.post("/logout", data={"csrf_token": page_csrf(household)})
    assert len(holds) == 0
    again = household_client(app, data_dir)
    assert post(again, base_url=stub_ha.base_url)[0] == 303
    assert stored_token(data_dir) is None


def test_logging_in_again_over_the_session_drops_its_kept_token(app: Flask, household: FlaskClient,
                                                                stub_ha: StubHomeAssistant) -> None:
    """A login ends the session it replaces (`auth._start_session`), and with it the token kept for it."""
    holds = app.extensions["console_ha"].settings.holds
    post(household, action="test", base_url=stub_ha.base_url, access_token=stub_ha.token)
    assert len(holds) == 1
    login = household.post("/login", data={"password": PASSWORD, "csrf_token": page_csrf(household)})
    assert login.status_code == 302
    assert len(holds) == 0


def test_a_session_that_ended_elsewhere_drops_its_kept_token(app: Flask, household: FlaskClient,
                                                             stub_ha: StubHomeAssistant) -> None:
    """Expired or ended (a new password, a logout from a copy of the cookie): its next request forgets it."""
    services = app.extensions["console_ha"]
    post(household, action="test", base_url=stub_ha.base_url, access_token=stub_ha.token)
    assert len(services.settings.holds) == 1
    with household.session_transaction() as browser_session:
        services.secrets.end_session(browser_session[SESSION_ID])
    assert household.get(PAGE).status_code == 302  # to the login page
    assert len(services.settings.holds) == 0


def test_another_session_cannot_use_the_kept_token(app: Flask, household: FlaskClient, stub_ha: StubHomeAssistant,
                                                   data_dir: DataDir) -> None:
    post(household, action="test", base_url=stub_ha.base_url, access_token=stub_ha.token)
    other = household_client(app, data_dir)
    assert KEPT not in post(other, action="browse", base_url=stub_ha.base_url)[1]
    assert post(other, base_url=stub_ha.base_url)[0] == 303
    assert stored_token(data_dir) is None


def test_a_token_home_assistant_refused_is_not_kept(household: FlaskClient, stub_ha: StubHomeAssistant,
                                                    data_dir: DataDir) -> None:
    _, html, _ = post(household, action="test", base_url=stub_ha.base_url, access_token="not-the-right-token")
    assert SETTINGS_WORDS["HA_UNAUTHORIZED"] in html and KEPT not in html
    assert post(household, base_url=stub_ha.base_url)[0] == 303
    assert stored_token(data_dir) is None


# --- ticks are carried across searches and pages --------------------------------------------------------


@pytest.fixture
def many(household: FlaskClient, stub_ha: StubHomeAssistant) -> StubHomeAssistant:
    """A saved Home Assistant with 450 more sensors, and nothing chosen yet."""
    for i in range(450):
        stub_ha.states.append({"entity_id": f"sensor.extra_{i:03d}", "state": str(i), "attributes": {},
                               "last_changed": "2026-01-01T00:00:00+00:00",
                               "last_updated": "2026-01-01T00:00:00+00:00"})
    configure(household, stub_ha.base_url, stub_ha.token)
    return stub_ha


def names_field(html: str) -> str:
    found = re.search(r'<input type="hidden" name="entity_names" value="([^"]*)">', html)
    assert found is not None
    return found.group(1).replace("&#34;", '"')


def test_ticks_are_carried_across_pages_and_searches_and_one_save_keeps_them_all(
    household: FlaskClient, many: StubHomeAssistant, data_dir: DataDir
) -> None:
    before = data_dir.ha_config.read_bytes()
    html = household.get(PAGE, query_string={"q": "extra"}).get_data(as_text=True)
    assert "Showing 1–200 of 450 matching" in html and boxes(html)["sensor.extra_001"] is False

    # Tick one on page 1 and turn the page: it goes along, hidden.
    status, html, _ = post(household, PAGE + "?q=extra", base_url=many.base_url, q="extra", action="page-2",
                           allowlisted_entities=["sensor.extra_001"], entity_names=names_field(html))
    assert status == 200 and "Showing 201–400 of 450 matching" in html
    assert kept(html) == ["sensor.extra_001"]
    # Tick one on page 2, then search for something else.
    status, html, _ = post(household, PAGE + "?q=extra", base_url=many.base_url, q="coffee", action="browse",
                           allowlisted_entities=[*kept(html), "sensor.extra_300"], entity_names=names_field(html))
    assert status == 200 and "of 1 matching" in html
    assert kept(html) == ["sensor.extra_001", "sensor.extra_300"]
    assert 'action="/settings/home-assistant?q=coffee&amp;kind=&amp;area=&amp;page=1"' in html
    assert data_dir.ha_config.read_bytes() == before  # nothing saved yet

    # One Save keeps all three, with Home Assistant's name where it has one.
    status, _, location = post(household, PAGE + "?q=coffee&kind=&area=&page=1", base_url=many.base_url,
                               allowlisted_entities=[*kept(html), "switch.coffee_machine"],
                               entity_names=names_field(html))
    assert status == 303 and location == PAGE + "?q=coffee&kind=&area=&page=1"
    config = ConfigStore(data_dir).load()
    assert config.allowlisted_entities == ("sensor.extra_001", "sensor.extra_300", "switch.coffee_machine")
    assert config.entity_names["switch.coffee_machine"] == "Coffee machine"


def test_a_page_button_posted_without_the_filter_fields_turns_the_list_shown(
    household: FlaskClient, many: StubHomeAssistant
) -> None:
    """The script removes the page's filter fields: its Previous and Next turn the list the URL names."""
    status, html, _ = post(household, PAGE + "?q=extra&kind=sensor&area=&page=1", base_url=many.base_url,
                           action="page-2", allowlisted_entities=["sensor.extra_001"])
    assert status == 200 and "Showing 201–400 of 450 matching" in html
    assert kept(html) == ["sensor.extra_001"]
    # Fields the form has (without JavaScript) win over the URL, even empty: "" is the household's search.
    _, html, _ = post(household, PAGE + "?q=extra", base_url=many.base_url, q="", action="page-2")
    assert "Showing 201–400 of 466 matching" in html


def test_unticking_on_a_page_drops_it_from_what_is_carried(household: FlaskClient, many: StubHomeAssistant) -> None:
    _, html, _ = post(household, base_url=many.base_url, q="coffee", action="browse",
                      allowlisted_entities=["sensor.extra_001", "switch.coffee_machine"])
    assert kept(html) == ["sensor.extra_001"] and boxes(html) == {"switch.coffee_machine": True}
    _, html, _ = post(household, base_url=many.base_url, q="extra_00", action="browse",
                      allowlisted_entities=["sensor.extra_001"])  # coffee unticked
    assert kept(html) == [] and boxes(html)["sensor.extra_001"] is True


def test_enter_in_a_field_searches_and_never_saves(household: FlaskClient, many: StubHomeAssistant) -> None:
    """The form's default button (the first) is the search: Enter keeps everything typed, and saves nothing."""
    html = household.get(PAGE).get_data(as_text=True)
    first = re.search(r'<form id="ha-settings".*?<button ([^>]*)>', html, re.S)
    assert first is not None and 'name="action" value="browse"' in first.group(1)


def test_the_area_and_kind_lists_are_there_with_the_first_list(household: FlaskClient,
                                                               many: StubHomeAssistant) -> None:
    """The page the first load refreshes to (`?q=`) has both lists filled."""
    html = household.get(PAGE, query_string={"q": ""}).get_data(as_text=True)
    assert '<option value="light">Lights (2)</option>' in html
    assert re.search(r'<select id="nojs-area" name="area">\s*<option value="">All areas</option>\s*<option', html)


def test_names_are_stored_as_the_script_stores_them(household: FlaskClient, many: StubHomeAssistant,
                                                    data_dir: DataDir) -> None:
    """Home Assistant's friendly name, not one made from the id ("Entrance color white lights")."""
    html = household.get(PAGE, query_string={"q": "living"}).get_data(as_text=True)
    assert post(household, base_url=many.base_url, allowlisted_entities=["light.living_room"],
                entity_names=names_field(html))[0] == 303
    assert ConfigStore(data_dir).load().entity_names == {"light.living_room": "Living room light"}
    # A later save from a list without it keeps its name.
    assert post(household, base_url=many.base_url, allowlisted_entities=["light.living_room"],
                entity_names="not json")[0] == 303
    assert ConfigStore(data_dir).load().entity_names == {"light.living_room": "Living room light"}


# --- a confirmation is good once --------------------------------------------------------------------------


def test_a_replayed_save_anyway_asks_again_and_saves_nothing(household: FlaskClient, many: StubHomeAssistant,
                                                             data_dir: DataDir) -> None:
    """The probe's finding: save the lock and confirm, remove it, post the same form again (Back, resubmit)."""
    _, html, _ = post(household, base_url=many.base_url, allowlisted_entities=["lock.front_door"])
    answer: dict[str, object] = {"base_url": many.base_url, "allowlisted_entities": ["lock.front_door"],
                                 "confirm_sensitive": nonce(html)}
    assert post(household, PAGE, **answer)[0] == 303
    assert ConfigStore(data_dir).load().allowlisted_entities == ("lock.front_door",)
    assert post(household, base_url=many.base_url, allowlisted_entities=[])[0] == 303

    status, html, _ = post(household, PAGE, **answer)
    assert status == 200 and question(html) == ["lock.front_door"]
    assert CONFIRMATION_SPENT in html and SENSITIVE_QUESTION in html
    assert ConfigStore(data_dir).load().allowlisted_entities == ()
    # The question asked again has its own answer, good once too.
    assert nonce(html) != answer["confirm_sensitive"]
    assert post(household, PAGE, **{**answer, "confirm_sensitive": nonce(html)})[0] == 303


def test_a_confirmation_belongs_to_its_session(app: Flask, household: FlaskClient, many: StubHomeAssistant,
                                               data_dir: DataDir) -> None:
    _, html, _ = post(household, base_url=many.base_url, allowlisted_entities=["camera.driveway"])
    other = household_client(app, data_dir)
    status, html, _ = post(other, base_url=many.base_url, allowlisted_entities=["camera.driveway"],
                           confirm_sensitive=nonce(html))
    assert status == 200 and question(html) == ["camera.driveway"]
    assert ConfigStore(data_dir).load().allowlisted_entities == ()


def test_a_confirmation_expires(household: FlaskClient, many: StubHomeAssistant, data_dir: DataDir,
                                clock: Clock) -> None:
    _, html, _ = post(household, base_url=many.base_url, allowlisted_entities=["person.alex"])
    clock.now += HOLD_SECONDS
    _, html, _ = post(household, base_url=many.base_url, allowlisted_entities=["person.alex"],
                      confirm_sensitive=nonce(html))
    assert question(html) == ["person.alex"] and CONFIRMATION_SPENT in html
    assert ConfigStore(data_dir).load().allowlisted_entities == ()


def test_a_calendar_or_a_to_do_list_is_asked_about_before_a_save_without_javascript(
        household: FlaskClient, many: StubHomeAssistant, data_dir: DataDir) -> None:
    """Issue 28: personal appointments and lists are sensitive, asked about as a lock is (the form's own save)."""
    status, html, _ = post(household, base_url=many.base_url,
                           allowlisted_entities=["calendar.family", "todo.shopping_list", "weather.home"])
    assert status == 200 and sorted(question(html)) == ["calendar.family", "todo.shopping_list"]
    assert SENSITIVE_QUESTION in html and ConfigStore(data_dir).load().allowlisted_entities == ()
