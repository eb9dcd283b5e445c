"""The composition root: a Console opened on a data dir, its services built once and shared, driven without Flask."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.registry import HOME_ASSISTANT_READS
from console_ha.console import CONSOLE_READS, Console, ConsoleOptions
from console_ha.ha.kept_clients import HomeAssistantClients, one_client
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.ha.websocket import ALLOWED_COMMANDS
from console_ha.secret import Secret
from console_ha.settings.catalogue import PICKER_READS
from console_ha.settings.connection import CONNECTION_TEST_READS
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.fake_model import FakeModel, answer_from_tool_result, tool_call
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

ALLOWED = ["sensor.living_room_temperature"]


def configure(data_dir: DataDir, stub: StubHomeAssistant) -> None:
    seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url, "allowlisted_entities": ALLOWED},
                  token=stub.token)


def test_opening_makes_the_data_dir_and_sweeps_what_a_killed_write_left(tmp_path: Path) -> None:
    """Console.open is the one place a start repairs the data dir, whoever starts (app, CLI, wsgi)."""
    data_dir = DataDir(tmp_path / "data")
    Console.open(data_dir)
    stale = data_dir.root / ".ha.json.ab12cd34.tmp"
    stale.write_text("a copy of what a killed write was writing")
    console = Console.open(data_dir)
    assert console.data_dir is data_dir and not stale.exists()
    assert (data_dir.root.stat().st_mode & 0o777) == 0o700


def test_every_executor_shares_the_console_s_stores_audit_log_and_kept_clients(data_dir: DataDir) -> None:
    """One audit log (one lock, so lines never interleave), one config and token store, one client cache."""
    console = Console.open(data_dir)
    executors = [console.executor, console.conversation.executor, console.household._executor]
    assert executors[0] is executors[1] and executors[2] is not executors[0]
    for executor in executors:
        assert executor.audit is console.audit
        assert executor.instances is console.instances
        assert executor.instances.home.config is console.config_store
        assert executor.instances.home.token is console.token_store
        assert executor._clients == console.home_assistants.clients.lend


def test_the_household_queue_s_cards_follow_its_own_options(data_dir: DataDir) -> None:
    """MCP cards expire on the household TTL; the conversation page's keep the default."""
    console = Console.open(data_dir, ConsoleOptions(household_confirmation_ttl=30.0, household_max_waiting=2))
    assert console.household._executor.confirmation_ttl == 30.0
    assert console.household._max_waiting == 2
    assert console.executor.confirmation_ttl == 300


def test_conversation_turns_run_from_plain_python_through_one_kept_client(
        data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    """No web server: the Console asks the model, pauses for the household, and reads with one kept client."""
    configure(data_dir, stub_ha)
    made: list[str] = []

    def make(base_url: str, token: Secret, **parts: Any) -> HomeAssistantClient:
        made.append(base_url)
        return HomeAssistantClient(base_url, token, **parts)

    with FakeModel() as model:
        console = Console.open(data_dir, ConsoleOptions(
            model_environment=lambda: {"CONSOLE_HA_LLM_URL": model.url, "CONSOLE_HA_LLM_MODEL": "m"}),
            make_client=make)
        for _ in range(2):
            model.script(tool_call("home_assistant__list_entities", {}), answer_from_tool_result)
            paused = console.conversation.send(None, "How warm is the living room?")
            assert paused.pending_confirmation is not None
            assert paused.pending_confirmation.capability == LIST_ENTITIES
            done = console.conversation.confirm(paused.conversation_id, paused.pending_confirmation.token, True)
            assert done.reply and "°C" in done.reply
    assert made == [stub_ha.base_url], "both reads went through the one client the Console keeps"
    assert [event["event"] for event in console.audit.events()][-1] == "executed"


def test_create_app_serves_the_console_it_is_given(data_dir: DataDir) -> None:
    """A front end opens one Console and hands it over; create_app builds none of its own."""
    console = Console.open(data_dir)
    app = create_app(test_config={"TESTING": True}, console=console)
    assert app.extensions["console_ha"] is console
    assert app.extensions["console_ha_mcp"].queue is console.household
    assert app.test_client().get("/health").status_code == 200


def test_create_app_opens_one_console_from_its_config(data_dir: DataDir) -> None:
    """Without a Console, create_app opens one whose options come from the app's config."""
    app = create_app(data_dir, {"TESTING": True, "CONSOLE_HA_CONFIRMATION_TTL": 12.0,
                                "CONSOLE_HA_LLM_URL": "http://127.0.0.1:9/v1", "CONSOLE_HA_LLM_MODEL": "m"})
    console: Console = app.extensions["console_ha"]
    assert console.household._executor.confirmation_ttl == 12.0
    assert console.model_environment()["CONSOLE_HA_LLM_URL"] == "http://127.0.0.1:9/v1"
    app.config["CONSOLE_HA_LLM_MODEL"] = "another"  # read at every turn, not once at the start
    assert console.model_environment()["CONSOLE_HA_LLM_MODEL"] == "another"


def test_kept_clients_are_lent_open_and_one_use_clients_are_closed(stub_ha: StubHomeAssistant, monkeypatch) -> None:
    """Who made a client decides whether the executor's `with` closes it: no ownership flag in the executor."""
    closed: list[HomeAssistantClient] = []

    class Counting(HomeAssistantClient):
        def close(self) -> None:
            closed.append(self)
            super().close()

    monkeypatch.setattr("console_ha.ha.kept_clients.HomeAssistantClient", Counting)
    clients = HomeAssistantClients()
    with clients.lend(stub_ha.base_url, Secret(stub_ha.token), None) as first:
        pass
    with clients.lend(stub_ha.base_url, Secret(stub_ha.token), None) as second:
        pass
    assert first is second and closed == []
    with one_client(stub_ha.base_url, Secret(stub_ha.token), None) as once:
        assert closed == []
    assert closed == [once]


def test_nothing_in_the_composition_root_imports_flask() -> None:
    """The next front end can open a Console without a web framework."""
    code = "import sys, console_ha.console; print('flask' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_the_console_s_client_reads_what_its_parts_declare_and_nothing_else(
        data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    """The capabilities' reads (the registry), the picker's and the connection test's: the client's whole allowlist."""
    assert CONSOLE_READS == HOME_ASSISTANT_READS | PICKER_READS | CONNECTION_TEST_READS
    assert CONSOLE_READS.commands <= ALLOWED_COMMANDS
    client = Console.open(data_dir).home_assistants.clients(stub_ha.base_url, Secret(stub_ha.token), None)
    assert client.config(timeout=2)["version"] and client.states(timeout=2, max_bytes=1_000_000)
    assert client.state("light.bedroom", timeout=2)["entity_id"] == "light.bedroom"
    with pytest.raises(ValueError, match="declared"):
        client.get_json("/api/", timeout=2, max_bytes=1000)  # a bare client reads it; nothing here declares it
    assert [r.path for r in stub_ha.requests] == ["/api/config", "/api/states", "/api/states/light.bedroom"]
