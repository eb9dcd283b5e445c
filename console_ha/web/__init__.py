"""The Console web layer, the only package that imports Flask: `create_app` builds the app."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from flask import Flask, current_app
from flask_wtf.csrf import CSRFProtect

from console_ha.ha.areas import AreaCache
from console_ha.ha.client import HomeAssistantClient
from console_ha.ha.clients import HomeAssistantClients
from console_ha.ha.discovery import discover
from console_ha.secret import Secret
from console_ha.settings.saving import recover
from console_ha.settings.service import SettingsService, Timeouts
from console_ha.store.config import ConfigStore
from console_ha.store.console_credentials import ConsoleSecrets
from console_ha.store.datadir import DataDir, resolve_data_dir
from console_ha.store.ha_token import TokenStore
from console_ha.web.login_throttle import LoginThrottle

log = logging.getLogger(__name__)

_PACKAGE = Path(__file__).resolve().parent.parent
_CHECKOUT = _PACKAGE.parent

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
    "CONSOLE_HA_DISCOVERY_TIMEOUT": 3.0,
    "CONSOLE_HA_STATES_TIMEOUT": 8.0,
    "CONSOLE_HA_AREAS_TIMEOUT": 4.0,
    "CONSOLE_HA_TEST_TIMEOUT": 8.0,
}


def _resource_folder(name: str) -> str:
    # A checkout serves its top-level folder; an installed wheel its copy under console_ha/_<name>.
    checkout = _CHECKOUT / name
    if checkout.is_dir() and (_CHECKOUT / "pyproject.toml").is_file():
        return str(checkout)
    return str(_PACKAGE / f"_{name}")


@dataclass
class ConsoleServices:
    """What the Console's views share: the data dir, its stores, and the boundaries to the outside."""

    data_dir: DataDir
    config_store: ConfigStore
    token_store: TokenStore
    secrets: ConsoleSecrets
    csrf: CSRFProtect
    login_throttle: LoginThrottle
    settings: SettingsService
    ha_client: Callable[[str, Secret, str | None], HomeAssistantClient] = field(
        default_factory=HomeAssistantClients
    )


def services() -> ConsoleServices:
    """The current app's shared services."""
    return current_app.extensions["console_ha"]


def create_app(data_dir: DataDir | None = None, test_config: Mapping[str, Any] | None = None) -> Flask:
    """Build the Console's Flask app for `data_dir` (default: the resolved data dir)."""
    from console_ha.web import api_tokens, auth, confirmations, conversation, mcp, model_settings, settings_api
    from console_ha.web import settings_page as pages
    from console_ha.web.errors import register_error_handlers
    from console_ha.web.security import init_app as init_security
    from console_ha.web.security import names_from_env, trusted_hosts

    data_dir = data_dir or DataDir(resolve_data_dir())
    data_dir.ensure()
    recover(data_dir)  # temp files a killed write left behind; a legacy token bound to its origin
    app = Flask(
        __name__,
        template_folder=_resource_folder("templates"),
        static_folder=_resource_folder("static"),
        static_url_path="/static",
    )
    app.config.update(DEFAULTS)
    console_secrets = ConsoleSecrets(data_dir)
    app.config["SECRET_KEY"] = console_secrets.session_key()
    if test_config:
        app.config.update(test_config)
    app.config["TRUSTED_HOSTS"] = trusted_hosts([*app.config["CONSOLE_HA_TRUSTED_HOSTS"], *names_from_env()])

    csrf = CSRFProtect(app)
    config_store, token_store, ha_clients = ConfigStore(data_dir), TokenStore(data_dir), HomeAssistantClients()
    settings = SettingsService(
        data_dir, config_store=config_store, token_store=token_store, clients=ha_clients, discover=discover,
        areas=AreaCache(),
        timeouts=Timeouts(discovery=float(app.config["CONSOLE_HA_DISCOVERY_TIMEOUT"]),
                          states=float(app.config["CONSOLE_HA_STATES_TIMEOUT"]),
                          areas=float(app.config["CONSOLE_HA_AREAS_TIMEOUT"]),
                          test=float(app.config["CONSOLE_HA_TEST_TIMEOUT"])),
    )
    app.extensions["console_ha"] = ConsoleServices(
        data_dir=data_dir,
        config_store=config_store,
        token_store=token_store,
        secrets=console_secrets,
        csrf=csrf,
        login_throttle=LoginThrottle(),
        settings=settings,
        ha_client=ha_clients,
    )

    register_error_handlers(app)
    init_security(app)
    for blueprint in (auth.bp, settings_api.bp, pages.bp, conversation.bp, api_tokens.bp, mcp.bp, confirmations.bp,
                      model_settings.bp):
        app.register_blueprint(blueprint)
    auth.init_app(app)
    log.debug("console app created for data dir %s", data_dir.root)
    return app
