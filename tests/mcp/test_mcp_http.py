"""The official MCP SDK's client against the Console's `/mcp`, over real HTTP on loopback (waitress)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import jsonschema
import mcp.types as types
import pytest
import requests
from mcp.shared.exceptions import McpError

from console_ha.answers.household_queue import ALLOWED_LATER, ALLOWED_NOW, NOT_ALLOWED
from console_ha.capabilities.cards import destination_for
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.registry import REGISTRY
from console_ha.mcp.server import output_schema, tool_name
from console_ha.store.audit import AuditLog
from console_ha.store.config import ConfigStore
from tests.async_run import run_to_end
from tests.mcp.conftest import CLIENT_NAME, ServedConsole, mcp_session, wait_until_idle
from tests.seed import seed_settings

HISTORY = "home_assistant_get_history"
LIST = "home_assistant_list_entities"
STATISTICS = "home_assistant_get_statistics"  # issue 19
ENTITY = "sensor.living_room_temperature"


def run(scenario: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run an async scenario to its end (the SDK's client is async), in a thread of its own (`run_to_end`)."""
    return run_to_end(scenario())


async def pending_cards(console: ServedConsole, household: requests.Session, count: int = 1,
                        timeout: float = 10.0) -> list[dict[str, Any]]:
    """The household's list of waiting cards, once it holds `count` of them."""
    deadline = time.monotonic() + timeout
    while True:
        answer = await anyio.to_thread.run_sync(
            lambda: household.get(console.url + "/api/v1/confirmations", timeout=5))
        assert answer.status_code == 200
        cards = answer.json()["pending"]
        if len(cards) == count:
            return cards
        assert time.monotonic() < deadline, f"expected {count} waiting cards, have {len(cards)}"
        await asyncio.sleep(0.05)


async def household_answers(console: ServedConsole, household: requests.Session, token: str,
                            approve: bool) -> requests.Response:
    return await anyio.to_thread.run_sync(lambda: household.post(
        console.url + f"/api/v1/confirmations/{token}", json={"approve": approve}, timeout=5))


def text_of(result: types.CallToolResult) -> str:
    """The text of a result's first content block (the Console's results carry their JSON as text)."""
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    """The contract's error object of an `isError` result, checked to be the same in both forms."""
    assert result.isError is True
    assert result.structuredContent is not None
    assert json.loads(text_of(result)) == result.structuredContent
    return result.structuredContent["error"]


def audit_events(console: ServedConsole) -> list[dict[str, Any]]:
    return list(AuditLog(console.data_dir).events())


def test_lists_a_tool_per_capability_with_its_schemas_and_read_only_annotations(console, api_token):
    """Names, descriptions and schemas come from the capability definitions, unchanged: one tool each.

    With a calendar, a to-do list and a weather entity allowed, every registered read can answer (issue 28).
    """
    seed_settings(console.data_dir, {"allowlisted_entities": ["sensor.living_room_temperature", "calendar.family",
                                                               "todo.shopping_list", "weather.home"]})

    async def scenario() -> types.ListToolsResult:
        async with mcp_session(console.mcp_url, api_token) as session:
            return await session.list_tools()

    listed = {tool.name: tool for tool in run(scenario).tools}
    assert {LIST, HISTORY} <= set(listed)
    # Every registered capability is a tool (issue 18's home_assistant_list_areas among them), none other.
    assert set(listed) == {tool_name(spec) for spec in REGISTRY.values()}
    assert "home_assistant_list_areas" in listed
    for spec in REGISTRY.values():
        tool = listed[tool_name(spec)]
        assert tool.description == spec.description
        assert tool.inputSchema == spec.published_arguments_schema
        assert tool.outputSchema == output_schema(spec)
        assert tool.annotations is not None
        assert tool.annotations.readOnlyHint is True and tool.annotations.openWorldHint is True


@pytest.mark.parametrize(("tool", "arguments", "code"), [
    (HISTORY, {"entity_id": "lock.front_door", "period": "day"}, "ENTITY_NOT_ALLOWLISTED"),
    (HISTORY, {"entity_id": ENTITY, "period": "year"}, "INVALID_ARGUMENTS"),
    (HISTORY, {"entity_id": ENTITY}, "INVALID_ARGUMENTS"),
    (LIST, {"anything": 1}, "INVALID_ARGUMENTS"),
    ("home_assistant_call_service", {}, "UNKNOWN_CAPABILITY"),
    # Not listed (no calendar, list or weather allowed), called by name all the same: refused before any card.
    ("home_assistant_get_calendar", {"entity_id": "calendar.family", "period": "today"}, "ENTITY_NOT_ALLOWLISTED"),
    ("home_assistant_get_todo", {"entity_id": "todo.shopping_list"}, "ENTITY_NOT_ALLOWLISTED"),
    ("home_assistant_get_forecast", {"entity_id": ENTITY, "kind": "daily"}, "INVALID_ARGUMENTS"),
])
def test_stages_one_to_three_refuse_at_once_with_no_card(configured, api_token, household, tool, arguments, code):
    """A refusal is an isError result with the contract code, before any card: nothing to wait for, and the
    household is never asked."""

    async def scenario() -> types.CallToolResult:
        async with mcp_session(configured.mcp_url, api_token) as session:
            return await session.call_tool(tool, arguments)

    assert error_of(run(scenario))["code"] == code
    assert household.get(configured.url + "/api/v1/confirmations", timeout=5).json() == {"pending": []}
    assert {e["event"] for e in audit_events(configured)} == {"proposed", "rejected"}
    assert all(e.get("client") == CLIENT_NAME for e in audit_events(configured))


def test_a_disabled_capability_is_refused_at_policy(configured, api_token):
    seed_settings(configured.data_dir, {"enabled": False})

    async def scenario() -> types.CallToolResult:
        async with mcp_session(configured.mcp_url, api_token) as session:
            return await session.call_tool(LIST, {})

    assert error_of(run(scenario))["code"] == "CAPABILITY_DISABLED"


def test_a_call_waits_for_the_household_who_approves_it_on_the_console(configured, api_token, household, stub_ha):
    """The card names the client and where the data goes; after approval the result is structured content."""
    notifications: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        # The parameter names are the SDK's ProgressFnT protocol's.
        notifications.append((progress, total, message))

    async def scenario() -> tuple[types.CallToolResult, list[dict[str, Any]], int]:
        async with mcp_session(configured.mcp_url, api_token) as session:
            call = asyncio.create_task(session.call_tool(HISTORY, {"entity_id": ENTITY, "period": "day"},
                                                         progress_callback=on_progress))
            cards = await pending_cards(configured, household)
            # Streamed through waitress while the call is still open, not buffered until its end.
            for _ in range(100):
                if notifications:
                    break
                await asyncio.sleep(0.05)
            assert notifications, "no progress notification arrived while the call waited"
            assert not call.done(), "the call must wait for the household"
            requests_before = len(stub_ha.requests_to("/api/history"))
            answer = await household_answers(configured, household, cards[0]["token"], True)
            assert answer.status_code == 200 and answer.json() == {"status": "approved", "message": ALLOWED_NOW}
            return await asyncio.wait_for(call, 15), cards, requests_before

    result, cards, requests_before = run(scenario)
    assert requests_before == 0, "nothing is read before the household approves"
    card = cards[0]
    config = ConfigStore(configured.data_dir).load()
    arguments = {"entity_id": ENTITY, "period": "day"}
    assert card["client"] == CLIENT_NAME
    assert card["capability"] == GET_HISTORY and card["arguments"] == arguments
    assert card["card"] == REGISTRY[GET_HISTORY].card(config, arguments).to_dict()
    assert card["destination"] == destination_for(CLIENT_NAME)
    assert set(card) >= {"token", "capability", "arguments", "card", "expires_at", "client"}

    assert result.isError is False
    jsonschema.validate(result.structuredContent, REGISTRY[GET_HISTORY].result_schema)
    assert json.loads(text_of(result)) == result.structuredContent
    assert result.structuredContent["entity_id"] == ENTITY

    # The client asked for progress: it heard, while waiting, where the household answers.
    assert notifications and notifications[0][2] is not None
    assert configured.url + "/confirmations" in notifications[0][2]

    events = audit_events(configured)
    assert [e["event"] for e in events] == ["proposed", "confirmation_requested", "approved", "executed"]
    assert all(e["client"] == CLIENT_NAME for e in events)
    assert ENTITY not in configured.data_dir.audit_log.read_text()
    assert stub_ha.token not in result.model_dump_json() and api_token not in configured.data_dir.audit_log.read_text()

    activity = household.get(configured.url + "/activity", timeout=5).text
    assert CLIENT_NAME in activity and ENTITY not in activity


def test_a_denied_call_returns_confirmation_denied_and_reads_nothing(configured, api_token, household, stub_ha):
    async def scenario() -> types.CallToolResult:
        async with mcp_session(configured.mcp_url, api_token) as session:
            call = asyncio.create_task(session.call_tool(LIST, {}))
            cards = await pending_cards(configured, household)
            answer = await household_answers(configured, household, cards[0]["token"], False)
            assert answer.json() == {"status": "denied", "message": NOT_ALLOWED}
            return await asyncio.wait_for(call, 15)

    assert error_of(run(scenario))["code"] == "CONFIRMATION_DENIED"
    assert stub_ha.requests_to("/api/states") == []
    assert [e["event"] for e in audit_events(configured)][-1] == "denied"


def test_the_client_cannot_approve_its_own_read(configured, api_token, household):
    """A Bearer token gets 403 FORBIDDEN at the answer endpoint; the card stays open for the household."""

    async def scenario() -> types.CallToolResult:
        async with mcp_session(configured.mcp_url, api_token) as session:
            call = asyncio.create_task(session.call_tool(LIST, {}))
            cards = await pending_cards(configured, household)
            token = cards[0]["token"]
            own = await anyio.to_thread.run_sync(lambda: requests.post(
                configured.url + f"/api/v1/confirmations/{token}", json={"approve": True},
                headers={"Authorization": f"Bearer {api_token}"}, timeout=5))
            assert own.status_code == 403
            assert own.json()["error"]["code"] == "FORBIDDEN"
            assert (await pending_cards(configured, household))[0]["token"] == token
            assert not call.done()
            await household_answers(configured, household, token, False)
            return await asyncio.wait_for(call, 15)

    assert error_of(run(scenario))["code"] == "CONFIRMATION_DENIED"


def test_an_unanswered_card_expires_and_the_call_ends(make_console, api_token, household_for, stub_ha):
    console = make_console(CONSOLE_HA_CONFIRMATION_TTL=1.5)
    console.configure(stub_ha.base_url, stub_ha.token)
    household = household_for(console)

    async def scenario() -> tuple[types.CallToolResult, str]:
        async with mcp_session(console.mcp_url, api_token) as session:
            call = asyncio.create_task(session.call_tool(LIST, {}))
            token = (await pending_cards(console, household))[0]["token"]
            return await asyncio.wait_for(call, 15), token

    result, token = run(scenario)
    error = error_of(result)
    # Ended by the card's expiry (the queue's clock said so), not before it: the reason says which.
    assert error["code"] == "CONFIRMATION_INVALID" and error["reason"] == "expired"
    late = household.post(console.url + f"/api/v1/confirmations/{token}", json={"approve": True}, timeout=5)
    assert late.status_code == 409 and late.json()["error"]["code"] == "CONFIRMATION_INVALID"
    assert stub_ha.requests_to("/api/states") == []
    assert [e["event"] for e in audit_events(console)][-1] == "expired"


def test_the_client_s_cancellation_withdraws_the_card(configured, api_token, household, stub_ha):
    """notifications/cancelled ends the wait: the card is gone, a late approval is refused, nothing is read."""

    async def scenario() -> str:
        async with mcp_session(configured.mcp_url, api_token) as session:
            call = asyncio.create_task(session.call_tool(LIST, {}))
            token = (await pending_cards(configured, household))[0]["token"]
            request_id = session._request_id - 1  # the SDK numbers requests; the call was the last one sent
            await session.send_notification(types.ClientNotification(types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=request_id, reason="the person stopped it"))))
            await pending_cards(configured, household, count=0)
            with pytest.raises(McpError):  # the SDK answers a cancelled request with an error
                await asyncio.wait_for(call, 10)
            return token

    token = run(scenario)
    late = household.post(configured.url + f"/api/v1/confirmations/{token}", json={"approve": True}, timeout=5)
    assert late.status_code == 409
    assert stub_ha.requests_to("/api/states") == []
    events = audit_events(configured)
    assert events[-1]["event"] == "cancelled" and events[-1]["client"] == CLIENT_NAME


def test_closing_the_session_withdraws_its_waiting_cards(configured, api_token, household):
    """A client that ends its MCP session (the SDK sends DELETE) leaves no card behind."""

    async def scenario() -> None:
        async with mcp_session(configured.mcp_url, api_token) as session:
            call = asyncio.create_task(session.call_tool(LIST, {}))
            await pending_cards(configured, household)
            call.cancel()
        await pending_cards(configured, household, count=0)

    run(scenario)
    assert audit_events(configured)[-1]["event"] == "cancelled"


def test_a_hung_home_assistant_gives_ha_timeout_within_the_bound(configured, api_token, household, stub_ha):
    """History's bound is 10 s: a Home Assistant that never answers is HA_TIMEOUT soon after it."""
    stub_ha.fault("slow", "/api/history", delay=60)

    async def scenario() -> tuple[types.CallToolResult, float]:
        async with mcp_session(configured.mcp_url, api_token) as session:
            call = asyncio.create_task(session.call_tool(HISTORY, {"entity_id": ENTITY, "period": "day"}))
            token = (await pending_cards(configured, household))[0]["token"]
            started = time.monotonic()
            await household_answers(configured, household, token, True)
            return await asyncio.wait_for(call, 30), time.monotonic() - started

    result, took = run(scenario)
    assert error_of(result)["code"] == "HA_TIMEOUT"
    # Real time: the read's Deadline against a real socket to a Home Assistant that never answers.
    assert took < REGISTRY[GET_HISTORY].bounds.timeout_seconds + 3


def test_two_waiting_cards_per_tool_per_client_and_the_same_arguments_join_one(configured, api_token, household,
                                                                                data_dir):
    """MCP's "one invocation per turn" (issue 20): other arguments are a new card, up to two a tool per program;
    the same arguments join the open card (the earlier call lets go, told to come back)."""
    from console_ha.store.console_secrets import ConsoleSecrets

    other_token = ConsoleSecrets(data_dir).create_api_token("kitchen tablet")

    async def scenario() -> tuple[types.CallToolResult, types.CallToolResult, list[dict[str, Any]]]:
        async with mcp_session(configured.mcp_url, api_token) as session, \
                mcp_session(configured.mcp_url, other_token) as other:
            day = asyncio.create_task(session.call_tool(HISTORY, {"entity_id": ENTITY, "period": "day"}))
            await pending_cards(configured, household)
            hour = asyncio.create_task(session.call_tool(HISTORY, {"entity_id": ENTITY, "period": "hour"}))
            await pending_cards(configured, household, count=2)
            week = await session.call_tool(HISTORY, {"entity_id": ENTITY, "period": "week"})
            day_again = asyncio.create_task(session.call_tool(HISTORY, {"period": "day", "entity_id": ENTITY}))
            let_go = await asyncio.wait_for(day, 10)  # the same call again took its card over
            others = asyncio.create_task(other.call_tool(LIST, {}))
            cards = await pending_cards(configured, household, count=3)
            for card in cards:
                await household_answers(configured, household, card["token"], False)
            results = await asyncio.gather(day_again, hour, others)
            assert all(error_of(r)["code"] == "CONFIRMATION_DENIED" for r in results)
            return week, let_go, cards

    week, let_go, cards = run(scenario)
    assert error_of(week)["code"] == "INVOCATION_LIMIT_EXCEEDED"
    assert let_go.isError is False and "waiting_for_household" in let_go.structuredContent
    assert sorted(card["client"] for card in cards) == sorted([CLIENT_NAME, CLIENT_NAME, "kitchen tablet"])


def test_the_console_holds_a_bounded_number_of_waiting_calls(make_console, api_token, household_for, stub_ha):
    console = make_console(CONSOLE_HA_MCP_MAX_WAITING=1)
    console.configure(stub_ha.base_url, stub_ha.token)
    household = household_for(console)

    async def scenario() -> types.CallToolResult:
        async with mcp_session(console.mcp_url, api_token) as session:
            first = asyncio.create_task(session.call_tool(LIST, {}))
            token = (await pending_cards(console, household))[0]["token"]
            refused = await session.call_tool(HISTORY, {"entity_id": ENTITY, "period": "hour"})
            await household_answers(console, household, token, False)
            await asyncio.wait_for(first, 15)
            return refused

    error = error_of(run(scenario))
    assert error["code"] == "INVOCATION_LIMIT_EXCEEDED"
    assert "1 reads waiting" in error["message"]


def test_without_an_api_token_mcp_is_401_and_a_browser_session_is_not_accepted(console, household, api_token):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    anonymous = requests.post(console.mcp_url, json=initialize, headers=headers, timeout=5)
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "UNAUTHENTICATED"
    with_session = household.post(console.mcp_url, json=initialize, headers=headers, timeout=5)
    assert with_session.status_code == 401 and with_session.json()["error"]["code"] == "UNAUTHENTICATED"
    wrong = requests.post(console.mcp_url, json=initialize, timeout=5,
                          headers={**headers, "Authorization": "Bearer not-a-token"})
    assert wrong.status_code == 401
    bearer = {"Authorization": f"Bearer {api_token}"}
    for method in ("GET", "HEAD"):  # no server-initiated stream: it would hold a worker thread
        answer = requests.request(method, console.mcp_url, headers=bearer, timeout=5)
        assert answer.status_code == 405 and answer.headers["Allow"] == "POST, DELETE"


def test_a_session_belongs_to_the_token_that_opened_it(console, api_token, data_dir):
    """Another token cannot send into (or cancel in) someone else's MCP session."""
    from console_ha.store.console_secrets import ConsoleSecrets

    other_token = ConsoleSecrets(data_dir).create_api_token("someone else")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    opened = requests.post(console.mcp_url, json=initialize, timeout=5,
                           headers={**headers, "Authorization": f"Bearer {api_token}"})
    assert opened.status_code == 200
    session_id = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    foreign = requests.post(console.mcp_url, json=listing, timeout=5, headers={
        **headers, "Authorization": f"Bearer {other_token}", "mcp-session-id": session_id,
        "mcp-protocol-version": "2025-06-18"})
    assert foreign.status_code == 404
    own = requests.post(console.mcp_url, json=listing, timeout=5, headers={
        **headers, "Authorization": f"Bearer {api_token}", "mcp-session-id": session_id,
        "mcp-protocol-version": "2025-06-18"})
    assert own.status_code == 200 and "home_assistant_get_history" in own.text


def test_a_program_sees_only_its_own_waiting_cards(configured, api_token, household, data_dir):
    from console_ha.store.console_secrets import ConsoleSecrets

    other_token = ConsoleSecrets(data_dir).create_api_token("someone else")

    async def scenario() -> None:
        async with mcp_session(configured.mcp_url, api_token) as session:
            call = asyncio.create_task(session.call_tool(LIST, {}))
            token = (await pending_cards(configured, household))[0]["token"]
            mine = await anyio.to_thread.run_sync(lambda: requests.get(
                configured.url + "/api/v1/confirmations", headers={"Authorization": f"Bearer {api_token}"},
                timeout=5))
            theirs = await anyio.to_thread.run_sync(lambda: requests.get(
                configured.url + "/api/v1/confirmations", headers={"Authorization": f"Bearer {other_token}"},
                timeout=5))
            assert [c["token"] for c in mine.json()["pending"]] == [token]
            assert theirs.json() == {"pending": []}
            await household_answers(configured, household, token, False)
            await asyncio.wait_for(call, 15)

    run(scenario)





def test_mcp_answers_only_to_the_consoles_trusted_host_names(make_console, api_token):
    """/mcp is a Flask route: the app's Host allowlist (`--trusted-host`) holds for it as for every page."""
    console = make_console(CONSOLE_HA_TRUSTED_HOSTS=["console.local"])
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {api_token}"}
    rebound = requests.post(console.mcp_url, json=initialize, timeout=5, headers={**headers, "Host": "evil.example"})
    assert rebound.status_code == 400 and rebound.json()["error"]["code"] == "UNTRUSTED_HOST"
    assert "mcp-session-id" not in rebound.headers
    port = console.url.rsplit(":", 1)[1]
    named = requests.post(console.mcp_url, json=initialize, timeout=5,
                          headers={**headers, "Host": f"console.local:{port}"})
    assert named.status_code == 200
    own = requests.post(console.mcp_url, json=initialize, timeout=5, headers=headers)
    assert own.status_code == 200


def test_a_revoked_token_is_refused_at_its_next_request(console, api_token, data_dir):
    from console_ha.store.console_secrets import ConsoleSecrets

    async def scenario() -> types.ListToolsResult:
        async with mcp_session(console.mcp_url, api_token) as session:
            return await session.list_tools()

    assert len(run(scenario).tools) == sum(spec.answers_for is None for spec in REGISTRY.values())
    ConsoleSecrets(data_dir).revoke_api_tokens(CLIENT_NAME)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    refused = requests.post(console.mcp_url, json=initialize, timeout=5, headers={
        "Accept": "application/json, text/event-stream", "Authorization": f"Bearer {api_token}"})
    assert refused.status_code == 401


def test_a_client_that_drops_its_connection_mid_wait_leaves_the_console_working(configured, api_token, household):
    """A dropped connection is not a cancellation (the MCP specification says so): the card stays and can be
    answered, and the same MCP session and the household's pages go on working."""
    import socket

    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {api_token}",
               "Content-Type": "application/json"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    opened = requests.post(configured.mcp_url, json=initialize, headers=headers, timeout=5)
    in_session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    requests.post(configured.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers=in_session, timeout=5)

    call = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": LIST, "arguments": {}, "_meta": {"progressToken": 1}}}).encode()
    host, port = configured.url.removeprefix("http://").split(":")
    lines = "".join(f"{name}: {value}\r\n" for name, value in in_session.items())
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n{lines}Content-Length: {len(call)}\r\n\r\n"
                    .encode() + call)
        assert raw.recv(4096).startswith(b"HTTP/1.1 200")
    cards = run(lambda: pending_cards(configured, household))
    # The call sees the hang-up and ends (issue 20): its card stays, with no live call attached.
    assert wait_until_idle(configured) == (0, 0, 0)
    answer = household.post(configured.url + f"/api/v1/confirmations/{cards[0]['token']}", json={"approve": True},
                            timeout=5)
    assert answer.json() == {"status": "approved", "message": ALLOWED_LATER}
    listing = requests.post(configured.mcp_url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                            headers=in_session, timeout=5)
    assert listing.status_code == 200 and HISTORY in listing.text
    assert household.get(configured.url + "/confirmations", timeout=5).status_code == 200


def test_a_token_revoked_while_its_call_waits_never_receives_the_read(configured, api_token, household, data_dir,
                                                                       stub_ha):
    """Revoked means refused from then on: a call already waiting is not read for, even if approved."""
    from console_ha.store.console_secrets import ConsoleSecrets

    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {api_token}"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    opened = requests.post(configured.mcp_url, json=initialize, headers=headers, timeout=5)
    in_session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    requests.post(configured.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers=in_session, timeout=5)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": HISTORY, "arguments": {"entity_id": ENTITY, "period": "day"}}}

    async def scenario() -> str:
        answer = asyncio.create_task(anyio.to_thread.run_sync(lambda: requests.post(
            configured.mcp_url, json=call, headers=in_session, timeout=20).text))
        token = (await pending_cards(configured, household))[0]["token"]
        ConsoleSecrets(data_dir).revoke_api_tokens(CLIENT_NAME)
        await household_answers(configured, household, token, True)
        return await asyncio.wait_for(answer, 20)

    stream = run(scenario)
    messages = [json.loads(line.removeprefix("data:")) for line in stream.splitlines() if line.startswith("data:")]
    result = types.CallToolResult.model_validate(next(m for m in messages if m.get("id") == 2)["result"])
    assert error_of(result)["code"] == "UNAUTHENTICATED"
    assert stub_ha.requests_to("/api/history") == []
    assert "executed" not in [e["event"] for e in audit_events(configured)]


def test_a_session_belongs_to_its_token_not_to_another_token_of_the_same_name(console, api_token, data_dir):
    """Token names are not unique (two devices may both be "laptop"): a session is its own token's alone."""
    from console_ha.store.console_secrets import ConsoleSecrets

    twin = ConsoleSecrets(data_dir).create_api_token(CLIENT_NAME)
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    opened = requests.post(console.mcp_url, json=initialize, timeout=5,
                           headers={**headers, "Authorization": f"Bearer {api_token}"})
    session_id = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    in_session = {**headers, "mcp-session-id": session_id, "mcp-protocol-version": "2025-06-18"}
    foreign = requests.post(console.mcp_url, json=listing, timeout=5,
                            headers={**in_session, "Authorization": f"Bearer {twin}"})
    assert foreign.status_code == 404
    own = requests.post(console.mcp_url, json=listing, timeout=5,
                        headers={**in_session, "Authorization": f"Bearer {api_token}"})
    assert own.status_code == 200 and "home_assistant_get_history" in own.text


def test_a_request_id_already_in_flight_in_the_session_is_refused_and_the_first_call_still_ends(
        configured, api_token, household):
    """A reused id would take over the first request's response stream, leaving that response (and one of
    the server's worker threads) open for good: the second is refused, the first gets its answer."""
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {api_token}"}
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    opened = requests.post(configured.mcp_url, json=initialize, headers=headers, timeout=5)
    in_session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    requests.post(configured.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                  headers=in_session, timeout=5)
    first = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": LIST, "arguments": {}}}
    again = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": HISTORY, "arguments": {"entity_id": ENTITY, "period": "day"}}}

    async def scenario() -> tuple[requests.Response, requests.Response]:
        waiting = asyncio.create_task(anyio.to_thread.run_sync(lambda: requests.post(
            configured.mcp_url, json=first, headers=in_session, timeout=15)))
        card = (await pending_cards(configured, household))[0]
        refused = await anyio.to_thread.run_sync(lambda: requests.post(
            configured.mcp_url, json=again, headers=in_session, timeout=5))
        assert len(await pending_cards(configured, household)) == 1, "the reused id made a card"
        await household_answers(configured, household, card["token"], False)
        return refused, await asyncio.wait_for(waiting, 15)

    refused, answered = run(scenario)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "INVALID_REQUEST"
    assert answered.status_code == 200 and "CONFIRMATION_DENIED" in answered.text
    # Once the first request has ended, its id may be used again.
    ping = requests.post(configured.mcp_url, json={"jsonrpc": "2.0", "id": 7, "method": "ping"},
                         headers=in_session, timeout=5)
    assert ping.status_code == 200


def test_one_program_cannot_take_every_mcp_session(console, api_token, data_dir):
    """A host that reconnects without closing its sessions (or a hostile one) fills only its own share."""
    from console_ha.store.console_secrets import ConsoleSecrets
    from console_ha.web.mcp_endpoint import MAX_SESSIONS, MAX_SESSIONS_PER_TOKEN

    assert MAX_SESSIONS_PER_TOKEN < MAX_SESSIONS
    other_token = ConsoleSecrets(data_dir).create_api_token("someone else")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    mine = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {api_token}"}
    opened = [requests.post(console.mcp_url, json=initialize, headers=mine, timeout=5)
              for _ in range(MAX_SESSIONS_PER_TOKEN)]
    assert all(answer.status_code == 200 for answer in opened)
    refused = requests.post(console.mcp_url, json=initialize, headers=mine, timeout=5)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "RATE_LIMITED"
    theirs = requests.post(console.mcp_url, json=initialize, timeout=5,
                           headers={**mine, "Authorization": f"Bearer {other_token}"})
    assert theirs.status_code == 200
    closed = requests.delete(console.mcp_url, timeout=5, headers={
        **mine, "mcp-session-id": opened[0].headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"})
    assert closed.status_code == 200
    again = requests.post(console.mcp_url, json=initialize, headers=mine, timeout=5)
    assert again.status_code == 200


def test_a_failure_inside_the_console_is_internal_error_in_the_contract_s_shape(configured, api_token,
                                                                                monkeypatch):
    """Not the SDK's fallback (the exception's own words as text): the contract's code, and nothing of it."""
    from console_ha.store.audit import AuditLog as Audit

    def full_disk(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(28, "No space left on device", "/srv/private-place/audit.jsonl")

    monkeypatch.setattr(Audit, "record", full_disk)

    async def scenario() -> types.CallToolResult:
        async with mcp_session(configured.mcp_url, api_token) as session:
            return await session.call_tool(LIST, {})

    result = run(scenario)
    assert error_of(result)["code"] == "INTERNAL_ERROR"
    assert "private-place" not in result.model_dump_json() and "space" not in result.model_dump_json()


def test_another_program_opening_and_closing_many_sessions_does_not_end_a_live_one(console, api_token, data_dir):
    """The record of who owns which session forgets closed sessions, never a live one."""
    from console_ha.store.console_secrets import ConsoleSecrets
    from console_ha.web.mcp_endpoint import MAX_SESSIONS

    other_token = ConsoleSecrets(data_dir).create_api_token("someone else")
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
    mine = {**headers, "Authorization": f"Bearer {api_token}"}
    theirs = {**headers, "Authorization": f"Bearer {other_token}"}
    live = requests.post(console.mcp_url, json=initialize, headers=mine, timeout=5).headers["mcp-session-id"]
    with requests.Session() as churn:
        for _ in range(4 * MAX_SESSIONS + 8):
            opened = churn.post(console.mcp_url, json=initialize, headers=theirs, timeout=5)
            assert opened.status_code == 200
            churn.delete(console.mcp_url, headers={**theirs, "mcp-session-id": opened.headers["mcp-session-id"]},
                         timeout=5)
    listing = requests.post(console.mcp_url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, timeout=5,
                            headers={**mine, "mcp-session-id": live})
    assert listing.status_code == 200 and "home_assistant_get_history" in listing.text


def test_a_read_is_listed_only_while_an_allowlisted_entity_can_answer_it(console, api_token):
    """No calendar allowed, no get_calendar: tools/list follows the allowlist from one request to the next."""
    everyday = {"home_assistant_get_calendar", "home_assistant_get_todo", "home_assistant_get_forecast"}

    async def listed() -> set[str]:
        async with mcp_session(console.mcp_url, api_token) as session:
            return {tool.name for tool in (await session.list_tools()).tools}

    seed_settings(console.data_dir, {"allowlisted_entities": ["sensor.living_room_temperature"]})
    assert run(listed) & everyday == set()
    seed_settings(console.data_dir, {"allowlisted_entities": ["sensor.living_room_temperature", "calendar.family"]})
    tools = run(listed)
    assert tools & everyday == {"home_assistant_get_calendar"}
    assert {tool_name(spec) for spec in REGISTRY.values() if spec.answers_for is None} <= tools
    seed_settings(console.data_dir, {"allowlisted_entities": ["weather.home", "todo.shopping_list"]})
    assert run(listed) & everyday == {"home_assistant_get_todo", "home_assistant_get_forecast"}
