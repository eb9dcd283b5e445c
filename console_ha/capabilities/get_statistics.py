"""home_assistant.get_statistics: how much an allowed meter used, or how warm a measurement was, by day or month.

Home Assistant keeps long-term statistics (hourly, for good) for entities with a state class. One read is
one WebSocket connection: `get_config` (the household's time zone) and the entity's statistics metadata
(whether it keeps any, meter or measurement, and the unit) sent together, then one
`recorder/statistics_during_period` of hourly rows, folded here into days (month periods) or months (year
periods) in that time zone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card, leaves_device, sentences
from console_ha.capabilities.entity_budget import CAP_LEVELS, cut
from console_ha.capabilities.read_arguments import choice, entity, entity_and_period, one_of
from console_ha.capabilities.spec import TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.capabilities.time_zone import household_zone
from console_ha.deadline import Deadline
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.ha.statistics import fetch_rows, metadata_command, metadata_of
from console_ha.ha.statistics_digest import StatisticsDigester
from console_ha.ha.websocket import CONFIG_COMMAND, STATISTICS_COMMAND, STATISTICS_METADATA_COMMAND
from console_ha.language import N_, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z

NAME = "home_assistant.get_statistics"
# The metadata and a year of hourly rows (about 100 bytes a row: under a megabyte) with room to spare; the
# rows are parsed a piece at a time as they arrive, so this bounds the time spent, not what is held.
MAX_STATISTICS_BYTES = 8 * 1024 * 1024
# The issue's bound on a result: a small model reads it whole (31 daily points fit in about 2.5 KiB).
RESULT_BUDGET_BYTES = 8 * 1024
# The unit is Home Assistant's text, of any length: cut as list_entities cuts a unit (controls and bidi dropped),
# so the result stays within RESULT_BUDGET_BYTES whatever it sends. "kWh", "m³", "µg/m³" are whole.
UNIT_BYTES = CAP_LEVELS[0].unit

Window = Callable[[datetime], tuple[datetime, datetime]]


def _midnight(day: date, zone: Any) -> datetime:
    return datetime.combine(day, time(0), tzinfo=zone)


def _month_start(moment: datetime) -> datetime:
    return _midnight(moment.date().replace(day=1), moment.tzinfo)


def _months_later(month_start: datetime, months: int) -> datetime:
    years, month = divmod(month_start.month - 1 + months, 12)
    return _midnight(date(month_start.year + years, month + 1, 1), month_start.tzinfo)


def _year_start(moment: datetime) -> datetime:
    return _midnight(date(moment.year, 1, 1), moment.tzinfo)


@dataclass(frozen=True)
class Period:
    """One period the model may ask for: its bounds from the household's local now, its points, its words."""

    window: Window  # local now -> [start, end), both local
    monthly: bool  # points per month (year periods) rather than per day (month periods)
    words: str  # "the past 30 days": the card's title reads "for {words}"
    when: str  # "in the past 30 days": the card's body reads "how much it used {when}"


# Translators: `words` reads after "for" in a statistics card's title and first sentence ("for this month");
# `when` reads at the end of "They say how much it counted …" ("in the past 30 days").
PERIODS: dict[str, Period] = {
    "this_month": Period(lambda now: (_month_start(now), now), False, N_("this month"), N_("this month")),
    "last_month": Period(lambda now: (_months_later(_month_start(now), -1), _month_start(now)), False,
                         N_("last month"), N_("last month")),
    # 30 calendar days: today (so far) and the 29 before it.
    "past_30_days": Period(lambda now: (_midnight(now.date() - timedelta(days=29), now.tzinfo), now), False,
                           N_("the past 30 days"), N_("in the past 30 days")),
    "this_year": Period(lambda now: (_year_start(now), now), True, N_("this year"), N_("this year")),
    "last_year": Period(lambda now: (_year_start(_year_start(now) - timedelta(days=1)), _year_start(now)), True,
                        N_("last year"), N_("last year")),
    # 12 calendar months: this one (so far) and the 11 before it.
    "past_12_months": Period(lambda now: (_months_later(_month_start(now), -11), now), True,
                             N_("the past 12 months"), N_("in the past 12 months")),
}
ONE_OF_THE_PERIODS = one_of(PERIODS)
ARGUMENTS = entity_and_period(entity("An allowed entity id, such as sensor.energy_consumption",
                                     "sensor.energy_consumption"), PERIODS)

STATISTICS_FIELD_MEANINGS: dict[str, str] = {
    "kind": "meter (energy, water: how much was used) or measurement (temperature: mean, min, max)",
    "points": "per day (month periods) or month (year periods), oldest first, on the household's calendar",
    "change": "how much the meter counted up (in unit)",
    "mean": "the average of the hours with statistics",
    "min_at": "the first hour at the period's lowest",
    "max_at": "the first hour at the period's highest",
    "hours": "hours with statistics (some may be missing)",
    "summary": "null when no hour of the period has statistics",
}


def calendar(period: Period, start: datetime, end: datetime) -> tuple[list[int], list[str]]:
    """The bounds of each day or month in [start, end) as epoch milliseconds, and their labels."""
    bounds: list[int] = []
    labels: list[str] = []
    moment = start
    while moment < end:
        bounds.append(round(moment.timestamp() * 1000))
        if period.monthly:
            labels.append(f"{moment.year:04d}-{moment.month:02d}")
            moment = _months_later(moment, 1)
        else:
            labels.append(moment.date().isoformat())
            moment = _midnight(moment.date() + timedelta(days=1), moment.tzinfo)
    bounds.append(round(end.timestamp() * 1000))
    return bounds, labels


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime, notes: ReadNotes | None = None) -> dict[str, Any]:
    """Daily or monthly points and a summary of one allowlisted entity's long-term statistics over the period."""
    entity_id = arguments["entity_id"]
    period = PERIODS[arguments["period"]]
    with client.websocket(timeout=deadline.remaining(), max_bytes=MAX_STATISTICS_BYTES) as connection:
        # Both small reads in one round trip; the rows' request needs the calendar and the kind from them.
        ha_config, metadata = connection.commands([{"type": CONFIG_COMMAND}, metadata_command(entity_id)])
        zone = household_zone(ha_config)
        meta = metadata_of(metadata, entity_id)
        start, end = period.window(now.astimezone(zone))
        bounds, labels = calendar(period, start, end)
        digester = StatisticsDigester(meta, bounds, labels, label_key="month" if period.monthly else "date")
        for rows in fetch_rows(connection, entity_id, meta, start=start, end=end):
            digester.add(rows)
    points, summary = digester.finish()
    return {
        "entity_id": entity_id,
        "period": arguments["period"],
        "kind": meta.kind,
        "unit": None if meta.unit is None else cut(meta.unit, UNIT_BYTES),
        "time_zone": zone.key,
        "start": utc_z(start),
        "end": utc_z(end),
        "points": points,
        "summary": summary,
        "retrieved_at": utc_z(now.astimezone(UTC)),
    }


# --- the card's words: whole sentences; what the statistics say depends on the kind of reading -----------
CARD_TITLE = N_("Read the statistics of {name} for {period}?")
READS_DAILY = N_("The assistant wants to read Home Assistant's long-term statistics of {name} ({entity_id}) for "
                 "{period}, day by day.")
READS_MONTHLY = N_("The assistant wants to read Home Assistant's long-term statistics of {name} ({entity_id}) for "
                   "{period}, month by month.")
# A meter (a state class of total; with none, an energy, gas or water device class) counts up: its statistics are
# how much; a measurement's are its average, lowest and highest.
METER_WORDS = N_("They say how much {name} counted {when}.")
WARM_WORDS = N_("They say how warm {name} was {when}, on average and at its lowest and highest.")
HIGH_WORDS = N_("They say how high {name} was {when}, on average and at its lowest and highest.")
# Not seen yet (no read of its state since the Console started): both, each said as a condition.
EITHER_WORDS = N_("The Console learns only when it reads them whether {name} is a meter or a measurement: for a "
                  "meter they say how much it counted {when}; for a measurement, its average, lowest and highest.")


def kind_words(entity_id: str, facts: CardFacts) -> str:
    """What the statistics say of `entity_id`, by its kind of reading as the Console last saw it."""
    traits = facts.traits_for(entity_id)
    if traits is None:
        return EITHER_WORDS
    if traits.is_meter:
        return METER_WORDS
    return WARM_WORDS if traits.device_class == "temperature" else HIGH_WORDS


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts = NOTHING_KNOWN) -> Card:
    """Which device, over which period, what the household lets the assistant learn, and where it goes."""
    entity_id = arguments["entity_id"]
    name = config.display_name(entity_id)
    period = PERIODS[arguments["period"]]
    reads = Words(READS_MONTHLY if period.monthly else READS_DAILY, name=name, entity_id=entity_id,
                  period=Words(period.words))
    says = Words(kind_words(entity_id, facts), name=name, when=Words(period.when))
    return Card(title=Words(CARD_TITLE, name=name, period=Words(period.words)),
                body=sentences(reads, says, leaves_device(config)))


_NUMBER_OR_NULL = {"type": ["number", "null"]}
_MEASUREMENT_POINT = {
    "type": "object",
    "required": ["mean", "min", "max"],
    "properties": {"date": {"type": "string", "format": "date"},
                   "month": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"},
                   "mean": _NUMBER_OR_NULL, "min": _NUMBER_OR_NULL, "max": _NUMBER_OR_NULL},
    "oneOf": [{"required": ["date"]}, {"required": ["month"]}],
    "additionalProperties": False,
}
_METER_POINT = {
    "type": "object",
    "required": ["change"],
    "properties": {"date": {"type": "string", "format": "date"},
                   "month": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"},
                   "change": {"type": "number", "description": STATISTICS_FIELD_MEANINGS["change"]}},
    "oneOf": [{"required": ["date"]}, {"required": ["month"]}],
    "additionalProperties": False,
}
_HOURS = {"type": "integer", "minimum": 0, "description": STATISTICS_FIELD_MEANINGS["hours"]}
_MEASUREMENT_SUMMARY = {
    "type": "object",
    "required": ["mean", "min", "min_at", "max", "max_at", "hours"],
    "properties": {
        "mean": {**_NUMBER_OR_NULL, "description": STATISTICS_FIELD_MEANINGS["mean"]},
        "min": _NUMBER_OR_NULL,
        "min_at": {**TIMESTAMP_SCHEMA, "type": ["string", "null"], "description": STATISTICS_FIELD_MEANINGS["min_at"]},
        "max": _NUMBER_OR_NULL,
        "max_at": {**TIMESTAMP_SCHEMA, "type": ["string", "null"], "description": STATISTICS_FIELD_MEANINGS["max_at"]},
        "hours": _HOURS,
    },
    "additionalProperties": False,
}
_METER_SUMMARY = {
    "type": "object",
    "required": ["change", "hours"],
    "properties": {"change": {"type": "number", "description": STATISTICS_FIELD_MEANINGS["change"]},
                   "hours": _HOURS},
    "additionalProperties": False,
}
# The days of the longest month period, or the months of the longest year period.
MAX_POINTS = 31

CAPABILITY = Capability(
    name=NAME,
    description=(
        "Read one allowed Home Assistant entity's long-term statistics over a calendar period "
        f"({ONE_OF_THE_PERIODS}; in the household's time zone): a point per day for month periods, per month "
        "for year periods, and a summary. A meter (energy, water, gas) gives how much it used (change); a "
        "measurement (temperature, humidity) gives mean, min and max, with when the period's min and max "
        "were reached. Answers \"how much electricity did we use last month\" and \"was November colder "
        "than October\". For the past hour, day or week use get_history. Each read asks the household for "
        "approval first."
    ),
    arguments_schema=ARGUMENTS.schema,
    argument_messages=ARGUMENTS.messages,
    result_schema={
        "type": "object",
        "required": ["entity_id", "period", "kind", "unit", "time_zone", "start", "end", "points", "summary",
                     "retrieved_at"],
        "properties": {
            "entity_id": {"type": "string"},
            "period": choice(PERIODS).schema,
            "kind": {"enum": ["meter", "measurement"], "description": STATISTICS_FIELD_MEANINGS["kind"]},
            "unit": {"type": ["string", "null"], "maxLength": UNIT_BYTES},
            "time_zone": {"type": "string"},
            "start": TIMESTAMP_SCHEMA,
            "end": TIMESTAMP_SCHEMA,
            "points": {"type": "array", "maxItems": MAX_POINTS, "description": STATISTICS_FIELD_MEANINGS["points"],
                       "items": {"oneOf": [_MEASUREMENT_POINT, _METER_POINT]}},
            "summary": {"oneOf": [_MEASUREMENT_SUMMARY, _METER_SUMMARY, {"type": "null"}],
                        "description": STATISTICS_FIELD_MEANINGS["summary"]},
            "retrieved_at": TIMESTAMP_SCHEMA,
        },
        "additionalProperties": False,
    },
    bounds=Bounds(timeout_seconds=10),
    execute=execute,
    card=card,
    activity_words=Words("Statistics of one device by day or month"),
    prompt_summary="a meter's use, or a measurement's mean, min and max, by day or month over months or a year.",
    # On one WebSocket: the configuration (its time zone) and the statistics metadata, then the hourly rows.
    reads=Reads(commands=(CONFIG_COMMAND, STATISTICS_METADATA_COMMAND, STATISTICS_COMMAND)),
    result_meanings=STATISTICS_FIELD_MEANINGS,
)
