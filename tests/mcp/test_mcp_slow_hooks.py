"""A slow plugin holds nobody up over MCP (issue 30): a program's `before_toolcall` runs in a worker thread, off the
Console's one MCP event loop, so while it is held another program's call gets its card and another session's
`tools/list` answers; released, its own card appears. A cancellation while it is held loses no card: none exists.

Told by order: the held hook ends only when the test releases it (`tests/held_hooks.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import mcp.types as types
import pytest
import requests
from mcp.shared.exceptions import McpError

from console_ha.console import Console, ConsoleOptions
from console_ha.plugins.plugin_registry import Plugins
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.store.plugin_switches import PluginSwitches
from console_ha.web import create_app
from tests.held_hooks import PATIENCE, Held, hold_past_the_deadline
from tests.mcp.conftest import CLIENT_NAME, ServedConsole, mcp_session, serve, stop
from tests.mcp.test_mcp_http import audit_events, error_of, household_answers, pending_cards, run
from tests.stub_ha import StubHomeAssistant

LIST = "home_assistant_list_entities"
SLOW = "slow program"


@pytest.fixture
def slow(data_dir: DataDir, stub_ha: StubHomeAssistant, monkeypatch: pytest.MonkeyPatch
         ) -> Iterator[tuple[ServedConsole, Held, str]]:
    """A served Console whose one plugin holds the first `before_toolcall` of the program `SLOW` (its API token
    is the third item) until the test releases it."""
    hold_past_the_deadline(monkeypatch)
    held = Held(f"program:{SLOW}")
    plugins = Plugins(PluginSwitches(data_dir))
    plugins.register(held, "held")
    app = create_app(console=Console.open(data_dir, ConsoleOptions(household_confirmation_ttl=30.0, plugins=plugins)))
    server, thread, url = serve(app)
    console = ServedConsole(app, data_dir, url, server)
    console.configure(stub_ha.base_url, stub_ha.token)
    try:
        yield console, held, ConsoleSecrets(data_dir).create_api_token(SLOW)
    finally:
        held.release.set()
        app.extensions["console_ha_mcp"].close()
        stop(server, thread)


async def entered(held: Held) -> None:
    assert await anyio.to_thread.run_sync(held.entered.wait, PATIENCE), "the held plugin was never called"


async def cancelled_in_the_audit(console: ServedConsole) -> None:
    """Once the released hook's call has ended: its read audited `cancelled`."""
    for _ in range(int(PATIENCE / 0.05)):
        if "cancelled" in [line["event"] for line in audit_events(console)]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the cancelled call's read was never audited")


async def deny_all(console: ServedConsole, household: requests.Session, count: int) -> None:
    for card in await pending_cards(console, household, count=count):
        assert (await household_answers(console, household, card["token"], False)).status_code == 200


def test_while_one_program_s_plugin_is_held_another_program_s_call_gets_its_card(
        slow: tuple[ServedConsole, Held, str], api_token: str,
        household_for: Callable[[ServedConsole], requests.Session]) -> None:
    console, held, slow_token = slow
    household = household_for(console)

    async def scenario() -> None:
        async with mcp_session(console.mcp_url, slow_token) as slow_session, \
                mcp_session(console.mcp_url, api_token) as other:
            slow_call = asyncio.create_task(slow_session.call_tool(LIST, {}))
            try:
                await entered(held)
                other_call = asyncio.create_task(other.call_tool(LIST, {}))
                (card,) = await pending_cards(console, household)
                assert card["client"] == CLIENT_NAME  # the held program has no card yet
            finally:
                held.release.set()
            cards = await pending_cards(console, household, count=2)
            assert sorted(card["client"] for card in cards) == sorted([CLIENT_NAME, SLOW])
            await deny_all(console, household, 2)
            for call in (slow_call, other_call):
                assert error_of(await asyncio.wait_for(call, PATIENCE))["code"] == "CONFIRMATION_DENIED"

    run(scenario)


def test_while_one_program_s_plugin_is_held_another_session_s_tools_list_answers(
        slow: tuple[ServedConsole, Held, str], api_token: str,
        household_for: Callable[[ServedConsole], requests.Session]) -> None:
    console, held, slow_token = slow
    household = household_for(console)

    async def scenario() -> None:
        async with mcp_session(console.mcp_url, slow_token) as slow_session, \
                mcp_session(console.mcp_url, api_token) as other:
            slow_call = asyncio.create_task(slow_session.call_tool(LIST, {}))
            try:
                await entered(held)
                # Before, the held hook ran on the event loop itself: no session's request could be answered.
                listed = await asyncio.wait_for(other.list_tools(), PATIENCE)
                assert LIST in [tool.name for tool in listed.tools]
                await pending_cards(console, household, count=0)
            finally:
                held.release.set()
            await deny_all(console, household, 1)
            assert error_of(await asyncio.wait_for(slow_call, PATIENCE))["code"] == "CONFIRMATION_DENIED"

    run(scenario)


def test_a_call_cancelled_while_its_plugin_is_held_loses_no_card_and_is_audited_cancelled(
        slow: tuple[ServedConsole, Held, str], household_for: Callable[[ServedConsole], requests.Session]) -> None:
    console, held, slow_token = slow
    household = household_for(console)
    told: list[Any] = []
    console.app.extensions["console_ha"].household._tell = lambda card, state: told.append(state)

    async def scenario() -> None:
        async with mcp_session(console.mcp_url, slow_token) as session:
            call = asyncio.create_task(session.call_tool(LIST, {}))
            try:
                await entered(held)
                request_id = session._request_id - 1  # the SDK numbers requests; the call was the last one sent
                await session.send_notification(types.ClientNotification(types.CancelledNotification(
                    params=types.CancelledNotificationParams(requestId=request_id, reason="the person stopped it"))))
                with pytest.raises(McpError):  # the server's SDK answers a cancelled request at once, with an error
                    await asyncio.wait_for(call, PATIENCE)
            finally:
                held.release.set()
            await cancelled_in_the_audit(console)
            # The session still works: its next call has its card (the hook holds only the first).
            again = asyncio.create_task(session.call_tool(LIST, {}))
            await deny_all(console, household, 1)
            assert error_of(await asyncio.wait_for(again, PATIENCE))["code"] == "CONFIRMATION_DENIED"

    run(scenario)
    events = [(line["event"], line["stage"]) for line in audit_events(console)]
    assert events[:2] == [("proposed", 1), ("cancelled", 3)]  # no card was made for the cancelled call
    assert [event for event, _ in events[2:]] == ["proposed", "confirmation_requested", "denied"]
    assert len(told) == 2  # one card only: waiting, then denied
