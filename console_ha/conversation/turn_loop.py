"""The turn loop: messages to the model, capability proposals through the executor, pause and resume."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from console_ha.answers.card_events import HOUSEHOLD_PRINCIPAL, StageHookRunner, Sweeper
from console_ha.answers.household_queue import Asker, HouseholdQueue
from console_ha.capabilities.executor import Executor, Proposal
from console_ha.capabilities.stages import Stage, Turn, at_stage
from console_ha.conversation.conversations import (
    CONSOLE,
    HOUSEHOLD,
    RECENT_SHOWN,
    Checkpoint,
    Conversation,
    ConversationStore,
    OpenCard,
    OpenCards,
    owner_of,
)
from console_ha.conversation.model import ChatModel, ModelReply, ToolCall, tool_definitions
from console_ha.conversation.model_prompt import SYSTEM_PROMPT as SYSTEM_PROMPT
from console_ha.conversation.model_prompt import system_prompt
from console_ha.conversation.model_service import home_assistant_origins
from console_ha.conversation.stage_hooks import ConversationHooks
from console_ha.errors import (
    CapabilityError,
    ConfirmationInvalid,
    ConfirmationReason,
    InvalidArguments,
    InvalidRequest,
    ModelNotConfigured,
    RateLimited,
    TokenRevoked,
    error_body,
)
from console_ha.language import Words
from console_ha.secret import same_token
from console_ha.store.audit import AuditEvent
from console_ha.words import (
    CHAT_ALLOWED,
    CHAT_ALLOWED_FAILED,
    CHAT_DENIED,
    CHAT_EXPIRED,
    CHAT_WAITING_DROPPED,
    CHAT_WITHDRAWN,
    chat_line,
)

log = logging.getLogger(__name__)

MAX_ROUNDS_PER_TURN = 6
# Each capability may run once per turn, so more calls than this in one message are noise.
MAX_TOOL_CALLS_PER_MESSAGE = 8
# What is replayed to the model is bounded; the oldest whole turns go first.
MAX_HISTORY_CHARS = 256 * 1024
MAX_MESSAGE_CHARS = 4000
# Programs' messages being answered at once, over every API token. Each holds one of the server's threads
# while the model thinks or its read waits for the household: past this, a program is told to try again,
# so programs never take the threads the household's pages need.
MAX_PROGRAM_MESSAGES = 4

# The Console's reply for the model, when a turn takes too many steps: the household reads it in its language.
STOPPED_REPLY = Words("I stopped before finishing this answer because it took too many steps. "
                      "Please ask again, perhaps more simply.")


@dataclass(frozen=True)
class TurnResult:
    """What one request to the conversation returns: the contract's 200 body."""

    conversation_id: str
    reply: str | None
    pending_confirmation: Proposal | None = None

    def to_dict(self) -> dict[str, Any]:
        """{"conversation_id", "reply", "pending_confirmation"} as the contract fixes them."""
        pending = self.pending_confirmation
        return {
            "conversation_id": self.conversation_id,
            "reply": self.reply,
            "pending_confirmation": pending.to_dict() if pending is not None else None,
        }


class InvalidMessage(InvalidRequest):
    """The household's message is empty or too long; 400 in HTTP."""


class ConversationBusy(RateLimited):
    """A program sent a message to a conversation whose last message still waits for the household; 429."""


class ConversationService:
    """Runs conversation turns against a model and the capability executor; needs no web server."""

    def __init__(self, executor: Executor, model: ChatModel, *,
                 household: HouseholdQueue | None = None, store: ConversationStore | None = None,
                 max_rounds: int = MAX_ROUNDS_PER_TURN, max_history_chars: int = MAX_HISTORY_CHARS,
                 system_prompt: str | None = None, max_program_messages: int = MAX_PROGRAM_MESSAGES,
                 hooks: StageHookRunner | None = None) -> None:
        self.executor = executor
        # The household's plugins at the conversation's stages, and on its cards; None: none (tests).
        self._hooks = hooks
        self._plugins = ConversationHooks(hooks)
        # The page's cards not yet told ended: a card nobody looks at is told `expired` at its expiry all the same.
        self._open_cards = OpenCards()
        if hooks is not None:
            hooks.watch(Sweeper(executor.confirmations.timer, self._open_cards.next_expiry, self._expire_due))
        # Where a program's reads wait for the household: the same queue and page as MCP's.
        self._household = household
        self._program_messages = threading.BoundedSemaphore(max_program_messages)
        self.model = model
        self.store = store if store is not None else ConversationStore()
        self._max_rounds = max_rounds
        self._max_history_chars = max_history_chars
        # A fixed prompt (a test's); by default each turn's is made for what the allowlist can answer (`_offer`).
        self._system_prompt = system_prompt

    # --- public API ----------------------------------------------------------------------------

    def send(self, conversation_id: str | None, message: str, *, asker: Asker | None = None) -> TurnResult:
        """Start or continue a conversation with a message: the household's own, or a program's (`asker`).

        The household's turn pauses at a card and resumes with `confirm`. A program cannot answer a card:
        each of its reads waits here, on the household's confirmations page, and the turn goes on once
        the household has answered or the card has expired.
        """
        text = message.strip() if isinstance(message, str) else ""
        if not text or len(text) > MAX_MESSAGE_CHARS:
            raise InvalidMessage(Words.counted("A message is between 1 and {count} character.",
                                               "A message is between 1 and {count} characters.", MAX_MESSAGE_CHARS),
                                 field="message")
        if asker is not None and self._household is None:
            raise ValueError("a program's message needs the household queue: ConversationService(household=...)")
        if asker is None:
            return self._turn(self._own(conversation_id, HOUSEHOLD), text, None)
        if not self._program_messages.acquire(blocking=False):
            raise ConversationBusy("The Console is already answering as many programs' messages as it takes at "
                                   "once; try again in a minute.")
        try:
            return self._turn(self._own(conversation_id, owner_of(asker)), text, asker)
        finally:
            self._program_messages.release()

    def _turn(self, conversation: Conversation, text: str, asker: Asker | None) -> TurnResult:
        """One message's turn, under the conversation's lock; put back as it was if it fails."""
        # A program's turn may wait minutes for the household: a second message to it must not wait
        # behind the first, holding another of the server's threads.
        if not conversation.lock.acquire(blocking=asker is None):
            raise ConversationBusy("This conversation's last message is still waiting for the household's "
                                   "answer on the Console; send the next one once it has its reply.")
        try:
            # Before the checkpoint: a withdrawn card is gone from the executor (and audited), so a failed
            # model leaves the conversation with the card withdrawn, as the chat says, not with a dead card.
            self._abandon_pending(conversation)
            checkpoint = Checkpoint.of(conversation)
            try:
                conversation.touch()
                conversation.messages.append({"role": "user", "content": text})
                conversation.turn = Turn()
                conversation.rounds = 0
                self._trim_history(conversation)
                answered = self._plugins.on_input(text, asker)
                if answered is not None:  # a plugin answered: the model is not asked
                    conversation.messages.append({"role": "assistant", "content": answered})
                    return self._final(conversation, answered, asker)
                return self._rounds(conversation, asker)
            except Exception:
                # The message can be sent again as if the failed attempt never happened.
                checkpoint.restore(conversation)
                raise
        finally:
            try:
                self.store.save(conversation)  # whatever the turn came to, as the page now shows it
            finally:
                # Whatever the save does: a save that raised held the lock for ever, and every later message
                # of the conversation waited for it (a plugin's half UTF-16 pair did so, before `plugin_reply`).
                conversation.lock.release()

    def _own(self, conversation_id: str | None, owner: str) -> Conversation:
        """The live conversation of that id if it is `owner`'s, else a new one of theirs."""
        conversation = self.store.get(conversation_id) if conversation_id else None
        if conversation is None or conversation.owner != owner:
            # An unknown id (evicted, from before a restart, or someone else's) starts afresh under a new id.
            conversation = self.store.create(owner)
        return conversation

    @at_stage(Stage.CONFIRM)
    def confirm(self, conversation_id: str | None, token: object, approve: bool) -> TurnResult:
        """Resume a paused turn with the household's answer; ConfirmationInvalid (409) when it cannot be."""
        conversation = self.store.get(conversation_id)
        if conversation is None or conversation.owner != HOUSEHOLD:
            raise ConfirmationInvalid(ConfirmationReason.UNKNOWN, Words("That confirmation is not known. Ask again."))
        with conversation.lock, self.store.saving(conversation):  # kept on disk as it ends, whatever it came to
            pending = conversation.pending
            if pending is None or not same_token(pending[1].token, token):
                # Checked before the executor, so a superseded card cannot run, nor burn another
                # conversation's token.
                raise ConfirmationInvalid(ConfirmationReason.UNKNOWN,
                                          Words("That confirmation is not known or was already answered."))
            call, proposal = pending
            title = proposal.card.title
            try:
                content: dict[str, Any] = self.executor.answer(
                    proposal.token, approve=approve, conversation_id=conversation.id)
            except ConfirmationInvalid as err:
                if err.detail.get("reason") != ConfirmationReason.SETTINGS_CHANGED:
                    # Nothing ran, and the conversation stays as it was. This conversation's own open card
                    # is unknown to the executor only once swept as expired or pushed out by newer cards:
                    # either way, ask again.
                    if err.detail.get("reason") in (ConfirmationReason.UNKNOWN, ConfirmationReason.EXPIRED):
                        self._card_ended(conversation, "expired")
                    if err.detail.get("reason") == ConfirmationReason.UNKNOWN:
                        expired = Words("That confirmation has expired. Ask again.")
                        raise ConfirmationInvalid(ConfirmationReason.EXPIRED, expired) from None
                    raise
                # Allowed, and used up: what the card showed had changed, so nothing was read. Said so, not
                # left open to be called "expired" later.
                content = error_body(err)
                conversation.note(Words(CHAT_ALLOWED_FAILED, title=title, outcome=chat_line(err)))
            except CapabilityError as err:
                content = error_body(err)
                conversation.note(Words(CHAT_DENIED, title=title) if not approve else
                                  Words(CHAT_ALLOWED_FAILED, title=title, outcome=chat_line(err)))
            else:
                conversation.note(Words(CHAT_ALLOWED, title=title))
            conversation.touch()
            self._card_ended(conversation, "allowed" if approve else "denied")
            conversation.pending = None
            conversation.messages.append(_tool_message(call, content))
            following = self._process_queue(conversation)
            if following is not None:
                return TurnResult(conversation.id, None, following)
            # The household answered: the model always gets at least one more round to use the
            # outcome, even when the card came in the last round (each answer is a person's click).
            conversation.rounds = min(conversation.rounds, self._max_rounds - 1)
            # The read has happened: if the model fails now, its result stays for the next message.
            checkpoint = Checkpoint.of(conversation)
            try:
                return self._rounds(conversation)
            except Exception:
                checkpoint.restore(conversation)
                raise

    def recent(self, limit: int = RECENT_SHOWN) -> list[dict[str, Any]]:
        """The household's conversations to reopen, newest last message first: id, question, updated, waiting."""
        return [{"conversation_id": c.id, "question": c.first_question(), "updated": c.updated,
                 "waiting": c.pending is not None} for c in self.store.recent(HOUSEHOLD, limit)]

    def transcript(self, conversation_id: str | None, *, open_only: bool = False,
                   ) -> tuple[list[dict[str, str]], Proposal | None] | None:
        """The visible messages and the card of the household's live conversation; None when unknown.

        A program's conversation is its own (`owner_of`): the household's pages show it no more than a
        program can continue the household's.

        A card that has expired is said in the chat as soon as the conversation is read after its expiry
        (`_note_expiry`). It stays the conversation's card (the page shows it expired, and a late answer
        is told it expired) unless `open_only`, which gives only a card that can still be answered.
        """
        conversation = self.store.get(conversation_id)
        if conversation is None or conversation.owner != HOUSEHOLD:
            return None
        closed = self._note_expiry(conversation)
        pending = conversation.pending
        proposal = pending[1] if pending and not (open_only and closed) else None
        return conversation.transcript(), proposal

    def expiry_said(self, conversation_id: str | None, proposal: Proposal) -> bool:
        """Whether the chat of `conversation_id` says that `proposal`'s card expired (it is closed)."""
        conversation = self.store.get(conversation_id)
        return conversation is not None and conversation.expiry_noted == proposal.token

    def _note_expiry(self, conversation: Conversation) -> bool:
        """Say in the chat that the open card expired, once its time has come; whether it has (and is said).

        Activity records the expiry first (`Executor.is_open` sweeps). Only when no turn holds the
        conversation: a page reload must not wait behind a model that is still answering, and a turn that
        is running settles the card itself (an answer is told it expired; a new message withdraws it).
        """
        pending = conversation.pending
        if pending is None:
            return False
        token = pending[1].token
        if conversation.expiry_noted == token:
            return True
        if not conversation.lock.acquire(blocking=False):
            return False
        try:
            if conversation.pending is None or conversation.pending[1].token != token:
                return False
            if self.executor.is_open(token, conversation_id=conversation.id):
                return False
            conversation.note(Words(CHAT_EXPIRED, title=pending[1].card.title))
            conversation.expiry_noted = token
            self._card_ended(conversation, "expired")
            self.store.save(conversation)
            return True
        finally:
            conversation.lock.release()

    # --- the turn loop -------------------------------------------------------------------------

    def _rounds(self, conversation: Conversation, asker: Asker | None = None) -> TurnResult:
        """Ask the model until it answers in text, a proposal needs the household, or rounds run out."""
        self._check_model_is_not_home_assistant()
        prompt, tools = self._offer()
        while conversation.rounds < self._max_rounds:
            conversation.rounds += 1
            messages = self._model_messages(conversation, prompt)
            extra = self._plugins.pre_action(messages[1:], asker)  # "" (and no work) with no plugin
            if extra:
                messages[0] = {"role": "system", "content": prompt + extra}
            reply = self._plugins.post_action(_bounded(self.model.complete(messages, tools=tools)), asker)
            conversation.messages.append(reply.message)
            if not reply.tool_calls:
                return self._final(conversation, reply.content or "", asker)
            conversation.queue = list(reply.tool_calls)
            if asker is not None:
                self._ask_household(conversation, asker)
                continue
            proposal = self._process_queue(conversation)
            if proposal is not None:
                return TurnResult(conversation.id, None, proposal)
        log.warning("a turn used all %d model rounds without an answer", self._max_rounds)
        conversation.messages.append({"role": "assistant", "content": STOPPED_REPLY})
        return self._final(conversation, STOPPED_REPLY, asker)

    def _process_queue(self, conversation: Conversation) -> Proposal | None:
        """Propose queued calls in order; stop at the first that needs the household (the rest wait)."""
        while conversation.queue:
            call = conversation.queue.pop(0)
            try:
                proposal = self.executor.propose(call.capability, call.arguments,
                                                 conversation_id=conversation.id, turn=conversation.turn)
            except CapabilityError as err:
                conversation.messages.append(_tool_message(call, _refusal(call, err)))
                conversation.note(chat_line(err))
                continue
            conversation.pending = (call, proposal)
            # Looked up only for the plugins' worker: with no plugin, a read takes no lock more than before them.
            issued = (self.executor.confirmations.peek(proposal.token, conversation.id)
                      if self._hooks is not None and self._hooks.implemented("on_card") else None)
            if issued is not None:
                # Before it is told: the worker telling `waiting` then finds its expiry to wake at.
                self._open_cards.add(OpenCard(conversation, proposal, issued.deadline))
            if not self._tell_card("waiting", proposal):
                conversation.end_told = proposal.token  # no plugin on to tell it waits: none is told its end alone
            return proposal
        return None

    def _ask_household(self, conversation: Conversation, asker: Asker) -> None:
        """A program's queued calls, each waiting for the household in turn; every outcome goes to the model."""
        assert self._household is not None  # send() takes no program's message without one
        answered = False
        while conversation.queue:
            call = conversation.queue.pop(0)
            if not asker.still_allowed():
                # Revoked during the turn: the household is asked nothing more for it, nor a thread held waiting.
                conversation.messages.append(_tool_message(call, error_body(
                    TokenRevoked("This program's API token was revoked; nothing was asked or read."))))
                continue
            try:
                if not asker.present():  # the program hung up: nobody would receive the read
                    raise ConfirmationInvalid(None, "The program hung up; nothing was asked or read.")
                waiting = self._household.ask(asker.client, call.capability, call.arguments, turn=conversation.turn,
                                              present=asker.present, still_allowed=asker.still_allowed,
                                              token_id=asker.token_id)
            except CapabilityError as err:
                conversation.messages.append(_tool_message(call, _refusal(call, err)))
                continue
            answered = True
            try:
                content: dict[str, Any] = self._household.settle(waiting, asker)
            except CapabilityError as err:
                content = error_body(err)
            conversation.messages.append(_tool_message(call, content))
        if answered:
            # As after the household's own answer: the model always gets a round to use the outcome.
            conversation.rounds = min(conversation.rounds, self._max_rounds - 1)

    def _abandon_pending(self, conversation: Conversation) -> None:
        """A new message while a card is open: the card is withdrawn (Activity says so at once), the chat says so,
        and the open and the waiting calls are answered to the model as not run."""
        waiting = [conversation.pending[0]] if conversation.pending is not None else []
        for call in [*waiting, *conversation.queue]:
            conversation.messages.append(_tool_message(call, error_body(ConfirmationInvalid(
                None, "The household asked something else instead; this read did not run."))))
        if conversation.pending is not None:
            proposal = conversation.pending[1]
            # Audited now as withdrawn ("cancelled"), not as "expired" minutes later; unless its time had come.
            withdrawn = self.executor.withdraw(proposal.token, conversation_id=conversation.id)
            self._card_ended(conversation, "withdrawn" if withdrawn is AuditEvent.CANCELLED else "expired")
            if conversation.expiry_noted != proposal.token:  # its expiry not yet said when the page read it
                words = CHAT_WITHDRAWN if withdrawn is AuditEvent.CANCELLED else CHAT_EXPIRED
                conversation.note(Words(words, title=proposal.card.title))
            if conversation.queue:
                conversation.note(CHAT_WAITING_DROPPED)
        conversation.pending = None
        conversation.queue = []

    # --- the household's plugins (issue 30; docs/conversation.md, "The household's plugins") ----------------

    def _final(self, conversation: Conversation, reply: str, asker: Asker | None) -> TurnResult:
        """The turn's reply as the plugins' `before_output` leave it (kept so in the chat), then `after_output`."""
        replaced = self._plugins.before_output(reply, asker)
        if replaced != reply:
            reply = replaced
            conversation.messages[-1] = {**conversation.messages[-1], "content": reply}
        self._plugins.after_output(reply, asker)
        return TurnResult(conversation.id, reply)

    def _tell_card(self, event: str, proposal: Proposal) -> bool:
        """`on_card` for a card of the household's own conversation page; whether a plugin was there to tell."""
        return self._hooks is not None and self._hooks.card(event, proposal, HOUSEHOLD_PRINCIPAL)

    def _card_ended(self, conversation: Conversation, event: str) -> None:
        """`on_card` for the end of the conversation's open card, once (an expiry is noticed in several places)."""
        pending = conversation.pending
        if pending is None or conversation.end_told == pending[1].token:
            return
        conversation.end_told = pending[1].token
        self._open_cards.told_ended(pending[1].token)
        self._tell_card(event, pending[1])

    def _expire_due(self) -> None:
        """The page's cards whose expiry came while nobody looked: said in the chat and told `expired`, once."""
        for card in self._open_cards.due(self.executor.confirmations.timer()):
            # The card's own conversation, in the store or pushed out of it with its card open (then nobody else
            # looks at it): its end is told once either way (`end_told`: the eviction's `closed` sets it too).
            conversation, token = card.conversation, card.proposal.token
            pending = conversation.pending
            if self._note_expiry(conversation) or pending is None or pending[1].token != token:
                self._open_cards.told_ended(token)  # told now, or it ended another way, told where it did

    def _offer(self) -> tuple[str, list[dict[str, Any]]]:
        """This turn's system prompt and tools: the reads an allowlisted entity of any instance can answer, the
        instances there are now (a new one is offered from the next turn on), and today's date."""
        capabilities = self.executor.offered()
        names = self.executor.instances.names()
        tools = tool_definitions({c.name: c for c in capabilities}, tuple(names))
        if self._system_prompt is not None:
            return self._system_prompt, tools
        # With several Home Assistants, today is `home`'s (docs/conversation.md, "Several Home Assistants").
        zone = self.executor.household_zone()
        local_now = datetime.now(zone) if zone is not None else datetime.now().astimezone()
        return system_prompt(capabilities, local_now, names), tools

    def _model_messages(self, conversation: Conversation, prompt: str) -> list[dict[str, Any]]:
        """What the model sees: the system prompt, then the conversation (tool results, never tokens)."""
        return [{"role": "system", "content": prompt},
                *(m for m in conversation.messages if m["role"] != CONSOLE)]

    def _trim_history(self, conversation: Conversation) -> None:
        """Drop the oldest whole turns until the history fits; the newest turn always stays."""
        messages = conversation.messages
        sizes = [len(json.dumps(m, ensure_ascii=False)) for m in messages]
        total = sum(sizes)
        while total > self._max_history_chars:
            # A turn starts at a user message; cutting there never separates a tool call from its result.
            cut = next((i for i, m in enumerate(messages) if i > 0 and m["role"] == "user"), None)
            if cut is None:
                break
            total -= sum(sizes[:cut])
            del messages[:cut], sizes[:cut]

    def _check_model_is_not_home_assistant(self) -> None:
        """Refuse a model URL on any Home Assistant's origin: the model's POST must never reach one."""
        if not home_assistant_origins(self.executor.instances).isdisjoint(self.model.origins()):
            raise ModelNotConfigured("CONSOLE_HA_LLM_URL points at Home Assistant; set it to the language model.")


def _bounded(reply: ModelReply) -> ModelReply:
    """At most MAX_TOOL_CALLS_PER_MESSAGE calls; the replayed message keeps only those that are answered."""
    if len(reply.tool_calls) <= MAX_TOOL_CALLS_PER_MESSAGE:
        return reply
    calls = reply.tool_calls[:MAX_TOOL_CALLS_PER_MESSAGE]
    message = {**reply.message, "tool_calls": reply.message["tool_calls"][:MAX_TOOL_CALLS_PER_MESSAGE]}
    return replace(reply, tool_calls=calls, message=message)


def _refusal(call: ToolCall, err: CapabilityError) -> dict[str, Any]:
    """A call refused before any card: its error for the model (arguments that were not JSON said so)."""
    if call.arguments_invalid and isinstance(err, InvalidArguments):
        return error_body(err.reworded("The arguments were not valid JSON; send a JSON object."))
    return error_body(err)


def _tool_message(call: ToolCall, content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": json.dumps(content, ensure_ascii=False)}
