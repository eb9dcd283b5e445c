"""A real Home Assistant 2025.4.4 gains an entity: the settings page tells of it, marks it, never chooses it."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page, expect

# The browser suite's own fixtures, used as they are (see test_browser_real.py).
from tests.e2e.conftest import (  # noqa: F401
    DESKTOP,
    PHONE,
    LiveConsole,
    browser_type_launch_args,
    console,
    entity,
    household_password,
    log_in,
    serious_violations,
)
from tests.moving_clock import PATIENCE
from tests.real_ha.harness import RealHomeAssistant

pytestmark = [pytest.mark.real_ha, pytest.mark.browser]

LOAD_TIMEOUT = 15_000
HELPER_NAME = "Console test guest mode"
HELPER_ID = "input_boolean.console_test_guest_mode"


def loaded(page: Page) -> None:
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=LOAD_TIMEOUT)


@pytest.fixture
def new_helper(real_ha: RealHomeAssistant) -> Iterator[Callable[[], str]]:
    """Create an input_boolean helper through Home Assistant's own WebSocket API; removed afterwards."""
    created: list[str] = []

    def create() -> str:
        with real_ha.websocket() as ws:
            item = ws.command("input_boolean/create", name=HELPER_NAME)
        created.append(item["id"])
        deadline = time.monotonic() + PATIENCE  # patience for Home Assistant, not a bound
        while real_ha.get(f"/api/states/{HELPER_ID}").status_code != 200:
            assert time.monotonic() < deadline, "the helper's state never appeared"
            time.sleep(0.1)
        return HELPER_ID

    yield create
    with real_ha.websocket() as ws:
        for helper_id in created:
            ws.command("input_boolean/delete", input_boolean_id=helper_id)


def test_an_entity_the_real_home_assistant_gains_shows_up_as_new(
    page: Page,
    console: LiveConsole,  # noqa: F811
    household_password: str,  # noqa: F811
    real_ha: RealHomeAssistant,
    new_helper: Callable[[], str],
) -> None:
    console.configure(real_ha.base_url, real_ha.token, enabled=True, allowlisted_entities=["sensor.kitchen_humidity"])
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    loaded(page)
    page.get_by_role("button", name="Save").click()  # the household's review: what the picker shows now
    expect(page.locator("#save-status")).to_contain_text("Saved")
    expect(page.locator("#new-notice")).to_be_hidden()

    new_id = new_helper()
    page.reload()
    loaded(page)
    expect(page.locator("#new-notice")).to_contain_text("Home Assistant has 1 new entity since your choices")
    expect(entity(page, new_id)).to_have_accessible_name(re.compile(r"\bNew\b"))
    expect(entity(page, new_id)).not_to_be_checked()
    page.get_by_role("checkbox", name="New since last review").check()
    expect(page.locator("#picker-count")).to_contain_text("1 of")
    expect(entity(page, "sensor.kitchen_humidity")).to_be_hidden()
    for width in (DESKTOP, PHONE):
        page.set_viewport_size(width)
        assert serious_violations(page) == []
    assert json.loads(console.config.path.read_text())["allowlisted_entities"] == ["sensor.kitchen_humidity"]
