"""The stage hooks a household's plugin may implement (issue 30; contract, "Plugins and stage hooks").

A plugin is a module registered under the entry point group `console_ha`; it marks its functions with
`hookimpl`. An implementation may take any subset of a hook's arguments (pluggy hands it only those it names).
`principal` is "household" or "program:<token name>". What a hook returns is checked before it is used
(`console_ha/plugins/narrowing.py`): a plugin can narrow what the Console does, never widen it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

import pluggy

PROJECT = "console_ha"  # the pluggy project name, and the entry point group plugins register under

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# The hooks in the order a message meets them, then the card's: how every listing names them.
HOOK_NAMES: tuple[str, ...] = (
    "on_input", "pre_action", "post_action", "before_toolcall", "after_toolcall", "before_output",
    "after_output", "on_card",
)
# The moments of a card's life on_card is told of.
CARD_EVENTS: tuple[str, ...] = ("waiting", "allowed", "denied", "expired", "withdrawn")

# A plugin may declare settings for the household as a module attribute of this name: a list of
# {"name", "type": "time" | "url" | "text", "label"} (console_ha/plugins/plugin_settings.py reads it).
SETTINGS_ATTRIBUTE = "CONSOLE_HA_SETTINGS"

_NO_SETTINGS: Mapping[str, str] = MappingProxyType({})
# Set by the Console around each call of a plugin's implementation (`console_ha.plugins.plugin_registry`), on
# the thread that runs it: a context, not a module global, so two Consoles in one process keep their own.
_CURRENT_SETTINGS: ContextVar[Mapping[str, str]] = ContextVar("console_ha_plugin_settings", default=_NO_SETTINGS)


def settings() -> Mapping[str, str]:
    """The household's values of the calling plugin's declared settings, inside one of its hook calls.

    Each declared setting the household has saved, by name, as text ("22:00", "https://..."); one never saved
    is absent. Outside a hook call (at import, or on a thread the plugin started) it is empty.
    """
    return _CURRENT_SETTINGS.get()


def settings_context() -> ContextVar[Mapping[str, str]]:
    """The context the Console sets around a plugin's hook call: for the plugin registry, never for a plugin."""
    return _CURRENT_SETTINGS


class StageHooks:
    """The hook specifications: each one's arguments are the contract's, its docstring says when and what back."""

    @hookspec
    def on_input(self, message: str, principal: str) -> str | None:
        """A conversation message arrives, before the model sees it.

        May return a reply (str): the message is answered with it, without the model. None: go on.
        """

    @hookspec
    def pre_action(self, messages: list[dict[str, Any]], principal: str) -> list[str] | None:
        """Before each model call, with the messages the model is about to be sent.

        May return extra system lines (a list of str) added for this call only. None: nothing to add.
        """

    @hookspec
    def post_action(self, reply: str, tool_calls: list[dict[str, Any]], principal: str) -> str | None:
        """The model answered, with its words and the tool calls it asks for.

        May return a replacement reply (str) for the model's words. None: the words stay.
        """

    @hookspec
    def before_toolcall(self, capability: str, arguments: dict[str, Any],
                        principal: str) -> str | dict[str, Any] | None:
        """A read was asked for, before the executor's stage 3 (policy).

        May return a refusal reason (str): the call ends `REFUSED_BY_PLUGIN`, before any card. Or narrower
        arguments (dict): the executor validates them again from stage 2 and checks them at stage 3. None: go on.
        """

    @hookspec
    def after_toolcall(self, capability: str, arguments: dict[str, Any], result: dict[str, Any],
                       principal: str) -> dict[str, Any] | None:
        """A read's result, after the executor's stage 6 (shaped and checked against its result schema).

        May return a result (dict) with fields or list items removed, never added nor changed; it must still
        validate against the capability's result schema. None: the result stays.
        """

    @hookspec
    def before_output(self, reply: str, principal: str) -> str | None:
        """The final reply, before it is sent.

        May return a replacement reply (str). None: the reply stays.
        """

    @hookspec
    def after_output(self, reply: str, principal: str) -> None:
        """The reply was sent. Observe only: what it returns is ignored."""

    @hookspec
    def on_card(self, event: str, card: dict[str, Any], principal: str) -> None:
        """A card is `waiting`, `allowed`, `denied`, `expired` or `withdrawn` (`CARD_EVENTS`).

        Observe only: what it returns is ignored.
        """
