"""The one exception tree of console-ha: every refusal and failure carries a contract code."""

from __future__ import annotations

from typing import Any


class ConsoleHaError(Exception):
    """Base of every error console-ha raises on purpose; `code` is from the contract."""

    code = "INTERNAL_ERROR"

    def __init__(self, message: str, *, code: str | None = None, **detail: Any) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.detail = detail

    def to_dict(self) -> dict[str, Any]:
        """The contract's error body: {"error": {"code", "message", ...detail}}."""
        return {"error": {"code": self.code, "message": self.message, **self.detail}}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class ConfigInvalid(ConsoleHaError):
    """The configuration file on disk cannot be read as a valid configuration."""

    code = "CONFIG_INVALID"


class InvalidConfig(ConsoleHaError):
    """A requested configuration change is invalid; `field` names the offending field."""

    code = "INVALID_CONFIG"


class CapabilityError(ConsoleHaError):
    """A capability invocation was refused or failed; `stage` is the executor stage (1-6)."""

    stage = 0

    def __init__(self, code: str, message: str, *, stage: int | None = None, **detail: Any) -> None:
        super().__init__(message, code=code, **detail)
        if stage is not None:
            self.stage = stage


class HomeAssistantError(CapabilityError):
    """Home Assistant could not answer a read; raised by the client, stage 5."""

    stage = 5
    default_code = "HA_BAD_RESPONSE"

    def __init__(self, message: str, **detail: Any) -> None:
        super().__init__(self.default_code, message, **detail)


class HAUnreachable(HomeAssistantError, ConnectionError):
    """No connection to Home Assistant could be made."""

    default_code = "HA_UNREACHABLE"


class HATimeout(HomeAssistantError, TimeoutError):
    """Home Assistant did not answer within the capability's bound."""

    default_code = "HA_TIMEOUT"


class HAUnauthorized(HomeAssistantError):
    """Home Assistant refused the access token (401 or 403)."""

    default_code = "HA_UNAUTHORIZED"


class HANotFound(HomeAssistantError):
    """Home Assistant has no such resource (404), e.g. an entity removed since it was allowlisted."""

    default_code = "HA_NOT_FOUND"


class HABadResponse(HomeAssistantError):
    """Home Assistant answered, but not with what a read expects (non-2xx, bad JSON, wrong shape, too large)."""

    default_code = "HA_BAD_RESPONSE"


class HATLSError(HomeAssistantError):
    """The https connection to Home Assistant failed certificate or TLS checks."""

    default_code = "HA_TLS_ERROR"


class HABusy(HomeAssistantError):
    """The Console already has as many calls waiting on this Home Assistant as it allows; nothing was sent."""

    default_code = "HA_BUSY"
