"""The six-stage capability executor: resolve, validate, policy, confirm, execute, shape."""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import ContextDecorator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import IntEnum
from types import TracebackType
from typing import Any, cast
from zoneinfo import ZoneInfo

from console_ha.capabilities.card_facts import CardMemory, ReadNotes
from console_ha.capabilities.cards import Card
from console_ha.capabilities.confirmations import ConfirmationStore, ExpiredConfirmation, PendingConfirmation
from console_ha.capabilities.entity_budget import json_size
from console_ha.capabilities.registry import CAPABILITIES, REGISTRY
from console_ha.capabilities.spec import Capability, offered
from console_ha.capabilities.time_zone import household_zone
from console_ha.deadline import Deadline
from console_ha.errors import (
    CapabilityDisabled,
    CapabilityError,
    CapabilityFailed,
    CapabilityNotConfigured,
    ConfirmationDenied,
    ConfirmationInvalid,
    ConfirmationReason,
    EntityNotAllowlisted,
    HomeAssistantError,
    InvalidArguments,
    InvocationLimitExceeded,
    ResultTooLarge,
    SettingsDamagedForCapability,
    SettingsFileDamaged,
    UnknownCapability,
)
from console_ha.ha.kept_clients import LendClient, one_client
from console_ha.ha.rest_client import cache_key
from console_ha.secret import Secret
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.ca_certificate import ca_bundle_path
from console_ha.store.config import ConfigStore, HomeAssistantConfig
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenLookup, TokenStore
from console_ha.timestamps import utc_z
from console_ha.unknown_keys import first_unknown
from console_ha.words import MODEL_FALLBACK, MODEL_WORDS

log = logging.getLogger(__name__)


@dataclass
class Turn:
    """How many times each capability has been proposed past policy in one conversation turn."""

    counts: Counter[str] = field(default_factory=Counter)


def always_room(capability: Capability) -> None:
    """The room of a front end that bounds no cards but by the turn (the household's own page): always some."""
    return None


# What else bounds proposals past the turn's own count: the words of a refusal for `capability`, or None when
# there is room. The household queue's waiting reads (its MAX_WAITING, and MCP's cards per tool) are one.
Room = Callable[[Capability], str | None]


@dataclass(frozen=True)
class Proposal:
    """An invocation paused at stage 4, waiting for the household."""

    token: str
    capability: str
    arguments: dict[str, Any]
    card: Card
    expires_at: str

    def to_dict(self) -> dict[str, Any]:
        """The contract's `pending_confirmation` object."""
        return {
            "token": self.token,
            "capability": self.capability,
            "arguments": self.arguments,
            "card": self.card.to_dict(),
            "expires_at": self.expires_at,
        }


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


# --- stage 2 ---------------------------------------------------------------------------------

@at_stage(Stage.VALIDATE)
def validate(capability: Capability, arguments: object) -> dict[str, Any]:
    """Stage 2: the arguments against the capability's schema, with no knowledge of configuration or allowlist."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidArguments("Arguments must be an object.")
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
def check_turn_limit(capability: Capability, turn: Turn, room: Room = always_room) -> None:
    """Stage 3: room for one more card (`room`), and at most `max_invocations_per_turn` proposals in one turn."""
    refusal = room(capability)
    if refusal is not None:
        raise InvocationLimitExceeded(refusal)
    if turn.counts[capability.name] >= capability.bounds.max_invocations_per_turn:
        raise InvocationLimitExceeded("This capability was already used in this turn.")
    turn.counts[capability.name] += 1


def what_the_card_shows(capability: Capability, config: HomeAssistantConfig) -> str:
    """Where the read goes and what else of the settings the capability binds: what an approval is bound to."""
    shown: dict[str, Any] = {"base_url": config.base_url, **capability.binds(config)}
    return json.dumps(shown, sort_keys=True)


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


class Executor:
    """Runs capability invocations through the six stages; needs no web server."""

    def __init__(self, data_dir: DataDir, *, config_store: ConfigStore, token_store: TokenStore, audit: AuditLog,
                 confirmations: ConfirmationStore, clients: LendClient = one_client,
                 clock: Callable[[], float] = time.time, memory: CardMemory | None = None) -> None:
        # Every store is handed in (Console.open builds them once); the executor builds none of its own.
        self._data_dir = data_dir
        self.config_store = config_store
        self.token_store = token_store
        self.confirmations = confirmations
        self.audit = audit
        # Lends the client for one invocation. Whoever made it decides what leaving the block does:
        # `one_client` closes it, the Console's kept clients (ha.clients) stay open for the next request.
        self._clients = clients
        self._clock = clock
        # Home Assistant's time zone per address, as the last read that reported one said (`household_zone`).
        self._zones: dict[str, ZoneInfo] = {}
        # What its cards may say of the devices, kept by its reads: the Console's, shared by its executors and
        # its settings page; else this executor's own (plain Python).
        self._memory = memory or CardMemory()

    def offered(self) -> tuple[Capability, ...]:
        """The capabilities an allowlisted entity can answer (`spec.offered`): what the model and MCP clients see."""
        try:
            allowlisted = self.config_store.load().allowlisted_entities
        except SettingsFileDamaged:
            allowlisted = ()  # stage 3 refuses every read until it is repaired; the ungated reads say so
        return offered(CAPABILITIES, allowlisted)

    def household_zone(self) -> ZoneInfo | None:
        """Home Assistant's time zone as the last read that reported it said (`time_zone`); None until one has.

        Learned, never asked for: a request to Home Assistant before the household allows a read would be
        one without a card (docs/capabilities.md, "Today in the prompt").
        """
        try:
            base_url = self.config_store.load().base_url
        except SettingsFileDamaged:
            return None
        return self._zones.get(base_url)

    def _learn_zone(self, base_url: str, result: Mapping[str, Any]) -> None:
        name = result.get("time_zone")
        if isinstance(name, str):
            try:
                self._zones[base_url] = household_zone({"time_zone": name})
            except HomeAssistantError:
                pass

    @property
    def confirmation_ttl(self) -> float:
        """How long a card this executor issues stays open, in seconds."""
        return self.confirmations.ttl

    def propose(self, name: object, arguments: object, *, conversation_id: str,
                turn: Turn | None = None, client: str | None = None, room: Room = always_room,
                at: float | None = None) -> Proposal:
        """Stages 1-4: refuse with a CapabilityError, or pause for the household's confirmation.

        `client` names a front end other than the household's page (an MCP client's API token name);
        it goes to the audit log and the card, never a value. `room` is the asking front end's own bound on
        waiting cards, refused at stage 3 like the turn's; `at` its reading of the confirmation store's timer, from
        which the card's expiry counts (default now).
        """
        self.sweep_expired()
        invocation = secrets.token_hex(8)
        label = name if isinstance(name, str) and name in REGISTRY else "unknown"
        self._audit(AuditEvent.PROPOSED, label, Stage.RESOLVE, invocation, client=client)
        try:
            capability = resolve(name)
            canonical = validate(capability, arguments)
            config = self._load_config()
            token = self._token_for(config)
            check_policy(capability, canonical, config, token)
            check_turn_limit(capability, turn or Turn(), room)
        except CapabilityError as err:
            # Stages 1-3 each record theirs (`at_stage`); a settings file found damaged is stage 3's.
            self._audit(AuditEvent.REJECTED, label, err.stage or Stage.POLICY, invocation, err.code, client=client)
            raise
        # What the Console holds of the devices (areas, kinds of reading): nothing is asked of Home Assistant
        # before the household answers (docs/capabilities.md, "What a card knows").
        facts = self._memory.facts(
            cache_key(config.base_url, cast(Secret, token.token), ca_bundle_path(config, self._data_dir)))
        pending = self.confirmations.issue(conversation_id, capability.name, canonical, invocation,
                                           shown=what_the_card_shows(capability, config), client=client,
                                           card_areas=facts.areas, at=at)
        self._audit(AuditEvent.CONFIRMATION_REQUESTED, capability.name, Stage.CONFIRM, invocation, client=client)
        return Proposal(
            token=pending.token,
            capability=capability.name,
            arguments=canonical,
            card=capability.card(config, canonical, facts),
            expires_at=utc_z(datetime.fromtimestamp(pending.expires_at, UTC)),
        )

    def answer(self, token: object, *, approve: bool, conversation_id: str) -> dict[str, Any]:
        """Stages 4-6: take the household's answer; run and shape the read when approved."""
        pending = self.take(token, conversation_id=conversation_id)
        if not approve:
            raise self.deny(pending)
        return self.run(pending)

    def take(self, token: object, *, conversation_id: str, at: float | None = None) -> PendingConfirmation:
        """Stage 4: use up `token`'s card as of `at` (the store's timer; default now); audited once it is settled.

        `answer` settles it at once; the household queue settles a card itself (`deny`, `run`, `record`), at
        the one moment it decided under its own lock. A card past its expiry is audited `expired` and raised.
        """
        try:
            # Looked up before the sweep, so a late answer is told "expired", not "unknown".
            with at_stage(Stage.CONFIRM):
                return self.confirmations.consume(token, conversation_id, at=at)
        except ExpiredConfirmation as err:
            self._audit_expired(err.pending)
            raise
        finally:
            self.sweep_expired()

    def deny(self, pending: PendingConfirmation) -> ConfirmationDenied:
        """Stage 4 of a taken card the household said no to: audited `denied`; the error its asker gets."""
        self._audit(AuditEvent.DENIED, pending.capability, Stage.CONFIRM, pending.invocation_id,
                    ConfirmationDenied.code, client=pending.client)
        return ConfirmationDenied("The household did not allow this read.", stage=Stage.CONFIRM)

    def run(self, pending: PendingConfirmation) -> dict[str, Any]:
        """Stages 5-6 of a taken card the household allowed: audited `approved`, then read and shaped."""
        capability = REGISTRY[pending.capability]
        self._audit(AuditEvent.APPROVED, capability.name, Stage.CONFIRM, pending.invocation_id, client=pending.client)
        return self._run(capability, pending)

    def record(self, event: AuditEvent, pending: PendingConfirmation, *, code: str | None = None,
               invocation: str | None = None) -> None:
        """Audit at stage 4 what the household queue decided for a card it took: `held`, `abandoned`, `cancelled`,
        or `asked_again` (a call of its own: `invocation` is that call's, not the card's)."""
        self._audit(event, pending.capability, Stage.CONFIRM, invocation or pending.invocation_id, code,
                    client=pending.client)

    def withdraw(self, token: object, *, conversation_id: str) -> AuditEvent | None:
        """The asker took its request back before the household answered: forget the card, nothing is read.

        Returns what was audited: CANCELLED, EXPIRED (its time had come), or None (nothing was open).
        """
        try:
            pending = self.confirmations.consume(token, conversation_id)
        except ExpiredConfirmation as err:
            self._audit_expired(err.pending)
            return AuditEvent.EXPIRED
        except CapabilityError:
            return None  # already answered, expired and swept, or never issued: nothing is left to withdraw
        self._audit(AuditEvent.CANCELLED, pending.capability, Stage.CONFIRM, pending.invocation_id,
                    client=pending.client)
        return AuditEvent.CANCELLED

    def still_as_shown(self, pending: PendingConfirmation) -> bool:
        """Whether what `pending`'s card showed (the address, what its capability binds) is still so: its read
        refuses when not (`_run`). Reads the settings only; a settings file found damaged is the read's to say."""
        try:
            config = self._load_config()
        except CapabilityError:
            return True
        return what_the_card_shows(REGISTRY[pending.capability], config) == pending.shown

    def is_open(self, token: object, *, conversation_id: str) -> bool:
        """Whether `token`'s card can still be answered; expired cards are swept (and audited) first."""
        self.sweep_expired()
        return self.confirmations.peek(token, conversation_id) is not None

    def sweep_expired(self) -> None:
        """Audit and forget confirmations nobody answered in time."""
        for pending in self.confirmations.expire():
            self._audit_expired(pending)

    def _run(self, capability: Capability, pending: PendingConfirmation) -> dict[str, Any]:
        arguments = pending.arguments
        started = time.monotonic()
        stage = Stage.POLICY
        try:
            # The household may have changed the settings while the card was open: check again.
            config = self._load_config()
            token = self._token_for(config)
            check_policy(capability, arguments, config, token)
            if what_the_card_shows(capability, config) != pending.shown:
                # Approved was a read of that Home Assistant (and whatever else the capability binds).
                changed = ConfirmationInvalid(ConfirmationReason.SETTINGS_CHANGED, "The Home Assistant settings "
                                              "changed after this card was shown; nothing was read. Ask again.")
                changed.stage = Stage.CONFIRM
                raise changed
            stage = Stage.EXECUTE
            deadline = Deadline(capability.bounds.timeout_seconds)
            now = datetime.fromtimestamp(self._clock(), UTC)
            with self._clients(config.base_url, cast(Secret, token.token),
                               ca_bundle_path(config, self._data_dir)) as client:
                raw = capability.execute(client, config, arguments, deadline, now,
                                         ReadNotes(self._memory, pending.card_areas))
            stage = Stage.SHAPE
            result = shape(capability, raw)
            self._learn_zone(config.base_url, result)
        except HomeAssistantError as err:
            self._audit(AuditEvent.FAILED, capability.name, Stage.EXECUTE, pending.invocation_id, err.code,
                        _elapsed_ms(started), client=pending.client)
            log.info("capability %s failed: %s", capability.name, err.message)
            told = err.reworded(MODEL_WORDS.get(err.code, MODEL_FALLBACK), detail={})
            told.stage = Stage.EXECUTE
            raise told from None
        except CapabilityError as err:
            event = AuditEvent.REJECTED if err.stage in (Stage.POLICY, Stage.CONFIRM) else AuditEvent.FAILED
            self._audit(event, capability.name, err.stage or stage, pending.invocation_id, err.code,
                        _elapsed_ms(started), client=pending.client)
            raise
        except Exception:
            # A bug must not leak a traceback (or anything in it) to the model or the household.
            log.exception("capability %s failed unexpectedly at stage %d", capability.name, stage)
            self._audit(AuditEvent.FAILED, capability.name, stage, pending.invocation_id, CapabilityFailed.code,
                        _elapsed_ms(started), client=pending.client)
            raise CapabilityFailed(INTERNAL_ERROR_MESSAGE, stage=stage) from None
        self._audit(AuditEvent.EXECUTED, capability.name, Stage.SHAPE, pending.invocation_id, None,
                    _elapsed_ms(started), client=pending.client)
        return result

    def _token_for(self, config: HomeAssistantConfig) -> TokenLookup:
        # The token is read after the configuration (see TokenStore.lookup) and only for its origin.
        return self.token_store.lookup(config.base_url, configured_url=config.base_url)

    def _load_config(self) -> HomeAssistantConfig:
        try:
            return self.config_store.load()
        except SettingsFileDamaged:
            raise SettingsDamagedForCapability("The Home Assistant settings file is damaged; the household can "
                                               "repair it on the settings page.", stage=Stage.POLICY) from None

    def _audit_expired(self, pending: PendingConfirmation) -> None:
        # One line however the expiry is found: answered late (the household queue's look at the card's expiry
        # included), withdrawn late, or swept unanswered. (A card the household allowed is taken at the Allow:
        # its end, read or `abandoned`, is the household queue's.)
        self._audit(AuditEvent.EXPIRED, pending.capability, Stage.CONFIRM, pending.invocation_id,
                    ConfirmationInvalid.code, client=pending.client)

    def _audit(self, event: AuditEvent, capability: str, stage: int, invocation: str, code: str | None = None,
               duration_ms: int | None = None, *, client: str | None = None) -> None:
        classification = REGISTRY[capability].classification if capability in REGISTRY else None
        self.audit.record(
            event,
            capability=capability,
            classification="/".join(classification.to_dict().values()) if classification else "unknown",
            stage=stage,
            invocation=invocation,
            code=code,
            duration_ms=duration_ms,
            client=client,
        )


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
