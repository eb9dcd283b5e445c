"""The audit log: one line per outcome, private, append-only, readable back."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from console_ha.store.audit import AuditLog


def test_events_are_appended_as_json_lines(data_dir):
    log = AuditLog(data_dir)
    log.record("proposed", capability="home_assistant.list_entities", classification="read_only/external/required",
               stage=1, invocation="abc")
    log.record("rejected", capability="home_assistant.list_entities", classification="read_only/external/required",
               stage=3, invocation="abc", code="CAPABILITY_DISABLED")
    events = list(log.events())
    assert [e["event"] for e in events] == ["proposed", "rejected"]
    assert events[1]["code"] == "CAPABILITY_DISABLED" and events[1]["time"].endswith("Z")
    assert stat.S_IMODE(os.stat(log.path).st_mode) == 0o600


def test_unknown_event_is_a_programming_error(data_dir):
    with pytest.raises(ValueError):
        AuditLog(data_dir).record("peeked", capability="x", classification="y", stage=1, invocation="z")


def test_concurrent_writers_never_interleave_lines(data_dir):
    log = AuditLog(data_dir)

    def write() -> None:
        for _ in range(200):
            log.record("proposed", capability="home_assistant.get_history", classification="c", stage=1,
                       invocation="x" * 40)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(list(log.events())) == 800


def test_a_damaged_line_is_skipped_not_fatal(data_dir):
    log = AuditLog(data_dir)
    log.record("proposed", capability="c", classification="c", stage=1, invocation="a")
    with log.path.open("a") as handle:
        handle.write('{"half": ')
    log.record("denied", capability="c", classification="c", stage=4, invocation="a")
    assert [e["event"] for e in log.events()] == ["proposed", "denied"]
