"""First run, login and logout, driven through Chromium against a live Console."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import DESKTOP, PASSWORD, SETTINGS, LiveConsole, log_in, screenshot, serious_violations

pytestmark = pytest.mark.browser


def test_first_run_sets_a_password_and_the_household_can_log_in_with_it(page: Page, console: LiveConsole) -> None:
    page.set_viewport_size(DESKTOP)
    page.goto(console.at("/"))
    expect(page).to_have_url(re.compile(r"/setup"))
    screenshot(page, "first-run")

    page.get_by_label("New password", exact=True).fill(PASSWORD)
    page.get_by_label(re.compile(r"again|repeat", re.IGNORECASE)).fill(PASSWORD)  # the confirmation field
    page.get_by_role("button", name="Set password").click()
    expect(page).to_have_url(console.at(SETTINGS))
    expect(page.get_by_role("heading", name="Home Assistant", exact=True)).to_be_visible()

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/login"))
    page.goto(console.at(SETTINGS))
    expect(page).to_have_url(re.compile(r"/login\?next="))

    page.get_by_label("Password", exact=True).fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("not right")
    screenshot(page, "login-wrong-password")

    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(console.at(SETTINGS))


def test_the_login_page_has_no_serious_accessibility_violations(
    page: Page, console: LiveConsole, household_password: str
) -> None:
    page.goto(console.at(SETTINGS))
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    screenshot(page, "login")
    assert serious_violations(page) == []


def test_logging_in_leads_back_to_the_settings_page(page: Page, console: LiveConsole, household_password: str) -> None:
    log_in(page, console, household_password)
    expect(page.get_by_role("checkbox", name="Let the assistant read Home Assistant")).to_be_visible()



def press_test_model(page: Page) -> None:
    page.get_by_role("button", name="Test model").click()


def ask(page: Page) -> None:
    page.get_by_label("Message", exact=True).fill("Is the front door locked?")
    page.get_by_role("button", name="Send").click()


def wait(page: Page) -> None:
    """Nothing: the page's own poll finds the session gone."""


@pytest.mark.parametrize(("path", "act"), [("/settings/model", press_test_model), ("/conversation", ask),
                                           ("/confirmations", wait)])
def test_a_page_whose_session_ended_goes_to_log_in_and_back(
    page: Page, console: LiveConsole, household_password: str, path: str, act: Callable[[Page], None]
) -> None:
    """static/api.js's one reaction to a 401, on each page without words of its own for it (the settings
    page has them, test_settings_page): the login page, then back to the page."""
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password, path=path)
    # The nav's long poll would meet the ended session first (a logout answers it at once, and the page's next
    # question is refused: test_waiting_everywhere); here the page's own request must, so those are held back.
    page.route(re.compile(r"/api/v1/confirmations/watch\?"), lambda route: route.abort())
    other = page.context.new_page()  # another tab of the same browser logs out
    other.goto(console.at(path))
    other.get_by_role("button", name="Log out").click()
    # The other tab's landing page starts a session of its own (its login form's CSRF token): had this tab's
    # login page come first, the cookie would change under its form ("The form was out of date"), as it would
    # for a household that logs out in one tab while another is still loading.
    expect(other).to_have_url(console.at("/login?logged_out=1"))

    act(page)
    expect(page).to_have_url(console.at("/login?next=" + path.replace("/", "%2F")), timeout=10_000)
    page.get_by_label("Password", exact=True).fill(household_password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(console.at(path))
