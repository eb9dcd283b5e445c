"""The household's conversations on disk: one private JSON file each under D/conversations/, written atomically.

The store keeps records as the conversation layer gives them (`conversation.conversations` makes and reads
them); it checks only their outline, so a damaged or hand-edited file is set aside, never loaded half-way.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import secrets
import stat
import time
from pathlib import Path
from typing import Any

from console_ha.store.atomic import atomic_write, ensure_dir, path_lock
from console_ha.store.datadir import DataDir

log = logging.getLogger(__name__)

DIRECTORY_NAME = "conversations"
# A conversation's id is `secrets.token_urlsafe(16)` (22 characters); anything else in the directory is not ours.
_FILE_NAME = re.compile(r"(?P<id>[A-Za-z0-9_-]{16,64})\.json")
# Far above any file the Console writes (history is trimmed to 256K characters before the model is asked, and
# one turn's reads are bounded too: about 2 MiB at most), so only a file put there by something else is refused,
# before it is read into memory.
MAX_FILE_BYTES = 16 * 1024 * 1024
# The roles the conversation layer writes (`conversation.conversations`: its own lines are "console"); a kept
# message of another role (a "system" one) would be replayed to the model as if the Console had said it.
ROLES = frozenset({"user", "assistant", "tool", "console"})


class NotAConversationFile(OSError):
    """A directory entry named like a conversation that is not a regular file of a sane size."""


class ConversationFiles:
    """D/conversations/<id>.json: 0600 files in a 0700 directory, each replaced whole (store/atomic.py)."""

    def __init__(self, data_dir: DataDir) -> None:
        self.directory = data_dir.root / DIRECTORY_NAME

    def write(self, conversation_id: str, record: dict[str, Any]) -> None:
        """Replace the conversation's file with `record`; an OSError is the caller's to judge."""
        path = self._path(conversation_id)
        data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        ensure_dir(self.directory, 0o700)
        with path_lock(path):  # every atomic write runs under its file's lock (`sweep_temp_files`)
            atomic_write(path, data, mode=0o600)

    def remove(self, conversation_id: str) -> None:
        """Forget the conversation's file (evicted); an absent one is already forgotten."""
        path = self._path(conversation_id)
        if not path.parent.is_dir():
            return
        with path_lock(path):
            _unlink(path)
            # Ids are never used again, so its lock file would only pile up (one per conversation ever held).
            _unlink(path.with_name(f".{path.name}.lock"))

    def load(self) -> list[dict[str, Any]]:
        """Every kept record whose outline is right; a file that cannot be read as one is set aside."""
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return []
        records = []
        for name in names:
            match = _FILE_NAME.fullmatch(name)
            if match is None:
                continue
            record = self._read(self.directory / name, match["id"])
            if record is not None:
                records.append(record)
        return records

    def _read(self, path: Path, conversation_id: str) -> dict[str, Any] | None:
        try:
            record: object = json.loads(_read_regular(path))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as err:  # deep nesting: json gives up, as it should
            self._set_aside(path, str(err) if isinstance(err, NotAConversationFile) else type(err).__name__)
            return None
        if not isinstance(record, dict) or not is_record(record) or record["id"] != conversation_id:
            self._set_aside(path, "not a conversation")
            return None
        return record

    def _set_aside(self, path: Path, why: str) -> None:
        # Kept, never deleted, as a damaged settings file is (store/config.py `reset`): the household's own words.
        stamp = time.strftime("%Y%m%dT%H%M%S")
        aside = path.with_name(f"{path.name}.broken-{stamp}-{secrets.token_hex(3)}")
        try:
            with path_lock(path):
                os.rename(path, aside)
        except OSError as err:
            log.warning("a conversation file could not be read (%s) nor set aside (%s)", why, err.strerror)
            return
        log.warning("set aside a conversation file that could not be read (%s) as %s", why, aside.name)

    def _path(self, conversation_id: str) -> Path:
        if _FILE_NAME.fullmatch(f"{conversation_id}.json") is None:
            raise ValueError("not a conversation id")  # never a path outside the directory
        return self.directory / f"{conversation_id}.json"


def is_record(value: object) -> bool:
    """Whether `value` has a kept conversation's outline: id, owner, updated, touched, messages, open card or None."""
    if not isinstance(value, dict):
        return False
    messages, open_card = value.get("messages"), value.get("open")
    return (isinstance(value.get("id"), str) and isinstance(value.get("owner"), str)
            and isinstance(value.get("updated"), str) and _is_moment(value.get("touched"))
            and isinstance(messages, list) and all(_is_message(m) for m in messages)
            and (open_card is None or _is_open_card(open_card)))


def _is_moment(value: object) -> bool:
    # Unix time; json reads NaN and Infinity too, which no clock gives.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_message(value: object) -> bool:
    # The content is shown on the page and replayed to the model: text, or none (a message of tool calls).
    return (isinstance(value, dict) and value.get("role") in ROLES
            and isinstance(value.get("content"), (str, type(None))))


def _is_open_card(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    calls = value.get("calls")
    return (isinstance(value.get("title"), str) and isinstance(value.get("expiry_said"), bool)
            and isinstance(calls, list) and all(isinstance(c, str) for c in calls))


def _read_regular(path: Path) -> bytes:
    """The bytes of `path` if it is a regular file within MAX_FILE_BYTES; never through a symlink, never blocking."""
    # O_NOFOLLOW: a link would read whatever it points at; O_NONBLOCK: a FIFO would hang Console.open for ever.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotAConversationFile("not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise NotAConversationFile("too large")
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:  # grew while being read
        raise NotAConversationFile("too large")
    return data


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
