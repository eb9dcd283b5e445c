"""Who may use each route: the one table of the Console's endpoints and the one guard that enforces it.

A program asks; the household decides. An API token is held by every MCP host, and a host is a program
the household installed, not the household: it may ask for reads (MCP, conversation messages) and see
its own waiting cards, and nothing else. Answering a card, reading the picker, changing what Home
Assistant or the model is, CA certificates and API tokens are for the household's browser session only.
The CLI, on the device, is how set-up is scripted. docs/security.md gives the reasons; the
route-by-principal test in tests/web/test_access.py walks the URL map against this table.
"""

from __future__ import annotations

import enum
from types import MappingProxyType

from console_ha.errors import Forbidden


class Access(enum.Enum):
    """Who a route answers."""

    OPEN = "anyone, without logging in"
    HOUSEHOLD = "the household's browser session only"
    PROGRAM = "a program's API token only"
    ASKING = "the household's session or a program's API token"


# Every endpoint of the app, with who may use it. An endpoint missing here is refused to an API token
# (the guard fails closed) and fails the route-by-principal test.
ACCESS: MappingProxyType[str, Access] = MappingProxyType({
    # open: liveness, logging in, and the files the login page needs
    "auth.health": Access.OPEN,
    "auth.login": Access.OPEN,
    "auth.setup": Access.OPEN,
    "static": Access.OPEN,
    # what a program may do: ask for reads, and see its own cards waiting for the household
    "mcp.endpoint": Access.PROGRAM,
    "conversation.message": Access.ASKING,  # answering a card through it is the household's (ANSWERING_A_CARD)
    "confirmations.pending": Access.ASKING,  # a program sees only its own cards
    # the household's: answering cards
    "confirmations.answer": Access.HOUSEHOLD,
    "confirmations.page": Access.HOUSEHOLD,
    "confirmations.page_post": Access.HOUSEHOLD,
    "confirmations.watch": Access.HOUSEHOLD,  # every page's long poll for the count and notifications
    "confirmations.leave_watch": Access.HOUSEHOLD,  # issue 25: a page going away ends its long poll
    # the household's: the pages of the Console
    "auth.logout": Access.HOUSEHOLD,
    "pages.index": Access.HOUSEHOLD,
    "conversation.page": Access.HOUSEHOLD,
    "conversation.page_post": Access.HOUSEHOLD,
    "conversation.activity": Access.HOUSEHOLD,
    # the household's: which Home Assistant, with which token, and which entities (the picker shows every one)
    "pages.home_assistant_settings": Access.HOUSEHOLD,
    "pages.save_home_assistant_settings": Access.HOUSEHOLD,
    "settings_api.get_settings": Access.HOUSEHOLD,
    "settings_api.save_settings": Access.HOUSEHOLD,
    "settings_api.instances": Access.HOUSEHOLD,
    "settings_api.remove_instance": Access.HOUSEHOLD,
    "settings_api.entities": Access.HOUSEHOLD,
    "settings_api.entities_preview": Access.HOUSEHOLD,
    "settings_api.discover": Access.HOUSEHOLD,
    "settings_api.test_connection": Access.HOUSEHOLD,
    "settings_api.ca_certificate": Access.HOUSEHOLD,
    "settings_api.store_ca_certificate": Access.HOUSEHOLD,
    "settings_api.remove_ca_certificate": Access.HOUSEHOLD,
    # the household's: where its conversations go
    "model_settings.get_model": Access.HOUSEHOLD,
    "model_settings.save_model": Access.HOUSEHOLD,
    "model_settings.test_model": Access.HOUSEHOLD,
    "model_settings.page": Access.HOUSEHOLD,
    "model_settings.page_post": Access.HOUSEHOLD,
    # the household's: which programs hold a token
    "api_tokens.page": Access.HOUSEHOLD,
    "api_tokens.revoke": Access.HOUSEHOLD,
    "api_tokens.set_patience": Access.HOUSEHOLD,  # issue 20: how long a token's MCP calls wait
    "api_tokens.create": Access.HOUSEHOLD,  # a token cannot make tokens: it would outlive its own revocation
    "api_tokens.confirm_revoke": Access.HOUSEHOLD,
    # issue 21: the conversation page's script rereads the lines of the household's own conversation
    "conversation.lines": Access.HOUSEHOLD,
    # issue 25: ... and its list of recent conversations, kept live
    "conversation.recent": Access.HOUSEHOLD,
    # issue 26: the Settings page's Language choice
    "language.save": Access.HOUSEHOLD,
    # issue 30: the household's plugins, their switches and their settings
    "plugins.page": Access.HOUSEHOLD,
    "plugins.switch": Access.HOUSEHOLD,
    "plugins.save_settings": Access.HOUSEHOLD,
})

ANSWERING_A_CARD = "answer a request"
HOUSEHOLD_ONLY = ("A program's API token can ask for reads, not {what}: only the household, logged in to "
                  "the Console in a browser, can do that.")
# What a refused request was for, in the household's words, by the endpoint's blueprint.
_WHAT = MappingProxyType({
    "confirmations": ANSWERING_A_CARD,
    "conversation": "use the household's own conversation pages",
    "auth": "log out a household session",
    "pages": "see or change the Home Assistant settings",
    "settings_api": "see or change the Home Assistant settings, its entities or its certificate",
    "model_settings": "see or change the language model's settings",
    "api_tokens": "see, make or revoke API tokens",
    "language": "change the language of the Console's pages",
    "plugins": "see, turn off or set up the household's plugins",
})


def access_to(endpoint: str | None) -> Access:
    """Who may use `endpoint`; one the table does not name is the household's alone."""
    return ACCESS.get(endpoint or "", Access.HOUSEHOLD)


def household_only(what: str) -> Forbidden:
    """The refusal a program's API token gets for something only the household may do."""
    return Forbidden(HOUSEHOLD_ONLY.format(what=what))


def refusal_for(endpoint: str | None) -> Forbidden:
    """The refusal of an endpoint that is the household's alone, in words saying what it was for."""
    blueprint = (endpoint or "").partition(".")[0]
    return household_only(_WHAT.get(blueprint, "do this"))
