"""Activity's words, without a web server: every audit event one entry of one table, every code a reason."""

from __future__ import annotations

import re
from typing import Any

import pytest

from console_ha.capabilities.registry import REGISTRY
from console_ha.conversation.activity import (
    EVENT_TABLE,
    EVENT_WORDS,
    REFUSED_AFTER_YOU_ALLOWED,
    REFUSED_FALLBACK,
    UNKNOWN_CAPABILITY_WORDS,
    UNKNOWN_EVENT_WORDS,
    WITHDRAWN_BY_A_NEW_MESSAGE,
    InstanceChoice,
    reason,
    removed_instance,
    summarise,
)
from console_ha.store.audit import AuditEvent
from console_ha.words import CHAT_FALLBACK, CHAT_WORDS
from tests.activity_log import FAILURE_CODES, REFUSAL_CODES

CODE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")
STATE = "home_assistant.get_state"
HISTORY = "home_assistant.get_history"
HOUSE_AND_CABIN = {"home": "House", "cabin": "Cabin"}


def line(event: str, capability: str = STATE, **extra: Any) -> dict[str, Any]:
    return {"time": "2026-12-04T10:00:00Z", "event": event, "capability": capability, "stage": 4, **extra}


def test_every_audit_event_has_its_household_words_and_the_table_names_no_other() -> None:
    """One entry per AuditEvent member: none missing, and no key that is only a string equal to an event's value."""
    assert list(AuditEvent) and set(EVENT_TABLE) == set(AuditEvent) and len(EVENT_TABLE) == len(AuditEvent)
    assert all(type(event) is AuditEvent for event in EVENT_TABLE)
    assert set(EVENT_WORDS) == set(AuditEvent)
    assert EVENT_TABLE[AuditEvent.ASKED_AGAIN].counter == "Asked again after you said no"


def test_a_log_line_of_plain_strings_is_counted_as_its_audit_event() -> None:
    """The log holds each event's value, as Consoles before the enum wrote it: it is read back as the member."""
    (state,) = summarise([line("held"), line("abandoned"), line("held")]).asked_for
    assert [(t.event, t.count) for t in state.tally] == [(AuditEvent.HELD, 2), (AuditEvent.ABANDONED, 1)]
    assert all(type(t.event) is AuditEvent for t in state.tally)


def test_a_program_that_asked_again_after_a_no_is_its_own_line_and_counter() -> None:
    """Issue 25: the household learns that a program keeps asking."""
    activity = summarise([line("denied", code="CONFIRMATION_DENIED", client="desk"),
                          line("asked_again", code="CONFIRMATION_DENIED", client="desk"),
                          line("asked_again", code="CONFIRMATION_DENIED", client="desk")])
    assert [e.words for e in activity.latest] == ["Asked again after you said no."] * 2 + [
        EVENT_WORDS[AuditEvent.DENIED]]
    assert [e.asked_by for e in activity.latest] == ["desk"] * 3
    (state,) = activity.asked_for
    assert [(t.label, t.count) for t in state.tally] == [("You did not allow", 1),
                                                         ("Asked again after you said no", 2)]


@pytest.mark.parametrize("event", list(AuditEvent))
def test_each_event_s_words_are_whole_sentences_without_a_code(event: AuditEvent) -> None:
    words = EVENT_TABLE[event]
    assert words.line[0].isupper() and words.line.endswith(".")
    assert words.counter and not words.counter.endswith(".")
    assert not CODE.search(words.line + words.counter)
    # A straight apostrophe would be escaped in the page, where tests look for the words as they are.
    assert "'" not in words.line + words.counter


@pytest.mark.parametrize("code", REFUSAL_CODES)
def test_every_refusal_says_why_in_the_household_s_words(code: str) -> None:
    words = reason(AuditEvent.REJECTED, code)
    assert words == CHAT_WORDS[code]  # the chat's own sentence: one fact, one place
    assert words != REFUSED_FALLBACK and not CODE.search(words)


@pytest.mark.parametrize("code", FAILURE_CODES)
def test_every_failure_says_why_in_the_household_s_words(code: str) -> None:
    words = reason(AuditEvent.FAILED, code)
    assert words == CHAT_WORDS.get(code, CHAT_FALLBACK)
    assert words is not None and not CODE.search(words)
    if code != "INTERNAL_ERROR":  # a bug is said not to have worked, and nothing more
        assert words != CHAT_FALLBACK


def test_a_code_this_console_has_no_words_for_is_still_not_shown() -> None:
    assert reason(AuditEvent.REJECTED, "REFUSED_BY_SOMETHING_NEW") == REFUSED_FALLBACK
    assert reason(AuditEvent.FAILED, None) == CHAT_FALLBACK
    assert reason(AuditEvent.DENIED, "CONFIRMATION_DENIED") is None  # the event's line says it
    (shown,) = summarise([line("something_new", code="SOMETHING_NEW")]).latest
    assert shown.words == UNKNOWN_EVENT_WORDS and shown.why is None


def test_a_refused_line_says_what_happened_and_why_and_keeps_the_code_for_the_page_s_data() -> None:
    (shown,) = summarise([line("rejected", code="ENTITY_NOT_ALLOWLISTED", stage=3)]).latest
    assert shown.words == EVENT_WORDS[AuditEvent.REJECTED]
    assert shown.why == CHAT_WORDS["ENTITY_NOT_ALLOWLISTED"]
    assert shown.code == "ENTITY_NOT_ALLOWLISTED" and shown.capability_words == REGISTRY[STATE].activity_words


def test_a_withdrawal_says_who_withdrew() -> None:
    by_program, by_new_message = summarise([line("cancelled", client="desk"), line("cancelled")]).latest[::-1]
    assert by_program.words == EVENT_WORDS[AuditEvent.CANCELLED]
    assert by_new_message.words == WITHDRAWN_BY_A_NEW_MESSAGE


def test_how_often_lists_only_counts_that_are_not_zero_and_names_the_rest_once() -> None:
    activity = summarise([line("proposed"), line("rejected", code="ENTITY_NOT_ALLOWLISTED"),
                          line("proposed"), line("rejected", code="CAPABILITY_DISABLED"),
                          line("proposed"), line("rejected", code="ENTITY_NOT_ALLOWLISTED"),
                          line("proposed", HISTORY), line("confirmation_requested", HISTORY),
                          line("approved", HISTORY), line("failed", HISTORY, code="HA_TIMEOUT"),
                          line("something_new", HISTORY)])
    assert [item.capability for item in activity.asked_for] == [c for c in REGISTRY if c in (STATE, HISTORY)]
    state, history = sorted(activity.asked_for, key=lambda item: item.capability != STATE)
    assert [(t.event, t.count) for t in state.tally] == [("proposed", 3), ("rejected", 3)]
    assert [(r.code, r.count) for r in state.reasons] == [("ENTITY_NOT_ALLOWLISTED", 2), ("CAPABILITY_DISABLED", 1)]
    assert [(t.event, t.count) for t in history.tally] == [
        ("proposed", 1), ("confirmation_requested", 1), ("approved", 1), ("failed", 1)]
    assert [r.words for r in history.reasons] == [CHAT_WORDS["HA_TIMEOUT"]]
    assert {item.capability for item in activity.not_asked_for} == set(REGISTRY) - {STATE, HISTORY}
    assert activity.total_events == 11


def test_capabilities_this_console_does_not_know_are_counted_once_and_never_called_not_asked_for() -> None:
    """A newer Console's reads, or damaged lines, would otherwise each head a block of the same words."""
    activity = summarise([line("proposed", "home_assistant.get_weather"), line("rejected", "unknown"),
                          line("proposed", "<b>x</b>" * 500), line("something_new", "home_assistant.get_camera")])
    unknown = [item for item in activity.asked_for if item.capability not in REGISTRY]
    assert len(unknown) == 1 and unknown[0].words == UNKNOWN_CAPABILITY_WORDS
    assert [(t.event, t.count) for t in unknown[0].tally] == [("proposed", 2), ("rejected", 1)]
    assert {item.capability for item in activity.not_asked_for} == set(REGISTRY)
    assert [e.capability_words for e in activity.latest] == [UNKNOWN_CAPABILITY_WORDS] * 4


def test_a_refusal_after_the_household_allowed_does_not_say_it_came_before_asking() -> None:
    """Settings changed while the card was open: "Refused … before you were asked" contradicted its own reason."""
    activity = summarise([line("proposed", invocation="a1"), line("confirmation_requested", invocation="a1"),
                          line("approved", invocation="a1"),
                          line("rejected", invocation="a1", code="CONFIRMATION_INVALID"),
                          line("proposed", invocation="b2"), line("rejected", invocation="b2", code="CONFIG_INVALID")])
    before, after = activity.latest[0], activity.latest[2]
    assert after.words == REFUSED_AFTER_YOU_ALLOWED and after.why == CHAT_WORDS["CONFIRMATION_INVALID"]
    assert before.words == EVENT_WORDS[AuditEvent.REJECTED]
    assert "before" not in EVENT_TABLE[AuditEvent.REJECTED].counter  # the counter holds both kinds of refusal


# --- several Home Assistants (issue 29) --------------------------------------------------------------------


def test_each_event_names_its_instance_and_a_line_naming_none_is_home_s() -> None:
    """A line of a Console that knew one Home Assistant has no `instance`: it was about `home`."""
    activity = summarise([line("proposed"), line("proposed", instance="home"), line("proposed", instance="cabin")],
                         names=HOUSE_AND_CABIN)
    assert [(e.instance, e.instance_name) for e in activity.latest] == [
        ("cabin", "Cabin"), ("home", "House"), ("home", "House")]
    assert activity.by_instance and activity.instance is None and activity.chosen is None
    assert activity.instances == (InstanceChoice("home", "House"), InstanceChoice("cabin", "Cabin"))


def test_an_instance_no_longer_there_is_named_by_its_id_marked_removed_and_can_still_be_chosen() -> None:
    """The cabin was removed: its events stay in the log, and in Activity, under its id."""
    activity = summarise([line("executed", instance="cabin"), line("executed", instance="shed"), line("denied")],
                         names={"home": "Home"}, instance="shed")
    assert activity.by_instance  # one instance configured, but the log holds another's events
    assert [(c.id, c.removed) for c in activity.instances] == [("home", False), ("cabin", True), ("shed", True)]
    assert activity.instances[1].name == removed_instance("cabin") == "cabin (removed)"
    assert [(e.instance, e.instance_name) for e in activity.latest] == [("shed", "shed (removed)")]
    assert activity.chosen == InstanceChoice("shed", removed_instance("shed"), removed=True)


def test_with_one_instance_and_only_home_s_events_nothing_names_an_instance() -> None:
    """The page of a single Home Assistant reads as it did before instances."""
    activity = summarise([line("proposed"), line("executed", instance="home")])
    assert not activity.by_instance
    assert activity.instances == (InstanceChoice("home", "Home"),)


def test_the_filter_keeps_one_instance_s_events_and_counts_old_lines_as_home_s() -> None:
    lines = [line("proposed"), line("rejected", code="ENTITY_NOT_ALLOWLISTED"),
             line("proposed", instance="cabin"), line("failed", HISTORY, code="HA_UNREACHABLE", instance="cabin"),
             line("executed", instance="home")]
    home = summarise(lines, names=HOUSE_AND_CABIN, instance="home")
    assert [e.event for e in home.latest] == ["executed", "rejected", "proposed"] and home.total_events == 3
    assert [item.capability for item in home.asked_for] == [STATE]
    assert [r.code for item in home.asked_for for r in item.reasons] == ["ENTITY_NOT_ALLOWLISTED"]
    cabin = summarise(lines, names=HOUSE_AND_CABIN, instance="cabin")
    assert [(e.event, e.instance) for e in cabin.latest] == [("failed", "cabin"), ("proposed", "cabin")]
    assert cabin.total_events == 2 and cabin.chosen == InstanceChoice("cabin", "Cabin")
    assert [r.code for item in cabin.asked_for for r in item.reasons] == ["HA_UNREACHABLE"]
    # Every instance the log names is offered, whichever is shown.
    assert [c.id for c in cabin.instances] == ["home", "cabin"]
    assert summarise(lines, names=HOUSE_AND_CABIN).total_events == 5


def test_an_instance_neither_configured_nor_in_the_log_is_no_choice() -> None:
    activity = summarise([line("proposed", instance="cabin")], names=HOUSE_AND_CABIN, instance="attic")
    assert activity.chosen is None and activity.latest == [] and activity.total_events == 0


@pytest.mark.parametrize("damaged", [["cabin"], {"id": "cabin"}, 7, True, "", "Cabin", "<b>x</b>", "x" * 33,
                                     "cabin\n"])
def test_an_instance_value_no_id_has_is_read_as_home_s_and_never_offered(damaged: object) -> None:
    """The executor writes only ids there are; a hand-edited or damaged line neither breaks nor adds a choice."""
    activity = summarise([line("proposed", instance=damaged), line("proposed", instance="cabin")],
                         names=HOUSE_AND_CABIN, instance="home")
    assert [(e.instance, e.instance_name) for e in activity.latest] == [("home", "House")]
    assert [c.id for c in activity.instances] == ["home", "cabin"]
