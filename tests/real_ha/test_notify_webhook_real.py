"""The notify plugin against a real Home Assistant 2025.4.4 webhook (issue 30): a card waits on a Console with
notify installed by pip, and the household's own automation on the core (tests/real_ha/harness.py, a `webhook`
trigger, local only) holds the card's title, and nothing of the arguments.

notify's POST goes through a recording proxy in front of the core, so the test also sees the request as it
crossed the wire: no secret of the Console's, in the body or the headers.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.console import Console
from console_ha.store.audit import AuditLog
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.example_plugins import EXAMPLES, pip_install_examples
from tests.fake_model import FakeModel, answer_from_tool_result, tool_call
from tests.moving_clock import wait_for
from tests.real_ha.harness import NOTIFY_NOTIFICATION_ID, NOTIFY_WEBHOOK_ID, RealHomeAssistant
from tests.real_ha.wire import RecordingProxy
from tests.seed import seed_settings
from tests.web.conftest import PASSWORD, household_client

pytestmark = pytest.mark.real_ha

MESSAGE = "/api/v1/conversation/message"
SENSOR = "sensor.living_room_temperature"
ARGUMENTS = {"entity_id": SENSOR, "period": "hour"}


@pytest.fixture(scope="module")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site-packages")
    pip_install_examples(site)
    return site


@pytest.fixture
def installed(example_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both example plugins importable through their entry points, as a household's pip leaves them."""
    monkeypatch.syspath_prepend(str(example_site))
    for _, module in EXAMPLES.values():
        monkeypatch.delitem(sys.modules, module, raising=False)


def notifications(real_ha: RealHomeAssistant) -> dict[str, dict[str, Any]]:
    """The core's persistent notifications, by id, read over its WebSocket API."""
    with real_ha.websocket() as ws:
        return {each["notification_id"]: each for each in ws.command("persistent_notification/get")}


@pytest.fixture
def no_notification(real_ha: RealHomeAssistant) -> Iterator[None]:
    """The automation's notification dismissed before and after: what the test reads came in this test."""
    dismiss = {"notification_id": NOTIFY_NOTIFICATION_ID}
    real_ha.call_service("persistent_notification", "dismiss", dismiss)
    yield
    real_ha.call_service("persistent_notification", "dismiss", dismiss)


def test_a_waiting_card_reaches_a_real_home_assistant_webhook_as_its_title_and_nothing_else(
    installed: None, no_notification: None, tmp_path: Path, real_ha: RealHomeAssistant, model: FakeModel,
    recording_proxy: Callable[[str], RecordingProxy],
) -> None:
    data_dir = DataDir(tmp_path / "console")
    seed_settings(data_dir, {"enabled": True, "base_url": real_ha.base_url, "allowlisted_entities": [SENSOR]},
                  token=real_ha.token)
    api_token = ConsoleSecrets(data_dir).create_api_token("phone assistant")
    app: Flask = create_app(data_dir, {"TESTING": True, "CONSOLE_HA_LLM_URL": model.url,
                                       "CONSOLE_HA_LLM_MODEL": "fake-model", "CONSOLE_HA_LLM_TIMEOUT": 5})
    console: Console = app.extensions["console_ha"]
    assert [info.name for info in console.plugins.describe()] == ["notify", "quiet_hours"]
    proxy = recording_proxy(real_ha.base_url)  # the core itself, and the wire to it recorded
    console.plugins.save_settings("notify", {"url": f"{proxy.url}/api/webhook/{NOTIFY_WEBHOOK_ID}"})
    household = household_client(app, data_dir)
    model.script(tool_call("home_assistant__get_history", ARGUMENTS), answer_from_tool_result)

    paused = household.post(MESSAGE, json={"message": "How did the living room temperature change?"}).get_json()
    pending = paused["pending_confirmation"]
    assert pending["capability"] == GET_HISTORY and pending["arguments"] == ARGUMENTS
    console.stage_hooks.settled()  # notify was told the card waits, and its POST has ended

    wait_for(lambda: NOTIFY_NOTIFICATION_ID in notifications(real_ha), "the automation's notification")
    held = notifications(real_ha)[NOTIFY_NOTIFICATION_ID]
    title = pending["card"]["title"]
    assert held["title"] == title
    assert json.loads(held["message"]) == {"json": {"message": title}, "query": []}
    assert SENSOR not in held["title"] + held["message"]
    # On the wire to the core: the webhook's POST, and nothing the Console keeps secret, nor the arguments.
    assert proxy.connections == 1
    sent = proxy.sent_bytes()
    assert sent.startswith(f"POST /api/webhook/{NOTIFY_WEBHOOK_ID} HTTP/1.1\r\n".encode())
    session_key = app.config["SECRET_KEY"]
    for kept in (real_ha.token, api_token, PASSWORD, SENSOR):
        assert not proxy.saw(kept.encode()), kept
    assert not proxy.saw(session_key if isinstance(session_key, bytes) else session_key.encode())
    assert b"Authorization" not in sent and b"Cookie" not in sent
    assert [event for event in AuditLog(data_dir).events() if event["event"] == "plugin_skipped"] == []

    household.post(MESSAGE, json={"conversation_id": paused["conversation_id"],
                                  "confirmation": {"token": pending["token"], "approve": False}})
