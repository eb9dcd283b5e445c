"""The household's language in Chromium: the pseudo-language shows every word came from a catalog and fits, and a
French browser sets up the Console in French, then chooses Chinese, whose dates and fonts follow."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.language import PSEUDO
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.console_settings import ConsoleSettingsStore
from tests.e2e.conftest import (
    DESKTOP,
    FAST_HASH,
    PASSWORD,
    PHONE,
    SETTINGS,
    LiveConsole,
    serious_violations,
)
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser
ENTITY = "sensor.living_room_temperature"

# Every visible text node under `scope`, less what is not the Console's own words: code the household types
# (a command), each language's own name in the select (written in itself, never translated) and a moment
# (`<time>`: Babel's or Intl's date in the language's locale, English's for the pseudo-language). None may
# hold a plain Latin letter (the pseudo-language accents every one), and none may stand past the page's
# right edge or be cut by its box.
_WORDS_AND_FIT = """(scope) => {
  const roots = [...document.querySelectorAll(scope)];
  const leftovers = [], cut = [];
  const width = document.documentElement.clientWidth;
  for (const root of roots) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const parent = node.parentElement;
      // A <time> is a moment in the language's own forms (Babel, Intl), not a word of a catalog.
      if (!node.textContent.trim() || parent.closest("code, option[lang], script, style, template, [hidden], time")) {
        continue;
      }
      if (!parent.getClientRects().length || getComputedStyle(parent).visibility === "hidden") continue;
      const clipped = parent.closest(".visually-hidden");
      // The pseudo-language has no plain Latin letter (a message split by an element, such as a <code>, is
      // still all accented on both sides), so any such letter came from somewhere else.
      if (/[A-Za-z]/.test(node.textContent)) leftovers.push(node.textContent.trim());
      if (clipped) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const rect of range.getClientRects()) {
        if (rect.right > width + 1 || rect.left < -1) cut.push(node.textContent.trim());
      }
      for (let box = parent; box && box !== document.body; box = box.parentElement) {
        const style = getComputedStyle(box);
        if (/(hidden|clip)/.test(style.overflowX + style.overflowY) && box.scrollWidth > box.clientWidth + 1) {
          cut.push(node.textContent.trim());
        }
      }
    }
  }
  return {leftovers, cut, scrolls: document.documentElement.scrollWidth > width + 1};
}"""


def _words_and_fit(page: Page, scope: str = "body") -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(_WORDS_AND_FIT, scope)
    return result


def _activity_of_every_event(console: LiveConsole) -> int:
    """Every event on the conversation page (no program's own name, which is the household's text), and each
    refusal whose reason is Activity's own: after an approval, and for a code this Console has no words for."""
    log = AuditLog(console.data_dir)
    for number, event in enumerate(AuditEvent):
        # A failure's reason is a chat line (words.CHAT_WORDS).
        if event not in (AuditEvent.FAILED, AuditEvent.REJECTED):
            log.record(event, capability="home_assistant.get_state", classification="read", stage=4,
                       invocation=f"i{number}", duration_ms=1234 if event == AuditEvent.EXECUTED else None)
    log.record(AuditEvent.REJECTED, capability="home_assistant.get_state", classification="read", stage=3,
               invocation="i3", code="CONFIRMATION_INVALID")  # i3: approved above, so refused after you allowed
    log.record(AuditEvent.REJECTED, capability="home_assistant.no_such_read", classification="read", stage=1,
               invocation="new", code="A_NEWER_CONSOLES_CODE")
    return len(list(log.events()))


def _assert_catalog_words_that_fit(page: Page, scope: str = "body", values: tuple[str, ...] = ()) -> None:
    """Every word from a catalog and none cut; `values` are what the words quote (names, ids, an address)."""
    found = _words_and_fit(page, scope)
    leftovers = [text for text in found["leftovers"] if re.search("[A-Za-z]", _without(text, values))]
    assert leftovers == [], f"words not from a catalog on {page.url}"
    assert found["cut"] == [] and not found["scrolls"], f"text cut off or wider than the page on {page.url}"


@pytest.mark.parametrize(("javascript", "width"), [(True, DESKTOP), (True, PHONE), (False, DESKTOP), (False, PHONE)],
                         ids=["js-1280", "js-390", "nojs-1280", "nojs-390"])
def test_in_the_pseudo_language_every_word_of_the_converted_pages_is_from_a_catalog_and_fits(
        browser: Browser, console: LiveConsole, javascript: bool, width: Any) -> None:
    """Set-up, login (and its error), the navigation, the settings, model and API-token pages (the scripts' words
    too), Activity and the error page, at 1280 and 390 px."""
    console.app.config["CONSOLE_HA_PSEUDO_LANGUAGE"] = True
    events = _activity_of_every_event(console)
    ConsoleSettingsStore(console.data_dir).set_language(PSEUDO.code)
    context = browser.new_context(java_script_enabled=javascript, viewport=width)
    page = context.new_page()
    try:
        page.goto(console.at("/setup"))
        expect(page.locator("html")).to_have_attribute("lang", "en-XA")
        _assert_catalog_words_that_fit(page)
        ConsoleSecrets(console.data_dir).set_password(PASSWORD, method=FAST_HASH)
        page.goto(console.at("/login"))
        page.locator("#password").fill("not the password")
        page.locator("button[type=submit].primary").click()
        expect(page.locator("#login-error")).to_contain_text("⟦")
        _assert_catalog_words_that_fit(page)
        page.locator("#password").fill(PASSWORD)
        page.locator("button[type=submit].primary").click()
        page.goto(console.at(SETTINGS))
        if javascript:  # the scripts have said their first words: no Home Assistant found, none set up yet
            expect(page.locator("#discovery-status")).to_contain_text("⟦")
            expect(page.locator("#picker-status")).to_contain_text("⟦")
            expect(page.locator("#setup-steps")).to_be_visible()
        _assert_catalog_words_that_fit(page)
        for path in ("/settings/model", "/settings/api-tokens"):
            page.goto(console.at(path))
            _assert_catalog_words_that_fit(page)
        page.goto(console.at("/activity"))
        expect(page.locator(".event-card")).to_have_count(events)
        _assert_catalog_words_that_fit(page)
        if javascript:
            assert serious_violations(page) == []
        page.goto(console.at("/no-such-page"))
        expect(page.locator("#error-title")).to_contain_text("⟦")
        _assert_catalog_words_that_fit(page)
        if javascript:
            assert serious_violations(page) == []
    finally:
        context.close()


def _log_in(page: Page, console: LiveConsole, path: str) -> None:
    """Log in by the form's ids (its words are in the page's language), then open `path`."""
    page.goto(console.at("/login"))
    page.locator("#password").fill(PASSWORD)
    page.locator("button[type=submit].primary").click()
    page.wait_for_url(re.compile(r"^(?!.*/login)"))
    page.goto(console.at(path))


def _without(text: str, values: tuple[str, ...]) -> str:
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, "")
    return text


@pytest.mark.parametrize(("javascript", "width"), [(True, DESKTOP), (True, PHONE), (False, DESKTOP), (False, PHONE)],
                         ids=["js-1280", "js-390", "nojs-1280", "nojs-390"])
def test_in_the_pseudo_language_the_conversation_and_a_waiting_card_are_all_catalog_words_that_fit(
        browser: Browser, console: LiveConsole, stub_ha: StubHomeAssistant, javascript: bool, width: Any) -> None:
    """/conversation and /confirmations with a program's card waiting: every word but the values it names."""
    console.app.config["CONSOLE_HA_PSEUDO_LANGUAGE"] = True
    ConsoleSettingsStore(console.data_dir).set_language(PSEUDO.code)
    ConsoleSecrets(console.data_dir).set_password(PASSWORD, method=FAST_HASH)
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True, allowlisted_entities=[ENTITY],
                      entity_names={ENTITY: "Living room temperature"})
    console.app.extensions["console_ha_mcp"].queue.ask("desk assistant", GET_HISTORY,
                                                       {"entity_id": ENTITY, "period": "week"})
    values = ("Living room temperature", ENTITY, "desk assistant", stub_ha.base_url.split("//", 1)[1])
    context = browser.new_context(java_script_enabled=javascript, viewport=width)
    page = context.new_page()
    try:
        _log_in(page, console, "/confirmations")
        expect(page.locator("#confirmations-list [data-slot=title]")).to_contain_text("⟦")
        _assert_catalog_words_that_fit(page, "h1, .lede, #notifications, #confirmations, nav", values)
        page.goto(console.at("/conversation"))
        expect(page.locator("html")).to_have_attribute("lang", "en-XA")
        # The model's own notice is the Model page's words (another part of issue 26).
        _assert_catalog_words_that_fit(page, "h1, .lede, #conversation, #recent-conversations", values)
        if javascript:
            page.locator("#message").fill("   ")
            page.locator("#message").press("Enter")
            expect(page.locator("#conversation-status")).to_contain_text("⟦")
            _assert_catalog_words_that_fit(page, "#conversation-status")
            assert serious_violations(page) == []
    finally:
        context.close()


@pytest.mark.parametrize("width", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_french_and_a_chinese_household_deny_and_allow_waiting_cards(
        browser: Browser, console: LiveConsole, stub_ha: StubHomeAssistant, width: Any) -> None:
    """The card, its buttons and what the Console says after each answer, in French then in Chinese."""
    ConsoleSecrets(console.data_dir).set_password(PASSWORD, method=FAST_HASH)
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True, allowlisted_entities=[ENTITY],
                      entity_names={ENTITY: "Salon"})
    queue = console.app.extensions["console_ha_mcp"].queue
    for language, period, title, button, told in (
            ("fr-FR", "day", "Lire l’historique de Salon\u202f?", "Ne pas autoriser",
             "Non autorisé\u00a0: rien n’a été lu."),
            ("zh-CN", "week", "读取Salon的历史记录？", "仅允许这一次", "已允许：该程序可获得这一次读取结果。")):
        queue.ask("desk assistant", GET_HISTORY, {"entity_id": ENTITY, "period": period})
        context = browser.new_context(locale=language, viewport=width)
        page = context.new_page()
        try:
            _log_in(page, console, "/confirmations")
            card = page.locator("#confirmations-list .confirm-card").first
            expect(card.locator("[data-slot=title]")).to_have_text(title)
            assert serious_violations(page) == []
            card.get_by_role("button", name=button).click()
            expect(page.locator("#confirmations-status")).to_contain_text(told)
            expect(page.locator("#confirmations-empty")).to_be_visible()
        finally:
            context.close()


def test_the_check_above_finds_a_word_from_no_catalog_and_a_cut_one(browser: Browser, console: LiveConsole) -> None:
    """The guard can fail: an English word on a pseudo page, and a bracketed word cut by its box."""
    console.app.config["CONSOLE_HA_PSEUDO_LANGUAGE"] = True
    ConsoleSettingsStore(console.data_dir).set_language(PSEUDO.code)
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    try:
        page.goto(console.at("/setup"))
        page.evaluate("""() => {
          document.querySelector("h1").append(" plain English");
          const label = document.querySelector("label[for=new-password]");
          label.style.cssText = "display:block; width:3em; overflow:hidden; white-space:nowrap";
        }""")
        found = _words_and_fit(page)
        assert any("plain English" in text for text in found["leftovers"])
        assert any(text.startswith("⟦") for text in found["cut"])
    finally:
        context.close()


def test_a_french_browser_sets_up_in_french_then_chooses_chinese_whose_dates_and_fonts_follow(
        browser: Browser, console: LiveConsole) -> None:
    AuditLog(console.data_dir).record(AuditEvent.PROPOSED, capability="home_assistant.list_entities",
                                      classification="read", stage=1, invocation="x")
    line = json.loads(console.data_dir.audit_log.read_text())
    console.data_dir.audit_log.write_text(json.dumps({**line, "time": "2026-12-02T09:30:00Z"}) + "\n")
    context = browser.new_context(locale="fr-FR", timezone_id="Europe/Paris", viewport=PHONE)
    page = context.new_page()
    try:
        page.goto(console.at("/"))
        expect(page.locator("html")).to_have_attribute("lang", "fr")
        expect(page).to_have_title("Choisir un mot de passe · Console")
        page.get_by_label("Nouveau mot de passe", exact=True).fill(PASSWORD)
        page.get_by_label("Saisissez-le à nouveau", exact=True).fill(PASSWORD)
        page.get_by_role("button", name="Définir le mot de passe").click()
        page.goto(console.at(SETTINGS))
        expect(page.get_by_role("link", name="Paramètres")).to_have_attribute("aria-current", "page")
        language = page.get_by_label("Langue", exact=True)
        expect(language).to_have_value("automatic")
        language.select_option("zh-Hans")
        page.get_by_role("button", name="Utiliser cette langue").click()
        expect(page.locator("html")).to_have_attribute("lang", "zh-Hans")
        expect(page.get_by_label("语言", exact=True)).to_have_value("zh-Hans")
        assert "Noto Sans CJK SC" in page.evaluate("getComputedStyle(document.body).fontFamily")
        page.get_by_role("link", name="活动").click()
        # clock.js writes the moment in the page's language (Intl, <html lang>) and the browser's zone.
        expect(page.locator("time[data-clock]").first).to_have_text(re.compile(r"^2026年12月2日 10:30$"))
        assert serious_violations(page) == []
    finally:
        context.close()
