"""The system prompt names each read in one line and, with every read of issues 18 and 19, stays under 3 KiB."""

from __future__ import annotations

import dataclasses

from console_ha.capabilities.registry import CAPABILITIES, REGISTRY
from console_ha.capabilities.spec import Capability
from console_ha.conversation.model import function_name
from console_ha.conversation.service import system_prompt

# The reads of issues 18 and 19, besides the two that came before them: seven in all.
ALL_READS = ("home_assistant.list_entities", "home_assistant.get_history", "home_assistant.get_state",
             "home_assistant.find_entities", "home_assistant.list_areas", "home_assistant.get_statistics",
             "home_assistant.get_logbook")
MAX_PROMPT_BYTES = 3 * 1024
# A read not merged yet is counted at this summary: a realistic line, as long as the longest one here.
STAND_IN_SUMMARY = ("how one allowed meter or sensor's long-term statistics went over a month or a year: "
                    "mean, min and max or the change.")


def every_read() -> list[Capability]:
    """The registered capabilities, and a stand-in (a realistic line) for each of the seven not registered yet."""
    longest = max((c.prompt_summary for c in CAPABILITIES), key=len)
    summary = STAND_IN_SUMMARY if len(STAND_IN_SUMMARY) >= len(longest) else longest
    template = REGISTRY["home_assistant.list_entities"]
    stand_ins = [dataclasses.replace(template, name=name, prompt_summary=summary, result_meanings={})
                 for name in ALL_READS if name not in REGISTRY]
    return [*CAPABILITIES, *stand_ins]


def test_the_prompt_with_all_seven_reads_stays_under_3_kib() -> None:
    reads = every_read()
    assert len(reads) >= len(ALL_READS)
    prompt = system_prompt(reads)
    assert len(prompt.encode("utf-8")) < MAX_PROMPT_BYTES, f"{len(prompt.encode('utf-8'))} bytes"


def test_each_read_has_one_line_saying_what_it_answers() -> None:
    prompt = system_prompt(every_read())
    for capability in every_read():
        lines = [line for line in prompt.splitlines() if line.startswith(f"- {function_name(capability.name)}:")]
        assert lines == [f"- {function_name(capability.name)}: {capability.prompt_summary}"]
        assert "\n" not in capability.prompt_summary and len(capability.prompt_summary) <= 140


def test_the_stand_ins_are_no_shorter_than_the_longest_registered_line() -> None:
    """So the measure above never flatters the prompt: an unmerged read costs at least what a real one does."""
    longest = max(len(c.prompt_summary) for c in CAPABILITIES)
    assert all(len(c.prompt_summary) >= longest for c in every_read() if c.name not in REGISTRY)


# What every request to the model carries besides the conversation: the system prompt and the tools. At about
# 4 bytes a token this is some 2,500 tokens, a third of the 8k context of a household's small local model.
MAX_PROMPT_AND_TOOLS_BYTES = 10 * 1024


def test_the_prompt_and_every_tool_definition_together_leave_room_in_a_small_context() -> None:
    import json

    from console_ha.conversation.model import tool_definitions
    from console_ha.conversation.service import SYSTEM_PROMPT

    size = len(SYSTEM_PROMPT.encode("utf-8")) + len(json.dumps(tool_definitions()).encode("utf-8"))
    assert size < MAX_PROMPT_AND_TOOLS_BYTES, f"{size} bytes"
