"""A token-leak sweep: one whole session with a distinctive token through every settings route and error.

The token may appear in exactly two places: the `Authorization` header of a request to its own Home
Assistant, and the `auth` message of the WebSocket to it. Not in a response, a page, a log line, a
file beside the token file, the audit log, or anything sent to another origin (REST or WebSocket).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from flask import Flask
from flask.testing import FlaskClient

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.ha.discovery import Instance
from console_ha.store.datadir import DataDir
from console_ha.web.error_responses import status_for
from tests.executors import executor_over
from tests.seed import hand_edit
from tests.stub_ha import StubHomeAssistant

from .conftest import API, page_csrf

PAGE = "/settings/home-assistant"


def _only_where_it_belongs(stub: StubHomeAssistant, token: str) -> int:
    """The token in `stub`'s traffic only as `Authorization: Bearer <token>` or the WebSocket `auth`; how often."""
    seen = 0
    for request in stub.requests:
        assert token not in request.path and token not in json.dumps(request.query)
        for name, value in request.headers.items():
            if token in value:
                assert (name.lower(), value) == ("authorization", f"Bearer {token}")
                seen += 1
    for text in stub.ws_messages:
        if token in text:
            assert json.loads(text) == {"type": "auth", "access_token": token}
            seen += 1
    return seen


def test_a_whole_session_shows_the_token_nowhere_but_to_its_own_home_assistant(
    app: Flask, household: FlaskClient, client: FlaskClient, bearer: FlaskClient, data_dir: DataDir,
    two_homes: tuple[StubHomeAssistant, StubHomeAssistant], hidden_secrets: list[str],
    recorded_responses: list[bytes], caplog: Any,
) -> None:
    home, rogue = two_homes
    rogue.rogue = True  # takes any token and prints it back as its name
    token = f"canary-{secrets.token_urlsafe(24)}-LEAK"
    home.token = token
    rogue.refuse_tokens_of(home)
    typed_wrong = f"wrong-{secrets.token_urlsafe(12)}"
    hidden_secrets.extend([token, typed_wrong])
    app.extensions["console_ha"].settings.discover = lambda **kwargs: [Instance("Home", rogue.base_url, "2025.4.4")]
    statuses: list[tuple[str, int]] = []

    def call(label: str, response: Any) -> Any:
        statuses.append((label, response.status_code))
        return response

    # The first visit, the first save, and everything a configured Console answers.
    call("page, empty", household.get(PAGE))
    call("save", household.post(API, json={"base_url": home.base_url, "access_token": token, "enabled": True,
                                          "allowlisted_entities": ["light.living_room"]}))
    call("settings", household.get(API))
    call("page", household.get(PAGE))
    call("picker", household.get(f"{API}/entities"))
    call("discover", household.get(f"{API}/discover"))
    call("test, stored", household.post(f"{API}/test"))
    call("test, stored, the URL typed", household.post(f"{API}/test", json={"base_url": home.base_url}))

    # The rogue instance, every way the page could offer it the stored token.
    call("test, rogue", household.post(f"{API}/test", json={"base_url": rogue.base_url}))
    call("test, rogue, empty token", household.post(f"{API}/test", json={"base_url": rogue.base_url,
                                                                        "access_token": ""}))
    call("save, rogue", household.post(API, json={"base_url": rogue.base_url}))
    call("form, rogue", household.post(PAGE, data={"csrf_token": page_csrf(household),
                                                   "base_url": rogue.base_url, "enabled": "on"}))

    # Error paths.
    call("save, bad token", household.post(API, json={"access_token": "has a space"}))
    call("save, bad URL", household.post(API, json={"base_url": "ftp://x"}))
    call("save, stale", household.post(API, json={"enabled": False, "revision": "0" * 16}))
    call("test, wrong typed token", household.post(f"{API}/test", json={"base_url": home.base_url,
                                                                       "access_token": typed_wrong}))
    for fault in ("500", "drop", "invalid_json", "401"):
        home.fault(fault, "/api/states")
        call(f"picker, HA {fault}", household.get(f"{API}/entities"))
        home.clear_faults()
    home.fault("500", "/api/config")
    call("test, HA 500", household.post(f"{API}/test"))
    home.clear_faults()
    call("unauthenticated settings", client.get(API))
    call("unauthenticated test", client.post(f"{API}/test", json={"base_url": rogue.base_url}))
    call("bearer settings (refused)", bearer.get(API))

    # The capabilities, approved, as the conversation page runs them.
    executor = executor_over(data_dir)
    for name, args in ((LIST_ENTITIES, {}), (GET_HISTORY, {"entity_id": "light.living_room", "period": "day"})):
        proposal = executor.propose(name, args, conversation_id="sweep")
        executor.answer(proposal.token, approve=True, conversation_id="sweep")

    # A file that names the rogue (a hand edit, a crash of an older release): every path withholds the token.
    hand_edit(data_dir, {"base_url": rogue.base_url})  # a save would refuse it
    call("picker, URL of the rogue", household.get(f"{API}/entities"))
    call("test, URL of the rogue", household.post(f"{API}/test"))
    call("page, URL of the rogue", household.get(PAGE))
    proposal_error = None
    try:
        executor.propose(LIST_ENTITIES, {}, conversation_id="sweep-2")
    except Exception as err:  # the refusal itself is checked below
        proposal_error = err
    assert proposal_error is not None and token not in repr(proposal_error) and token not in str(proposal_error)

    # A damaged file, its reset, and forgetting the token.
    data_dir.ha_config.write_text("{broken")
    call("settings, broken file", household.get(API))
    call("page, broken file", household.get(PAGE))
    call("reset", household.post(API, json={"reset": True, "base_url": home.base_url}))
    beside = [p for p in data_dir.root.rglob("*") if p.is_file() and p != data_dir.ha_token]
    call("forget", household.post(API, json={"remove_access_token": True}))

    # Every route answered, none with a server error of its own.
    assert all(status < 500 or status == status_for("HA_BAD_RESPONSE") for _label, status in statuses), statuses
    answered = dict(statuses)
    assert {label: answered[label] for label in ("save", "picker", "test, stored", "reset", "forget")} == {
        "save": 200, "picker": 200, "test, stored": 200, "reset": 200, "forget": 200}
    assert {label: answered[label] for label in ("test, rogue", "save, rogue", "form, rogue",
                                                 "picker, URL of the rogue", "test, URL of the rogue")} == {
        "test, rogue": 400, "save, rogue": 400, "form, rogue": 400, "picker, URL of the rogue": 409,
        "test, URL of the rogue": 400}

    # Nowhere in what the Console said, logged or kept beside the token file.
    assert all(token.encode() not in raw for raw in recorded_responses)
    assert token not in caplog.text
    assert all(token.encode() not in path.read_bytes() for path in beside)
    assert data_dir.audit_log.exists() and token not in data_dir.audit_log.read_text()

    # On the wire: never to the rogue (REST or WebSocket), and to home only where it belongs.
    assert [r.path for r in rogue.requests] == [] and len(rogue.ws_messages) == 0
    assert _only_where_it_belongs(home, token) >= 5
    assert any(json.loads(m).get("type") == "auth" for m in home.ws_messages)
