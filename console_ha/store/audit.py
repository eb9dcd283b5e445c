"""The capability audit log: what happened to each invocation, never what was asked for or seen."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

from console_ha.store.atomic import ensure_dir
from console_ha.store.datadir import DataDir, is_instance_id
from console_ha.timestamps import utc_z_now

log = logging.getLogger(__name__)

class AuditEvent(StrEnum):
    """What happened to an invocation, in the order it can happen; each value is what audit.jsonl holds."""

    # A StrEnum, so a line is written with the same string as before and a log of an older Console still reads.
    PROPOSED = "proposed"
    REJECTED = "rejected"
    CONFIRMATION_REQUESTED = "confirmation_requested"
    APPROVED = "approved"
    DENIED = "denied"
    # Issue 25: a program called again, joining a card the household denied; it is told no again (stage 4).
    ASKED_AGAIN = "asked_again"
    EXPIRED = "expired"
    EXECUTED = "executed"
    FAILED = "failed"
    # The client that asked withdrew the request (MCP cancellation) before the household answered.
    CANCELLED = "cancelled"
    # Issue 20: allowed while no call of the program was there; the read waits for its next call.
    HELD = "held"
    # Allowed, but the program never came back before the card expired: nothing was read.
    ABANDONED = "abandoned"
    # Issue 30: a plugin's hook raised or took longer than 1 s, and was skipped (the line names the plugin and hook).
    PLUGIN_SKIPPED = "plugin_skipped"

    @classmethod
    def of(cls, value: object) -> AuditEvent | None:
        """The event a log line names, or None for one this Console does not know (a newer one's, a damaged line)."""
        return _BY_VALUE.get(value) if isinstance(value, str) else None


# Each event by the string a log line holds: a dictionary lookup, as the Activity page reads the whole log.
_BY_VALUE: Mapping[str, AuditEvent] = MappingProxyType({event.value: event for event in AuditEvent})


@dataclass(frozen=True)
class AuditLine:
    """One line of audit.jsonl. Deliberately has no field for arguments, entity ids, states or tokens."""

    time: str
    event: AuditEvent
    capability: str
    classification: str
    stage: int
    invocation: str
    code: str | None = None
    duration_ms: int | None = None
    # The API token's name of a client other than the household's page (an MCP client); never a value.
    client: str | None = None
    # The id of the Home Assistant instance the read was for (contract, "Several Home Assistants"); absent on
    # the lines of a Console that knew one Home Assistant, which are `home`'s, and when a request named none
    # there is.
    instance: str | None = None
    # Issue 30: the plugin and the hook a `plugin_skipped` line is about.
    plugin: str | None = None
    hook: str | None = None


class AuditLog:
    """Appends one JSON line per outcome; each line goes out in a single write so lines never interleave."""

    def __init__(self, data_dir: DataDir) -> None:
        self._dd = data_dir
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._dd.audit_log

    def record(self, event: AuditEvent, *, capability: str, classification: str, stage: int, invocation: str,
               code: str | None = None, duration_ms: int | None = None, client: str | None = None,
               instance: str | None = None, plugin: str | None = None, hook: str | None = None) -> AuditLine:
        """Append an event; a failure to write is logged, never raised into the invocation."""
        # AuditEvent(...) refuses (ValueError) a string naming no event, from a caller mypy did not check.
        if instance is not None and not is_instance_id(instance):
            # The executor names an id there is, or none; text a caller sent in its place never reaches the log.
            raise ValueError("not an instance id")
        entry = AuditLine(utc_z_now(), AuditEvent(event), capability, classification, stage, invocation, code,
                          duration_ms, client, instance, plugin, hook)
        line = json.dumps({k: v for k, v in asdict(entry).items() if v is not None}, separators=(",", ":"))
        data = (line + "\n").encode("utf-8")
        try:
            with self._lock:
                ensure_dir(self._dd.capabilities, 0o700)
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    size = os.fstat(fd).st_size
                    if size and os.pread(fd, 1, size - 1) != b"\n":
                        # A line cut short by a crash stays alone on its line, not glued to this one.
                        data = b"\n" + data
                    os.write(fd, data)
                finally:
                    os.close(fd)
        except OSError as err:
            log.error("could not write the audit log: %s", err.strerror)
        return entry

    def events(self) -> Iterator[dict[str, Any]]:
        """Every event in the log, oldest first; unreadable lines are skipped."""
        try:
            handle = self.path.open("r", encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        with handle:
            for line in handle:
                try:
                    event = json.loads(line)
                except (ValueError, RecursionError):
                    continue
                if isinstance(event, dict):
                    yield event
