"""POST /api/v1/conversation/message and the conversation and activity pages, through the Flask test client."""

from __future__ import annotations

import json
import re
import time

import pytest
from flask import Flask
from flask.testing import FlaskClient

from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.conversation import ConversationService, ModelSettings, OpenAICompatibleModel
from console_ha.conversation.activity import EVENT_WORDS
from console_ha.store.audit import AuditEvent
from console_ha.words import CHAT_WORDS
from tests.conftest import CONVERSATION_ALLOWED
from tests.executors import executor_over
from tests.fake_model import FakeModel, answer_from_tool_result, status, text, tool_call, unused_loopback_url
from tests.moving_clock import PATIENCE
from tests.seed import seed_settings
from tests.web.conftest import log_in, page_csrf

pytestmark = pytest.mark.with_model  # the Console's model is the scripted fake (conftest.py `app`)

MESSAGE = "/api/v1/conversation/message"


class _Clock:
    """A wall clock that tests move forward."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


ALLOWED = CONVERSATION_ALLOWED  # what `configured` and `chat` allow (conftest.py)
QUESTION = "what's the temperature in the living room?"
BOTH = [pytest.param("home_assistant__list_entities", {}, id="list_entities"),
        pytest.param("home_assistant__get_history", {"entity_id": "sensor.living_room_temperature", "period": "day"},
                     id="get_history")]


def household_of(app: Flask, password: str) -> FlaskClient:
    """A logged-in client of `app` that sends the CSRF token, like the `household` fixture."""
    client = app.test_client()
    log_in(client, password)
    client.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(client)
    return client


def ask(client: FlaskClient, message: str = QUESTION, conversation_id: str | None = None):
    body = {"message": message} if conversation_id is None else {"conversation_id": conversation_id,
                                                                  "message": message}
    return client.post(MESSAGE, json=body)


def answer(client: FlaskClient, conversation_id: str, token: str, approve: bool):
    return client.post(MESSAGE, json={"conversation_id": conversation_id,
                                      "confirmation": {"token": token, "approve": approve}})


def assert_error(response, status_code: int, code: str) -> dict:
    assert response.status_code == status_code, response.get_data(as_text=True)
    body = response.get_json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code and isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert set(body["error"]) <= {"code", "message", "reason", "field", "model_status"}
    return body["error"]


# --- the wire format ---------------------------------------------------------------------------

def test_a_message_answers_with_exactly_the_contract_s_fields(household, model):
    model.script(text("Hello."))
    response = ask(household, "hello")
    assert response.status_code == 200
    body = response.get_json()
    assert set(body) == {"conversation_id", "reply", "pending_confirmation"}
    assert body["reply"] == "Hello." and body["pending_confirmation"] is None
    assert isinstance(body["conversation_id"], str) and body["conversation_id"]


@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_ask_see_the_card_approve_and_get_the_answer(household, configured, model, function, arguments):
    model.script(tool_call(function, arguments), answer_from_tool_result)
    paused = ask(household).get_json()
    assert paused["reply"] is None
    pending = paused["pending_confirmation"]
    assert set(pending) == {"token", "capability", "arguments", "card", "expires_at"}
    assert set(pending["card"]) == {"title", "body", "approve_label", "deny_label"}
    assert pending["capability"] in (LIST_ENTITIES, GET_HISTORY) and pending["arguments"] == arguments
    done = answer(household, paused["conversation_id"], pending["token"], True)
    assert done.status_code == 200
    body = done.get_json()
    assert body["conversation_id"] == paused["conversation_id"] and body["pending_confirmation"] is None
    assert "Living room temperature" in body["reply"]
    assert pending["token"] not in model.seen() and configured.token not in model.seen()


@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_denying_gives_the_model_confirmation_denied(household, configured, model, function, arguments):
    model.script(tool_call(function, arguments), answer_from_tool_result)
    paused = ask(household).get_json()
    done = answer(household, paused["conversation_id"], paused["pending_confirmation"]["token"], False)
    assert done.get_json()["reply"] == "I could not read that: CONFIRMATION_DENIED."
    assert configured.requests == []


def test_a_bearer_client_needs_no_csrf_token(bearer, model):
    model.script(text("Hi, program."))
    assert ask(bearer, "hi").get_json()["reply"] == "Hi, program."


def test_a_session_without_the_csrf_token_is_refused(logged_in, model):
    assert_error(ask(logged_in, "hi"), 400, "CSRF_INVALID")
    assert model.requests == []


def test_without_logging_in_it_is_unauthenticated(client, model):
    assert_error(ask(client, "hi"), 401, "UNAUTHENTICATED")
    assert model.requests == []


# --- 400 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("body", [
    pytest.param("not json", id="not-json"),
    pytest.param("[" * 100_000, id="deep-nesting"),
    pytest.param('{"message": "hello \\ud800"}', id="unpaired-surrogate"),
    pytest.param([], id="array"),
    pytest.param({}, id="neither"),
    pytest.param({"message": None, "confirmation": None}, id="both-null"),
    pytest.param({"message": "hi", "confirmation": {"token": "t", "approve": True}, "conversation_id": "c"},
                 id="both"),
    pytest.param({"message": 42}, id="message-not-text"),
    pytest.param({"message": "   "}, id="message-blank"),
    pytest.param({"message": "x" * 4001}, id="message-too-long"),
    pytest.param({"message": "hi", "conversation_id": 7}, id="conversation-id-not-text"),
    pytest.param({"conversation_id": "c", "confirmation": "yes"}, id="confirmation-not-object"),
    pytest.param({"conversation_id": "c", "confirmation": {"token": "t", "approve": "yes"}}, id="approve-not-bool"),
    pytest.param({"conversation_id": "c", "confirmation": {"approve": True}}, id="no-token"),
    pytest.param({"confirmation": {"token": "t", "approve": True}}, id="confirmation-without-conversation"),
])
def test_a_malformed_request_is_invalid_request_and_reaches_no_model(household, model, body):
    if isinstance(body, str):
        response = household.post(MESSAGE, data=body, content_type="application/json")
    else:
        response = household.post(MESSAGE, json=body)
    assert_error(response, 400, "INVALID_REQUEST")
    assert model.requests == []


# --- 409 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_a_replayed_token_is_409_and_nothing_runs(household, configured, model, function, arguments):
    model.script(tool_call(function, arguments), text("Done."))
    paused = ask(household).get_json()
    token = paused["pending_confirmation"]["token"]
    assert answer(household, paused["conversation_id"], token, True).status_code == 200
    reads = len(configured.requests)
    assert_error(answer(household, paused["conversation_id"], token, True), 409, "CONFIRMATION_INVALID")
    assert len(configured.requests) == reads and len(model.requests) == 2


def test_an_unknown_token_or_conversation_is_409(household, configured, model):
    model.script(tool_call("home_assistant__list_entities", {}))
    paused = ask(household).get_json()
    assert_error(answer(household, paused["conversation_id"], "made-up", True), 409, "CONFIRMATION_INVALID")
    assert_error(answer(household, "no-such-conversation", paused["pending_confirmation"]["token"], True),
                 409, "CONFIRMATION_INVALID")
    assert configured.requests == []


def test_a_foreign_token_is_409_and_the_card_still_works_in_its_own_conversation(household, configured, model):
    model.script(tool_call("home_assistant__list_entities", {}), text("Other."), text("Mine."))
    mine = ask(household).get_json()
    other = ask(household, "hello").get_json()
    token = mine["pending_confirmation"]["token"]
    assert_error(answer(household, other["conversation_id"], token, True), 409, "CONFIRMATION_INVALID")
    assert answer(household, mine["conversation_id"], token, True).get_json()["reply"] == "Mine."


def with_clock(app: Flask, data_dir, model: FakeModel) -> _Clock:
    """Give the app a conversation service whose confirmations follow a clock the test moves."""
    clock = _Clock()
    executor = executor_over(data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock)
    app.extensions["console_ha"].conversation = ConversationService(
        executor, OpenAICompatibleModel(ModelSettings((model.url,), "m")))
    return clock


@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_an_expired_token_is_409_with_reason_expired(app, household, data_dir, configured, model, function, arguments):
    clock = with_clock(app, data_dir, model)
    model.script(tool_call(function, arguments))
    paused = ask(household).get_json()
    clock.now += 301
    response = answer(household, paused["conversation_id"], paused["pending_confirmation"]["token"], True)
    assert assert_error(response, 409, "CONFIRMATION_INVALID")["reason"] == "expired"
    assert configured.requests == []


# --- 502 and 503 -------------------------------------------------------------------------------

def test_no_model_configured_is_503(make_app, password):
    client = household_of(make_app(CONSOLE_HA_LLM_URL="", CONSOLE_HA_LLM_MODEL=""), password)
    error = assert_error(ask(client, "hi"), 503, "MODEL_NOT_CONFIGURED")
    assert "CONSOLE_HA_LLM_URL" in error["message"]


@pytest.mark.parametrize("answer_", [status(500), status(401), {"choices": "nope"}], ids=["500", "401", "malformed"])
def test_a_failing_model_is_502(household, model, answer_):
    model.script(answer_)
    assert_error(ask(household, "hi"), 502, "MODEL_UNAVAILABLE")


def test_a_model_that_is_down_is_502(make_app, password):
    client = household_of(make_app(CONSOLE_HA_LLM_URL=unused_loopback_url(), CONSOLE_HA_LLM_MODEL="m"), password)
    assert_error(ask(client, "hi"), 502, "MODEL_UNAVAILABLE")


def test_the_app_shares_one_executor_across_requests(app, household, configured, model):
    """A card proposed in one request is the executor's in the next: one service, one confirmation store."""
    console = app.extensions["console_ha"]
    service = console.conversation
    assert isinstance(service, ConversationService)
    assert service.executor is console.executor
    model.script(tool_call("home_assistant__list_entities", {}), answer_from_tool_result)
    paused = ask(household).get_json()
    assert console.executor.confirmations.pending_count() == 1
    approved = answer(household, paused["conversation_id"], paused["pending_confirmation"]["token"], True)
    assert approved.status_code == 200 and approved.get_json()["pending_confirmation"] is None
    assert console.conversation is service and console.executor.confirmations.pending_count() == 0


# --- the conversation page ---------------------------------------------------------------------

def scripts_of(html: str) -> list[str]:
    return re.findall(r"<script\b[^>]*>(.*?)</script>", html, flags=re.S)


def test_the_conversation_page_has_the_message_field_send_button_and_no_inline_script(household):
    html = household.get("/conversation").get_data(as_text=True)
    assert '<label for="message">Message</label>' in html
    assert re.search(r"<button[^>]*>Send</button>", html)
    assert 'data-message-url="/api/v1/conversation/message"' in html
    assert all(body.strip() == "" for body in scripts_of(html))
    assert 'src="/static/conversation.js"' in html and 'type="module"' in html
    assert 'name="csrf-token"' in html


def test_the_page_shows_a_pending_card_with_its_labels(household, configured, model):
    model.script(tool_call("home_assistant__list_entities", {}))
    paused = ask(household).get_json()
    html = household.get(f"/conversation?c={paused['conversation_id']}").get_data(as_text=True)
    card = paused["pending_confirmation"]["card"]
    assert QUESTION.replace("'", "&#39;") in html
    assert card["title"] in html
    assert re.search(rf">{re.escape(card['approve_label'])}</button>", html)
    assert re.search(rf">{re.escape(card['deny_label'].replace(chr(39), '&#39;'))}</button>", html)


def test_without_javascript_the_forms_ask_and_answer(household, configured, model):
    model.script(tool_call("home_assistant__list_entities", {}), answer_from_tool_result)
    csrf = page_csrf(household)
    sent = household.post("/conversation", data={"message": QUESTION, "csrf_token": csrf})
    assert sent.status_code == 303
    page = household.get(sent.headers["Location"]).get_data(as_text=True)
    token_field = re.search(r'name="token" value="([^"]+)"', page)
    conversation_field = re.search(r'name="conversation_id" value="([^"]+)"', page)
    assert token_field and conversation_field
    token, conversation_id = token_field.group(1), conversation_field.group(1)
    done = household.post("/conversation", data={"conversation_id": conversation_id, "token": token,
                                                  "decision": "approve", "csrf_token": csrf})
    assert done.status_code == 303
    page = household.get(done.headers["Location"]).get_data(as_text=True)
    assert "Living room temperature is 21.4 °C." in page
    assert 'id="confirm-card"' not in page


def test_without_javascript_an_expired_card_says_so_and_offers_to_ask_again(app, household, data_dir, configured,
                                                                             model):
    clock = with_clock(app, data_dir, model)
    model.script(tool_call("home_assistant__list_entities", {}))
    paused = ask(household).get_json()
    clock.now += 301
    page = household.post("/conversation", data={
        "conversation_id": paused["conversation_id"], "token": paused["pending_confirmation"]["token"],
        "decision": "approve", "csrf_token": page_csrf(household)})
    assert page.status_code == 409
    html = page.get_data(as_text=True)
    assert "This request expired before it was answered" in html
    assert re.search(r">Ask again</button>", html) and "Allow this once" not in html
    assert 'role="alert"' not in html
    assert configured.requests == []


def test_without_javascript_a_failed_message_says_why_and_stays_in_the_field(household, model):
    model.script(status(500))
    page = household.post("/conversation", data={"message": "is the heating on?", "csrf_token": page_csrf(household)})
    assert page.status_code == 502
    html = page.get_data(as_text=True)
    assert 'role="alert"' in html and "could not be reached" in html
    assert re.search(r"<textarea[^>]*>is the heating on\?</textarea>", html)


def test_the_conversation_page_needs_a_login(client):
    response = client.get("/conversation")
    assert response.status_code == 302
    assert re.search(r"/(login|setup)\?next=(%2F|/)conversation", response.headers["Location"])


# --- the activity page -------------------------------------------------------------------------

def test_the_activity_page_counts_outcomes_and_never_shows_values(household, configured, model):
    model.script(tool_call("home_assistant__list_entities", {}), text("It is warm."),
                 tool_call("home_assistant__get_history", {"entity_id": "sensor.living_room_temperature",
                                                           "period": "day"}), text("Not read."),
                 tool_call("home_assistant__get_history", {"entity_id": "lock.front_door", "period": "day"}),
                 text("Not allowed."))
    first = ask(household).get_json()
    answer(household, first["conversation_id"], first["pending_confirmation"]["token"], True)
    second = ask(household, "and today?", first["conversation_id"]).get_json()
    answer(household, second["conversation_id"], second["pending_confirmation"]["token"], False)
    ask(household, "is the door locked?", first["conversation_id"])

    response = household.get("/activity")
    assert response.status_code == 200 and response.mimetype == "text/html"
    html = response.get_data(as_text=True)
    # Only the counts that are not zero are shown (issue 25: the ten-column table did not fit).
    assert _counts(html, LIST_ENTITIES) == {"proposed": 1, "confirmation_requested": 1, "approved": 1,
                                            "executed": 1}
    assert _counts(html, GET_HISTORY) == {"proposed": 2, "confirmation_requested": 1, "denied": 1, "rejected": 1}
    # The codes are in the page's data only; its text says what happened and why.
    assert 'data-code="ENTITY_NOT_ALLOWLISTED"' in html and 'data-code="CONFIRMATION_DENIED"' in html
    assert ">ENTITY_NOT_ALLOWLISTED" not in html and ">CONFIRMATION_DENIED" not in html
    assert CHAT_WORDS["ENTITY_NOT_ALLOWLISTED"] in html
    for value in ("21.4", "sensor.living_room_temperature", "lock.front_door", "Living room",
                  configured.token, first["pending_confirmation"]["token"], QUESTION):
        assert value not in html
    assert EVENT_WORDS[AuditEvent.DENIED] in html and EVENT_WORDS[AuditEvent.EXECUTED] in html
    assert all(body.strip() == "" for body in scripts_of(html))


def _counts(html: str, capability: str) -> dict[str, int]:
    """A capability's counters in "How often", by audit event."""
    block = re.search(rf'<li class="tally" data-capability="{re.escape(capability)}">(.*?)</li>', html, re.S)
    assert block, f"no counts for {capability}"
    # A reason's row carries a data-code after its event, so it does not match here.
    return {event: int(count) for event, count in
            re.findall(r'<div data-event="(\w+)"><dt>[^<]*</dt><dd>(\d+)</dd>', block.group(1))}


def test_the_activity_page_is_readable_when_nothing_happened_yet(household):
    html = household.get("/activity").get_data(as_text=True)
    assert "Nothing yet" in html
    assert f'data-capability="{LIST_ENTITIES}"' in html and f'data-capability="{GET_HISTORY}"' in html


def test_no_response_of_a_whole_conversation_carries_the_access_token(household, configured, model,
                                                                       recorded_responses):
    model.script(tool_call("home_assistant__list_entities", {}), answer_from_tool_result)
    paused = ask(household).get_json()
    answer(household, paused["conversation_id"], paused["pending_confirmation"]["token"], True)
    household.get(f"/conversation?c={paused['conversation_id']}")
    household.get("/activity")
    assert all(configured.token.encode() not in raw for raw in recorded_responses)
    assert json.dumps(paused).count(configured.token) == 0


# --- a program's conversation: it asks, the household decides on /confirmations (issue 16) ----------

CONFIRMATIONS = "/api/v1/confirmations"


def _program_asks(bearer: FlaskClient, message: str = QUESTION, conversation_id: str | None = None):
    """Send a program's message in a thread (it waits for the household); the future of its response."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1)
    future = pool.submit(ask, bearer, message, conversation_id)
    pool.shutdown(wait=False)
    return future


def _card_for(household: FlaskClient, client: str = "tests", *, timeout: float = 10.0) -> dict:
    """The program's card as the household sees it on the confirmations API, once it is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = [p for p in household.get(CONFIRMATIONS).get_json()["pending"] if p["client"] == client]
        if pending:
            return pending[0]
        time.sleep(0.02)
    raise AssertionError("the program's card never reached the household's confirmations")


@pytest.fixture
def program_and_household(app, api_token, password):
    bearer = app.test_client()
    bearer.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {api_token}"
    return bearer, household_of(app, password)


@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_a_program_s_read_waits_for_the_household_and_its_message_answers_after(
        program_and_household, configured, model, function, arguments):
    """The probe approved its own reads through this API; now the card is the household's, on /confirmations."""
    bearer, household = program_and_household
    model.script(tool_call(function, arguments), answer_from_tool_result)
    asked = _program_asks(bearer)
    card = _card_for(household)
    assert card["arguments"] == arguments and card["capability"] in (LIST_ENTITIES, GET_HISTORY)
    # The program sees its own card waiting, and can answer it on no route.
    assert [p["token"] for p in bearer.get(CONFIRMATIONS).get_json()["pending"]] == [card["token"]]
    assert_error(bearer.post(f"{CONFIRMATIONS}/{card['token']}", json={"approve": True}), 403, "FORBIDDEN")
    assert_error(bearer.post(MESSAGE, json={"confirmation": {"token": card["token"], "approve": True}}),
                 403, "FORBIDDEN")
    assert configured.requests == [] and not asked.done()
    assert household.post(f"{CONFIRMATIONS}/{card['token']}", json={"approve": True}).status_code == 200
    done = asked.result(timeout=15)
    assert done.status_code == 200, done.get_data(as_text=True)
    body = done.get_json()
    assert body["pending_confirmation"] is None and "Living room temperature" in body["reply"]
    assert configured.requests != []
    assert card["token"] not in model.seen()


def test_a_program_s_read_the_household_denies_reads_nothing(program_and_household, configured, model):
    bearer, household = program_and_household
    model.script(tool_call("home_assistant__list_entities", {}), answer_from_tool_result)
    asked = _program_asks(bearer)
    card = _card_for(household)
    household.post(f"{CONFIRMATIONS}/{card['token']}", json={"approve": False})
    assert asked.result(timeout=15).get_json()["reply"] == "I could not read that: CONFIRMATION_DENIED."
    assert configured.requests == []


def test_a_program_s_card_nobody_answers_expires_and_reads_nothing(make_app, api_token, configured, model):
    app = make_app(CONSOLE_HA_LLM_URL=model.url, CONSOLE_HA_LLM_MODEL="fake-model", CONSOLE_HA_LLM_TIMEOUT=5,
                   CONSOLE_HA_CONFIRMATION_TTL=0.5)
    bearer = app.test_client()
    bearer.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {api_token}"
    model.script(tool_call("home_assistant__list_entities", {}), answer_from_tool_result)
    response = _program_asks(bearer).result(timeout=PATIENCE)  # only the card's expiry can end its wait
    assert response.get_json()["reply"] == "I could not read that: CONFIRMATION_INVALID."
    assert configured.requests == []


def test_a_second_message_while_the_first_waits_is_refused_at_once(program_and_household, configured, model):
    """The wait holds one of the server's threads; a second message to the same conversation must not hold another."""
    bearer, household = program_and_household
    model.script(text("Hello."), tool_call("home_assistant__list_entities", {}), answer_from_tool_result)
    conversation_id = ask(bearer, "hello").get_json()["conversation_id"]
    asked = _program_asks(bearer, QUESTION, conversation_id)
    card = _card_for(household)
    assert_error(ask(bearer, "and now?", conversation_id), 429, "RATE_LIMITED")
    assert not asked.done()  # refused while the first still waits on its card: no wait for it
    household.post(f"{CONFIRMATIONS}/{card['token']}", json={"approve": False})
    assert asked.result(timeout=15).get_json()["conversation_id"] == conversation_id


def test_a_program_cannot_continue_the_household_s_conversation(program_and_household, model):
    bearer, household = program_and_household
    model.script(text("Hello, household."), text("Hello, program."))
    theirs = ask(household, "hello").get_json()["conversation_id"]
    mine = ask(bearer, "hello", theirs).get_json()
    assert mine["conversation_id"] != theirs and mine["reply"] == "Hello, program."
    # The model saw only the program's own message, none of the household's conversation.
    assert [m["content"] for m in model.requests[-1].messages if m["role"] != "system"] == ["hello"]


def test_a_token_revoked_while_its_read_waits_gets_no_read(program_and_household, configured, model,
                                                          console_secrets):
    bearer, household = program_and_household
    model.script(tool_call("home_assistant__list_entities", {}), answer_from_tool_result)
    asked = _program_asks(bearer)
    card = _card_for(household)
    console_secrets.revoke_api_tokens("tests")
    household.post(f"{CONFIRMATIONS}/{card['token']}", json={"approve": True})
    assert asked.result(timeout=15).get_json()["reply"] == "I could not read that: UNAUTHENTICATED."
    assert configured.requests == []


def test_activity_names_the_program_not_the_conversation_page(program_and_household, configured, model):
    bearer, household = program_and_household
    model.script(tool_call("home_assistant__list_entities", {}), answer_from_tool_result)
    asked = _program_asks(bearer)
    household.post(f"{CONFIRMATIONS}/{_card_for(household)['token']}", json={"approve": True})
    asked.result(timeout=15)
    html = household.get("/activity").get_data(as_text=True)
    assert "tests" in html and "Conversation page" not in html


def test_programs_messages_past_the_console_s_bound_are_refused_at_once(make_app, api_token, password, model):
    """A program sending many messages at once to a slow model holds at most MAX_PROGRAM_MESSAGES threads.

    The rest are 429 RATE_LIMITED at once; the household's own message is never counted among them.
    """
    from concurrent.futures import ThreadPoolExecutor

    from console_ha.conversation.turn_loop import MAX_PROGRAM_MESSAGES
    from tests.fake_model import Hang

    app = make_app(CONSOLE_HA_LLM_URL=model.url, CONSOLE_HA_LLM_MODEL="fake-model", CONSOLE_HA_LLM_TIMEOUT=3)
    bearer = app.test_client()
    bearer.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {api_token}"
    model.script(*[Hang()] * MAX_PROGRAM_MESSAGES)
    with ThreadPoolExecutor(MAX_PROGRAM_MESSAGES) as pool:
        slow = [pool.submit(ask, bearer, "hello") for _ in range(MAX_PROGRAM_MESSAGES)]
        deadline = time.monotonic() + PATIENCE
        while model.hanging < MAX_PROGRAM_MESSAGES and time.monotonic() < deadline:
            time.sleep(0.01)
        assert_error(ask(bearer, "one more"), 429, "RATE_LIMITED")
        assert not any(future.done() for future in slow)  # refused while every slow one still held its thread
        model.script(text("Hello, household."))
        assert ask(household_of(app, password), "hello").get_json()["reply"] == "Hello, household."
        assert all(future.result(timeout=PATIENCE).status_code == 502 for future in slow)  # each model call hung
    model.script(text("Hello, program."))
    assert ask(bearer, "hello").get_json()["reply"] == "Hello, program."


def test_a_token_revoked_mid_turn_puts_no_further_card_before_the_household(make_app, api_token, password,
                                                                           console_secrets, configured, model):
    """Revoked, the program's message in progress asks nothing more: no new card, no thread held for its wait."""
    from console_ha.store.audit import AuditLog

    # A card lives longer than the test waits: a reply at all means no second card was waited on.
    app = make_app(CONSOLE_HA_LLM_URL=model.url, CONSOLE_HA_LLM_MODEL="fake-model", CONSOLE_HA_LLM_TIMEOUT=5,
                   CONSOLE_HA_CONFIRMATION_TTL=2 * PATIENCE)
    bearer = app.test_client()
    bearer.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {api_token}"
    household = household_of(app, password)
    model.script(tool_call("home_assistant__list_entities", {}),
                 tool_call("home_assistant__get_history", {"entity_id": ALLOWED[0], "period": "day"}),
                 answer_from_tool_result)
    asked = _program_asks(bearer)
    card = _card_for(household)
    console_secrets.revoke_api_tokens("tests")
    household.post(f"{CONFIRMATIONS}/{card['token']}", json={"approve": True})
    assert asked.result(timeout=PATIENCE).get_json()["reply"] == "I could not read that: UNAUTHENTICATED."
    assert [e["event"] for e in AuditLog(app.extensions["console_ha"].data_dir).events()].count(
        "confirmation_requested") == 1
    assert configured.requests == []


def test_a_card_and_its_chat_line_show_a_name_holding_html_as_text(household, data_dir, configured, model):
    """A device's saved name holding markup is words on the page, in the card and in the line quoting it."""
    seed_settings(data_dir, {"entity_names": {"binary_sensor.front_door": '<img src=x onerror="alert(1)">Door'}})
    model.script(tool_call("home_assistant__get_state", {"entity_id": "binary_sensor.front_door"}), text("Done."))
    paused = ask(household).get_json()
    page = household.get(f"/conversation?c={paused['conversation_id']}").get_data(as_text=True)
    assert "<img" not in page and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;Door" in page
    answer(household, paused["conversation_id"], paused["pending_confirmation"]["token"], False)
    page = household.get(f"/conversation?c={paused['conversation_id']}").get_data(as_text=True)
    assert "<img" not in page and "You did not allow it" in page


def test_without_javascript_a_failed_message_says_why_in_the_household_s_language(household, model):
    """The model's failure (conversation/model.py) is a sentence of the catalogs: French here, Chinese too."""
    model.script(status(500))
    french = household.post("/conversation", headers={"Accept-Language": "fr"},
                            data={"message": "le chauffage est-il allumé ?", "csrf_token": page_csrf(household)})
    html = french.get_data(as_text=True)
    assert french.status_code == 502
    assert "Le modèle de langage n’a pas pu être joint\xa0: il a répondu HTTP 500." in html
    assert "could not be reached" not in html
    model.script(status(500))
    chinese = household.post("/conversation", headers={"Accept-Language": "zh-CN"},
                             data={"message": "暖气开着吗？", "csrf_token": page_csrf(household)})
    assert "无法连接语言模型：它返回了 HTTP 500。" in chinese.get_data(as_text=True)
