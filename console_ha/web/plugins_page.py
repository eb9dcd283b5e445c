"""The household's plugins page: what is installed, each plugin's switch, and the settings it declares.

Only a browser session may use it (web/access.py): a plugin acts on every read, and a program with an API
token must not turn one off (or on). Every form is a plain POST with the session's CSRF token, checked in
auth.authenticate, and redirects back (303), so the page works without JavaScript and a reload asks nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from console_ha.errors import InvalidSettingsChange
from console_ha.language import Words
from console_ha.plugins.plugin_registry import PluginInfo, Plugins, UnknownPlugin
from console_ha.plugins.plugin_settings import SettingField
from console_ha.web import services
from console_ha.web.request_language import current_language

log = logging.getLogger(__name__)

bp = Blueprint("plugins", __name__)

NOT_INSTALLED = Words("That plugin is not installed (any more). The list below is what is installed now.")


@dataclass(frozen=True)
class PluginRow:
    """One plugin as the page shows it: what `Plugins.describe` says, its settings and their values."""

    info: PluginInfo
    fields: tuple[SettingField, ...]
    values: Mapping[str, str]


def _plugins() -> Plugins:
    return services().plugins


def _rows() -> list[PluginRow]:
    plugins = _plugins()
    return [PluginRow(info, plugins.setting_fields(info.name), plugins.setting_values(info.name))
            for info in plugins.describe()]


def _tell(words: Words, category: str = "message") -> None:
    """Flash `words` in the request's language: the session keeps a flashed message as plain text."""
    flash(words.in_language(current_language()), category)


@bp.get("/settings/plugins")
def page() -> str:
    """Every installed plugin with its version, hooks and switch, and the settings it declares."""
    return _render()


@bp.post("/settings/plugins/<path:name>/switch")
def switch(name: str) -> ResponseReturnValue:
    """Turn one plugin on (`on=on`) or off (anything else), without uninstalling it."""
    on = request.form.get("on") == "on"
    try:
        _plugins().set_on(name, on)
    except UnknownPlugin:
        _tell(NOT_INSTALLED, "error")
        return redirect(url_for(".page"), 303)
    log.info("the household turned the plugin %s %s", name, "on" if on else "off")
    _tell(Words("“{name}” is on: the Console calls its hooks again.", name=name) if on else
          Words("“{name}” is off: the Console no longer calls its hooks. It stays installed.", name=name))
    return redirect(url_for(".page"), 303)


@bp.post("/settings/plugins/<path:name>/settings")
def save_settings(name: str) -> ResponseReturnValue:
    """Check and save every setting the plugin declares; nothing is saved when one is refused."""
    try:
        _plugins().save_settings(name, request.form.to_dict())
    except UnknownPlugin:
        _tell(NOT_INSTALLED, "error")
        return redirect(url_for(".page"), 303)
    except InvalidSettingsChange as err:
        return _render(form_error=err, failed=name, typed=request.form.to_dict()), 400
    log.info("the household saved the settings of the plugin %s", name)
    _tell(Words("Saved the settings of “{name}”. Its hooks use them from their next call.", name=name))
    return redirect(url_for(".page"), 303)


def _render(*, form_error: InvalidSettingsChange | None = None, failed: str = "",
            typed: Mapping[str, str] | None = None) -> str:
    return render_template(
        "plugins.html", rows=_rows(), form_error=form_error, failed=failed, typed=typed or {},
        error_field=form_error.detail.get("field") if form_error else None,
        switches_unusable=_plugins().switches_unusable,
        language_code=current_language().code,
    )
