"""History rows as the digest takes them, one decoder per layout: REST events, WebSocket events, WebSocket compact.

Each layout's row rule (which fields, which time) is written once, in `rest_row` and `ws_row`; the walks
over parser events and the compact pieces both call it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO

import ijson

from console_ha.errors import HABadResponse
from console_ha.ha.json_stream import array_pieces, parse_events, take_head
from console_ha.ha.websocket import command_failed
from console_ha.timestamps import utc_z

Row = tuple[int, str]
"""A history row as the digest takes it: (microseconds since the epoch, state)."""

# How deep a history body may nest: the body, an entity's list, a row, its (empty) attributes, and room.
MAX_ROW_DEPTH = 6
# The same over the WebSocket: the message, its result, an entity's list, a row, its attributes, and room.
MAX_WS_DEPTH = 7
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
MICROS_PER_SECOND = 1_000_000
# The start of an answer as Home Assistant writes it (orjson, compact, keys in this order): the fast path.
# The same for every one-entity WebSocket read whose result maps the entity to its rows (statistics too).
COMPACT_HEAD = re.compile(rb'\{"id":(?P<id>[0-9]{1,9}),"type":"result","success":true,"result":'
                           rb'\{"(?P<entity>[a-z0-9_]+\.[a-z0-9_]+)":\[')
_HEAD_BYTES = 512
_ROW_BOUNDARY = b'},{"s":'
_BATCH_BYTES = 64 * 1024  # a 64 KiB piece is about 1,700 rows: about 1 MiB as Python objects
_MAX_ROW_BYTES = 1024 * 1024


# --- the row of each layout ----------------------------------------------------------------------


def rest_row(state: Any, stamp: Any, fallback: Any = None) -> Row:
    """A REST row's state and `last_changed` (ISO 8601 with its offset) as (microseconds, state)."""
    if type(state) is not str or type(stamp) is not str:
        raise malformed()
    try:
        parsed = datetime.fromisoformat(stamp)
    except ValueError:
        raise malformed() from None
    if parsed.tzinfo is None:
        raise malformed()
    return (parsed - EPOCH) // MICROSECOND, state


def ws_row(state: Any, stamp: Any, fallback: Any) -> Row:
    """A compressed row's state and time: `lc` (last changed) where HA sends it, else `lu`; a JSON number only."""
    if type(state) is not str:
        raise malformed()
    if stamp is None:
        stamp = fallback
    if type(stamp) is not float and type(stamp) is not int:  # not a bool, nor text
        raise malformed()
    try:
        return round(stamp * MICROS_PER_SECOND), state
    except OverflowError:  # past 1.8e302 seconds the product is infinite: no time at all
        raise malformed() from None


def row_of(row: object) -> Row:
    """A parsed REST row ({"state", "last_changed"}) as (microseconds, state)."""
    if not isinstance(row, dict):
        raise malformed()
    return rest_row(row.get("state"), row.get("last_changed"))


# --- walks over parser events (REST, and the WebSocket's general path) --------------------------


@dataclass(frozen=True)
class _RowLayout:
    """Where the rows of one kind of history answer sit, the names of their fields, and their decoder."""

    row_depth: int  # how deep each row object sits in the answer
    max_depth: int  # deeper than this is refused as it arrives
    state_key: str
    time_key: str
    # None, not "", where there is none: "" is a key JSON allows, and a row holding it must not count.
    fallback_time_key: str | None  # read when time_key is absent or null
    entity_key: str | None  # a field that, when present, must name the entity asked for
    decode: Callable[[Any, Any, Any], Row]  # (state, time, fallback time) as a row, checked


_REST_LAYOUT = _RowLayout(row_depth=3, max_depth=MAX_ROW_DEPTH, state_key="state", time_key="last_changed",
                          fallback_time_key=None, entity_key="entity_id", decode=rest_row)
# `lc` (last changed) is present only where the state last changed before `lu` (last updated).
_WS_LAYOUT = _RowLayout(row_depth=4, max_depth=MAX_WS_DEPTH, state_key="s", time_key="lc",
                        fallback_time_key="lu", entity_key=None, decode=ws_row)


def _event_rows(events: Iterable[tuple[str, Any]], entity_id: str, layout: _RowLayout, *,
                enter: Callable[[int, str, str], None], value: Callable[[int, str, Any], None]) -> Iterator[Row]:
    """The one walk over a history answer's parser events, for REST and the WebSocket alike.

    Each object at the layout's row depth is read into a row by the layout's decoder; `enter` checks each
    container above the rows as it opens (depth, event, its key), and `value` each plain value outside a row.
    This loop runs once an event, a million times for a chatty week: a row's fields are kept in locals.
    """
    row_depth, max_depth, decode = layout.row_depth, layout.max_depth, layout.decode
    state_key, time_key, fallback_key, entity_key = (layout.state_key, layout.time_key,
                                                     layout.fallback_time_key, layout.entity_key)
    depth = 0
    key = ""
    state: Any = None
    stamp: Any = None
    fallback: Any = None
    other: Any = entity_id
    for event, item in events:
        if event == "map_key":
            key = item
        elif event == "start_map" or event == "start_array":
            depth += 1
            if depth == row_depth:
                if event != "start_map":
                    raise malformed()  # a row is an object
                state = stamp = fallback = None
                other = entity_id
            elif depth > max_depth:
                raise malformed()
            elif depth < row_depth:
                enter(depth, event, key)
        elif event == "end_map" or event == "end_array":
            if depth == row_depth:
                if other != entity_id:
                    raise other_entity()
                yield decode(state, stamp, fallback)
            depth -= 1
        elif depth == row_depth:
            if key == state_key:
                state = item
            elif key == time_key:
                stamp = item
            elif key == fallback_key:
                fallback = item
            elif key == entity_key:
                other = item
        else:
            value(depth, key, item)


def rest_rows(body: BinaryIO, entity_id: str) -> Iterator[Row]:
    """The rows of a `[[row, ...]]` body (one entity's {"state", "last_changed"} rows), refusing any other shape."""

    def enter(depth: int, event: str, key: str) -> None:
        if event != "start_array":
            raise wrong_shape()  # the body and each entity's history are lists

    def value(depth: int, key: str, item: Any) -> None:
        if depth < 2:
            raise wrong_shape()
        if depth < 3:
            raise malformed()  # a row that is not an object
        # Deeper: a value inside a row's attributes, which the digest does not read.

    # Returned, not delegated with `yield from`: a second generator frame would cost each row a hop.
    return _event_rows(ijson.basic_parse(body, use_float=True), entity_id, _REST_LAYOUT, enter=enter, value=value)


def ws_rows(events: Iterable[tuple[str, Any]], entity_id: str, message_id: int) -> Iterator[Row]:
    """The rows of Home Assistant's `history/history_during_period` answer, from its parser events.

    The message is `{"id", "type": "result", "success", "result": {entity_id: [{"s", "lu", "lc"?}, ...]}}`
    (or `"error"` in place of `"result"`): times are epoch seconds.
    """
    section = ""  # the top-level key being read: "result" or "error"
    envelope: dict[str, Any] = {}
    error: dict[str, Any] = {}

    def enter(depth: int, event: str, key: str) -> None:
        nonlocal section
        if depth == 1:
            if event != "start_map":
                raise wrong_shape()
        elif depth == 2:
            section = key
            if event != "start_map" or section not in ("result", "error"):
                raise wrong_shape()
        elif section != "result" or event != "start_array":
            raise wrong_shape()
        elif key != entity_id:
            raise other_entity()

    def value(depth: int, key: str, item: Any) -> None:
        if depth == 1:
            envelope[key] = item
        elif depth == 2 and section == "error":
            error[key] = item
        elif depth != 5:
            raise wrong_shape()  # only a row's attributes (depth 5) may hold values the digest skips

    yield from _event_rows(events, entity_id, _WS_LAYOUT, enter=enter, value=value)
    if envelope.get("id") != message_id or envelope.get("type") != "result":
        raise wrong_shape()
    if envelope.get("success") is not True:
        raise command_failed(str(error.get("code", "")))


# --- the WebSocket's compact answer, in orjson pieces ---------------------------------------------


def ws_row_batches(chunks: Iterator[bytes], entity_id: str, message_id: int) -> Iterator[Iterable[Row]]:
    """The rows of the answer, in batches: cut at row boundaries and parsed by orjson where HA's own
    compact layout allows (json_stream.array_pieces), else through parser events (ws_rows).

    Anything that is not a valid history fails in orjson, in the checks on each row, or at the end of the
    message.
    """
    head = take_head(chunks, _HEAD_BYTES)
    match = COMPACT_HEAD.match(head)
    if match is None or int(match["id"]) != message_id:
        # Not the layout Home Assistant writes (an error, another id, spaces): the general path decides.
        yield ws_rows(parse_events(itertools.chain((bytes(head),), chunks)), entity_id, message_id)
        return
    if match["entity"].decode() != entity_id:
        raise other_entity()
    del head[:match.end() - 1]  # from the rows' `[`
    # A bad time or state is a malformed row, found in the rows' one pass (no row is ever anywhere near
    # _MAX_ROW_BYTES long without attributes).
    for items in array_pieces(head, chunks, boundary=_ROW_BOUNDARY, tail=b"}}", piece_bytes=_BATCH_BYTES,
                              max_item_bytes=_MAX_ROW_BYTES, invalid=invalid_json, too_long=malformed):
        yield compact_rows(items)


def compact_rows(items: list[Any]) -> list[Row]:
    """A parsed list of compressed rows ({"s", "lu", "lc"?}) as (microseconds, state), checked in one pass."""
    try:
        return [ws_row(item["s"], item.get("lc"), item.get("lu")) for item in items]
    except (TypeError, KeyError, AttributeError):  # a row that is not an object, or without a state
        raise malformed() from None


# --- what a bad answer is -------------------------------------------------------------------------


def invalid_json() -> HABadResponse:
    return HABadResponse("Home Assistant's history could not be read as JSON.", reason="invalid_json")


def other_entity() -> HABadResponse:
    return HABadResponse("Home Assistant answered with the history of another entity.", reason="wrong_shape")


def malformed() -> HABadResponse:
    return HABadResponse("Home Assistant's history had a row without a state or a valid time.",
                         reason="wrong_shape")


def wrong_shape() -> HABadResponse:
    return HABadResponse("Home Assistant answered the history request with something other than a history.",
                         reason="wrong_shape")


def micros(moment: datetime) -> int:
    """An aware moment as whole microseconds since the epoch, the digest's clock."""
    return (moment - EPOCH) // MICROSECOND


def iso_z(micros: int) -> str:
    """Microseconds since the epoch as utc_z writes a moment."""
    return utc_z(EPOCH + timedelta(microseconds=micros))
