"""The household-facing words of each error code, in one place: the server sends them, scripts show them."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from console_ha.errors import CapabilityNotConfigured, ConsoleHaError
from console_ha.language import N_, Words

# The Console declining to queue one more call behind those still waiting on a Home Assistant.
BUSY_MESSAGE = N_("Home Assistant is still busy with earlier requests from this Console, so this one was "
                  "not sent. Try again in a moment.")

# What the settings page says when the Home Assistant being set up fails (Test connection, the picker).
# The client's own message says what it saw (a status, a number of seconds, an entity id); these say what
# the household can do about it, so the settings API answers with these (`household_error`).
SETTINGS_WORDS: MappingProxyType[str, Words] = MappingProxyType({
    "HA_UNAUTHORIZED":
        Words("Home Assistant refused the access token. Check that it was copied completely, or create a new "
              "one in Home Assistant (your profile, then Security, then Long-lived access tokens)."),
    "HA_UNREACHABLE":
        Words("Couldn’t reach Home Assistant at that address. Check the URL, and that Home Assistant is "
              "switched on and on the same network as this Console."),
    "HA_TIMEOUT":
        Words("Home Assistant took too long to answer. It may be starting up or busy; try again in a minute."),
    "HA_TLS_ERROR":
        Words("The secure (https) connection failed because this Console doesn’t trust Home Assistant’s "
              "certificate. Add its CA certificate under “Home Assistant on https with its own certificate” "
              "below, or try the http:// address you use at home."),
    "HA_NOT_FOUND":
        Words("Something answered at that address, but it isn’t Home Assistant. Check the URL; it usually "
              "ends in :8123."),
    "HA_BAD_RESPONSE":
        Words("Something answered at that address, but it doesn’t look like Home Assistant. Check the URL; "
              "it usually ends in :8123."),
    # Not configured, without a `reason`: the picker cannot load yet. (A token saved for another Home
    # Assistant has a reason, and its own sentence naming both addresses.)
    "CAPABILITY_NOT_CONFIGURED":
        Words("Enter the Home Assistant URL and an access token, then press Test connection, to choose entities."),
})

# What the model is told when Home Assistant fails a capability. The client's own words may name the
# household's Home Assistant address, which the model never needs; the code already says what happened.
# Plain English strings, never Words (issue 26): the model reads English, whatever the household's language.
MODEL_WORDS: MappingProxyType[str, str] = MappingProxyType({
    "HA_UNREACHABLE": "Home Assistant could not be reached.",
    "HA_TIMEOUT": "Home Assistant did not answer in time.",
    # Relayed by a model or an MCP client to the household, so it says how to make a new token (issue 21).
    "HA_UNAUTHORIZED": "Home Assistant refused the Console's access token (it may have been revoked). The household "
                       "can create a new one in Home Assistant (their profile, then Security, then Long-lived "
                       "access tokens) and paste it on the Console's settings page.",
    "HA_NOT_FOUND": "Home Assistant has no such entity; it may have been renamed or removed.",
    "HA_BAD_RESPONSE": "Home Assistant's answer could not be used.",
    # Issue 30: a household's plugin refused the read in `before_toolcall`; its own reason follows, so the model can
    # tell the household why (`refused_by_plugin`).
    "REFUSED_BY_PLUGIN": "A plugin the household installed ({plugin}) refused this read: {reason}",
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
    if words is None or (isinstance(err, CapabilityNotConfigured) and "reason" in err.detail):
        return err
    detail: dict[str, Any] = dict(err.detail)
    if "field" in detail:
        # The sentence is the status line's; beside the field the page shows what that field lacks (which to
        # save first), the error's own words, as it did when the script kept the sentences (de4fd72).
        detail["field_message"] = err.message
    return err.reworded(words, detail=detail)


# -- issue 20: the system notification an open Console page shows for a new card (household_watch) --------
NOTIFICATION_TITLE = N_("“{client}” asks to read Home Assistant")
# The card's title is a whole question ("Read Kitchen lights now?"), so it is quoted as a sentence of its own.
NOTIFICATION_BODY = N_("{card_title} Allow it or not on the Console’s Confirmations page.")

# --- issue 21: the settings page without JavaScript, the picker's kinds, the CA section -------------------

# The picker's "Kind of entity": a Home Assistant domain in the household's words, plural, as Home
# Assistant's own expose page names them (translated domain titles), with the everyday examples a household
# would look for where the domain name says little. A domain not listed gets `kind_name`'s readable form.
KIND_NAMES: MappingProxyType[str, Words] = MappingProxyType({
    "air_quality": Words("Air quality"),
    "alarm_control_panel": Words("Alarms"),
    "assist_satellite": Words("Voice assistants"),
    "automation": Words("Automations"),
    "binary_sensor": Words("On/off sensors (doors, windows, motion)"),
    "button": Words("Buttons"),
    "calendar": Words("Calendars"),
    "camera": Words("Cameras"),
    "climate": Words("Heating and cooling"),
    "conversation": Words("Conversation agents"),
    "counter": Words("Counters"),
    "cover": Words("Blinds, curtains and garage doors"),
    "date": Words("Dates"),
    "datetime": Words("Dates and times"),
    "device_tracker": Words("Where devices are (phones, tags)"),
    "event": Words("Events (doorbells, remotes)"),
    "fan": Words("Fans"),
    "group": Words("Groups"),
    "humidifier": Words("Humidifiers"),
    "image": Words("Images"),
    "input_boolean": Words("Helpers: on/off toggles"),
    "input_button": Words("Helpers: buttons"),
    "input_datetime": Words("Helpers: dates and times"),
    "input_number": Words("Helpers: numbers"),
    "input_select": Words("Helpers: lists of choices"),
    "input_text": Words("Helpers: text"),
    "lawn_mower": Words("Lawn mowers"),
    "light": Words("Lights"),
    "lock": Words("Locks"),
    "media_player": Words("TVs and speakers"),
    "notify": Words("Notifications"),
    "number": Words("Numbers"),
    "person": Words("People"),
    "plant": Words("Plants"),
    "remote": Words("Remotes"),
    "scene": Words("Scenes"),
    "schedule": Words("Schedules"),
    "script": Words("Scripts"),
    "select": Words("Choices"),
    "sensor": Words("Sensors (temperature, energy, humidity…)"),
    "siren": Words("Sirens"),
    "stt": Words("Speech to text"),
    "sun": Words("Sun"),
    "switch": Words("Switches and plugs"),
    "tag": Words("Tags"),
    "text": Words("Text"),
    "time": Words("Times"),
    "timer": Words("Timers"),
    "todo": Words("To-do lists"),
    "tts": Words("Text to speech"),
    "update": Words("Updates"),
    "vacuum": Words("Vacuum cleaners"),
    "valve": Words("Valves"),
    "wake_word": Words("Wake words"),
    "water_heater": Words("Water heaters"),
    "weather": Words("Weather"),
    "zone": Words("Zones"),
})


def kind_name(domain: str) -> Words:
    """The household's name for a kind of entity: the table's, else the domain made readable."""
    # "some_new_domain" -> "Some new domain": never the raw id, and still findable by what HA calls it.
    return KIND_NAMES.get(domain) or Words(domain.replace("_", " ").strip().capitalize() or domain)


# A Save that turns the assistant's access on with no entity chosen: said by both the page and the script.
NOTHING_CHOSEN = Words("Saved. The assistant can read nothing yet: no entity is chosen. Choose the entities it "
                       "may read below, then press Save again.")
# The picker without JavaScript lists entities from the saved URL and token: a GET cannot carry a token.
PICKER_NEEDS_SAVED_CONNECTION = Words("To choose entities without JavaScript, first save the Home Assistant URL "
                                      "and an access token (press Save; the assistant stays off until you turn it "
                                      "on). The entities then appear here.")
# After Test connection without JavaScript, when a token was typed: the page never sends a token back.
PASTE_TOKEN_AGAIN = Words("This page never sends a token back to your browser, so paste it again before you "
                          "press Save.")


def token_kept(minutes: int, origin: str) -> list[Words]:
    """Beside the empty token field without JavaScript: the pasted token is kept on the server, never sent back.

    Kept for the session (`settings.held`), for the URL's origin only; said in two sentences.
    """
    return [Words("The access token you pasted is kept on this Console for {minutes} minutes, for {origin} only.",
                  minutes=minutes, origin=origin),
            Words("Leave the field empty and press Save to store it, or paste another one.")]


# A "Save anyway" posted again (Back and resubmit) or after its question expired: each is good once.
CONFIRMATION_SPENT = Words("That “Save anyway” was already used or is too old, so nothing was saved: answer the "
                           "question below again.")

# Sensitive entities (`settings.catalogue.is_sensitive`): why the page asks before the assistant may read one
# (the script's dialog and the question of the page without JavaScript say the same).
SENSITIVE_WHY = Words("Locks, alarms, cameras, and where people are can tell someone when your home is empty or "
                      "open, and calendars and to-do lists hold your appointments and lists. The assistant would "
                      "see them in your conversations.")
SENSITIVE_QUESTION = Words("Let the assistant read these sensitive entities? Nothing was saved yet.")

# The household's CA certificate is stored by its own buttons, at once: Save does not wait for it.
CA_TAKES_EFFECT = Words("Adding or removing a certificate takes effect at once; it does not wait for Save.")
CA_ADDED = Words("Added. It is used from now on, for Test connection and for every read of Home Assistant; "
                 "Save is not needed for it.")
CA_REMOVE_QUESTION = Words("Remove the certificate? From then on https is checked only against the authorities "
                           "this Console trusts anyway, so a Home Assistant using this certificate can’t be "
                           "reached over https. This takes effect at once.")
CA_REMOVED = Words("Removed. From now on https is checked against the authorities this Console trusts anyway; "
                   "Save is not needed for it.")
CA_KEPT = Words("The certificate was kept.")

# --- The conversation's own lines (issue 21) ---------------------------------------------------------
# What the Console itself says in the chat, beside the model's reply, when a read is refused, denied,
# withdrawn, expires or fails. The model words its own answer; these are the Console's, so the household
# always learns what happened even when the model tells it differently.

# A read refused before any card, or failed after the household allowed it: by the error's code.
CHAT_WORDS: MappingProxyType[str, str] = MappingProxyType({
    "UNKNOWN_CAPABILITY": Words("The assistant asked for a kind of read the Console does not have, so it was refused."),
    "INVALID_ARGUMENTS": Words("The assistant asked in a way the Console does not accept, so the read was refused."),
    "CAPABILITY_DISABLED":
        Words("Reading Home Assistant is switched off in Settings, so the Console refused the read."),
    "CAPABILITY_NOT_CONFIGURED":
        Words("Home Assistant is not fully set up in Settings (address, access token and chosen devices), so the "
              "Console refused the read."),
    "ENTITY_NOT_ALLOWLISTED":
        Words("The assistant asked about a device that is not on your list, so the Console refused it. You can add "
              "devices in Settings."),
    # Issue 30: Activity names the plugin (its own line); the chat line says where to look.
    "REFUSED_BY_PLUGIN":
        Words("One of the plugins installed on this Console refused the read, so nothing was read. Activity says "
              "which one."),
    "INVOCATION_LIMIT_EXCEEDED":
        # One read of a kind per question for each Home Assistant (`stages.check_turn_limit`).
        Words("The assistant asked for the same kind of read of the same Home Assistant twice for one question; "
              "the Console allows one, so it refused the second."),
    "CONFIG_INVALID":
        Words("The Home Assistant settings file cannot be read, so the Console refused the read. Open Settings."),
    "HA_UNAUTHORIZED": SETTINGS_WORDS["HA_UNAUTHORIZED"],
    "HA_UNREACHABLE":
        Words("The Console could not reach Home Assistant, so nothing was read. Check that it is switched on."),
    "HA_TIMEOUT": Words("Home Assistant took too long to answer, so nothing was read. Try again in a minute."),
    "HA_TLS_ERROR":
        Words("The secure connection to Home Assistant failed its certificate check, so nothing was read. "
              "Open Settings."),
    "HA_NOT_FOUND": Words("Home Assistant does not know that device any more; it may have been renamed or removed."),
    "HA_BAD_RESPONSE": Words("Home Assistant's answer could not be used, so nothing was read."),
    "HA_BUSY": Words(BUSY_MESSAGE),
    "HA_NO_STATISTICS":
        Words("Home Assistant keeps no long-term statistics for that device, so there were no figures to read."),
    "RESULT_TOO_LARGE": Words("Home Assistant's answer was too large to pass on, so the assistant got none of it."),
    # After an Allow, only when what the card showed (the address, your devices' names) changed while it was open;
    # Activity says the same of such a refusal.
    "CONFIRMATION_INVALID": Words(
        "Your Home Assistant settings or your devices' names changed after you were asked, so nothing was read."),
})
# What /conversation adds when the language model cannot be used: where to go next.
MODEL_NEXT_STEP = Words("Check that the model server is running, then send your message again; on the Model page, "
                        "Test model says what is wrong.")

CHAT_FALLBACK = Words("The read did not work, so the assistant got nothing from Home Assistant.")

# A card's title is a whole question ("Read Kitchen lights now?"): each line quotes it as a sentence of its
# own and goes on in sentences of its own, so no line reads "now?." (tests/test_card_quotes.py).
CHAT_ALLOWED = N_("{title} You allowed it.")
# Allowed, and then the read failed: `outcome` is the error's own line (CHAT_WORDS).
CHAT_ALLOWED_FAILED = N_("{title} You allowed it. {outcome}")
CHAT_DENIED = N_("{title} You did not allow it, so nothing was read.")
CHAT_WITHDRAWN = N_("{title} You asked something else, so the Console withdrew this question and nothing was read.")
CHAT_EXPIRED = N_("{title} This question expired before it was answered, so nothing was read.")
# Calls the model made in the same message as the open card, dropped with it by a new message.
CHAT_WAITING_DROPPED = Words("The assistant's other reads for that question were not asked either.")


def chat_line(err: ConsoleHaError) -> str:
    """The Console's own line in the chat for a refused or failed read, by the error's code."""
    return CHAT_WORDS.get(err.code, CHAT_FALLBACK)

# A conversation kept on disk whose card was open when the Console stopped (issue 25): cards live in memory,
# so that question cannot be answered any more. The title is quoted whole, as the other lines quote it.
CHAT_RESTARTED = N_("{title} The Console restarted before you answered this question, so nothing was read. Ask "
                    "again if you still want to know.")
