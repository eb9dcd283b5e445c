"""Several Home Assistants on the settings page in Chromium (issue 29): a house and a cabin, two stubs on two ports.

With JavaScript: add "Cabin", switch to it, set its URL and token, pick its stove in its own picker, save;
back at home, home's allowlist is as it was; rename the cabin, then remove it (its token file goes). Without
JavaScript, in French: the same through the plain forms, the navigation naming home "Maison".
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from console_ha.store.instances import Instances
from tests.e2e.conftest import (
    DESKTOP,
    SETTINGS,
    LiveConsole,
    entity,
    log_in_in_any_language,
    screenshot,
    serious_violations,
)
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser

STOVE = "sensor.cabin_stove"
HOME_CHOSEN = ["light.living_room"]


@pytest.fixture
def homes(console: LiveConsole, two_homes: tuple[StubHomeAssistant, StubHomeAssistant],
          household_password: str) -> tuple[StubHomeAssistant, StubHomeAssistant]:
    """The house saved with one light allowed; the cabin's Home Assistant, with a stove the house lacks."""
    house, cabin = two_homes
    cabin.states.append({"entity_id": STOVE, "state": "61", "attributes": {"friendly_name": "Stove"},
                         "last_changed": "2026-01-01T00:00:00+00:00", "last_updated": "2026-01-01T00:00:00+00:00"})
    console.configure(house.base_url, house.token, enabled=True, allowlisted_entities=HOME_CHOSEN)
    return house, cabin


def navigation(page: Page, label: str = "Home Assistants") -> list[tuple[str, bool]]:
    """The Home Assistants the page's navigation names, and which one it marks as shown."""
    links = page.get_by_role("navigation", name=label).get_by_role("link")
    return [(link.inner_text(), link.get_attribute("aria-current") == "page") for link in links.all()]


def test_a_cabin_is_added_set_up_renamed_and_removed_with_javascript(
        page: Page, console: LiveConsole, homes: tuple[StubHomeAssistant, StubHomeAssistant]) -> None:
    _, cabin = homes
    page.set_viewport_size(DESKTOP)
    log_in_in_any_language(page, console)
    expect(entity(page, "light.living_room")).to_be_checked()  # the house's picker, loaded
    page.get_by_text("Add another Home Assistant").click()
    page.get_by_label("Name of the new Home Assistant").fill("Cabin")
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page).to_have_url(console.at(SETTINGS + "?instance=cabin"))
    page.wait_for_load_state()
    assert navigation(page) == [("Home", False), ("Cabin", True)]

    # The cabin's own settings: its URL and token, its picker listing its entities, its save.
    page.get_by_label("Home Assistant URL").fill(cabin.base_url)
    page.get_by_label("Access token").fill(cabin.token)
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text("Connected to")
    entity(page, STOVE).check()
    page.get_by_label("Let the assistant read Home Assistant").check()
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#save-status")).to_contain_text("Saved.")
    stores = Instances(console.data_dir).get("cabin")
    assert stores.config.load().allowlisted_entities == (STOVE,) and stores.config.load().name == "Cabin"
    assert stores.token.read_record().origin == cabin.base_url  # type: ignore[union-attr]
    assert console.config.load().allowlisted_entities == tuple(HOME_CHOSEN)
    assert serious_violations(page) == []
    screenshot(page, "settings-instances-cabin")

    # Home, as it was: its own entities, its own choice.
    page.get_by_role("navigation", name="Home Assistants").get_by_role("link", name="Home").click()
    expect(page).to_have_url(console.at(SETTINGS))
    expect(entity(page, "light.living_room")).to_be_checked()
    expect(page.locator("#picker-status")).to_contain_text("Loaded")
    expect(entity(page, STOVE)).to_have_count(0)
    assert navigation(page) == [("Home", True), ("Cabin", False)]

    page.get_by_role("link", name="Cabin").click()
    expect(page).to_have_url(console.at(SETTINGS + "?instance=cabin"))
    expect(entity(page, STOVE)).to_be_checked()
    page.get_by_label("Name of this Home Assistant").fill("Lake cabin")
    page.get_by_role("button", name="Rename").click()
    expect(page.get_by_role("navigation", name="Home Assistants")).to_contain_text("Lake cabin")
    assert navigation(page) == [("Home", False), ("Lake cabin", True)]

    page.get_by_role("button", name="Remove Lake cabin").click()
    expect(page.get_by_role("alert")).to_contain_text("Remove Lake cabin? Its access token and CA certificate")
    assert stores.files.token.exists()  # asking removed nothing
    page.get_by_role("button", name="Yes, remove Lake cabin").click()
    expect(page).to_have_url(console.at(SETTINGS + "?q="))  # home's page, at its list as without JavaScript
    expect(page.locator(".notice--ok")).to_contain_text("Removed Lake cabin")
    assert not stores.files.token.exists() and not stores.config.path.exists()
    expect(page.get_by_role("navigation", name="Home Assistants")).to_have_count(0)
    assert console.config.load().allowlisted_entities == tuple(HOME_CHOSEN)


def test_a_french_household_without_javascript_adds_a_chalet_and_removes_it(
        browser: Browser, console: LiveConsole, homes: tuple[StubHomeAssistant, StubHomeAssistant]) -> None:
    _, cabin = homes
    context = browser.new_context(locale="fr-FR", java_script_enabled=False, viewport=DESKTOP)
    page = context.new_page()
    try:
        log_in_in_any_language(page, console)
        page.get_by_text("Ajouter un autre Home Assistant").click()
        page.get_by_label("Nom du nouveau Home Assistant").fill("Chalet d’été")
        page.get_by_role("button", name="Ajouter", exact=True).click()
        expect(page).to_have_url(console.at(SETTINGS + "?instance=chalet_d_ete"))
        expect(page.locator(".notice--ok")).to_contain_text("Chalet d’été a été ajouté.")
        # The navigation in French: home is "Maison" until the household names it.
        assert navigation(page, "Home Assistant") == [("Maison", False), ("Chalet d’été", True)]
        expect(page.get_by_role("heading", name="Paramètres de Chalet d’été")).to_be_visible()

        page.get_by_label("URL de Home Assistant").fill(cabin.base_url)
        page.get_by_label("Jeton d’accès").fill(cabin.token)
        page.get_by_role("button", name="Enregistrer", exact=True).click()
        # Saved, the page lists the chalet's entities at once; the stove is the chalet's.
        expect(page).to_have_url(console.at(SETTINGS + "?instance=chalet_d_ete&q="))
        entity(page, STOVE).check()
        page.get_by_role("button", name="Enregistrer", exact=True).click()
        stores = Instances(console.data_dir).get("chalet_d_ete")
        expect(page.locator(".notice--ok")).to_contain_text("Enregistré")
        assert stores.config.load().allowlisted_entities == (STOVE,)
        assert console.config.load().allowlisted_entities == tuple(HOME_CHOSEN)

        page.get_by_role("button", name="Retirer Chalet d’été").click()
        expect(page.locator("#instance-remove-question")).to_contain_text("Retirer Chalet d’été\u202f?")
        page.get_by_role("button", name="Oui, retirer Chalet d’été").click()
        expect(page.locator(".notice--ok")).to_contain_text("Chalet d’été a été retiré")
        assert not stores.files.token.exists() and Instances(console.data_dir).ids() == ("home",)
    finally:
        context.close()
