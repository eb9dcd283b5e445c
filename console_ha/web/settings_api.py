"""The Home Assistant settings API: read and save settings, the entity picker, discovery, a connection test."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from typing import Any

import orjson
from flask import Blueprint, Response, current_app, jsonify

from console_ha.capabilities.entity_budget import BUDGET_BYTES, entity_cost
from console_ha.errors import CapabilityError, ConfigInvalid, HABadResponse, HABusy, HANotFound, InvalidConfig
from console_ha.ha.addresses import ENTITY_ID_RE, normalise_base_url
from console_ha.ha.client import UNAVAILABLE_STATES
from console_ha.secret import Secret
from console_ha.settings import service as settings_writer
from console_ha.store.ca_certificate import FIELD as CA_FIELD
from console_ha.store.ca_certificate import CACertificateStore, ca_bundle_path
from console_ha.store.config import HomeAssistantConfig, apply_changes
from console_ha.store.ha_token import TOKEN_FOR_ANOTHER_ORIGIN_REASON, check_token
from console_ha.store.review import FIELD as REVIEWED_FIELD
from console_ha.store.review import ReviewStore, check_reviewed
from console_ha.unknown_keys import first_unknown
from console_ha.web import ConsoleServices, services
from console_ha.web.api_tokens import SessionOnly
from console_ha.web.auth import current_principal
from console_ha.web.bodies import json_object
from console_ha.web.errors import handle_console_error
from console_ha.words import household_error

log = logging.getLogger(__name__)

bp = Blueprint("settings_api", __name__, url_prefix="/api/v1/conversation/home-assistant")


@bp.errorhandler(CapabilityError)
def _in_household_words(err: CapabilityError) -> Response:
    """Home Assistant failures, and a picker not set up yet, answer in the settings page's words."""
    return handle_console_error(household_error(err))


# What a client may send to POST; `ca_bundle` is set by editing the file, not over the API.
SETTINGS_FIELDS = ("enabled", "base_url", "allowlisted_entities", "entity_names")
TEST_FIELDS = ("base_url", "access_token")

# A large household (5,000 entities) sends about 2 MB; this leaves room for chatty attributes.
STATES_MAX_BYTES = 32 * 1024 * 1024
# After the states arrive, wait at most this long for the areas; a slower answer fills the cache for next time.
AREAS_GRACE = 1.0

# Entities that reveal where people are, whether the home is open, or what it looks like inside.
SENSITIVE_DOMAINS = frozenset({"lock", "alarm_control_panel", "camera", "person", "device_tracker", "cover"})
SENSITIVE_BINARY_SENSOR_CLASSES = frozenset(
    {"door", "garage_door", "window", "opening", "lock", "presence", "occupancy"}
)

DISCOVERY_RUNNING = ("The Console is already looking for Home Assistant on your network. Wait a few seconds "
                     "for that search, then look again.")

NOT_HOME_ASSISTANT = (
    "Something answers at this address, but it is not Home Assistant's API. Check the URL: it is usually "
    "like http://homeassistant.local:8123, without a path."
)


# --- reading and saving the settings -------------------------------------------------------------


@bp.get("")
def get_settings() -> Response:
    """The settings as the page shows them; a broken file is reported in `config_error`, not raised."""
    svc = services()
    try:
        stored = svc.config_store.read()
    except ConfigInvalid as err:
        problem = _broken_file(svc, err).to_dict()["error"]
        return jsonify(_settings_json(svc, HomeAssistantConfig(), None, problem))
    return jsonify(_settings_json(svc, stored.config, stored.revision, None))


@bp.post("")
def save_settings() -> Response:
    """Validate everything, then write the configuration file and the token; nothing is written on error."""
    svc = services()
    body = json_object()
    reset = _flag(body, "reset")
    remove_token = _flag(body, "remove_access_token")
    revision = body.pop("revision", None)
    if revision is not None and not isinstance(revision, str):
        raise InvalidConfig("`revision` must be the text GET answered with.", field="revision")
    token = _optional_token(body.pop("access_token", None))
    # The entities the picker showed as this allowlist was chosen; remembered, never allowlisted.
    reviewed = body.pop(REVIEWED_FIELD, None)
    reviewed = check_reviewed(reviewed) if reviewed is not None else None
    if token is not None and remove_token:
        raise InvalidConfig(
            "Send a new access token or remove the stored one, not both.", field="access_token"
        )
    _refuse_unknown(body, SETTINGS_FIELDS)

    if reset:
        # Checked against the defaults first: a reset with a bad field (or a URL the stored token does not
        # belong to, without a new token) writes nothing either.
        after_reset = apply_changes(HomeAssistantConfig(), body)
        settings_writer.refuse_moving_the_token(svc.token_store, after_reset.base_url, configured_url="",
                                                token=token, remove_token=remove_token)
        svc.config_store.reset()
        revision = None
    try:
        stored = settings_writer.save_settings(svc.config_store, svc.token_store, body, token=token,
                                               remove_token=remove_token, expected_revision=revision)
    except ConfigInvalid as err:
        raise _broken_file(svc, err) from err
    changed = sorted(body) + (["access_token"] if token is not None or remove_token else [])
    changed += ["reset"] if reset else []
    if reviewed is not None:
        settings_writer.remember_review(svc.config_store, stored, reviewed)
    log.info("Home Assistant settings saved: %s", ", ".join(changed) or "nothing changed")
    return jsonify(_settings_json(svc, stored.config, stored.revision, None))


def _settings_json(
    svc: ConsoleServices, config: HomeAssistantConfig, revision: str | None, config_error: dict[str, Any] | None
) -> dict[str, Any]:
    names = {e: config.entity_names[e] for e in config.allowlisted_entities if e in config.entity_names}
    record = svc.token_store.read_record()
    return {
        "enabled": config.enabled,
        "base_url": config.base_url,
        "has_access_token": record is not None,
        # The origin the stored token belongs to (never the token): the page asks for a new token when
        # the URL typed has another.
        "access_token_origin": record.bound_origin(config.base_url) if record is not None else None,
        "allowlisted_entities": list(config.allowlisted_entities),
        "entity_names": names,
        "revision": revision,
        "config_error": config_error,
    }


def _broken_file(svc: ConsoleServices, err: ConfigInvalid) -> ConfigInvalid:
    detail = {k: v for k, v in err.detail.items() if v is not None}
    return ConfigInvalid(
        f"The saved Home Assistant settings cannot be read. {err.message} To fix this, start again from "
        f"empty settings (reset): the damaged file is kept beside the new one as "
        f"{svc.config_store.path.name}.broken-<time>, and the access token is kept.",
        action="reset",
        **detail,
    )


def _optional_token(value: object) -> Secret | None:
    # An empty field means "unchanged": the page's token field is always empty when it loads.
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return check_token(value)


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.pop(name, False)
    if not isinstance(value, bool):
        raise InvalidConfig(f"`{name}` must be true or false.", field=name)
    return value


def _refuse_unknown(body: Mapping[str, Any], allowed: Iterable[str]) -> None:
    unknown = first_unknown(body, allowed)
    if unknown is not None:
        raise InvalidConfig(f"Unknown setting: {unknown}.", field=unknown)


# --- the connection behind the settings ----------------------------------------------------------


def _stored_config(svc: ConsoleServices) -> HomeAssistantConfig:
    try:
        return svc.config_store.load()
    except ConfigInvalid as err:
        raise _broken_file(svc, err) from err


def _not_configured(field: str) -> CapabilityError:
    what = "the Home Assistant URL" if field == "base_url" else "an access token"
    return CapabilityError(
        "CAPABILITY_NOT_CONFIGURED", f"Home Assistant is not set up yet: save {what} first.", stage=3, field=field
    )


def _stored_token(svc: ConsoleServices, config: HomeAssistantConfig) -> Secret:
    """The stored token for the configured URL: not configured when there is none for its origin."""
    lookup = svc.token_store.lookup(config.base_url, configured_url=config.base_url)
    if lookup.elsewhere:
        raise CapabilityError("CAPABILITY_NOT_CONFIGURED", lookup.message(), stage=3, field="access_token",
                              reason=TOKEN_FOR_ANOTHER_ORIGIN_REASON)
    if lookup.token is None:
        raise _not_configured("access_token")
    return lookup.token


def _stored_token_for_test(svc: ConsoleServices, base_url: str, config: HomeAssistantConfig) -> Secret:
    """The stored token for a URL being tested; another origin's is refused like a save would be."""
    lookup = svc.token_store.lookup(base_url, configured_url=config.base_url)
    if lookup.elsewhere:
        raise InvalidConfig(lookup.message(), field="access_token", reason=TOKEN_FOR_ANOTHER_ORIGIN_REASON)
    if lookup.token is None:
        raise _not_configured("access_token")
    return lookup.token


def _url_and_token_to_try(svc: ConsoleServices, body: Mapping[str, Any]) -> tuple[str, Secret, HomeAssistantConfig]:
    """The URL and token a test or a preview sends to, by the one rule; the configuration beside them.

    A typed token goes to the URL typed with it (else the saved one, which the page shows); with both
    typed, a damaged file does not stand in the way. Without one, the stored token goes only to the
    origin it was saved for (`TokenStore.lookup`).
    """
    given_url = normalise_base_url(body.get("base_url") or "")
    given_token = _optional_token(body.get("access_token"))
    config = _config_or_default(svc) if given_url and given_token else _stored_config(svc)
    base_url = given_url or config.base_url
    if not base_url:
        raise _not_configured("base_url")
    token = given_token or _stored_token_for_test(svc, base_url, config)
    return base_url, token, config


def _config_or_default(svc: ConsoleServices) -> HomeAssistantConfig:
    """The saved settings (their allowlist and CA bundle), or the defaults when the file is damaged."""
    try:
        return svc.config_store.load()
    except ConfigInvalid:
        return HomeAssistantConfig()


# --- the picker's proxy ---------------------------------------------------------------------------


@bp.get("/entities")
def entities() -> Response:
    """HA's /api/states through the stored URL and token, narrowed to what the picker shows."""
    svc = services()
    config = _stored_config(svc)
    if not config.base_url:
        raise _not_configured("base_url")
    # The one token this request sends, over REST and in the WebSocket's auth message: checked for its origin.
    token = _stored_token(svc, config)
    return _picker_answer(svc, config.base_url, token, config)


@bp.post("/entities/preview")
def entities_preview() -> Response:
    """The picker from a URL and token not yet saved (set-up in one save); nothing is written.

    The token is chosen exactly as Test connection chooses it: the one typed, sent only to the URL typed
    beside it, else the stored one only when it belongs to that URL's origin.
    """
    svc = services()
    body = json_object()
    _refuse_unknown(body, TEST_FIELDS)
    base_url, token, config = _url_and_token_to_try(svc, body)
    return _picker_answer(svc, base_url, token, config)


def _picker_answer(svc: ConsoleServices, base_url: str, token: Secret, config: HomeAssistantConfig) -> Response:
    """The picker's list from `base_url` with `token`; `config` gives the allowlist and the CA bundle."""
    ca_bundle = ca_bundle_path(config, svc.data_dir)
    # The registries come over a separate WebSocket; ask for them while the states are on their way.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ha-areas")
    areas_timeout = float(current_app.config["CONSOLE_HA_AREAS_TIMEOUT"])
    areas_future = pool.submit(svc.areas.get, base_url, token, timeout=areas_timeout, ca_bundle=ca_bundle)
    try:
        # The client is shared between requests (ConsoleServices.ha_client), so it is not closed here.
        client = svc.ha_client(base_url, token, ca_bundle)
        states = client.states(
            timeout=float(current_app.config["CONSOLE_HA_STATES_TIMEOUT"]), max_bytes=STATES_MAX_BYTES
        )
        try:
            areas = areas_future.result(timeout=AREAS_GRACE)
        except FutureTimeout:
            areas = None
            log.info("entity areas not ready within %.1f s; answering without them", AREAS_GRACE)
    finally:
        pool.shutdown(wait=False)

    narrowed = narrow_states(states, config, areas)
    review = ReviewStore(svc.data_dir).read_for(base_url)
    body = {
        "entities": narrowed,
        "missing": missing_entities(narrowed, config),
        # Entities Home Assistant has gained since the allowlist was last saved: only told, never chosen.
        "new_entities": review.new_since(e["entity_id"] for e in narrowed) if review else [],
        "reviewed_at": review.reviewed_at if review else None,
        "areas_known": areas is not None,
        "retrieved_at": datetime.now(UTC).isoformat(timespec="seconds"),
        # What the allowlist may cost in all: the sum of its entities' `cost` must stay within it.
        "budget_bytes": BUDGET_BYTES,
    }
    # orjson, unsorted and compact: this is the one large answer, and speed is its point.
    payload = orjson.dumps(body)
    # The token as it stands inside a JSON string: a `"` or `\` in it (printable ASCII, so accepted)
    # comes out escaped, and a scan for the raw token would miss it.
    if orjson.dumps(token.reveal())[1:-1] in payload:
        # Home Assistant never says its token back; an impostor would (say, as an entity's name), to have
        # the page show it. One scan of the answer, as the connection test does for /api/config.
        log.warning("the entity list from %s holds the token sent; not Home Assistant", base_url)
        raise HABadResponse(NOT_HOME_ASSISTANT, reason="not_home_assistant")
    return Response(payload, mimetype="application/json")


def is_sensitive(domain: str, attributes: Mapping[str, Any]) -> bool:
    """Whether an entity reveals presence, access to the home, or images of it."""
    if domain in SENSITIVE_DOMAINS:
        return True
    return domain == "binary_sensor" and attributes.get("device_class") in SENSITIVE_BINARY_SENSOR_CLASSES


def narrow_states(
    states: Iterable[Mapping[str, Any]], config: HomeAssistantConfig, areas: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    """Each state as the picker's entry, sorted by entity_id."""
    # The hot loop of the picker (thousands of entities): names bound locally, one dict per entity.
    allowlisted = set(config.allowlisted_entities)
    areas = areas or {}
    valid = ENTITY_ID_RE.fullmatch
    entries: dict[str, dict[str, Any]] = {}
    for item in states:
        entity_id = item["entity_id"]
        if entity_id in entries or not valid(entity_id):
            continue
        attributes = item.get("attributes")
        if not isinstance(attributes, dict):
            attributes = {}
        name = attributes.get("friendly_name")
        domain = entity_id[: entity_id.index(".")]
        state = item["state"]
        entries[entity_id] = {
            "entity_id": entity_id,
            "friendly_name": name if name and isinstance(name, str) else config.display_name(entity_id),
            "domain": domain,
            "state": state,
            "unavailable": state in UNAVAILABLE_STATES,
            "allowlisted": entity_id in allowlisted,
            "area": areas.get(entity_id),
            "sensitive": is_sensitive(domain, attributes),
            "cost": entity_cost(entity_id),
        }
    return [entries[entity_id] for entity_id in sorted(entries)]


def missing_entities(entries: Iterable[Mapping[str, Any]], config: HomeAssistantConfig) -> list[dict[str, Any]]:
    """The allowlisted ids Home Assistant no longer reports, so the household can see and drop them."""
    reported = {entry["entity_id"] for entry in entries}
    return [
        {
            "entity_id": entity_id,
            "friendly_name": config.display_name(entity_id),
            "domain": entity_id.partition(".")[0],
            "sensitive": is_sensitive(entity_id.partition(".")[0], {}),
            "cost": entity_cost(entity_id),
        }
        for entity_id in config.allowlisted_entities
        if entity_id not in reported
    ]


# --- discovery and the connection test ------------------------------------------------------------


@bp.get("/discover")
def discover() -> Response:
    """Home Assistant instances a bounded zeroconf browse finds on the configured interfaces."""
    svc = services()
    timeout = float(current_app.config["CONSOLE_HA_DISCOVERY_TIMEOUT"])
    # At most DISCOVERY_REQUESTS hold a server thread (one browsing, one waiting for it, as after a
    # reload); more are refused at once, not queued: queued, each would hold a thread for a whole
    # browse after the other, and /health and the pages would wait behind them (HA_BUSY's reason).
    if not svc.discovery_requests.acquire(blocking=False):
        raise HABusy(DISCOVERY_RUNNING, reason="discovery_running")
    try:
        with svc.discovery_lock:
            instances = svc.discover(timeout=timeout)
    finally:
        svc.discovery_requests.release()
    return jsonify(instances=[instance.to_json() for instance in instances])


@bp.post("/test")
def test_connection() -> Response:
    """Check a URL and token (given, else stored) against HA's /api/config; the precise failure if not."""
    svc = services()
    body = json_object(optional=True)
    _refuse_unknown(body, TEST_FIELDS)
    base_url, token, config = _url_and_token_to_try(svc, body)

    client = svc.ha_client(base_url, token, ca_bundle_path(config, svc.data_dir))
    try:
        answer = client.config(timeout=float(current_app.config["CONSOLE_HA_TEST_TIMEOUT"]))
    except HANotFound as err:
        raise HABadResponse(NOT_HOME_ASSISTANT, reason="not_home_assistant") from err
    except HABadResponse as err:
        if err.detail.get("reason") in ("invalid_json", "wrong_shape"):
            raise HABadResponse(NOT_HOME_ASSISTANT, reason="not_home_assistant") from err
        raise
    version, location = answer.get("version"), answer.get("location_name")
    if not (isinstance(version, str) and version and isinstance(location, str)):
        raise HABadResponse(NOT_HOME_ASSISTANT, reason="not_home_assistant")
    if token.reveal() in version or token.reveal() in location:
        # Home Assistant never says its token back; an impostor would, to have the page show it.
        log.warning("connection test to %s: the answer holds the token sent; not Home Assistant", base_url)
        raise HABadResponse(NOT_HOME_ASSISTANT, reason="not_home_assistant")
    log.info("connection test to %s: Home Assistant %s", base_url, version)
    return jsonify(ok=True, version=version, location_name=location, base_url=base_url)


# --- the household's own CA certificate ---------------------------------------------------------------


@bp.get("/ca-certificate")
def ca_certificate() -> Response:
    """The CA certificate the Console trusts for https, described; none when the system's trust store is used."""
    return jsonify(_ca_json(CACertificateStore(services().data_dir)))


CA_SESSION_ONLY = ("Only the household, logged in to the Console in a browser, can add or remove the CA "
                   "certificate: it decides who may receive the Home Assistant access token over https.")


def _household_session_only() -> None:
    """403 FORBIDDEN for an API token: a program must not choose whom the stored token is sent to."""
    principal = current_principal()
    if principal is None or principal.method != "session":
        raise SessionOnly(CA_SESSION_ONLY)


@bp.post("/ca-certificate")
def store_ca_certificate() -> Response:
    """Check a pasted or uploaded PEM and store it (replacing any), atomically; 400 with why if unusable."""
    _household_session_only()
    body = json_object()
    _refuse_unknown(body, ("pem",))
    pem = body.get("pem")
    if not isinstance(pem, str) or not pem.strip():
        raise InvalidConfig("Paste a CA certificate, or choose its file.", field=CA_FIELD)
    store = CACertificateStore(services().data_dir)
    store.store(pem)
    return jsonify(_ca_json(store))


@bp.delete("/ca-certificate")
def remove_ca_certificate() -> Response:
    """Forget the stored CA certificate: https is then checked against the system's trust store only."""
    _household_session_only()
    store = CACertificateStore(services().data_dir)
    store.remove()
    log.info("the stored CA certificate for Home Assistant was removed")
    return jsonify(_ca_json(store))


def _ca_json(store: CACertificateStore) -> dict[str, Any]:
    path, infos = store.current()
    return {
        "stored": path is not None,
        "managed_by_file": store.managed_by_file(),
        "readable": path is None or bool(infos),
        "certificates": [info.to_json() for info in infos],
    }
