"""Issue 25: the README says how MCP clients list the reads, by the names the MCP server really gives them."""

from __future__ import annotations

from pathlib import Path

from console_ha.capabilities.get_state import NAME as GET_STATE
from console_ha.capabilities.registry import REGISTRY
from console_ha.conversation.model import function_name
from console_ha.mcp.server import tool_name

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_the_readme_names_a_tool_as_mcp_clients_list_it_and_as_the_model_gets_it() -> None:
    capability = REGISTRY[GET_STATE]
    assert f"`{tool_name(capability)}`" in README  # home_assistant_get_state
    assert f"`{function_name(capability.name)}`" in README  # home_assistant__get_state
    assert f"`{capability.name}`" in README


def test_the_readme_gives_the_rule_that_forbids_the_dot() -> None:
    assert "the model APIs take only letters, digits, `_` and `-`" in " ".join(README.split())
