"""What a part of the Console reads from Home Assistant: REST paths it GETs, WebSocket commands it sends.

Each part declares its own (a capability in its module, the settings page beside the code that reads), and
the composition root hands their union to the client, which reads nothing else. Read-only holds by
construction underneath any declaration: REST is GET only (the client has no other verb), and a WebSocket
command, which has no verb, must be one of `websocket.ALLOWED_COMMANDS`, Home Assistant's commands known to
change nothing; a declaration naming any other is refused when it is made.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from console_ha.ha.websocket import ALLOWED_COMMANDS

# A path pattern is an /api/ path whose `{name}` parts stand for one path segment each (an entity id, a time).
_PLACEHOLDER = re.compile(r"\{[a-z_]+\}")
_LITERAL_SEGMENT = re.compile(r"[A-Za-z0-9._~:@+,=-]+")
_ONE_SEGMENT = "[^/]+"


@dataclass(frozen=True, init=False)
class Reads:
    """REST path patterns (`/api/states/{entity_id}`) and WebSocket commands; `|` joins two declarations."""

    paths: frozenset[str] = frozenset()
    commands: frozenset[str] = frozenset()
    _path_re: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __init__(self, paths: Iterable[str] = (), commands: Iterable[str] = ()) -> None:
        paths, commands = frozenset(paths), frozenset(commands)
        for pattern in paths:
            _check_pattern(pattern)
        writes = sorted(commands - ALLOWED_COMMANDS)
        if writes:
            raise ValueError(f"not a read-only Home Assistant command: {', '.join(writes)}")
        object.__setattr__(self, "paths", paths)
        object.__setattr__(self, "commands", commands)
        # One expression for every pattern, made once: the client asks it before each GET.
        alternatives = "|".join(_pattern_re(p) for p in sorted(paths)) or "(?!)"
        object.__setattr__(self, "_path_re", re.compile(f"(?:{alternatives})"))

    def __or__(self, other: Reads) -> Reads:
        return Reads(self.paths | other.paths, self.commands | other.commands)

    def allows_path(self, path: str) -> bool:
        """Whether `path` (decoded, without a query) is one of the declared patterns."""
        return self._path_re.fullmatch(path) is not None


def _check_pattern(pattern: str) -> None:
    segments = pattern.split("/")
    if not pattern.startswith("/api/") or not all(
            _PLACEHOLDER.fullmatch(s) or _LITERAL_SEGMENT.fullmatch(s) for s in segments[2:] if s):
        raise ValueError(f"not an /api/ path pattern: {pattern!r}")
    if any(s == "" for s in segments[2:-1]) or ".." in segments or "." in segments:
        raise ValueError(f"not an /api/ path pattern: {pattern!r}")
    if len(segments) > 2 and _PLACEHOLDER.fullmatch(segments[2]):
        # `/api/{x}` would stand for every endpoint of the API: the segment naming the endpoint is literal.
        raise ValueError(f"the endpoint of a path pattern is written out, not a placeholder: {pattern!r}")


def _pattern_re(pattern: str) -> str:
    return "/".join(_ONE_SEGMENT if _PLACEHOLDER.fullmatch(s) else re.escape(s) for s in pattern.split("/"))


# What a client is allowed when whoever makes it declares nothing (a test, a benchmark): the reads the
# client could make before reads were declared. The Console never relies on it: `Console.open` hands every
# client the reads its parts declare.
UNDECLARED_READS = Reads(
    paths=("/api/", "/api/config", "/api/states", "/api/states/{entity_id}", "/api/history/period/{start}"),
    commands=ALLOWED_COMMANDS,
)
