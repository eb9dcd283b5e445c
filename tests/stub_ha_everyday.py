"""Calendars, to-do lists and forecasts for the stub Home Assistant, shaped as Home Assistant 2025.4.4 sends them.

REST `GET /api/calendars/{entity_id}?start=&end=` (events overlapping the window, 400 for a calendar it lacks),
and over the WebSocket `todo/item/list`, `weather/subscribe_forecast` (a `success` result, then one event) and
`unsubscribe_events`. A test can replace any command's messages (`raw`) to play a hostile Home Assistant.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

ZONE = ZoneInfo("Europe/Amsterdam")  # stub_ha.default_config()'s time zone
CALENDAR = "calendar.family"
TODO = "todo.shopping_list"
WEATHER = "weather.home"


def _when(moment: datetime | date) -> dict[str, str]:
    if isinstance(moment, datetime):
        return {"dateTime": moment.astimezone(ZONE).isoformat()}
    return {"date": moment.isoformat()}


def event(summary: str, start: datetime | date, end: datetime | date, **more: Any) -> dict[str, Any]:
    """One event as CalendarEventView answers it (calendar/__init__.py, _api_event_dict_factory)."""
    return {"start": _when(start), "end": _when(end), "summary": summary, "description": None, "location": None,
            "uid": None, "recurrence_id": None, "rrule": None, **more}


class StubEveryday:
    """What the stub answers for calendars, to-do lists and forecasts."""

    COMMANDS = frozenset({"todo/item/list", "weather/subscribe_forecast", "unsubscribe_events"})

    def __init__(self) -> None:
        self.calendars: dict[str, list[dict[str, Any]]] = {}
        self.todo: dict[str, list[dict[str, Any]]] = {}
        self.forecasts: dict[tuple[str, str], list[dict[str, Any]] | None] = {}
        # command -> the messages to send for a message id, instead of Home Assistant's own
        self.raw: dict[str, Callable[[int], list[dict[str, Any]]]] = {}
        # Subscriptions opened and not yet ended (a read leaves none behind)
        self.subscribed: set[int] = set()
        self.unsubscribed: list[int] = []

    def seed(self, now: datetime) -> StubEveryday:
        """A family calendar around `now`, a shopping list, and a home's daily and hourly forecasts."""
        today = now.astimezone(ZONE).date()
        at = lambda day, hour: datetime.combine(today + timedelta(days=day), time(hour), tzinfo=ZONE)  # noqa: E731
        self.calendars[CALENDAR] = [
            event("Dentist", at(1, 9), at(1, 10), location="Main Street 4"),
            event("School trip", today + timedelta(days=1), today + timedelta(days=2)),
            event("Swimming", at(0, 17), at(0, 18), location="Pool"),
            event("Grandma's birthday", today + timedelta(days=4), today + timedelta(days=5)),
            event("Book club", at(10, 20), at(10, 22)),
        ]
        self.todo[TODO] = [
            {"summary": "Milk", "uid": "1", "status": "needs_action"},
            {"summary": "Bread", "uid": "2", "status": "completed"},
            {"summary": "Batteries", "uid": "3", "status": "needs_action",
             "due": (today + timedelta(days=2)).isoformat()},
        ]
        start = datetime.combine(today, time(0), tzinfo=ZONE)
        self.forecasts[(WEATHER, "daily")] = [
            {"datetime": (start + timedelta(days=i)).isoformat(), "condition": "rainy" if i % 2 else "sunny",
             "temperature": 10.0 + i, "templow": 2.0 + i, "precipitation": 1.5 * (i % 2),
             "precipitation_probability": 80 if i % 2 else 10, "wind_speed": 12.5, "humidity": 70}
            for i in range(10)]
        self.forecasts[(WEATHER, "hourly")] = [
            {"datetime": (start + timedelta(hours=i)).isoformat(), "condition": "cloudy", "temperature": 5.0 + i % 5,
             "precipitation": 0.0} for i in range(60)]
        return self

    def calendar(self, entity_id: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        """(status, body) of GET /api/calendars/<entity_id>: the events overlapping [start, end)."""
        if entity_id not in self.calendars:
            return 400, None
        try:
            low = datetime.fromisoformat(query["start"][0].replace("Z", "+00:00"))
            high = datetime.fromisoformat(query["end"][0].replace("Z", "+00:00"))
        except (KeyError, ValueError):
            return 400, None
        return 200, [e for e in self.calendars[entity_id] if _moment(e["start"]) < high and _moment(e["end"]) > low]

    def answer(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """The messages Home Assistant sends for one WebSocket command."""
        command, message_id = str(message.get("type")), int(message.get("id") or 0)
        if command in self.raw:
            return self.raw[command](message_id)
        if command == "todo/item/list":
            items = self.todo.get(str(message.get("entity_id")))
            if items is None:
                return [_failed(message_id, "not_found")]
            return [{"id": message_id, "type": "result", "success": True, "result": {"items": items}}]
        if command == "unsubscribe_events":
            self.subscribed.discard(int(message.get("subscription") or 0))
            self.unsubscribed.append(int(message.get("subscription") or 0))
            return [{"id": message_id, "type": "result", "success": True, "result": None}]
        kind = str(message.get("forecast_type"))
        key = (str(message.get("entity_id")), kind)
        if key not in self.forecasts:
            return [_failed(message_id, "invalid_entity_id")]
        self.subscribed.add(message_id)
        return [{"id": message_id, "type": "result", "success": True, "result": None},
                {"id": message_id, "type": "event", "event": {"type": kind, "forecast": self.forecasts[key]}}]


def _moment(when: dict[str, str]) -> datetime:
    if "dateTime" in when:
        return datetime.fromisoformat(when["dateTime"])
    return datetime.combine(date.fromisoformat(when["date"]), time(0), tzinfo=ZONE)


def _failed(message_id: int, code: str) -> dict[str, Any]:
    return {"id": message_id, "type": "result", "success": False, "error": {"code": code, "message": code}}
