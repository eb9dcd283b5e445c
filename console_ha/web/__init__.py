"""The Console web layer, the only package that imports Flask: `create_app` builds the app."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from flask import Flask, current_app
from flask_wtf.csrf import CSRFProtect

from console_ha.answers.household_queue import MAX_WAITING
from console_ha.capabilities.confirmations import CONFIRMATION_TTL_SECONDS
from console_ha.console import Console, ConsoleOptions
from console_ha.conversation.model_check import TEST_TIMEOUT_SECONDS
from console_ha.conversation.model_setup import environment_values
from console_ha.settings.settings_service import Timeouts
from console_ha.store.datadir import DataDir, resolve_data_dir
from console_ha.web.login_throttle import LoginThrottle

log = logging.getLogger(__name__)

_PACKAGE = Path(__file__).resolve().parent.parent
_CHECKOUT = _PACKAGE.parent

# The settings service's own defaults, named once (settings.service.Timeouts).
_SETTINGS_TIMEOUTS = Timeouts()

# Defaults an app starts with; `test_config` (or the CLI) may override any of them.
DEFAULTS: dict[str, Any] = {
    # Request bodies: a full allowlist with names is well under this.
    "MAX_CONTENT_LENGTH": 1024 * 1024,
    "SESSION_COOKIE_NAME": "console_ha_session",
    "SESSION_COOKIE_HTTPONLY": True,
    # Lax, not Strict: with Strict a link to the Console from elsewhere (a Home Assistant dashboard, a
    # chat message) arrives without the cookie and looks logged out. Every mutation needs the CSRF token.
    "SESSION_COOKIE_SAMESITE": "Lax",
    # True behind https (`console-ha serve --secure-cookies`); a plain-http LAN Console cannot use it.
    "SESSION_COOKIE_SECURE": False,
    "PERMANENT_SESSION_LIFETIME": timedelta(days=14),
    # Every check is called explicitly, for session-authenticated mutating requests only (auth.py).
    "WTF_CSRF_CHECK_DEFAULT": False,
    # No expiry of its own: a settings page left open for hours must still save. The token is bound
    # to the session, which expires, and a new login replaces it.
    "WTF_CSRF_TIME_LIMIT": None,
    # Host names answered beyond loopback (`serve --host`/`--trusted-host`; CONSOLE_HA_TRUSTED_HOSTS adds
    # more). create_app turns them into Flask's TRUSTED_HOSTS.
    "CONSOLE_HA_TRUSTED_HOSTS": (),
    # Bounds on the settings page's calls to the outside, in seconds.
    "CONSOLE_HA_DISCOVERY_TIMEOUT": _SETTINGS_TIMEOUTS.discovery,
    "CONSOLE_HA_STATES_TIMEOUT": _SETTINGS_TIMEOUTS.states,
    "CONSOLE_HA_AREAS_TIMEOUT": _SETTINGS_TIMEOUTS.areas,
    "CONSOLE_HA_TEST_TIMEOUT": _SETTINGS_TIMEOUTS.test,
    "CONSOLE_HA_MODEL_TEST_TIMEOUT": TEST_TIMEOUT_SECONDS,
    # Reads asked for by MCP clients: how long each card stays open, and how many may wait at once.
    # They shape the Console, so they apply when create_app opens it (not to a Console handed in).
    "CONSOLE_HA_CONFIRMATION_TTL": CONFIRMATION_TTL_SECONDS,
    "CONSOLE_HA_MCP_MAX_WAITING": MAX_WAITING,
}

__all__ = ["DEFAULTS", "WebServices", "create_app", "services", "web_services"]


def _resource_folder(name: str) -> str:
    # A checkout serves its top-level folder; an installed wheel its copy under console_ha/_<name>.
    checkout = _CHECKOUT / name
    if checkout.is_dir() and (_CHECKOUT / "pyproject.toml").is_file():
        return str(checkout)
    return str(_PACKAGE / f"_{name}")


@dataclass
class WebServices:
    """What only the web front end keeps beside the Console's services."""

    csrf: CSRFProtect
    login_throttle: LoginThrottle


def services() -> Console:
    """The current app's Console: its stores and services."""
    console: Console = current_app.extensions["console_ha"]
    return console


def web_services() -> WebServices:
    """The current app's web-only services."""
    web: WebServices = current_app.extensions["console_ha_web"]
    return web


def create_app(data_dir: DataDir | None = None, test_config: Mapping[str, Any] | None = None, *,
               console: Console | None = None) -> Flask:
    """Build the Console's Flask app over `console`, or over one opened on `data_dir` (default: the resolved one).

    A Console handed in keeps the options it was opened with; the CONSOLE_HA_* settings of `test_config`
    that shape a Console (confirmation TTL, MCP waiting, model variables) apply only to one opened here.
    """
    from console_ha.web import (
        api_tokens,
        auth,
        clock,
        confirmation_routes,
        conversation,
        mcp_endpoint,
        model_page,
        plugins_page,
        settings_api,
    )
    from console_ha.web import request_language as household_language
    from console_ha.web import settings_page as pages
    from console_ha.web.error_responses import register_error_handlers
    from console_ha.web.security import init_app as init_security
    from console_ha.web.security import names_from_env, trusted_hosts

    if console is not None and data_dir is not None:
        raise TypeError("create_app takes a data dir or a Console, not both: a Console has its data dir")
    app = Flask(
        __name__,
        template_folder=_resource_folder("templates"),
        static_folder=_resource_folder("static"),
        static_url_path="/static",
    )
    app.config.update(DEFAULTS)
    if test_config:
        app.config.update(test_config)
    if console is None:
        console = Console.open(data_dir or DataDir(resolve_data_dir()), ConsoleOptions(
            household_confirmation_ttl=float(app.config["CONSOLE_HA_CONFIRMATION_TTL"]),
            household_max_waiting=int(app.config["CONSOLE_HA_MCP_MAX_WAITING"]),
            # Read at every turn, so a test's (or the CLI's) app config wins over the process environment.
            model_environment=lambda: environment_values(app.config),
            settings_timeouts=Timeouts(discovery=float(app.config["CONSOLE_HA_DISCOVERY_TIMEOUT"]),
                                       states=float(app.config["CONSOLE_HA_STATES_TIMEOUT"]),
                                       areas=float(app.config["CONSOLE_HA_AREAS_TIMEOUT"]),
                                       test=float(app.config["CONSOLE_HA_TEST_TIMEOUT"])),
        ))
    # Made at the first start and kept in the data dir; a test's config may set its own.
    session_key = console.secrets.session_key()
    app.config["SECRET_KEY"] = (test_config or {}).get("SECRET_KEY", session_key)
    app.config["TRUSTED_HOSTS"] = trusted_hosts([*app.config["CONSOLE_HA_TRUSTED_HOSTS"], *names_from_env()])

    app.extensions["console_ha"] = console
    app.extensions["console_ha_web"] = WebServices(csrf=CSRFProtect(app), login_throttle=LoginThrottle())
    mcp_endpoint.init_app(app, console.household, console.instances.ids)

    household_language.init_app(app)
    clock.init_app(app)
    register_error_handlers(app)
    init_security(app)
    for blueprint in (auth.bp, settings_api.bp, pages.bp, conversation.bp, api_tokens.bp, mcp_endpoint.bp,
                      confirmation_routes.bp, model_page.bp, plugins_page.bp):
        app.register_blueprint(blueprint)
    auth.init_app(app)
    log.debug("console app created for data dir %s", console.data_dir.root)
    return app
