"""One entity's long-term statistics from Home Assistant's recorder: what it keeps, and its hourly rows as they stream.

Commands on one WebSocket connection: `recorder/get_statistics_metadata` says whether the entity keeps
statistics at all, whether they are a meter's (a sum) or a measurement's (a mean, a minimum and a maximum)
and in which unit Home Assistant shows them; `recorder/statistics_during_period` then gives the hourly rows.
The rows of a year are about a megabyte: they are cut at row boundaries and parsed by orjson a piece at a
time as the frames arrive (`json_stream.array_pieces`), never held whole. The calendar (days, months) is
the caller's: see `statistics_digest`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from console_ha.errors import HABadResponse, HANoStatistics
from console_ha.ha.addresses import is_entity_id
from console_ha.ha.history_rows import COMPACT_HEAD
from console_ha.ha.json_stream import array_pieces, take_head
from console_ha.ha.websocket import (
    STATISTICS_COMMAND,
    STATISTICS_METADATA_COMMAND,
    HomeAssistantWebSocket,
    command_failed,
)
from console_ha.timestamps import utc_z_exact

# Home Assistant's mean types (recorder/models/statistics.py, StatisticMeanType): none, arithmetic, circular.
MEAN_ARITHMETIC = 1
MEAN_CIRCULAR = 2
# The row fields asked for, by kind: a meter's change in each hour, a measurement's mean, minimum and maximum.
METER_TYPES = ("change",)
MEASUREMENT_TYPES = ("mean", "min", "max")

_HEAD_BYTES = 512
# Home Assistant writes each row's `start` first (recorder/statistics.py, _sorted_statistics_to_dict), and no
# row holds a string: `},{"start":` is only ever the boundary between two rows.
_ROW_BOUNDARY = b'},{"start":'
_BATCH_BYTES = 64 * 1024
_MAX_ROW_BYTES = 64 * 1024


@dataclass(frozen=True)
class StatisticsMeta:
    """What Home Assistant keeps for one entity: a meter's sums or a measurement's means, and their unit."""

    kind: str  # "meter" or "measurement"
    unit: str | None
    circular: bool = False  # a measurement of an angle (a wind direction): its mean is a direction's

    @property
    def types(self) -> tuple[str, ...]:
        """The row fields to ask for."""
        return METER_TYPES if self.kind == "meter" else MEASUREMENT_TYPES


def metadata_command(entity_id: str) -> dict[str, Any]:
    """The WebSocket command for one entity's statistics metadata."""
    if not is_entity_id(entity_id):
        raise ValueError("entity_id must look like domain.object_id")
    return {"type": STATISTICS_METADATA_COMMAND, "statistic_ids": [entity_id]}


def statistics_command(entity_id: str, meta: StatisticsMeta, *, start: datetime, end: datetime) -> dict[str, Any]:
    """The WebSocket command for one entity's hourly statistics in [start, end), only the fields its kind has."""
    if not is_entity_id(entity_id):
        raise ValueError("entity_id must look like domain.object_id")
    return {"type": STATISTICS_COMMAND, "start_time": utc_z_exact(start), "end_time": utc_z_exact(end),
            "statistic_ids": [entity_id], "period": "hour", "types": list(meta.types)}


def metadata_of(answer: Any, entity_id: str) -> StatisticsMeta:
    """What Home Assistant keeps for `entity_id`, from its metadata answer; HANoStatistics when it keeps none."""
    if not isinstance(answer, list):
        raise wrong_shape()
    for item in answer:
        if isinstance(item, dict) and item.get("statistic_id") == entity_id:
            return meta_of(item, entity_id)
    raise no_statistics(entity_id)


def meta_of(item: dict[str, Any], entity_id: str) -> StatisticsMeta:
    """One metadata entry (`list_statistic_ids`'s shape) as what the digest needs."""
    unit = item.get("display_unit_of_measurement", item.get("statistics_unit_of_measurement"))
    if unit is not None and not isinstance(unit, str):
        raise wrong_shape()
    if item.get("has_sum") is True:
        return StatisticsMeta("meter", unit)
    mean_type = item.get("mean_type")
    if mean_type == MEAN_CIRCULAR:
        return StatisticsMeta("measurement", unit, circular=True)
    if mean_type == MEAN_ARITHMETIC or item.get("has_mean") is True:
        return StatisticsMeta("measurement", unit)
    raise no_statistics(entity_id)  # metadata without a sum or a mean: nothing to read


def fetch_rows(connection: HomeAssistantWebSocket, entity_id: str, meta: StatisticsMeta, *, start: datetime,
               end: datetime) -> Iterator[list[Any]]:
    """The hourly rows in [start, end) as Home Assistant sends them (objects), in batches as they arrive."""
    message_id, chunks = connection.stream(statistics_command(entity_id, meta, start=start, end=end))
    head = take_head(chunks, _HEAD_BYTES)
    match = COMPACT_HEAD.match(head)
    if match is None or int(match["id"]) != message_id:
        # Not the compact layout Home Assistant writes for rows (an empty result, an error, another id):
        # such an answer is small, and is read whole within the connection's byte bound.
        yield _whole_answer_rows(itertools.chain((bytes(head),), chunks), entity_id, meta, message_id)
        return
    if match["entity"].decode() != entity_id:
        raise wrong_shape()
    del head[:match.end() - 1]  # from the rows' `[`
    for items in array_pieces(head, chunks, boundary=_ROW_BOUNDARY, tail=b"}}", piece_bytes=_BATCH_BYTES,
                              max_item_bytes=_MAX_ROW_BYTES, invalid=invalid_json, too_long=wrong_shape):
        yield rows_of(items)


def rows_of(items: Any) -> list[Any]:
    """A parsed batch of rows, as the digest takes it: a list (each row is checked as the digest folds it in)."""
    if not isinstance(items, list):
        raise wrong_shape()
    return items


def _whole_answer_rows(chunks: Iterable[bytes], entity_id: str, meta: StatisticsMeta,
                       message_id: int) -> list[Any]:
    body = bytearray()
    for chunk in chunks:
        body += chunk
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise invalid_json() from None
    if not isinstance(answer, dict) or answer.get("id") != message_id or answer.get("type") != "result":
        raise wrong_shape()
    if answer.get("success") is not True:
        error = answer.get("error")
        raise command_failed(str(error.get("code", "")) if isinstance(error, dict) else "")
    result = answer.get("result")
    if not isinstance(result, dict) or set(result) - {entity_id}:
        raise wrong_shape()
    return rows_of(result.get(entity_id, []))


# --- what a refusal or a bad answer is ------------------------------------------------------------


def no_statistics(entity_id: str) -> HANoStatistics:
    return HANoStatistics(f"Home Assistant keeps no long-term statistics for {entity_id}.")


def invalid_json() -> HABadResponse:
    return HABadResponse("Home Assistant's statistics could not be read as JSON.", reason="invalid_json")


def wrong_shape() -> HABadResponse:
    return HABadResponse("Home Assistant answered the statistics request with something other than statistics.",
                         reason="wrong_shape")
