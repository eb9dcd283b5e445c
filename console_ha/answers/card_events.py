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
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from console_ha.capabilities.executor import Proposal
from console_ha.capabilities.stages import instance_of
from console_ha.hooks import CARD_EVENTS
from console_ha.language import Words, by_code
from console_ha.plugins.hook_calls import Skipped, call_each
from console_ha.plugins.plugin_registry import Plugins
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.timestamps import utc_z_now

log = logging.getLogger(__name__)

# The principal of the household's own conversation page (a program's is "program:<token name>").
HOUSEHOLD_PRINCIPAL = "household"


def program_principal(token_name: str) -> str:
    """The principal a hook is told for a program asking with the API token of that name."""
    return f"program:{token_name}"


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


class StageHookRunner:
    """One Console's way to call the household's plugins where nobody waits: on_card, after_output, and the audit
    line of every implementation skipped (raised or late)."""

    def __init__(self, plugins: Plugins | None, audit: AuditLog, *,
                 language: Callable[[], str] = lambda: "en") -> None:
        self.plugins = plugins
        self._audit = audit
        self._language = language  # the household's Language choice, read at each event (a save applies at once)
        self._worker: ThreadPoolExecutor | None = None
        self._last: Future[None] | None = None
        self._lock = threading.Lock()

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

    def card(self, event: str, proposal: Proposal | CardTold, principal: str, *, client: str | None = None) -> None:
        """Tell the plugins that a card is now `event` (one of `CARD_EVENTS`); returns at once."""
        if event not in CARD_EVENTS:
            raise ValueError(f"not a card event: {event}")
        if not self.implemented("on_card"):
            return
        # The card is put in words on the worker: the caller may hold the queue's lock, and the Language is a file.
        told = proposal if isinstance(proposal, CardTold) else CardTold.of(proposal)
        self._submit("on_card", lambda: {"event": event, "card": card_for_plugins(told, self._language()),
                                         "principal": principal}, capability=told.capability, client=client,
                     instance=told.instance)

    def closed(self, card: CardTold) -> None:
        """Tell the plugins that a household page's card ended unanswered with its conversation (a restart closed
        it, or the conversation was evicted): `expired` once its time had come, else `withdrawn`."""
        self.card("expired" if card.expires_at <= utc_z_now() else "withdrawn", card, HOUSEHOLD_PRINCIPAL)

    def later(self, hook: str, arguments: dict[str, Any], *, capability: str = "", client: str | None = None) -> None:
        """Call an observe-only hook on the Console's one worker thread, after the events told before it."""
        self._submit(hook, lambda: arguments, capability=capability, client=client)

    def _submit(self, hook: str, arguments: Callable[[], dict[str, Any]], *, capability: str,
                client: str | None, instance: str | None = None) -> None:
        if not self.implemented(hook):
            return
        assert self.plugins is not None
        plugins = self.plugins

        def tell() -> None:
            try:
                self.record(call_each(plugins, hook, arguments()).skipped, capability=capability, client=client,
                            instance=instance)
            except Exception:  # a worker's failure must not stop the events after it
                log.exception("could not tell the plugins of %s", hook)

        with self._lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="console-ha-plugins")
            self._last = self._worker.submit(tell)

    def settled(self, timeout: float = 10.0) -> None:
        """Wait until every event told so far has been handed to the plugins (tests, and a Console closing)."""
        with self._lock:
            last = self._last
        if last is not None:
            last.result(timeout=timeout)
