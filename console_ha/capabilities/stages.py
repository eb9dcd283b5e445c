"""The executor's six stages as functions, each refusing with a CapabilityError marked with its stage.

`capabilities/executor.py` runs them in order for one invocation; they know nothing of the stores or of who
asked, only what each is handed.
"""

from __future__ import annotations

import copy
import json
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import ContextDecorator
from dataclasses import dataclass, field
from enum import IntEnum
from types import TracebackType
from typing import Any

from console_ha.capabilities.entity_budget import json_size
from console_ha.capabilities.registry import REGISTRY
from console_ha.capabilities.spec import INSTANCE, Capability
from console_ha.errors import (
    CapabilityDisabled,
    CapabilityError,
    CapabilityFailed,
    CapabilityNotConfigured,
    EntityNotAllowlisted,
    InvalidArguments,
    InvocationLimitExceeded,
    RefusedByPlugin,
    ResultTooLarge,
    UnknownCapability,
)
from console_ha.plugins.narrowing import narrows
from console_ha.store.config import HomeAssistantConfig, shown_name
from console_ha.store.datadir import HOME_INSTANCE
from console_ha.store.ha_token import TokenLookup
from console_ha.unknown_keys import first_unknown
from console_ha.words import MODEL_WORDS

log = logging.getLogger(__name__)

@dataclass
class Turn:
    """How many times each capability has been proposed past policy in one conversation turn."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # by capability and instance


def always_room(capability: Capability) -> None:
    """The room of a front end that bounds no cards but by the turn (the household's own page): always some."""
    return None


# What else bounds proposals past the turn's own count: the words of a refusal for `capability`, or None when
# there is room. The household queue's waiting reads (its MAX_WAITING, and MCP's cards per tool) are one.
Room = Callable[[Capability], str | None]



# What the model is told of a bug: that there was one, nothing of it.
INTERNAL_ERROR_MESSAGE = "Something went wrong inside the Console."

TOKEN_FOR_ANOTHER_HOME_ASSISTANT = (
    "The Home Assistant access token was saved for another Home Assistant than the one configured now; "
    "the household must enter it again on the settings page."
)


class Stage(IntEnum):
    """The executor's six stages, in order; the audit log records each as its number."""

    RESOLVE = 1
    VALIDATE = 2
    POLICY = 3
    CONFIRM = 4
    EXECUTE = 5
    SHAPE = 6


class at_stage(ContextDecorator):  # lower-case: read as a decorator, like contextlib's own
    """Record on a CapabilityError leaving it the executor stage it ended at (the innermost stage wins).

    The stage is the executor's record, not the error class's: the same refusal comes from stage 3 at
    proposal time and again before the read runs, and the audit log says at which stage.
    """

    def __init__(self, stage: Stage) -> None:
        self.stage = stage

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if isinstance(err, CapabilityError) and err.stage is None:
            err.stage = self.stage


# --- stage 1 ---------------------------------------------------------------------------------

@at_stage(Stage.RESOLVE)
def resolve(name: object) -> Capability:
    """Stage 1: the registered capability of that name."""
    capability = REGISTRY.get(name) if isinstance(name, str) else None
    if capability is None:
        raise UnknownCapability("There is no such capability.")
    return capability


def asked_instance(arguments: object, ids: tuple[str, ...]) -> str | None:
    """The instance a request names, for its audit line, when it is one there is; None when it is not (never
    the text a caller sent in its place)."""
    asked = arguments.get(INSTANCE, HOME_INSTANCE) if isinstance(arguments, Mapping) else HOME_INSTANCE
    return asked if isinstance(asked, str) and asked in ids else None


# --- stage 2 ---------------------------------------------------------------------------------

@at_stage(Stage.VALIDATE)
def validate(capability: Capability, arguments: object, instances: tuple[str, ...] = (HOME_INSTANCE,)
             ) -> dict[str, Any]:
    """Stage 2: the arguments against the capability's schema and `instance` against the ids there are (default
    `home`), with no knowledge of any instance's configuration or allowlist."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidArguments("Arguments must be an object.")
    if INSTANCE in arguments:
        instance = arguments[INSTANCE]
        if not isinstance(instance, str) or instance not in instances:
            # The ids are the household's own words for its Home Assistants, never what one holds.
            raise InvalidArguments(f"`instance` must be one of the Home Assistants there are: {', '.join(instances)}.")
        return {**_validated(capability, {k: v for k, v in arguments.items() if k != INSTANCE}), INSTANCE: instance}
    return _validated(capability, arguments)


def _validated(capability: Capability, arguments: Mapping[str, Any]) -> dict[str, Any]:
    declared = capability.arguments_schema.get("properties", {})
    problems = capability.argument_problems(arguments)
    if problems.unknown:
        unexpected = first_unknown(arguments, declared)
        if unexpected is not None:
            raise InvalidArguments(f"Unexpected argument: {unexpected}.")
    if problems.wrong:
        # The first argument in the schema's order: the same words whatever else is wrong.
        raise InvalidArguments(capability.argument_messages[problems.wrong[0]])
    if problems:
        raise InvalidArguments("The arguments do not match what this capability takes.")
    # Canonical: the declared arguments only, in the schema's order (what the card and approval bind).
    return {name: arguments[name] for name in declared if name in arguments}


# --- stage 3 ---------------------------------------------------------------------------------

@at_stage(Stage.POLICY)
def check_policy(capability: Capability, arguments: Mapping[str, Any], config: HomeAssistantConfig,
                 token: TokenLookup) -> None:
    """Stage 3: opt-in, configuration (a token that belongs to the configured origin) and allowlist.

    The allowlist holds for every entity the capability's marked arguments name (`Capability.entities_named`).
    """
    if not config.enabled:
        raise CapabilityDisabled("The household has not turned on Home Assistant reading.")
    if config.base_url and token.elsewhere:
        # The model is not told either address: it needs to know what is wrong, not where the home is.
        raise CapabilityNotConfigured(TOKEN_FOR_ANOTHER_HOME_ASSISTANT)
    if not config.base_url or token.token is None:
        raise CapabilityNotConfigured("Home Assistant is turned on but not set up yet.")
    if not config.allowlisted_entities:
        # Nothing could be read: no card to bother the household with, no request to send.
        raise CapabilityNotConfigured("The household has not chosen any entities to share yet.")
    allowed = set(config.allowlisted_entities)
    # Only text can be an allowlisted id: anything else a loose schema let through (a list, an object) is
    # refused here, not left to raise TypeError (unhashable) past the audit.
    if any(not isinstance(entity, str) or entity not in allowed for entity in capability.entities_named(arguments)):
        # The same words whether or not the entity exists: a refusal must not reveal the inventory.
        raise EntityNotAllowlisted("That entity is not one the household allowed the assistant to read.")


@at_stage(Stage.POLICY)
def check_turn_limit(capability: Capability, turn: Turn, room: Room = always_room,
                     instance: str = HOME_INSTANCE) -> None:
    """Stage 3: room for one more card (`room`), and at most `max_invocations_per_turn` proposals of the capability
    for each Home Assistant in one turn (so "is the cabin warmer than the house?" takes one read of each)."""
    refusal = room(capability)
    if refusal is not None:
        raise InvocationLimitExceeded(refusal)
    if turn.counts[capability.name, instance] >= capability.bounds.max_invocations_per_turn:
        raise InvocationLimitExceeded("This capability was already used in this turn for this Home Assistant.")
    turn.counts[capability.name, instance] += 1


def instance_of(arguments: Mapping[str, Any]) -> str:
    """The instance a read's canonical arguments name (`home` when they name none)."""
    instance = arguments.get(INSTANCE, HOME_INSTANCE)
    return instance if isinstance(instance, str) else HOME_INSTANCE


def what_the_card_shows(capability: Capability, config: HomeAssistantConfig,
                        instance: str = HOME_INSTANCE) -> str:
    """Where the read goes and what else of the settings the capability binds: what an approval is bound to."""
    shown: dict[str, Any] = {"base_url": config.base_url, **capability.binds(config)}
    if instance != HOME_INSTANCE:
        shown[INSTANCE] = instance  # `home`'s approval binds what it always bound
    return json.dumps(shown, sort_keys=True)


# --- the household's plugins (issue 30): after stage 2, and after stage 6 -------------------------

BEFORE_TOOLCALL = "before_toolcall"
AFTER_TOOLCALL = "after_toolcall"
# How much of a plugin's refusal reason the model is told: a sentence, not a document.
REASON_CHARACTERS = 200
# How much of a plugin's name the model is told (as Activity shows it): a plugin names itself.
PLUGIN_NAME_CHARACTERS = 64


def principal_of(client: str | None) -> str:
    """Who asked, as a hook is told (contract): "household" for its own page, "program:<token name>" for a program."""
    return "household" if client is None else f"program:{client}"


def refused_by_plugin(plugin: str, reason: str) -> RefusedByPlugin:
    """The refusal `before_toolcall` answered with, at stage 3: the model is told which plugin and its reason
    (on one line, at most `REASON_CHARACTERS`), so it can tell the household why; the audit keeps the name only."""
    # Control and format characters (bidi overrides, an escape) dropped as a card drops them, whitespace folded;
    # only the start is looked at, so a reason of megabytes costs no more than one of a page.
    said = shown_name(reason[:REASON_CHARACTERS * 16], REASON_CHARACTERS + 1)
    if len(said) > REASON_CHARACTERS:
        said = said[:REASON_CHARACTERS - 1] + "…"
    named = shown_name(plugin[:PLUGIN_NAME_CHARACTERS * 16], PLUGIN_NAME_CHARACTERS) or "?"
    told = MODEL_WORDS["REFUSED_BY_PLUGIN"].format(plugin=named, reason=said or "(no reason given)")
    refused = RefusedByPlugin(told, plugin=plugin)
    refused.stage = Stage.POLICY
    return refused


def own_copy(answer: object) -> object:
    """A deep copy of what a plugin answered, checked and kept in its place: the plugin cannot change it after.
    None when it cannot be copied (its own `__deepcopy__` raised): such an answer is no arguments nor result."""
    try:
        return copy.deepcopy(answer)
    except Exception:  # what a plugin's object raises is its own; the answer is dropped
        return None


def narrower_result(capability: Capability, original: dict[str, Any], answered: object) -> dict[str, Any] | None:
    """`answered` (copied) when `after_toolcall` may give it: a dict that narrows `original`, names its `instance`
    and validates against the result schema; else None."""
    if type(answered) is not dict:
        return None
    answer = own_copy(answered)
    # `narrows` first: it compares only values of the original's exact types, so the `instance` check after it
    # cannot call a plugin's own `__ne__` (one that raised made the allowed read an internal error).
    if (not isinstance(answer, dict) or not narrows(original, answer)
            or answer.get(INSTANCE) != original.get(INSTANCE) or capability.result_problems(answer)):
        return None
    return answer


# --- stage 6 ---------------------------------------------------------------------------------

@at_stage(Stage.SHAPE)
def shape(capability: Capability, result: Mapping[str, Any]) -> dict[str, Any]:
    """Stage 6: the result as JSON the model may see, within the byte bound, as its result schema declares."""
    # NaN and Infinity are not JSON (json_size refuses them): a result holding one is a bug, not an answer.
    size = json_size(result)
    if size > capability.bounds.max_result_bytes:
        raise ResultTooLarge(
            f"The result ({size} bytes) is larger than the {capability.bounds.max_result_bytes}-byte limit.")
    # Checked after the size, so the check costs at most what a result of the bound costs (docs/capabilities.md).
    problems = capability.result_problems(result)
    if problems:
        # A bug, not an answer: none of it leaves. The log says where in the schema, never a value.
        log.error("capability %s returned a result its result schema refuses, at %s; nothing of it was sent",
                  capability.name, "; ".join(problems[:5]))
        raise CapabilityFailed(INTERNAL_ERROR_MESSAGE)
    return dict(result)
