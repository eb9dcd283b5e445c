"""home_assistant.get_logbook: what changed one allowed entity over the past hour, day or week, and why.

What the answer may say is the household's allowlist and nothing more (docs/capabilities.md, "The logbook"):

- an entry is the asked entity's own new state, or, for an event, a fixed word for its kind ("triggered",
  "started", "logged"): Home Assistant's message text ("triggered by state of binary_sensor.x") can name
  anything in the house, so it is never passed on;
- a cause is one of CAUSE_KINDS, named only when its entity is allowlisted: an automation or a script by its
  own entity, a person by an allowlisted `person.*` entity whose `user_id` is the context's user. Those
  people are learned by reading the allowlisted person entities' own states, one GET each, and only when
  an entry has a user to name: nothing outside the allowlist is read to name anyone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

import orjson

from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card, leaves_device, sentences
from console_ha.capabilities.entity_budget import CAP_LEVELS, cut
from console_ha.capabilities.narrow import entity_state, narrow_state
from console_ha.capabilities.read_arguments import choice, entity, entity_and_period
from console_ha.capabilities.recent_periods import ONE_OF_THE_RECENT_PERIODS, RECENT_PERIODS
from console_ha.capabilities.spec import TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.deadline import Deadline
from console_ha.errors import HANotFound
from console_ha.ha.history_digest import MAX_CHANGES, Digester
from console_ha.ha.history_rows import EPOCH, MICROS_PER_SECOND, MICROSECOND, Row
from console_ha.ha.logbook import fetch_logbook_ws, malformed
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.ha.websocket import LOGBOOK_COMMAND
from console_ha.language import N_, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z

NAME = "home_assistant.get_logbook"
# A week of a busy entity's logbook, streamed; each entry is a few hundred bytes.
MAX_LOGBOOK_BYTES = 64 * 1024 * 1024
MAX_ENTRIES = MAX_CHANGES  # spread over the period as get_history spreads its changes
# The most bytes (compact UTF-8 JSON, escapes included) a state and a cause's name may take: Home
# Assistant's own limit for a state (255 characters), and list_entities' roomiest name. 50 entries at
# these caps take about 22 KB: always inside the 64 KiB bound.
STATE_BYTES = 255
NAME_BYTES = CAP_LEVELS[0].name
CAUSE_KINDS = ("person", "automation", "script", "service", "unknown")
# The words an event entry carries in place of Home Assistant's message, by the domain that logged it.
EVENT_WORDS = {"automation": "triggered", "script": "started"}
OTHER_EVENT_WORDS = "logged"
# Home Assistant's event types for an automation run and a script run (homeassistant.components.automation
# and .script): the logbook names them in `context_event_type` when one of them caused the entry.
_RUN_EVENTS = {"automation_triggered": "automation", "script_started": "script"}
# The script domain's own services: a call of one of them does not say which script ran (`script.<name>`
# does: the script's entity is `script.<name>`).
_SCRIPT_SERVICES = frozenset({"turn_on", "turn_off", "toggle", "reload"})

LOGBOOK_FIELD_MEANINGS: dict[str, str] = {
    "entries": f"up to {MAX_ENTRIES}, oldest first, spread over the period; the first and last always kept",
    "when": "UTC (the Z)",
    "state": "the state it changed to",
    "message": (f"for an event: \"{EVENT_WORDS['automation']}\" (an automation ran), \"{EVENT_WORDS['script']}\" "
                f"(a script ran) or \"{OTHER_EVENT_WORDS}\""),
    "cause": ("kind person (someone's account: app, voice, token), automation, script, service (no person) or "
              "unknown (the device, a switch); a name only for those the household allowed"),
    "total": f"entries in the period (truncated: over {MAX_ENTRIES})",
}


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime, notes: ReadNotes | None = None) -> dict[str, Any]:
    """Up to MAX_ENTRIES logbook entries of one allowlisted entity over the period, each with its cause."""
    entity_id = arguments["entity_id"]
    period = arguments["period"]
    # The entity's own state gives its name, and a 404 for an entity Home Assistant lacks.
    state = entity_state(client, entity_id, deadline)
    current = narrow_state(state)
    end = now
    start = end - RECENT_PERIODS[period].length
    picked, total = read_logbook(client, entity_id, start=start, end=end, deadline=deadline)
    causes = CauseNamer(client, config, deadline)
    entries = [shaped_entry(moment, raw, causes) for moment, raw in picked]
    return {
        "entity_id": entity_id,
        "friendly_name": current["friendly_name"],
        "period": period,
        "start": utc_z(start),
        "end": utc_z(end),
        "entries": entries,
        "total": total,
        "truncated": total > MAX_ENTRIES,
        "retrieved_at": utc_z(now),
    }


def read_logbook(client: HomeAssistantClient, entity_id: str, *, start: datetime, end: datetime,
                 deadline: Deadline) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """The entries kept (microseconds, the fields read) spread over [start, end), and how many there were.

    The spreading is get_history's own (`history_digest.Digester`), fed one row per entry: each row's
    state is the entry itself, numbered, so no two rows are equal and every entry counts as a change. The
    Digester keeps O(MAX_ENTRIES) of them whatever the number of entries, so a week is never held whole.
    """
    # A moment before the window: an entry Home Assistant stamps exactly at the start is an entry, not the
    # state in force when the window opened (which is what the Digester makes of a row at its start).
    opened = start - MICROSECOND
    digester = Digester(start=opened, end=end, max_changes=MAX_ENTRIES, unit=None)
    with client.websocket(timeout=deadline.remaining(), max_bytes=MAX_LOGBOOK_BYTES) as connection:
        digester.add(_rows(fetch_logbook_ws(connection, entity_id, start=start, end=end), entity_id,
                           start=_micros(start), end=_micros(end)))
    digest = digester.finish()
    picked = []
    for change in digest.changes:
        _, raw = orjson.loads(change["state"])
        picked.append((raw.pop("_at"), raw))
    return picked, digest.total_changes


def _rows(entries: Iterable[dict[str, Any]], entity_id: str, *, start: int, end: int) -> Iterator[Row]:
    """Each entry of the asked entity as a Digester row: (microseconds, the entry numbered, as JSON text)."""
    number = 0
    for entry in entries:
        if entry.get("entity_id") != entity_id:
            continue  # an event about something else (never the asked entity's): not this entity's logbook
        moment = _moment(entry.get("when"))
        if not start <= moment <= end:
            raise malformed()
        kept = {key: value for key, value in entry.items() if key not in ("when", "entity_id")}
        kept["_at"] = moment
        yield moment, orjson.dumps([number, kept]).decode()
        number += 1


def _moment(when: Any) -> int:
    """Home Assistant's `when` (epoch seconds, a JSON number) as whole microseconds."""
    if type(when) is not float and type(when) is not int:
        raise malformed()
    if not math.isfinite(when) or when < 0:
        raise malformed()
    return round(when * MICROS_PER_SECOND)


def _micros(moment: datetime) -> int:
    return (moment - EPOCH) // MICROSECOND


def shaped_entry(moment: int, raw: Mapping[str, Any], causes: CauseNamer) -> dict[str, Any]:
    """One entry of the result: when, the new state or the event's fixed word, and the cause."""
    entry: dict[str, Any] = {"when": utc_z(EPOCH + timedelta(microseconds=moment))}
    state = raw.get("state")
    if isinstance(state, str):
        entry["state"] = cut(state, STATE_BYTES)
    else:
        domain = raw.get("domain")
        entry["message"] = EVENT_WORDS.get(domain if isinstance(domain, str) else "", OTHER_EVENT_WORDS)
    entry["cause"] = causes.cause_of(raw)
    return entry


class CauseNamer:
    """The cause of an entry, from the context fields Home Assistant's logbook adds, named only when allowed."""

    def __init__(self, client: HomeAssistantClient, config: HomeAssistantConfig, deadline: Deadline) -> None:
        self._client = client
        self._config = config
        self._allowed = frozenset(config.allowlisted_entities)
        self._deadline = deadline
        self._people: dict[str, str] | None = None
        self._names: dict[str, str] = {}

    def cause_of(self, raw: Mapping[str, Any]) -> dict[str, str]:
        """{"kind"} and, when the household allowed its entity, {"name"}.

        What Home Assistant 2025.4.4 sends (seen against the real one, tests/real_ha/test_logbook_real.py):
        an automation's run as `context_event_type` "automation_triggered" with `context_entity_id`; a
        script run as a service (`script.<name>`, `script.turn_on`) as "call_service" with `context_domain`
        "script" and the user who called it; any other service call as "call_service" with its user when
        a person made it; a state written through the API as the writer's `context_user_id` alone. A run
        comes first: the automation or script is what changed the entity, whoever started it.
        """
        event_type = raw.get("context_event_type")
        domain = raw.get("context_domain")
        if isinstance(event_type, str) and event_type in _RUN_EVENTS:
            kind = _RUN_EVENTS[event_type]
            entity = raw.get("context_entity_id")
            name = raw.get("context_name")
            return self._named(kind, self._run_name(kind, entity, name if isinstance(name, str) else None))
        if event_type == "call_service" and domain == "script":
            service = raw.get("context_service")
            entity = f"script.{service}" if isinstance(service, str) and service not in _SCRIPT_SERVICES else None
            return self._named("script", self._run_name("script", entity, None))
        user = raw.get("context_user_id")
        if isinstance(user, str) and user:
            return self._named("person", self.person_named(user))
        if event_type == "call_service":
            return {"kind": "service"}
        return {"kind": "unknown"}

    @staticmethod
    def _named(kind: str, name: str | None) -> dict[str, str]:
        return {"kind": kind} if name is None else {"kind": kind, "name": cut(name, NAME_BYTES)}

    def _run_name(self, kind: str, entity: Any, name: str | None) -> str | None:
        """The automation's or script's name, when its entity is allowlisted (and is of that kind).

        Its name now, from its own state (it is allowlisted: the household lets the assistant read it);
        for one gone from Home Assistant, the name the logbook recorded, else the picker's.
        """
        if not isinstance(entity, str) or not entity.startswith(f"{kind}.") or entity not in self._allowed:
            return None
        if entity not in self._names:
            self._names[entity] = self._friendly_name(entity) or name or self._config.display_name(entity)
        return self._names[entity]

    def _friendly_name(self, entity_id: str) -> str | None:
        """An allowlisted entity's friendly name from its state; None when Home Assistant has no such entity."""
        try:
            state = self._client.state(entity_id, timeout=self._deadline.remaining())
        except HANotFound:
            return None
        if state.get("entity_id") != entity_id:
            return None
        name = narrow_state(state)["friendly_name"]
        return name if isinstance(name, str) and name else None

    def person_named(self, user_id: str) -> str | None:
        """The name of the allowlisted person whose user this is; None for anyone else."""
        if self._people is None:
            self._people = self._read_people()
        return self._people.get(user_id)

    def _read_people(self) -> dict[str, str]:
        """user id → name, from the allowlisted `person.*` entities' own states (and nothing else)."""
        people: dict[str, str] = {}
        for entity_id in sorted(e for e in self._allowed if e.startswith("person.")):
            try:
                state = self._client.state(entity_id, timeout=self._deadline.remaining())
            except HANotFound:
                continue  # allowed, but gone from Home Assistant: no one to name
            attributes = state.get("attributes")
            if state.get("entity_id") != entity_id or not isinstance(attributes, dict):
                continue
            user = attributes.get("user_id")
            if isinstance(user, str) and user:
                people.setdefault(user, narrow_state(state)["friendly_name"] or self._config.display_name(entity_id))
        return people


# --- the card's words: whole sentences with named placeholders (issue 26 translates them as they are) ---------
CARD_TITLE = N_("Read what changed {name} and why?")
READS = N_("The assistant wants to read the logbook of {name} ({entity_id}) over {period}: what changed and why "
           "(a person, an automation, a script or a service). People, automations and scripts are named only if you "
           "allowed them.")


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts = NOTHING_KNOWN) -> Card:
    """Which device, over which period, what the household lets the assistant learn, and where it goes."""
    entity_id = arguments["entity_id"]
    name = config.display_name(entity_id)
    wants = Words(READS, name=name, entity_id=entity_id, period=Words(RECENT_PERIODS[arguments["period"]].words))
    return Card(title=Words(CARD_TITLE, name=name), body=sentences(wants, leaves_device(config)))


ARGUMENTS = entity_and_period(entity("An allowed entity id, such as light.hall", "light.hall"), RECENT_PERIODS)
_CAUSE = {
    "type": "object",
    "required": ["kind"],
    "description": LOGBOOK_FIELD_MEANINGS["cause"],
    "properties": {"kind": {"enum": list(CAUSE_KINDS)}, "name": {"type": "string"}},
    "additionalProperties": False,
}
_ENTRY = {
    "type": "object",
    "required": ["when", "cause"],
    "properties": {
        "when": {**TIMESTAMP_SCHEMA, "description": LOGBOOK_FIELD_MEANINGS["when"]},
        "state": {"type": "string", "description": LOGBOOK_FIELD_MEANINGS["state"]},
        "message": {"enum": [*EVENT_WORDS.values(), OTHER_EVENT_WORDS],
                    "description": LOGBOOK_FIELD_MEANINGS["message"]},
        "cause": _CAUSE,
    },
    # Exactly one of a new state and an event's word.
    "oneOf": [{"required": ["state"]}, {"required": ["message"]}],
    "additionalProperties": False,
}

CAPABILITY = Capability(
    name=NAME,
    description=(
        f"Read one allowed Home Assistant entity's logbook over the past {ONE_OF_THE_RECENT_PERIODS}: up to "
        f"{MAX_ENTRIES} entries spread over the period, each with when, the new state (or what ran), and its "
        "cause: a person, an automation, a script, a service call, or unknown (a switch pressed, the device "
        "itself). People, automations and scripts are named only when the household allowed them. Answers "
        "\"what turned the hall light on at 3 am\". Sensors that measure (with a unit) keep no logbook: "
        "ask get_history for them. Each read asks the household for approval first."
    ),
    arguments_schema=ARGUMENTS.schema,
    argument_messages=ARGUMENTS.messages,
    result_schema={
        "type": "object",
        "required": ["entity_id", "period", "entries", "total", "truncated", "retrieved_at"],
        "properties": {
            "entity_id": {"type": "string"},
            "friendly_name": {"type": "string"},
            "period": choice(RECENT_PERIODS).schema,
            "start": TIMESTAMP_SCHEMA,
            "end": TIMESTAMP_SCHEMA,
            "entries": {"type": "array", "maxItems": MAX_ENTRIES, "items": _ENTRY,
                        "description": LOGBOOK_FIELD_MEANINGS["entries"]},
            "total": {"type": "integer", "minimum": 0, "description": LOGBOOK_FIELD_MEANINGS["total"]},
            "truncated": {"type": "boolean"},
            "retrieved_at": TIMESTAMP_SCHEMA,
        },
        "additionalProperties": False,
    },
    bounds=Bounds(timeout_seconds=10),
    execute=execute,
    card=card,
    activity_words=Words("Logbook of one device: what changed it and why"),
    prompt_summary=f"what changed one device over the past {ONE_OF_THE_RECENT_PERIODS}, and who or what did it.",
    # The entity's state (its name, a 404 for one gone) and the allowlisted person entities' states (whose
    # user is whom), then the logbook over the WebSocket.
    reads=Reads(paths=("/api/states/{entity_id}",), commands=(LOGBOOK_COMMAND,)),
    result_meanings=LOGBOOK_FIELD_MEANINGS,
)
