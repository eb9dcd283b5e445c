"""home_assistant.get_calendar: what is on an allowed calendar today, tomorrow or in the next 7 days.

One GET, `/api/calendars/{entity_id}?start=&end=`, for the events overlapping the period's days, which are
Home Assistant's, not this device's: its time zone is `/api/config`'s, as the kept client last read it
(`HomeAssistantClient.kept_config`, a second GET only when it has none from the last 5 minutes). Each event keeps its
title, times and a short place; a description is never passed on, and a title or place that looks like a
link, a dial-in code or a secret is dropped whole (`household_text`), never cut and passed on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any

from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card, leaves_device, sentences
from console_ha.capabilities.plain_text import HOUSEHOLD_TEXT_CHARS, household_text
from console_ha.capabilities.read_arguments import choice, entity, entity_and_period, one_of
from console_ha.capabilities.spec import TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.capabilities.time_zone import household_zone
from console_ha.deadline import Deadline
from console_ha.errors import HABadResponse, HANotFound
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.language import N_, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z, utc_z_exact

NAME = "home_assistant.get_calendar"
# The one kind of entity it reads: offered only while one is allowlisted (`Capability.answers_for`).
DOMAIN = "calendar"
# The issue's bound: a small model reads at most this many events.
MAX_EVENTS = 50
# A week of a busy calendar with long descriptions stays far below this; the answer is parsed whole.
MAX_CALENDAR_BYTES = 2 * 1024 * 1024
def _midnight(day: date, zone: tzinfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=zone)


@dataclass(frozen=True)
class Period:
    """One period the model may ask for: its days from the household's local now, and the card's title."""

    first_day: int  # days after today
    days: int
    title: str  # the card's whole title, with {name}

    def window(self, local_now: datetime) -> tuple[datetime, datetime]:
        """[start, end) of the period's days in the zone of `local_now`."""
        first = local_now.date() + timedelta(days=self.first_day)
        return _midnight(first, local_now.tzinfo or UTC), _midnight(first + timedelta(days=self.days),
                                                                   local_now.tzinfo or UTC)


PERIODS: dict[str, Period] = {
    "today": Period(0, 1, N_("See what's on {name} today?")),
    "tomorrow": Period(1, 1, N_("See what's on {name} tomorrow?")),
    # Today and the six days after it: "this week" as a household means it, from today.
    "next_7_days": Period(0, 7, N_("See what's on {name} in the next 7 days?")),
}
READS_EVENTS = N_("The assistant wants to read the events on {name} ({entity_id}) for these days: their titles, "
                  "times and places.")
LEFT_OUT = N_("Descriptions, links and dial-in codes are left out.")
ONE_OF_THE_PERIODS = one_of(PERIODS)

# One line (the prompt's budget): without it a small model reads an all-day end as one day too late.
CALENDAR_FIELD_MEANINGS: dict[str, str] = {
    "end": "for all_day, the last day; else a local time, as start",
}


def _moment(value: object, zone: tzinfo) -> tuple[str, datetime, bool]:
    """A calendar time ({"dateTime"} or {"date"}): as the result writes it, as a sortable moment, all-day."""
    if isinstance(value, dict) and isinstance(value.get("dateTime"), str) and len(value) == 1:
        moment = _parse(datetime.fromisoformat, value["dateTime"])
        if moment.tzinfo is None:
            raise wrong_shape()
        try:
            local = moment.astimezone(zone)
        except OverflowError:
            raise wrong_shape() from None  # year 9999 behind a negative offset: past what a datetime holds
        return local.isoformat(timespec="seconds"), local, False
    if isinstance(value, dict) and isinstance(value.get("date"), str) and len(value) == 1:
        day = _parse(date.fromisoformat, value["date"])
        return day.isoformat(), _midnight(day, zone), True
    raise wrong_shape()


def _parse(parse: Callable[[str], Any], text: str) -> Any:
    if len(text) > 40:
        raise wrong_shape()
    try:
        return parse(text)
    except ValueError:
        raise wrong_shape() from None


def event_of(item: object, zone: tzinfo) -> tuple[datetime, dict[str, Any]]:
    """One of Home Assistant's events as the result lists it, with the moment it sorts by."""
    if not isinstance(item, dict):
        raise wrong_shape()
    start, starts, all_day = _moment(item.get("start"), zone)
    end, ends, end_all_day = _moment(item.get("end"), zone)
    if all_day != end_all_day or ends < starts:
        raise wrong_shape()
    if all_day and ends > starts:
        # Home Assistant's all-day end is the day after the last (iCalendar's); a household says the last.
        end = (ends.date() - timedelta(days=1)).isoformat()
    event: dict[str, Any] = {"summary": household_text(item.get("summary")), "start": start, "end": end,
                             "all_day": all_day}
    location = household_text(item.get("location"))
    if location is not None:
        event["location"] = location
    return starts, event


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime, notes: ReadNotes | None = None) -> dict[str, Any]:
    """The events of one allowlisted calendar over the period's days, in start order, at most MAX_EVENTS."""
    entity_id = arguments["entity_id"]
    zone = household_zone(client.kept_config(timeout=deadline.remaining()))
    start, end = PERIODS[arguments["period"]].window(now.astimezone(zone))
    answer = _events_answer(client, entity_id, start, end, deadline)
    if not isinstance(answer, list):
        raise wrong_shape()
    events = [event for _, event in sorted((event_of(item, zone) for item in answer), key=lambda pair: pair[0])]
    return {
        "entity_id": entity_id,
        "period": arguments["period"],
        "time_zone": zone.key,
        "events": events[:MAX_EVENTS],
        "total": len(events),
        "truncated": len(events) > MAX_EVENTS,
        "retrieved_at": utc_z(now),
    }


def _events_answer(client: HomeAssistantClient, entity_id: str, start: datetime, end: datetime,
                   deadline: Deadline) -> Any:
    missing = False
    try:
        return client.get_json(f"/api/calendars/{entity_id}", params={"start": utc_z_exact(start),
                                                                     "end": utc_z_exact(end)},
                               timeout=deadline.remaining(), max_bytes=MAX_CALENDAR_BYTES)
    except (HANotFound, HABadResponse) as err:
        # Home Assistant answers 400 for a calendar it does not have (calendar/__init__.py, CalendarEventView).
        if isinstance(err, HABadResponse) and err.detail.get("status") != 400:
            raise
        missing = True
    if missing:
        raise HANotFound(f"Home Assistant has no calendar {entity_id}; it may have been removed or renamed.",
                         entity_id=entity_id)


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts = NOTHING_KNOWN) -> Card:
    """Which calendar, which days, what of each event is read, and where the request goes."""
    entity_id = arguments["entity_id"]
    name = config.display_name(entity_id)
    wants = Words(READS_EVENTS, name=name, entity_id=entity_id)
    return Card(title=Words(PERIODS[arguments["period"]].title, name=name),
                body=sentences(wants, Words(LEFT_OUT), leaves_device(config)))


def wrong_shape() -> HABadResponse:
    return HABadResponse("Home Assistant answered the calendar request with something other than events.",
                         reason="wrong_shape")


ARGUMENTS = entity_and_period(entity("An allowed calendar, such as calendar.family", "calendar.family", domain=DOMAIN),
                              PERIODS)
_TEXT = {"type": "string", "minLength": 1, "maxLength": HOUSEHOLD_TEXT_CHARS}
_WHEN = {"anyOf": [TIMESTAMP_SCHEMA, {"type": "string", "format": "date"}]}

CAPABILITY = Capability(
    name=NAME,
    description=(
        f"Read the events on one allowed calendar for {ONE_OF_THE_PERIODS} (days in the household's time "
        "zone): title, start, end, all-day and place, in start order, at most 50. Answers \"what's on "
        "tomorrow\". Each read asks the household for approval first."
    ),
    arguments_schema=ARGUMENTS.schema,
    argument_messages=ARGUMENTS.messages,
    result_schema={
        "type": "object",
        "required": ["entity_id", "period", "time_zone", "events", "total", "truncated", "retrieved_at"],
        "properties": {
            "entity_id": {"type": "string"},
            "period": choice(PERIODS).schema,
            "time_zone": {"type": "string"},
            "events": {"type": "array", "maxItems": MAX_EVENTS, "items": {
                "type": "object",
                "required": ["summary", "start", "end", "all_day"],
                "properties": {"summary": {"anyOf": [_TEXT, {"type": "null"}]},
                               "start": _WHEN,
                               "end": {**_WHEN, "description": CALENDAR_FIELD_MEANINGS["end"]},
                               "all_day": {"type": "boolean"}, "location": _TEXT},
                "additionalProperties": False,
            }},
            "total": {"type": "integer", "minimum": 0},
            "truncated": {"type": "boolean"},
            "retrieved_at": TIMESTAMP_SCHEMA,
        },
        "additionalProperties": False,
    },
    bounds=Bounds(timeout_seconds=8),
    execute=execute,
    card=card,
    activity_words=Words("Events on one calendar"),
    prompt_summary="a calendar's events today, tomorrow or in the next 7 days.",
    reads=Reads(paths=("/api/config", "/api/calendars/{entity_id}")),
    result_meanings=CALENDAR_FIELD_MEANINGS,
    answers_for=frozenset({DOMAIN}),
)
