"""The picker without JavaScript: one page of the entity catalogue, filtered by search, kind and area.

Plain functions over the catalogue the picker's JSON holds (`catalogue.catalogue_json`), so the page
without JavaScript filters as the script does: every word of the search in the name, entity id or area;
one kind (a Home Assistant domain); one area, or none. Pages hold at most PAGE_SIZE rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from console_ha.language import Words
from console_ha.words import kind_name

PAGE_SIZE = 200
# The area filter's value for entities in no area; real areas are "area:<name>", so no name can collide.
NO_AREA = "none"
AREA_PREFIX = "area:"
NO_AREA_WORDS = Words("No area")
MISSING_WORDS = Words("No longer in Home Assistant")
# The longest search kept: a search longer than any name, id and area together matches nothing anyway.
MAX_SEARCH = 200
# The query parameters of the page's GET form.
QUERY_PARAMS = ("q", "kind", "area", "page")


@dataclass(frozen=True)
class BrowseQuery:
    """What the household asked to see: the search words, a kind, an area value, a page (from 1)."""

    search: str = ""
    kind: str = ""
    area: str = ""
    page: int = 1

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> BrowseQuery:
        """The GET form's parameters; anything odd (a page that is no number) falls back to the first page."""
        try:
            page = int(args.get("page", "1"))
        except ValueError:
            page = 1
        # Kind and area are the select's own values, taken exactly: an area's name may end in a space.
        return cls(args.get("q", "").strip()[:MAX_SEARCH], args.get("kind", "").strip(),
                   args.get("area", ""), max(page, 1))

    @staticmethod
    def asked(args: Mapping[str, str]) -> bool:
        """Whether the request asks for the list at all (the GET form was sent, or a page link followed)."""
        return any(name in args for name in QUERY_PARAMS)

    def args(self, **changes: Any) -> dict[str, str]:
        """This query as URL parameters (with `changes`), for links to other pages and back after a save."""
        values = {"q": self.search, "kind": self.kind, "area": self.area, "page": str(self.page)}
        values.update({name: str(value) for name, value in changes.items()})
        return values


@dataclass(frozen=True)
class Choice:
    """One option of a filter: its value, the household's words, and how many entities it has."""

    value: str
    label: str
    count: int


@dataclass(frozen=True)
class EntityRow:
    """One entity as the page without JavaScript lists it."""

    entity_id: str
    name: str
    area: str
    state: str
    unavailable: bool
    sensitive: bool
    missing: bool  # allowlisted, but Home Assistant no longer reports it
    chosen: bool
    cost: int  # the server's price for it (`entity_budget.entity_cost`, in the catalogue), for the meter


@dataclass(frozen=True)
class BrowsePage:
    """One page of matching entities, the filters' options, and where this page stands among the others."""

    rows: list[EntityRow]
    matched: int  # entities matching the query, on every page
    total: int  # entities in the catalogue
    page: int  # the page shown, from 1 (clamped to the last)
    pages: int
    kinds: list[Choice]
    areas: list[Choice]
    areas_known: bool
    # Home Assistant's names of the rows shown and of every chosen entity, wherever it is listed: a save
    # without JavaScript stores them (`entity_names`), as the script's picker does.
    names: dict[str, str]

    def groups(self) -> list[tuple[str, list[EntityRow]]]:
        """The rows under their headings, as the script's picker groups them: missing, each area, no area."""
        grouped: list[tuple[str, list[EntityRow]]] = []
        for row in self.rows:
            heading = MISSING_WORDS if row.missing else row.area or NO_AREA_WORDS
            if grouped and grouped[-1][0] == heading:
                grouped[-1][1].append(row)
            else:
                grouped.append((heading, [row]))
        return grouped

    @property
    def first(self) -> int:
        """The position of the first row shown, from 1 (0 when nothing matches)."""
        return (self.page - 1) * PAGE_SIZE + 1 if self.rows else 0


def _rows(catalogue: Mapping[str, Any], chosen: set[str]) -> list[EntityRow]:
    rows = [
        EntityRow(e["entity_id"], e.get("friendly_name") or e["entity_id"], e.get("area") or "",
                  "" if e.get("state") is None else str(e["state"]), bool(e.get("unavailable")),
                  bool(e.get("sensitive")), False, e["entity_id"] in chosen, int(e.get("cost") or 0))
        for e in catalogue.get("entities", [])
    ]
    rows += [
        EntityRow(m["entity_id"], m.get("friendly_name") or m["entity_id"], "", "", False,
                  bool(m.get("sensitive")), True, m["entity_id"] in chosen, int(m.get("cost") or 0))
        for m in catalogue.get("missing", [])
    ]
    return rows


def area_value(area: str) -> str:
    """The area filter's value for an area name ("" for no area)."""
    return AREA_PREFIX + area if area else NO_AREA


def _matches(row: EntityRow, words: list[str], kind: str, area: str) -> bool:
    if kind and row.entity_id.partition(".")[0] != kind:
        return False
    if area and (row.missing or area_value(row.area) != area):  # a missing entity has no area to filter by
        return False
    hay = f"{row.name}\n{row.entity_id}\n{row.area}".lower()
    return all(word in hay for word in words)


def _choices(counts: Counter[str], label: Iterable[tuple[str, str]]) -> list[Choice]:
    return sorted((Choice(value, words, counts[value]) for value, words in label), key=lambda c: c.label.lower())


def browse(catalogue: Mapping[str, Any], chosen: Iterable[str], query: BrowseQuery) -> BrowsePage:
    """The page of entities `query` asks for: missing ones first (they need a decision), then by area and name."""
    rows = _rows(catalogue, set(chosen))
    # The order the script's picker shows: missing first, then areas by name with "No area" last, then names.
    rows.sort(key=lambda r: (not r.missing, r.area == "", r.area.lower(), r.name.lower(), r.entity_id))
    words = query.search.lower().split()
    matching = [row for row in rows if _matches(row, words, query.kind, query.area)]
    pages = max(1, -(-len(matching) // PAGE_SIZE))
    page = min(query.page, pages)
    shown = matching[(page - 1) * PAGE_SIZE: page * PAGE_SIZE]
    kinds = Counter(row.entity_id.partition(".")[0] for row in rows)
    areas = Counter(area_value(row.area) for row in rows if not row.missing)
    return BrowsePage(
        rows=shown,
        matched=len(matching),
        total=len(rows),
        page=page,
        pages=pages,
        kinds=_choices(kinds, ((domain, kind_name(domain)) for domain in kinds)),
        areas=sorted(_choices(areas, ((value, value.removeprefix(AREA_PREFIX) if value != NO_AREA else NO_AREA_WORDS)
                                      for value in areas)), key=lambda c: c.value == NO_AREA),
        areas_known=bool(catalogue.get("areas_known", True)),
        names={row.entity_id: row.name for row in [*shown, *(r for r in rows if r.chosen)]
               if row.name != row.entity_id},
    )
