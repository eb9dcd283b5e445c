"""What a capability declares (RFC-0018's registration, and what the Console adds), and the schema checker.

Each capability is one module (`list_entities.py`, `get_history.py`) that builds one `Capability`; the
registry lists those modules, and nothing else in the Console is keyed by a capability's name. What the
executor and the client enforce is read from the declaration: the arguments that name entities (the
entity mark), the Home Assistant reads it makes (`reads`), and the result it returns (`result_schema`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any, Protocol

from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.protocols import Validator

from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card
from console_ha.deadline import Deadline
from console_ha.ha.addresses import ENTITY_ID_RE, MAX_ENTITY_ID_LENGTH
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.language import Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import INSTANCE_ID_PATTERN

DEFAULT_MAX_RESULT_BYTES = 64 * 1024
# Schema pieces the capabilities share: a time as every result writes it, and an entity id.
TIMESTAMP_SCHEMA: dict[str, Any] = {"type": "string", "format": "date-time"}
ENTITY_ID_SCHEMA: dict[str, Any] = {"type": "string", "pattern": ENTITY_ID_RE.pattern,
                                   "maxLength": MAX_ENTITY_ID_LENGTH}
# The entity mark: on an argument's schema, the argument holds an entity id; on an array argument's `items`,
# a list of them. Stage 3 holds every entity a marked argument names to the household's allowlist, whatever
# the argument is called. A keyword JSON Schema does not define, so validators pass over it (2020-12 keeps
# unknown keywords as annotations); the model and MCP clients see it in the arguments schema, as it is.
ENTITY_MARK = "x-entity-id"
# An argument that names one entity; `{"type": "array", "items": ENTITY_ARGUMENT}` names several.
ENTITY_ARGUMENT: dict[str, Any] = {**ENTITY_ID_SCHEMA, ENTITY_MARK: True}
# Arguments no capability may declare: `instance` chooses among several Home Assistants for every read at
# once (contract, "Several Home Assistants"); the executor takes it at stage 2 (`instance_argument`).
INSTANCE = "instance"
RESERVED_ARGUMENTS = frozenset({INSTANCE})
# Every result says which Home Assistant answered: the executor adds it after the read, before stage 6.
INSTANCE_RESULT_SCHEMA: dict[str, Any] = {"type": "string", "pattern": INSTANCE_ID_PATTERN}
# What a caller reads of the `instance` argument, while there is a choice (`arguments_schema_for`).
INSTANCE_ARGUMENT_DESCRIPTION = "Which Home Assistant to read (default: home)."


@dataclass(frozen=True)
class Classification:
    """RFC-0003's confirmation model keys: side effect × network → confirmation."""

    side_effect: str = "read_only"
    network: str = "external"
    confirmation: str = "required"

    def to_dict(self) -> dict[str, str]:
        return {"side_effect": self.side_effect, "network": self.network, "confirmation": self.confirmation}


@dataclass(frozen=True)
class Bounds:
    """How long an invocation may take, how large its result may be, how often per turn."""

    timeout_seconds: float
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    max_invocations_per_turn: int = 1


class Execute(Protocol):
    """Stage 5: read Home Assistant with the client, within the deadline, for validated arguments; `now` is the
    invocation's clock, so a result's times agree with each other. `notes` (`ReadNotes`): what its card knew,
    and where what a later card may say (areas, kinds of reading) goes; without them (plain Python), nowhere."""

    def __call__(self, client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
                 deadline: Deadline, now: datetime, notes: ReadNotes | None = None, /) -> dict[str, Any]: ...


class CardCopy(Protocol):
    """The household's card for validated arguments under the settings in force, and what the Console holds
    of the devices (`CardMemory.facts`: kept areas and kinds of reading; nothing is asked of Home Assistant)."""

    def __call__(self, config: HomeAssistantConfig, arguments: Mapping[str, Any],
                 facts: CardFacts = NOTHING_KNOWN, /) -> Card: ...


# Settings an approval covers beyond the Home Assistant's address and the arguments (which always count).
Binding = Callable[[HomeAssistantConfig], Mapping[str, Any]]


def nothing_more(config: HomeAssistantConfig) -> Mapping[str, Any]:
    """An approval that covers the address and the arguments only."""
    return {}


@dataclass(frozen=True)
class Capability:
    """A registered capability: what the model, the household and the executor each need to know of it."""

    name: str
    # For the model (the tool's description) and for MCP clients.
    description: str
    arguments_schema: dict[str, Any]
    # For each argument, the words that say what is wrong with it (stage 2's INVALID_ARGUMENTS message).
    argument_messages: Mapping[str, str]
    result_schema: dict[str, Any]
    bounds: Bounds
    execute: Execute
    card: CardCopy
    # The capability in the household's words, on the activity page (rendered in the page's language).
    activity_words: Words
    # The system prompt's line for its tool: what it reads.
    prompt_summary: str
    # The Home Assistant REST paths and WebSocket commands `execute` uses: the Console's client reads
    # what the capabilities (and the settings page) declare, and nothing else.
    reads: Reads
    # What an approval binds to besides the address and the arguments.
    binds: Binding = nothing_more
    # What each field of a result means, in one line each: the system prompt lists them under the tool.
    result_meanings: Mapping[str, str] = field(default_factory=dict)
    classification: Classification = field(default_factory=Classification)
    # The entity domains it can answer for (`calendar`), or None for any: it is offered to the model and listed
    # to MCP clients only while an allowlisted entity is of one of them (`offered`).
    answers_for: frozenset[str] | None = None
    # The arguments that carry the entity mark (single ids and lists alike), in the schema's order.
    entity_arguments: tuple[str, ...] = field(init=False)
    # The arguments schema as the model and MCP clients get it: without the entity mark, which is the
    # Console's own note to its policy stage, not part of what a caller sends.
    published_arguments_schema: dict[str, Any] = field(init=False, repr=False, compare=False)
    _arguments_validator: Validator = field(init=False, repr=False, compare=False)
    _result_validator: Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        reserved = RESERVED_ARGUMENTS & set(self.arguments_schema.get("properties", {}))
        if reserved:
            raise ValueError(f"{self.name}: {', '.join(sorted(reserved))} is the executor's, for every read")
        object.__setattr__(self, "result_schema", with_instance(self.result_schema))
        object.__setattr__(self, "entity_arguments", marked_arguments(self.arguments_schema))
        object.__setattr__(self, "published_arguments_schema", _without_marks(self.arguments_schema))
        # Made once: a checker compiles its schema's patterns and references.
        object.__setattr__(self, "_arguments_validator", SchemaValidator(self.arguments_schema))
        object.__setattr__(self, "_result_validator", SchemaValidator(self.result_schema))

    def entities_named(self, arguments: Mapping[str, Any]) -> list[Any]:
        """Every entity the arguments name, through the marked arguments: what stage 3 holds to the allowlist."""
        named: list[Any] = []
        for name in self.entity_arguments:
            value = arguments.get(name)
            if value is not None:
                # Validated already; anything but an id in a list is still named, so the allowlist refuses it.
                named.extend(value if isinstance(value, list) else [value])
        return named

    def result_problems(self, result: Any) -> list[str]:
        """Where in the result schema `result` departs from it (schema paths, which hold none of its values).

        Formats (`date-time`) are annotations here, as JSON Schema 2020-12 makes them by default: stage 6
        checks the same whatever is installed; the tests' check asserts formats as well.
        """
        return ["/".join(str(part) for part in error.schema_path) or "(the result)"
                for error in self._result_validator.iter_errors(result)]

    def argument_problems(self, arguments: Mapping[str, Any]) -> ArgumentProblems:
        """What the arguments schema finds wrong with `arguments` (nothing, when they match it)."""
        wrong: set[str] = set()
        unknown = other = False
        for error in self._arguments_validator.iter_errors(dict(arguments)):
            keyword = error.schema_path[-1] if error.schema_path else None
            if error.path:
                wrong.add(str(error.path[0]))
            elif keyword == "required":
                wrong.update(name for name in self.arguments_schema["required"] if name not in arguments)
            elif keyword == "additionalProperties":
                unknown = True
            else:
                other = True
        declared = [name for name in self.arguments_schema.get("properties", {}) if name in wrong]
        return ArgumentProblems(unknown=unknown, wrong=declared, other=other or len(declared) < len(wrong))


def with_instance(result_schema: Mapping[str, Any]) -> dict[str, Any]:
    """`result_schema` with the `instance` every result carries declared, once for every read.

    Declared, not required: a read's own `execute` answers without it (the executor adds it), and what a read
    answers is checked against this same schema in its tests.
    """
    return {**result_schema, "properties": {**result_schema.get("properties", {}), INSTANCE: INSTANCE_RESULT_SCHEMA}}


def arguments_schema_for(capability: Capability, instances: Sequence[str]) -> dict[str, Any]:
    """The arguments schema a caller (the model, an MCP client) gets while `instances` are the ids there are.

    With one Home Assistant it is `published_arguments_schema` itself, as it always was; with several, the
    optional `instance` too, an enum of the ids, so a caller can only name one there is (stage 2 checks again).
    """
    schema = capability.published_arguments_schema
    if len(instances) <= 1:
        return schema
    instance = {"type": "string", "enum": list(instances), "description": INSTANCE_ARGUMENT_DESCRIPTION}
    return {**schema, "properties": {**schema.get("properties", {}), INSTANCE: instance}}


def offered(capabilities: Iterable[Capability], allowlisted: Iterable[str]) -> tuple[Capability, ...]:
    """The capabilities an allowlisted entity can answer, in their order: no calendar allowed, no calendar read."""
    domains = {entity_id.partition(".")[0] for entity_id in allowlisted}
    return tuple(c for c in capabilities if c.answers_for is None or not c.answers_for.isdisjoint(domains))


@dataclass(frozen=True)
class ArgumentProblems:
    """Stage 2's findings, for the executor to put in words."""

    unknown: bool  # a key the schema does not declare
    wrong: list[str]  # declared arguments missing or not matching, in the schema's order
    other: bool  # something about the arguments as a whole

    def __bool__(self) -> bool:
        return self.unknown or bool(self.wrong) or self.other


def marked_arguments(arguments_schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The arguments whose schema, or whose `items`, carries the entity mark; a mark anywhere else is refused."""
    marked = []
    for name, schema in arguments_schema.get("properties", {}).items():
        items = schema.get("items")
        if schema.get(ENTITY_MARK) is True or (isinstance(items, Mapping) and items.get(ENTITY_MARK) is True):
            marked.append(name)
    if _marks_in(arguments_schema) != len(marked):
        # A mark stage 3 would not see (nested deeper, on the schema itself, or not `true`) must not pass for one.
        raise ValueError("the entity mark goes on an argument's schema or its items, as true, once")
    return tuple(marked)


def _without_marks(schema: Any) -> Any:
    """A copy of `schema` with every entity mark left out."""
    if isinstance(schema, Mapping):
        return {key: _without_marks(value) for key, value in schema.items() if key != ENTITY_MARK}
    if isinstance(schema, list):
        return [_without_marks(value) for value in schema]
    return schema


def _marks_in(schema: Any) -> int:
    if isinstance(schema, Mapping):
        return int(ENTITY_MARK in schema) + sum(_marks_in(value) for value in schema.values())
    if isinstance(schema, list):
        return sum(_marks_in(value) for value in schema)
    return 0


# --- the schema checker --------------------------------------------------------------------------

# JSON Schema's `pattern` is an ECMA-262 regular expression, where `$` is the end of the text. jsonschema
# runs it with Python's `re`, whose `$` also matches before a final newline (python-jsonschema issue 576),
# so "sensor.x\n" would pass `^[a-z0-9_]+\.[a-z0-9_]+$`. The same translation fastjsonschema makes ($ to
# \Z), but only for a `$` outside a character class and not escaped.
def ecma_pattern(pattern: str) -> str:
    """`pattern` for Python's `re` with ECMA-262's `$`: the end of the text only."""
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append(r"\Z")
            continue
        out.append(char)
    return "".join(out)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(ecma_pattern(pattern))


def _pattern(validator: Validator, pattern: str, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _compiled(pattern).search(str(instance)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


# The stubs leave `extend` untyped; what it returns is a validator class like the one it extends.
SchemaValidator: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {"pattern": _pattern})
