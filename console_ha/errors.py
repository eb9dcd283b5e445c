"""The one exception tree of console-ha: each class owns its contract code and its HTTP status.

As python-supervisor-client's `@error_key` does, `@error_code` gives a class its code; a raise names the
class, never a string. `error_body` is the one builder of the contract's error body, for the web layer,
the model's tool messages and MCP's tool errors alike. Which executor stage an error ended at is the
executor's record (`CapabilityError.stage`, written by `capabilities.executor`), not the class's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Self, TypeVar

E = TypeVar("E", bound="type[ConsoleHaError]")

_OWNERS: dict[str, type[ConsoleHaError]] = {}


def error_code(code: str, http_status: int | None) -> Callable[[E], E]:
    """Class decorator: the class owns `code` (one class per code) and answers HTTP with `http_status`.

    `http_status` None: a code that never crosses HTTP (the stdio forwarder's own).
    """

    def own(cls: E) -> E:
        if code in _OWNERS:
            raise TypeError(f"{code} is owned by {_OWNERS[code].__name__} already")
        cls.code = code
        cls.http_status = http_status
        _OWNERS[code] = cls
        return cls

    return own


def error_classes() -> Mapping[str, type[ConsoleHaError]]:
    """Every code and the class that owns it."""
    return MappingProxyType(_OWNERS)


def http_statuses() -> Mapping[str, int]:
    """Every code that crosses HTTP, with its status: what `web.errors.STATUS` is built from."""
    return MappingProxyType({code: cls.http_status for code, cls in _OWNERS.items() if cls.http_status is not None})


def error_body(err: ConsoleHaError) -> dict[str, Any]:
    """The contract's error body: {"error": {"code", "message", ...detail}}, detail fields kept."""
    return {"error": {"code": err.code, "message": err.message, **err.detail}}


class ConsoleHaError(Exception):
    """Base of every error console-ha raises on purpose; `code` and `http_status` come from its class."""

    code = "INTERNAL_ERROR"
    http_status: int | None = 500

    def __init__(self, message: str, *, code: str | None = None, **detail: Any) -> None:
        # `code=` names a code no class owns; console_ha's raise sites name a class (tests still use it).
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.detail = detail

    def to_dict(self) -> dict[str, Any]:
        """The contract's error body (`error_body`)."""
        return error_body(self)

    def reworded(self, message: str, *, detail: Mapping[str, Any] | None = None) -> Self:
        """The same error (class, code, executor stage) with another sentence; `detail` replaces the detail."""
        # Not copy.copy: it rebuilds the error through its class's __init__, which a subclass may shape
        # differently (ConfirmationInvalid takes a reason first). The instance's own fields are copied instead.
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.args = (message,)
        other.message = message
        other.detail = dict(self.detail if detail is None else detail)
        return other

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


# --- requests and sessions ----------------------------------------------------------------------


@error_code("INVALID_REQUEST", 400)
class InvalidRequest(ConsoleHaError):
    """The request itself is malformed: not JSON, not an object, a value of the wrong type."""


@error_code("UNTRUSTED_HOST", 400)
class UntrustedHost(ConsoleHaError):
    """The request names a Host the Console does not answer to."""


@error_code("CSRF_INVALID", 400)
class CsrfInvalid(ConsoleHaError):
    """A browser's change came without the page's security token, or with an old one."""


@error_code("UNAUTHENTICATED", 401)
class Unauthenticated(ConsoleHaError):
    """The request carries neither a logged-in session nor a valid API token."""


@error_code("FORBIDDEN", 403)
class Forbidden(ConsoleHaError):
    """Known, but not allowed to do this: a program where only the household may, or a foreign origin."""


@error_code("NOT_FOUND", 404)
class NotFound(ConsoleHaError):
    """There is nothing at this address."""


@error_code("METHOD_NOT_ALLOWED", 405)
class MethodNotAllowed(ConsoleHaError):
    """The address does not take that HTTP method."""


@error_code("PAYLOAD_TOO_LARGE", 413)
class PayloadTooLarge(ConsoleHaError):
    """The request body is over the Console's bound."""


@error_code("UNSUPPORTED_MEDIA_TYPE", 415)
class UnsupportedMediaType(ConsoleHaError):
    """The body is not JSON where JSON is required."""


@error_code("RATE_LIMITED", 429)
class RateLimited(ConsoleHaError):
    """Too many attempts, or one more of something already under way."""


@error_code("INTERNAL_ERROR", 500)
class InternalError(ConsoleHaError):
    """A bug: said to have happened, nothing of it shown."""


# --- settings -----------------------------------------------------------------------------------


@error_code("INVALID_CONFIG", 400)
class InvalidSettingsChange(ConsoleHaError):
    """A requested change of settings (or a value typed to be tried) is refused; `field` names the field."""


@error_code("CONFIG_STALE", 409)
class SettingsChangedElsewhere(InvalidSettingsChange):
    """The settings file changed since the caller read it; nothing was saved."""


@error_code("CONFIG_INVALID", 409)
class SettingsFileDamaged(ConsoleHaError):
    """A settings file on disk cannot be read as valid settings."""


@error_code("PASSWORD_ALREADY_SET", 409)
class PasswordAlreadySet(ConsoleHaError):
    """The first-run password was asked for, but a password exists already."""


# Old names, kept because tests written before issue 17 import them; console_ha itself uses the new ones.
ConfigInvalid = SettingsFileDamaged
InvalidConfig = InvalidSettingsChange


# --- capabilities -------------------------------------------------------------------------------


class CapabilityError(ConsoleHaError):
    """A capability invocation was refused or failed; `stage` is where the executor recorded it ended (1-6)."""

    stage: int | None = None

    # The household's plugin whose answer ended the call (issue 30), for its audit line: a name, never a value.
    plugin: str | None = None

    def __init__(self, message: str, *, stage: int | None = None, **detail: Any) -> None:
        super().__init__(message, **detail)
        if stage is not None:
            self.stage = stage


@error_code("UNKNOWN_CAPABILITY", 404)
class UnknownCapability(CapabilityError):
    """No capability has that name."""


@error_code("INVALID_ARGUMENTS", 400)
class InvalidArguments(CapabilityError):
    """The arguments do not match the capability's schema."""


@error_code("CAPABILITY_DISABLED", 409)
class CapabilityDisabled(CapabilityError):
    """The household has not turned on Home Assistant reading."""


@error_code("CAPABILITY_NOT_CONFIGURED", 409)
class CapabilityNotConfigured(CapabilityError):
    """Home Assistant reading is on, but the URL, the token or the allowlist is missing."""


@error_code("ENTITY_NOT_ALLOWLISTED", 403)
class EntityNotAllowlisted(CapabilityError):
    """An entity the arguments name is not on the household's allowlist."""


@error_code("INVOCATION_LIMIT_EXCEEDED", 429)
class InvocationLimitExceeded(CapabilityError):
    """The capability was used as often as its bounds allow (a turn's, or the waiting reads')."""


@error_code("REFUSED_BY_PLUGIN", 403)
class RefusedByPlugin(CapabilityError):
    """A household's plugin refused the read in its `before_toolcall` hook (stage 3, before any card)."""

    def __init__(self, message: str, *, plugin: str) -> None:
        super().__init__(message)
        self.plugin = plugin


@error_code("CONFIRMATION_DENIED", 409)
class ConfirmationDenied(CapabilityError):
    """The household said no."""


class ConfirmationReason(StrEnum):
    """Why a confirmation cannot be answered: the error body's `reason`, spelled as the contract spells it."""

    UNKNOWN = "unknown"  # never issued, answered already, withdrawn, or swept
    EXPIRED = "expired"  # its time ran out (or, allowed, its program did not come back for it in time)
    FOREIGN = "foreign"  # it belongs to another conversation
    SETTINGS_CHANGED = "settings_changed"  # allowed, but what its card showed is no longer so: used up


@error_code("CONFIRMATION_INVALID", 409)
class ConfirmationInvalid(CapabilityError):
    """The confirmation is unknown, used, expired, of another conversation, or its settings changed.

    `reason` says which (`ConfirmationReason`); None where none applies (a program that hung up).
    """

    def __init__(self, reason: ConfirmationReason | None, message: str) -> None:
        if reason is None:
            super().__init__(message)
        else:
            super().__init__(message, reason=reason)


@error_code("RESULT_TOO_LARGE", 502)
class ResultTooLarge(CapabilityError):
    """The shaped result is over the capability's byte bound."""


class CapabilityFailed(CapabilityError, InternalError):
    """A bug inside an invocation (INTERNAL_ERROR), caught where capabilities are caught."""


class SettingsDamagedForCapability(CapabilityError, SettingsFileDamaged):
    """The Home Assistant settings file is damaged, so no capability can run (CONFIG_INVALID)."""


class TokenRevoked(CapabilityError, Unauthenticated):
    """The asking program's API token was revoked while its read waited (UNAUTHENTICATED)."""


# --- Home Assistant -----------------------------------------------------------------------------


class HomeAssistantError(CapabilityError):
    """Home Assistant could not answer a read: the base of the HA_* errors, each code owned by a subclass.

    Never raised itself (it owns no code of its own); caught to handle any of them as one.
    """

    def __init__(self, message: str, **detail: Any) -> None:
        super().__init__(message, **detail)


@error_code("HA_UNREACHABLE", 502)
class HAUnreachable(HomeAssistantError, ConnectionError):
    """No connection to Home Assistant could be made."""


@error_code("HA_TIMEOUT", 502)
class HATimeout(HomeAssistantError, TimeoutError):
    """Home Assistant did not answer within the capability's bound."""


@error_code("HA_UNAUTHORIZED", 502)
class HAUnauthorized(HomeAssistantError):
    """Home Assistant refused the access token (401 or 403)."""


@error_code("HA_NOT_FOUND", 502)
class HANotFound(HomeAssistantError):
    """Home Assistant has no such resource (404), e.g. an entity removed since it was allowlisted."""


@error_code("HA_BAD_RESPONSE", 502)
class HABadResponse(HomeAssistantError):
    """Home Assistant answered, but not with what a read expects (non-2xx, bad JSON, wrong shape, too large)."""


@error_code("HA_TLS_ERROR", 502)
class HATLSError(HomeAssistantError):
    """The https connection to Home Assistant failed certificate or TLS checks."""


# Home Assistant answered, and the answer is that it keeps no long-term statistics for the entity (only
# entities with a state class have them): the model can ask get_history instead. 502 and stage 5, as
# HA_NOT_FOUND (an entity Home Assistant lacks): what Home Assistant has is the subject of every HA_* code.
@error_code("HA_NO_STATISTICS", 502)
class HANoStatistics(HomeAssistantError):
    """The entity keeps no long-term statistics in Home Assistant (get_statistics)."""


# Not a failure of Home Assistant's answer but the Console declining to queue one more call behind those
# still waiting on it: 503, "try again shortly", like any overloaded service.
@error_code("HA_BUSY", 503)
class HABusy(HomeAssistantError):
    """The Console already has as many calls waiting on this Home Assistant as it allows; nothing was sent."""


# --- the language model -------------------------------------------------------------------------


@error_code("MODEL_NOT_CONFIGURED", 503)
class ModelNotConfigured(ConsoleHaError):
    """No model URL (or model name) is set."""


# How much of a model server's answer a ModelUnavailable keeps, for the settings page's model test.
ANSWER_HINT_BYTES = 2048


@error_code("MODEL_UNAVAILABLE", 502)
class ModelUnavailable(ConsoleHaError):
    """The model is unreachable, timed out, answered non-2xx or answered something malformed.

    `kind`, `status` and the start of the server's `answer` are for the settings page's model test, which
    turns them into plain words; they are attributes, not detail, so no API error body carries them.
    """

    def __init__(self, message: str, *, kind: str = "malformed", status: int | None = None,
                 answer: bytes = b"", **detail: Any) -> None:
        super().__init__(message, **detail)
        self.kind = kind  # "unreachable", "refused" (an HTTP error status), "malformed" or "too_large"
        self.status = status
        self.answer = answer[:ANSWER_HINT_BYTES]


# --- the stdio forwarder ------------------------------------------------------------------------


@error_code("MCP_FORWARD_FAILED", None)
class McpForwardError(ConsoleHaError):
    """The MCP stdio forwarder cannot start: no token, or no Console at the URL (never an HTTP answer)."""
