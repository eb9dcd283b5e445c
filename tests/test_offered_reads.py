"""A read is offered only where it can answer, and the prompt says today in Home Assistant's zone (issue 28).

The model is sent, turn by turn, only the tools an allowlisted entity can answer, and the system prompt lists
and counts only those; the date line names Home Assistant's zone once an allowed read has reported it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from console_ha.capabilities.get_calendar import NAME as GET_CALENDAR
from console_ha.capabilities.registry import CAPABILITIES, REGISTRY
from console_ha.capabilities.spec import offered
from console_ha.conversation.model import ModelSettings, OpenAICompatibleModel, function_name
from console_ha.conversation.turn_loop import ConversationService
from console_ha.store.datadir import DataDir
from tests.executors import console_client, executor_over
from tests.fake_model import FakeModel, text, tool_call
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

EVERYDAY = {"home_assistant.get_calendar", "home_assistant.get_todo", "home_assistant.get_forecast"}
ANY_ENTITY = [c.name for c in CAPABILITIES if c.answers_for is None]


@pytest.mark.parametrize(("allowlist", "everyday"), [
    ([], set()),
    (["sensor.kitchen", "light.hall"], set()),
    (["calendar.family"], {"home_assistant.get_calendar"}),
    (["todo.shopping_list", "weather.home", "sensor.kitchen"], {"home_assistant.get_todo",
                                                                 "home_assistant.get_forecast"}),
    (["calendar.a", "todo.b", "weather.c"], EVERYDAY),
])
def test_a_capability_is_offered_only_while_an_allowlisted_entity_can_answer_it(
        allowlist: list[str], everyday: set[str]) -> None:
    names = [c.name for c in offered(CAPABILITIES, allowlist)]
    assert names == [c.name for c in CAPABILITIES if c.name in ANY_ENTITY or c.name in everyday]


def test_the_everyday_reads_each_declare_their_one_domain() -> None:
    assert {name: REGISTRY[name].answers_for for name in EVERYDAY} == {
        "home_assistant.get_calendar": frozenset({"calendar"}), "home_assistant.get_todo": frozenset({"todo"}),
        "home_assistant.get_forecast": frozenset({"weather"})}


@pytest.fixture
def service(data_dir: DataDir, stub_ha: StubHomeAssistant, model: FakeModel) -> ConversationService:
    stub_ha.serve_everyday()
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url,
                             "allowlisted_entities": ["sensor.living_room_temperature", "calendar.family"]},
                  token=stub_ha.token)
    return ConversationService(executor_over(data_dir, clients=console_client),
                               OpenAICompatibleModel(ModelSettings((model.url,), "fake-model", timeout=5)))


def tool_names(request: Any) -> list[str]:
    return [tool["function"]["name"] for tool in request.body["tools"]]


def test_the_model_is_offered_the_calendar_read_and_not_the_list_or_the_forecast(
        service: ConversationService, model: FakeModel, data_dir: DataDir) -> None:
    model.script(text("Hello."), text("Hello again."))
    service.send(None, "hello")
    (request,) = model.requests
    expected = [function_name(c.name) for c in CAPABILITIES if c.answers_for is None or c.name == GET_CALENDAR]
    assert tool_names(request) == expected
    prompt = request.messages[0]["content"]
    assert "through eight tools" in prompt and "- home_assistant__get_calendar:" in prompt
    assert "get_todo" not in prompt and "get_forecast" not in prompt
    # The household allows a shopping list: the next turn offers its read.
    seed_settings(data_dir, {"allowlisted_entities": ["calendar.family", "todo.shopping_list"]})
    service.send(None, "and now?")
    assert "home_assistant__get_todo" in tool_names(model.requests[1])
    assert "through nine tools" in model.requests[1].messages[0]["content"]


def test_the_date_line_names_home_assistant_s_zone_once_a_read_has_reported_it(
        service: ConversationService, model: FakeModel) -> None:
    model.script(tool_call(function_name(GET_CALENDAR), {"entity_id": "calendar.family", "period": "today"}),
                 text("Swimming at five."), text("Tomorrow is Sunday."))
    paused = service.send(None, "what's on today?")
    assert "where this Console runs." in model.requests[0].messages[0]["content"]
    assert paused.pending_confirmation is not None
    assert paused.pending_confirmation.card.title == "See what's on Family today?"
    service.confirm(paused.conversation_id, paused.pending_confirmation.token, True)
    service.send(paused.conversation_id, "and tomorrow?")
    today = datetime.now(ZoneInfo("Europe/Amsterdam"))
    last_prompt = model.requests[-1].messages[0]["content"]
    assert last_prompt.endswith(f"{today.date().isoformat()} in the household's time zone (Europe/Amsterdam).")
    weekday = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")[today.weekday()]
    assert last_prompt.splitlines()[-1].startswith(f"Today is {weekday} ")
