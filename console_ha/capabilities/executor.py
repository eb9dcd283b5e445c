"""The six-stage capability executor: resolve, validate, policy, confirm, execute, shape."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast
from zoneinfo import ZoneInfo

from console_ha.capabilities.card_facts import CardMemory, ReadNotes
from console_ha.capabilities.cards import Card, at_instance
from console_ha.capabilities.confirmations import ConfirmationStore, ExpiredConfirmation, PendingConfirmation
from console_ha.capabilities.registry import CAPABILITIES, REGISTRY
from console_ha.capabilities.spec import INSTANCE, Capability, offered
from console_ha.capabilities.stages import (
    AFTER_TOOLCALL,
    BEFORE_TOOLCALL,
    INTERNAL_ERROR_MESSAGE,
    Room,
    Stage,
    Turn,
    always_room,
    asked_instance,
    at_stage,
    check_policy,
    check_turn_limit,
    instance_of,
    narrower_result,
    own_copy,
    principal_of,
    refused_by_plugin,
    resolve,
    shape,
    validate,
    what_the_card_shows,
)
from console_ha.capabilities.time_zone import household_zone
from console_ha.deadline import Deadline
from console_ha.errors import (
    CapabilityError,
    CapabilityFailed,
    ConfirmationDenied,
    ConfirmationInvalid,
    ConfirmationReason,
    HomeAssistantError,
    SettingsDamagedForCapability,
    SettingsFileDamaged,
)
from console_ha.ha.kept_clients import LendClient, one_client
from console_ha.ha.rest_client import cache_key
from console_ha.plugins.hook_calls import Skipped, call_one
from console_ha.plugins.narrowing import is_arguments
from console_ha.plugins.plugin_registry import Plugins
from console_ha.secret import Secret
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.ha_token import TokenLookup
from console_ha.store.instances import Instance, Instances, name_of
from console_ha.timestamps import utc_z
from console_ha.words import MODEL_FALLBACK, MODEL_WORDS

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class Prepared:
    """A read past the first step of a proposal (`Executor.prepare`): audited `proposed`, through stages 1-2 and the
    plugins' `before_toolcall`; no card yet, so nothing is lost if its asker goes now (`Executor.drop`)."""

    invocation: str
    capability: Capability
    arguments: dict[str, Any]  # canonical, as the plugins left them
    client: str | None
    instances: tuple[str, ...]  # the ids there were when it was asked (a card names its instance when several)


class Executor:
    """Runs capability invocations through the six stages; needs no web server."""

    def __init__(self, instances: Instances, *, audit: AuditLog, confirmations: ConfirmationStore,
                 clients: LendClient = one_client, clock: Callable[[], float] = time.time,
                 memory: CardMemory | None = None, plugins: Plugins | None = None) -> None:
        # Every store is handed in (Console.open builds them once); the executor builds none of its own.
        self.instances = instances
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
        # The household's plugins (the Console's, shared by its executors): their `before_toolcall` and
        # `after_toolcall` hooks, checked so they narrow and never widen. None: no plugin (plain Python).
        self._plugins = plugins

    def offered(self) -> tuple[Capability, ...]:
        """The capabilities an allowlisted entity of any instance can answer (`spec.offered`): what the model and
        MCP clients see."""
        allowlisted: list[str] = []
        for instance in self.instances.ids():
            try:
                allowlisted.extend(self.instances.get(instance).config.load().allowlisted_entities)
            except SettingsFileDamaged:
                pass  # stage 3 refuses its reads until it is repaired; the ungated reads say so
        return offered(CAPABILITIES, allowlisted)

    def household_zone(self) -> ZoneInfo | None:
        """Home Assistant's time zone as the last read that reported it said (`time_zone`); None until one has.

        Learned, never asked for: a request to Home Assistant before the household allows a read would be
        one without a card (docs/capabilities.md, "Today in the prompt").
        """
        try:
            base_url = self.instances.home.config.load().base_url
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
        """Stages 1-4 in one call (`prepare`, then `issue`), for a caller that may wait out the plugins (the
        household's page): refuse with a CapabilityError, or pause for the household's confirmation.

        `client` names a front end other than the household's page (an MCP client's API token name): to the audit
        log and the card, never a value. `room` is the front end's own bound on waiting cards, refused at stage 3
        like the turn's; `at` its reading of the confirmation store's timer, whence the card's expiry counts.
        """
        self.sweep_expired()  # first, as always: the expiries found are audited before this call's lines
        return self._issue(self.prepare(name, arguments, client=client), conversation_id=conversation_id,
                           turn=turn, room=room, at=at)

    def prepare(self, name: object, arguments: object, *, client: str | None = None) -> Prepared:
        """The first step of a proposal: the `proposed` line, stages 1-2 and the plugins' `before_toolcall`.

        It makes no card and touches no confirmation: a caller runs it outside its own lock or event loop (each
        plugin may take its second), then `issue`s what it lets through. A refusal is raised and audited here.
        """
        invocation = secrets.token_hex(8)
        label = name if isinstance(name, str) and name in REGISTRY else "unknown"
        ids = self.instances.ids()
        asked = asked_instance(arguments, ids)
        self._audit(AuditEvent.PROPOSED, label, Stage.RESOLVE, invocation, client=client, instance=asked)
        try:
            capability = resolve(name)
            canonical = validate(capability, arguments, ids)
        except CapabilityError as err:
            self._rejected(err, label, invocation, client=client, instance=asked)
            raise
        canonical = self._before_toolcall(capability, canonical, ids, invocation, client=client)
        return Prepared(invocation, capability, canonical, client, ids)

    def drop(self, prepared: Prepared) -> None:
        """A read `prepare` let through whose asker went before it was issued: audited `cancelled` at stage 3."""
        self._audit(AuditEvent.CANCELLED, prepared.capability.name, Stage.POLICY, prepared.invocation,
                    client=prepared.client, instance=instance_of(prepared.arguments))

    def issue(self, prepared: Prepared, *, conversation_id: str, turn: Turn | None = None,
              room: Room = always_room, at: float | None = None) -> Proposal:
        """The rest of a proposal `prepare` let through: stage 3 (policy, the turn's and `room`'s bounds) and stage 4
        (the card), after expired cards are swept (and audited)."""
        self.sweep_expired()
        return self._issue(prepared, conversation_id=conversation_id, turn=turn, room=room, at=at)

    def _issue(self, prepared: Prepared, *, conversation_id: str, turn: Turn | None, room: Room, at: float | None
               ) -> Proposal:  # swept by the caller: once per proposal, as before the two steps
        capability, canonical, client = prepared.capability, prepared.arguments, prepared.client
        # Where the read would go: the arguments as the plugins left them name it (a refusal's line says so).
        instance = self.instances.get(instance_of(canonical))
        try:
            config = self._load_config(instance)
            token = self._token_for(instance, config)
            check_policy(capability, canonical, config, token)
            check_turn_limit(capability, turn or Turn(), room, instance.id)
        except CapabilityError as err:
            # Stage 3 records its own (`at_stage`); a settings file found damaged is stage 3's.
            self._rejected(err, capability.name, prepared.invocation, client=client, instance=instance.id)
            raise
        # What the Console holds of the devices (areas, kinds of reading): nothing is asked of Home Assistant
        # before the household answers (docs/capabilities.md, "What a card knows").
        facts = self._memory.facts(cache_key(config.base_url, cast(Secret, token.token), instance.ca_bundle(config)))
        pending = self.confirmations.issue(conversation_id, capability.name, canonical, prepared.invocation,
                                           shown=what_the_card_shows(capability, config, instance.id), client=client,
                                           card_areas=facts.areas, at=at)
        self._audit(AuditEvent.CONFIRMATION_REQUESTED, capability.name, Stage.CONFIRM, prepared.invocation,
                    client=client, instance=instance.id)
        card = capability.card(config, canonical, facts)
        return Proposal(
            token=pending.token,
            capability=capability.name,
            arguments=canonical,
            card=card if len(prepared.instances) == 1 else at_instance(card, name_of(instance.id, config)),
            expires_at=utc_z(datetime.fromtimestamp(pending.expires_at, UTC)),
        )

    def _rejected(self, err: CapabilityError, label: str, invocation: str, *, client: str | None,
                  instance: str | None) -> None:
        """The `rejected` line of a refusal at stages 1-3, naming the plugin (and its hook) when one refused."""
        self._audit(AuditEvent.REJECTED, label, err.stage or Stage.POLICY, invocation, err.code, client=client,
                    instance=instance, plugin=err.plugin, hook=BEFORE_TOOLCALL if err.plugin else None)

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
                    ConfirmationDenied.code, client=pending.client,
                    instance=instance_of(pending.arguments))
        return ConfirmationDenied("The household did not allow this read.", stage=Stage.CONFIRM)

    def run(self, pending: PendingConfirmation) -> dict[str, Any]:
        """Stages 5-6 of a taken card the household allowed: audited `approved`, then read and shaped."""
        capability = REGISTRY[pending.capability]
        self._audit(AuditEvent.APPROVED, capability.name, Stage.CONFIRM, pending.invocation_id, client=pending.client,
                    instance=instance_of(pending.arguments))
        return self._run(capability, pending)

    def record(self, event: AuditEvent, pending: PendingConfirmation, *, code: str | None = None,
               invocation: str | None = None) -> None:
        """Audit at stage 4 what the household queue decided for a card it took: `held`, `abandoned`, `cancelled`,
        or `asked_again` (a call of its own: `invocation` is that call's, not the card's)."""
        self._audit(event, pending.capability, Stage.CONFIRM, invocation or pending.invocation_id, code,
                    client=pending.client,
                    instance=instance_of(pending.arguments))

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
                    client=pending.client,
                    instance=instance_of(pending.arguments))
        return AuditEvent.CANCELLED

    def still_as_shown(self, pending: PendingConfirmation) -> bool:
        """Whether what `pending`'s card showed (the address, what its capability binds) is still so: its read
        refuses when not (`_run`). Reads the settings only; a settings file found damaged is the read's to say."""
        instance = self.instances.get(instance_of(pending.arguments))
        if not self.instances.exists(instance.id):
            return False
        try:
            config = self._load_config(instance)
        except CapabilityError:
            return True
        return what_the_card_shows(REGISTRY[pending.capability], config, instance.id) == pending.shown

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
        instance = self.instances.get(instance_of(arguments))
        started = time.monotonic()
        stage = Stage.POLICY
        try:
            if not self.instances.exists(instance.id):
                # Removed while its card was open: its settings are gone, not "switched off" (the file's default).
                raise _changed_since_shown()
            # The household may have changed the settings while the card was open: check again.
            config = self._load_config(instance)
            token = self._token_for(instance, config)
            check_policy(capability, arguments, config, token)
            if what_the_card_shows(capability, config, instance.id) != pending.shown:
                # Approved was a read of that Home Assistant (and whatever else the capability binds).
                raise _changed_since_shown()
            stage = Stage.EXECUTE
            deadline = Deadline(capability.bounds.timeout_seconds)
            now = datetime.fromtimestamp(self._clock(), UTC)
            with self._clients(config.base_url, cast(Secret, token.token), instance.ca_bundle(config)) as client:
                raw = capability.execute(client, config, arguments, deadline, now,
                                         ReadNotes(self._memory, pending.card_areas))
            stage = Stage.SHAPE
            result = shape(capability, {**raw, INSTANCE: instance.id})
            self._learn_zone(config.base_url, result)
            result = self._after_toolcall(capability, pending, result)
        except HomeAssistantError as err:
            self._audit(AuditEvent.FAILED, capability.name, Stage.EXECUTE, pending.invocation_id, err.code,
                        _elapsed_ms(started), client=pending.client, instance=instance_of(pending.arguments))
            log.info("capability %s failed: %s", capability.name, err.message)
            told = err.reworded(MODEL_WORDS.get(err.code, MODEL_FALLBACK), detail={})
            told.stage = Stage.EXECUTE
            raise told from None
        except CapabilityError as err:
            event = AuditEvent.REJECTED if err.stage in (Stage.POLICY, Stage.CONFIRM) else AuditEvent.FAILED
            self._audit(event, capability.name, err.stage or stage, pending.invocation_id, err.code,
                        _elapsed_ms(started), client=pending.client,
                    instance=instance_of(pending.arguments))
            raise
        except Exception:
            # A bug must not leak a traceback (or anything in it) to the model or the household.
            log.exception("capability %s failed unexpectedly at stage %d", capability.name, stage)
            self._audit(AuditEvent.FAILED, capability.name, stage, pending.invocation_id, CapabilityFailed.code,
                        _elapsed_ms(started), client=pending.client,
                    instance=instance_of(pending.arguments))
            raise CapabilityFailed(INTERNAL_ERROR_MESSAGE, stage=stage) from None
        self._audit(AuditEvent.EXECUTED, capability.name, Stage.SHAPE, pending.invocation_id, None,
                    _elapsed_ms(started), client=pending.client,
                    instance=instance_of(pending.arguments))
        return result

    def _before_toolcall(self, capability: Capability, canonical: dict[str, Any], ids: tuple[str, ...],
                         invocation: str, *, client: str | None) -> dict[str, Any]:
        """Between stages 2 and 3: each plugin's `before_toolcall`, handed what the one before it left.

        A str refuses the call (`REFUSED_BY_PLUGIN`, raised). Arguments (`is_arguments`) are validated
        again from stage 2, as if the model had asked for them, and stage 3 then checks them as it checks any
        (the allowlist of the instance they name): invalid ones refuse the call, naming the plugin, rather than
        let the read go ahead with arguments the plugin wanted changed. Any other answer is dropped. Each line
        names the instance the read goes to as the plugins before it left it; a refusal is audited here.
        """
        if self._plugins is None:
            return canonical
        principal = principal_of(client)
        instance = instance_of(canonical)
        for impl in self._plugins.implementations(BEFORE_TOOLCALL):
            plugin = impl.plugin_name
            answered = call_one(impl, BEFORE_TOOLCALL, {"capability": capability.name, "arguments": canonical,
                                                        "principal": principal})
            if answered is None:
                continue
            if isinstance(answered, Skipped):
                self._audit(AuditEvent.PLUGIN_SKIPPED, capability.name, Stage.POLICY, invocation, client=client,
                            instance=instance, plugin=answered.plugin, hook=BEFORE_TOOLCALL)
                continue
            answer = answered if type(answered) is str else own_copy(answered)  # the plugin may still change it
            try:
                if type(answer) is str:
                    raise refused_by_plugin(plugin, answer)
                if not is_arguments(answer):
                    self._audit(AuditEvent.PLUGIN_DROPPED, capability.name, Stage.POLICY, invocation, client=client,
                            instance=instance, plugin=plugin, hook=BEFORE_TOOLCALL)
                    continue
                narrowed = validate(capability, answer, ids)
            except CapabilityError as err:
                err.plugin = plugin
                self._rejected(err, capability.name, invocation, client=client, instance=instance)
                raise
            if narrowed != canonical:
                self._audit(AuditEvent.PLUGIN_CHANGED, capability.name, Stage.POLICY, invocation, client=client,
                            instance=instance, plugin=plugin, hook=BEFORE_TOOLCALL)
                canonical, instance = narrowed, instance_of(narrowed)
        return canonical

    def _after_toolcall(self, capability: Capability, pending: PendingConfirmation,
                        result: dict[str, Any]) -> dict[str, Any]:
        """After stage 6: each plugin's `after_toolcall`, handed what the one before it left.

        An answer is kept only when it is a dict that narrows what that plugin was handed (`narrows`), still
        names the same `instance` and validates against the capability's result schema; any other is dropped.
        """
        if self._plugins is None:
            return result
        principal, client, invocation = principal_of(pending.client), pending.client, pending.invocation_id
        instance = instance_of(pending.arguments)
        for impl in self._plugins.implementations(AFTER_TOOLCALL):
            plugin = impl.plugin_name
            answered = call_one(impl, AFTER_TOOLCALL, {"capability": capability.name, "arguments": pending.arguments,
                                                       "result": result, "principal": principal})
            if answered is None:
                continue
            if isinstance(answered, Skipped):
                self._audit(AuditEvent.PLUGIN_SKIPPED, capability.name, Stage.SHAPE, invocation, client=client,
                            instance=instance, plugin=answered.plugin, hook=AFTER_TOOLCALL)
                continue
            kept = narrower_result(capability, result, answered)
            if kept is None:
                self._audit(AuditEvent.PLUGIN_DROPPED, capability.name, Stage.SHAPE, invocation, client=client,
                            instance=instance, plugin=plugin, hook=AFTER_TOOLCALL)
            elif kept != result:
                self._audit(AuditEvent.PLUGIN_CHANGED, capability.name, Stage.SHAPE, invocation, client=client,
                            instance=instance, plugin=plugin, hook=AFTER_TOOLCALL)
                result = kept
        return result

    def _token_for(self, instance: Instance, config: HomeAssistantConfig) -> TokenLookup:
        # The token is read after the configuration (see TokenStore.lookup) and only for its origin.
        return instance.token.lookup(config.base_url, configured_url=config.base_url)

    def _load_config(self, instance: Instance) -> HomeAssistantConfig:
        try:
            return instance.config.load()
        except SettingsFileDamaged:
            raise SettingsDamagedForCapability("The Home Assistant settings file is damaged; the household can "
                                               "repair it on the settings page.", stage=Stage.POLICY) from None

    def _audit_expired(self, pending: PendingConfirmation) -> None:
        # One line however the expiry is found: answered late (the household queue's look at the card's expiry
        # included), withdrawn late, or swept unanswered. (A card the household allowed is taken at the Allow:
        # its end, read or `abandoned`, is the household queue's.)
        self._audit(AuditEvent.EXPIRED, pending.capability, Stage.CONFIRM, pending.invocation_id,
                    ConfirmationInvalid.code, client=pending.client,
                    instance=instance_of(pending.arguments))

    def _audit(self, event: AuditEvent, capability: str, stage: int, invocation: str, code: str | None = None,
               duration_ms: int | None = None, *, client: str | None = None, instance: str | None = None,
               plugin: str | None = None, hook: str | None = None) -> None:
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
            instance=instance,
            plugin=plugin,
            hook=hook,
        )


def _changed_since_shown() -> ConfirmationInvalid:
    """What a read allowed from a card whose Home Assistant settings are no longer what it showed is refused with."""
    changed = ConfirmationInvalid(ConfirmationReason.SETTINGS_CHANGED, "The Home Assistant settings changed after "
                                  "this card was shown; nothing was read. Ask again.")
    changed.stage = Stage.CONFIRM
    return changed


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
