"""The household's own CA from the browser: checked, described, stored atomically, used by every path."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.errors import InvalidConfig
from console_ha.store.datadir import DataDir
from tests.certs import Issued, make_ca, store_at
from tests.executors import executor_over
from tests.seed import hand_edit
from tests.stub_ha import StubHomeAssistant

from .conftest import API, configure, error_of

CA_API = f"{API}/ca-certificate"


@pytest.fixture
def https_ha(issued: Issued, hidden_secrets: list[str]) -> Iterator[StubHomeAssistant]:
    """A stub Home Assistant on https, with a certificate the household's CA signed."""
    with StubHomeAssistant(certfile=issued.server_cert, keyfile=issued.server_key) as stub:
        hidden_secrets.append(stub.token)
        yield stub


def test_the_ca_is_trusted_by_test_picker_and_capabilities_once_added(
    household: FlaskClient, https_ha: StubHomeAssistant, issued: Issued, data_dir: DataDir
) -> None:
    """Before: HA_TLS_ERROR. After adding the CA on the page: the test, the picker and a capability all work."""
    typed = {"base_url": https_ha.base_url, "access_token": https_ha.token}
    error_of(household.post(f"{API}/test", json=typed), 502, "HA_TLS_ERROR")
    error_of(household.post(f"{API}/entities/preview", json=typed), 502, "HA_TLS_ERROR")

    response = household.post(CA_API, json={"pem": issued.ca_pem})
    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert body["stored"] is True and body["managed_by_file"] is None
    (info,) = body["certificates"]
    assert info["kind"] == "ca" and "Test household CA" in info["subject"] and info["issuer"] == info["subject"]
    assert "certificate authority" in info["words"]
    assert stat.S_IMODE(os.stat(data_dir.ha_ca_bundle).st_mode) == 0o600

    assert household.post(f"{API}/test", json=typed).get_json()["ok"] is True
    assert household.post(f"{API}/entities/preview", json=typed).status_code == 200
    configure(household, https_ha.base_url, https_ha.token, enabled=True, allowlisted_entities=["light.living_room"])
    assert household.get(f"{API}/entities").status_code == 200
    executor = executor_over(data_dir)
    result = executor.answer(executor.propose(LIST_ENTITIES, {}, conversation_id="c").token, approve=True,
                             conversation_id="c")
    assert "light.living_room" in str(result)

    # Removed: https is checked against the system's trust store alone again.
    assert household.delete(CA_API).get_json() == {"stored": False, "managed_by_file": None, "readable": True,
                                                   "certificates": []}
    assert not data_dir.ha_ca_bundle.exists()
    error_of(household.post(f"{API}/test", json=typed), 502, "HA_TLS_ERROR")


def test_a_self_signed_host_certificate_is_named_as_such(
    household: FlaskClient, self_signed_cert: tuple[str, str]
) -> None:
    """openssl's quick self-signed recipe: for one host, said in plain words; and it works for that host."""
    cert, key = self_signed_cert
    (info,) = household.post(CA_API, json={"pem": Path(cert).read_text()}).get_json()["certificates"]
    assert info["kind"] == "self_signed_host" and "127.0.0.1" in info["hosts"]
    assert info["words"].startswith("A self-signed certificate for one Home Assistant (")
    with StubHomeAssistant(certfile=cert, keyfile=key) as stub:
        typed = {"base_url": stub.base_url, "access_token": stub.token}
        assert household.post(f"{API}/test", json=typed).get_json()["ok"] is True


@pytest.mark.parametrize(
    ("pem", "words"),
    [
        ("hello", "not a PEM certificate"),
        ("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", "damaged or incomplete"),
        ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "private key"),
        ("", "Paste a CA certificate"),
        ("x" * (65 * 1024), "larger than a CA certificate"),
    ],
    ids=["text", "bad-base64", "private-key", "empty", "too-large"],
)
def test_what_is_not_a_usable_certificate_is_refused_and_nothing_is_written(
    household: FlaskClient, data_dir: DataDir, pem: str, words: str
) -> None:
    error = error_of(household.post(CA_API, json={"pem": pem}), 400, "INVALID_CONFIG")
    assert error["field"] == "ca_certificate" and words in error["message"]
    assert not data_dir.ha_ca_bundle.exists()


def test_a_key_pasted_with_the_certificate_is_refused(household: FlaskClient, issued: Issued,
                                                      data_dir: DataDir) -> None:
    """The key must never be stored (nor needed): the whole paste is refused."""
    pem = issued.ca_pem + Path(issued.server_key).read_text()
    error = error_of(household.post(CA_API, json={"pem": pem}), 400, "INVALID_CONFIG")
    assert "private key" in error["message"] and not data_dir.ha_ca_bundle.exists()


def test_a_key_under_a_lower_case_header_is_refused_over_http_and_never_echoed(
    household: FlaskClient, issued: Issued, data_dir: DataDir, hidden_secrets: list[str]
) -> None:
    """Found by parsing, not by its header text: the answer names a key and holds none of it."""
    key = Path(issued.server_key).read_text()
    hidden_secrets.extend(line for line in key.split("\n") if len(line) >= 40)
    pem = issued.ca_pem + key.replace("-----BEGIN PRIVATE KEY-----", "-----begin private key-----")
    error = error_of(household.post(CA_API, json={"pem": pem}), 400, "INVALID_CONFIG")
    assert error["field"] == "ca_certificate" and "private key" in error["message"]
    assert "nothing was stored" in error["message"] and not data_dir.ha_ca_bundle.exists()


def test_an_expired_or_host_only_certificate_is_refused_with_why(data_dir: DataDir, issued: Issued) -> None:
    """Expired: when. A server certificate signed by a CA: ask for the CA instead."""
    with pytest.raises(InvalidConfig, match="expired on"):
        store_at(data_dir, issued.ca_pem, days_from_now=365)
    with pytest.raises(InvalidConfig, match="certificate of whoever issued it"):
        store_at(data_dir, Path(issued.server_cert).read_text())
    assert not data_dir.ha_ca_bundle.exists()


def test_a_certificate_not_yet_valid_is_refused_with_when(data_dir: DataDir, issued: Issued) -> None:
    """Not valid before a date still to come: every connection would fail, so say when (and check the clock)."""
    with pytest.raises(InvalidConfig, match="not valid before") as refused:
        store_at(data_dir, issued.ca_pem, days_from_now=-2)
    assert refused.value.detail["field"] == "ca_certificate"


def test_a_replaced_certificate_is_written_whole(household: FlaskClient, tmp_path: Path, issued: Issued,
                                                 data_dir: DataDir) -> None:
    """A second CA replaces the first atomically: the file is always one of the two, never a mix."""
    household.post(CA_API, json={"pem": issued.ca_pem})
    other = make_ca(tmp_path / "other")
    household.post(CA_API, json={"pem": other.ca_pem})
    assert data_dir.ha_ca_bundle.read_text() == other.ca_pem.strip() + "\n"
    leftovers = [p.name for p in data_dir.ha_secrets.iterdir()
                 if p.name.startswith(".") and not p.name.endswith(".lock")]
    assert leftovers == []  # no temporary file left behind


def test_a_bundle_named_in_the_settings_file_wins_and_the_page_cannot_replace_it(
    household: FlaskClient, issued: Issued, data_dir: DataDir, tmp_path: Path
) -> None:
    """`ca_bundle` in home-assistant.json is the household's own choice: shown, not overwritten."""
    own = tmp_path / "own-ca.pem"
    own.write_text(issued.ca_pem)
    hand_edit(data_dir, {"ca_bundle": str(own)})  # only the file sets `ca_bundle`: no save may
    body = household.get(CA_API).get_json()
    assert body["managed_by_file"] == str(own) and body["certificates"][0]["kind"] == "ca"
    error = error_of(household.post(CA_API, json={"pem": issued.ca_pem}), 400, "INVALID_CONFIG")
    assert str(own) in error["message"]
    error_of(household.delete(CA_API), 400, "INVALID_CONFIG")
    assert own.exists() and not data_dir.ha_ca_bundle.exists()


def test_a_damaged_stored_file_is_reported_as_unreadable(household: FlaskClient, data_dir: DataDir) -> None:
    data_dir.ha_secrets.mkdir(parents=True, exist_ok=True)
    data_dir.ha_ca_bundle.write_text("garbage")
    assert household.get(CA_API).get_json() == {"stored": True, "managed_by_file": None, "readable": False,
                                                "certificates": []}


def test_only_the_households_browser_session_can_add_or_remove_the_ca(
    household: FlaskClient, bearer: FlaskClient, issued: Issued, data_dir: DataDir
) -> None:
    """A CA decides who may receive the Home Assistant token over https: a program's API token cannot change it."""
    error = error_of(bearer.post(CA_API, json={"pem": issued.ca_pem}), 403, "FORBIDDEN")
    assert "browser" in error["message"] and not data_dir.ha_ca_bundle.exists()
    assert household.post(CA_API, json={"pem": issued.ca_pem}).status_code == 200
    stored = data_dir.ha_ca_bundle.read_bytes()
    error_of(bearer.delete(CA_API), 403, "FORBIDDEN")
    assert data_dir.ha_ca_bundle.read_bytes() == stored
    # Not even what is trusted: a program's token touches no CA certificate (issue 16).
    error_of(bearer.get(CA_API), 403, "FORBIDDEN")
