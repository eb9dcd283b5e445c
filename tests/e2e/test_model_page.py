"""The model settings page in Chromium, against the scripted fake model; the no-model notice on /conversation."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, Received, log_in, screenshot, serious_violations
from tests.fake_model import FakeModel, Raw, text, tool_call, unused_loopback_url

pytestmark = pytest.mark.browser

PAGE = "/settings/model"
KEY = "sk-browser-model-key-7"


@pytest.fixture(autouse=True)
def _no_model_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The household sets the model in the browser: nothing comes from the environment."""
    for name in ("CONSOLE_HA_LLM_URL", "CONSOLE_HA_LLM_MODEL", "CONSOLE_HA_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model_page(page: Page, console: LiveConsole, household_password: str) -> Page:
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password, path=PAGE)
    return page


def fill(page: Page, url: str, name: str = "", key: str = "") -> None:
    page.get_by_label("Model server URL").fill(url)
    page.get_by_label("Model", exact=True).fill(name)
    page.get_by_label("API key").fill(key)


def test_no_model_notice_on_conversation_links_to_the_model_page(page: Page, console: LiveConsole,
                                                                 household_password: str):
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password, path="/conversation")
    notice = page.locator("#model-notice")
    expect(notice).to_contain_text("No language model is set up yet")
    assert serious_violations(page) == []
    page.set_viewport_size(PHONE)
    assert serious_violations(page) == []
    page.set_viewport_size(DESKTOP)
    notice.get_by_role("link", name="Set up the model").click()
    expect(page).to_have_url(console.at(PAGE))
    expect(page.get_by_role("heading", name="Language model")).to_be_visible()


def test_test_offers_the_server_s_models_then_save_stores_them_and_the_key_stays_hidden(
        model_page: Page, console: LiveConsole, model: FakeModel, received: Received):
    model.models = ["fake-model", "qwen2.5-7b-instruct"]
    model.script(tool_call("report_ready", {"ready": True}))
    # First without a model name: the test lists what the server has.
    fill(model_page, model.url)
    model_page.get_by_role("button", name="Test model").click()
    status = model_page.locator("#test-status")
    expect(status).to_contain_text("offers 2 models")
    expect(status).not_to_have_class(re.compile("status--error"))  # a question, not an error
    listed = model_page.get_by_role("list", name="Models on this server")
    expect(listed.get_by_role("listitem")).to_have_text(["fake-model", "qwen2.5-7b-instruct"])
    options = model_page.locator("#model-choices option")
    expect(options).to_have_count(2)
    assert options.evaluate_all("os => os.map(o => o.value)") == ["fake-model", "qwen2.5-7b-instruct"]
    # Then with one of them and a key: ready.
    fill(model_page, model.url, "qwen2.5-7b-instruct", KEY)
    model_page.get_by_role("button", name="Test model").click()
    expect(status).to_have_text("The model answered with a tool call: it is ready. Press Save to use it.")
    assert model.requests[-1].headers["Authorization"] == f"Bearer {KEY}"
    assert serious_violations(model_page) == []
    screenshot(model_page, "model-settings-ready")

    expect(model_page.locator("#model-problem")).to_be_visible()
    model_page.get_by_role("button", name="Save").click()
    expect(model_page.locator("#save-status")).to_have_text("Saved.")
    expect(model_page.locator("#model-problem")).to_be_hidden()
    expect(model_page.get_by_label("API key")).to_have_value("")
    saved = json.loads(console.data_dir.model_config.read_text())
    assert saved == {"base_url": model.url, "model": "qwen2.5-7b-instruct"}
    model_page.reload()
    expect(model_page.get_by_label("Model server URL")).to_have_value(model.url)
    expect(model_page.get_by_label("Model", exact=True)).to_have_value("qwen2.5-7b-instruct")
    expect(model_page.get_by_label("API key")).to_have_value("")
    expect(model_page.get_by_label("API key")).to_have_attribute("type", "password")
    expect(model_page.locator("#api-key-status")).to_contain_text("An API key is saved for this server")
    assert received.containing(KEY) == []
    model_page.set_viewport_size(PHONE)
    assert serious_violations(model_page) == []


@pytest.mark.parametrize(("setup", "words"), [
    ("down", "Nothing answered at"),
    ("not-openai", "not as an OpenAI-compatible server"),
    ("unknown-model", "has no model called “nope”"),
    ("no-tools", "llama.cpp's server must be started with --jinja"),
])
def test_each_failure_of_the_test_is_said_in_plain_words(model_page: Page, model: FakeModel, setup, words):
    url = model.url
    if setup == "down":
        url = unused_loopback_url()
    elif setup == "not-openai":
        model.models = Raw(404, b"<html>Not Found</html>", "text/html")
    elif setup == "unknown-model":
        model.models = ["fake-model"]
        model.script(Raw(404, b'{"error": {"message": "model \\"nope\\" not found"}}'))
    else:
        model.script(text("I am ready!"))
    fill(model_page, url, "nope")
    model_page.get_by_role("button", name="Test model").click()
    status = model_page.locator("#test-status")
    expect(status).to_contain_text(words)
    expect(status).to_have_class("status status--error")
    if setup == "unknown-model":
        expect(model_page.locator("#model-choices option")).to_have_count(1)
    assert serious_violations(model_page) == []


def test_a_bad_url_is_marked_on_its_field_and_nothing_is_saved(model_page: Page, console: LiveConsole):
    fill(model_page, "http://192.168.1.20:8080", "m")
    model_page.get_by_role("button", name="Save").click()
    expect(model_page.locator("#save-status")).to_contain_text("ends in /v1")
    field = model_page.get_by_label("Model server URL")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_be_focused()
    expect(model_page.locator("#base-url-error")).to_be_visible()
    assert not console.data_dir.model_config.exists()
    assert serious_violations(model_page) == []


def test_the_page_says_which_environment_variables_win(page: Page, console: LiveConsole, household_password: str,
                                                      monkeypatch: pytest.MonkeyPatch, model: FakeModel):
    monkeypatch.setenv("CONSOLE_HA_LLM_URL", model.url)
    monkeypatch.setenv("CONSOLE_HA_LLM_MODEL", "fake-model")
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password, path=PAGE)
    notice = page.locator("#environment-notice")
    expect(notice).to_contain_text("CONSOLE_HA_LLM_URL, CONSOLE_HA_LLM_MODEL")
    expect(notice).to_contain_text("over what is saved here")
    assert serious_violations(page) == []
    screenshot(page, "model-settings-environment")


def test_the_nav_leads_to_the_model_page(model_page: Page, console: LiveConsole):
    model_page.goto(console.at("/conversation"))
    model_page.get_by_role("navigation", name="Console").get_by_role("link", name="Model").click()
    expect(model_page).to_have_url(console.at(PAGE))
    expect(model_page.get_by_role("link", name="Model")).to_have_attribute("aria-current", "page")
