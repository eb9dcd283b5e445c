"""The system prompt names each read in one line and says today's date; with all ten reads offered it stays
within 3.5 KiB, and with every tool definition within 12 KiB (issue 28's budgets)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, available_timezones

from console_ha.capabilities.registry import CAPABILITIES
from console_ha.conversation.model import function_name, tool_definitions
from console_ha.conversation.turn_loop import system_prompt, today_line

ALL_READS = ("home_assistant.list_entities", "home_assistant.get_history", "home_assistant.get_state",
             "home_assistant.find_entities", "home_assistant.list_areas", "home_assistant.get_statistics",
             "home_assistant.get_logbook", "home_assistant.get_calendar", "home_assistant.get_todo",
             "home_assistant.get_forecast")
MAX_PROMPT_BYTES = 3584  # 3.5 KiB
# What every request to the model carries besides the conversation: the system prompt and the tools. At about
# 4 bytes a token this is some 3,000 tokens, under half of the 8k context of a household's small local model.
MAX_PROMPT_AND_TOOLS_BYTES = 12 * 1024
# The prompt's date line names the zone: measured with the longest zone name there is.
LONGEST_ZONE = ZoneInfo(max(available_timezones(), key=len))


def test_every_read_of_issue_28_is_registered() -> None:
    assert tuple(c.name for c in CAPABILITIES) == ALL_READS


def test_the_prompt_with_all_ten_reads_offered_stays_within_3_5_kib() -> None:
    prompt = system_prompt(CAPABILITIES, datetime.now(LONGEST_ZONE))
    assert "through ten tools" in prompt
    assert len(prompt.encode("utf-8")) <= MAX_PROMPT_BYTES, f"{len(prompt.encode('utf-8'))} bytes"


def test_each_read_has_one_line_saying_what_it_answers() -> None:
    prompt = system_prompt(CAPABILITIES)
    for capability in CAPABILITIES:
        lines = [line for line in prompt.splitlines() if line.startswith(f"- {function_name(capability.name)}:")]
        assert lines == [f"- {function_name(capability.name)}: {capability.prompt_summary}"]
        assert "\n" not in capability.prompt_summary and len(capability.prompt_summary) <= 140


def test_the_prompt_and_every_tool_definition_together_stay_within_12_kib() -> None:
    prompt = system_prompt(CAPABILITIES, datetime.now(LONGEST_ZONE))
    size = len(prompt.encode("utf-8")) + len(json.dumps(tool_definitions()).encode("utf-8"))
    assert size <= MAX_PROMPT_AND_TOOLS_BYTES, f"{size} bytes"


def test_the_prompt_says_today_and_its_weekday_in_home_assistants_zone() -> None:
    """23:30 UTC on Friday 4 December is already Saturday the 5th in Auckland and still Friday in Honolulu."""
    moment = datetime(2026, 12, 4, 23, 30, tzinfo=UTC)
    auckland = system_prompt(CAPABILITIES, moment.astimezone(ZoneInfo("Pacific/Auckland")))
    honolulu = system_prompt(CAPABILITIES, moment.astimezone(ZoneInfo("Pacific/Honolulu")))
    assert auckland.endswith("\nToday is Saturday 2026-12-05 in the household's time zone (Pacific/Auckland).")
    assert honolulu.endswith("\nToday is Friday 2026-12-04 in the household's time zone (Pacific/Honolulu).")


def test_before_home_assistant_s_zone_is_known_the_prompt_says_it_is_this_device_s_day() -> None:
    assert today_line(None) == "" and "Today is" not in system_prompt(CAPABILITIES)
    # A bare offset (what the machine's own local time is) names no zone: the line does not pretend it is HA's.
    here = today_line(datetime(2026, 12, 4, 23, 30, tzinfo=UTC))
    assert here == "\nToday is Friday 2026-12-04 where this Console runs."
