"""home_assistant.get_todo: the items of an allowed to-do list (a shopping list), those still to do by default.

One WebSocket command, `todo/item/list` (Home Assistant has no REST read of a list's items); it answers the
list's items in the list's own order. Each item keeps its title (dropped when it looks like a link, a
dial-in code or a secret, as a calendar's), its status and its due date; a description is never passed on.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card, leaves_device, sentences
from console_ha.capabilities.plain_text import HOUSEHOLD_TEXT_CHARS, household_text
from console_ha.capabilities.read_arguments import choice, declared, entity
from console_ha.capabilities.spec import TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.deadline import Deadline
from console_ha.errors import HABadResponse, HANotFound
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.ha.websocket import TODO_COMMAND
from console_ha.language import N_, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z

NAME = "home_assistant.get_todo"
# The one kind of entity it reads: offered only while one is allowlisted (`Capability.answers_for`).
DOMAIN = "todo"
MAX_ITEMS = 100
# A list of a few thousand items with descriptions; the answer is parsed whole.
MAX_TODO_BYTES = 2 * 1024 * 1024
# Home Assistant's item statuses (todo/const.py, TodoItemStatus).
ITEM_STATUSES = ("needs_action", "completed")
# What the model may ask for; each with the card's whole title ({name} is the list's name).
STATUSES: dict[str, str] = {
    "needs_action": N_("See the {name}?"),
    "completed": N_("See what is done on the {name}?"),
    "all": N_("See everything on the {name}?"),
}
READS_ITEMS = N_("The assistant wants to read the items on {name} ({entity_id}): their titles, whether they are "
                 "done and when they are due.")
LEFT_OUT = N_("Descriptions are left out.")
_NAMES = list(STATUSES)
# The longest due Home Assistant writes: a date-time with microseconds and an offset.
_MAX_DUE_CHARS = 40


def _due(value: object) -> str | None:
    """A due date or date-time as ISO 8601 writes it (as Home Assistant does); anything else is a bad answer.

    Written out again, not passed on as it came: Python also reads week dates ("2026-W49-5") and the basic
    format ("20261205T100000Z"), which a small model would misread.
    """
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > _MAX_DUE_CHARS:
        raise wrong_shape()
    try:
        if len(value) == 10:
            return date.fromisoformat(value).isoformat()
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise wrong_shape() from None
    if moment.tzinfo is None:
        raise wrong_shape()
    return moment.isoformat()


def item_of(item: object) -> dict[str, Any]:
    """One of Home Assistant's items as the result lists it."""
    if not isinstance(item, dict) or item.get("status") not in ITEM_STATUSES:
        raise wrong_shape()
    listed: dict[str, Any] = {"summary": household_text(item.get("summary")), "status": item["status"]}
    due = _due(item.get("due"))
    if due is not None:
        listed["due"] = due
    return listed


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime, notes: ReadNotes | None = None) -> dict[str, Any]:
    """The items of one allowlisted to-do list with the asked status, in the list's order, at most MAX_ITEMS."""
    entity_id = arguments["entity_id"]
    status = arguments.get("status", "needs_action")
    answer = _items_answer(client, entity_id, deadline)
    items = answer.get("items") if isinstance(answer, dict) else None
    if not isinstance(items, list):
        raise wrong_shape()
    kept = [listed for listed in map(item_of, items) if status == "all" or listed["status"] == status]
    return {
        "entity_id": entity_id,
        "status": status,
        "items": kept[:MAX_ITEMS],
        "total": len(kept),
        "truncated": len(kept) > MAX_ITEMS,
        "retrieved_at": utc_z(now),
    }


def _items_answer(client: HomeAssistantClient, entity_id: str, deadline: Deadline) -> Any:
    missing = False
    try:
        with client.websocket(timeout=deadline.remaining(), max_bytes=MAX_TODO_BYTES) as connection:
            return connection.command({"type": TODO_COMMAND, "entity_id": entity_id})
    except HABadResponse as err:
        # Home Assistant answers `not_found` for a list it does not have: a command failure here.
        if err.detail.get("reason") != "command_failed":
            raise
        missing = True
    if missing:
        raise HANotFound(f"Home Assistant has no to-do list {entity_id}; it may have been removed or renamed.",
                         entity_id=entity_id)


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts = NOTHING_KNOWN) -> Card:
    """Which list, which of its items, and where the request goes."""
    entity_id = arguments["entity_id"]
    name = config.display_name(entity_id)
    wants = Words(READS_ITEMS, name=name, entity_id=entity_id)
    return Card(title=Words(STATUSES[arguments.get("status", "needs_action")], name=name),
                body=sentences(wants, Words(LEFT_OUT), leaves_device(config)))


def wrong_shape() -> HABadResponse:
    return HABadResponse("Home Assistant answered the to-do request with something other than items.",
                         reason="wrong_shape")


ARGUMENTS = declared(("entity_id",), entity_id=entity("An allowed list, such as todo.shopping_list",
                                                     "todo.shopping_list", domain=DOMAIN),
                     status=choice(STATUSES, default="needs_action"))
_TEXT = {"type": "string", "minLength": 1, "maxLength": HOUSEHOLD_TEXT_CHARS}

CAPABILITY = Capability(
    name=NAME,
    description=(
        "Read the items of one allowed to-do list (a shopping list): title, status and due date, in the "
        "list's order, at most 100; by default those still to do. Answers \"what's on the shopping list\". "
        "Each read asks the household for approval first."
    ),
    arguments_schema=ARGUMENTS.schema,
    argument_messages=ARGUMENTS.messages,
    result_schema={
        "type": "object",
        "required": ["entity_id", "status", "items", "total", "truncated", "retrieved_at"],
        "properties": {
            "entity_id": {"type": "string"},
            "status": {"type": "string", "enum": _NAMES},
            "items": {"type": "array", "maxItems": MAX_ITEMS, "items": {
                "type": "object",
                "required": ["summary", "status"],
                "properties": {"summary": {"anyOf": [_TEXT, {"type": "null"}]},
                               "status": {"enum": list(ITEM_STATUSES)},
                               "due": {"anyOf": [TIMESTAMP_SCHEMA, {"type": "string", "format": "date"}]}},
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
    activity_words=Words("Items on one to-do list"),
    prompt_summary="a to-do or shopping list's items, those still to do by default.",
    reads=Reads(commands=(TODO_COMMAND,)),
    answers_for=frozenset({DOMAIN}),
)
