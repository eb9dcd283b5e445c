"""The Console's own settings for the household's pages (today its language), in `D/console/settings.json`.

Apart from `home-assistant.json`: the language is the Console's, not one Home Assistant's, and a damaged
Home Assistant file must not turn the pages' words to English. The file is read once and kept until it
changes (one stat per request), and written atomically under its lock.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from console_ha.errors import InvalidSettingsChange
from console_ha.language import AUTOMATIC, LANGUAGES, PSEUDO, Words
from console_ha.store.atomic import atomic_write, ensure_dir, path_lock
from console_ha.store.datadir import DataDir

log = logging.getLogger(__name__)

# What the Language choice may be: "automatic" (the browser's), or one language's code. The tests'
# pseudo-language may be saved too, but only an app that tests with it (web/request_language.py) ever uses it.
CHOICES: tuple[str, ...] = (AUTOMATIC, *(language.code for language in LANGUAGES), PSEUDO.code)


def check_language(value: object) -> str:
    """A saved Language choice: "automatic" or the code of a language the Console speaks."""
    if not isinstance(value, str) or value not in CHOICES:
        raise InvalidSettingsChange(Words("Choose a language from the list."), field="language")
    return value


class ConsoleSettingsStore:
    """The Console's own settings file: the household's Language choice."""

    def __init__(self, data_dir: DataDir) -> None:
        self.path: Path = data_dir.console_settings
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._language = AUTOMATIC

    def language(self) -> str:
        """The saved Language choice; "automatic" when none is saved, or the file cannot be used (logged)."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return AUTOMATIC
        except OSError as err:
            log.warning("the Console's settings file cannot be read (%s); the language is automatic", err.strerror)
            return AUTOMATIC
        with self._lock:
            if self._seen != (stat.st_mtime_ns, stat.st_size):
                self._language = self._read()
                self._seen = (stat.st_mtime_ns, stat.st_size)
            return self._language

    def set_language(self, value: object) -> str:
        """Save the Language choice (checked first); the other settings in the file are kept."""
        choice = check_language(value)
        ensure_dir(self.path.parent, 0o700)
        with path_lock(self.path):
            body = self._read_body()
            body["language"] = choice
            atomic_write(self.path, (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        return choice

    def _read(self) -> str:
        # A hand-edited value the Console does not know is as good as no choice: the pages stay readable.
        value = self._read_body().get("language", AUTOMATIC)
        if value not in CHOICES:
            log.warning("the Console's settings file names an unknown language %r; the language is automatic", value)
            return AUTOMATIC
        return str(value)

    def _read_body(self) -> dict[str, object]:
        try:
            body = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            log.warning("the Console's settings file cannot be used (%s); starting it again", type(err).__name__)
            return {}
        return body if isinstance(body, dict) else {}
