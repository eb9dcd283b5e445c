"""Household-facing pages: the Home Assistant settings page, server-rendered first, enhanced by JS."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from werkzeug.datastructures import MultiDict
from werkzeug.wrappers import Response

from console_ha.capabilities.entity_budget import BUDGET_BYTES, ENTITY_BYTES
from console_ha.errors import InvalidSettingsChange, SettingsChangedElsewhere
from console_ha.ha.addresses import ENTITY_ID_RE
from console_ha.settings.service import SaveRequest, SettingsService, SettingsUnreadable, SettingsView
from console_ha.settings.tokens import TokenStatus, optional_token, typed_origin
from console_ha.store.ca_certificate import MAX_PEM_BYTES
from console_ha.store.config import MAX_ALLOWLIST, PAGE_SETTINGS, HomeAssistantConfig
from console_ha.store.ha_token import TOKEN_FOR_ANOTHER_ORIGIN, TOKEN_WITHOUT_ORIGIN
from console_ha.store.review import MAX_SENT_BY_PAGE
from console_ha.web import services

log = logging.getLogger(__name__)

bp = Blueprint("pages", __name__)



@dataclass(frozen=True)
class AllowlistItem:
    """One allowlisted entity as the page lists it before (or without) the live picker."""

    entity_id: str
    name: str  # what the page shows
    stored_name: str  # the friendly name the picker saw, "" when none; sent back on save
    checked: bool = True


@bp.get("/")
def index() -> Response:
    """The Console's front door leads to the settings page."""
    return redirect(url_for("pages.home_assistant_settings"))


@bp.get("/settings/home-assistant")
def home_assistant_settings() -> str | tuple[str, int]:
    """The settings page with the current values rendered in; a damaged file shows what to do."""
    view = _settings().read()
    if view.config_error is not None:
        return _render_broken(view.config_error)
    return _render(view)


@bp.post("/settings/home-assistant")
def save_home_assistant_settings() -> Response | str | tuple[str, int]:
    """Save the form as posted without JavaScript (with it, the page posts JSON to the API instead).

    The session's CSRF token was checked before this ran (auth.authenticate).
    """
    form = request.form
    if form.get("action") == "reset":
        _settings().save(SaveRequest({}, reset=True))
        flash("Started again with empty settings. The damaged file was kept beside the new one.")
        return redirect(url_for("pages.home_assistant_settings"), 303)

    changes = _from_form(form)
    submitted = changes["allowlisted_entities"]
    try:
        # The token is checked before anything is written, so a bad one leaves everything as it was.
        token = optional_token(form.get("access_token", ""))
        # The same save as the API's (`SettingsService.save`); only the form's fields differ.
        _settings().save(SaveRequest(changes, token=token, remove_token=form.get("remove_access_token") == "on",
                                     expected_revision=form.get("revision") or None))
    except SettingsUnreadable as err:
        return _render_broken(err)
    except InvalidSettingsChange as err:
        return _render_refused(err, changes, submitted)
    log.info("Home Assistant settings saved from the page without JavaScript")
    flash("Saved.")
    return redirect(url_for("pages.home_assistant_settings"), 303)


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
    allowlist: list[AllowlistItem] | None = None,
    status: int = 200,
) -> tuple[str, int]:
    config = view.config
    values = values or {"enabled": config.enabled, "base_url": config.base_url}
    html = render_template(
        "settings.html",
        config_error=None,
        revision=view.revision,
        values=values,
        has_token=view.token.stored,
        token_note=_token_note(view.token, str(values.get("base_url") or "")),
        allowlist=allowlist if allowlist is not None else _allowlist(config, config.allowlisted_entities),
        form_error=form_error,
        error_field=form_error.detail.get("field") if form_error else None,
        # For static/budget.js: an entity costs entity_bytes plus its id and domain, of budget_bytes.
        budget={"budget_bytes": BUDGET_BYTES, "entity_bytes": ENTITY_BYTES},
        # For static/settings/main.js: the settings a save sends, as declared (`store.config.SETTINGS`).
        fields=[setting.to_json() for setting in PAGE_SETTINGS],
        # For static/settings/ and budget.js: the rules a save checks, so the scripts hold no copies.
        limits={"allowlist": MAX_ALLOWLIST, "entity_id_pattern": ENTITY_ID_RE.pattern,
                "reviewed": MAX_SENT_BY_PAGE, "ca_pem_bytes": MAX_PEM_BYTES},
        **_urls(),
    )
    return html, status


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
    # Keep every entity on the list: the stored ones unticked where the household unticked them.
    ids = _unique([*view.config.allowlisted_entities, *submitted])
    chosen = set(submitted)
    allowlist = [
        AllowlistItem(item.entity_id, item.name, item.stored_name, item.entity_id in chosen)
        for item in _allowlist(view.config, ids)
    ]
    if err.code == "CONFIG_STALE":
        # The new revision goes into the form: saving again replaces the other change, knowingly.
        err = SettingsChangedElsewhere(
            "Someone changed these settings elsewhere since you opened this page, so nothing was saved. "
            "Your choices are still below: press Save again to replace the other changes, or reload the "
            "page to see them."
        )
    values = {"enabled": changes["enabled"], "base_url": changes["base_url"]}
    status = 409 if err.code == "CONFIG_STALE" else 400
    return _render(view, form_error=err, values=values, allowlist=allowlist, status=status)


def _allowlist(config: HomeAssistantConfig, entity_ids: Iterable[str]) -> list[AllowlistItem]:
    items = []
    for entity_id in entity_ids:
        # Submitted ids that are not entity ids are still shown (escaped) so the error makes sense.
        stored_name = config.entity_names.get(entity_id, "")
        name = config.display_name(entity_id) if "." in entity_id else entity_id
        items.append(AllowlistItem(entity_id, name, stored_name))
    return items


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
