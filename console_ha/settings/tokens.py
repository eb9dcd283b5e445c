"""Which access token may go where, for every settings path: the rules of issue 8, in one place.

A typed token goes only to the URL typed with it (or saved beside it). The stored token goes only to the
origin it was saved for (`TokenStore.lookup`): a save that would leave it beside a URL of another origin
is refused, and so is a test, a preview or a picker load that would send it there.
"""

from __future__ import annotations

from dataclasses import dataclass

from console_ha.errors import CapabilityNotConfigured, InvalidSettingsChange
from console_ha.ha.addresses import origin_of
from console_ha.language import Words
from console_ha.secret import Secret
from console_ha.store.ha_token import (
    TOKEN_FOR_ANOTHER_ORIGIN_REASON,
    StoredToken,
    TokenLookup,
    TokenStore,
    check_token,
    look_up,
)

TOKEN_NEEDS_A_URL = Words("Enter the Home Assistant URL this access token belongs to.")


@dataclass(frozen=True)
class TokenStatus:
    """What may be said about the stored token (never the token): whether there is one, and its origin."""

    stored: bool
    origin: str | None  # the origin it belongs to; None when none is stored or it has none (legacy, no URL)

    @classmethod
    def of(cls, token_store: TokenStore, configured_url: str) -> TokenStatus:
        """The stored token's status beside the configured URL (a legacy token belongs to that URL)."""
        return cls.of_record(token_store.read_record(), configured_url)

    @classmethod
    def of_record(cls, record: StoredToken | None, configured_url: str) -> TokenStatus:
        """The same status, from a record already in hand (a save knows the record it wrote)."""
        if record is None:
            return cls(False, None)
        return cls(True, record.bound_origin(configured_url))

    def asked_again_for(self, typed_url: str) -> bool:
        """Whether saving `typed_url` needs the token entered again: its origin is not the stored token's."""
        origin = typed_origin(typed_url)
        return self.stored and bool(origin) and origin != (self.origin or "")


def typed_origin(url: str) -> str:
    """The origin of a URL as typed; "" while it is empty or not yet a URL (its own error says why)."""
    try:
        return origin_of(url) if url else ""
    except ValueError:
        return ""


def optional_token(value: object) -> Secret | None:
    """A token the household typed, checked (`check_token`); None for an empty field, which means "unchanged"."""
    # The page's token field is always empty when it loads.
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return check_token(value)


def not_configured(field: str) -> CapabilityNotConfigured:
    """409 CAPABILITY_NOT_CONFIGURED: the settings lack the URL (`base_url`) or a token (`access_token`)."""
    words = (Words("Home Assistant is not set up yet: save the Home Assistant URL first.") if field == "base_url"
             else Words("Home Assistant is not set up yet: save an access token first."))
    return CapabilityNotConfigured(words, field=field)


def not_entered(field: str) -> CapabilityNotConfigured:
    """409 CAPABILITY_NOT_CONFIGURED for a URL and token being tried: what to type, since nothing need be saved."""
    # A test before anything is saved uses what is typed: "save ... first" would contradict the page's one Save.
    words = (Words("Enter the Home Assistant URL above, then press Test connection.") if field == "base_url"
             else Words("Paste an access token from Home Assistant above, then press Test connection."))
    return CapabilityNotConfigured(words, field=field)


def _for_another_origin(lookup: TokenLookup) -> InvalidSettingsChange:
    return InvalidSettingsChange(lookup.message(), field="access_token", reason=TOKEN_FOR_ANOTHER_ORIGIN_REASON)


def refuse_moving_the_token(record: StoredToken | None, new_url: str, *, configured_url: str,
                            token: Secret | None, remove_token: bool) -> None:
    """400 INVALID_CONFIG when a save would leave the stored token (`record`) beside a URL of another origin.

    A new token is bound to the URL saved with it, so it needs a URL; a removed one goes nowhere.
    """
    if token is not None:
        if not new_url:
            raise InvalidSettingsChange(TOKEN_NEEDS_A_URL, field="base_url")
        return
    if remove_token or not new_url:
        return
    lookup = look_up(record, new_url, configured_url=configured_url)
    if lookup.elsewhere:
        raise _for_another_origin(lookup)


def stored_token_for(token_store: TokenStore, base_url: str, *, configured_url: str, saved: bool) -> Secret:
    """The stored token, to be sent to `base_url`; refused when it belongs to another origin, or there is none.

    `saved`: `base_url` is the saved URL (the picker), so a token of another origin is a setup that is not
    finished (409 CAPABILITY_NOT_CONFIGURED); otherwise the URL is being tried, and the request is refused as
    a save of it would be (400 INVALID_CONFIG).
    """
    lookup = token_store.lookup(base_url, configured_url=configured_url)
    if lookup.elsewhere:
        if not saved:
            raise _for_another_origin(lookup)
        raise CapabilityNotConfigured(lookup.message(), field="access_token", reason=TOKEN_FOR_ANOTHER_ORIGIN_REASON)
    if lookup.token is None:
        raise not_configured("access_token") if saved else not_entered("access_token")
    return lookup.token
