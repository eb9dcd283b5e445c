"""An https Home Assistant with the household's own CA, set up from the browser alone."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from console_ha.words import CA_ADDED, CA_REMOVE_QUESTION, CA_REMOVED, CA_TAKES_EFFECT
from tests.certs import Issued
from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, screenshot, serious_violations
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser


@pytest.fixture
def https_ha(issued: Issued) -> Iterator[StubHomeAssistant]:
    with StubHomeAssistant(certfile=issued.server_cert, keyfile=issued.server_key) as stub:
        yield stub


def test_adding_the_households_ca_makes_https_work_from_the_page(
    settings_page: Page, console: LiveConsole, https_ha: StubHomeAssistant, issued: Issued, tmp_path: Path
) -> None:
    page = settings_page
    page.set_viewport_size(DESKTOP)
    page.get_by_label("Home Assistant URL").fill(https_ha.base_url)
    page.get_by_label("Access token").fill(https_ha.token)
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text("Add its CA certificate", timeout=10_000)
    expect(page.get_by_label("CA certificate (PEM)")).to_be_visible()  # the section opened by itself

    # Upload the file (paste works the same way: the file only fills the field).
    ca_file = tmp_path / "ca.crt"
    ca_file.write_text(issued.ca_pem)
    page.get_by_label("Or choose the certificate file").set_input_files(str(ca_file))
    expect(page.get_by_label("CA certificate (PEM)")).to_have_value(issued.ca_pem)
    page.get_by_role("button", name="Add certificate").click()
    expect(page.locator("#ca-status")).to_have_text(CA_ADDED)  # says when it takes effect: at once
    expect(page.locator("#test-status")).to_have_text("")  # the old certificate error is gone
    current = page.locator("#ca-current")
    expect(current).to_contain_text("A certificate authority (CA)")
    expect(current).to_contain_text("CN=Test household CA")
    expect(current).to_contain_text("(itself)")
    expect(page.locator(".ca-cert__expires")).to_have_text(re.compile(r"\d{4}"))
    assert console.data_dir.ha_ca_bundle.read_text() == issued.ca_pem.strip() + "\n"
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        assert serious_violations(page) == []
    page.set_viewport_size(DESKTOP)
    screenshot(page, "settings-ca-certificate")

    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text("Connected to “Home”", timeout=10_000)
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=10_000)

    page.reload()
    expect(page.locator("#ca-current")).to_contain_text("CN=Test household CA")
    expect(page.locator("#ca-section")).to_contain_text(CA_TAKES_EFFECT)
    # Remove asks first (issue 21): keeping it changes nothing; yes removes it at once, without Save.
    page.get_by_role("button", name="Remove certificate").click()
    dialog = page.get_by_role("dialog", name="Remove the certificate?")
    expect(dialog).to_contain_text(CA_REMOVE_QUESTION)
    assert serious_violations(page) == []
    dialog.get_by_role("button", name="Keep it").click()
    expect(dialog).to_be_hidden()
    assert console.data_dir.ha_ca_bundle.exists()
    page.get_by_role("button", name="Remove certificate").click()
    dialog.get_by_role("button", name="Yes, remove the certificate").click()
    expect(page.locator("#ca-status")).to_have_text(CA_REMOVED)
    expect(page.locator("#ca-current")).to_contain_text("No certificate added")
    assert not console.data_dir.ha_ca_bundle.exists()


def test_a_pasted_private_key_is_refused_beside_the_field(settings_page: Page, console: LiveConsole,
                                                          issued: Issued) -> None:
    page = settings_page
    page.locator("#ca-section summary").click()
    page.get_by_label("CA certificate (PEM)").fill(Path(issued.server_key).read_text())
    page.get_by_role("button", name="Add certificate").click()
    expect(page.locator("#ca-pem-error")).to_contain_text("private key")
    expect(page.get_by_label("CA certificate (PEM)")).to_have_attribute("aria-invalid", "true")
    assert not console.data_dir.ha_ca_bundle.exists()


def test_a_self_signed_certificate_is_said_to_be_for_one_host(settings_page: Page,
                                                              self_signed_cert: tuple[str, str]) -> None:
    page = settings_page
    page.locator("#ca-section summary").click()
    page.get_by_label("CA certificate (PEM)").fill(Path(self_signed_cert[0]).read_text())
    page.get_by_role("button", name="Add certificate").click()
    expect(page.locator("#ca-current")).to_contain_text("A self-signed certificate for one Home Assistant")
    expect(page.locator("#ca-current")).to_contain_text("127.0.0.1")
