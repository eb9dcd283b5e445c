"""The model settings page and its API: where the household's language model is, and a test of it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, current_app, flash, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from console_ha.conversation.model import NOT_SET_UP
from console_ha.conversation.model_settings import (
    ENVIRONMENT,
    ModelCheck,
    ModelSetup,
    ModelStore,
    SavedModel,
    check_model,
    resolve,
    settings_to_test,
    typed_api_key,
)
from console_ha.errors import ConfigInvalid, ConsoleHaError, InvalidConfig
from console_ha.web import services, web_services
from console_ha.web.bodies import json_object
from console_ha.web.errors import status_for

log = logging.getLogger(__name__)

bp = Blueprint("model_settings", __name__)

API = "/api/v1/conversation/model"
SAVE_FIELDS = ("base_url", "model", "api_key", "remove_api_key", "reset")
TEST_FIELDS = ("base_url", "model", "api_key")


def model_store() -> ModelStore:
    """The current app's model settings store (stateless: every read is fresh)."""
    return services().model_store


def current_setup() -> ModelSetup:
    """The model settings in force for the current app."""
    console = services()
    return resolve(console.model_environment(), console.model_store)


def _home_assistant_url() -> str:
    # A damaged HA file is the HA page's business; here it only means there is no address to refuse.
    try:
        return services().config_store.load().base_url
    except ConfigInvalid:
        return ""


def _setup_json(setup: ModelSetup) -> dict[str, Any]:
    settings = setup.settings
    return {
        "base_url": setup.saved.base_url,
        "model": setup.saved.model,
        "has_api_key": setup.has_saved_key,
        "environment": list(setup.from_environment),
        "in_force": {
            "base_url": settings.endpoints[0] if settings else None,
            "model": settings.model if settings else None,
            "has_api_key": bool(settings and settings.api_key),
        },
        "ready": setup.ready,
        "problem": setup.problem,
        "config_error": setup.saved_error.to_dict()["error"] if setup.saved_error else None,
    }


def _save(values: Mapping[str, Any]) -> tuple[SavedModel, bool]:
    """Validate and save the page's or the API's values (the key checked before anything is written)."""
    key = typed_api_key(values.get("api_key"))
    # The store moves a damaged file aside only once every check has passed: a refused reset moves nothing.
    return model_store().save(values.get("base_url") or "", values.get("model") or "", api_key=key,
                              remove_api_key=bool(values.get("remove_api_key")),
                              home_assistant_url=_home_assistant_url(), reset=bool(values.get("reset")))


def _run_test(values: Mapping[str, Any]) -> ModelCheck:
    """Test the typed values against the server they name."""
    settings = settings_to_test(model_store(), values.get("base_url"), values.get("model"), values.get("api_key"),
                                home_assistant_url=_home_assistant_url(),
                                timeout=float(current_app.config["CONSOLE_HA_MODEL_TEST_TIMEOUT"]))
    return check_model(settings)


class ModelTestBusy(ConsoleHaError):
    """A model test is already under way; a second would only hold another worker thread."""

    code = "RATE_LIMITED"


def _one_test(values: Mapping[str, Any]) -> ModelCheck:
    lock = web_services().model_test_lock
    if not lock.acquire(blocking=False):
        raise ModelTestBusy("A model test is already running. Wait for its result, then try again.")
    try:
        return _run_test(values)
    finally:
        lock.release()


# --- the API -----------------------------------------------------------------------------------

@bp.get(API)
def get_model() -> Response:
    """The saved settings, which environment variables win, and whether a turn can reach a model."""
    return jsonify(_setup_json(current_setup()))


@bp.post(API)
def save_model() -> Response:
    """Validate and save URL, model and (write-only) key; nothing is written on error."""
    body = json_object()
    unknown = sorted(set(body) - set(SAVE_FIELDS))
    if unknown:
        raise InvalidConfig(f"Unknown setting: {unknown[0]}.", field=unknown[0])
    for flag in ("remove_api_key", "reset"):
        if not isinstance(body.get(flag, False), bool):
            raise InvalidConfig(f"`{flag}` must be true or false.", field=flag)
    for name in ("base_url", "model"):
        if not isinstance(body.get(name, ""), str):
            raise InvalidConfig(f"`{name}` must be text.", field=name)
    _, dropped = _save(body)
    answer = _setup_json(current_setup())
    answer["api_key_removed"] = dropped
    return jsonify(answer)


@bp.post(API + "/test")
def test_model() -> Response:
    """List the server's models and ask for one tool call; `ok`, or the problem in plain words."""
    body = json_object(optional=True)
    unknown = sorted(set(body) - set(TEST_FIELDS))
    if unknown:
        raise InvalidConfig(f"Unknown field: {unknown[0]}.", field=unknown[0])
    return jsonify(_one_test(body).to_json())


# --- the page ----------------------------------------------------------------------------------

@bp.get("/settings/model")
def page() -> str:
    """The model settings page, with the saved values (never the key) and the environment's overrides."""
    return _render(current_setup())


@bp.post("/settings/model")
def page_post() -> ResponseReturnValue:
    """The page's form without JavaScript: Save, Test model, or start again after a damaged file."""
    form = request.form
    action = form.get("action", "save")
    values = {"base_url": form.get("base_url", ""), "model": form.get("model", ""),
              "api_key": form.get("api_key", "")}
    if action == "reset":
        model_store().reset()
        flash("Started again with empty model settings. The damaged file was kept beside the new one.")
        return redirect(url_for(".page"), 303)
    if action == "test":
        try:
            check = _one_test(values)
        except (InvalidConfig, ModelTestBusy) as err:
            return _render(current_setup(), values=values, form_error=err), status_for(err.code)
        return _render(current_setup(), values=values, check=check)
    try:
        _, dropped = _save({**values, "remove_api_key": form.get("remove_api_key") == "on"})
    except InvalidConfig as err:
        return _render(current_setup(), values=values, form_error=err), 400
    flash("Saved. The API key you had saved was for another server, so it was removed." if dropped else "Saved.")
    return redirect(url_for(".page"), 303)


def _render(setup: ModelSetup, *, values: Mapping[str, str] | None = None, form_error: ConsoleHaError | None = None,
            check: ModelCheck | None = None) -> str:
    shown = values or setup.saved.to_json()
    return render_template(
        "model_settings.html",
        setup=setup,
        not_set_up=setup.problem == NOT_SET_UP,
        values={"base_url": shown.get("base_url", ""), "model": shown.get("model", "")},
        environment=[name for name in ENVIRONMENT if name in setup.from_environment],
        form_error=form_error,
        error_field=form_error.detail.get("field") if form_error else None,
        check=check,
        config_path=str(model_store().path),
        api={"config": request.script_root + API, "test": request.script_root + API + "/test"},
        login_url=url_for("auth.login", next=url_for(".page")),
    )
