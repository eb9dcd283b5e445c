"""on_card over MCP (issue 30), with a plugin installed under the entry point group `console_ha`: a program's cards
are told allowed, denied, expired and withdrawn, each after waiting, in order, as the program's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.shared.exceptions import McpError

from tests.mcp.conftest import CLIENT_NAME, ServedConsole, mcp_session
from tests.mcp.test_mcp_http import household_answers, pending_cards, run
from tests.tiny_plugin import install_plugin

LIST = "home_assistant_list_entities"
HISTORY = "home_assistant_get_history"
ENTITY = "sensor.living_room_temperature"

RECORDER = """
import json

from console_ha.hooks import hookimpl


@hookimpl
def on_card(event, card, principal):
    with open({path!r}, "a", encoding="utf-8") as told:
        told.write(json.dumps([event, principal, sorted(card)]) + "\\n")
"""


@pytest.fixture
def told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the installed plugin writes each on_card it is told of."""
    path = tmp_path / "told.jsonl"
    install_plugin(tmp_path / "site", monkeypatch, name="card_recorder", version="1.0",
                   source=RECORDER.format(path=str(path)))
    return path


def test_a_program_s_cards_are_told_to_an_installed_plugin_in_order(
        told: Path, make_console: Callable[..., ServedConsole], api_token: str,
        household_for: Callable[[ServedConsole], Any], stub_ha: Any) -> None:
    console = make_console(CONSOLE_HA_CONFIRMATION_TTL=1.5)
    console.configure(stub_ha.base_url, stub_ha.token)
    household = household_for(console)

    async def answered(session: Any, tool: str, arguments: dict[str, Any], approve: bool | None) -> None:
        call = asyncio.create_task(session.call_tool(tool, arguments))
        (card,) = await pending_cards(console, household)
        if approve is not None:
            await household_answers(console, household, card["token"], approve)
        await asyncio.wait_for(call, 15)  # unanswered: it ends at the card's expiry

    async def scenario() -> None:
        async with mcp_session(console.mcp_url, api_token) as session:
            await answered(session, LIST, {}, True)
            await answered(session, HISTORY, {"entity_id": ENTITY, "period": "day"}, False)
            await answered(session, HISTORY, {"entity_id": ENTITY, "period": "week"}, None)
            call = asyncio.create_task(session.call_tool(LIST, {}))
            await pending_cards(console, household)
            request_id = session._request_id - 1  # the SDK numbers requests; the call was the last one sent
            await session.send_notification(types.ClientNotification(types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=request_id, reason="the person stopped it"))))
            await pending_cards(console, household, count=0)
            with pytest.raises(McpError):
                await asyncio.wait_for(call, 10)

    run(scenario)
    console.app.extensions["console_ha"].stage_hooks.settled()
    lines = [json.loads(line) for line in told.read_text(encoding="utf-8").splitlines()]
    program = f"program:{CLIENT_NAME}"
    assert [(event, principal) for event, principal, _ in lines] == [
        ("waiting", program), ("allowed", program), ("waiting", program), ("denied", program),
        ("waiting", program), ("expired", program), ("waiting", program), ("withdrawn", program)]
    assert all(keys == ["capability", "expires_at", "instance", "language", "title", "title_in_language"]
               for _, _, keys in lines)
