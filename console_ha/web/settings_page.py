"""Household-facing pages: the Home Assistant settings page, server-rendered first, enhanced by JS.

Without JavaScript the whole set-up works through plain forms: Save, Test connection, the CA certificate's
buttons and the picker's Search and page buttons POST the settings form (CSRF-checked), so what is typed and
ticked travels with each of them; the picker lists the entities of the saved URL and token (`settings.browse`),
a page of at most 200 at a time. A pasted token and the sensitive question's confirmations are kept on the
server for the session (`settings.held`). The page itself is drawn by `settings_render`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import orjson
from flask import Blueprint, flash, redirect, request, url_for
from werkzeug.datastructures import MultiDict
from werkzeug.wrappers import Response

from console_ha.errors import (
    CapabilityNotConfigured,
    ConsoleHaError,
    HAUnauthorized,
    InvalidSettingsChange,
    SettingsChangedElsewhere,
)
from console_ha.language import Words
from console_ha.secret import Secret
from console_ha.settings.browse import QUERY_PARAMS, BrowseQuery
from console_ha.settings.set_up import is_set_up
from console_ha.settings.settings_service import TRY_FIELDS, SaveRequest, SettingsUnreadable, TryRequest
from console_ha.settings.tokens import optional_token, typed_origin
from console_ha.store.config import PAGE_SETTINGS, HomeAssistantConfig
from console_ha.web.request_language import current_language
from console_ha.web.settings_render import (
    Outcome,
    Question,
    Shown,
    holds,
    render,
    render_broken,
    session_id,
    settings,
)
from console_ha.words import CA_ADDED, CA_KEPT, CA_REMOVED, NOTHING_CHOSEN, household_error

log = logging.getLogger(__name__)

bp = Blueprint("pages", __name__)

# The picker's page buttons without JavaScript post `action=page-<n>`; its Search button `action=browse`.
PAGE_ACTION = "page-"
PICKER_FIELDS = ("q", "kind", "area")


@bp.get("/")
def index() -> Response:
    """The Console's front door: the conversation once set up (`is_set_up`), the settings page until then."""
    if is_set_up(settings().read()):
        return redirect(url_for("conversation.page"))
    return redirect(url_for("pages.home_assistant_settings"))


@bp.get("/settings/home-assistant")
def home_assistant_settings() -> str | tuple[str, int]:
    """The settings page with the current values rendered in; a damaged file shows what to do."""
    view = settings().read()
    if view.config_error is not None:
        return render_broken(view.config_error)
    return render(view)


@bp.post("/settings/home-assistant")
def save_home_assistant_settings() -> Response | str | tuple[str, int]:
    """The settings form as posted without JavaScript: Save, or one of the buttons that answer on the page.

    With JavaScript the page posts JSON to the API instead. The session's CSRF token was checked before this
    ran (auth.authenticate).
    """
    form = request.form
    action = form.get("action", "save")
    if action == "reset":
        settings().save(SaveRequest({}, reset=True))
        flash(Words("Started again with empty settings. The damaged file was kept beside the new one.")
              .in_language(current_language()))
        return redirect(url_for("pages.home_assistant_settings"), 303)
    if action in _BUTTONS:
        return _BUTTONS[action](form)
    if action.startswith(PAGE_ACTION):
        return _browse(form, action.removeprefix(PAGE_ACTION))
    return _save(form)


def _save(form: MultiDict[str, str]) -> Response | tuple[str, int]:
    """Save what the form holds, by the API's rules (`SettingsService.save`); only the form's fields differ."""
    changes = _from_form(form)
    submitted = changes["allowlisted_entities"]
    # As the script's picker asks before a sensitive entity is ticked, the form asks before it saves one
    # that is not allowlisted yet; its "Save anyway" posts the same form with the question's nonce, good once.
    confirmed = _confirmed(form)
    to_confirm = settings().sensitive_to_confirm(submitted, confirmed or frozenset())
    if to_confirm:
        nonce = holds().ask(session_id(), (item.entity_id for item in to_confirm))
        return _render_in_place(form, Shown(question=Question(to_confirm, nonce, spent=confirmed is None)))
    try:
        # The token is checked before anything is written, so a bad one leaves everything as it was.
        token = _token_to_save(form, changes["base_url"])
        changes["entity_names"] = _names(submitted, changes["entity_names"], settings().read().config)
        saved = settings().save(SaveRequest(changes, token=token,
                                            remove_token=form.get("remove_access_token") == "on",
                                            expected_revision=form.get("revision") or None))
    except SettingsUnreadable as err:
        return render_broken(err)
    except InvalidSettingsChange as err:
        return _render_refused(form, err)
    if token is not None:
        holds().drop_token(session_id())  # stored now (or another typed in its place): no longer needed
    log.info("Home Assistant settings saved from the page without JavaScript")
    if saved.config.enabled and not saved.config.allowlisted_entities:
        flash(NOTHING_CHOSEN.in_language(current_language()), "warn")
    else:
        flash(Words("Saved.").in_language(current_language()))
    args: dict[str, Any] = _browse_args()
    if not args and saved.can_list:
        # The URL and token are saved: show their entities at once, to choose from (an empty search lists
        # them all).
        args = {"q": ""}
    return redirect(url_for("pages.home_assistant_settings", **args), 303)


def _confirmed(form: MultiDict[str, str]) -> frozenset[str] | None:
    """The sensitive entities a "Save anyway" confirms, its nonce spent; None when it was used or is too old.

    A nonce, not the entities' ids: a form posted again (Back and resubmit) after the household removed an
    entity must ask again, not re-add it.
    """
    nonce = form.get("confirm_sensitive", "")
    return holds().answer(session_id(), nonce) if nonce else frozenset()


def _token_to_save(form: MultiDict[str, str], base_url: str) -> Secret | None:
    """The token a save stores: the one typed, else one pasted earlier and kept for the URL's origin."""
    typed = optional_token(form.get("access_token", ""))
    # Kept by an answer in place (Test connection, a search) for the origin it was typed with, never another;
    # it counts as typed (with "Forget the stored token" ticked too, a new token is stored, as the API does).
    return typed or holds().token_for(session_id(), typed_origin(base_url))


def _keep_typed_token(form: MultiDict[str, str]) -> bool:
    """Keep a token typed into the form for the session, bound to the URL typed; whether it had to be dropped."""
    raw = form.get("access_token", "")
    if not raw.strip():
        return False
    try:
        token = optional_token(raw)
    except InvalidSettingsChange:
        return False  # not a token: its own error says so beside the field
    origin = typed_origin(form.get("base_url", ""))
    if token is None or not origin:
        return True  # no URL to bind it to: it is not kept, and the page asks for it again
    holds().hold_token(session_id(), token, origin)
    return False


def _browse_args() -> dict[str, Any]:
    """The picker's GET parameters this request came with, to go back to the same list after a POST."""
    return {name: request.args[name] for name in QUERY_PARAMS if name in request.args}


# --- the buttons besides Save, without JavaScript: each answers on the page, keeping what was typed -----


def _browse(form: MultiDict[str, str], page: str = "1") -> tuple[str, int]:
    """Search the picker, or turn its page: the list asked for, with every tick and typed value kept."""
    # A filter the form lacks is the list's shown one, from the URL the form posts to: with JavaScript the
    # script removed the page's filter fields, and its Previous and Next still turn the list shown.
    fields = {name: form.get(name, request.args.get(name, "")) for name in PICKER_FIELDS}
    query = BrowseQuery.from_args({**fields, "page": page})
    return _render_in_place(form, Shown(query=query))


def _test_connection(form: MultiDict[str, str]) -> tuple[str, int]:
    """Test connection with what is typed (the URL, the token), by the same rule as the API's test."""
    try:
        attempt = TryRequest.from_json({field: form.get(field, "") for field in TRY_FIELDS})
        if attempt.token is None:  # pasted before, and kept for the URL typed
            attempt = replace(attempt, token=holds().token_for(session_id(), typed_origin(attempt.base_url)))
        found = settings().test_connection(attempt)
    except ConsoleHaError as err:
        worded = household_error(err)
        log.info("connection test without JavaScript: %s", err.code)
        refused = isinstance(err, HAUnauthorized)
        if refused:
            holds().drop_token(session_id())  # Home Assistant said no to it: it is not kept for Save
        field = err.detail.get("field")
        field_words: str = worded.detail.get("field_message") or worded.message
        # Not set up: the API's sentence leads to the script's live picker ("…to choose entities"); this page
        # says what to type instead, as beside the field.
        words = field_words if isinstance(err, CapabilityNotConfigured) else worded.message
        outcome = Outcome("test", words, False, field if isinstance(field, str) else None, field_words)
        return _render_in_place(form, Shown(outcome=outcome), keep_token=not refused,
                                status=400 if isinstance(err, InvalidSettingsChange) else 200)
    if found.location_name:
        words = Words("Connected to “{name}”, Home Assistant {version}.", name=found.location_name,
                      version=found.version)
    else:
        words = Words("Connected to Home Assistant {version}.", version=found.version)
    return _render_in_place(form, Shown(outcome=Outcome("test", words, True)))


def _add_ca_certificate(form: MultiDict[str, str]) -> tuple[str, int]:
    """Store the pasted (or uploaded) CA certificate at once; it does not wait for Save."""
    pem: str = form.get("ca_pem", "")
    upload = request.files.get("ca_file")
    if not pem.strip() and upload is not None and upload.filename:
        pem = upload.read().decode("utf-8", "replace")
    try:
        settings().store_ca_certificate(pem)
    except InvalidSettingsChange as err:
        outcome = Outcome("ca", Words("Nothing was changed."), False, "ca_certificate", err.message)
        return _render_in_place(form, Shown(outcome=outcome), status=400)
    return _render_in_place(form, Shown(outcome=Outcome("ca", CA_ADDED, True)))


def _ask_before_removing_ca(form: MultiDict[str, str]) -> tuple[str, int]:
    """Remove asks first: the page again, with the question and its two answers."""
    return _render_in_place(form, Shown(ca_question=True))


def _remove_ca_certificate(form: MultiDict[str, str]) -> tuple[str, int]:
    try:
        settings().remove_ca_certificate()
    except InvalidSettingsChange as err:
        return _render_in_place(form, Shown(outcome=Outcome("ca", err.message, False)), status=400)
    return _render_in_place(form, Shown(outcome=Outcome("ca", CA_REMOVED, True)))


def _keep_ca_certificate(form: MultiDict[str, str]) -> tuple[str, int]:
    return _render_in_place(form, Shown(outcome=Outcome("ca", CA_KEPT, True)))


_BUTTONS: dict[str, Callable[[MultiDict[str, str]], tuple[str, int]]] = {
    "browse": _browse,
    "test": _test_connection,
    "ca-add": _add_ca_certificate,
    "ca-remove": _ask_before_removing_ca,
    "ca-remove-confirmed": _remove_ca_certificate,
    "ca-keep": _keep_ca_certificate,
}


def _render_in_place(form: MultiDict[str, str], shown: Shown, *, keep_token: bool = True,
                     status: int = 200) -> tuple[str, int]:
    """The page again with what the household typed and ticked and what the button did; a typed token kept.

    The token is never sent back: it is kept on the server for the session (`_keep_typed_token`), unless
    `keep_token` is false (Home Assistant refused it).
    """
    view = settings().read()
    if view.config_error is not None:
        return render_broken(view.config_error)
    changes = _from_form(form)
    values = {"enabled": changes["enabled"], "base_url": changes["base_url"],
              "remove_access_token": form.get("remove_access_token") == "on"}
    # The revision the page was opened with, not the file's current one: what is ticked is what was seen
    # then, so a Save after this button is still refused if another tab saved meanwhile (CONFIG_STALE).
    revision = shown.revision if shown.revision is not None else form.get("revision", view.revision or "")
    lost = _keep_typed_token(form) if keep_token else False
    return render(view, replace(shown, values=values, chosen=changes["allowlisted_entities"], revision=revision,
                                token_lost=lost), status=status)


def _render_refused(form: MultiDict[str, str], err: InvalidSettingsChange) -> tuple[str, int]:
    """The page again with what the household sent (the token kept, never shown) and why nothing was saved."""
    stale = isinstance(err, SettingsChangedElsewhere)
    status = 409 if stale else 400
    if stale:
        err = SettingsChangedElsewhere(Words(
            "Someone changed these settings elsewhere since you opened this page, so nothing was saved. "
            "Your choices are still below: press Save again to replace the other changes, or reload the "
            "page to see them."
        ))
    # Every entity stays on the list, the stored ones unticked where the household unticked them; the file's
    # revision goes into the form: after a stale save, saving again replaces the other change, knowingly.
    shown = Shown(form_error=err, revision=settings().read().revision)
    return _render_in_place(form, shown, keep_token=err.detail.get("field") != "access_token", status=status)


# How the form without JavaScript carries a setting of each declared type (`store.config.SETTINGS`).
_FORM_READERS: dict[str, Callable[[MultiDict[str, str], str], Any]] = {
    "boolean": lambda form, name: form.get(name) == "on",
    "string": lambda form, name: form.get(name, ""),
    "array": lambda form, name: list(dict.fromkeys(form.getlist(name))),
    # One hidden field of JSON (`entity_names`: the names the page listed); a field per name would pass the
    # form's limit on parts with a large house.
    "object": lambda form, name: _json_object(form.get(name, "")),
}


def _from_form(form: MultiDict[str, str]) -> dict[str, Any]:
    """The changes the form posts, one per declared setting it has a field for."""
    return {s.name: _FORM_READERS[s.type](form, s.name) for s in PAGE_SETTINGS if s.type in _FORM_READERS}


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _names(chosen: list[str], listed: Mapping[str, Any], config: HomeAssistantConfig) -> dict[str, Any]:
    """Each chosen entity's name, as the script's picker sends it: as Home Assistant's list had it, else as stored."""
    names = {entity_id: listed.get(entity_id) or config.entity_names.get(entity_id) for entity_id in chosen}
    return {entity_id: name for entity_id, name in names.items() if name}
