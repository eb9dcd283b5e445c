"""Telling the household's plugins of a card's life (`on_card`), off the request thread, and recording skipped hooks.

A card is `waiting`, `allowed`, `denied`, `expired` or `withdrawn` (`CARD_EVENTS`); both front ends tell of
theirs here: the conversation page's cards (turn_loop) and the household queue's (household_queue). A plugin
is told what the household would see on a notification and no more: the card's title (in English and in the
household's Language), the capability, the Home Assistant and the expiry; never the arguments' values beyond
what the title says (contract, "Plugins and stage hooks").

`on_card` observes only and never holds a card up: each event is handed to one worker thread per Console, which
calls the implementations one after the other (each within its own 1 s, `hook_calls`), so a plugin learns a
card's events in the order they happened. With no plugin implementing a hook, nothing is queued and no thread
is made.

The same worker tells a card's expiry when it happens: each front end that makes cards registers a `Sweeper`
(the moment its next card expires, on its own clock, and what ends the cards due), and the worker, between
events, wakes at the earliest of those moments (or after LOOK_SECONDS, whichever comes first) and runs the
sweeps; a card's end is then told like any other event, once, by the front end's own state. At most
MAX_EVENTS_WAITING events wait for the worker: past that, an event is dropped, and each run of drops is an
audit line `plugin_skipped` per plugin that missed it. `close` ends the worker with its Console.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console_ha.capabilities.executor import Proposal
from console_ha.capabilities.stages import instance_of, principal_of
from console_ha.hooks import CARD_EVENTS
from console_ha.language import Words, by_code
from console_ha.plugins.hook_calls import HOOK_SECONDS, Skipped, call_each
from console_ha.plugins.plugin_registry import Plugins
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.timestamps import utc_z_now

log = logging.getLogger(__name__)

# Events waiting for the plugins' worker at most: a plugin taking its full second on every event, under a program
# opening and withdrawing cards in a loop, would otherwise grow the queue without end. Past it, events are dropped.
MAX_EVENTS_WAITING = 256
# The worker reads each sweeper's clock at least this often while a card waits: a card's expiry is told within
# about this long of it even on a clock the Console does not own (a test's, moved by hand).
LOOK_SECONDS = 1.0
# A sweeper whose cards were due and stayed due (a turn held the conversation) is asked again after this long.
RETRY_SECONDS = 0.1
# How long `close` waits for the worker beyond the running implementation's own deadline (a sweep writing a file).
CLOSE_SECONDS = 5.0

# The principal of the household's own conversation page (a program's is `principal_of` its token's name).
HOUSEHOLD_PRINCIPAL = principal_of(None)


@dataclass(frozen=True)
class CardTold:
    """What the plugins may learn of a card (`card_for_plugins`): kept with a conversation's open card on disk, so
    a card a restart closed can still be told (`ConversationStore.load`)."""

    title: str
    capability: str
    instance: str
    expires_at: str

    @classmethod
    def of(cls, proposal: Proposal) -> CardTold:
        return cls(proposal.card.title, proposal.capability, instance_of(proposal.arguments), proposal.expires_at)


def card_for_plugins(proposal: Proposal | CardTold, language: str) -> dict[str, Any]:
    """What `on_card` is handed of a card: its title in English and in `language`, its capability, instance, expiry.

    The title is the card's own words: what a notification may say. The arguments are not handed, not even the
    entity ids (a title names devices by their names as the card shows them).
    """
    card = proposal if isinstance(proposal, CardTold) else CardTold.of(proposal)
    title = card.title
    shown = by_code(language)
    return {
        "title": str(title),
        "title_in_language": title.in_language(shown) if isinstance(title, Words) and shown else str(title),
        "language": shown.code if shown else "en",
        "capability": card.capability,
        "instance": card.instance,
        "expires_at": card.expires_at,
    }


@dataclass(frozen=True)
class Sweeper:
    """A front end's cards as the worker watches their expiry: when the next one is due, and what ends those due.

    `due` is the moment the front end's next open card expires, on `clock` (None: none is open); `sweep` ends
    the cards whose moment has come (each told `expired` by the front end, exactly once, as any other end).
    Both are called on the worker's thread, never under the worker's own lock.
    """

    clock: Callable[[], float]
    due: Callable[[], float | None]
    sweep: Callable[[], None]


class StageHookRunner:
    """One Console's way to call the household's plugins where nobody waits: on_card, after_output, and the audit
    line of every implementation skipped (raised or late)."""

    def __init__(self, plugins: Plugins | None, audit: AuditLog, *,
                 language: Callable[[], str] = lambda: "en", max_waiting: int = MAX_EVENTS_WAITING,
                 hook_seconds: float = HOOK_SECONDS) -> None:
        self.plugins = plugins
        self._audit = audit
        self._language = language  # the household's Language choice, read at each event (a save applies at once)
        self._max_waiting = max_waiting
        self._hook_seconds = hook_seconds
        self._events: deque[Callable[[], None]] = deque()
        self._sweepers: list[Sweeper] = []
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = False  # the worker is telling an event now
        self._closed = False
        self._dropped = 0  # events dropped in the current run of drops (the queue full)

    def implemented(self, hook: str) -> bool:
        """Whether any plugin that is on implements `hook` (no plugin: every hook call is skipped at no cost)."""
        return self.plugins is not None and bool(self.plugins.implementations(hook))

    def record(self, skipped: list[Skipped], *, capability: str = "", client: str | None = None,
               instance: str | None = None) -> None:
        """An audit line `plugin_skipped` for each implementation that raised or was late, naming plugin and hook
        (and for a card's hook, the Home Assistant the card reads: Activity shows each line under its own)."""
        for each in skipped:
            self._audit.record(AuditEvent.PLUGIN_SKIPPED, capability=capability, classification="", stage=0,
                               invocation=secrets.token_hex(8), client=client, plugin=each.plugin, hook=each.hook,
                               instance=instance)

    def noted(self, event: AuditEvent, plugin: str, hook: str, *, client: str | None = None) -> None:
        """An audit line of one plugin's answer at a conversation hook (no read): `plugin_changed` when it answered
        the message or changed the reply, `plugin_dropped` when its answer was not one it may give."""
        self._audit.record(event, capability="", classification="", stage=0, invocation=secrets.token_hex(8),
                           client=client, plugin=plugin, hook=hook)

    def card(self, event: str, proposal: Proposal | CardTold, principal: str, *, client: str | None = None) -> bool:
        """Tell the plugins that a card is now `event` (one of `CARD_EVENTS`); returns at once, whether any plugin
        that is on implements `on_card` (a card not told `waiting` is told no end: a plugin turned on meanwhile)."""
        if event not in CARD_EVENTS:
            raise ValueError(f"not a card event: {event}")
        if not self.implemented("on_card"):
            return False
        # The card is put in words on the worker: the caller may hold the queue's lock, and the Language is a file.
        told = proposal if isinstance(proposal, CardTold) else CardTold.of(proposal)
        self._submit("on_card", lambda: {"event": event, "card": card_for_plugins(told, self._language()),
                                         "principal": principal}, capability=told.capability, client=client,
                     instance=told.instance)
        return True

    def closed(self, card: CardTold) -> None:
        """Tell the plugins that a household page's card ended unanswered with its conversation (a restart closed
        it, or the conversation was evicted): `expired` once its time had come, else `withdrawn`."""
        self.card("expired" if card.expires_at <= utc_z_now() else "withdrawn", card, HOUSEHOLD_PRINCIPAL)

    def later(self, hook: str, arguments: dict[str, Any], *, capability: str = "", client: str | None = None) -> None:
        """Call an observe-only hook on the Console's one worker thread, after the events told before it."""
        self._submit(hook, lambda: arguments, capability=capability, client=client)

    def watch(self, sweeper: Sweeper) -> None:
        """Have the worker end `sweeper`'s cards at their expiry (a front end registers once, when it is built)."""
        with self._wake:
            self._sweepers.append(sweeper)
            self._wake.notify()

    def _submit(self, hook: str, arguments: Callable[[], dict[str, Any]], *, capability: str,
                client: str | None, instance: str | None = None) -> None:
        if not self.implemented(hook):
            return
        assert self.plugins is not None
        plugins = self.plugins

        def tell() -> None:
            try:
                self.record(call_each(plugins, hook, arguments(), seconds=self._hook_seconds,
                                      go_on=self._open).skipped, capability=capability, client=client,
                            instance=instance)
            except Exception:  # a worker's failure must not stop the events after it
                log.exception("could not tell the plugins of %s", hook)

        with self._wake:
            if self._closed:
                return
            if len(self._events) >= self._max_waiting:
                first = self._dropped == 0
                self._dropped += 1
            else:
                first, ended, self._dropped = False, self._dropped, 0
                if ended:
                    log.warning("the plugins' worker was behind: %d events were dropped, not told", ended)
                self._events.append(tell)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._serve, name="console-ha-plugins", daemon=True)
                    self._thread.start()
                self._wake.notify()
        if first:
            # One audit line per run of drops, per plugin that misses the event (the audit appends under its own lock).
            self.record([Skipped(impl.plugin_name, hook, "late") for impl in plugins.implementations(hook)],
                        capability=capability, client=client, instance=instance)

    def _open(self) -> bool:
        return not self._closed

    def _serve(self) -> None:
        """The worker: the events in order, and between them each sweeper's cards at their expiry."""
        while True:
            wait = self._sweep()
            with self._wake:
                if not self._events and not self._closed:
                    self._wake.wait(wait)
                if self._closed:
                    return
                tell = self._events.popleft() if self._events else None
                self._busy = tell is not None
            if tell is not None:
                tell()
                with self._wake:
                    self._busy = False
                    self._wake.notify_all()

    def _sweep(self) -> float | None:
        """Run the sweeps that are due; how long the worker may wait for the next (None: no card is open)."""
        with self._wake:
            sweepers = list(self._sweepers)
        wait: float | None = None
        for sweeper in sweepers:
            try:
                due = sweeper.due()
                if due is not None and due <= sweeper.clock():
                    sweeper.sweep()
                    due = sweeper.due()
            except Exception:  # one front end's failure must not stop the events, nor the other's expiries
                log.exception("could not end the cards that expired")
                due = None
                wait = LOOK_SECONDS if wait is None else min(wait, LOOK_SECONDS)
            if due is None:
                continue
            left = due - sweeper.clock()
            # Still due after its sweep: a turn holds that card and ends it itself; looked at again soon.
            left = RETRY_SECONDS if left <= 0 else min(left, LOOK_SECONDS)
            wait = left if wait is None else min(wait, left)
        return wait

    def settled(self, timeout: float = 10.0) -> None:
        """Wait until every event told so far has been handed to the plugins (tests)."""
        with self._wake:
            if not self._wake.wait_for(lambda: self._closed or not (self._events or self._busy), timeout):
                raise TimeoutError("the plugins' worker did not tell its events in time")

    def close(self) -> None:
        """End the worker with its Console: the events waiting are dropped, the one being told ends at its
        implementation's deadline (no other implementation is called after it), and the thread is joined."""
        with self._wake:
            self._closed = True
            dropped = len(self._events)
            self._events.clear()
            self._wake.notify_all()
            thread = self._thread
        if dropped:
            log.info("the Console closed with %d plugin events not told", dropped)
        if thread is not None and thread is not threading.current_thread():
            thread.join(self._hook_seconds + CLOSE_SECONDS)
            if thread.is_alive():
                log.warning("the plugins' worker did not end with its Console")
