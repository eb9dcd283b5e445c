"""The arguments reads share, declared once: the entity a read is about, a choice among named values (a period),
and the words stage 2 says for each; what a read declares is built from these, so the same argument reads the
same for every read that takes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from console_ha.capabilities.spec import ENTITY_ARGUMENT


@dataclass(frozen=True)
class Argument:
    """One argument: its JSON Schema, and what is wrong with a faulty one, in words that follow its name."""

    schema: dict[str, Any]
    fault: str  # "must be one of hour, day or week.": the refusal reads "period must be one of ..."


@dataclass(frozen=True)
class Arguments:
    """A read's arguments as `Capability` takes them: the schema, and each argument's refusal words."""

    schema: dict[str, Any]
    messages: Mapping[str, str]


def declared(required: Iterable[str], **arguments: Argument) -> Arguments:
    """The arguments schema (unknown keys refused) and its words, the arguments in the order given."""
    schema = {"type": "object", "required": list(required),
              "properties": {name: argument.schema for name, argument in arguments.items()},
              "additionalProperties": False}
    return Arguments(schema, {name: f"{name} {argument.fault}" for name, argument in arguments.items()})


def one_of(names: Iterable[str]) -> str:
    """The names as the words list them: "hour, day or week"."""
    listed = list(names)
    return f"{', '.join(listed[:-1])} or {listed[-1]}" if len(listed) > 1 else "".join(listed)


def entity(described: str, example: str, *, domain: str | None = None) -> Argument:
    """One allowed entity (the entity mark: stage 3 holds it to the allowlist); of `domain` only, if given.

    `described` is what the model reads of it; `example` is the id the refusal gives. A read of one domain
    refuses another kind at stage 2, in the argument's own words.
    """
    if domain is None:
        return Argument({**ENTITY_ARGUMENT, "description": described},
                        f"must look like domain.object_id, such as {example}.")
    return Argument({**ENTITY_ARGUMENT, "allOf": [{"pattern": f"^{domain}\\."}], "description": described},
                    f"must be a {domain}.* entity id, such as {example}.")


def choice(names: Iterable[str], **more: Any) -> Argument:
    """One of `names` (a period, a status), with any further keywords of its schema (a `default`)."""
    listed = list(names)
    return Argument({"type": "string", "enum": listed, **more}, f"must be one of {one_of(listed)}.")


def entity_and_period(entity_argument: Argument, periods: Iterable[str]) -> Arguments:
    """The arguments of a read about one entity over a period: both required, the entity first."""
    return declared(("entity_id", "period"), entity_id=entity_argument, period=choice(periods))
