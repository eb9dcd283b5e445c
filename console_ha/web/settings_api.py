"""The Home Assistant settings API: thin views over the settings service (`console_ha.settings.settings_service`).

Every route here is the household's alone (web/access.py): a program's API token gets 403 FORBIDDEN,
so it can neither see the picker's entities nor choose where the stored token is sent.
"""

from __future__ import annotations

import logging

from flask import Blueprint, Response, jsonify, request

from console_ha.errors import CapabilityError
from console_ha.settings.settings_service import INSTANCE_FIELD, SaveRequest, SettingsService, TryRequest
from console_ha.store.config import refuse_unknown
from console_ha.store.datadir import HOME_INSTANCE
from console_ha.web import services
from console_ha.web.bodies import json_object
from console_ha.web.error_responses import handle_console_error
from console_ha.words import household_error

log = logging.getLogger(__name__)

bp = Blueprint("settings_api", __name__, url_prefix="/api/v1/conversation/home-assistant")


@bp.errorhandler(CapabilityError)
def _in_household_words(err: CapabilityError) -> Response:
    """Home Assistant failures, and a picker not set up yet, answer in the settings page's words."""
    # What the client saw (a status, a number of seconds) stays in the log for whoever looks into it.
    log.info("%s %s: %s", request.path, err.code, err.message)
    return handle_console_error(household_error(err))


def _settings(*, creating: bool = False) -> SettingsService:
    """The settings service for the instance the request names (`?instance=`, default `home`)."""
    return services().settings.at(request.args.get(INSTANCE_FIELD, HOME_INSTANCE), creating=creating)


# --- reading and saving the settings -------------------------------------------------------------


@bp.get("")
def get_settings() -> Response:
    """The settings as the page shows them; a broken file is reported in `config_error`, not raised."""
    return jsonify(_settings().read().to_json())


@bp.post("")
def save_settings() -> Response:
    """Validate everything, then write the configuration file and the token; nothing is written on error."""
    save = SaveRequest.from_json(json_object())
    return jsonify(_settings(creating=True).save(save).to_json())


@bp.get("/instances")
def instances() -> Response:
    """Every Home Assistant this Console reads: id, name, URL, switch, whether it has a token, allowlist."""
    return jsonify(instances=services().settings.instance_list())


@bp.delete("")
def remove_instance() -> Response:
    """Remove the instance `?instance=` names (never `home`), its token and CA certificate with it; those left."""
    return jsonify(instances=_settings().remove_instance())


# --- the picker's proxy ---------------------------------------------------------------------------


@bp.get("/entities")
def entities() -> Response:
    """HA's /api/states through the stored URL and token, narrowed to what the picker shows."""
    return Response(_settings().entities(), mimetype="application/json")


@bp.post("/entities/preview")
def entities_preview() -> Response:
    """The picker from a URL and token not yet saved (set-up in one save); nothing is written."""
    attempt = TryRequest.from_json(json_object())
    return Response(_settings().preview_entities(attempt), mimetype="application/json")


# --- discovery and the connection test ------------------------------------------------------------


@bp.get("/discover")
def discover() -> Response:
    """Home Assistant instances a bounded zeroconf browse finds on the configured interfaces."""
    instances = _settings().discover_instances()
    return jsonify(instances=[instance.to_json() for instance in instances])


@bp.post("/test")
def test_connection() -> Response:
    """Check a URL and token (given, else stored) against HA's /api/config; the precise failure if not."""
    attempt = TryRequest.from_json(json_object(optional=True))
    return jsonify(_settings().test_connection(attempt).to_json())


# --- the household's own CA certificate ---------------------------------------------------------------


@bp.get("/ca-certificate")
def ca_certificate() -> Response:
    """The CA certificate the Console trusts for https, described; none when the system's trust store is used."""
    return jsonify(_settings().ca_certificate())


@bp.post("/ca-certificate")
def store_ca_certificate() -> Response:
    """Check a pasted or uploaded PEM and store it (replacing any), atomically; 400 with why if unusable."""
    body = json_object()
    refuse_unknown(body, ("pem",))
    return jsonify(_settings().store_ca_certificate(body.get("pem")))


@bp.delete("/ca-certificate")
def remove_ca_certificate() -> Response:
    """Forget the stored CA certificate: https is then checked against the system's trust store only."""
    return jsonify(_settings().remove_ca_certificate())
