"""The settings page shows how much of what the assistant can read at once the ticked entities take."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from console_ha.capabilities.entity_budget import BUDGET_BYTES, allowlist_cost, entity_cost
from tests.e2e.conftest import DESKTOP, LiveConsole, entity, log_in, screenshot
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser

BULK = [f"sensor.bulk_{i:03d}" for i in range(320)]
API = "/api/v1/conversation/home-assistant"
# Entity ids of many shapes: domains of 1 to 24 characters, object ids of 1 to 80.
SHAPES = [f"{'d' * d}.{'o' * o}" for d in (1, 2, 5, 13, 24) for o in (1, 3, 8, 21, 55, 80)]


def about(entity_ids: list[str]) -> int:
    """How many entities like these fit, as the server reckons it."""
    return BUDGET_BYTES * len(entity_ids) // sum(entity_cost(e) for e in entity_ids)


def listed(stub_ha: StubHomeAssistant) -> list[str]:
    """Every entity the picker lists from the stub."""
    return [state["entity_id"] for state in stub_ha.states]


@pytest.fixture
def picker(page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant) -> Page:
    """The settings page of a Console connected to the stub, its picker loaded."""
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True)
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=10_000)
    return page


def test_ticking_entities_moves_the_meter(picker: Page, stub_ha: StubHomeAssistant) -> None:
    """Each tick adds the entity's cost: the sentence and the bar follow, in the server's numbers.

    "About N" is reckoned from every entity listed, so ticking does not make it drift (issue 21).
    """
    page = picker
    meter = page.get_by_role("status").filter(has_text="the assistant can read")
    fits = about(listed(stub_ha))
    expect(meter).to_have_text(f"Nothing chosen yet. The assistant can read about {fits} entities at once.")

    first = ["sensor.living_room_temperature"]
    entity(page, first[0]).check()
    percent = entity_cost(first[0]) * 100 // BUDGET_BYTES
    expect(meter).to_have_text(f"Uses {percent}% of what the assistant can read at once "
                               f"(1 of about {fits} entities).")
    one = page.locator("#allowlist-budget-meter").evaluate("m => m.value")

    both = [*first, "light.living_room"]
    entity(page, both[1]).check()
    percent = sum(entity_cost(e) for e in both) * 100 // BUDGET_BYTES
    expect(meter).to_have_text(f"Uses {percent}% of what the assistant can read at once "
                               f"(2 of about {fits} entities).")
    two = page.locator("#allowlist-budget-meter").evaluate("m => m.value")
    assert 0 < one < two < 1
    assert two == pytest.approx(sum(entity_cost(e) for e in both) / BUDGET_BYTES)

    entity(page, both[1]).uncheck()
    expect(meter).to_contain_text("(1 of about")


def test_the_meter_moves_in_the_same_task_as_the_count(picker: Page, stub_ha: StubHomeAssistant) -> None:
    """Issue 21: the meter lagged the count; both now change before the tick's task ends (so in one frame)."""
    count, sentence, value = picker.evaluate("""() => {
        const box = [...document.querySelectorAll("#entity-groups input[type=checkbox]")]
            .find((cb) => cb.value === "light.living_room");
        box.click();
        return [document.getElementById("picker-count").textContent,
                document.getElementById("allowlist-budget").textContent,
                document.getElementById("allowlist-budget-meter").value];
    }""")
    assert count.startswith("1 chosen")
    assert sentence.endswith(f"(1 of about {about(listed(stub_ha))} entities).")
    assert value == pytest.approx(entity_cost("light.living_room") / BUDGET_BYTES)


def test_past_the_limit_the_meter_says_so_and_a_save_is_refused(
        page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant) -> None:
    """Select all of 320 more entities: the meter warns, and Save shows the server's refusal."""
    for entity_id in BULK:
        stub_ha.set_state(entity_id, "1", {"friendly_name": f"Bulk {entity_id[-3:]}"})
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True,
                      allowlisted_entities=["sensor.living_room_temperature"])
    before = json.loads(console.config.path.read_text())
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=10_000)
    meter = page.locator("#allowlist-budget")
    expect(meter).to_contain_text("1 of about")

    page.get_by_role("searchbox", name="Search entities").fill("bulk")
    page.get_by_role("button", name="Select all shown").click()
    chosen = ["sensor.living_room_temperature", *BULK]
    untick = len(chosen) - about(chosen)
    expect(meter).to_have_text(
        f"Too many for the assistant to read at once: about {about(chosen)} of these fit, and "
        f"{len(chosen)} are chosen. Untick {untick} or more before saving.")
    expect(meter).to_have_class(re.compile(r"\bstatus--error\b"))
    screenshot(page, "allowlist-budget-over", phone=False, whole_page=False)

    page.get_by_role("button", name="Save").click()
    status = page.locator("#save-status")
    expect(status).to_contain_text(f"The assistant can read about {about(chosen)} entities like these at once")
    expect(status).to_contain_text("Nothing was saved")
    assert json.loads(console.config.path.read_text()) == before

    page.get_by_role("button", name="Clear all shown").click()
    expect(meter).to_contain_text("(1 of about")
    expect(meter).not_to_have_class(re.compile(r"\bstatus--error\b"))


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_meter_follows_ticks_at_each_width_and_passes_axe(picker: Page, width: str) -> None:
    """At desktop and phone width: ticking moves the meter, and axe finds nothing serious."""
    from tests.e2e.conftest import PHONE, serious_violations

    page = picker
    page.set_viewport_size(DESKTOP if width == "desktop" else PHONE)
    meter = page.locator("#allowlist-budget")
    expect(meter).to_contain_text("Nothing chosen yet")
    entity(page, "light.living_room").check()
    expect(meter).to_contain_text("(1 of about")
    assert page.locator("#allowlist-budget-meter").evaluate("m => m.value") > 0
    assert serious_violations(page) == []


def too_many(shapes: list[str], extra: int) -> list[str]:
    """Distinct ids of these shapes, taken in turn: just past what the budget holds, then `extra` more."""
    ids: list[str] = []

    def add() -> None:
        ids.append(f"{shapes[len(ids) % len(shapes)]}_{len(ids):04d}")

    while allowlist_cost(ids) <= BUDGET_BYTES:
        add()
    for _ in range(extra):
        add()
    return ids


def test_the_meters_arithmetic_is_the_servers(
        page: Page, console: LiveConsole, household_password: str) -> None:
    """static/entity_budget.js, fed the server's prices for ids of every shape and the budget the page serves,
    says the server's own "about N fit" and "Untick N" for each save the server refuses."""
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    budget = page.locator("#budget-script").evaluate("s => Number(s.dataset.budgetBytes)")
    assert budget == BUDGET_BYTES

    allowlists = [too_many([shape], extra) for shape in SHAPES[::7] for extra in (0, 1, 40)]
    allowlists.append(too_many(SHAPES, 0))
    allowlists.append(too_many(SHAPES[::-1], 123))
    # Each allowlist with its cost as the server prices it (the picker's JSON and the boxes carry these).
    priced = [[ids, allowlist_cost(ids)] for ids in allowlists]
    pairs = page.evaluate("""async ([priced, url, budgetBytes]) => {
        const budget = await import("/static/entity_budget.js");
        const csrf = document.querySelector('meta[name="csrf-token"]').content;
        const pairs = [];
        for (const [ids, cost] of priced) {
            const page = [budget.howManyFit(ids.length, cost, budgetBytes),
                          budget.howManyToUntick(ids.length, cost, budgetBytes)];
            const response = await fetch(url, {
                method: "POST", body: JSON.stringify({allowlisted_entities: ids}),
                headers: {"Content-Type": "application/json", "X-CSRFToken": csrf}});
            const error = (await response.json()).error;
            pairs.push([page, [response.status, error.code, error.fits, error.chosen - error.fits]]);
        }
        return pairs;
    }""", [priced, console.at(API), budget])
    assert len(pairs) == len(allowlists) > 10
    for (fits, untick), (status, code, server_fits, server_untick) in pairs:
        assert (status, code) == (400, "INVALID_CONFIG")
        assert (fits, untick) == (server_fits, server_untick)
