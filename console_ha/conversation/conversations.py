"""The conversations a Console holds: one conversation's state, and the store that bounds and keeps them.

The household's conversations are also kept on disk (`store.conversations`), so they survive a restart with
the same bounds; a card does not (its confirmation store is in memory), and a conversation that waited for
one comes back with the Console's line saying so.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from console_ha.answers.card_events import CardTold
from console_ha.answers.household_queue import Asker
from console_ha.capabilities.executor import Proposal
from console_ha.capabilities.stages import Turn
from console_ha.conversation.model import ToolCall
from console_ha.errors import ConfirmationInvalid, error_body
from console_ha.language import Words
from console_ha.store.conversation_files import ConversationFiles
from console_ha.store.datadir import is_instance_id
from console_ha.timestamps import utc_z_now
from console_ha.words import CHAT_RESTARTED

log = logging.getLogger(__name__)

MAX_CONVERSATIONS = 100
# How many of the household's conversations /conversation lists, by their last message (all it keeps are reopenable).
RECENT_SHOWN = 20
# Programs' conversations are kept apart, under their own count: a program starting conversation after
# conversation (a failed message starts one too) pushes out only programs' ones, never the household's.
MAX_PROGRAM_CONVERSATIONS = 50
MAX_IDLE_SECONDS = 6 * 3600

# Whose a conversation is: the household's own page, or one program's API token (by its id).
HOUSEHOLD = "household"
# The Console's own lines in a conversation (refused, denied, withdrawn, expired, failed): shown to the
# household, never sent to the model, which has the tool result instead.
CONSOLE = "console"

# What the model is told of a read whose card was open when the Console stopped.
RESTARTED_FOR_MODEL = "The Console restarted before the household answered; this read did not run."


@dataclass
class Conversation:
    """One conversation's messages and where its current turn stands."""

    id: str
    last_active: float
    owner: str = HOUSEHOLD
    messages: list[dict[str, Any]] = field(default_factory=list)
    turn: Turn = field(default_factory=Turn)
    rounds: int = 0
    # The tool call waiting for the household, and the calls of the same message still to process.
    pending: tuple[ToolCall, Proposal] | None = None
    queue: list[ToolCall] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # When the household last wrote or answered, in UTC to the second, as the list of recent conversations
    # shows it; `touched` is the same moment to the microsecond (Unix time), which orders that list.
    updated: str = field(default_factory=utc_z_now)
    touched: float = field(default_factory=time.time)
    # The token of the open card whose expiry the chat already says (`ConversationService._note_expiry`).
    expiry_noted: str | None = None
    # The token of the card whose end (allowed, denied, expired, withdrawn) the plugins were told (`on_card`), or
    # are never to be: none was on to be told it waits.
    end_told: str | None = None

    def transcript(self) -> list[dict[str, str]]:
        """The household-visible exchange: user messages, the assistant's answers and the Console's own lines."""
        # Read from a copy without the lock (a turn holds it while the model thinks, which can take
        # minutes); copying a list is atomic under the GIL, so the page sees a consistent moment.
        messages = list(self.messages)
        # Text that came with tool calls is the model thinking aloud; the API never returns it as a reply.
        return [
            {"role": "note" if m["role"] == CONSOLE else m["role"], "content": m["content"]}
            for m in messages
            if m["role"] in ("user", "assistant", CONSOLE) and m.get("content") and not m.get("tool_calls")
        ]

    def touch(self) -> None:
        """The household wrote or answered just now: the conversation goes to the top of the recent ones."""
        self.touched = time.time()
        self.updated = utc_z_now()

    def note(self, text: str) -> None:
        """A line of the Console's own in the conversation, for the household only."""
        self.messages.append({"role": CONSOLE, "content": text})

    def first_question(self) -> str:
        """The household's first message still kept (what the list of conversations names it by)."""
        return next((m["content"] for m in list(self.messages) if m["role"] == "user"), "")

    def to_record(self) -> dict[str, Any]:
        """What is kept on disk: the messages, and the open card's title and calls (never its token)."""
        # A line of the Console's own (a Words) keeps its message beside its English text, to be shown in the
        # household's language again after a restart.
        messages = [{**m, "words": m["content"].to_record()} if isinstance(m.get("content"), Words) else m
                    for m in list(self.messages)]
        record: dict[str, Any] = {"id": self.id, "owner": self.owner, "updated": self.updated,
                                  "touched": self.touched, "messages": messages, "open": None}
        if self.pending is not None:
            call, proposal = self.pending
            told = CardTold.of(proposal)
            record["open"] = {"title": proposal.card.title, "calls": [c.id for c in (call, *self.queue)],
                              "expiry_said": self.expiry_noted == proposal.token,
                              # What the plugins are told of it, and whether its end was (`on_card`): a restart
                              # closes it, and tells them so unless they know it ended.
                              "card": {"capability": told.capability, "instance": told.instance,
                                       "expires_at": told.expires_at},
                              "end_told": self.end_told == proposal.token}
            if isinstance(proposal.card.title, Words):
                record["open"]["title_words"] = proposal.card.title.to_record()
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any], last_active: float) -> Conversation:
        """A kept conversation as a restart finds it: a card that was open is closed, and the chat says so."""
        conversation = cls(record["id"], last_active, record["owner"], [_kept(m) for m in record["messages"]],
                           updated=record["updated"], touched=record["touched"])
        open_card = record["open"]
        if open_card is not None:
            # Every call of the model's message gets its answer, as a new message's withdrawal gives them.
            content = json.dumps(error_body(ConfirmationInvalid(None, RESTARTED_FOR_MODEL)), ensure_ascii=False)
            conversation.messages.extend({"role": "tool", "tool_call_id": call_id, "content": content}
                                         for call_id in open_card["calls"])
            if not open_card["expiry_said"]:  # an expiry the chat already said needs no second line
                title = Words.from_record(open_card.get("title_words")) or open_card["title"]
                conversation.note(Words(CHAT_RESTARTED, title=title))
        return conversation


def _closed_card(open_card: dict[str, Any]) -> CardTold | None:
    """What the plugins are told of a kept open card a restart closed; None when they need not be (its end was
    told, its expiry said) or cannot be (kept by a release before plugins, or damaged)."""
    facts = open_card.get("card")
    if open_card["expiry_said"] or open_card.get("end_told") is not False or not isinstance(facts, dict):
        return None
    capability, instance, expires_at = facts.get("capability"), facts.get("instance"), facts.get("expires_at")
    if not (isinstance(capability, str) and isinstance(instance, str) and is_instance_id(instance)
            and isinstance(expires_at, str)):
        return None
    title = Words.from_record(open_card.get("title_words")) or open_card["title"]
    return CardTold(title, capability, instance, expires_at)


def _kept(message: dict[str, Any]) -> dict[str, Any]:
    """A message as a kept file holds it: a line of the Console's own made a Words again (else its English text)."""
    if "words" not in message:
        return message
    words = Words.from_record(message["words"])
    plain = {key: value for key, value in message.items() if key != "words"}
    return plain if words is None else {**plain, "content": words}


@dataclass(frozen=True)
class Checkpoint:
    """A conversation's state to go back to when the model fails mid-turn."""

    # A copy, not a length: trimming drops messages from the front before the model is asked.
    messages: tuple[dict[str, Any], ...]
    pending: tuple[ToolCall, Proposal] | None
    queue: tuple[ToolCall, ...]
    turn: Turn
    rounds: int
    moment: tuple[str, float]

    @classmethod
    def of(cls, conversation: Conversation) -> Checkpoint:
        """The conversation as it is now."""
        return cls(tuple(conversation.messages), conversation.pending, tuple(conversation.queue),
                   replace(conversation.turn, counts=conversation.turn.counts.copy()), conversation.rounds,
                   (conversation.updated, conversation.touched))

    def restore(self, conversation: Conversation) -> None:
        """Put the conversation back as it was."""
        conversation.messages[:] = self.messages
        conversation.pending = self.pending
        conversation.queue = list(self.queue)
        conversation.turn = self.turn
        conversation.rounds = self.rounds
        conversation.updated, conversation.touched = self.moment


def owner_of(asker: Asker | None) -> str:
    """Whose conversation a request may continue: the household's, or the asking program's own."""
    return HOUSEHOLD if asker is None else f"program:{asker.token_id}"


@dataclass(frozen=True)
class OpenCard:
    """A card of the household's page still open: its conversation, its proposal and its expiry (the store's timer).

    The conversation itself, not its id: pushed out of the store, it still says whether its card's end was told
    (`end_told`, set by the eviction's `closed`), so the expiry is not told after it."""

    conversation: Conversation
    proposal: Proposal
    deadline: float


class OpenCards:
    """The household page's cards not yet told ended, by token: what the plugins' worker sweeps at their expiry.

    One per conversation at most (a conversation has one open card); an entry goes when its end is told.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cards: dict[str, OpenCard] = {}

    def add(self, card: OpenCard) -> None:
        """`card` is open and told `waiting`."""
        with self._lock:
            self._cards[card.proposal.token] = card

    def told_ended(self, token: str) -> None:
        """The card of `token` was told its end: nothing more to sweep for it."""
        with self._lock:
            self._cards.pop(token, None)

    def next_expiry(self) -> float | None:
        """The earliest expiry of a card still open, on the store's timer; None when none is."""
        with self._lock:
            return min((card.deadline for card in self._cards.values()), default=None)

    def due(self, now: float) -> list[OpenCard]:
        """The cards whose expiry has come by `now`, oldest first."""
        with self._lock:
            return sorted((card for card in self._cards.values() if now >= card.deadline),
                          key=lambda card: card.deadline)


class ConversationStore:
    """Conversations held: the least recently used evicted beyond a count (each side its own) or an idle age.

    With `files`, the household's are kept on disk too (a program's conversation lives only as long as
    its requests): written by `save` after every change, loaded by `load` when the Console opens, and
    their files removed when they are evicted.
    """

    def __init__(self, *, max_conversations: int = MAX_CONVERSATIONS,
                 max_program_conversations: int = MAX_PROGRAM_CONVERSATIONS, max_idle_seconds: float = MAX_IDLE_SECONDS,
                 clock: Callable[[], float] = time.monotonic, files: ConversationFiles | None = None,
                 wall_clock: Callable[[], float] = time.time,
                 closed: Callable[[CardTold], None] | None = None) -> None:
        self._max = max_conversations
        self._max_programs = max_program_conversations
        self._max_idle = max_idle_seconds
        self._clock = clock
        self._files = files
        self._wall_clock = wall_clock
        # Told of each open card a conversation takes with it, unanswered: closed at start, or evicted (`on_card`).
        self._closed = closed
        self._items: OrderedDict[str, Conversation] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conversation_id: object) -> Conversation | None:
        """The live conversation of that id, marked as just used; None when unknown or evicted."""
        if not isinstance(conversation_id, str):
            return None
        with self._lock:
            self._evict_idle()
            conversation = self._items.get(conversation_id)
            if conversation is not None:
                conversation.last_active = self._clock()
                self._items.move_to_end(conversation_id)
            return conversation

    def peek(self, conversation_id: str) -> Conversation | None:
        """The live conversation of that id as it is, not marked as used (the plugins' worker sweeping its card)."""
        with self._lock:
            return self._items.get(conversation_id)

    def create(self, owner: str = HOUSEHOLD) -> Conversation:
        """A new, empty conversation of `owner` with an unguessable id; it pushes out only its own side's."""
        with self._lock:
            self._evict_idle()
            self._evict_beyond_cap(owner == HOUSEHOLD, room_for=1)
            conversation = Conversation(secrets.token_urlsafe(16), self._clock(), owner)
            self._items[conversation.id] = conversation
            return conversation

    def recent(self, owner: str = HOUSEHOLD, limit: int = RECENT_SHOWN) -> list[Conversation]:
        """`owner`'s live conversations that have a message, by their last message (newest first), at most `limit`."""
        with self._lock:
            self._evict_idle()
            live = [c for c in self._items.values() if c.owner == owner and c.first_question()]
        # Not by use: reopening a conversation to read it must not move it above newer ones.
        return sorted(live, key=lambda c: c.touched, reverse=True)[:limit]

    def save(self, conversation: Conversation) -> None:
        """Keep the household's conversation on disk as it is now (called under its lock, after each change)."""
        if self._files is None or conversation.owner != HOUSEHOLD or not conversation.first_question():
            return
        if not self._holds(conversation):
            return  # evicted meanwhile: its file is gone and stays gone
        self._write(conversation)
        # Evicted while it was being written (outside the store's lock, so one slow disk holds no other
        # conversation up): its removal may have come first, so the file just written goes too.
        if not self._holds(conversation):
            self._remove_file(conversation.id)

    def _holds(self, conversation: Conversation) -> bool:
        with self._lock:
            return self._items.get(conversation.id) is conversation

    @contextlib.contextmanager
    def saving(self, conversation: Conversation) -> Iterator[None]:
        """`save` the conversation once the block ends, however it ends (an answer that fails is put back first)."""
        try:
            yield
        finally:
            self.save(conversation)

    def load(self) -> int:
        """Take up the household's kept conversations (at Console.open); those past the bounds are forgotten.

        Each card a conversation still had open is closed (the chat says so), and handed to `closed` for the
        plugins (`on_card`), unless they were told of its end before the restart.
        """
        if self._files is None:
            return 0
        now, wall = self._clock(), self._wall_clock()
        kept = []
        for record in self._files.load():
            # Idle since its last message: the moment it was last only read is not kept.
            idle = wall - record["touched"]
            if record["owner"] != HOUSEHOLD or idle >= self._max_idle:
                self._files.remove(record["id"])
                continue
            kept.append((record, max(idle, 0.0)))
        kept.sort(key=lambda item: -item[1])  # the longest idle first: least recently used
        with self._lock:
            for record, idle in kept:
                conversation = Conversation.from_record(record, now - idle)
                self._items[conversation.id] = conversation
                if record["open"] is not None:
                    self._write(conversation)  # the file now says what the chat says
                    card = _closed_card(record["open"])
                    if card is not None and self._closed is not None:
                        self._closed(card)
            self._evict_beyond_cap(True, room_for=0)
            return sum(1 for c in self._items.values() if c.owner == HOUSEHOLD)

    def _write(self, conversation: Conversation) -> None:
        assert self._files is not None
        try:
            self._files.write(conversation.id, conversation.to_record())
        except OSError as err:
            # The conversation goes on in memory; only a restart would lose it.
            log.warning("could not keep a conversation on disk (%s)", err.strerror)

    def __len__(self) -> int:
        with self._lock:
            self._evict_idle()
            return len(self._items)

    def _evict_beyond_cap(self, household: bool, *, room_for: int) -> None:
        cap = self._max if household else self._max_programs
        side = [c.id for c in self._items.values() if (c.owner == HOUSEHOLD) == household]  # oldest first
        for evicted in side[:max(len(side) - cap + room_for, 0)]:
            self._forget(evicted)
            log.info("evicted the least recently used conversation (cap %d)", cap)

    def _evict_idle(self) -> None:
        cutoff = self._clock() - self._max_idle
        while self._items:
            oldest = next(iter(self._items.values()))
            if oldest.last_active > cutoff:
                break
            self._forget(oldest.id)

    def _forget(self, conversation_id: str) -> None:
        conversation = self._items.pop(conversation_id)
        self._close_card(conversation)
        if conversation.owner == HOUSEHOLD:
            self._remove_file(conversation_id)

    def _close_card(self, conversation: Conversation) -> None:
        """An evicted conversation's open card can no longer be answered: `closed` is told, unless its end was.

        Not while a turn holds the conversation: that turn settles its card itself (an answer tells allowed or
        denied, a new message withdraws it), and the plugins are told once.
        """
        if self._closed is None or conversation.pending is None or not conversation.lock.acquire(blocking=False):
            return
        try:
            proposal = conversation.pending[1]
            if proposal.token not in (conversation.end_told, conversation.expiry_noted):
                conversation.end_told = proposal.token
                self._closed(CardTold.of(proposal))
        finally:
            conversation.lock.release()

    def _remove_file(self, conversation_id: str) -> None:
        if self._files is None:
            return
        try:
            self._files.remove(conversation_id)
        except OSError as err:
            log.warning("could not remove an evicted conversation's file (%s)", err.strerror)
