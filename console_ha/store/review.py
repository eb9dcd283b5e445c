"""What the household last reviewed: the entities the picker showed when the allowlist was last saved.

Kept in `D/capabilities/picker-reviewed.json`, beside the configuration, so that the settings page can say
which entities Home Assistant has gained since. It only ever informs: nothing here changes the allowlist
(the RFC keeps the allowlist unsynchronised on purpose, and a new entity is never allowlisted by itself).
The record belongs to one Home Assistant (its origin): against another, nothing is called new.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from console_ha.errors import InvalidSettingsChange
from console_ha.ha.addresses import ENTITY_ID_RE, origin_of
from console_ha.language import Words
from console_ha.store.atomic import atomic_write, ensure_dir, path_lock
from console_ha.store.datadir import HOME_INSTANCE, DataDir
from console_ha.timestamps import utc_z

log = logging.getLogger(__name__)

# The most entity ids one review holds: well above the largest households (about 5,000 entities), and a
# bound on the file (about 2 MB at the longest ids) and on what a save may send.
MAX_REVIEWED = 50_000
# The page sends its list only while the picker shows at most this many: about 600 KB at 30 bytes an id,
# so a save stays within the 1 MiB request limit (MAX_CONTENT_LENGTH). Given to the page, not copied there.
MAX_SENT_BY_PAGE = 20_000
# A file larger than this is not read (damaged or not ours): the review is then treated as absent.
MAX_FILE_BYTES = 4 * 1024 * 1024
FIELD = "reviewed_entities"


@dataclass(frozen=True)
class Review:
    """The entity ids the picker showed at the last save, for which Home Assistant, and when."""

    origin: str
    reviewed_at: str
    entity_ids: frozenset[str]

    def new_since(self, entity_ids: Iterable[str]) -> list[str]:
        """Of `entity_ids` (what Home Assistant has now), those it did not have at the review, sorted."""
        return sorted(set(entity_ids) - self.entity_ids)


def check_reviewed(value: object) -> list[str]:
    """The ids a save sends as reviewed, validated: a list of entity ids, at most MAX_REVIEWED (400 if not)."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidSettingsChange(Words("`reviewed_entities` must be a list of entity ids."), field=FIELD)
    if len(value) > MAX_REVIEWED:
        raise InvalidSettingsChange(Words("At most {count} reviewed entities can be remembered.", count=MAX_REVIEWED),
                                    field=FIELD)
    for item in value:
        if not ENTITY_ID_RE.fullmatch(item):
            raise InvalidSettingsChange(Words("Not an entity id: “{text}”.", text=item[:80]), field=FIELD)
    return sorted(set(value))


def _origin(url: str) -> str | None:
    try:
        return origin_of(url) if url else None
    except ValueError:
        return None


class ReviewStore:
    """Reads and writes one Home Assistant's review, atomically (`home`'s: `D/capabilities/picker-reviewed.json`).

    Each instance has its own (`InstanceFiles.review`): a save of one must not replace what another's picker showed.
    """

    def __init__(self, data_dir: DataDir, instance: str = HOME_INSTANCE) -> None:
        self._dd = data_dir
        self.path = data_dir.instance(instance).review

    def write(self, base_url: str, entity_ids: list[str], *, now: datetime | None = None) -> Review:
        """Remember `entity_ids` (checked by `check_reviewed`) as reviewed for `base_url`'s Home Assistant."""
        origin = _origin(base_url)
        if origin is None:
            raise InvalidSettingsChange(Words("A review belongs to a Home Assistant URL."), field="base_url")
        moment = utc_z(now or datetime.now(UTC))
        record = {"version": 1, "origin": origin, "reviewed_at": moment, "entity_ids": entity_ids}
        ensure_dir(self._dd.capabilities, 0o700)
        ensure_dir(self.path.parent, 0o700)  # another instance's: beside its settings file, inside capabilities
        with path_lock(self.path):
            atomic_write(self.path, (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8"),
                         mode=0o600)
        return Review(origin, moment, frozenset(entity_ids))

    def read_for(self, base_url: str) -> Review | None:
        """The last review of `base_url`'s Home Assistant; None when there is none, or it is of another one."""
        review = self._read()
        if review is None or review.origin != _origin(base_url):
            return None
        return review

    def _read(self) -> Review | None:
        try:
            if self.path.stat().st_size > MAX_FILE_BYTES:
                raise ValueError("too large")
            record = json.loads(self.path.read_bytes())
            ids = record["entity_ids"]
            origin, moment = record["origin"], record["reviewed_at"]
            if not (isinstance(origin, str) and isinstance(moment, str)):
                raise ValueError("wrong shape")
            return Review(origin, moment, frozenset(check_reviewed(ids)))
        except FileNotFoundError:
            return None
        # RecursionError: deep nesting (a few hundred kB of "[") within MAX_FILE_BYTES makes json recurse too far.
        except (OSError, ValueError, KeyError, TypeError, RecursionError, InvalidSettingsChange) as err:
            # Only a notice depends on it: a damaged file means "nothing reviewed yet", and the next save
            # writes a good one.
            log.warning("the picker's last review cannot be read (%s); treating it as absent", type(err).__name__)
            return None
