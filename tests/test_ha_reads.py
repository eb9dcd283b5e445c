"""What a part of the Console declares it reads is all the client and the WebSocket will read."""

from __future__ import annotations

import socket

import pytest
from wsproto import ConnectionType, WSConnection

from console_ha.deadline import Deadline
from console_ha.ha.areas import REGISTRY_COMMANDS
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.ha.websocket import ALLOWED_COMMANDS, HISTORY_COMMAND, HomeAssistantWebSocket
from console_ha.secret import Secret
from tests.stub_ha import StubHomeAssistant

STATE_OF_ONE = Reads(paths=("/api/states/{entity_id}",))


@pytest.mark.parametrize(("path", "allowed"), [
    ("/api/states/light.hall", True),
    ("/api/states", False),
    ("/api/states/light.hall/more", False),
    ("/api/states/", False),
    ("/api/config", False),
])
def test_a_placeholder_stands_for_one_path_segment(path: str, allowed: bool) -> None:
    assert STATE_OF_ONE.allows_path(path) is allowed


def test_declarations_join_and_compare_by_what_they_allow() -> None:
    joined = STATE_OF_ONE | Reads(paths=("/api/config",), commands=(HISTORY_COMMAND,))
    assert joined == Reads(paths=("/api/config", "/api/states/{entity_id}"), commands=(HISTORY_COMMAND,))
    assert joined.allows_path("/api/config") and HISTORY_COMMAND in joined.commands
    assert not Reads().allows_path("/api/") and HISTORY_COMMAND not in Reads().commands


@pytest.mark.parametrize("command", ["call_service", "config/area_registry/create", "subscribe_events"])
def test_a_declaration_of_a_command_that_is_not_a_known_read_cannot_be_made(command: str) -> None:
    with pytest.raises(ValueError, match="not a read-only Home Assistant command"):
        Reads(commands=(command,))
    assert command not in ALLOWED_COMMANDS


@pytest.mark.parametrize("pattern", ["api/states", "/auth/token", "/api/states/../services", "/api//states",
                                     "/api/states/{Entity}", "/api/states?x=1", "/api/{endpoint}",
                                     "/api/{endpoint}/{entity_id}"])
def test_a_path_pattern_is_an_api_path(pattern: str) -> None:
    with pytest.raises(ValueError, match="path pattern"):
        Reads(paths=(pattern,))


def test_the_client_refuses_a_path_not_declared_to_it_before_sending(stub_ha: StubHomeAssistant) -> None:
    client = HomeAssistantClient(stub_ha.base_url, Secret(stub_ha.token), reads=STATE_OF_ONE)
    assert client.state("light.bedroom", timeout=2)["entity_id"] == "light.bedroom"
    with pytest.raises(ValueError, match="declared"):
        client.states(timeout=2, max_bytes=1_000_000)
    with pytest.raises(ValueError, match="declared"):
        client.config(timeout=2)
    assert [r.path for r in stub_ha.requests] == ["/api/states/light.bedroom"]


def test_a_websocket_sends_only_the_commands_declared_to_it() -> None:
    """The check comes before anything is written: this connection has no socket to write to."""
    with socket.socket() as unconnected:
        connection = HomeAssistantWebSocket(unconnected, WSConnection(ConnectionType.CLIENT),
                                            deadline=Deadline(1), max_bytes=1000,
                                            commands=frozenset(REGISTRY_COMMANDS))
        with pytest.raises(ValueError, match="not an allowlisted read"):
            connection.command({"type": HISTORY_COMMAND, "entity_ids": ["sensor.x"]})
