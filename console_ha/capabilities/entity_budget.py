"""list_entities' 64 KiB: how each entry's text is bounded, and what each allowlisted entity costs of it.

A save is refused when the allowlist's worst case does not fit (config_store), the picker shows each
entity's cost (web/settings_api.py), and list_entities cuts names and states no further than it must. Every
result also carries its instance's id, added by the executor after the read: the budget counts it at its longest.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from console_ha.capabilities.spec import DEFAULT_MAX_RESULT_BYTES, INSTANCE
from console_ha.errors import InvalidSettingsChange
from console_ha.store.datadir import MAX_INSTANCE_ID_LENGTH
from console_ha.timestamps import utc_z

# list_entities' bound (list_entities.py declares it from here): the budget below is what it leaves.
MAX_RESULT_BYTES = DEFAULT_MAX_RESULT_BYTES
# The executor adds the instance's id to every result after the read (`"instance": id`, the id at its longest,
# and its comma): list_entities fits its entries into what that leaves.
INSTANCE_BYTES = len(f',"{INSTANCE}":"{"x" * MAX_INSTANCE_ID_LENGTH}"'.encode())
FIT_BYTES = MAX_RESULT_BYTES - INSTANCE_BYTES
# Marks text that was cut to fit; one character (3 bytes), counted inside the cap.
CUT_MARK = "…"


@dataclass(frozen=True)
class TextCaps:
    """The most bytes (compact UTF-8 JSON, escapes included) a result's name, state, unit and area may take."""

    name: int
    state: int
    unit: int
    # An area's name: Home Assistant sets no bound on it, so list_entities sets its own (issue 18).
    area: int = 0


# list_entities' text bounds, roomiest to tightest: it uses the roomiest level whose result fits its
# 64 KiB, and a save guarantees the tightest. 32 bytes of state keep a timestamp state
# ("2026-11-30T10:00:00+00:00") whole. Its result schema's maxLengths are the roomiest level. An area's
# name is kept whole to 48 bytes, and to 24 at the tightest: "Master bedroom", "Salle à manger" and most
# rooms households name fit whole; a longer one is cut like any name (issue 18).
CAP_LEVELS: tuple[TextCaps, ...] = (TextCaps(96, 64, 16, 48), TextCaps(48, 48, 12, 32), TextCaps(24, 32, 8, 24))
GUARANTEED = CAP_LEVELS[-1]
_SAMPLE_TIME = "2000-01-01T00:00:00Z"  # every last_changed is written in exactly this many bytes


def json_size(value: Any) -> int:
    """Bytes of `value` as the executor measures a result: compact JSON, UTF-8, non-ASCII unescaped."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8"))


# JSON escapes these two (as two bytes) among what cut keeps; control characters are dropped.
_ESCAPED = frozenset('"\\')
_MARK_BYTES = len(CUT_MARK.encode("utf-8"))
# A name, state or unit is read this far at most: a megabyte-long "name" costs no more time than
# a long one, and whatever lies beyond is cut.
SCAN_CHARS = 1024


def cut(text: str, max_bytes: int) -> str:
    """`text` without control or format characters, cut to `max_bytes` as JSON, ending in CUT_MARK if cut.

    One pass that stops at the cap, rather than dumping candidates to JSON, because list_entities may
    shape hundreds of entries three times over within its deadline.
    """
    kept: list[str] = []
    size = 0
    fits_with_mark = 0  # how many of `kept` leave room for the mark
    whole = True
    for index, char in enumerate(text):
        if index >= SCAN_CHARS:
            whole = False
            break
        category = unicodedata.category(char)
        if category in ("Cc", "Cf"):
            # Control and format characters (bidi overrides among them) could make a name read one
            # way and be another.
            continue
        if category == "Cs":
            char = "\ufffd"  # a lone surrogate is not UTF-8 at all
        size += 2 if char in _ESCAPED else len(char.encode("utf-8"))
        if size > max_bytes:
            whole = False
            break
        kept.append(char)
        if size <= max_bytes - _MARK_BYTES:
            fits_with_mark = len(kept)
    if whole:
        return "".join(kept)
    return "".join(kept[:fits_with_mark]) + CUT_MARK


def timestamp(value: object) -> str | None:
    """Home Assistant's time as `utc_z` writes it (always 20 bytes), or None when it is not a time."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = datetime.fromisoformat(value)
        return utc_z(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    except (ValueError, OverflowError):
        return None


def entry(entity_id: str, *, name: str | None, state: str, unit: str | None, last_changed: object,
          unavailable: bool, caps: TextCaps) -> dict[str, Any]:
    """One entity as list_entities returns it: RFC-0018's fields, each variable one within `caps`."""
    return {
        "entity_id": entity_id,
        "friendly_name": cut(name or entity_id, caps.name),
        "domain": entity_id.partition(".")[0],
        "state": cut(state, caps.state),
        "unit_of_measurement": None if unit is None else cut(unit, caps.unit),
        "last_changed": timestamp(last_changed),
        "unavailable": unavailable,
    }


def listed(shaped: dict[str, Any], area: str | None, caps: TextCaps) -> dict[str, Any]:
    """An entry as list_entities lists it: `entry`'s fields and the name of the entity's area (or null)."""
    return {**shaped, "area": None if area is None else cut(area, caps.area)}


def worst_entry_bytes(entity_id: str) -> int:
    """The largest entry list_entities can make for `entity_id` at the GUARANTEED caps, in bytes."""
    worst = entry(entity_id, name="x" * GUARANTEED.name, state="x" * GUARANTEED.state,
                  unit="x" * GUARANTEED.unit, last_changed=_SAMPLE_TIME,
                  unavailable=False,  # "false" is a byte longer than "true"
                  caps=GUARANTEED)
    return json_size(listed(worst, "x" * GUARANTEED.area, GUARANTEED))


# An entity id and its domain are ASCII that JSON never escapes, and every other part of the worst
# entry has a fixed size: so the worst case is this many bytes plus the id and the domain. A formula
# rather than a JSON dump per entity because the picker prices thousands of entities per load;
# tests check it against worst_entry_bytes for any id.
ENTITY_BYTES = worst_entry_bytes("a.a") + 1 - len("a.a") - len("a")


def entity_cost(entity_id: str) -> int:
    """The most bytes one allowlisted entity can add to list_entities' result (its entry and a comma)."""
    return ENTITY_BYTES + len(entity_id) + entity_id.index(".")


# More entities than any allowlist holds (the store's MAX_ALLOWLIST is far below): `total` fits in this.
_MOST_TOTAL = 999_999


def _envelope() -> int:
    # The result's own keys at their largest: `total`, and `areas_known` (there only when false).
    return json_size({"entities": [], "missing_entities": [], "retrieved_at": _SAMPLE_TIME, "total": _MOST_TOTAL,
                      "areas_known": False})


# What the entities may take between them: the bound less the result's own keys and time, and the instance's
# id the executor adds. An entity Home Assistant lacks is listed in missing_entities by id alone, which costs
# less than its entry.
BUDGET_BYTES = FIT_BYTES - _envelope()


def allowlist_cost(entity_ids: Iterable[str]) -> int:
    """The worst case of an allowlist, in bytes of list_entities' result."""
    return sum(entity_cost(entity_id) for entity_id in entity_ids)


def check_fits(entity_ids: Sequence[str]) -> None:
    """InvalidSettingsChange on `allowlisted_entities`, saying how many fit, when list_entities could not answer."""
    cost = allowlist_cost(entity_ids)
    if cost <= BUDGET_BYTES:
        return
    fits = BUDGET_BYTES * len(entity_ids) // cost
    raise InvalidSettingsChange(
        f"The assistant can read about {fits:,} entities like these at once, and {len(entity_ids):,} are "
        f"chosen. Untick {len(entity_ids) - fits:,} or more, then save again.",
        field="allowlisted_entities", fits=fits, chosen=len(entity_ids), cost=cost, budget=BUDGET_BYTES,
    )
