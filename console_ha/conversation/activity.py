"""What the household's activity page shows: outcome counts per capability and the latest audit events."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from console_ha.capabilities.registry import REGISTRY

LATEST_EVENTS = 50
# What a capability the log names but the Console does not register (or "unknown") is called.
UNKNOWN_CAPABILITY_WORDS = "Something the Console does not know"

# Audit events in the household's words.
EVENT_WORDS = {
    "proposed": "Proposed by the assistant",
    "rejected": "Refused",
    "confirmation_requested": "Asked you",
    "approved": "You allowed it",
    "denied": "You did not allow it",
    "expired": "Expired unanswered",
    "executed": "Read done",
    "failed": "Failed",
    "cancelled": "Withdrawn by the program",
    "held": "Allowed; the program will get it when it asks again",
    "abandoned": "The program had already gone; nothing was read",
}

# Who asked, when the audit line names no program: the household's own conversation page.
CONVERSATION_PAGE = "Conversation page"
# A card of the conversation page withdrawn because the household sent another message instead.
WITHDRAWN_BY_A_NEW_MESSAGE = "Withdrawn: you asked something else"


@dataclass
class CapabilityActivity:
    """How often one capability reached each outcome; refusals and failures by code."""

    capability: str
    proposed: int = 0
    asked: int = 0
    approved: int = 0
    denied: int = 0
    expired: int = 0
    completed: int = 0
    cancelled: int = 0
    abandoned: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)

    @property
    def words(self) -> str:
        """The capability in plain words (its own, `activity_words`); the id stays beside them for the log's reader."""
        capability = REGISTRY.get(self.capability)
        return capability.activity_words if capability is not None else UNKNOWN_CAPABILITY_WORDS

    def add(self, event: Mapping[str, Any]) -> None:
        """Count one audit event."""
        kind = event.get("event")
        code = str(event.get("code") or "UNKNOWN")
        if kind == "proposed":
            self.proposed += 1
        elif kind == "confirmation_requested":
            self.asked += 1
        elif kind == "approved":
            self.approved += 1
        elif kind == "denied":
            self.denied += 1
        elif kind == "expired":
            self.expired += 1
        elif kind == "executed":
            self.completed += 1
        elif kind == "rejected":
            self.refused[code] += 1
        elif kind == "failed":
            self.failed[code] += 1
        elif kind == "cancelled":
            self.cancelled += 1
        elif kind == "abandoned":
            self.abandoned += 1


@dataclass(frozen=True)
class ActivityEvent:
    """One audit line as the page shows it: outcome, never values (the log holds none)."""

    time: str
    capability: str
    event: str
    words: str
    stage: int | None
    code: str | None
    duration_ms: int | None
    # The API token's name of the program (an MCP client) that asked, or the conversation page.
    asked_by: str = CONVERSATION_PAGE


@dataclass(frozen=True)
class Activity:
    """The activity page's content."""

    capabilities: list[CapabilityActivity]
    latest: list[ActivityEvent]
    total_events: int


def summarise(events: Iterable[Mapping[str, Any]], *, latest: int = LATEST_EVENTS) -> Activity:
    """Counts per capability (registered ones always listed, in registry order) and the newest events first."""
    per_capability = {name: CapabilityActivity(name) for name in REGISTRY}
    recent: deque[ActivityEvent] = deque(maxlen=latest)
    total = 0
    for event in events:
        total += 1
        name = str(event.get("capability") or "unknown")
        per_capability.setdefault(name, CapabilityActivity(name)).add(event)
        kind = str(event.get("event") or "")
        recent.append(ActivityEvent(
            time=str(event.get("time") or ""),
            capability=name,
            event=kind,
            words=WITHDRAWN_BY_A_NEW_MESSAGE if kind == "cancelled" and not event.get("client")
            else EVENT_WORDS.get(kind, kind),
            stage=_int_or_none(event.get("stage")),
            code=str(event["code"]) if event.get("code") else None,
            duration_ms=_int_or_none(event.get("duration_ms")),
            asked_by=str(event["client"]) if event.get("client") else CONVERSATION_PAGE,
        ))
    return Activity(list(per_capability.values()), list(reversed(recent)), total)


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
