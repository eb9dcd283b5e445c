"""The model settings page and its API: where the household's language model is, and a test of it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Blueprint, Response, current_app, flash, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from console_ha.conversation.model import NOT_SET_UP
from console_ha.conversation.model_check import ModelCheck
from console_ha.conversation.model_service import (
    ModelSaveRequest,
    ModelSettingsService,
    ModelTestBusy,
    ModelTryRequest,
)
from console_ha.conversation.model_setup import ENVIRONMENT, ModelSetup
from console_ha.errors import ConsoleHaError, InvalidSettingsChange
from console_ha.language import Words
from console_ha.web import services
from console_ha.web.bodies import json_object
from console_ha.web.error_responses import status_for
from console_ha.web.request_language import current_language

log = logging.getLogger(__name__)

# The blueprint keeps its name: the access table, the household's words for a refusal and the templates
# name its endpoints (`model_settings.page`).
bp = Blueprint("model_settings", __name__)

API = "/api/v1/conversation/model"


def model_settings() -> ModelSettingsService:
    """The current app's model settings service."""
    return services().model_settings


def current_setup() -> ModelSetup:
    """The model settings in force for the current app."""
    return model_settings().setup()


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


def _test(values: ModelTryRequest) -> ModelCheck:
    # The app's bound, read at each test: a test's (or the CLI's) app config sets it.
    return model_settings().test(values, timeout=float(current_app.config["CONSOLE_HA_MODEL_TEST_TIMEOUT"]))


# --- the API -----------------------------------------------------------------------------------

@bp.get(API)
def get_model() -> Response:
    """The saved settings, which environment variables win, and whether a turn can reach a model."""
    return jsonify(_setup_json(current_setup()))


@bp.post(API)
def save_model() -> Response:
    """Validate and save URL, model and (write-only) key; nothing is written on error."""
    _, dropped = model_settings().save(ModelSaveRequest.from_json(json_object()))
    answer = _setup_json(current_setup())
    answer["api_key_removed"] = dropped
    return jsonify(answer)


@bp.post(API + "/test")
def test_model() -> Response:
    """List the server's models and ask for one tool call; `ok`, or the problem in plain words."""
    return jsonify(_test(ModelTryRequest.from_json(json_object(optional=True))).to_json())


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
        model_settings().reset()
        flash(Words("Started again with empty model settings. The damaged file was kept beside the new one.")
              .in_language(current_language()))
        return redirect(url_for(".page"), 303)
    if action == "test":
        try:
            check = _test(ModelTryRequest(values["base_url"], values["model"], values["api_key"]))
        except (InvalidSettingsChange, ModelTestBusy) as err:
            return _render(current_setup(), values=values, form_error=err), status_for(err.code)
        # The one model the server offers goes in the field, as the script does, ready to save.
        return _render(current_setup(), values={**values, "model": check.chosen or values["model"]}, check=check)
    try:
        _, dropped = model_settings().save(ModelSaveRequest.typed(
            values["base_url"], values["model"], values["api_key"], remove_api_key=form.get("remove_api_key") == "on"))
    except InvalidSettingsChange as err:
        return _render(current_setup(), values=values, form_error=err), 400
    saved = (Words("Saved. The API key you had saved was for another server, so it was removed.") if dropped
             else Words("Saved."))
    flash(saved.in_language(current_language()))
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
        config_path=str(model_settings().config_path),
        api={"config": request.script_root + API, "test": request.script_root + API + "/test"},
    )
