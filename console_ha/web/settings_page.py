"""Household-facing pages: the Home Assistant settings page, server-rendered first, enhanced by JS.

Without JavaScript the whole set-up works through plain forms: Save, Test connection, the CA certificate's
buttons and the picker's Search and page buttons POST the settings form (CSRF-checked), so what is typed and
ticked travels with each of them; the picker lists the entities of the saved URL and token (`settings.browse`),
a page of at most 200 at a time. A pasted token and the sensitive question's confirmations are kept on the
server for the session (`settings.held`). The page itself is drawn by `settings_render`.

The page is about one Home Assistant at a time (`?instance=`, default `home`; every form carries it in a
hidden field). Its small forms add another (the id made from the name, `new_instance_id`), rename the one
shown, and remove it (asking first), each a POST that comes back to the page by a redirect.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Mapping
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
from console_ha.folding import fold
from console_ha.language import Words
from console_ha.secret import Secret
from console_ha.settings.browse import QUERY_PARAMS, BrowseQuery
from console_ha.settings.saving import remove_instance
from console_ha.settings.set_up import is_set_up
from console_ha.settings.settings_service import (
    TRY_FIELDS,
    SaveRequest,
    SettingsService,
    SettingsUnreadable,
    TryRequest,
)
from console_ha.settings.tokens import optional_token, typed_origin
from console_ha.store.config import ABSENT_REVISION, HomeAssistantConfig
from console_ha.store.instances import MAX_INSTANCES
from console_ha.web import services
from console_ha.web.request_language import current_language
from console_ha.web.settings_render import (
    FORM_SETTINGS,
    PAGE,
    NameRefused,
    Outcome,
    Question,
    Shown,
    holds,
    instance_args,
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


def _no_such_instance() -> Response | None:
    """Home's page, saying so, when the page names a Home Assistant there is not (removed in another tab)."""
    try:
        settings()
    except InvalidSettingsChange as err:
        flash(_said(err.message), "error")
        return _to_page(services().settings)
    return None


def _to_page(service: SettingsService) -> Response:
    """A redirect to a Home Assistant's page: to its whole list once its URL and token are saved.

    As a Save without JavaScript does: the page without a query would refresh to that list (<noscript>),
    and a message said on the way (flashed) would be lost to the refresh.
    """
    args: dict[str, Any] = {"q": ""} if service.read().can_list else {}
    return redirect(url_for(PAGE, **instance_args(service.instance), **args), 303)


def _said(words: str) -> str:
    return words.in_language(current_language()) if isinstance(words, Words) else words


@bp.get("/settings/home-assistant")
def home_assistant_settings() -> Response | str | tuple[str, int]:
    """The settings page of one Home Assistant with its values rendered in; a damaged file shows what to do."""
    elsewhere = _no_such_instance()
    if elsewhere is not None:
        return elsewhere
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
    elsewhere = _no_such_instance()
    if elsewhere is not None:
        return elsewhere  # nothing is saved for a Home Assistant that is gone
    form = request.form
    action = form.get("action", "save")
    if action == "reset":
        # The name went with the damaged file: the form asks for it again (`home`'s may be left empty).
        changes = {"name": form["name"]} if "name" in form else {}
        try:
            settings().save(SaveRequest(changes, reset=True))
        except SettingsUnreadable as err:
            return render_broken(err)
        except InvalidSettingsChange as err:
            flash(_said(err.message), "error")
            return redirect(url_for(PAGE, **instance_args()), 303)
        flash(Words("Started again with empty settings. The damaged file was kept beside the new one.")
              .in_language(current_language()))
        return redirect(url_for(PAGE, **instance_args()), 303)
    if action in _INSTANCE_BUTTONS:
        return _INSTANCE_BUTTONS[action](form)
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
    return redirect(url_for(PAGE, **instance_args(), **args), 303)


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
    """The changes the form posts, one per declared setting it has a field for (the name has its own form)."""
    return {s.name: _FORM_READERS[s.type](form, s.name) for s in FORM_SETTINGS if s.type in _FORM_READERS}


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


# --- the Home Assistants: add another, rename the one shown, remove it -----------------------------------

# An id made from a name: what is left of it in lower-case ASCII letters and digits, joined by underscores.
_NOT_IN_AN_ID = re.compile(r"[^a-z0-9]+")
MAX_ID_LENGTH = 32
# The id of a Home Assistant whose name has no ASCII letter or digit at all ("小屋").
UNNAMED_ID = "home_assistant"


def new_instance_id(name: str, taken: Collection[str]) -> str:
    """An id for a new Home Assistant named `name`: from its name, unique among `taken`, at most 32 characters.

    Made rather than asked for: the household names its Home Assistants and never needs to see an id, while
    the id (in a read's `instance` argument, and in file names) must stay plain ASCII. "Cabin" is `cabin`,
    "Chalet d'été" `chalet_d_ete`; a second "Cabin" `cabin_2`.
    """
    base = _NOT_IN_AN_ID.sub("_", fold(name)).strip("_")[:MAX_ID_LENGTH].rstrip("_") or UNNAMED_ID
    candidate, number = base, 1
    while candidate in taken:
        number += 1
        suffix = f"_{number}"
        candidate = base[:MAX_ID_LENGTH - len(suffix)].rstrip("_") + suffix
    return candidate


def _add_instance(form: MultiDict[str, str]) -> Response | tuple[str, int]:
    """Add a Home Assistant by its name (the save's rules: a name, unique, at most 8), then show its settings."""
    name = form.get("name", "")
    for _ in range(MAX_INSTANCES):
        instance = new_instance_id(name, services().instances.ids())
        try:
            # Saved only while no file has the id: another tab's add may have taken it since `ids()` was read,
            # and this save would then rename that Home Assistant. The id is made here, so make another.
            added = services().settings.at(instance, creating=True).save(
                SaveRequest({"name": name}, expected_revision=ABSENT_REVISION))
            break
        except SettingsChangedElsewhere as err:
            taken = err
        except InvalidSettingsChange as err:
            return _name_refused("add", err, name)
    else:
        return _name_refused("add", taken, name)
    log.info("Home Assistant %s added from the settings page", instance)
    flash(_said(Words("Added {name}. Enter its URL and access token below, then choose what the assistant may "
                      "read.", name=added.config.name or name)))
    return redirect(url_for(PAGE, instance=instance), 303)


def _rename_instance(form: MultiDict[str, str]) -> Response | tuple[str, int]:
    """Give the Home Assistant shown another name (`home`'s may be emptied: it is then "Home")."""
    name = form.get("name", "")
    try:
        settings().save(SaveRequest({"name": name}))
    except InvalidSettingsChange as err:
        return _name_refused("rename", err, name)
    flash(_said(Words("Renamed.")))
    return _to_page(settings())


def _name_refused(where: str, err: InvalidSettingsChange, typed: str) -> tuple[str, int]:
    """The page again, as saved, with why the name (or another Home Assistant) was refused beside its form."""
    if isinstance(err, SettingsUnreadable):
        return render_broken(err)
    return render(settings().read(), Shown(refused=NameRefused(where, err, typed)), status=400)


def _ask_before_removing_instance(form: MultiDict[str, str]) -> tuple[str, int]:
    """Remove asks first: the page again, with the question and its two answers."""
    return render(settings().read(), Shown(instance_question=True))


def _remove_instance(form: MultiDict[str, str]) -> Response | tuple[str, int]:
    """Remove the Home Assistant shown, its token and CA certificate with it (`saving.remove_instance`); never home."""
    instance = settings().instance
    instances = services().instances
    name = instances.names().get(instance, instance)
    try:
        remove_instance(instances, instance)
    except InvalidSettingsChange as err:
        return render(settings().read(), Shown(refused=NameRefused("remove", err, "")), status=400)
    log.info("Home Assistant %s removed from the settings page", instance)
    flash(_said(Words("Removed {name}, with its access token and CA certificate.", name=name)))
    return _to_page(services().settings)


_INSTANCE_BUTTONS: dict[str, Callable[[MultiDict[str, str]], Response | tuple[str, int]]] = {
    "instance-add": _add_instance,
    "instance-rename": _rename_instance,
    "instance-remove": _ask_before_removing_instance,
    "instance-remove-confirmed": _remove_instance,
}
