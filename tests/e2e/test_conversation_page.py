"""A whole conversation in Chromium: the stub Home Assistant, the scripted model, the Console served for real."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Page, expect

from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.conversation import ConversationService, ModelSettings, OpenAICompatibleModel
from console_ha.conversation.activity import EVENT_TABLE, EVENT_WORDS
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.words import CHAT_EXPIRED
from tests.conftest import CONVERSATION_ALLOWED
from tests.e2e.conftest import LiveConsole, Received, screenshot, send, serious_violations, transcript
from tests.executors import executor_over
from tests.fake_model import FakeModel, answer_from_tool_result, tool_call
from tests.stub_ha import StubHomeAssistant

# The fake model, named in the environment before the app starts (conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("model_in_the_environment")]

QUESTION = "what's the temperature in the living room?"
ALLOWED = CONVERSATION_ALLOWED  # what `configured` and `chat` allow (conftest.py)
LIST = "home_assistant__list_entities"
HISTORY = "home_assistant__get_history"




def test_ask_see_the_card_approve_and_get_the_answer(chat: Page, console: LiveConsole, model: FakeModel,
                                                     stub_ha: StubHomeAssistant, received: Received):
    model.script(tool_call(LIST, {}), answer_from_tool_result)
    send(chat, QUESTION)

    card = chat.get_by_role("region", name="Read your Home Assistant devices?")
    expect(card).to_be_visible()
    expect(card).to_be_focused()  # a screen reader meets the question at once
    expect(card).to_contain_text("the current state of both devices you allowed")
    expect(card).to_contain_text(f"Home Assistant at {stub_ha.base_url.removeprefix('http://')}")
    expect(transcript(chat)).to_contain_text(QUESTION)
    assert serious_violations(chat) == []
    screenshot(chat, "conversation-card")

    chat.get_by_role("button", name="Allow this once").click()
    expect(transcript(chat)).to_contain_text("Living room temperature is 21.4 °C.")
    expect(transcript(chat)).to_contain_text("Read your Home Assistant devices? You allowed it.")
    expect(card).to_have_count(0)
    expect(chat.get_by_label("Message", exact=True)).to_be_focused()
    assert re.search(r"[?&]c=", chat.url)

    # A reload shows the same conversation, rendered by the server.
    chat.reload()
    expect(transcript(chat)).to_contain_text("Living room temperature is 21.4 °C.")
    assert stub_ha.token not in "".join(body.decode("utf-8", "replace") for _, body in received.responses)
    assert stub_ha.token not in model.seen()


def test_deny_and_the_assistant_says_it_could_not_read(chat: Page, model: FakeModel, stub_ha: StubHomeAssistant):
    model.script(tool_call(HISTORY, {"entity_id": "sensor.living_room_temperature", "period": "day"}),
                 answer_from_tool_result)
    send(chat, "how warm was it today?")
    card = chat.get_by_role("region", name=re.compile(r"^Read the history of"))
    expect(card).to_contain_text("sensor.living_room_temperature")
    expect(card).to_contain_text("the past day")
    chat.get_by_role("button", name="Don't allow").click()
    expect(transcript(chat)).to_contain_text("I could not read that: CONFIRMATION_DENIED.")
    expect(transcript(chat)).to_contain_text("You did not allow")
    assert stub_ha.requests == []


def test_the_whole_turn_works_from_the_keyboard(chat: Page, model: FakeModel):
    model.script(tool_call(LIST, {}), answer_from_tool_result)
    field = chat.get_by_label("Message", exact=True)
    field.focus()
    chat.keyboard.type(QUESTION)
    chat.keyboard.press("Enter")
    card = chat.get_by_role("region", name="Read your Home Assistant devices?")
    expect(card).to_be_focused()
    chat.keyboard.press("Tab")
    expect(chat.get_by_role("button", name="Allow this once")).to_be_focused()
    chat.keyboard.press("Enter")
    expect(transcript(chat)).to_contain_text("21.4 °C")
    expect(field).to_be_focused()


def test_an_expired_card_says_so_and_asking_again_gives_a_new_card(chat: Page, console: LiveConsole,
                                                                   model: FakeModel, stub_ha: StubHomeAssistant):
    clock = _Clock()
    executor = executor_over(console.data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock)
    console.app.extensions["console_ha"].conversation = ConversationService(
        executor, OpenAICompatibleModel(ModelSettings((model.url,), "fake-model")))
    model.script(tool_call(LIST, {}), tool_call(LIST, {}), answer_from_tool_result)
    send(chat, QUESTION)
    card = chat.get_by_role("region", name="Read your Home Assistant devices?")
    expect(card).to_be_visible()
    clock.now += 301  # the household walked away for more than five minutes

    chat.get_by_role("button", name="Allow this once").click()
    expect(card).to_contain_text("This request expired before it was answered, so nothing was read.")
    expect(chat.get_by_role("button", name="Allow this once")).to_have_count(0)
    ask_again = chat.get_by_role("button", name="Ask again")
    expect(ask_again).to_be_focused()
    assert stub_ha.requests == []
    screenshot(chat, "conversation-expired", phone=False)

    ask_again.click()
    expect(chat.get_by_role("button", name="Allow this once")).to_be_visible()
    chat.get_by_role("button", name="Allow this once").click()
    expect(transcript(chat)).to_contain_text("21.4 °C")


def test_a_card_that_expires_with_the_page_open_gets_the_console_s_line_in_the_chat(
        chat: Page, console: LiveConsole, model: FakeModel, stub_ha: StubHomeAssistant):
    """Issue 21: no new message needed; the page rereads the conversation when its card's time comes."""
    ttl = 4.0  # a card that stays open four seconds, on the real clock the page and the server share
    executor = executor_over(console.data_dir, confirmations=ConfirmationStore(ttl=ttl))
    console.app.extensions["console_ha"].conversation = ConversationService(
        executor, OpenAICompatibleModel(ModelSettings((model.url,), "fake-model")))
    model.script(tool_call(LIST, {}))
    send(chat, QUESTION)
    card = chat.get_by_role("region", name="Read your Home Assistant devices?")
    expect(card).to_be_visible()
    line = CHAT_EXPIRED.format(title="Read your Home Assistant devices?")
    expect(transcript(chat)).not_to_contain_text(line)

    expect(card).to_contain_text("This request expired before it was answered", timeout=ttl * 1000 + 5000)
    expect(transcript(chat).locator(".msg--note .msg__text")).to_have_text([line], timeout=15_000)
    assert "expired" in [e["event"] for e in AuditLog(console.data_dir).events()]
    assert stub_ha.requests == [] and len(model.requests) == 1
    assert serious_violations(chat) == []
    screenshot(chat, "conversation-expired-line", phone=False)

    # A reload shows the same: the line once, the card expired.
    chat.reload()
    expect(transcript(chat).locator(".msg--note .msg__text")).to_have_text([line])
    expect(chat.get_by_role("button", name="Ask again")).to_be_visible()
    chat.get_by_role("link", name="Activity").click()
    expect(chat.locator("main")).to_contain_text(EVENT_WORDS[AuditEvent.EXPIRED])


def test_the_activity_page_shows_the_approved_and_the_denied_read_without_values(
        chat: Page, console: LiveConsole, model: FakeModel):
    model.script(tool_call(LIST, {}), answer_from_tool_result,
                 tool_call(HISTORY, {"entity_id": "sensor.living_room_temperature", "period": "day"}),
                 answer_from_tool_result)
    send(chat, QUESTION)
    chat.get_by_role("button", name="Allow this once").click()
    expect(transcript(chat)).to_contain_text("21.4 °C")
    send(chat, "and over the day?")
    chat.get_by_role("button", name="Don't allow").click()
    expect(transcript(chat)).to_contain_text("CONFIRMATION_DENIED")

    chat.get_by_role("link", name="Activity").click()
    expect(chat).to_have_url(console.at("/activity"))
    # Only the counts that are not zero, each with its name (issue 25: the ten-column table was cut off).
    counts = chat.get_by_role("region", name="How often")
    list_block = counts.locator('.tally[data-capability="home_assistant.list_entities"]')
    history_block = counts.locator('.tally[data-capability="home_assistant.get_history"]')
    expect(list_block.locator(".tally__counts dt")).to_have_text(
        [EVENT_TABLE[e].counter for e in (AuditEvent.PROPOSED, AuditEvent.CONFIRMATION_REQUESTED, AuditEvent.APPROVED,
                                          AuditEvent.EXECUTED)])
    expect(list_block.locator(".tally__counts dd")).to_have_text(["1", "1", "1", "1"])
    expect(history_block.locator(".tally__counts dt")).to_have_text(
        [EVENT_TABLE[e].counter for e in (AuditEvent.PROPOSED, AuditEvent.CONFIRMATION_REQUESTED, AuditEvent.DENIED)])
    expect(history_block.locator(".tally__counts dd")).to_have_text(["1", "1", "1"])
    latest = chat.get_by_role("list", name=re.compile("most recent events"))
    expect(latest).to_contain_text(EVENT_WORDS[AuditEvent.APPROVED])
    expect(latest).to_contain_text(EVENT_WORDS[AuditEvent.DENIED])
    expect(latest.locator('[data-event="denied"]')).to_have_attribute("data-code", "CONFIRMATION_DENIED")
    expect(chat.locator("main")).not_to_contain_text("CONFIRMATION_DENIED")
    content = chat.content()
    for value in ("21.4", "sensor.living_room_temperature", "Living room temperature", QUESTION, "the past day"):
        assert value not in content
    assert serious_violations(chat) == []
    screenshot(chat, "activity")


class _Clock:
    """A wall clock that the test moves forward."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now
