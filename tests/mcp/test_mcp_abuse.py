"""A program's requests to `/mcp`, however reused, hostile or malformed: each is answered, no thread is kept.

Raw HTTP on loopback against waitress, as a program that does not use the SDK's client would send it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.store.audit import AuditLog
from console_ha.web.mcp_endpoint import MAX_NESTING
from tests.mcp.conftest import ServedConsole, wait_until_idle
from tests.mcp.test_mcp_http import HISTORY, LIST, household_answers, pending_cards, run

ENTITY = "sensor.living_room_temperature"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def open_session(console: ServedConsole, token: str) -> dict[str, str]:
    """Initialise an MCP session by hand; the headers that send a request in it."""
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}",
               "Content-Type": "application/json"}
    opened = requests.post(console.mcp_url, json=INITIALIZE, headers=headers, timeout=5)
    assert opened.status_code == 200
    in_session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"],
                  "mcp-protocol-version": "2025-06-18"}
    requests.post(console.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers=in_session, timeout=5)
    return in_session


def call(request_id: Any, tool: str = LIST, *, progress: bool = False) -> dict[str, Any]:
    """A tools/call; with `progress`, one that asks for progress (so a hang-up shows at the next write)."""
    arguments = {"entity_id": ENTITY, "period": "day"} if tool == HISTORY else {}
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if progress:
        params["_meta"] = {"progressToken": 1}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def ping(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


@pytest.mark.parametrize("reused", ["1", 1.0, True], ids=["string", "float", "true"])
def test_an_id_in_flight_is_refused_in_any_json_form_and_every_response_is_delivered(
        configured, api_token, household, reused):
    """The SDK keys a response by str(id): `"1"` (and `1.0`, `true`, which it would take as a notification)
    while `1` waits must be refused, or the waiting call's answer is lost and its worker thread kept."""
    in_session = open_session(configured, api_token)

    async def scenario() -> tuple[requests.Response, requests.Response]:
        waiting = asyncio.create_task(anyio.to_thread.run_sync(lambda: requests.post(
            configured.mcp_url, json=call(1), headers=in_session, timeout=15)))
        card = (await pending_cards(configured, household))[0]
        again = await anyio.to_thread.run_sync(lambda: requests.post(
            configured.mcp_url, json=ping(reused), headers=in_session, timeout=5))
        await household_answers(configured, household, card["token"], False)
        return again, await asyncio.wait_for(waiting, 15)

    again, answered = run(scenario)
    assert again.status_code == 400
    assert again.json()["error"]["code"] == "INVALID_REQUEST"
    assert answered.status_code == 200 and "CONFIRMATION_DENIED" in answered.text
    assert wait_until_idle(configured) == (0, 0, 0)


@pytest.mark.parametrize("request_id", [1.5, None, [1], {"id": 1}, False])
def test_a_request_whose_id_is_not_a_string_or_an_integer_is_refused(console, api_token, request_id):
    """MCP ids are strings or integers; the SDK would silently take anything else as a notification."""
    in_session = open_session(console, api_token)
    answer = requests.post(console.mcp_url, json=ping(request_id), headers=in_session, timeout=5)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "INVALID_REQUEST"


def test_one_token_s_sixteen_sessions_reusing_ids_leave_every_worker_thread_free(make_console, api_token,
                                                                                household_for, stub_ha):
    """The probe's load: one token, 16 sessions, ids reused in every form, cards never answered, and some
    clients hanging up mid-call. Pages keep answering, and once the cards expire no thread is held."""
    console = make_console(CONSOLE_HA_CONFIRMATION_TTL=1.0)
    console.configure(stub_ha.base_url, stub_ha.token)
    sessions = [open_session(console, api_token) for _ in range(16)]

    def post(in_session: dict[str, str], message: dict[str, Any]) -> int:
        try:
            return requests.post(console.mcp_url, json=message, headers=in_session, timeout=3).status_code
        except requests.Timeout:
            return 0  # a call waiting for its card longer than this client cares to

    def abuse(in_session: dict[str, str], round_no: int) -> list[int]:
        with ThreadPoolExecutor(max_workers=1) as background:
            waiting = background.submit(post, in_session, call(1))
            time.sleep(0.2)  # the call is in flight (and may hold the token's one card for its tool)
            statuses = [post(in_session, message) for message in (
                ping("1"), call("1", HISTORY), ping(1.0), ping(True), call(round_no, HISTORY))]
            hang_up_mid_call(console, in_session, call(1000 + round_no, HISTORY))
            return [*statuses, waiting.result()]

    with ThreadPoolExecutor(max_workers=16) as pool:
        for round_no in range(3):
            answered = list(pool.map(abuse, sessions, [round_no] * len(sessions)))
            assert all(status < 500 for statuses in answered for status in statuses)
            health = requests.get(console.url + "/health", timeout=5)
            assert health.status_code == 200
    assert wait_until_idle(console, timeout=20) == (0, 0, 0)
    assert requests.get(console.url + "/login", timeout=5).status_code == 200
    household = household_for(console)
    assert household.get(console.url + "/api/v1/confirmations", timeout=5).json() == {"pending": []}


def test_a_client_that_hangs_up_mid_call_holds_nothing_once_its_card_expires(make_console, api_token,
                                                                              household_for, stub_ha):
    """A dropped connection is not a cancellation: the card waits on, but once it has expired neither a
    worker thread nor the request's task on the event loop (nor its id) is held."""
    # Progress every 0.3 s: a write after the hang-up fails while the call still waits for its card.
    console = make_console(CONSOLE_HA_CONFIRMATION_TTL=3.0, CONSOLE_HA_MCP_PROGRESS_INTERVAL=0.3)
    console.configure(stub_ha.base_url, stub_ha.token)
    household = household_for(console)
    in_session = open_session(console, api_token)
    hang_up_mid_call(console, in_session, call(5, HISTORY, progress=True))
    assert len(run(lambda: pending_cards(console, household))) == 1
    assert wait_until_idle(console, timeout=15) == (0, 0, 0)
    assert requests.post(console.mcp_url, json=ping(5), headers=in_session, timeout=5).status_code == 200


def test_a_call_whose_client_hung_up_ends_and_frees_its_id_and_its_approval_reads_nothing(
        make_console, api_token, household_for, stub_ha):
    """A hang-up is seen (waitress keeps reading the connection): the call detaches from its card and ends,
    so its id is free again and nothing can route its answer to a newer request; the household's later
    "Allow" reads nothing (issue 20: read only for a live call), and the request now holding the id gets
    its own answer."""
    console = make_console(CONSOLE_HA_MCP_PROGRESS_INTERVAL=30)
    console.configure(stub_ha.base_url, stub_ha.token)
    household = household_for(console)
    in_session = open_session(console, api_token)
    hang_up_mid_call(console, in_session, call(1, HISTORY))  # no progress: only the hang-up can end it
    assert wait_until_idle(console) == (0, 0, 0), "the call whose client hung up is still running"

    async def scenario() -> requests.Response:
        again = asyncio.create_task(anyio.to_thread.run_sync(lambda: requests.post(
            console.mcp_url, json=call(1, LIST), headers=in_session, timeout=15)))
        await asyncio.sleep(0.5)
        cards = await anyio.to_thread.run_sync(
            lambda: household.get(console.url + "/api/v1/confirmations", timeout=5).json()["pending"])
        assert sorted(card["capability"] for card in cards) == ["home_assistant.get_history",
                                                                "home_assistant.list_entities"]
        # The hung-up history call's card is approved first: no live call is attached to it.
        for card in sorted(cards, key=lambda card: card["capability"] != "home_assistant.get_history"):
            answer = await household_answers(console, household, card["token"],
                                             card["capability"] == "home_assistant.get_history")
            if card["capability"] == "home_assistant.get_history":
                assert answer.json()["message"].startswith("Allowed; the program will get it when it asks again")
        return await asyncio.wait_for(again, 15)

    again = run(scenario)
    assert again.status_code == 200 and '"CONFIRMATION_DENIED"' in again.text, again.text[:300]
    assert stub_ha.requests_to("/api/history") == []
    assert [e["event"] for e in AuditLog(console.data_dir).events()
            if e["capability"] == "home_assistant.get_history"][-1] == "held"
    assert wait_until_idle(console) == (0, 0, 0)


def hang_up_mid_call(console: ServedConsole, in_session: dict[str, str], message: dict[str, Any]) -> None:
    """Send `message`, then close the socket once the response has started or half a second has passed."""
    body = json.dumps(message).encode()
    host, port = console.url.removeprefix("http://").split(":")
    lines = "".join(f"{name}: {value}\r\n" for name, value in in_session.items())
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n{lines}Content-Length: {len(body)}\r\n\r\n"
                    .encode() + body)
        raw.settimeout(0.5)
        with contextlib.suppress(TimeoutError):  # a waiting call sends nothing before its first event
            raw.recv(64)



# --- malformed bodies: always a 4xx ---------------------------------------------------------------------

VALID = [INITIALIZE, ping(9), call(10), call(11, HISTORY), {"jsonrpc": "2.0", "method": "notifications/initialized"},
         {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10}},
         {"jsonrpc": "2.0", "id": 12, "method": "tools/list"}]


def post_raw(console: ServedConsole, headers: dict[str, str], body: bytes) -> requests.Response:
    return requests.post(console.mcp_url, data=body, headers=headers, timeout=10)


def nested_lists(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


MALFORMED = {
    "nested 50,000 deep": b"[" * 50_000 + b"]" * 50_000,
    "nested objects 20,000 deep": b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
    "nested 2,000 deep inside a request": (b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":'
                                           + b"[" * 2_000 + b"]" * 2_000 + b"}}"),
    "nested one past the bound": json.dumps({**ping(3), "params": {"x": nested_lists(MAX_NESTING - 1)}}).encode(),
    "NaN": b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{"a":NaN}}}',
    "1e999": b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{"a":1e999}}}',
    "the byte 0xff": b'{"jsonrpc":"2.0","id":3,"method":"ping"}\xff',
    "a lone 0xff": b"\xff",
    "UTF-16": json.dumps(ping(3)).encode("utf-16"),
    "an integer of 5,000 digits": b'{"jsonrpc":"2.0","id":' + b"9" * 5_000 + b',"method":"ping"}',
    "a lone surrogate": b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
    "truncated": json.dumps(call(3)).encode()[:-7],
    "empty": b"",
    "a batch": json.dumps([ping(3), ping(4)]).encode(),
    "past the MCP bound (64 KiB)": b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"' + b"a" * 70_000 + b'"}}',
    "past the Console's bound (1 MiB)": b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"' + b"a" * 2_000_000
                                        + b'"}}',
}


@pytest.mark.parametrize("name", MALFORMED)
@pytest.mark.parametrize("in_a_session", [False, True], ids=["no session", "in a session"])
def test_a_malformed_body_gets_a_4xx_never_a_5xx(console, api_token, name, in_a_session):
    headers = open_session(console, api_token) if in_a_session else {
        "Accept": "application/json, text/event-stream", "Authorization": f"Bearer {api_token}",
        "Content-Type": "application/json"}
    answer = post_raw(console, headers, MALFORMED[name])
    assert 400 <= answer.status_code < 500, (name, answer.status_code, answer.text[:200])
    # The contract's {"error": {"code", "message"}} where the Console answers, the SDK's JSON-RPC error else.
    assert set(answer.json()["error"]) >= {"code", "message"}
    assert requests.get(console.url + "/health", timeout=5).status_code == 200
    assert wait_until_idle(console) == (0, 0, 0)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
METHODS = st.sampled_from(["ping", "initialize", "tools/list", "tools/call", "notifications/initialized",
                           "notifications/cancelled", "resources/list"]) | st.text(max_size=12)
MESSAGES = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0"]), "method": METHODS},
    optional={"id": JSON_VALUES, "params": JSON_VALUES | st.fixed_dictionaries(
        {"name": st.sampled_from([LIST, HISTORY, "x"]), "arguments": JSON_VALUES})})


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Bytes as a hostile or broken client might send them."""
    kind = draw(st.sampled_from(["bytes", "json", "message", "deep", "bad utf-8", "truncated"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300))
    if kind == "json":
        return json.dumps(draw(JSON_VALUES)).encode()
    if kind == "message":
        return json.dumps(draw(MESSAGES)).encode()
    if kind == "deep":
        depth = draw(st.integers(1, 60_000))
        opening, closing = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        return opening * depth + b"0" + closing * depth
    valid = json.dumps(draw(st.sampled_from(VALID))).encode()
    cut = draw(st.integers(0, len(valid) - 1))
    if kind == "truncated":
        return valid[:cut]
    return valid[:cut] + bytes([draw(st.integers(0x80, 0xff))]) + valid[cut:]


def test_any_body_gets_an_answer_below_500_and_the_console_goes_on(console, api_token):
    """Fuzzed: bytes, JSON, JSON-RPC-shaped messages, deep nesting, bad UTF-8 and truncated messages, with no
    session id, a live one and an unknown one. (The Console is not configured: no call waits for a card.)"""
    plain = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {api_token}",
             "Content-Type": "application/json"}
    sessions = {"none": plain, "live": open_session(console, api_token),
                "unknown": {**plain, "mcp-session-id": "0" * 32, "mcp-protocol-version": "2025-06-18"}}
    seen: list[int] = []

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(body=bodies(), session=st.sampled_from(sorted(sessions)))
    def answered_below_500(body: bytes, session: str) -> None:
        answer = post_raw(console, sessions[session], body)
        seen.append(answer.status_code)
        assert answer.status_code < 500, (answer.status_code, answer.text[:300])

    answered_below_500()
    assert any(400 <= status < 500 for status in seen)
    assert requests.get(console.url + "/health", timeout=5).status_code == 200
    assert wait_until_idle(console) == (0, 0, 0)


def test_a_message_nested_to_the_bound_is_the_sdk_s_to_answer(console, api_token):
    in_session = open_session(console, api_token)
    deepest = {**ping(3), "params": {"x": nested_lists(MAX_NESTING - 2)}}
    assert requests.post(console.mcp_url, json=deepest, headers=in_session, timeout=5).status_code == 200
