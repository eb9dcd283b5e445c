"""The model test: list the server's models, ask for one tiny tool call, say in plain words what went wrong."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from console_ha.conversation.model import (
    DEFAULT_TIMEOUT_SECONDS,
    ModelSettings,
    ModelUnavailable,
    OpenAICompatibleModel,
)
from console_ha.errors import InvalidSettingsChange
from console_ha.ha.addresses import origin_of
from console_ha.language import Words
from console_ha.store.model_config import (
    HOME_ASSISTANT_URL,
    MAX_MODEL_CHARS,
    URL_EXAMPLE,
    ModelStore,
    check_base_url,
    check_model_name,
    typed_api_key,
)

log = logging.getLogger(__name__)

# The model test waits at most this long in all for each of its two requests: a server loading a large
# model for the first request can be slow, but a settings page must answer.
TEST_TIMEOUT_SECONDS = 60.0

# The problems the test reports, in the household's words (each `Words`, filled in by `_failed`). One place:
# the API sends them, the page shows them, each in the language of the request that shows it.
PROBLEMS: Mapping[str, Words] = {
    "unreachable": Words("Nothing answered at {url} ({why}). Check the address, and that the model server is "
                         "running and reachable from this Console."),
    "not_openai_compatible": Words("Something answers at {url}, but not as an OpenAI-compatible server ({why}). "
                                   "Check the address: it usually ends in /v1, like {example}."),
    "key_refused": Words("The model server refused the API key (HTTP {status}). Type the key again, or leave it "
                         "empty if the server needs none."),
    "model_not_found": Words("The model server has no model called “{model}”. Choose one of the models it lists."),
    "no_tool_calls": Words("The model answered, but without calling the test tool, so it could not read your "
                           "home. Use a model that supports tool calls; llama.cpp's server must be started with "
                           "--jinja."),
    "refused": Words("The model server refused the test request (HTTP {status})."),
    "no_model": Words("The model server answers and offers {count} models. Choose one under Model, then test "
                      "again."),
}
READY = Words("The model answered with a tool call: it is ready. Press Save to use it.")
# The server offers exactly one model and none was typed: the Console takes it (issue 21), and says so first;
# `outcome` is the test's own finding with it, a sentence of its own.
CHOSEN = Words("The model server offers one model, {model}, so the Console chose it for you. {outcome}")
# What the server's answer was, when it was not what an OpenAI-compatible server says ("{why}" above).
NOT_A_MODEL_LIST = Words("its list of models is not in the OpenAI form")
NOT_A_CHAT_COMPLETION = Words("its answer to a chat request was not a chat completion")
# A finding that asks the household to choose, not a failure: the page shows it without the error's colour.
NOT_AN_ERROR = frozenset({"no_model"})

PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "report_ready",
        "description": "Report that you are ready. Always call this function.",
        "parameters": {"type": "object", "properties": {"ready": {"type": "boolean"}}, "required": ["ready"]},
    },
}
PROBE_MESSAGES = (
    {"role": "system", "content": "You are being tested. Call the function report_ready with ready set to true."},
    {"role": "user", "content": "Are you ready?"},
)
PROBE_MAX_TOKENS = 64
# A server's list can be long (a proxy in front of a cloud); the page offers choices, not a catalogue.
MAX_LISTED_MODELS = 200


@dataclass(frozen=True)
class ModelCheck:
    """What the model test found: ready, or one problem in plain words, and the models the server lists."""

    ok: bool
    problem: str | None
    message: Words
    models: tuple[str, ...] = ()
    # The model the test chose because the server offers only that one ("" when the household typed one).
    chosen: str = ""

    @property
    def is_error(self) -> bool:
        """Whether the page shows the finding as an error (choosing among models is not one)."""
        return not self.ok and self.problem not in NOT_AN_ERROR

    def to_json(self) -> dict[str, Any]:
        """The API's answer."""
        return {"ok": self.ok, "problem": self.problem, "message": self.message, "models": list(self.models),
                "chosen": self.chosen, "is_error": self.is_error}


def _failed(problem: str, models: tuple[str, ...] = (), **words: Any) -> ModelCheck:
    return ModelCheck(False, problem, Words(PROBLEMS[problem].msgid, example=URL_EXAMPLE, **words), models)


def _lists(models: tuple[str, ...], name: str) -> bool:
    # Ollama lists "llama3.2:latest" and answers to "llama3.2" alike.
    return name in models or f"{name}:latest" in models


def check_model(settings: ModelSettings, **adapter_options: Any) -> ModelCheck:
    """List the server's models, then ask for one tiny tool call; say in plain words what went wrong."""
    url = settings.endpoints[0]
    adapter = OpenAICompatibleModel(settings, tools=[PROBE_TOOL], **adapter_options)
    try:
        listed = (name for name in adapter.list_models() if 0 < len(name) <= MAX_MODEL_CHARS and name.isprintable())
        models = tuple(dict.fromkeys(listed))[:MAX_LISTED_MODELS]
    except ModelUnavailable as err:
        return _classify(err, url, settings.model, (), listing=True)
    if not settings.model and len(models) != 1:
        return _failed("no_model", models, count=len(models))
    if not settings.model:
        chosen = replace(settings, model=models[0])
        found = _chat_test(OpenAICompatibleModel(chosen, tools=[PROBE_TOOL], **adapter_options), chosen, models)
        return replace(found, message=Words(CHOSEN.msgid, model=models[0], outcome=found.message), chosen=models[0])
    return _chat_test(adapter, settings, models)


def _chat_test(adapter: OpenAICompatibleModel, settings: ModelSettings, models: tuple[str, ...]) -> ModelCheck:
    """The test's second request: one tiny chat that must come back as a tool call."""
    url = settings.endpoints[0]
    try:
        reply = adapter.complete(PROBE_MESSAGES, tool_choice="required", max_tokens=PROBE_MAX_TOKENS)
    except ModelUnavailable as err:
        return _classify(err, url, settings.model, models, listing=False)
    if not reply.tool_calls:
        return _failed("no_tool_calls", models)
    log.info("model test: %s answered with a tool call", url)
    return ModelCheck(True, None, READY, models)


def _classify(err: ModelUnavailable, url: str, model: str, models: tuple[str, ...], *, listing: bool) -> ModelCheck:
    """One failed request of the test as the problem a household can act on."""
    log.info("model test of %s: %s", url, err.message)
    answer = err.answer.decode("utf-8", "replace").lower()
    if err.kind == "unreachable":
        return _failed("unreachable", models, url=url, why=err.message.rpartition(": ")[2].rstrip("."))
    if err.status in (401, 403):
        return _failed("key_refused", models, status=err.status)
    if listing:
        why = f"HTTP {err.status} for {url}/models" if err.status else NOT_A_MODEL_LIST
        return _failed("not_openai_compatible", (), url=url, why=why)
    if err.kind != "refused":
        return _failed("not_openai_compatible", models, url=url, why=NOT_A_CHAT_COMPLETION)
    if "jinja" in answer or ("tool" in answer and "model" not in answer):
        return _failed("no_tool_calls", models)
    if err.status == 404 or ("model" in answer and models and not _lists(models, model)):
        return _failed("model_not_found", models, model=model)
    return _failed("refused", models, status=err.status)


def settings_to_test(store: ModelStore, base_url: object, model: object, api_key: object, *,
                     home_assistant_origins: frozenset[str] = frozenset(),
                     timeout: float = TEST_TIMEOUT_SECONDS) -> ModelSettings:
    """Settings for a test of typed values; InvalidSettingsChange when the URL or name cannot be used.

    A key left empty means the saved one, and only if it was saved for this URL's origin: like a turn,
    a test never carries a key to a server it was not typed for.
    """
    url = check_base_url(base_url)
    name = check_model_name(model) if model else ""
    if origin_of(url) in home_assistant_origins:
        raise InvalidSettingsChange(HOME_ASSISTANT_URL, field="base_url")
    key = typed_api_key(api_key) or store.api_key(url)
    return ModelSettings((url,), name, key, min(timeout, DEFAULT_TIMEOUT_SECONDS))
