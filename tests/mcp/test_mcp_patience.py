"""Come back for the answer (issue 20), with the official Python SDK's client (10 s read timeout) in its own
process against the stub Home Assistant; tests/real_ha/test_mcp_clients_real.py runs both SDKs for real."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from tests.mcp import come_back
from tests.mcp.conftest import ServedConsole

ENTITY = "sensor.living_room_temperature"
PATIENCE = 2  # below the program's 10 s read timeout
LATE = 12  # past that timeout: only calling again can collect the answer


def traffic(stub_ha: Any) -> come_back.Traffic:
    """How many requests reached the stub Home Assistant so far."""
    return lambda: len(stub_ha.requests)


@pytest.fixture
def token(data_dir: DataDir) -> str:
    return ConsoleSecrets(data_dir).create_api_token("desk assistant", patience=PATIENCE)


@pytest.fixture
def served(make_console: Callable[..., ServedConsole], stub_ha: Any) -> ServedConsole:
    console = make_console(CONSOLE_HA_CONFIRMATION_TTL=30.0)
    console.configure(stub_ha.base_url, stub_ha.token)
    return console


def test_allowed_at_once_the_call_gets_the_read(served, household_for, token, stub_ha):
    result = come_back.allowed_at_once(served, household_for(served), token, "python", ENTITY)
    assert result["entity_id"] == ENTITY


def test_allowed_after_the_read_timeout_the_same_call_again_collects_it(served, household_for, token, stub_ha):
    result = come_back.allowed_late(served, household_for(served), token, "python", ENTITY, LATE, PATIENCE,
                                    traffic(stub_ha))
    assert result["entity_id"] == ENTITY


def test_denied_the_call_gets_the_denial(served, household_for, token, stub_ha):
    come_back.denied(served, household_for(served), token, "python", traffic(stub_ha))


def test_a_killed_program_s_allowed_card_reads_nothing_and_expires_abandoned(make_console, household_for, token,
                                                                            stub_ha):
    console = make_console(CONSOLE_HA_CONFIRMATION_TTL=10.0)
    console.configure(stub_ha.base_url, stub_ha.token)
    household = household_for(console)
    come_back.killed_then_allowed(console, household, token, "python", ENTITY, traffic(stub_ha))
    come_back.abandoned_at_expiry(console, household, traffic(stub_ha), timeout=30)
    assert stub_ha.requests_to("/api/history") == []
