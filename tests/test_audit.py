"""The audit log: one line per outcome, private, append-only, readable back."""

from __future__ import annotations

import json
import os
import stat
import threading

import pytest

from console_ha.capabilities.executor import Executor
from console_ha.errors import CapabilityError
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.datadir import DataDir
from tests.activity_log import add_instance
from tests.stub_ha import StubHomeAssistant


def test_events_are_appended_as_json_lines(data_dir):
    log = AuditLog(data_dir)
    classification = "read_only/external/required"
    log.record(AuditEvent.PROPOSED, capability="home_assistant.list_entities", classification=classification,
               stage=1, invocation="abc")
    log.record(AuditEvent.REJECTED, capability="home_assistant.list_entities", classification=classification,
               stage=3, invocation="abc", code="CAPABILITY_DISABLED")
    events = list(log.events())
    assert [e["event"] for e in events] == ["proposed", "rejected"]
    assert events[1]["code"] == "CAPABILITY_DISABLED" and events[1]["time"].endswith("Z")
    assert stat.S_IMODE(os.stat(log.path).st_mode) == 0o600


def test_unknown_event_is_a_programming_error(data_dir):
    """mypy refuses a string where an AuditEvent belongs; a caller it did not check is refused when it runs."""
    with pytest.raises(ValueError):
        AuditLog(data_dir).record("peeked", capability="x", classification="y", stage=1,  # type: ignore[arg-type]
                                  invocation="z")
    assert not AuditLog(data_dir).path.exists()


def test_the_events_keep_the_values_the_log_has_always_held() -> None:
    """audit.jsonl files written before AuditEvent, and the Activity page reading them, rely on these strings."""
    assert [event.value for event in AuditEvent] == [
        "proposed", "rejected", "confirmation_requested", "approved", "denied", "asked_again", "expired",
        "executed", "failed", "cancelled", "held", "abandoned", "plugin_skipped"]


def test_a_line_is_written_with_the_event_s_value_and_read_back_as_it(data_dir):
    log = AuditLog(data_dir)
    entry = log.record(AuditEvent.ASKED_AGAIN, capability="c", classification="c", stage=4, invocation="a")
    assert entry.event is AuditEvent.ASKED_AGAIN
    assert '"event":"asked_again"' in log.path.read_text(encoding="utf-8")
    (line,) = log.events()
    assert AuditEvent.of(line["event"]) is AuditEvent.ASKED_AGAIN


@pytest.mark.parametrize("value", ["peeked", "", "HELD", None, 4, ["held"]])
def test_a_value_no_event_has_is_read_as_none(value: object) -> None:
    """A newer Console's event, or a damaged line's, is not taken for one of this Console's."""
    assert AuditEvent.of(value) is None


def test_concurrent_writers_never_interleave_lines(data_dir):
    log = AuditLog(data_dir)

    def write() -> None:
        for _ in range(200):
            log.record(AuditEvent.PROPOSED, capability="home_assistant.get_history", classification="c", stage=1,
                       invocation="x" * 40)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(list(log.events())) == 800


def test_a_damaged_line_is_skipped_not_fatal(data_dir):
    log = AuditLog(data_dir)
    log.record(AuditEvent.PROPOSED, capability="c", classification="c", stage=1, invocation="a")
    with log.path.open("a") as handle:
        handle.write('{"half": ')
    log.record(AuditEvent.DENIED, capability="c", classification="c", stage=4, invocation="a")
    assert [e["event"] for e in log.events()] == ["proposed", "denied"]


# --- the instance of each line (issue 29) ---------------------------------------------------------------


@pytest.mark.parametrize("instance", ["Cabin", "<b>cabin</b>", "", "cabin\n", "x" * 33, 5])
def test_an_instance_that_is_not_an_id_is_a_programming_error(data_dir, instance: object) -> None:
    """Only an id reaches the log's `instance`: text a caller sent is refused before anything is written."""
    with pytest.raises(ValueError):
        AuditLog(data_dir).record(AuditEvent.PROPOSED, capability="c", classification="c", stage=1, invocation="a",
                                  instance=instance)  # type: ignore[arg-type]
    assert not AuditLog(data_dir).path.exists()


def test_a_line_names_its_instance_by_id_and_one_naming_none_has_no_field(data_dir) -> None:
    log = AuditLog(data_dir)
    log.record(AuditEvent.PROPOSED, capability="c", classification="c", stage=1, invocation="a", instance="cabin")
    log.record(AuditEvent.REJECTED, capability="c", classification="c", stage=2, invocation="a")
    cabin, none = log.events()
    assert cabin["instance"] == "cabin" and "instance" not in none


JUNK = ["attic", "Cabin", "<script>alert(1)</script>", "", "cabin\n", "home ", 5, None, ["cabin"], {"id": "home"}]


@pytest.mark.parametrize("junk", JUNK, ids=repr)
def test_an_instance_argument_that_names_none_there_is_is_refused_at_stage_2_and_never_logged(
        executor: Executor, data_dir: DataDir, configured: StubHomeAssistant, junk: object) -> None:
    """Its two lines (proposed, rejected) hold no `instance`, and nowhere the text the caller sent."""
    add_instance(data_dir, "cabin", "Cabin")
    with pytest.raises(CapabilityError) as refused:
        executor.propose("home_assistant.list_entities", {"instance": junk}, conversation_id="c")
    assert (refused.value.code, refused.value.stage) == ("INVALID_ARGUMENTS", 2)
    assert "home, cabin" in str(refused.value)  # it names the ids there are
    lines = list(AuditLog(data_dir).events())
    assert [(line["event"], line["stage"]) for line in lines] == [("proposed", 1), ("rejected", 2)]
    assert all("instance" not in line for line in lines)
    if isinstance(junk, str) and junk.strip():
        assert json.dumps(junk)[1:-1] not in data_dir.audit_log.read_text(encoding="utf-8")


def test_an_instance_argument_naming_one_there_is_is_on_each_of_its_lines(
        executor: Executor, data_dir: DataDir, configured: StubHomeAssistant) -> None:
    """The same call naming `cabin` (not switched on yet: refused at stage 3) is recorded as cabin's."""
    add_instance(data_dir, "cabin", "Cabin")
    with pytest.raises(CapabilityError) as refused:
        executor.propose("home_assistant.list_entities", {"instance": "cabin"}, conversation_id="c")
    assert refused.value.stage == 3
    assert [line.get("instance") for line in AuditLog(data_dir).events()] == ["cabin", "cabin"]
