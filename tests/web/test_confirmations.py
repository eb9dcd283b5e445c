"""Household confirmations: `GET /api/v1/confirmations`, `POST /api/v1/confirmations/<token>`, the page."""

from __future__ import annotations

import re
import time

import pytest
from flask import Flask
from flask.testing import FlaskClient

from console_ha.answers.card_state import CardState
from console_ha.answers.household_queue import ALLOWED_NOW, NOT_ALLOWED, HouseholdQueue, WaitingRead
from tests.household_cards import withdraw
from tests.seed import seed_settings

ALLOWED = ["sensor.living_room_temperature", "light.living_room"]


@pytest.fixture
def configured(data_dir, stub_ha):
    """Home Assistant reading turned on, as the settings page would leave it."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": ALLOWED},
                  token=stub_ha.token)
    return stub_ha


def queue_of(app: Flask) -> HouseholdQueue:
    return app.extensions["console_ha_mcp"].queue


def waiting(app: Flask, client: str = "desk assistant") -> WaitingRead:
    """A program's read waiting for the household, as an MCP call leaves one."""
    return queue_of(app).ask(client, "home_assistant.get_history",
                             {"entity_id": "sensor.living_room_temperature", "period": "day"})


def badge(html: str) -> tuple[str, bool]:
    """The nav's waiting count as rendered, and whether it is hidden."""
    match = re.search(r'<span id="waiting-count" class="badge"([^>]*)><span data-slot="count">(\d+)</span>', html)
    assert match, "the nav has no waiting count"
    return match.group(2), " hidden" in match.group(1)


def test_the_household_sees_every_waiting_card_with_the_client_s_name(app, household, configured):
    first, second = waiting(app), waiting(app, "kitchen tablet")
    answer = household.get("/api/v1/confirmations")
    assert answer.status_code == 200
    pending = answer.get_json()["pending"]
    assert [p["token"] for p in pending] == [first.token, second.token]
    assert {"token", "capability", "arguments", "card", "expires_at", "client"} <= set(pending[0])
    assert pending[0]["client"] == "desk assistant" and pending[1]["client"] == "kitchen tablet"
    assert set(pending[0]["card"]) == {"title", "body", "approve_label", "deny_label"}


@pytest.mark.parametrize("approve", [True, False])
def test_the_household_answers_a_card_once(app, household, configured, approve):
    read = waiting(app)
    answer = household.post(f"/api/v1/confirmations/{read.token}", json={"approve": approve})
    assert answer.status_code == 200
    # The call waiting on the card is a live one: an approval is read for it now.
    assert answer.get_json() == {"status": "approved" if approve else "denied",
                                 "message": ALLOWED_NOW if approve else NOT_ALLOWED}
    assert read.state is (CardState.ALLOWED if approve else CardState.DENIED)
    again = household.post(f"/api/v1/confirmations/{read.token}", json={"approve": approve})
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "CONFIRMATION_INVALID"
    assert household.get("/api/v1/confirmations").get_json() == {"pending": []}


def test_an_api_token_cannot_answer_any_card(app, bearer, household, configured):
    read = waiting(app, "tests")
    refused = bearer.post(f"/api/v1/confirmations/{read.token}", json={"approve": True})
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "FORBIDDEN"
    assert read.state is CardState.WAITING
    refused_form = bearer.post("/confirmations", data={"token": read.token, "decision": "approve"})
    assert refused_form.status_code == 403
    assert read.state is CardState.WAITING


def test_a_session_without_its_csrf_token_cannot_answer(app, logged_in, configured):
    read = waiting(app)
    answer = logged_in.post(f"/api/v1/confirmations/{read.token}", json={"approve": True})
    assert answer.status_code == 400 and answer.get_json()["error"]["code"] == "CSRF_INVALID"
    assert read.state is CardState.WAITING


def test_a_program_sees_only_its_own_cards(app, bearer, configured):
    mine, _theirs = waiting(app, "tests"), waiting(app, "someone else")
    assert [p["token"] for p in bearer.get("/api/v1/confirmations").get_json()["pending"]] == [mine.token]


def test_a_program_s_own_waiting_card_tells_it_nothing_the_household_has_not_approved(app, bearer, configured):
    """The card names Home Assistant's address and the allowed devices: for the household's eyes only."""
    listing = queue_of(app).ask("tests", "home_assistant.list_entities", {})
    history = waiting(app, "tests")
    household_view = [listing.to_dict(), history.to_dict()]
    assert "Living room" in str(household_view) and configured.base_url.split("//")[1] in str(household_view)
    mine = bearer.get("/api/v1/confirmations").get_json()["pending"]
    assert [item["token"] for item in mine] == [listing.token, history.token]
    assert {"token", "capability", "arguments", "card", "expires_at", "client"} <= set(mine[0])
    shown = str(mine)
    assert configured.base_url.split("//")[1] not in shown
    assert "Living room" not in shown and "living room" not in shown.replace("sensor.living_room", "")


def test_a_program_cannot_read_the_household_s_page_of_every_card(app, bearer, configured):
    """The page lists every program's cards; a program with an API token gets 403, not others' reads."""
    theirs = waiting(app, "someone else")
    page = bearer.get("/confirmations")
    assert page.status_code == 403
    assert theirs.token not in page.get_data(as_text=True)
    assert "sensor.living_room_temperature" not in page.get_data(as_text=True)


def test_unknown_tokens_are_409_and_bad_bodies_400(app, household, configured):
    unknown = household.post("/api/v1/confirmations/no-such-token", json={"approve": True})
    assert unknown.status_code == 409 and unknown.get_json()["error"]["code"] == "CONFIRMATION_INVALID"
    read = waiting(app)
    for body in ({}, {"approve": "yes"}, {"approve": 1}):
        bad = household.post(f"/api/v1/confirmations/{read.token}", json=body)
        assert bad.status_code == 400 and bad.get_json()["error"]["code"] == "INVALID_REQUEST"
    assert read.state is CardState.WAITING


def test_an_expired_card_cannot_be_approved(make_app, password, configured):
    from tests.web.conftest import log_in, page_csrf

    app = make_app(CONSOLE_HA_CONFIRMATION_TTL=0.01)
    household = app.test_client()
    log_in(household, password)
    household.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(household)
    read = waiting(app)
    import time

    time.sleep(0.05)
    late = household.post(f"/api/v1/confirmations/{read.token}", json={"approve": True})
    assert late.status_code == 409
    assert late.get_json()["error"]["reason"] == "expired"
    assert read.state is CardState.EXPIRED  # the late answer found it so: its call is told the same


def test_the_page_shows_each_card_with_its_buttons_and_no_inline_script(app, household, configured):
    read = waiting(app)
    html = household.get("/confirmations").get_data(as_text=True)
    assert read.proposal.card.title in html and read.proposal.card.body in html
    assert "desk assistant" in html
    assert re.search(r'<button type="submit" name="decision" value="approve"[^>]*>Allow this once</button>', html)
    assert re.search(r'<button type="submit" name="decision" value="deny"[^>]*>Don&#39;t allow</button>', html)
    assert all(not body.strip() for body in re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S))
    assert 'href="/confirmations" aria-current="page">Confirmations' in html
    assert badge(html) == ("1", False)


def test_the_nav_shows_how_many_cards_wait_on_every_page(app, household, configured):
    assert badge(household.get("/activity").get_data(as_text=True)) == ("0", True)
    waiting(app)
    waiting(app, "kitchen tablet")
    html = household.get("/activity").get_data(as_text=True)
    assert badge(html) == ("2", False)


def test_the_card_says_how_often_its_program_asked_once_it_asked_again(app, household, configured):
    """Issue 25: each call that joins a waiting card counts; the page and the API carry the server's sentence."""
    from console_ha.answers.household_queue import Asker

    program = Asker("desk assistant", token_id="0123456789abcdef")
    arguments = {"entity_id": "sensor.living_room_temperature", "period": "day"}
    queue_of(app).call(program, "home_assistant.get_history", arguments)
    html = household.get("/confirmations").get_data(as_text=True)
    assert re.search(r'<p class="confirm-card__asked" data-slot="asked" hidden></p>', html)
    for _ in range(2):
        queue_of(app).call(program, "home_assistant.get_history", arguments)
    (item,) = household.get("/api/v1/confirmations").get_json()["pending"]
    assert (item["asked"], item["asked_words"]) == (3, "Asked 3 times.")
    html = household.get("/confirmations").get_data(as_text=True)
    assert '<p class="confirm-card__asked" data-slot="asked">Asked 3 times.</p>' in html


@pytest.mark.parametrize(("decision", "approve"), [("approve", True), ("deny", False)])
def test_without_javascript_a_form_post_answers_the_card(app, household, configured, decision, approve):
    read = waiting(app)
    csrf = household.environ_base.pop("HTTP_X_CSRFTOKEN")
    answer = household.post("/confirmations", data={"token": read.token, "decision": decision, "csrf_token": csrf})
    assert answer.status_code == 303 and answer.location.endswith("/confirmations")
    assert read.state is (CardState.ALLOWED if approve else CardState.DENIED)
    page = household.get("/confirmations").get_data(as_text=True)
    assert ("Allowed" if approve else "Not allowed") in page
    assert "Nothing is waiting for you." in page
    stale = household.post("/confirmations", data={"token": read.token, "decision": decision, "csrf_token": csrf})
    assert stale.status_code == 409 and "not waiting any more" in stale.get_data(as_text=True)


def test_logged_out_the_page_leads_to_login(client: FlaskClient, password):
    answer = client.get("/confirmations")
    assert answer.status_code == 302 and "/login" in answer.location


def test_the_activity_page_names_the_program_that_asked_and_never_a_value(app, household, configured):
    read = waiting(app)
    household.post(f"/api/v1/confirmations/{read.token}", json={"approve": True})
    queue_of(app).collect(read)
    withdrawn = waiting(app, "kitchen tablet")
    withdraw(queue_of(app), withdrawn)
    html = household.get("/activity").get_data(as_text=True)
    assert "desk assistant" in html and "kitchen tablet" in html
    assert "Withdrawn by the program" in html
    assert "sensor.living_room_temperature" not in html and read.token not in html


def test_the_conversation_api_cannot_answer_a_program_s_card(make_app, password, api_token, configured):
    """The conversation's confirmations are another store: a program's own token is unknown there."""
    from tests.fake_model import FakeModel
    from tests.web.conftest import log_in, page_csrf

    with FakeModel() as model:
        app = make_app(CONSOLE_HA_LLM_URL=model.url, CONSOLE_HA_LLM_MODEL="fake-model")
        bearer = app.test_client()
        bearer.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {api_token}"
        household = app.test_client()
        log_in(household, password)
        household.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(household)
        _conversation_cannot_answer(app, bearer, household)


def _conversation_cannot_answer(app: Flask, bearer: FlaskClient, household: FlaskClient) -> None:
    read = waiting(app, "tests")
    # The program may answer no card at all (403); the household's conversation does not know this one (409).
    for client, status, code in ((bearer, 403, "FORBIDDEN"), (household, 409, "CONFIRMATION_INVALID")):
        answer = client.post("/api/v1/conversation/message",
                             json={"conversation_id": read.conversation_id,
                                   "confirmation": {"token": read.token, "approve": True}})
        assert answer.status_code == status, answer.get_json()
        assert answer.get_json()["error"]["code"] == code
    assert read.state is CardState.WAITING
    assert [p["token"] for p in household.get("/api/v1/confirmations").get_json()["pending"]] == [read.token]


# -- issue 20: every page's long poll for the waiting count (GET /api/v1/confirmations/watch) ----------------

WATCH = "/api/v1/confirmations/watch"


def test_the_watch_answers_at_once_on_a_change_and_each_page_carries_its_version(make_app, password, configured):
    """A page rendered before a card came learns of it at once; the nav carries its version, the title the count."""
    from tests.web.conftest import log_in

    app = make_app(CONSOLE_HA_WATCH_SECONDS=5)
    household = app.test_client()
    log_in(household, password)
    html = household.get("/activity").get_data(as_text=True)
    found = re.search(r'data-version="([0-9a-f]+)"', html)
    assert found is not None
    version = found.group(1)
    assert "<title>Activity · Console</title>" in html
    waiting(app)
    answer = household.get(f"{WATCH}?seen={version}").get_json()
    assert answer["count"] == 1 and answer["version"] != version and answer["busy"] is False
    assert set(answer["cards"][0]) == {"id", "notification_title", "notification_body"}
    html = household.get("/activity").get_data(as_text=True)
    assert "<title>(1) Activity · Console</title>" in html
    assert f'data-version="{answer["version"]}"' in html


def test_the_watch_waits_while_nothing_changes(make_app, password, configured):
    """The same version: the poll is held (a place taken) until the configured timeout, then answers unchanged.

    When it answers is the watch's clock's to say (tests/test_household_watch.py); here, that it waits at all.
    """
    import time
    from concurrent.futures import ThreadPoolExecutor

    from tests.moving_clock import PATIENCE
    from tests.web.conftest import log_in

    app = make_app(CONSOLE_HA_WATCH_SECONDS=2)
    household = app.test_client()
    log_in(household, password)
    seen = household.get(WATCH).get_json()["version"]
    watch = app.extensions["console_ha"].household_watch
    with ThreadPoolExecutor(1) as pool:
        asked = pool.submit(household.get, f"{WATCH}?seen={seen}")
        limit = time.monotonic() + PATIENCE
        while watch.watching() == 0 and not asked.done() and time.monotonic() < limit:
            time.sleep(0.01)
        held = watch.watching() == 1 and not asked.done()  # the poll holds its place: it waits
        answer = asked.result(timeout=PATIENCE).get_json()
    assert held and answer["version"] == seen and watch.watching() == 0


def test_a_program_cannot_watch_the_household_s_cards(bearer, configured):
    """The watch names every program's cards: the household's session only."""
    response = bearer.get(WATCH)
    assert response.status_code == 403 and response.get_json()["error"]["code"] == "FORBIDDEN"


def test_logged_out_the_watch_is_401(client, password):
    assert client.get(WATCH).status_code == 401


def test_the_first_activity_page_after_an_allowed_card_expired_says_the_program_had_gone(make_app, password,
                                                                                         configured):
    """A held read whose program never came back: the very next look at Activity says so (before, that
    look still showed "Allowed; the program will get it when it asks again", the sweep coming after it)."""
    from console_ha.answers.household_queue import Asker
    from console_ha.conversation.activity import EVENT_WORDS
    from console_ha.store.audit import AuditEvent
    from tests.web.test_conversation_api import household_of

    app = make_app(CONSOLE_HA_CONFIRMATION_TTL=1.0)
    household = household_of(app, password)
    call = queue_of(app).call(Asker("desk assistant", token_id="0123456789abcdef"), "home_assistant.get_history",
                              {"entity_id": "sensor.living_room_temperature", "period": "day"})
    queue_of(app).detach(call.waiting, call.attachment)  # it returned early and never came back
    assert household.post(f"/api/v1/confirmations/{call.waiting.token}", json={"approve": True}).status_code == 200
    time.sleep(1.2)
    html = household.get("/activity").get_data(as_text=True)
    assert EVENT_WORDS[AuditEvent.ABANDONED] in html
    assert configured.requests == []


def test_a_program_does_not_see_the_cards_of_another_token_with_the_same_name(app, bearer, configured,
                                                                              console_secrets):
    """Two tokens may share a name (the household named both "tests"): each program sees its own cards only."""
    from console_ha.answers.household_queue import Asker

    console_secrets.create_api_token("tests")
    mine, other = sorted(console_secrets.api_tokens(), key=lambda t: t.created)[:2]
    bearer_id = {t.token_id for t in console_secrets.api_tokens()}
    assert len(bearer_id) == 2
    cards = {}
    for token in (mine, other):
        cards[token.token_id] = queue_of(app).call(Asker("tests", token_id=token.token_id),
                                                   "home_assistant.get_history",
                                                   {"entity_id": "sensor.living_room_temperature",
                                                    "period": "day"}).waiting.token
    seen = [p["token"] for p in bearer.get("/api/v1/confirmations").get_json()["pending"]]
    # The bearer fixture's token is the first made.
    assert seen == [cards[mine.token_id]]


def test_a_card_s_names_are_text_on_the_page_never_markup(app, household, data_dir, configured):
    """A device's saved name and a program's name holding HTML show as the words they are, escaped."""
    seed_settings(data_dir, {"entity_names": {
        "sensor.living_room_temperature": '<img src=x onerror="alert(1)">Temp "quoted" ?'}})
    waiting(app, "<b>desk</b>")
    html = household.get("/confirmations").get_data(as_text=True)
    assert "<img" not in html and "<b>desk" not in html
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;Temp &#34;quoted&#34; ?" in html
    assert "&lt;b&gt;desk&lt;/b&gt;" in html
