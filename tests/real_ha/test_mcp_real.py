"""One MCP read against the real Home Assistant: through `/mcp`, only after the household approves."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import jsonschema
import pytest

from console_ha.answers.household_queue import ALLOWED_NOW
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.registry import REGISTRY
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.mcp.conftest import FAST_HASH, PASSWORD, ServedConsole, log_in, mcp_session, serve, stop
from tests.mcp.test_mcp_http import household_answers, pending_cards, run
from tests.real_ha.harness import RealHomeAssistant

pytestmark = pytest.mark.real_ha

ENTITY = "sensor.living_room_temperature"


@pytest.fixture
def console(data_dir: DataDir, real_ha: RealHomeAssistant) -> Iterator[ServedConsole]:
    app = create_app(data_dir)
    server, thread, url = serve(app)
    served = ServedConsole(app, data_dir, url)
    served.configure(real_ha.base_url, real_ha.token, allowlist=[ENTITY])
    try:
        yield served
    finally:
        app.extensions["console_ha_mcp"].close()
        stop(server, thread)


def test_an_mcp_client_reads_real_history_after_the_household_approves(console: ServedConsole,
                                                                      real_ha: RealHomeAssistant) -> None:
    token = ConsoleSecrets(console.data_dir).create_api_token("real assistant")
    ConsoleSecrets(console.data_dir).set_password(PASSWORD, method=FAST_HASH)
    household = log_in(console)

    async def scenario():
        async with mcp_session(console.mcp_url, token) as session:
            call = asyncio.create_task(session.call_tool("home_assistant_get_history",
                                                         {"entity_id": ENTITY, "period": "day"}))
            card = (await pending_cards(console, household))[0]
            assert card["client"] == "real assistant"
            assert not call.done()
            answer = await household_answers(console, household, card["token"], True)
            assert answer.json() == {"status": "approved", "message": ALLOWED_NOW}
            return await asyncio.wait_for(call, 30)

    result = run(scenario)
    household.close()
    assert result.isError is False, result.structuredContent
    jsonschema.validate(result.structuredContent, REGISTRY[GET_HISTORY].result_schema)
    assert result.structuredContent["entity_id"] == ENTITY
    assert result.structuredContent["friendly_name"]
