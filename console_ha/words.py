"""The household-facing words of each error code, in one place: the server sends them, scripts show them."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from console_ha.errors import CapabilityNotConfigured, ConsoleHaError

# The Console declining to queue one more call behind those still waiting on a Home Assistant.
BUSY_MESSAGE = ("Home Assistant is still busy with earlier requests from this Console, so this one was "
                "not sent. Try again in a moment.")

# What the settings page says when the Home Assistant being set up fails (Test connection, the picker).
# The client's own message says what it saw (a status, a number of seconds, an entity id); these say what
# the household can do about it, so the settings API answers with these (`household_error`).
SETTINGS_WORDS: MappingProxyType[str, str] = MappingProxyType({
    "HA_UNAUTHORIZED":
        "Home Assistant refused the access token. Check that it was copied completely, or create a new "
        "one in Home Assistant (your profile, then Security, then Long-lived access tokens).",
    "HA_UNREACHABLE":
        "Couldn’t reach Home Assistant at that address. Check the URL, and that Home Assistant is "
        "switched on and on the same network as this Console.",
    "HA_TIMEOUT":
        "Home Assistant took too long to answer. It may be starting up or busy; try again in a minute.",
    "HA_TLS_ERROR":
        "The secure (https) connection failed because this Console doesn’t trust Home Assistant’s "
        "certificate. Add its CA certificate under “Home Assistant on https with its own certificate” "
        "below, or try the http:// address you use at home.",
    "HA_NOT_FOUND":
        "Something answered at that address, but it isn’t Home Assistant. Check the URL; it usually "
        "ends in :8123.",
    "HA_BAD_RESPONSE":
        "Something answered at that address, but it doesn’t look like Home Assistant. Check the URL; "
        "it usually ends in :8123.",
    # Not configured, without a `reason`: the picker cannot load yet. (A token saved for another Home
    # Assistant has a reason, and its own sentence naming both addresses.)
    "CAPABILITY_NOT_CONFIGURED":
        "Enter the Home Assistant URL and an access token, then press Test connection, to choose entities.",
})

# What the model is told when Home Assistant fails a capability. The client's own words may name the
# household's Home Assistant address, which the model never needs; the code already says what happened.
MODEL_WORDS: MappingProxyType[str, str] = MappingProxyType({
    "HA_UNREACHABLE": "Home Assistant could not be reached.",
    "HA_TIMEOUT": "Home Assistant did not answer in time.",
    "HA_UNAUTHORIZED": "Home Assistant refused the Console's access token; the household needs to paste a new one.",
    "HA_NOT_FOUND": "Home Assistant has no such entity; it may have been renamed or removed.",
    "HA_BAD_RESPONSE": "Home Assistant's answer could not be used.",
    "HA_TLS_ERROR": "The secure connection to Home Assistant failed its certificate check.",
    "HA_BUSY": BUSY_MESSAGE,
    # issue 19, get_statistics
    "HA_NO_STATISTICS": ("This entity keeps no long-term statistics in Home Assistant (only sensors with a "
                         "state class, such as temperatures and energy meters, keep them); ask get_history "
                         "for the past week instead."),
})
MODEL_FALLBACK = "Home Assistant failed."


def household_error(err: ConsoleHaError) -> ConsoleHaError:
    """`err` in the settings page's words: the same code and detail, the household's sentence as message."""
    words = SETTINGS_WORDS.get(err.code)
    if words is None or (err.code == CapabilityNotConfigured.code and "reason" in err.detail):
        return err
    detail: dict[str, Any] = dict(err.detail)
    if "field" in detail:
        # The sentence is the status line's; beside the field the page shows what that field lacks (which to
        # save first), the error's own words, as it did when the script kept the sentences (de4fd72).
        detail["field_message"] = err.message
    return err.reworded(words, detail=detail)


# -- issue 20: the system notification an open Console page shows for a new card (household_watch) --------
NOTIFICATION_TITLE = "“{client}” asks to read Home Assistant"
NOTIFICATION_BODY = "{card_title}. Allow it or not on the Console’s Confirmations page."
