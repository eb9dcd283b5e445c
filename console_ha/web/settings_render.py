"""The Home Assistant settings page as rendered: the form with what is saved, or with what was typed and ticked.

`settings_page` answers each request; this module turns a `SettingsView` and the household's own values into
the page, with the picker without JavaScript (`settings.browse`), the notes beside the token field, and the
sensitive question a Save may ask.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import orjson
from flask import g, render_template, request, session, url_for

from console_ha.capabilities.entity_budget import BUDGET_BYTES, entity_cost
from console_ha.errors import CapabilityNotConfigured, ConsoleHaError, InvalidSettingsChange, Unauthenticated
from console_ha.ha.addresses import ENTITY_ID_RE
from console_ha.language import Language, Words
from console_ha.settings.browse import PAGE_SIZE, BrowsePage, BrowseQuery, browse
from console_ha.settings.held import SessionHolds
from console_ha.settings.settings_service import (
    INSTANCE_FIELD,
    SensitiveItem,
    SettingsService,
    SettingsUnreadable,
    SettingsView,
)
from console_ha.settings.tokens import TokenStatus, typed_origin
from console_ha.store.ca_certificate import MAX_PEM_BYTES
from console_ha.store.config import MAX_ALLOWLIST, MAX_INSTANCE_NAME_LENGTH, NAME, PAGE_SETTINGS, HomeAssistantConfig
from console_ha.store.datadir import HOME_INSTANCE
from console_ha.store.ha_token import TOKEN_FOR_ANOTHER_ORIGIN, TOKEN_WITHOUT_ORIGIN
from console_ha.store.instances import MAX_INSTANCES
from console_ha.store.review import MAX_SENT_BY_PAGE
from console_ha.web import services
from console_ha.web.auth import SESSION_ID
from console_ha.web.request_language import current_language
from console_ha.words import (
    CA_ADDED,
    CA_REMOVE_QUESTION,
    CA_REMOVED,
    CA_TAKES_EFFECT,
    CONFIRMATION_SPENT,
    KIND_NAMES,
    NOTHING_CHOSEN,
    PASTE_TOKEN_AGAIN,
    PICKER_NEEDS_SAVED_CONNECTION,
    SENSITIVE_QUESTION,
    SENSITIVE_WHY,
    SETTINGS_WORDS,
    household_error,
    token_kept,
)

log = logging.getLogger(__name__)


PAGE = "pages.home_assistant_settings"

# The settings the settings form carries and its script saves: every one a page may send but the name,
# which has its own small form (rename), so a Save never blanks it.
FORM_SETTINGS = tuple(setting for setting in PAGE_SETTINGS if setting is not NAME)


def page_instance() -> str:
    """The instance the page is about: its forms' hidden field, else the URL's `?instance=`, else `home`."""
    return request.form.get(INSTANCE_FIELD) or request.args.get(INSTANCE_FIELD) or HOME_INSTANCE


def settings() -> SettingsService:
    """The settings service of the page's instance; 400 INVALID_CONFIG on `instance` when there is none such."""
    if "page_settings" not in g:
        g.page_settings = services().settings.at(page_instance())
    bound: SettingsService = g.page_settings
    return bound


def instance_args(instance: str | None = None) -> dict[str, Any]:
    """An instance (the page's) as a URL names it: nothing for `home` (the default), so home's URLs stay as ever."""
    instance = settings().instance if instance is None else instance
    return {} if instance == HOME_INSTANCE else {INSTANCE_FIELD: instance}


def holds() -> SessionHolds:
    """What the page without JavaScript keeps per browser session (`settings.held`), for every instance alike."""
    return services().settings.holds


def session_id() -> str:
    """The server-side id of the household's session (every settings page request has one)."""
    sid = session.get(SESSION_ID)
    if not isinstance(sid, str):  # only a logged-in household reaches these pages (web/access.py)
        raise Unauthenticated("Log in to the Console first.")
    return sid


@dataclass(frozen=True)
class AllowlistItem:
    """One allowlisted entity as the page lists it before (or without) the live picker."""

    entity_id: str
    name: str  # what the page shows
    stored_name: str  # the friendly name the picker saw, "" when none; sent back on save
    checked: bool = True
    cost: int = 0  # what it costs of what the assistant can read at once (`entity_budget.entity_cost`), for the meter


@dataclass(frozen=True)
class Outcome:
    """What a button without JavaScript did, said in its own place on the page (`where`: "test" or "ca")."""

    where: str
    message: str
    ok: bool
    field: str | None = None  # the field the message is about, marked invalid
    field_message: str = ""


@dataclass(frozen=True)
class Question:
    """The sensitive question a Save asks first: the entities, and the nonce its "Save anyway" posts."""

    items: list[SensitiveItem]
    nonce: str
    spent: bool = False  # the answer posted had been used already, or was too old


@dataclass(frozen=True)
class Shown:
    """What the household typed, ticked and asked for, to show again (never the token); None: as saved."""

    values: dict[str, object] | None = None
    chosen: list[str] | None = None
    query: BrowseQuery | None = None
    revision: str | None = None
    outcome: Outcome | None = None
    form_error: InvalidSettingsChange | None = None
    ca_question: bool = False
    question: Question | None = None
    token_lost: bool = False  # a token was typed that could not be kept: the page asks for it again
    instance_question: bool = False  # Remove (this Home Assistant) asks first
    refused: NameRefused | None = None  # an add, a rename or a remove that was refused, and why


@dataclass(frozen=True)
class NameRefused:
    """Why the Home Assistants' own forms were refused: which form (`add`, `rename`, `remove`), what was typed."""

    where: str
    error: InvalidSettingsChange
    typed: str


def render(view: SettingsView, shown: Shown = Shown(), *, status: int = 200) -> tuple[str, int]:
    """The settings page for `view`, with what `shown` holds in place of the saved values."""
    config = view.config
    values = shown.values or {"enabled": config.enabled, "base_url": config.base_url}
    chosen = list(config.allowlisted_entities) if shown.chosen is None else shown.chosen
    query = shown.query
    if query is None and BrowseQuery.asked(request.args):
        query = BrowseQuery.from_args(request.args)
    err, outcome = shown.form_error, shown.outcome
    html = render_template(
        "settings.html",
        config_error=None,
        **instances_context(shown),
        revision=view.revision if shown.revision is None else shown.revision,
        values=values,
        **_token_context(view.token, str(values.get("base_url") or "")),
        allowlist=_allowlist(config, _unique([*config.allowlisted_entities, *chosen]), set(chosen)),
        form_error=err,
        error_field=err.detail.get("field") if err else (outcome.field if outcome else None),
        field_message=err.message if err else (outcome.field_message if outcome else ""),
        outcome=outcome,
        **_picker_context(view, chosen, query),
        ca=settings().ca_certificate(),
        ca_question=shown.ca_question,
        ca_words={"takes_effect": CA_TAKES_EFFECT, "question": CA_REMOVE_QUESTION, "removed": CA_REMOVED,
                  "added": CA_ADDED},
        nothing_chosen=NOTHING_CHOSEN,
        # For static/settings/picker.js: the kinds of entity in the page's language (the picker's JSON is bytes).
        kind_names=KIND_NAMES,
        # For static/settings/picker.js: what the picker says, without asking, while no URL and token are saved.
        picker_not_configured=SETTINGS_WORDS[CapabilityNotConfigured.code],
        question=shown.question,
        token_lost=shown.token_lost,
        sensitive_words={"question": SENSITIVE_QUESTION, "why": SENSITIVE_WHY, "paste_token": PASTE_TOKEN_AGAIN,
                         "spent": CONFIRMATION_SPENT},
        page_size=PAGE_SIZE,
        # For static/budget.js: what the chosen entities may cost in all; each box carries its own cost.
        budget={"budget_bytes": BUDGET_BYTES},
        # For static/settings/main.js: the settings a save sends, as declared (`store.config.SETTINGS`).
        fields=[setting.to_json() for setting in FORM_SETTINGS],
        # For static/settings/ and budget.js: the rules a save checks, so the scripts hold no copies.
        limits={"allowlist": MAX_ALLOWLIST, "entity_id_pattern": ENTITY_ID_RE.pattern,
                "reviewed": MAX_SENT_BY_PAGE, "ca_pem_bytes": MAX_PEM_BYTES},
        **urls(),
    )
    return html, status


def _picker_context(view: SettingsView, chosen: list[str], query: BrowseQuery | None) -> dict[str, Any]:
    """The picker without JavaScript: the query, its page of entities (or why there is none), what goes along."""
    listing, words = _listing(view, chosen, query) if query is not None else (None, "")
    shown = {row.entity_id for row in listing.rows} if listing is not None else set()
    page, here = PAGE, instance_args()
    return {
        "query": query,
        "listing": listing,
        "picker_words": words,
        # The chosen entities not on the page shown: posted as they are, so a Save or a search loses none.
        "kept": [(e, _cost(e), listing.names.get(e, "")) for e in chosen if e not in shown] if listing else [],
        # Home Assistant's names of the entities listed and chosen, for the save to store (one field).
        "entity_names": listing.names if listing else {},
        # The form posts back to the list shown, so a Save comes back to it.
        "action_url": url_for(page, **here, **_as_any(query.args())) if query is not None else url_for(page, **here),
        # Without JavaScript the list is there at once: a page without a query refreshes to the whole list
        # (inside <noscript>, so the script's page never loads the entities twice). A GET only: a refresh
        # after a post would lose what was typed.
        "list_url": (url_for(page, **here, q="") if query is None and view.can_list and request.method == "GET"
                     else None),
    }


def _listing(view: SettingsView, chosen: list[str], query: BrowseQuery) -> tuple[BrowsePage | None, str]:
    """The page of entities the query asks for, from the saved URL and token; else why not, in words."""
    if not view.can_list:
        return None, PICKER_NEEDS_SAVED_CONNECTION
    try:
        catalogue = orjson.loads(settings().entities())
    except CapabilityNotConfigured as err:
        return None, err.message if "reason" in err.detail else PICKER_NEEDS_SAVED_CONNECTION
    except ConsoleHaError as err:
        log.info("picker without JavaScript: %s", err.code)
        return None, household_error(err).message
    listing = browse(catalogue, chosen, query)
    # The kinds in the order of the page's language, as the script's picker sorts them: "Lumières" under L.
    language = current_language()
    return replace(listing, kinds=sorted(listing.kinds, key=lambda kind: _said(kind.label, language))), ""


def _said(label: str, language: Language) -> str:
    return (label.in_language(language) if isinstance(label, Words) else label).casefold()


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
    unbound_words: Words = TOKEN_WITHOUT_ORIGIN


def _token_context(token: TokenStatus, typed_url: str) -> dict[str, Any]:
    """What the page says beside the token field: what is stored, for which origin, and what is kept to save."""
    # The sentence in the page's language, split around its two origins (each language keeps their order).
    before, _, rest = TOKEN_FOR_ANOTHER_ORIGIN.in_language(current_language()).partition("{saved_for}")
    middle, _, after = rest.partition("{asked_for}")
    origin = typed_origin(typed_url)
    note = TokenNote(token.asked_again_for(typed_url), token.stored and token.origin is None, token.origin or "",
                     origin, (before, middle, after))
    held = holds().held_token(session_id())
    # Said only while the URL typed is the one the token was pasted for: for any other it is not used.
    kept = (held is not None and held.origin == origin)
    minutes = round(holds().hold_seconds / 60)
    return {
        "has_token": token.stored,
        "token_note": note,
        "token_kept": token_kept(minutes, origin) if kept else [],
    }


def render_broken(err: SettingsUnreadable) -> tuple[str, int]:
    """What is wrong with the settings file and what to do (the page says how to start again), never a trace."""
    # The API answers 409 CONFIG_INVALID meanwhile.
    log.warning("the Home Assistant settings file is damaged: %s", err.cause.message)
    html = render_template("settings.html", config_error=err.cause, config_path=settings().config_file,
                           **instances_context(Shown()), **urls())
    return html, 200


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


def urls() -> dict[str, object]:
    """The page's own URL, the login page's, and the settings API's routes the scripts call, for its instance.

    Every API route names the page's instance (`?instance=`, left out for `home`), so the scripts read, test,
    list and save that one Home Assistant without knowing of instances at all.
    """
    here = instance_args()
    page_url = url_for(PAGE, **here)
    return {
        "page_url": page_url,
        "login_url": url_for("auth.login", next=page_url),
        "api": {
            # The settings API's own routes: its prefix is written once, on its blueprint.
            "config": url_for("settings_api.get_settings", **here),
            "entities": url_for("settings_api.entities", **here),
            "discover": url_for("settings_api.discover", **here),
            "test": url_for("settings_api.test_connection", **here),
            "preview": url_for("settings_api.entities_preview", **here),
            "ca": url_for("settings_api.ca_certificate", **here),
        },
    }


@dataclass(frozen=True)
class InstanceLink:
    """One Home Assistant as the page's navigation offers it: its name, where its settings are, whether shown."""

    id: str
    name: str
    url: str
    current: bool


def instances_context(shown: Shown) -> dict[str, Any]:
    """The page's instances: the navigation (with several), the current one's name, and room for another."""
    current = settings().instance
    names = services().instances.names()
    links = [InstanceLink(instance, name, url_for(PAGE, **instance_args(instance)), instance == current)
             for instance, name in names.items()]
    return {
        "instance": current,
        "instance_links": links if len(links) > 1 else [],
        "instance_name": names.get(current, current),
        "can_add_instance": len(links) < MAX_INSTANCES,
        "max_instances": MAX_INSTANCES,
        "name_max": MAX_INSTANCE_NAME_LENGTH,
        "instance_question": shown.instance_question,
        "refused": shown.refused,
    }


def _as_any(args: dict[str, str]) -> dict[str, Any]:
    # url_for's keyword arguments are typed for its own options (`_external`...); these are query values.
    return args


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
