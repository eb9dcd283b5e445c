"""home_assistant.find_entities: the allowed entities a household's words describe, best first, each with why."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from console_ha.capabilities.area_lookup import AREAS_KNOWN_SCHEMA, area_names, areas_if_known, say_if_areas_unknown
from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card, leaves_device, quoted, sentences
from console_ha.capabilities.entity_budget import CAP_LEVELS, cut, json_size
from console_ha.capabilities.household_words import HAN, HOUSEHOLD_WORDS, STOP_WORDS, Kind, query_texts
from console_ha.capabilities.household_words import WORD as _WORD
from console_ha.capabilities.spec import ENTITY_ID_SCHEMA, TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.deadline import Deadline
from console_ha.folding import fold
from console_ha.ha.areas import REGISTRY_COMMANDS
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import ALL_ENTITIES_MAX_BYTES, HomeAssistantClient
from console_ha.language import N_, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z

NAME = "home_assistant.find_entities"
MAX_QUERY_CHARS = 200
MAX_MATCHES = 20
# What a small model's context can spare for one answer (issue 18); the executor's bound stays 64 KiB.
MAX_ANSWER_BYTES = 8 * 1024
# The words of a query that are matched, in the query's order: a 200-character query of one-letter
# words would otherwise make every hit's `why` long. Words past this are not looked at.
MAX_QUERY_WORDS = 8
# A longer "word" is no household word, name or room; it is left out, and `why` stays short.
MAX_WORD_CHARS = 32
# Text in a hit, as list_entities' middle level cuts it (bytes of JSON).
_CAPS = CAP_LEVELS[1]

# The household's words for kinds of things (HOUSEHOLD_WORDS: lamp, lampe, Lampe, lámpara, 灯 → light) and the
# words that say nothing (STOP_WORDS: "which", "les", "die", "的"), in six languages, come from a declared table,
# household_words.toml, read by household_words.py, which also cuts a Chinese query into words.

# How well one word matched one field; a hit's rank is its matched words, then these summed.
WHOLE_WORD, PREFIX, SUBSTRING, HOUSEHOLD_WORD = 3, 2, 1, 3
# The fields a word is looked for in, in this order (the first best one is what `why` names).
FIELDS = ("friendly_name", "area", "entity_id", "domain")
NO_MATCH_HINT = (
    "No allowed device matches these words. Try one word: a room (kitchen), a kind of device (light, "
    "temperature, door) or part of its name; or call list_entities to see every allowed device."
)
WHY_MEANS = "each query word that matched, and the field it matched: friendly_name, area, entity_id or domain"


@dataclass(frozen=True)
class Word:
    """One word of the query, ready for matching: itself, its singular, and the kinds of device it names."""

    text: str
    forms: tuple[str, ...]
    kinds: tuple[Kind, ...]
    # Written in Han characters: a language without spaces, so the word inside a name is the word, whole.
    han: bool = False
    # The kinds as sets, so each entity is one lookup: domains named whole, and (domain, device class) pairs.
    domains: frozenset[str] = frozenset()
    classes: frozenset[tuple[str, str]] = frozenset()

    @classmethod
    def of(cls, text: str) -> Word:
        one = singular(text)
        kinds = HOUSEHOLD_WORDS.get(text) or HOUSEHOLD_WORDS.get(one, ())
        return cls(text, tuple(dict.fromkeys((text, one))), kinds, HAN.match(text) is not None,
                   frozenset(k.domain for k in kinds if k.device_class is None),
                   frozenset((k.domain, k.device_class) for k in kinds if k.device_class is not None))

    def names_kind_of(self, entity: Candidate) -> bool:
        """Whether this is a household word for `entity`'s kind (its domain, or its domain and device class)."""
        return entity.domain in self.domains or (entity.domain, entity.device_class) in self.classes


def query_words(query: str) -> list[Word]:
    """The query's words that are looked for: folded, without stop words or repeats, at most MAX_QUERY_WORDS."""
    words: list[Word] = []
    for text in query_texts(query):
        if text in STOP_WORDS or len(text) > MAX_WORD_CHARS or any(word.text == text for word in words):
            continue
        words.append(Word.of(text))
        if len(words) == MAX_QUERY_WORDS:
            break
    return words


# Names and areas are folded once per text while the Console runs: the same household's names come back
# read after read, and folding (Unicode decomposition) is most of a search's own time over hundreds of
# entities. Bounded, so a Home Assistant renaming everything costs memory once, not without end: at most
# this many texts of at most MATCHED_CHARS each (a name's further characters are not matched against).
_folded = lru_cache(maxsize=4096)(fold)
MATCHED_CHARS = 256


@dataclass(frozen=True)
class Candidate:
    """One allowed entity, its fields folded once for matching."""

    entity_id: str
    domain: str
    device_class: str | None
    fields: dict[str, str]  # field -> folded text
    # Every field in one text (a separator no word holds between them): a word that is in none of them
    # is passed over with one search, and only the entities it is in are matched field by field.
    haystack: str


# Kept, as the folded texts are: the same allowlisted entities come back read after read, so a search's
# own time is the matching alone.
@lru_cache(maxsize=4096)
def candidate(entity_id: str, name: str, area: str | None, device_class: str | None) -> Candidate:
    """`entity_id` ready for matching: its friendly name, area, id (the part after the dot) and domain."""
    domain, _, object_id = entity_id.partition(".")
    texts = {"friendly_name": _folded(name[:MATCHED_CHARS]),
             "area": _folded(area[:MATCHED_CHARS]) if area else "",
             "entity_id": object_id, "domain": domain}
    return Candidate(entity_id, domain, device_class, texts, "\x00".join(texts.values()))


def singular(word: str) -> str:
    """"lights" → "light", "switches" → "switch": enough English for device words."""
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "sses", "xes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def match_word(word: Word, entity: Candidate) -> tuple[int, str] | None:
    """How well `word` matches `entity`, and in which field; None when it does not."""
    best: tuple[int, str] | None = None
    # A whole word, a prefix and a substring are each somewhere in the haystack: most entities stop here.
    haystack = entity.haystack
    if word.forms[0] in haystack or (len(word.forms) > 1 and word.forms[1] in haystack):
        for field in FIELDS:
            text = entity.fields[field]
            if not any(form in text for form in word.forms):
                continue
            tokens = _WORD.findall(text)
            if word.han or any(token in word.forms for token in tokens):
                score = WHOLE_WORD
            elif len(word.text) >= 2 and any(token.startswith(word.forms) for token in tokens):
                score = PREFIX
            elif len(word.text) >= 3 and word.text in text:
                score = SUBSTRING
            else:
                continue
            if best is None or score > best[0]:
                best = (score, field)
    if (best is None or best[0] < HOUSEHOLD_WORD) and word.names_kind_of(entity):
        best = (HOUSEHOLD_WORD, "domain")
    return best


def rank(words: Sequence[Word], entities: Iterable[Candidate]) -> list[tuple[Candidate, dict[str, str]]]:
    """The entities any word matches, best first (most words, then the best matches, then allowlist order)."""
    scored: list[tuple[int, int, int, Candidate, dict[str, str]]] = []
    for order, entity in enumerate(entities):
        why: dict[str, str] = {}
        total = 0
        for word in words:
            found = match_word(word, entity)
            if found is not None:
                why[word.text] = found[1]
                total += found[0]
        if why:
            scored.append((-len(why), -total, order, entity, why))
    scored.sort(key=lambda item: item[:3])
    return [(entity, why) for *_, entity, why in scored]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


AreaOf = Callable[[str], "str | None"]


def find(states: Iterable[Mapping[str, Any]], config: HomeAssistantConfig, area_of: AreaOf,
         query: str) -> dict[str, Any]:
    """The result for `query` over Home Assistant's states: allowlisted entities only, at most MAX_MATCHES."""
    allowed = {entity_id: order for order, entity_id in enumerate(config.allowlisted_entities)}
    # One pass over every state Home Assistant has (thousands): a comprehension, the cheapest loop Python has.
    found = {state["entity_id"]: state for state in states if state.get("entity_id") in allowed}
    words = query_words(query)
    entities = []
    for entity_id in sorted(found, key=allowed.__getitem__):
        attributes = found[entity_id].get("attributes")
        attributes = attributes if isinstance(attributes, Mapping) else {}
        name = _text(attributes.get("friendly_name")) or entity_id
        area = area_of(entity_id)
        device_class = _text(attributes.get("device_class"))
        # Cut before the kept candidate holds them: a megabyte "name" is kept as 256 characters, not whole.
        entities.append(candidate(entity_id, name[:MATCHED_CHARS], area[:MATCHED_CHARS] if area else None,
                                  device_class[:MATCHED_CHARS] if device_class else None))
    ranked = rank(words, entities)
    matches = []
    for entity, why in ranked[:MAX_MATCHES]:
        state = found[entity.entity_id]
        attributes = state.get("attributes")
        attributes = attributes if isinstance(attributes, Mapping) else {}
        area = area_of(entity.entity_id)
        matches.append({
            "entity_id": entity.entity_id,
            "friendly_name": cut(_text(attributes.get("friendly_name")) or entity.entity_id, _CAPS.name),
            "state": cut(str(state.get("state", "")), _CAPS.state),
            "area": None if area is None else cut(area, _CAPS.area),
            "why": why,
        })
    result: dict[str, Any] = {"matches": matches, "total": len(ranked)}
    if not matches:
        result["hint"] = NO_MATCH_HINT
    return result


def fit(result: dict[str, Any]) -> dict[str, Any]:
    """`result` within MAX_ANSWER_BYTES: the best come first, so the worst go when long ids make twenty too many."""
    while json_size(result) > MAX_ANSWER_BYTES and result["matches"]:
        result["matches"].pop()
    return result


CARD_TITLE = N_("Search your Home Assistant devices?")


def searches_words(count: int, query: str) -> Words:
    """What the search looks for among the `count` allowed devices (one device: a sentence of its own)."""
    asked = quoted(cut(query, 120))
    if count == 1:
        return Words("The assistant wants to find whether the one device you allowed matches {query}, and read its "
                     "current state and room.", query=asked)
    return Words.counted("The assistant wants to find whether the {count} device you allowed matches {query}, and "
                         "read its current state and room.",
                         "The assistant wants to find which of the {count} devices you allowed match {query}, and "
                         "read their current state and room.", count, query=asked)


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts = NOTHING_KNOWN) -> Card:
    """The words searched for, among how many allowed devices, and where the request goes."""
    wants = searches_words(len(config.allowlisted_entities), arguments["query"])
    return Card(title=Words(CARD_TITLE), body=sentences(wants, leaves_device(config)))


def binds(config: HomeAssistantConfig) -> Mapping[str, Any]:
    """The card counts the allowed entities: approved was a search among exactly those."""
    return {"entities": sorted(config.allowlisted_entities)}


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime, notes: ReadNotes | None = None) -> dict[str, Any]:
    """One GET /api/states, the areas, and the ranking: the allowlisted entities the query describes."""
    states = client.states(timeout=deadline.remaining(), max_bytes=ALL_ENTITIES_MAX_BYTES)
    deadline.remaining()  # parsing a large body takes time too: past the bound is a timeout, not a result
    if notes is not None:
        notes.memory.remember(client.cache_key, states, config.allowlisted_entities)  # the kinds of reading a card says
    # A Home Assistant that cannot tell its areas is still searched, by name, id and kind.
    areas = areas_if_known(client, deadline, notes)
    result = find(states, config, area_names(areas), arguments["query"])
    result["retrieved_at"] = utc_z(now)
    return fit(say_if_areas_unknown(result, areas))


CAPABILITY = Capability(
    name=NAME,
    description=(
        f"Find the allowed Home Assistant entities a few words describe (a room, a kind of device, part of a "
        f"name: \"kitchen lights\", \"front door\", \"thermometer\"). Returns at most {MAX_MATCHES}, best "
        "first, each with its entity id, name, state, area and `why` (which word matched which field). "
        "Each read asks the household for approval first."
    ),
    arguments_schema={
        "type": "object",
        "required": ["query"],
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "pattern": r"\S",
                      "description": "A few words, such as kitchen lights or bedroom temperature",
                      "examples": ["kitchen lights", "front door"]},
        },
        "additionalProperties": False,
    },
    argument_messages={"query": f"query must be between 1 and {MAX_QUERY_CHARS} characters, not only spaces."},
    result_schema={
        "type": "object",
        "required": ["matches", "total", "retrieved_at"],
        "additionalProperties": False,
        "properties": {
            "matches": {
                "type": "array",
                "maxItems": MAX_MATCHES,
                "items": {
                    "type": "object",
                    "required": ["entity_id", "friendly_name", "state", "area", "why"],
                    "additionalProperties": False,
                    "properties": {
                        "entity_id": ENTITY_ID_SCHEMA,
                        "friendly_name": {"type": "string", "maxLength": _CAPS.name},
                        "state": {"type": "string", "maxLength": _CAPS.state},
                        "area": {"type": ["string", "null"], "maxLength": _CAPS.area},
                        "why": {
                            "type": "object",
                            "description": WHY_MEANS,
                            "minProperties": 1,
                            "maxProperties": MAX_QUERY_WORDS,
                            "propertyNames": {"maxLength": MAX_WORD_CHARS},
                            "additionalProperties": {"enum": list(FIELDS)},
                        },
                    },
                },
            },
            "total": {"type": "integer", "minimum": 0,
                      "description": f"how many allowed devices matched; only the best {MAX_MATCHES} are listed"},
            "areas_known": AREAS_KNOWN_SCHEMA,
            "hint": {"type": "string", "description": "present when nothing matched: what to try next"},
            "retrieved_at": TIMESTAMP_SCHEMA,
        },
    },
    bounds=Bounds(timeout_seconds=8),
    execute=execute,
    card=card,
    binds=binds,
    activity_words=Words("Search among your devices"),
    prompt_summary="the devices a few words describe (room, kind, name), best first.",
    # Every state, then the areas (kept per Home Assistant, or one registry round).
    reads=Reads(paths=("/api/states",), commands=REGISTRY_COMMANDS),
)
