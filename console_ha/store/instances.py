"""The Home Assistants one Console reads (contract, "Several Home Assistants"): their ids, names and stores.

An instance is one Home Assistant: an id (`home` is the first and always there), the household's name for it,
and its own settings file, token (bound to its own origin) and CA certificate, each in its own files
(`DataDir.instance`). `home`'s files are those a data dir of a single Home Assistant always had, so such a data
dir is the `home` instance as it stands: nothing is moved or rewritten. Another instance exists while its
settings file does: a save that names a new id with a name makes it (`settings.saving`), `remove` ends it.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from console_ha.errors import SettingsFileDamaged
from console_ha.language import Words
from console_ha.store.atomic import path_lock
from console_ha.store.ca_certificate import CACertificateStore, ca_bundle_path
from console_ha.store.config import ConfigStore, HomeAssistantConfig
from console_ha.store.datadir import HOME_INSTANCE, DataDir, InstanceFiles, is_instance_id
from console_ha.store.ha_token import TokenStore
from console_ha.store.review import ReviewStore

log = logging.getLogger(__name__)

# How many Home Assistants one Console reads at most: as many as it keeps clients and areas for at once
# (`ha.per_home_assistant.MAX_HOME_ASSISTANTS`), so reading every one never pushes another's out.
MAX_INSTANCES = 8

# Any id but `home`'s, to ask the data dir where the others' files go.
_ANY_OTHER = "_"

# What a card or a page calls `home` until the household names it.
HOME_NAME = Words("Home")


@dataclass(frozen=True)
class Instance:
    """One Home Assistant's stores: its settings file, its token, its CA certificate and its picker's review."""

    id: str
    files: InstanceFiles
    config: ConfigStore
    token: TokenStore
    ca: CACertificateStore
    review: ReviewStore

    def ca_bundle(self, config: HomeAssistantConfig) -> str | None:
        """The CA bundle its connections trust, as `config` (its settings, read by the caller) says."""
        return ca_bundle_path(config, self.files)


def name_of(instance: str, config: HomeAssistantConfig) -> str:
    """What the household calls an instance: the name it gave, else `Home` for `home`, else its id."""
    if config.name:
        return config.name
    return HOME_NAME if instance == HOME_INSTANCE else instance


class Instances:
    """The Console's Home Assistants: which exist, and each one's stores (built once per id)."""

    def __init__(self, data_dir: DataDir, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.data_dir = data_dir
        self._clock = clock  # what "now" is for a CA certificate's dates
        self._lock = threading.Lock()
        self._built: dict[str, Instance] = {}

    def ids(self) -> tuple[str, ...]:
        """The ids of every instance: `home` first, then the others in the order of their ids."""
        try:
            names = os.listdir(self.data_dir.instance_configs)
        except (FileNotFoundError, NotADirectoryError):
            names = []
        others = sorted(name[:-5] for name in names
                        if name.endswith(".json") and is_instance_id(name[:-5]) and name[:-5] != HOME_INSTANCE)
        return (HOME_INSTANCE, *others[:MAX_INSTANCES - 1])

    def exists(self, instance: str) -> bool:
        """Whether `instance` is one of `ids()` (`home` always is)."""
        return instance in self.ids()

    def get(self, instance: str) -> Instance:
        """The stores of `instance` (whether or not it exists yet: a save of a new one needs them)."""
        if not is_instance_id(instance):
            raise ValueError("not an instance id")  # a caller's bug: ids are checked where they arrive
        with self._lock:
            built = self._built.get(instance)
            if built is None:
                config = ConfigStore(self.data_dir, instance)
                ca = CACertificateStore(self.data_dir, config, clock=self._clock)
                built = Instance(instance, self.data_dir.instance(instance), config,
                                 TokenStore(self.data_dir, instance), ca, ReviewStore(self.data_dir, instance))
                self._built[instance] = built
            return built

    @property
    def home(self) -> Instance:
        """The `home` instance's stores."""
        return self.get(HOME_INSTANCE)

    def names(self) -> dict[str, str]:
        """Each instance's name (`name_of`), by id, in `ids()`' order; a damaged settings file gives its id."""
        names: dict[str, str] = {}
        for instance in self.ids():
            try:
                names[instance] = name_of(instance, self.get(instance).config.load())
            except SettingsFileDamaged:
                names[instance] = name_of(instance, HomeAssistantConfig())
        return names

    def remove(self, instance: str) -> None:
        """Forget an instance other than `home`: its token first, then its CA certificate and review, then its settings.

        In that order, so a crash at any moment leaves either the instance without a token (never a token
        without the settings that say where it may go) or an instance that is gone.
        """
        if instance == HOME_INSTANCE:
            raise ValueError("home is never removed")  # the settings API refuses it first, in words
        self._forget(self.get(instance))
        log.info("removed the Home Assistant instance %s", instance)

    def leftovers(self) -> tuple[str, ...]:
        """Ids with a token or CA certificate but no settings file: what a create or remove killed mid-way left."""
        try:
            # Where every instance but `home` keeps its own directory of secrets (`DataDir.instance` says).
            names = os.listdir(self.data_dir.instance(_ANY_OTHER).secrets.parent)
        except (FileNotFoundError, NotADirectoryError):
            return ()
        return tuple(sorted(name for name in names if is_instance_id(name) and name != HOME_INSTANCE
                            and not self.get(name).config.path.exists()))

    def forget_leftovers(self, instance: str) -> bool:
        """Remove the token and CA certificate of an id that is no instance (its settings file is gone, or never
        came); whether there was anything. Under the saves' lock, like `remove`."""
        stores = self.get(instance)
        if instance == HOME_INSTANCE or stores.config.path.exists() or not stores.files.secrets.exists():
            return False
        self._forget(stores)
        log.warning("removed the token and CA certificate left by an unfinished change of the instance %s", instance)
        return True

    @staticmethod
    def _forget(stores: Instance) -> None:
        stores.token.remove()
        with path_lock(stores.files.ca_bundle):
            shutil.rmtree(stores.files.secrets, ignore_errors=True)
        with path_lock(stores.review.path):
            try:
                os.unlink(stores.review.path)
            except FileNotFoundError:
                pass
        with path_lock(stores.config.path):
            try:
                os.unlink(stores.config.path)
            except FileNotFoundError:
                pass
