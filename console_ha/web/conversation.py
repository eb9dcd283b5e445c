"""The conversation endpoint and the household's conversation and activity pages."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Response, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from console_ha.capabilities.executor import Proposal
from console_ha.capabilities.spec import INSTANCE
from console_ha.conversation import ConversationService, TurnResult
from console_ha.conversation.activity import summarise
from console_ha.conversation.conversations import MAX_CONVERSATIONS, MAX_IDLE_SECONDS
from console_ha.conversation.turn_loop import MAX_HISTORY_CHARS, MAX_MESSAGE_CHARS
from console_ha.errors import ConfirmationInvalid, ConfirmationReason, ConsoleHaError, InvalidRequest, NotFound
from console_ha.language import Words
from console_ha.store.datadir import is_instance_id
from console_ha.web import services
from console_ha.web.access import ANSWERING_A_CARD, household_only
from console_ha.web.auth import asker_for, current_principal, is_household
from console_ha.web.bodies import json_object
from console_ha.web.error_responses import status_for
from console_ha.web.model_page import current_setup
from console_ha.words import MODEL_NEXT_STEP

bp = Blueprint("conversation", __name__)

MAX_CONVERSATION_ID_CHARS = 64
MAX_TOKEN_CHARS = 256
# How much of a conversation's first question names it in the list of recent conversations.
RECENT_LABEL_CHARS = 80


def conversation_service() -> ConversationService:
    """The current app's conversation service (the Console's)."""
    return services().conversation


# --- the API -----------------------------------------------------------------------------------

@bp.post("/api/v1/conversation/message")
def message() -> Response:
    """A message starts or continues a conversation; a confirmation (the household's only) resumes a paused turn.

    A program's message (an API token) waits in this request while its reads wait for the household on
    the confirmations page, and answers with the turn's reply.
    """
    body = json_object(allowed=("conversation_id", "message", "confirmation"))
    principal = current_principal()
    if "confirmation" in body and not is_household():
        # A program asks; only the household answers, on its confirmations page.
        raise household_only(ANSWERING_A_CARD)
    conversation_id = _conversation_id(body.get("conversation_id"))
    text, confirmation = body.get("message"), body.get("confirmation")
    if (text is None) == (confirmation is None):
        raise InvalidRequest("Send exactly one of message and confirmation.")
    service = conversation_service()
    if principal is not None and principal.method == "bearer":
        result = service.send(conversation_id, _message_text(text), asker=asker_for(principal))
    elif confirmation is not None:
        token, approve = _confirmation(confirmation)
        if conversation_id is None:
            raise InvalidRequest("A confirmation needs the conversation_id it belongs to.", field="conversation_id")
        result = service.confirm(conversation_id, token, approve)
    else:
        result = service.send(conversation_id, _message_text(text))
    return jsonify(result.to_dict())


def _conversation_id(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_CONVERSATION_ID_CHARS:
        raise InvalidRequest("conversation_id must be the id a previous answer gave.", field="conversation_id")
    return value


def _message_text(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_MESSAGE_CHARS:
        raise InvalidRequest(f"message must be text of 1 to {MAX_MESSAGE_CHARS} characters.", field="message")
    return value


def _confirmation(value: object) -> tuple[str, bool]:
    if not isinstance(value, dict):
        raise InvalidRequest('confirmation must be {"token": ..., "approve": true or false}.', field="confirmation")
    token, approve = value.get("token"), value.get("approve")
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_CHARS or not isinstance(approve, bool):
        raise InvalidRequest('confirmation must be {"token": ..., "approve": true or false}.', field="confirmation")
    return token, approve


@bp.get("/api/v1/conversation/lines")
def lines() -> Response:
    """The household's conversation as its page shows it (the Console's own lines too), for the page's script.

    Household only; an unknown id is 404. The contract's message answer stays as it is; the page rereads
    its lines from here after each answer.
    """
    conversation_id = _conversation_id(request.args.get("conversation_id"))
    # Only a card that can still be answered: once it has expired, the page's script has its line instead.
    found = conversation_service().transcript(conversation_id, open_only=True) if conversation_id else None
    if found is None:
        raise NotFound(Words("That conversation is not kept any more."))
    messages, pending = found
    return jsonify({"conversation_id": conversation_id, "messages": messages,
                    "pending_confirmation": pending.to_dict() if pending is not None else None})


@bp.get("/api/v1/conversation/recent")
def recent() -> Response:
    """The household's recent conversations as the page lists them, for its script to keep the list live."""
    return jsonify({"conversations": _recent()})


def _recent() -> list[dict[str, Any]]:
    """The service's list, each with the label the page shows (the first question, shortened once, here)."""
    return [{**item, "label": _label(item["question"])} for item in conversation_service().recent()]


def _label(question: str) -> str:
    return question if len(question) <= RECENT_LABEL_CHARS else f"{question[:RECENT_LABEL_CHARS - 1]}…"


# --- the pages ---------------------------------------------------------------------------------

@bp.get("/conversation")
def page() -> str:
    """The conversation page; `?c=<id>` shows a live conversation and its open card."""
    return _render_page(request.args.get("c"))


@bp.post("/conversation")
def page_post() -> ResponseReturnValue:
    """The page's forms without JavaScript: send a message or answer a card, then show the conversation."""
    form = request.form
    conversation_id = form.get("conversation_id") or None
    service = conversation_service()
    try:
        if "token" in form:
            result: TurnResult = service.confirm(conversation_id, form["token"], form.get("decision") == "approve")
        else:
            result = service.send(conversation_id, _message_text(form.get("message", "")))
    except ConsoleHaError as err:
        # A message that did not go through goes back in the field, to send again.
        draft = "" if "token" in form else form.get("message", "")[:MAX_MESSAGE_CHARS]
        return _render_page(conversation_id, error=err, draft=draft), status_for(err.code)
    return redirect(url_for(".page", c=result.conversation_id), code=303)


def _render_page(conversation_id: str | None, *, error: ConsoleHaError | None = None, draft: str = "") -> str:
    found = conversation_service().transcript(conversation_id) if conversation_id else None
    messages, pending = found if found is not None else ([], None)
    last_question = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    # Expired by its time, or closed by the server (which then said so in the chat), or a late answer's 409.
    expired = pending is not None and (
        _expired(pending) or conversation_service().expiry_said(conversation_id, pending)
        or (isinstance(error, ConfirmationInvalid) and error.detail.get("reason") == ConfirmationReason.EXPIRED))
    return render_template(
        "conversation.html",
        conversation_id=conversation_id if found is not None else None,
        messages=messages,
        pending=pending,
        pending_expired=expired,
        last_question=last_question,
        # The expired card says so itself; any other error gets its own notice.
        error=None if expired else error,
        draft=draft,
        max_message_chars=MAX_MESSAGE_CHARS,
        # Said on load, before a first message would fail on it.
        model_problem=current_setup().problem,
        model_next_step=MODEL_NEXT_STEP,
        recent=_recent(),
        kept_words=kept_words(),
    )


def kept_words() -> Words:
    """What the Console keeps of the household's conversations, its numbers in the page's language."""
    return Words.counted(
        "The Console keeps your last {count} conversation for {hours} hours after its last message, also across a "
        "restart, and of a long conversation its latest {chars} characters.",
        "The Console keeps your last {count} conversations for {hours} hours after their last message, also across "
        "a restart, and of a long conversation its latest {chars} characters.",
        MAX_CONVERSATIONS, hours=MAX_IDLE_SECONDS // 3600, chars=MAX_HISTORY_CHARS)


def _expired(proposal: Proposal) -> bool:
    expires = datetime.fromisoformat(proposal.expires_at.replace("Z", "+00:00"))
    return expires <= datetime.now(UTC)


@bp.get("/activity")
def activity() -> ResponseReturnValue:
    """The audit log for the household: counts per capability and the latest events, never values; of every
    Home Assistant, or of the one `?instance=` names."""
    # Cards whose time ran out are audited (expired, or abandoned by their program) when the queue is next
    # looked at: looked at here first, so this page says what happened and not what was true before.
    services().household.pending()
    asked = request.args.get(INSTANCE)
    if asked is not None and not is_instance_id(asked):
        return redirect(url_for(".activity"))
    shown = summarise(services().audit.events(), names=services().instances.names(), instance=asked)
    if asked is not None and (shown.chosen is None or not shown.by_instance):
        # Neither an instance there is nor one the log names (a stale or mistyped link): every event instead.
        # Nor while the page names no instance (one Home Assistant, only its events): all of them are home's,
        # and that page reads as it did before instances.
        return redirect(url_for(".activity"))
    return render_template("activity.html", activity=shown)

