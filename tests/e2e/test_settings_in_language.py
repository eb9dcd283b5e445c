"""The Home Assistant settings page in French (with JavaScript) and in Chinese (without), at 1280 and 390 px.

What the scripts show (the picker's status and count, the kinds of entity, the budget sentence, the steps,
Test connection's answer) comes from the server in the page's language (#script-words, static/words.js);
without JavaScript the server renders the same words itself. axe still finds nothing serious.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from tests.e2e.conftest import (
    DESKTOP,
    PHONE,
    LiveConsole,
    log_in_in_any_language,
    serious_violations,
)
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_french_household_sets_up_with_the_scripts_speaking_french(
        browser: Browser, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant,
        width: Any) -> None:
    context = browser.new_context(locale="fr-FR", viewport=width)
    page = context.new_page()
    try:
        log_in_in_any_language(page, console)
        expect(page.locator("html")).to_have_attribute("lang", "fr")
        page.get_by_label("URL de Home Assistant").fill(stub_ha.base_url)
        page.get_by_label("Jeton d’accès").fill(stub_ha.token)
        page.get_by_role("button", name="Tester la connexion").click()
        expect(page.locator("#test-status")).to_contain_text("Connecté à")
        expect(page.locator("#test-status")).to_contain_text("Choisissez les entités ci-dessous")
        expect(page.locator("#picker-status")).to_contain_text("entités chargées depuis Home Assistant")
        # The kinds of entity in French, each with its count; the filter narrows the count line.
        kinds = page.get_by_label("Type d’entité")
        expect(kinds.locator("option").first).to_have_text(re.compile(r"^Tous les types \(\d+\)$"))
        expect(kinds.locator("option", has_text=re.compile(r"^Lumières \(\d+\)$"))).to_have_count(1)
        page.get_by_role("checkbox", name=re.compile(r"light\.living_room")).check()
        count = re.compile(r"^Choisies\u00a0: 1 · affichées\u00a0: \d+ sur \d+$")
        expect(page.locator("#picker-count")).to_have_text(count)
        expect(page.locator("#allowlist-budget")).to_contain_text("de ce que l’assistant peut lire d’un coup")
        expect(page.locator('li[data-step="test"] .step__state')).to_have_text("fait")
        expect(page.locator('li[data-step="save"] .step__state')).to_have_text("pas encore fait")
        assert "Loaded" not in page.locator("main").inner_text()
        assert serious_violations(page) == []
    finally:
        context.close()


@pytest.mark.parametrize("width", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_chinese_household_without_javascript_reads_the_picker_and_the_test_in_chinese(
        browser: Browser, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant,
        width: Any) -> None:
    console.configure(stub_ha.base_url, stub_ha.token, allowlisted_entities=["light.living_room"])
    context = browser.new_context(locale="zh-CN", java_script_enabled=False, viewport=width)
    page = context.new_page()
    try:
        log_in_in_any_language(page, console)
        # Without JavaScript the whole list is there at once (the page refreshes to it).
        expect(page.locator("#nojs-count")).to_contain_text("显示第 1–")
        kinds = page.locator("#nojs-kind")
        expect(kinds.locator("option").first).to_have_text("所有类型")
        expect(kinds.locator("option", has_text=re.compile(r"^灯（\d+）$"))).to_have_count(1)
        kinds.select_option(label=kinds.locator("option", has_text="灯（").inner_text())
        page.get_by_role("button", name="搜索").click()
        expect(page.locator("#nojs-count")).to_contain_text("个匹配")
        page.get_by_role("button", name="测试连接").click()
        expect(page.locator("#test-status")).to_contain_text("已连接到")
        expect(page.get_by_role("heading", name="助手可以读取的实体")).to_be_visible()
    finally:
        context.close()
