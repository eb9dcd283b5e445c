"""Ready-to-copy MCP host configurations for a new API token: a host that starts a command, one that speaks HTTP.

The API tokens page shows them once, with the token in them, beside the token itself. The shapes are the
`mcpServers` ones most hosts take (README, "MCP clients"); a host that names its keys differently still
needs the same three facts, which the explanations name.
"""

from __future__ import annotations

import json
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from console_ha.language import Words
from console_ha.mcp.stdio import TOKEN_ENV, endpoint_url
from console_ha.secret import Secret

# The key a host lists the Console under.
SERVER_KEY = "console-ha"
COMMAND_NAME = "console-ha"


@dataclass(frozen=True)
class HostConfiguration:
    """One configuration: what kind of host takes it, and its text (holding the token: shown once, never kept)."""

    key: str
    title: Words
    explanation: Words
    text: str
    copy_label: Words  # its copy button's accessible name, a whole phrase of its own in each language


def command_path() -> str:
    """The `console-ha` of this installation, in full: a host rarely starts its programs from this venv's shell."""
    installed = Path(sysconfig.get_path("scripts")) / COMMAND_NAME
    return str(installed) if installed.is_file() else COMMAND_NAME


def host_configurations(console_url: str, token: Secret, *, command: str | None = None) -> list[HostConfiguration]:
    """The two configurations for the Console at `console_url` (as the household's browser reached it)."""
    base = console_url.rstrip("/")
    stdio = {"mcpServers": {SERVER_KEY: {
        "command": command or command_path(),
        "args": ["mcp", "--url", base],
        "env": {TOKEN_ENV: token.reveal()},
    }}}
    http = {"mcpServers": {SERVER_KEY: {
        "type": "http",
        "url": endpoint_url(base),
        "headers": {"Authorization": f"Bearer {token.reveal()}"},
    }}}
    return [
        HostConfiguration(
            "command", Words("A host that starts a command"),
            Words("Claude Desktop, LM Studio, Cursor and others: the host starts console-ha mcp, which forwards "
                  "to this Console with the token in {variable}.", variable=TOKEN_ENV),
            json.dumps(stdio, indent=2), Words("Copy the configuration for a host that starts a command")),
        HostConfiguration(
            "http", Words("A host that speaks streamable HTTP"),
            Words("VS Code, Claude Code and others: the host connects to this Console's /mcp with the token in "
                  "an Authorization: Bearer header."),
            json.dumps(http, indent=2), Words("Copy the configuration for a host that speaks streamable HTTP")),
    ]
