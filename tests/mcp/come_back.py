"""The four cases of issue 20, for any MCP program (sdk_clients) and any Home Assistant (stub or real).

Each takes the served Console, the household's browser, the program's API token, which SDK, and
`traffic()`: how much the Console has sent Home Assistant so far (requests to the stub; bytes through the
recording proxy in front of the real one, whose history is read over WebSocket). Any read grows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests

from console_ha.answers.household_queue import ALLOWED_LATER, ALLOWED_NOW
from console_ha.conversation.activity import EVENT_WORDS
from console_ha.store.audit import AuditEvent, AuditLog
from tests.mcp.conftest import ServedConsole, wait_until_idle
from tests.mcp.sdk_clients import Program, start_program

HISTORY_TOOL = "home_assistant_get_history"
LIST_TOOL = "home_assistant_list_entities"
Traffic = Callable[[], int]


def cards(console: ServedConsole, household: requests.Session, count: int = 1, timeout: float = 30) -> list[Any]:
    """The household's waiting cards, once there are `count`."""
    deadline = time.monotonic() + timeout
    while True:
        pending = household.get(console.url + "/api/v1/confirmations", timeout=5).json()["pending"]
        if len(pending) == count:
            return list(pending)
        assert time.monotonic() < deadline, f"expected {count} cards, have {len(pending)}"
        time.sleep(0.1)


def answer(console: ServedConsole, household: requests.Session, token: str, approve: bool) -> dict[str, Any]:
    """The household answers one card on the Console."""
    reply = household.post(console.url + f"/api/v1/confirmations/{token}", json={"approve": approve}, timeout=10)
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def structured(line: dict[str, Any]) -> dict[str, Any]:
    content: dict[str, Any] = line["result"]["structuredContent"]
    return content


def audit_events(console: ServedConsole, capability: str) -> list[str]:
    return [e["event"] for e in AuditLog(console.data_dir).events() if e["capability"] == capability]


def allowed_at_once(console: ServedConsole, household: requests.Session, token: str, sdk: str,
                    entity: str) -> dict[str, Any]:
    """The household allows at once: the program's one call gets the read."""
    program = start_program(sdk, console.mcp_url, token, HISTORY_TOOL, {"entity_id": entity, "period": "day"})
    try:
        (card,) = cards(console, household)
        assert answer(console, household, card["token"], True) == {"status": "approved", "message": ALLOWED_NOW}
        line = program.next_result(60)
        assert line["waiting"] is False and line["call"] == 0 and not line["result"].get("isError")
        assert program.next_result(30) == {"done": True}
        return structured(line)
    finally:
        program.process.kill()


def allowed_late(console: ServedConsole, household: requests.Session, token: str, sdk: str, entity: str,
                 late: float, patience: float, traffic: Traffic) -> dict[str, Any]:
    """The household allows after `late` seconds, past the program's patience: its call returned early,
    not as an error, and the same call made again collects the read (read once, for that call)."""
    started, before = time.monotonic(), traffic()
    program = start_program(sdk, console.mcp_url, token, HISTORY_TOOL, {"entity_id": entity, "period": "day"},
                            max_calls=1000)
    try:
        (card,) = cards(console, household)
        first = program.next_result(patience + 30)
        assert first["waiting"] is True and not first["result"].get("isError"), first
        waiting = structured(first)["waiting_for_household"]
        assert waiting["expires_at"] == card["expires_at"]
        assert "same call again" in waiting["message"] and card["expires_at"] in waiting["message"]
        assert first["seconds"] < patience + 5  # real time: the patience of a real SDK client's call, timed there
        assert traffic() == before  # nothing read while nobody has said yes
        # The program's second call joined the same card: still one card, and no new one.
        time.sleep(max(0.0, late - (time.monotonic() - started)))
        assert [c["token"] for c in cards(console, household)] == [card["token"]]
        assert answer(console, household, card["token"], True)["status"] == "approved"
        second = program.next_result(60)
        while second["waiting"]:  # a call that returned just before the answer; the next one collects it
            assert "same call again" in structured(second)["waiting_for_household"]["message"]
            second = program.next_result(60)
        assert second["call"] >= 1 and not second["result"].get("isError"), second
        assert program.next_result(30) == {"done": True}
        assert traffic() > before
        return structured(second)
    finally:
        program.process.kill()


def denied(console: ServedConsole, household: requests.Session, token: str, sdk: str, traffic: Traffic) -> None:
    """The household denies: CONFIRMATION_DENIED as a tool error, and nothing read."""
    before = traffic()
    program = start_program(sdk, console.mcp_url, token, LIST_TOOL, {})
    try:
        (card,) = cards(console, household)
        assert answer(console, household, card["token"], False)["status"] == "denied"
        line = program.next_result(60)
        assert line["result"]["isError"] is True
        assert structured(line)["error"]["code"] == "CONFIRMATION_DENIED"
        assert traffic() == before
    finally:
        program.process.kill()


def killed_then_allowed(console: ServedConsole, household: requests.Session, token: str, sdk: str, entity: str,
                        traffic: Traffic, activity: bool = True) -> Program:
    """The program is killed while its call waits; the household then allows its card: nothing is read,
    the Console says the read waits for the program, and Activity says what happened."""
    program = start_program(sdk, console.mcp_url, token, HISTORY_TOOL, {"entity_id": entity, "period": "day"})
    (card,) = cards(console, household)
    program.kill()
    before = traffic()
    # The Console sees the hang-up (waitress reads the connection) and the call lets go of its card.
    assert wait_until_idle(console) == (0, 0, 0)
    assert answer(console, household, card["token"], True) == {"status": "approved", "message": ALLOWED_LATER}
    time.sleep(2)
    assert traffic() == before
    events = audit_events(console, "home_assistant.get_history")
    assert events[-1] == "held" and "executed" not in events and "approved" not in events
    if activity:
        page = household.get(console.url + "/activity", timeout=10).text
        assert EVENT_WORDS[AuditEvent.HELD] in page
    return program


def abandoned_at_expiry(console: ServedConsole, household: requests.Session, traffic: Traffic,
                        timeout: float) -> None:
    """The held read's card expires with its program gone: audited `abandoned`, nothing read, and said so."""
    before = traffic()
    deadline = time.monotonic() + timeout
    while "abandoned" not in audit_events(console, "home_assistant.get_history"):
        assert time.monotonic() < deadline, "the held card was not abandoned at its expiry"
        household.get(console.url + "/api/v1/confirmations", timeout=5)  # any look at the queue sweeps it
        time.sleep(0.5)
    assert traffic() == before
    page = household.get(console.url + "/activity", timeout=10).text
    assert EVENT_WORDS[AuditEvent.ABANDONED] in page
