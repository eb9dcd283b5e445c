"""Household-facing pages: the Home Assistant settings page, server-rendered first, enhanced by JS.

Without JavaScript the whole set-up works through plain forms: Save, Test connection and the CA
certificate's buttons POST the settings form (CSRF-checked), and the picker is a GET form of search, kind
and area over the entities of the saved URL and token (`settings.browse`), a page of at most 200 at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from flask import Blueprint, flash, redirect, render_template, request, url_for
from werkzeug.datastructures import MultiDict
from werkzeug.wrappers import Response

from console_ha.capabilities.entity_budget import BUDGET_BYTES, entity_cost
from console_ha.errors import CapabilityNotConfigured, ConsoleHaError, InvalidSettingsChange, SettingsChangedElsewhere
from console_ha.ha.addresses import ENTITY_ID_RE
from console_ha.settings.browse import PAGE_SIZE, QUERY_PARAMS, BrowsePage, BrowseQuery, browse
from console_ha.settings.catalogue import is_sensitive
from console_ha.settings.service import (
    TRY_FIELDS,
    SaveRequest,
    SettingsService,
    SettingsUnreadable,
    SettingsView,
    TryRequest,
)
from console_ha.settings.set_up import is_set_up
from console_ha.settings.tokens import TokenStatus, optional_token, typed_origin
from console_ha.store.ca_certificate import MAX_PEM_BYTES
from console_ha.store.config import MAX_ALLOWLIST, PAGE_SETTINGS, HomeAssistantConfig
from console_ha.store.ha_token import TOKEN_FOR_ANOTHER_ORIGIN, TOKEN_WITHOUT_ORIGIN
from console_ha.store.review import MAX_SENT_BY_PAGE
from console_ha.web import services
from console_ha.words import (
    CA_ADDED,
    CA_KEPT,
    CA_REMOVE_QUESTION,
    CA_REMOVED,
    CA_TAKES_EFFECT,
    NOTHING_CHOSEN,
    PASTE_TOKEN_AGAIN,
    PICKER_NEEDS_SAVED_CONNECTION,
    SENSITIVE_QUESTION,
    SENSITIVE_WHY,
    SETTINGS_WORDS,
    household_error,
)

log = logging.getLogger(__name__)

bp = Blueprint("pages", __name__)


@dataclass(frozen=True)
class AllowlistItem:
    """One allowlisted entity as the page lists it before (or without) the live picker."""

    entity_id: str
    name: str  # what the page shows
    stored_name: str  # the friendly name the picker saw, "" when none; sent back on save
    checked: bool = True
    cost: int = 0  # what it costs of what the assistant can read at once (`entity_budget.entity_cost`), for the meter


@bp.get("/")
def index() -> Response:
    """The Console's front door: the conversation once set up (`is_set_up`), the settings page until then."""
    if is_set_up(_settings().read()):
        return redirect(url_for("conversation.page"))
    return redirect(url_for("pages.home_assistant_settings"))


@bp.get("/settings/home-assistant")
def home_assistant_settings() -> str | tuple[str, int]:
    """The settings page with the current values rendered in; a damaged file shows what to do."""
    view = _settings().read()
    if view.config_error is not None:
        return _render_broken(view.config_error)
    return _render(view)


@dataclass(frozen=True)
class Outcome:
    """What a button without JavaScript did, said in its own place on the page (`where`: "test" or "ca")."""

    where: str
    message: str
    ok: bool
    field: str | None = None  # the field the message is about, marked invalid
    field_message: str = ""


@bp.post("/settings/home-assistant")
def save_home_assistant_settings() -> Response | str | tuple[str, int]:
    """Save the form as posted without JavaScript (with it, the page posts JSON to the API instead).

    The session's CSRF token was checked before this ran (auth.authenticate).
    """
    form = request.form
    action = form.get("action", "save")
    if action == "reset":
        _settings().save(SaveRequest({}, reset=True))
        flash("Started again with empty settings. The damaged file was kept beside the new one.")
        return redirect(url_for("pages.home_assistant_settings"), 303)
    if action in _BUTTONS:
        return _BUTTONS[action](form)

    changes = _from_form(form)
    submitted = changes["allowlisted_entities"]
    # As the script's picker asks before a sensitive entity is ticked, the form asks before it saves one
    # that is not allowlisted yet; "Save anyway" posts the same form with the entities it confirms.
    to_confirm = _sensitive_to_confirm(submitted, set(form.get("confirm_sensitive", "").split()))
    if to_confirm:
        return _render_in_place(form, None, sensitive_question=to_confirm)
    try:
        # The token is checked before anything is written, so a bad one leaves everything as it was.
        token = optional_token(form.get("access_token", ""))
        # The same save as the API's (`SettingsService.save`); only the form's fields differ.
        saved = _settings().save(SaveRequest(changes, token=token,
                                             remove_token=form.get("remove_access_token") == "on",
                                             expected_revision=form.get("revision") or None))
    except SettingsUnreadable as err:
        return _render_broken(err)
    except InvalidSettingsChange as err:
        return _render_refused(err, changes, submitted)
    log.info("Home Assistant settings saved from the page without JavaScript")
    if saved.config.enabled and not saved.config.allowlisted_entities:
        flash(NOTHING_CHOSEN, "warn")
    else:
        flash("Saved.")
    args: dict[str, Any] = _browse_args()
    if not args and _can_list(saved):
        # The URL and token are saved: show their entities at once, to choose from (the list is asked for
        # by the GET form's parameters; an empty search lists them all).
        args = {"q": ""}
    return redirect(url_for("pages.home_assistant_settings", **args), 303)


@dataclass(frozen=True)
class SensitiveItem:
    """A sensitive entity a Save would newly let the assistant read, as the question names it."""

    entity_id: str
    name: str


def _sensitive_to_confirm(submitted: list[str], confirmed: set[str]) -> list[SensitiveItem]:
    """The sensitive entities among those `submitted` that are not allowlisted yet nor `confirmed`.

    Sensitivity is the picker's (`catalogue.is_sensitive`): by the domain, and for an on/off sensor by its
    device class, from the picker's catalogue of the saved URL and token (where the page without JavaScript
    lists entities from). When the catalogue cannot be read, the domain alone decides, so a door sensor then
    goes unasked: the question is the household's safeguard against a slip, not the access control (that
    is the allowlist).
    """
    view = _settings().read()
    if view.config_error is not None:
        return []  # the save refuses a damaged file by itself
    saved = set(view.config.allowlisted_entities)
    new = [e for e in submitted if e not in saved and e not in confirmed and ENTITY_ID_RE.fullmatch(e)]
    if not new:
        return []
    known: dict[str, dict[str, Any]] = {}
    # The domain decides for every kind but on/off sensors, whose device class only Home Assistant knows:
    # only then is it asked (the catalogue also gives their names).
    if _can_list(view) and any(e.partition(".")[0] == "binary_sensor" for e in new):
        try:
            known = {e["entity_id"]: e for e in orjson.loads(_settings().entities()).get("entities", [])}
        except ConsoleHaError as err:
            log.info("sensitive entities without the catalogue (%s): judged by their domain", err.code)
    items = []
    for entity_id in new:
        entry = known.get(entity_id)
        sensitive = bool(entry.get("sensitive")) if entry else is_sensitive(entity_id.partition(".")[0], {})
        if sensitive:
            name = (entry or {}).get("friendly_name") or view.config.display_name(entity_id)
            items.append(SensitiveItem(entity_id, str(name)))
    return items


def _can_list(view: SettingsView) -> bool:
    """Whether the saved settings have a URL and a token for it, so the picker can list their entities."""
    return bool(view.config.base_url) and view.token.stored and not view.token.asked_again_for(view.config.base_url)


def _browse_args() -> dict[str, Any]:
    """The picker's GET parameters this request came with, to go back to the same list after a POST."""
    return {name: request.args[name] for name in QUERY_PARAMS if name in request.args}


# --- the buttons besides Save, without JavaScript: each answers on the page, keeping what was typed -----


def _test_connection(form: MultiDict[str, str]) -> tuple[str, int]:
    """Test connection with what is typed (the URL, the token), by the same rule as the API's test."""
    try:
        attempt = TryRequest.from_json({field: form.get(field, "") for field in TRY_FIELDS})
        found = _settings().test_connection(attempt)
    except ConsoleHaError as err:
        worded = household_error(err)
        log.info("connection test without JavaScript: %s", err.code)
        field = err.detail.get("field")
        outcome = Outcome("test", worded.message, False, field if isinstance(field, str) else None,
                          str(worded.detail.get("field_message") or worded.message))
        return _render_in_place(form, outcome, status=400 if err.code == InvalidSettingsChange.code else 200)
    where = f"“{found.location_name}”" if found.location_name else "Home Assistant"
    words = f"Connected to {where}, Home Assistant {found.version}."
    if attempt.token is not None:
        words += f" {PASTE_TOKEN_AGAIN}"
    return _render_in_place(form, Outcome("test", words, True))


def _add_ca_certificate(form: MultiDict[str, str]) -> tuple[str, int]:
    """Store the pasted (or uploaded) CA certificate at once; it does not wait for Save."""
    pem: str = form.get("ca_pem", "")
    upload = request.files.get("ca_file")
    if not pem.strip() and upload is not None and upload.filename:
        pem = upload.read().decode("utf-8", "replace")
    try:
        _settings().store_ca_certificate(pem)
    except InvalidSettingsChange as err:
        return _render_in_place(form, Outcome("ca", "Nothing was changed.", False, "ca_certificate", err.message),
                                status=400)
    return _render_in_place(form, Outcome("ca", CA_ADDED, True))


def _ask_before_removing_ca(form: MultiDict[str, str]) -> tuple[str, int]:
    """Remove asks first: the page again, with the question and its two answers."""
    return _render_in_place(form, None, ca_question=True)


def _remove_ca_certificate(form: MultiDict[str, str]) -> tuple[str, int]:
    try:
        _settings().remove_ca_certificate()
    except InvalidSettingsChange as err:
        return _render_in_place(form, Outcome("ca", err.message, False), status=400)
    return _render_in_place(form, Outcome("ca", CA_REMOVED, True))


def _keep_ca_certificate(form: MultiDict[str, str]) -> tuple[str, int]:
    return _render_in_place(form, Outcome("ca", CA_KEPT, True))


_BUTTONS: dict[str, Callable[[MultiDict[str, str]], tuple[str, int]]] = {
    "test": _test_connection,
    "ca-add": _add_ca_certificate,
    "ca-remove": _ask_before_removing_ca,
    "ca-remove-confirmed": _remove_ca_certificate,
    "ca-keep": _keep_ca_certificate,
}


def _render_in_place(form: MultiDict[str, str], outcome: Outcome | None, *, ca_question: bool = False,
                     sensitive_question: list[SensitiveItem] | None = None, status: int = 200) -> tuple[str, int]:
    """The page again with what the household typed and ticked (never the token) and what the button did."""
    view = _settings().read()
    if view.config_error is not None:
        return _render_broken(view.config_error)
    changes = _from_form(form)
    values = {"enabled": changes["enabled"], "base_url": changes["base_url"],
              "remove_access_token": form.get("remove_access_token") == "on"}
    # The revision the page was opened with, not the file's current one: what is ticked is what was seen
    # then, so a Save after this button is still refused if another tab saved meanwhile (CONFIG_STALE).
    return _render(view, values=values, chosen=changes["allowlisted_entities"], outcome=outcome,
                   ca_question=ca_question, sensitive_question=sensitive_question,
                   token_typed=bool(form.get("access_token", "").strip()), status=status,
                   revision=form.get("revision", view.revision))


def _settings() -> SettingsService:
    return services().settings


# How the form without JavaScript carries a setting of each declared type (`store.config.SETTINGS`). It has
# no field for an object (`entity_names`): the names the picker saw are kept as saved.
_FORM_READERS: dict[str, Callable[[MultiDict[str, str], str], Any]] = {
    "boolean": lambda form, name: form.get(name) == "on",
    "string": lambda form, name: form.get(name, ""),
    "array": lambda form, name: _unique(form.getlist(name)),
}


def _from_form(form: MultiDict[str, str]) -> dict[str, Any]:
    """The changes the form posts, one per declared setting it has a field for."""
    return {s.name: _FORM_READERS[s.type](form, s.name) for s in PAGE_SETTINGS if s.type in _FORM_READERS}


def _render(
    view: SettingsView,
    *,
    form_error: InvalidSettingsChange | None = None,
    values: dict[str, object] | None = None,
    chosen: list[str] | None = None,
    outcome: Outcome | None = None,
    ca_question: bool = False,
    sensitive_question: list[SensitiveItem] | None = None,
    token_typed: bool = False,
    status: int = 200,
    revision: str | None = None,
) -> tuple[str, int]:
    config = view.config
    values = values or {"enabled": config.enabled, "base_url": config.base_url}
    chosen = list(config.allowlisted_entities) if chosen is None else chosen
    query = BrowseQuery.from_args(request.args) if BrowseQuery.asked(request.args) else None
    listing, picker_words = _listing(view, chosen, query) if query is not None else (None, "")
    shown = {row.entity_id for row in listing.rows} if listing is not None else set()
    field_error = form_error.detail.get("field") if form_error else (outcome.field if outcome else None)
    field_message = form_error.message if form_error else (outcome.field_message if outcome else "")
    html = render_template(
        "settings.html",
        config_error=None,
        revision=view.revision if revision is None else revision,
        values=values,
        has_token=view.token.stored,
        token_note=_token_note(view.token, str(values.get("base_url") or "")),
        allowlist=_allowlist(config, _unique([*config.allowlisted_entities, *chosen]), set(chosen)),
        form_error=form_error,
        error_field=field_error,
        field_message=field_message,
        outcome=outcome,
        # The picker without JavaScript: the GET form's query, its page of entities, or why there is none.
        query=query,
        listing=listing,
        picker_words=picker_words,
        # The chosen entities not on the page shown: posted as they are, so a Save loses none of them.
        kept=[(entity_id, _cost(entity_id)) for entity_id in chosen if entity_id not in shown] if listing else [],
        action_url=url_for("pages.home_assistant_settings", **_browse_args()),
        ca=_settings().ca_certificate(),
        ca_question=ca_question,
        ca_words={"takes_effect": CA_TAKES_EFFECT, "question": CA_REMOVE_QUESTION, "removed": CA_REMOVED,
                  "added": CA_ADDED},
        nothing_chosen=NOTHING_CHOSEN,
        # For static/settings/picker.js: what the picker says, without asking, while no URL and token are saved.
        picker_not_configured=SETTINGS_WORDS[CapabilityNotConfigured.code],
        sensitive_question=sensitive_question or [],
        token_typed=token_typed,
        sensitive_words={"question": SENSITIVE_QUESTION, "why": SENSITIVE_WHY, "paste_token": PASTE_TOKEN_AGAIN},
        page_size=PAGE_SIZE,
        # For static/budget.js: what the chosen entities may cost in all; each box carries its own cost.
        budget={"budget_bytes": BUDGET_BYTES},
        # For static/settings/main.js: the settings a save sends, as declared (`store.config.SETTINGS`).
        fields=[setting.to_json() for setting in PAGE_SETTINGS],
        # For static/settings/ and budget.js: the rules a save checks, so the scripts hold no copies.
        limits={"allowlist": MAX_ALLOWLIST, "entity_id_pattern": ENTITY_ID_RE.pattern,
                "reviewed": MAX_SENT_BY_PAGE, "ca_pem_bytes": MAX_PEM_BYTES},
        **_urls(),
    )
    return html, status


def _listing(view: SettingsView, chosen: list[str], query: BrowseQuery) -> tuple[BrowsePage | None, str]:
    """The page of entities the GET form asks for, from the saved URL and token; else why not, in words."""
    if not _can_list(view):
        return None, PICKER_NEEDS_SAVED_CONNECTION
    try:
        catalogue = orjson.loads(_settings().entities())
    except CapabilityNotConfigured as err:
        return None, err.message if "reason" in err.detail else PICKER_NEEDS_SAVED_CONNECTION
    except ConsoleHaError as err:
        log.info("picker without JavaScript: %s", err.code)
        return None, household_error(err).message
    return browse(catalogue, chosen, query), ""


@dataclass(frozen=True)
class TokenNote:
    """The sentence beside the token field when the URL's origin is not the stored token's.

    The words are the API's refusal (`ha_token.TOKEN_FOR_ANOTHER_ORIGIN`, or `TOKEN_WITHOUT_ORIGIN`
    for a token stored without a URL), split around the two origins so the script can fill them in as
    the household types.
    """

    shown: bool
    unbound: bool  # the stored token has no origin: any URL needs the token again
    saved_origin: str
    typed_origin: str
    parts: tuple[str, str, str]
    unbound_words: str = TOKEN_WITHOUT_ORIGIN


def _token_note(token: TokenStatus, typed_url: str) -> TokenNote:
    before, _, rest = TOKEN_FOR_ANOTHER_ORIGIN.partition("{saved_for}")
    middle, _, after = rest.partition("{asked_for}")
    return TokenNote(token.asked_again_for(typed_url), token.stored and token.origin is None, token.origin or "",
                     typed_origin(typed_url), (before, middle, after))


def _render_broken(err: SettingsUnreadable) -> tuple[str, int]:
    # What is wrong and what to do (the page says how to start again itself), never a stack trace; the API
    # answers 409 CONFIG_INVALID meanwhile.
    log.warning("the Home Assistant settings file is damaged: %s", err.cause.message)
    html = render_template(
        "settings.html",
        config_error=err.cause,
        config_path=_settings().config_file,
        **_urls(),
    )
    return html, 200


def _render_refused(err: InvalidSettingsChange, changes: dict[str, Any], submitted: list[str]) -> tuple[str, int]:
    """The page again with what the household sent (never the token) and why nothing was saved."""
    view = _settings().read()
    if view.config_error is not None:
        return _render_broken(view.config_error)
    # Every entity stays on the list: the stored ones unticked where the household unticked them (`_render`).
    if err.code == "CONFIG_STALE":
        # The new revision goes into the form: saving again replaces the other change, knowingly.
        err = SettingsChangedElsewhere(
            "Someone changed these settings elsewhere since you opened this page, so nothing was saved. "
            "Your choices are still below: press Save again to replace the other changes, or reload the "
            "page to see them."
        )
    values = {"enabled": changes["enabled"], "base_url": changes["base_url"]}
    status = 409 if err.code == "CONFIG_STALE" else 400
    return _render(view, form_error=err, values=values, chosen=submitted, status=status)


def _allowlist(config: HomeAssistantConfig, entity_ids: Iterable[str], chosen: set[str]) -> list[AllowlistItem]:
    items = []
    for entity_id in entity_ids:
        # Submitted ids that are not entity ids are still shown (escaped) so the error makes sense.
        stored_name = config.entity_names.get(entity_id, "")
        name = config.display_name(entity_id) if "." in entity_id else entity_id
        items.append(AllowlistItem(entity_id, name, stored_name, entity_id in chosen, _cost(entity_id)))
    return items


def _cost(entity_id: str) -> int:
    """An entity's cost for the meter; 0 for a posted value that is no entity id (its own error says why)."""
    return entity_cost(entity_id) if ENTITY_ID_RE.fullmatch(entity_id) else 0


def _urls() -> dict[str, object]:
    return {
        "page_url": url_for("pages.home_assistant_settings"),
        "login_url": url_for("auth.login", next=url_for("pages.home_assistant_settings")),
        "api": {
            # The settings API's own routes: its prefix is written once, on its blueprint.
            "config": url_for("settings_api.get_settings"),
            "entities": url_for("settings_api.entities"),
            "discover": url_for("settings_api.discover"),
            "test": url_for("settings_api.test_connection"),
            "preview": url_for("settings_api.entities_preview"),
            "ca": url_for("settings_api.ca_certificate"),
        },
    }


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
