"""MCP with several Home Assistants (issue 29), through the official TypeScript SDK: `tools/list` gives every tool
an optional `instance`, an enum of the ids, and a call naming the cabin reads the cabin; with one Home Assistant
no tool has an `instance` and every input schema is the capability's own."""

from __future__ import annotations

import requests

from console_ha.capabilities.registry import REGISTRY
from console_ha.capabilities.spec import INSTANCE_ARGUMENT_DESCRIPTION
from console_ha.mcp.server import tool_name
from tests.mcp.come_back import answer, cards, structured
from tests.mcp.conftest import ALLOWED, ServedConsole
from tests.mcp.sdk_clients import start_program, ts_list_tools
from tests.stub_ha import StubHomeAssistant
from tests.two_instances import CABIN, seed_instance

GET_STATE_TOOL = "home_assistant_get_state"
ENTITY = "sensor.living_room_temperature"
PUBLISHED = {tool_name(capability): capability.published_arguments_schema for capability in REGISTRY.values()}


def test_with_one_home_assistant_the_typescript_sdk_sees_each_tool_s_own_schema_and_no_instance(
        console: ServedConsole, api_token: str, stub_ha: StubHomeAssistant) -> None:
    console.configure(stub_ha.base_url, stub_ha.token)
    tools = ts_list_tools(console.mcp_url, api_token)
    assert tools and all(tool["inputSchema"] == PUBLISHED[tool["name"]] for tool in tools)
    assert all("instance" not in tool["inputSchema"].get("properties", {}) for tool in tools)


def test_with_two_home_assistants_the_typescript_sdk_lists_the_enum_and_a_call_for_the_cabin_reads_it(
        console: ServedConsole, api_token: str, household: requests.Session,
        two_homes: tuple[StubHomeAssistant, StubHomeAssistant]) -> None:
    house, cabin = two_homes
    console.configure(house.base_url, house.token)
    seed_instance(console.data_dir, cabin, ALLOWED)

    tools = ts_list_tools(console.mcp_url, api_token)
    instance = {"type": "string", "enum": ["home", CABIN], "description": INSTANCE_ARGUMENT_DESCRIPTION}
    for tool in tools:
        published = PUBLISHED[tool["name"]]
        assert tool["inputSchema"] == {**published, "properties": {**published.get("properties", {}),
                                                                    "instance": instance}}
        assert "instance" not in tool["inputSchema"].get("required", [])

    before = len(house.requests)
    program = start_program("typescript", console.mcp_url, api_token, GET_STATE_TOOL,
                            {"entity_id": ENTITY, "instance": CABIN})
    try:
        (card,) = cards(console, household)
        assert card["card"]["title"] == "Cabin: Read Living room temperature now?"
        answer(console, household, card["token"], True)
        line = program.next_result(60)
    finally:
        program.process.kill()
    assert not line["result"].get("isError"), line
    result = structured(line)
    assert result["instance"] == CABIN and result["entity_id"] == ENTITY
    assert [r.path for r in cabin.requests if r.path.startswith("/api/states")] == [f"/api/states/{ENTITY}"]
    assert len(house.requests) == before
