"""Issue 20 against the real Home Assistant: MCP programs nobody here wrote (the official TypeScript SDK with
its default 60 s timeout, run by Debian's node; the official Python SDK with a 10 s read timeout), each in
its own process, calling both tools. Home Assistant is reached through a recording proxy, so "nothing was
read" is "no request for it reached Home Assistant"."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import jsonschema
import pytest

from console_ha.capabilities.registry import REGISTRY
from console_ha.store.console_secrets import DEFAULT_PATIENCE_SECONDS, ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.mcp import come_back
from tests.mcp.conftest import FAST_HASH, PASSWORD, ServedConsole, log_in, serve, stop
from tests.mcp.sdk_clients import SDKS, RecordingProxy
from tests.real_ha.harness import RealHomeAssistant

pytestmark = pytest.mark.real_ha

ENTITY = "sensor.living_room_temperature"
# The TypeScript SDK keeps its default 60 s timeout, so its token keeps the default patience (50 s) and
# the household answers after 70 s; the Python program gives up after 10 s, so its token waits 5 s and
# the household answers after 15 s. Either way only the same call, made again, can collect the answer.
PATIENCE = {"typescript": DEFAULT_PATIENCE_SECONDS, "python": 5}
LATE = {"typescript": 70.0, "python": 15.0}


@pytest.fixture
def proxy(real_ha: RealHomeAssistant) -> Iterator[RecordingProxy]:
    address = urlsplit(real_ha.base_url)
    recording = RecordingProxy(address.hostname or "127.0.0.1", address.port or 8123)
    yield recording
    recording.close()


@pytest.fixture
def make_served(data_dir: DataDir, real_ha: RealHomeAssistant,
                proxy: RecordingProxy) -> Iterator[Callable[..., ServedConsole]]:
    started = []

    def make(**config: object) -> ServedConsole:
        app = create_app(data_dir, dict(config))
        server, thread, url = serve(app)
        started.append((app, server, thread))
        served = ServedConsole(app, data_dir, url, server)
        served.configure(f"http://127.0.0.1:{proxy.port}", real_ha.token, allowlist=[ENTITY])
        return served

    ConsoleSecrets(data_dir).set_password(PASSWORD, method=FAST_HASH)
    yield make
    for app, server, thread in started:
        app.extensions["console_ha_mcp"].close()
        stop(server, thread)


def token_for(data_dir: DataDir, sdk: str) -> str:
    return ConsoleSecrets(data_dir).create_api_token(f"{sdk} program", patience=int(PATIENCE[sdk]))


@pytest.mark.parametrize("sdk", SDKS)
def test_the_household_allows_at_once(sdk, make_served, data_dir, proxy):
    console = make_served()
    household = log_in(console)
    result = come_back.allowed_at_once(console, household, token_for(data_dir, sdk), sdk, ENTITY)
    jsonschema.validate(result, REGISTRY["home_assistant.get_history"].result_schema)
    assert result["entity_id"] == ENTITY and proxy.sent() > 0


@pytest.mark.parametrize("sdk", SDKS)
def test_the_household_allows_late_and_calling_again_collects_it(sdk, make_served, data_dir, proxy):
    console = make_served()
    household = log_in(console)
    result = come_back.allowed_late(console, household, token_for(data_dir, sdk), sdk, ENTITY, LATE[sdk],
                                    PATIENCE[sdk], proxy.sent)
    jsonschema.validate(result, REGISTRY["home_assistant.get_history"].result_schema)


@pytest.mark.parametrize("sdk", SDKS)
def test_the_household_denies(sdk, make_served, data_dir, proxy):
    console = make_served()
    come_back.denied(console, log_in(console), token_for(data_dir, sdk), sdk, proxy.sent)


@pytest.mark.parametrize("sdk", SDKS)
def test_a_program_killed_while_waiting_gets_nothing_read_even_when_allowed(sdk, make_served, data_dir, proxy):
    console = make_served(CONSOLE_HA_CONFIRMATION_TTL=15.0)
    household = log_in(console)
    sent = proxy.sent()
    come_back.killed_then_allowed(console, household, token_for(data_dir, sdk), sdk, ENTITY, proxy.sent)
    come_back.abandoned_at_expiry(console, household, proxy.sent, timeout=40)
    assert proxy.sent() == sent
