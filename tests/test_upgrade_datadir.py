"""Upgrade without loss: a data dir written by release ba5e17c keeps working, unchanged, as it did then.

The data dir is tests/fixtures/release_ba5e17c/data, made once by that release (one Home Assistant, before
issue 29's instances) and never made again. Each test opens a copy and checks what a household and a program
see: its settings, password, API tokens, CA certificate, Activity and a read with the stored token. Later
Consoles read the same files as their `home` instance, so these answers must not change.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient

from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.fake_model import FakeModel, text, tool_call
from tests.stub_ha import StubHomeAssistant
from tests.web.conftest import TEST_CONFIG, RecordingClient, log_in, page_csrf

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "release_ba5e17c"
KNOWN: dict[str, Any] = json.loads((FIXTURE / "known.json").read_text(encoding="utf-8"))
API = "/api/v1/conversation/home-assistant"
# The file a login writes (the session it starts): the one file a household's visit may change.
SESSIONS = "secrets/console/sessions.json"


class _Tags(HTMLParser):
    """Every start tag of a page with its attributes, in order (what a test reads, whatever their order)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def having(self, tag: str, **wanted: str) -> list[dict[str, str | None]]:
        """The attributes of each `tag` whose attributes include `wanted` (a class among its classes)."""
        return [attrs for name, attrs in self.tags if name == tag and all(
            value in (attrs.get("class") or "").split() if key == "class_" else attrs.get(key) == value
            for key, value in wanted.items())]


@pytest.fixture
def data_dir(tmp_path: Path) -> DataDir:
    """A copy of the release's data dir, each path with the permission bits that release gave it."""
    root = tmp_path / "data"
    shutil.copytree(FIXTURE / "data", root)
    for relative, mode in KNOWN["modes"].items():
        os.chmod(root / relative, int(mode, 8))
    return DataDir(root)


@pytest.fixture(autouse=True)
def _release_secrets_never_shown(hidden_secrets: list[str]) -> None:
    """The fixture's password, API tokens and model key join the stored token in the suite's leak check."""
    hidden_secrets.extend([KNOWN["password"], *KNOWN["api_tokens"].values(), KNOWN["model_api_key"]])


@pytest.fixture
def release_ha() -> Iterator[StubHomeAssistant]:
    """A Home Assistant at the release's saved origin, its certificate from the stored CA, its token the stored one."""
    port = urlsplit(KNOWN["base_url"]).port
    assert port is not None
    with StubHomeAssistant(certfile=str(FIXTURE / "tls" / "server.pem"), keyfile=str(FIXTURE / "tls" / "server.key"),
                           port=port) as stub:
        stub.token = KNOWN["access_token"]
        assert stub.base_url == KNOWN["base_url"]
        yield stub


def open_console(data_dir: DataDir, recorded: list[bytes], **config: Any) -> Flask:
    """The Console's app on the copy, as `console-ha serve` opens it; its clients record every response."""
    app = create_app(data_dir, {**TEST_CONFIG, **config, "RECORDED_RESPONSES": recorded})
    app.test_client_class = RecordingClient
    return app


def household(app: Flask) -> FlaskClient:
    """The household's browser, logged in with the release's password, sending the page's CSRF token."""
    client = app.test_client()
    assert log_in(client, KNOWN["password"]).status_code == 302
    client.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(client)
    return client


def program(app: Flask, token: str) -> FlaskClient:
    """Another program, sending one of the release's API tokens."""
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client


def files_of(data_dir: DataDir) -> dict[str, bytes]:
    """Every file of the data dir, by its path inside it, with its bytes."""
    root = data_dir.root
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in root.rglob("*") if path.is_file()}


def repeat_the_result(request: dict[str, Any]) -> dict[str, Any]:
    """A model step that answers with the read's result as it was given (JSON), for the test to look into."""
    return text([m for m in request["messages"] if m.get("role") == "tool"][-1]["content"])


def audit_lines() -> list[dict[str, Any]]:
    """The release's audit log, line by line."""
    text = (FIXTURE / "data" / "capabilities" / "audit.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def release_events() -> list[tuple[str, str, str | None]]:
    """The release's audit lines as Activity lists them: newest first, each its event, capability and code."""
    return [(line["event"], line["capability"], line.get("code")) for line in reversed(audit_lines())]


def activity_events(client: FlaskClient) -> list[tuple[str | None, str | None, str | None]]:
    """The events the Activity page shows, in its order: each card's event, capability and code."""
    page = client.get("/activity").get_data(as_text=True)
    return [(card.get("data-event"), card.get("data-capability"), card.get("data-code"))
            for card in _Tags(page).having("li", class_="event-card")]


def test_opening_and_looking_rewrites_none_of_the_release_s_files(data_dir: DataDir, recorded_responses: list[bytes]):
    """A start, a login and every page read leave each file as the release wrote it (the login's session aside)."""
    before = files_of(data_dir)
    client = household(open_console(data_dir, recorded_responses))
    for path in (API, API + "/instances", API + "/ca-certificate", "/api/v1/conversation/model",
                 "/settings/home-assistant", "/settings/api-tokens", "/settings/model", "/activity", "/conversation",
                 "/confirmations"):
        assert client.get(path).status_code == 200, path
    after = files_of(data_dir)
    assert sorted(set(before) - set(after)) == [], "opening lost files of the release"
    # A file written beside the release's (a migration) would mean its data dir no longer works as it is.
    assert sorted(set(after) - set(before)) == [], "opening wrote new files into the release's data dir"
    assert [path for path in before if after[path] != before[path]] == [SESSIONS]


# Without the query, and naming the instance the release's Home Assistant is from issue 29 on (`home`).
@pytest.mark.parametrize("query", ["", "?instance=home"])
def test_the_settings_api_answers_what_the_release_saved(data_dir: DataDir, recorded_responses: list[bytes],
                                                         query: str):
    """The same URL, switch, token (by its origin only) and allowlist with the entities' names."""
    settings = household(open_console(data_dir, recorded_responses)).get(API + query).get_json()
    assert settings["base_url"] == KNOWN["base_url"] and settings["enabled"] is True
    assert settings["has_access_token"] is True and settings["access_token_origin"] == KNOWN["base_url"]
    assert settings["allowlisted_entities"] == list(KNOWN["allowlist"])
    assert settings["entity_names"] == KNOWN["allowlist"]
    assert settings["config_error"] is None


def test_the_instances_list_is_the_release_s_home_assistant_alone(data_dir: DataDir,
                                                                   recorded_responses: list[bytes]):
    """`GET .../instances`: exactly `home`, called "Home", with the release's URL, switch, token and allowlist."""
    listed = household(open_console(data_dir, recorded_responses)).get(API + "/instances").get_json()
    assert listed == {"instances": [{
        "id": "home", "name": "Home", "base_url": KNOWN["base_url"], "enabled": True, "has_access_token": True,
        "allowlisted_entities": list(KNOWN["allowlist"]), "config_error": None,
    }]}


def test_the_settings_page_shows_the_allowlist_and_the_ca(data_dir: DataDir, recorded_responses: list[bytes]):
    """Without JavaScript, the page offers the allowlisted entities checked, by name, and describes the stored CA."""
    page = household(open_console(data_dir, recorded_responses)).get("/settings/home-assistant").get_data(as_text=True)
    checked = {attrs["value"]: attrs.get("data-name") for attrs in _Tags(page).having("input", type="checkbox")
               if "checked" in attrs and "data-name" in attrs}
    assert checked == KNOWN["allowlist"]
    assert re.search(r'class="ca-cert__subject[^"]*">[^<]*CN=Test household CA<', page)


def test_the_release_s_password_logs_in_and_no_other(data_dir: DataDir, recorded_responses: list[bytes]):
    """The password `console-ha set-password` stored logs the household in; a wrong one does not."""
    app = open_console(data_dir, recorded_responses)
    assert log_in(app.test_client(), KNOWN["password"] + "!").status_code != 302
    client = household(app)
    assert client.get("/settings/home-assistant").status_code == 200


@pytest.mark.parametrize("name", ["kitchen-tablet", "backup-script"])
def test_each_api_token_of_the_release_lets_its_program_in(data_dir: DataDir, recorded_responses: list[bytes],
                                                           name: str):
    """A token `console-ha api-token create` printed then still answers for its program; a changed one is refused."""
    app = open_console(data_dir, recorded_responses)
    token = KNOWN["api_tokens"][name]
    assert program(app, token).get("/api/v1/confirmations").get_json() == {"pending": []}
    assert program(app, token[:-1] + ("A" if token[-1] != "A" else "B")).get("/api/v1/confirmations").status_code == 401


def test_the_api_tokens_page_lists_both_with_their_patience(data_dir: DataDir, recorded_responses: list[bytes]):
    """The household still sees each program's token by its name, with the patience it was made with."""
    page = household(open_console(data_dir, recorded_responses)).get("/settings/api-tokens").get_data(as_text=True)
    tags = _Tags(page)
    # Each token's patience field, and its save button named for the token, in the page's order.
    patience = [attrs["value"] for attrs in tags.having("input", name="patience")]
    names = [(attrs.get("aria-label") or "").removeprefix("Save patience of ") for attrs in tags.having("button")
             if (attrs.get("aria-label") or "").startswith("Save patience of ")]
    shown = {name: int(value or 0) for name, value in zip(names, patience, strict=True)}
    assert shown == {"kitchen-tablet": 30, "backup-script": 5}


def test_the_ca_certificate_is_still_shown(data_dir: DataDir, recorded_responses: list[bytes]):
    """The household's CA, stored by the release's CA page, is described as before."""
    shown = household(open_console(data_dir, recorded_responses)).get(API + "/ca-certificate").get_json()
    assert shown["stored"] is True and shown["readable"] is True and not shown["managed_by_file"]
    [certificate] = shown["certificates"]
    assert certificate["kind"] == "ca" and "Test household CA" in certificate["subject"]


def test_activity_shows_every_event_of_the_release_s_audit_log(data_dir: DataDir, recorded_responses: list[bytes]):
    """Each old line is an event on the Activity page, newest first, with its capability and code."""
    client = household(open_console(data_dir, recorded_responses))
    assert activity_events(client) == release_events()
    page = client.get("/activity").get_data(as_text=True)
    assert f"{len(audit_lines())} events in the log in all." in page
    assert "kitchen-tablet" in page  # the program that asked for one of the reads


def test_the_model_settings_and_language_are_kept(data_dir: DataDir, recorded_responses: list[bytes]):
    """The saved model server, model and key are there; the saved English wins over a browser asking for French."""
    client = household(open_console(data_dir, recorded_responses))
    model = client.get("/api/v1/conversation/model").get_json()
    assert (model["base_url"], model["model"], model["has_api_key"]) == (
        KNOWN["model"]["base_url"], KNOWN["model"]["model"], True)
    page = client.get("/activity", headers={"Accept-Language": "fr"}).get_data(as_text=True)
    assert '<html lang="en"' in page and "Latest events" in page


def test_a_read_goes_with_the_stored_token_to_the_release_s_home_assistant(
        data_dir: DataDir, recorded_responses: list[bytes], release_ha: StubHomeAssistant, model: FakeModel):
    """Proposed, allowed and run over https (the stored CA), the token sent there alone; the old log kept, added to."""
    app = open_console(data_dir, recorded_responses, CONSOLE_HA_LLM_URL=model.url, CONSOLE_HA_LLM_MODEL="fake-model",
                       CONSOLE_HA_LLM_TIMEOUT=5)
    client = household(app)
    model.script(tool_call("home_assistant__get_state", {"entity_id": "sensor.living_room_temperature"}),
                 repeat_the_result)
    paused = client.post("/api/v1/conversation/message", json={"message": "How warm is the living room?"}).get_json()
    card = paused["pending_confirmation"]
    assert card["arguments"] == {"entity_id": "sensor.living_room_temperature"}
    assert "Living room temperature" in card["card"]["title"] + card["card"]["body"]
    assert release_ha.requests == []  # nothing is read before the household allows it
    done = client.post("/api/v1/conversation/message", json={
        "conversation_id": paused["conversation_id"], "confirmation": {"token": card["token"], "approve": True}})
    result = json.loads(done.get_json()["reply"])
    assert (result["entity_id"], result["state"]) == ("sensor.living_room_temperature", "21.4")
    read = release_ha.requests_to("/api/states/sensor.living_room_temperature")
    assert [r.headers.get("Authorization") for r in read] == [f"Bearer {KNOWN['access_token']}"]
    assert KNOWN["access_token"] not in model.seen()
    # Activity: this read's events, newest first, above every one of the release's, all kept.
    events = activity_events(client)
    assert events[0] == ("executed", "home_assistant.get_state", None)
    assert events[-len(audit_lines()):] == release_events()
