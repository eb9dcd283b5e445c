"""The request's language in the web layer: Flask-Babel for templates, `Words` rendered in pages and JSON.

The language is chosen once per request (the saved Language choice, else `Accept-Language`, else English);
templates translate with `_()` through Flask-Babel, and any `Words` the layers below return is rendered in
it where it leaves: a `{{ }}` in a template (Jinja's finalize) or a JSON answer (the app's JSON provider).
So a card made during one request reads in the language of whichever request shows it.
"""

from __future__ import annotations

from typing import Any

import flask_babel
from babel.numbers import format_decimal
from flask import Blueprint, Flask, current_app, g, has_request_context, redirect, request, url_for
from flask.json.provider import DefaultJSONProvider
from werkzeug.wrappers import Response

from console_ha.language import (
    AUTOMATIC,
    ENGLISH,
    LANGUAGES,
    PSEUDO,
    Language,
    Words,
    choose,
    localised,
    translations,
)
from console_ha.store.datadir import HOME_INSTANCE, is_instance_id
from console_ha.web import services

# An app whose config sets this offers the tests' pseudo-language (language.PSEUDO) as a choice.
PSEUDO_CONFIG = "CONSOLE_HA_PSEUDO_LANGUAGE"
_G_KEY = "console_ha_language"

bp = Blueprint("language", __name__)


def current_language() -> Language:
    """The language of the current request, chosen once per request; English outside one."""
    if not has_request_context():
        return ENGLISH
    language: Language | None = g.get(_G_KEY)
    if language is None:
        # Best first, as Werkzeug sorts them; q=0 says "not this one" (RFC 9110), so it is left out.
        browser = [tag for tag, quality in request.accept_languages if quality > 0]
        language = choose(services().console_settings.language(), browser,
                          with_pseudo=bool(current_app.config.get(PSEUDO_CONFIG)))
        setattr(g, _G_KEY, language)
    return language


def offered_languages() -> tuple[Language, ...]:
    """The languages the Language select offers (the pseudo-language too, in an app that tests with it)."""
    return (*LANGUAGES, PSEUDO) if current_app.config.get(PSEUDO_CONFIG) else LANGUAGES


class _ConsoleDomain(flask_babel.Domain):  # type: ignore[misc]  # Flask-Babel ships no type information
    """Flask-Babel's message domain over the Console's one catalog cache (language.translations)."""

    def get_translations(self) -> Any:
        """The current request's catalog (loaded once per process)."""
        return translations(current_language().catalog)


class _ConsoleBabel(flask_babel.Babel):  # type: ignore[misc]
    """Flask-Babel, its templates reading the same catalogs, loaded once, as `Words`."""

    _domain = _ConsoleDomain()

    @property
    def domain_instance(self) -> _ConsoleDomain:
        """The one domain every request's templates translate through."""
        return self._domain


class _LocalisingJSONProvider(DefaultJSONProvider):
    """Flask's JSON, with every `Words` in an answer rendered in the language of the request that gets it."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        """`obj` as JSON, its `Words` in the request's language."""
        language = current_language()
        # A Words is its English sentence already: an English answer needs no walk.
        return super().dumps(obj if language is ENGLISH else localised(obj, language), **kwargs)


def _finalize(value: Any) -> Any:
    # Every {{ }} of every template: a Words from below is shown in the request's language.
    return value.in_language(current_language()) if isinstance(value, Words) else value


def number_words(value: int | float) -> str:
    """A number as the request's language writes it ("1 234" in French): the templates' `number` filter."""
    return format_decimal(value, locale=current_language().locale)


def _template_values() -> dict[str, Any]:
    language = current_language()
    return {"html_lang": language.code, "offered_languages": offered_languages,
            "language_choice": _saved_choice}


def _saved_choice() -> str:
    return services().console_settings.language()


def _vary(response: Response) -> Response:
    # A page's words depend on Accept-Language (when the choice is Automatic): no cache may mix them up.
    response.vary.add("Accept-Language")
    return response


@bp.post("/settings/language")
def save() -> Response:
    """Save the Language choice (the Settings page's own small form) and show the page again in it."""
    services().console_settings.set_language(request.form.get("language", AUTOMATIC))
    # Back to the Home Assistant the page showed (issue 29); the page itself says if it is gone since.
    instance = request.form.get("instance", HOME_INSTANCE)
    shown: dict[str, Any] = {"instance": instance} if is_instance_id(instance) and instance != HOME_INSTANCE else {}
    return redirect(url_for("pages.home_assistant_settings", **shown), code=303)


def init_app(app: Flask) -> None:
    """Choose each request's language, translate templates with the catalogs, render `Words` where they leave."""
    app.json = _LocalisingJSONProvider(app)
    _ConsoleBabel(app, locale_selector=lambda: current_language().locale)
    app.jinja_env.finalize = _finalize
    app.add_template_filter(number_words, "number")
    # A `Words` passed as a value to `_()` would be formatted as its English text: `|said` renders it first.
    app.add_template_filter(_finalize, "said")
    app.context_processor(_template_values)
    app.after_request(_vary)
    app.register_blueprint(bp)
