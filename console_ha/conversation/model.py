"""The OpenAI-compatible model adapter: one POST to `{CONSOLE_HA_LLM_URL}/chat/completions` with tools.

This is the only place in console-ha that sends a POST, and it sends it to the household's language
model (llama.cpp server, Ollama, vLLM), never to Home Assistant: it names no Home Assistant path, and
the conversation service refuses a model URL whose origin is the configured Home Assistant's.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import requests
import urllib3

from console_ha.capabilities.registry import REGISTRY
from console_ha.capabilities.spec import Capability, arguments_schema_for
from console_ha.deadline import BodyBroken, BodyTooLarge, Deadline
from console_ha.errors import ModelNotConfigured as ModelNotConfigured
from console_ha.errors import ModelUnavailable as ModelUnavailable
from console_ha.ha.addresses import origin_of
from console_ha.language import Words
from console_ha.secret import Secret
from console_ha.store.datadir import HOME_INSTANCE
from console_ha.store.model_config import EndpointWords, check_endpoint

log = logging.getLogger(__name__)

ENV_URL = "CONSOLE_HA_LLM_URL"
ENV_MODEL = "CONSOLE_HA_LLM_MODEL"
ENV_API_KEY = "CONSOLE_HA_LLM_API_KEY"
# Documented extra: seconds a single model request may take in total (connect, wait, body).
ENV_TIMEOUT = "CONSOLE_HA_LLM_TIMEOUT"

DEFAULT_TIMEOUT_SECONDS = 120.0
CONNECT_TIMEOUT_SECONDS = 5.0
# A chat completion is a few KiB; a bound keeps a misbehaving server from filling memory.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
# What a conversation keeps of one answer: a household reads a reply, not a book, and six rounds of a
# turn times a hundred conversations must stay small in memory.
MAX_REPLY_CHARS = 16 * 1024
MAX_ARGUMENTS_CHARS = 4 * 1024
# Servers' ids are short ("call_" and 24 characters at OpenAI, 46 at vLLM); this leaves room for any of them.
MAX_CALL_ID_CHARS = 256
_CHUNK_BYTES = 64 * 1024
# What a page can say when nothing is set up; one place for the words, shown by API and page alike.
NOT_SET_UP = Words("No language model is set up yet. Set the model server on the model settings page "
                   "(/settings/model), or start the Console with CONSOLE_HA_LLM_URL and CONSOLE_HA_LLM_MODEL.")
# Function names may not contain dots (OpenAI: ^[a-zA-Z0-9_-]{1,64}$), so the dot becomes "__".
_NAME_SEPARATOR = "__"
# The environment's URL refused, as the model page shows it: each sentence names the variable.
_ENV_URL_WORDS = EndpointWords(
    Words("{name} holds a URL that cannot be parsed.", name=ENV_URL),
    Words("{name} must be an http:// or https:// URL with a host.", name=ENV_URL),
    Words("{name} must not hold a user name, password, query or fragment.", name=ENV_URL),
)


# --- capability names <-> function names -------------------------------------------------------

def function_name(capability: str) -> str:
    """The function name the model sees for a capability (`home_assistant__get_history`)."""
    return capability.replace(".", _NAME_SEPARATOR)


def capability_name(function: str) -> str:
    """The capability a function name stands for; unknown names pass through for stage 1 to refuse."""
    for name in REGISTRY:
        if function_name(name) == function:
            return name
    return function


def tool_definitions(registry: Mapping[str, Capability] = REGISTRY,
                     instances: Sequence[str] = (HOME_INSTANCE,)) -> list[dict[str, Any]]:
    """The `tools` array: one function per registered capability, parameters = its arguments schema as a caller
    gets it while `instances` are the Home Assistants there are (`arguments_schema_for`)."""
    return [
        {
            "type": "function",
            "function": {
                "name": function_name(capability.name),
                "description": capability.description,
                "parameters": arguments_schema_for(capability, instances),
            },
        }
        for capability in registry.values()
    ]


# --- what the model answered -------------------------------------------------------------------

@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for, with its name mapped back to a capability name."""

    id: str
    function: str
    capability: str
    # The parsed arguments, or the raw text when it was not valid JSON (`arguments_invalid` set).
    arguments: Any
    arguments_invalid: bool = False


@dataclass(frozen=True)
class ModelReply:
    """One assistant message: text, tool calls, and the message as it is replayed to the model."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    message: dict[str, Any] = field(default_factory=dict)


class ChatModel(Protocol):
    """What the conversation service needs from a model."""

    def complete(self, messages: Sequence[Mapping[str, Any]], *,
                 tools: Sequence[Mapping[str, Any]] | None = None) -> ModelReply:
        """One chat completion over `messages`, offering `tools` (by default every capability)."""
        ...  # pragma: no cover

    def origins(self) -> frozenset[str]:
        """scheme://host:port of every endpoint the model is reached at (empty when not configured)."""
        ...  # pragma: no cover


# --- settings ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelSettings:
    """Where the model is: endpoints tried in order, the model name, an optional key, a timeout."""

    endpoints: tuple[str, ...]
    model: str
    api_key: Secret | None = None
    timeout: float = DEFAULT_TIMEOUT_SECONDS

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> ModelSettings | None:
        """Settings from environment-style keys; None when no URL is set; ModelNotConfigured when invalid."""
        raw_urls = str(values.get(ENV_URL) or "").strip()
        if not raw_urls:
            return None
        endpoints = tuple(check_endpoint(url, words=_ENV_URL_WORDS, error=ModelNotConfigured)
                          for url in raw_urls.split(",") if url.strip())
        model = str(values.get(ENV_MODEL) or "").strip()
        if not endpoints or not model:
            raise ModelNotConfigured(Words("Set {url} and {model} to reach the household's model.",
                                           url=ENV_URL, model=ENV_MODEL))
        key = str(values.get(ENV_API_KEY) or "").strip()
        timeout = values.get(ENV_TIMEOUT) or DEFAULT_TIMEOUT_SECONDS
        try:
            seconds = float(timeout)
        except (TypeError, ValueError):
            raise ModelNotConfigured(Words("{name} must be a number of seconds.", name=ENV_TIMEOUT)) from None
        if not 0 < seconds <= 3600:
            raise ModelNotConfigured(Words("{name} must be between {low} and {high} seconds.",
                                           name=ENV_TIMEOUT, low=0, high=3600))
        return cls(endpoints, model, Secret(key) if key else None, seconds)

    @classmethod
    def from_env(cls) -> ModelSettings | None:
        """Settings from the process environment."""
        return cls.from_mapping(os.environ)

    def origins(self) -> frozenset[str]:
        """scheme://host:port of every endpoint, to compare with Home Assistant's."""
        return frozenset(origin_of(url) for url in self.endpoints)


# --- the adapter -------------------------------------------------------------------------------

class OpenAICompatibleModel:
    """Sends one chat completion at a time, trying each endpoint in turn when one is down."""

    def __init__(self, settings: ModelSettings | None, *, tools: Sequence[Mapping[str, Any]] | None = None,
                 session: requests.Session | None = None, problem: str | None = None,
                 source: Callable[[], ModelSettings | None] | None = None) -> None:
        self.settings = settings
        self._problem = problem
        # When given, asked for the settings at every request, so a change on the settings page (or
        # in the environment) applies from the next turn on without a restart.
        self._source = source
        self._tools = list(tools) if tools is not None else tool_definitions()
        self._session = session or requests.Session()
        # The environment's proxies must not carry the conversation off the household's network.
        self._session.trust_env = False

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], **kwargs: Any) -> OpenAICompatibleModel:
        """An adapter for environment-style settings; invalid ones give 503s that say why, not a crash."""
        try:
            return cls(ModelSettings.from_mapping(values), **kwargs)
        except ModelNotConfigured as err:
            log.warning("the language model settings are invalid: %s", err.message)
            return cls(None, problem=err.message, **kwargs)

    @classmethod
    def from_source(cls, source: Callable[[], ModelSettings | None], **kwargs: Any) -> OpenAICompatibleModel:
        """An adapter that reads its settings afresh from `source` for every request."""
        return cls(None, source=source, **kwargs)

    def current_settings(self) -> ModelSettings:
        """The settings in force now; ModelNotConfigured when there are none or they are invalid."""
        settings = self._source() if self._source is not None else self.settings
        if settings is None:
            raise ModelNotConfigured(self._problem or NOT_SET_UP)
        return settings

    def origins(self) -> frozenset[str]:
        """scheme://host:port of every configured endpoint."""
        try:
            return self.current_settings().origins()
        except ModelNotConfigured:
            return frozenset()

    def complete(self, messages: Sequence[Mapping[str, Any]], *, tool_choice: str | Mapping[str, Any] | None = None,
                 max_tokens: int | None = None, tools: Sequence[Mapping[str, Any]] | None = None) -> ModelReply:
        """One chat completion offering `tools` (else the adapter's); ModelNotConfigured or ModelUnavailable when
        there is no usable answer."""
        settings = self.current_settings()
        offered = self._tools if tools is None else list(tools)
        body: dict[str, Any] = {"model": settings.model, "messages": list(messages), "tools": offered}
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        failure = ModelUnavailable(Words("The language model could not be reached: no endpoint."),
                                   kind="unreachable")
        for index, endpoint in enumerate(settings.endpoints, start=1):
            try:
                status, payload = self._post(endpoint, body, settings)
            except _Retryable as err:
                failure = ModelUnavailable(Words("The language model could not be reached: {why}.", why=str(err)),
                                           kind="unreachable")
                log.warning("model endpoint %d of %d failed: %s", index, len(settings.endpoints), err)
                continue
            if status >= 500:
                failure = ModelUnavailable(
                    Words("The language model could not be reached: it answered HTTP {status}.", status=str(status)),
                                           kind="refused", status=status, answer=payload)
                log.warning("model endpoint %d of %d answered HTTP %d", index, len(settings.endpoints), status)
                continue
            if not 200 <= status < 300:
                log.warning("model endpoint %d answered HTTP %d", index, status)
                raise ModelUnavailable(
                    Words("The language model refused the request (HTTP {status}).", status=str(status)),
                                       kind="refused", status=status, answer=payload, model_status=status)
            return parse_reply(payload)
        raise failure

    def list_models(self) -> list[str]:
        """The model ids `GET {url}/models` lists at the first endpoint; ModelUnavailable when it cannot."""
        settings = self.current_settings()
        endpoint = settings.endpoints[0]
        try:
            status, payload = self._exchange(lambda timeout: self._session.get(
                f"{endpoint}/models", headers=_headers(settings), timeout=timeout, stream=True,
                allow_redirects=False), settings)
        except _Retryable as err:
            raise ModelUnavailable(Words("The language model could not be reached: {why}.", why=str(err)),
                                   kind="unreachable") from None
        if not 200 <= status < 300:
            raise ModelUnavailable(Words("The model server answered HTTP {status} for its list of models.",
                                         status=str(status)),
                                   kind="refused", status=status, answer=payload)
        try:
            entries = json.loads(payload)["data"]
            ids = [entry["id"] for entry in entries]
        except (ValueError, KeyError, TypeError, RecursionError):
            raise ModelUnavailable(Words("The model server's list of models was not an OpenAI model list."),
                                   answer=payload) from None
        if not all(isinstance(i, str) for i in ids):
            raise ModelUnavailable(Words("The model server's list of models was not an OpenAI model list."),
                                   answer=payload)
        return ids

    def _post(self, endpoint: str, body: Mapping[str, Any], settings: ModelSettings) -> tuple[int, bytes]:
        """POST the body; the status and at most MAX_RESPONSE_BYTES of answer, within one total deadline."""
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", **_headers(settings)}
        return self._exchange(lambda timeout: self._session.post(
            f"{endpoint}/chat/completions", data=data, headers=headers, timeout=timeout, stream=True,
            allow_redirects=False), settings)

    def _exchange(self, send: Callable[[tuple[float, float]], requests.Response],
                  settings: ModelSettings) -> tuple[int, bytes]:
        """`send` a request; its status and at most MAX_RESPONSE_BYTES of answer, within one total deadline."""
        late = f"no complete answer within {settings.timeout:g} s"
        deadline = Deadline(settings.timeout, expired=lambda: _Retryable(late))
        timeout = (min(CONNECT_TIMEOUT_SECONDS, settings.timeout), settings.timeout)
        try:
            with deadline.call(lambda: send(timeout), requests.Response.close) as response, deadline.watch(response):
                # Each read waits at most what is left of the budget, and brings what one read brings: a model
                # trickling its answer is cut off at the deadline (_Retryable, `late`).
                body = b"".join(deadline.body(response, max_bytes=MAX_RESPONSE_BYTES, chunk_bytes=_CHUNK_BYTES))
                return response.status_code, body
        except BodyTooLarge:
            raise ModelUnavailable(Words("The language model's answer was too large."), kind="too_large") from None
        except BodyBroken as err:
            raise _Retryable(f"connection failed ({err.cause})") from None
        except (requests.Timeout, urllib3.exceptions.TimeoutError, TimeoutError):
            raise _Retryable(f"no answer within {settings.timeout:g} s") from None
        except (urllib3.exceptions.HTTPError, OSError) as err:
            if deadline.passed():  # the watchdog shut the socket: the deadline, not the network
                raise _Retryable(late) from None
            raise _Retryable(f"connection failed ({type(err).__name__})") from None
        except requests.RequestException as err:
            # The exception text may hold the URL; the URL never holds credentials (checked above).
            raise _Retryable(f"connection failed ({type(err).__name__})") from None


def _headers(settings: ModelSettings) -> dict[str, str]:
    """Accept JSON, and the API key as a bearer token when there is one."""
    headers = {"Accept": "application/json"}
    if settings.api_key is not None:
        headers["Authorization"] = f"Bearer {settings.api_key.reveal()}"
    return headers


class _Retryable(Exception):
    """A transport failure after which the next endpoint is worth trying."""


# --- parsing -----------------------------------------------------------------------------------

def parse_reply(raw: bytes) -> ModelReply:
    """The first choice's assistant message; ModelUnavailable when the answer is not a chat completion."""
    try:
        payload = json.loads(raw)
        message = payload["choices"][0]["message"]
        # "\ud800" is valid JSON but no text: kept, it would break every later request of the conversation.
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        raise ModelUnavailable(Words("The language model's answer was not a chat completion.")) from None
    if not isinstance(message, dict):
        raise ModelUnavailable(Words("The language model's answer was not a chat completion."))
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise ModelUnavailable(Words("The language model's answer had no usable text."))
    if content is not None and len(content) > MAX_REPLY_CHARS:
        content = content[:MAX_REPLY_CHARS] + " …"
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ModelUnavailable(Words("The language model's tool calls were malformed."))
    calls = tuple(_parse_tool_call(index, item) for index, item in enumerate(raw_calls))
    # Replayed content is always text: llama-cpp-python's server refuses an assistant message whose content is
    # null (found by tests/real_model), and "" means the same to every server.
    replay: dict[str, Any] = {"role": "assistant", "content": content if content is not None else ""}
    if calls:
        replay["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                # Servers that re-parse the history (llama.cpp does) reject invalid JSON, so an
                # unparsable call is replayed as "{}"; its tool result explains the error.
                "function": {
                    "name": call.function,
                    "arguments": "{}" if call.arguments_invalid else json.dumps(call.arguments),
                },
            }
            for call in calls
        ]
    return ModelReply(content=content, tool_calls=calls, message=replay)


def _parse_tool_call(index: int, item: object) -> ToolCall:
    """One tool call; invalid JSON arguments are kept as text and flagged, not raised."""
    if not isinstance(item, dict) or not isinstance(item.get("function"), dict):
        raise ModelUnavailable(Words("The language model's tool calls were malformed."))
    function = item["function"]
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ModelUnavailable(Words("The language model called a tool without a name."))
    call_id = item.get("id")
    if not isinstance(call_id, str) or not call_id or len(call_id) > MAX_CALL_ID_CHARS:
        # Some servers omit ids; the tool result still needs one to answer. An id past the bound would be
        # kept and replayed twice a round (call and result), so it is replaced the same way.
        call_id = f"call_{index}"
    arguments = function.get("arguments")
    invalid = False
    if isinstance(arguments, str) and len(arguments) > MAX_ARGUMENTS_CHARS:
        arguments, invalid = "{}", True  # no capability takes arguments anywhere near this long
    elif isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            invalid = True
    elif arguments is None:
        arguments = {}
    elif not _fits(arguments):
        # Sent as an object (some Ollama versions), the arguments get the same bound as text.
        arguments, invalid = "{}", True
    return ToolCall(id=call_id, function=name[:64], capability=capability_name(name), arguments=arguments,
                    arguments_invalid=invalid)


def _fits(arguments: object) -> bool:
    """Whether arguments sent as a JSON value are at most MAX_ARGUMENTS_CHARS when written as text."""
    try:
        return len(json.dumps(arguments, ensure_ascii=False)) <= MAX_ARGUMENTS_CHARS
    except (ValueError, TypeError, RecursionError):
        return False
