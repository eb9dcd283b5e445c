"""A token revoked in the real Home Assistant 2025.4.4, seen in Chromium: the settings page and a conversation."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from console_ha.words import CHAT_WORDS, SETTINGS_WORDS

# The browser suite's own fixtures, used as they are (importing them makes them this module's too).
from tests.e2e.conftest import (  # noqa: F401
    DESKTOP,
    LiveConsole,
    browser_type_launch_args,
    console,
    household_password,
    log_in,
    serious_violations,
)
from tests.fake_model import FakeModel, text, tool_call
from tests.real_ha.harness import RealHomeAssistant, mint_and_revoke

pytestmark = [pytest.mark.real_ha, pytest.mark.browser]

ENTITY = "sensor.living_room_temperature"
LOAD_TIMEOUT = 15_000


@pytest.fixture(scope="module")
def revoked(real_ha: RealHomeAssistant) -> str:
    token, revoke = mint_and_revoke(real_ha, f"console-ha revoked browser {secrets.token_hex(4)}")
    revoke()
    assert real_ha.get("/api/", token=token).status_code == 401
    return token


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModel]:
    with FakeModel() as fake:
        yield fake


@pytest.fixture
def set_up_with_the_revoked_token(console: LiveConsole, real_ha: RealHomeAssistant,  # noqa: F811
                                  revoked: str, hidden_secrets: list[str]) -> LiveConsole:
    hidden_secrets.append(revoked)
    console.configure(real_ha.base_url, revoked, enabled=True, allowlisted_entities=[ENTITY])
    return console


def test_the_settings_page_says_home_assistant_refused_the_token_and_how_to_make_one(
        page: Page, set_up_with_the_revoked_token: LiveConsole, household_password: str,  # noqa: F811
        revoked: str) -> None:
    page.set_viewport_size(DESKTOP)
    log_in(page, set_up_with_the_revoked_token, household_password)
    words = SETTINGS_WORDS["HA_UNAUTHORIZED"]
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text(words, timeout=LOAD_TIMEOUT)
    expect(page.locator("#picker-status")).to_contain_text("Home Assistant refused the access token",
                                                           timeout=LOAD_TIMEOUT)
    assert revoked not in page.content()
    assert serious_violations(page) == []


def test_a_conversation_read_says_it_in_the_chat(
        page: Page, set_up_with_the_revoked_token: LiveConsole, household_password: str,  # noqa: F811
        model: FakeModel) -> None:
    app = set_up_with_the_revoked_token.app
    app.config.update(CONSOLE_HA_LLM_URL=model.url, CONSOLE_HA_LLM_MODEL="fake-model")
    model.script(tool_call("home_assistant__get_history", {"entity_id": ENTITY, "period": "day"}),
                 text("Home Assistant refused me."))
    page.set_viewport_size(DESKTOP)
    log_in(page, set_up_with_the_revoked_token, household_password, path="/conversation")
    page.get_by_label("Message", exact=True).fill("how warm was it today?")
    page.get_by_role("button", name="Send", exact=True).click()
    page.get_by_role("button", name="Allow this once").click()
    log = page.get_by_role("log", name="Conversation")
    expect(log.locator(".msg--note")).to_contain_text(CHAT_WORDS["HA_UNAUTHORIZED"], timeout=LOAD_TIMEOUT)
    expect(log).to_contain_text("Home Assistant refused me.")
    expect(log.locator(".msg--note")).to_contain_text(re.compile("Long-lived access tokens"))
    assert serious_violations(page) == []
