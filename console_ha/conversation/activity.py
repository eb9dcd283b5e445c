"""What the household's activity page shows: the latest audit events in words, then how often each read ended how,
of every Home Assistant or of one."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from console_ha.capabilities.registry import REGISTRY
from console_ha.hooks import HOOK_NAMES
from console_ha.language import Words
from console_ha.store.audit import AuditEvent
from console_ha.store.config import shown_name
from console_ha.store.datadir import HOME_INSTANCE, is_instance_id
from console_ha.store.instances import HOME_NAME
from console_ha.words import CHAT_FALLBACK, CHAT_WORDS

LATEST_EVENTS = 50
# What the executor records for a capability it does not register (executor.py); a log's other unregistered
# names (a newer Console's, a damaged line's) are counted under it too.
UNKNOWN_CAPABILITY = "unknown"
# What a capability the log names but the Console does not register (or "unknown") is called.
UNKNOWN_CAPABILITY_WORDS = Words("Something the Console does not know")


@dataclass(frozen=True)
class EventWords:
    """One kind of audit event in the household's words: its line among the latest events, its counter's label."""

    line: Words
    counter: Words


# Every audit event (store.audit.AuditEvent) in the household's words, one entry each, in the order "How often"
# lists its counters. Each line is one whole sentence in the catalogs (issue 26), shown in the page's language;
# why a read was refused or did not work is the code's own sentence (`reason`), never a code.
EVENT_TABLE: Mapping[AuditEvent, EventWords] = MappingProxyType({
    AuditEvent.PROPOSED: EventWords(Words("Asked to read Home Assistant."), Words("Asked to read")),
    # Counted with the refusals after an approval too (`REFUSED_AFTER_YOU_ALLOWED`), so the label says neither.
    AuditEvent.REJECTED: EventWords(Words("Refused by the Console before you were asked."),
                                    Words("Refused by the Console")),
    AuditEvent.CONFIRMATION_REQUESTED: EventWords(Words("The Console asked you whether to allow it."),
                                                  Words("Asked you")),
    AuditEvent.APPROVED: EventWords(Words("You allowed it."), Words("You allowed")),
    AuditEvent.DENIED: EventWords(Words("You did not allow it, so nothing was read."),
                                  Words("You did not allow")),
    # Issue 25: a program's call that joins a card the household already denied; it is told no again.
    AuditEvent.ASKED_AGAIN: EventWords(Words("Asked again after you said no."),
                                       Words("Asked again after you said no")),
    AuditEvent.EXPIRED: EventWords(Words("It expired before you answered, so nothing was read."),
                                   Words("Expired unanswered")),
    AuditEvent.HELD: EventWords(Words("Allowed; the program will get it when it asks again."),
                                Words("Allowed, waiting for the program")),
    AuditEvent.EXECUTED: EventWords(Words("The read was done."), Words("Read done")),
    AuditEvent.FAILED: EventWords(Words("You allowed it, but the read did not work."),
                                  Words("Did not work")),
    AuditEvent.CANCELLED: EventWords(Words("Withdrawn by the program before you answered."),
                                     Words("Withdrawn")),
    AuditEvent.ABANDONED: EventWords(Words("The program had already gone; nothing was read."),
                                     Words("The program had gone")),
    # Issue 30: a line naming the plugin and its hook (`plugin_line` fills them in).
    # Translators: {plugin} is an installed plugin's name, {hook} the stage it acts at ("before_toolcall").
    AuditEvent.PLUGIN_CHANGED: EventWords(Words("The plugin {plugin} narrowed it at {hook}."),
                                          Words("Narrowed by a plugin")),
    # Translators: {plugin} is an installed plugin's name, {hook} the stage it acts at ("after_toolcall").
    AuditEvent.PLUGIN_DROPPED: EventWords(Words("The plugin {plugin} answered at {hook} with something it may not "
                                                "give, so the Console ignored it."),
                                          Words("A plugin’s answer ignored")),
    # Translators: {plugin} is an installed plugin's name, {hook} the stage it acts at ("before_toolcall").
    AuditEvent.PLUGIN_SKIPPED: EventWords(Words("The plugin {plugin} failed or took longer than a second at {hook}, "
                                                "so the Console went on without it."),
                                          Words("A plugin skipped")),
})
# Each event's line, for callers that need only that (tests look a line up by its event).
EVENT_WORDS: Mapping[AuditEvent, Words] = MappingProxyType({event: words.line for event, words in EVENT_TABLE.items()})
# A line of a log written by a newer Console, whose event this one has no words for.
UNKNOWN_EVENT_WORDS = Words("Something happened that this Console has no words for.")

# Who asked, when the audit line names no program: the household's own conversation page.
CONVERSATION_PAGE = Words("Conversation page")
# A read the household allowed that the Console then refused (the settings changed while the card was open):
# the same `rejected` event, told apart by its invocation having been approved earlier in the log.
# Translators: {plugin} is an installed plugin's name; it refused the read in its before_toolcall hook.
REFUSED_BY_A_PLUGIN = Words("Refused by the plugin {plugin} before you were asked.")
# A plugin's change at a conversation hook (no read): it answered the message itself, or changed the reply.
# Translators: {plugin} is an installed plugin's name, {hook} the stage it acts at ("on_input").
ANSWERED_BY_A_PLUGIN = Words("The plugin {plugin} answered the message itself at {hook}, so the assistant was not "
                             "asked.")
# Translators: {plugin} is an installed plugin's name, {hook} the stage it acts at ("before_output").
REPLY_CHANGED_BY_A_PLUGIN = Words("The plugin {plugin} changed the assistant’s words at {hook}.")
REFUSED_AFTER_YOU_ALLOWED = Words("You allowed it, but the Console then refused it, so nothing was read.")
# A card of the conversation page withdrawn because the household sent another message instead.
WITHDRAWN_BY_A_NEW_MESSAGE = Words("Withdrawn: you asked something else.")
# A plugin's name as Activity shows it: one line, at most this many characters (a plugin names itself, and a
# damaged line may hold anything).
MAX_PLUGIN_NAME_SHOWN = 64
# A plugin event whose line names no plugin, or a hook there is not (a damaged or hand-edited log): its words
# without the names, never the line's own text.
PLUGIN_EVENT_GENERAL: Mapping[AuditEvent, Words] = MappingProxyType({
    AuditEvent.PLUGIN_CHANGED: Words("A plugin narrowed it."),
    AuditEvent.PLUGIN_DROPPED: Words("A plugin answered with something it may not give, so the Console ignored it."),
    AuditEvent.PLUGIN_SKIPPED: Words("A plugin failed or took longer than a second, so the Console went on "
                                     "without it."),
})

# The names of a Console that reads one Home Assistant (`Instances.names()` of a fresh data dir).
HOME_ONLY: Mapping[str, str] = MappingProxyType({HOME_INSTANCE: HOME_NAME})

# The events whose words name a plugin and its hook (issue 30).
PLUGIN_EVENTS = frozenset({AuditEvent.PLUGIN_CHANGED, AuditEvent.PLUGIN_DROPPED, AuditEvent.PLUGIN_SKIPPED})
# What a plugin's change at a conversation hook did, by the hook (the executor's hooks narrow a read).
CONVERSATION_CHANGES: Mapping[str, Words] = MappingProxyType({
    "on_input": ANSWERED_BY_A_PLUGIN, "post_action": REPLY_CHANGED_BY_A_PLUGIN,
    "before_output": REPLY_CHANGED_BY_A_PLUGIN})

# The events whose code says why, in the household's words (`reason`).
EXPLAINED = (AuditEvent.REJECTED, AuditEvent.FAILED)
REFUSED_FALLBACK = Words("The Console refused it for a reason this Console has no words for.")


def reason(event: AuditEvent, code: str | None) -> str | None:
    """Why a refused or failed read ended as it did, in the household's words (the chat's, words.CHAT_WORDS)."""
    if event not in EXPLAINED:
        return None  # the event's own line says it all ("You did not allow it", "It expired…")
    if code is not None and code in CHAT_WORDS:
        return CHAT_WORDS[code]
    if event == AuditEvent.REJECTED:
        return REFUSED_FALLBACK
    return CHAT_FALLBACK  # INTERNAL_ERROR among them: the household is told it did not work, nothing more


def capability_words(capability: str) -> str:
    """The capability in the household's words (its own `activity_words`); its id stays in the page's data."""
    known = REGISTRY.get(capability)
    return known.activity_words if known is not None else UNKNOWN_CAPABILITY_WORDS


@dataclass(frozen=True)
class Reason:
    """One reason a capability was refused or did not work, and how often."""

    event: AuditEvent
    code: str
    words: str
    count: int


@dataclass(frozen=True)
class Tally:
    """One counter of a capability that is not zero: the event, its label and how often."""

    event: AuditEvent
    label: str
    count: int


@dataclass
class CapabilityActivity:
    """How often one capability reached each outcome; refusals and failures by code."""

    capability: str
    counts: Counter[AuditEvent] = field(default_factory=Counter)
    codes: dict[AuditEvent, Counter[str]] = field(default_factory=dict)

    @property
    def words(self) -> str:
        """The capability in plain words."""
        return capability_words(self.capability)

    def add(self, kind: AuditEvent | None, event: Mapping[str, Any]) -> None:
        """Count one audit line of event `kind` (None, one this Console has no words for, is not counted)."""
        if kind is None:
            return
        self.counts[kind] += 1
        if kind in EXPLAINED:
            codes = self.codes.get(kind)
            if codes is None:  # not setdefault: that would build a Counter for every line of a long log
                codes = self.codes[kind] = Counter()
            codes[str(event.get("code") or "UNKNOWN")] += 1

    @property
    def tally(self) -> list[Tally]:
        """The counters that are not zero, in the table's order."""
        return [Tally(kind, words.counter, self.counts[kind]) for kind, words in EVENT_TABLE.items()
                if self.counts[kind]]

    @property
    def reasons(self) -> list[Reason]:
        """Why it was refused, then why it did not work: the most frequent first."""
        found = []
        for kind in EXPLAINED:
            codes = sorted(self.codes.get(kind, Counter()).items(), key=lambda item: (-item[1], item[0]))
            found += [Reason(kind, code, reason(kind, code) or "", count) for code, count in codes]
        return found


@dataclass(frozen=True)
class ActivityEvent:
    """One audit line as the page shows it: what happened and why, in words, never values (the log holds none)."""

    time: str
    capability: str  # "" for a line about no read (a plugin at a conversation hook): the page shows no "Read"
    event: str
    words: str
    stage: int | None
    code: str | None
    duration_ms: int | None
    # The API token's name of the program (an MCP client) that asked, or the conversation page.
    asked_by: str = CONVERSATION_PAGE
    why: str | None = None
    # The Home Assistant it was about (`home` for a line that names none), and what the page calls it.
    instance: str = HOME_INSTANCE
    instance_name: str = HOME_NAME
    # Issue 30: the plugin and its hook the line is about (also in `words`), when a plugin had a part in it.
    plugin: str | None = None
    hook: str | None = None

    @property
    def capability_words(self) -> str:
        """The read in the household's words."""
        return capability_words(self.capability)


@dataclass(frozen=True)
class InstanceChoice:
    """A Home Assistant whose events Activity can show alone: its id and what the page calls it."""

    id: str
    name: str
    removed: bool = False


@dataclass(frozen=True)
class Activity:
    """The activity page's content: of every Home Assistant, or of the one `instance` names."""

    capabilities: list[CapabilityActivity]
    latest: list[ActivityEvent]
    total_events: int
    # The Console's instances, then those the log names that it no longer has: what the page can narrow to.
    instances: tuple[InstanceChoice, ...] = (InstanceChoice(HOME_INSTANCE, HOME_NAME),)
    instance: str | None = None

    @property
    def by_instance(self) -> bool:
        """Whether each event names its Home Assistant and the page offers to show one: never while the Console
        has one and the log holds no other's events, so such a page reads as it did before instances."""
        return len(self.instances) > 1

    @property
    def chosen(self) -> InstanceChoice | None:
        """The instance the page shows alone, if it is one there is or the log names; None for all of them."""
        return next((choice for choice in self.instances if choice.id == self.instance), None)

    @property
    def asked_for(self) -> list[CapabilityActivity]:
        """The capabilities with at least one counted event, in registry order (then as the log met them)."""
        return [item for item in self.capabilities if item.tally]

    @property
    def not_asked_for(self) -> list[CapabilityActivity]:
        """The registered capabilities nothing happened to yet: named once, with no row of zeros."""
        # Not the unknown one: it is in the log (with events this Console has no words for), so it was asked for.
        return [item for item in self.capabilities if not item.tally and item.capability in REGISTRY]


# Read once: the log may hold many thousand lines, and an enum member is looked up on its class each time.
_APPROVED = AuditEvent.APPROVED


def summarise(events: Iterable[Mapping[str, Any]], *, names: Mapping[str, str] = HOME_ONLY,
              instance: str | None = None, latest: int = LATEST_EVENTS) -> Activity:
    """Counts per capability (registered ones always listed, in registry order) and the newest events first, of
    the instance `instance` names (a line naming none is `home`'s) or of all; `names` are the Console's instances."""
    per_capability = {name: CapabilityActivity(name) for name in REGISTRY}
    # Only the latest are shown: each line is kept as read, and put in words once it is known to be shown.
    recent: deque[tuple[str, AuditEvent | None, Mapping[str, Any], bool, str]] = deque(maxlen=latest)
    total = 0
    approved: set[str] = set()  # invocations the household allowed: a later refusal came after its answer
    # Every id the log names, checked once each: many thousand lines name the same few.
    named: set[str] = set()
    for event in events:
        place = event.get("instance")
        if place is None:
            place = HOME_INSTANCE
        elif type(place) is not str or place not in named:  # an id met before is one; anything else is checked
            place = _instance_named(place, named)
        if instance is not None and place != instance:
            continue
        total += 1
        invocation = str(event.get("invocation") or "")
        kind = AuditEvent.of(event.get("event"))
        if kind is _APPROVED and invocation:
            approved.add(invocation)
        name = str(event.get("capability") or UNKNOWN_CAPABILITY)
        if kind in PLUGIN_EVENTS and not event.get("capability"):
            # A conversation hook's (issue 30): no read to count it under; it is listed, not tallied as `unknown`,
            # and names no read (its capability "": the page shows no "Read").
            recent.append(("", kind, event, False, place))
            continue
        # Every name this Console does not register is counted as one: each would be headed by the same words.
        counted = name if name in REGISTRY else UNKNOWN_CAPABILITY
        tally = per_capability.get(counted)
        if tally is None:  # only `unknown`'s, once: a setdefault would build a CapabilityActivity for every line
            tally = per_capability[counted] = CapabilityActivity(counted)
        tally.add(kind, event)
        recent.append((name, kind, event, invocation in approved, place))
    choices = _choices(names, named)
    called = {choice.id: choice.name for choice in choices}
    shown = [_shown(name, kind, event, after_approval=after, instance=place, instance_name=called.get(place, place))
             for name, kind, event, after, place in reversed(recent)]
    return Activity(list(per_capability.values()), shown, total, choices, instance)


def _instance_named(value: object, named: set[str]) -> str:
    """The instance a line's `instance` names, added to `named`: an id's shape, else `home` (a damaged line; the
    executor writes only ids there are, never what a caller sent)."""
    if not isinstance(value, str) or not is_instance_id(value):
        return HOME_INSTANCE
    named.add(value)
    return value


def _choices(names: Mapping[str, str], named: set[str]) -> tuple[InstanceChoice, ...]:
    """The Console's instances in their order, then the ids the log names that it no longer has, marked."""
    gone = sorted(named - names.keys())
    return (*(InstanceChoice(id, name) for id, name in names.items()),
            *(InstanceChoice(id, removed_instance(id), removed=True) for id in gone))


def removed_instance(instance: str) -> Words:
    """What Activity calls an instance the log names that the Console no longer has: its id, marked removed."""
    # Translators: the id of a Home Assistant the household has removed from the Console ("cabin"), marked so.
    return Words("{instance} (removed)", instance=instance)


def _shown(capability: str, kind: AuditEvent | None, event: Mapping[str, Any], *, after_approval: bool,
           instance: str, instance_name: str) -> ActivityEvent:
    code = str(event["code"]) if event.get("code") else None
    client = str(event["client"]) if event.get("client") else None
    named_plugin = event.get("plugin")
    plugin = (shown_name(named_plugin, MAX_PLUGIN_NAME_SHOWN) or None) if isinstance(named_plugin, str) else None
    hook = event.get("hook") if event.get("hook") in HOOK_NAMES else None
    if kind in PLUGIN_EVENTS:
        said = CONVERSATION_CHANGES.get(hook or "") if kind is AuditEvent.PLUGIN_CHANGED else None
        words = (PLUGIN_EVENT_GENERAL[kind] if plugin is None or hook is None
                 else Words((said or EVENT_WORDS[kind]).msgid, plugin=plugin, hook=hook))
    elif kind is AuditEvent.REJECTED and plugin is not None:
        words = Words(REFUSED_BY_A_PLUGIN.msgid, plugin=plugin)
    elif kind is AuditEvent.CANCELLED and client is None:
        words = WITHDRAWN_BY_A_NEW_MESSAGE  # the conversation page's card: the household moved on
    elif kind is AuditEvent.REJECTED and after_approval:
        words = REFUSED_AFTER_YOU_ALLOWED
    else:
        words = UNKNOWN_EVENT_WORDS if kind is None else EVENT_WORDS[kind]
    return ActivityEvent(
        time=str(event.get("time") or ""),
        capability=capability,
        # An event this Console does not know keeps the log's own name in the page's data.
        event=str(event.get("event") or "") if kind is None else kind,
        words=words,
        stage=_int_or_none(event.get("stage")),
        code=code,
        duration_ms=_int_or_none(event.get("duration_ms")),
        asked_by=client or CONVERSATION_PAGE,
        why=None if kind is None else reason(kind, code),
        instance=instance,
        instance_name=instance_name,
        plugin=plugin,
        hook=hook,
    )


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
