"""Where console-ha keeps its files: the data dir and the paths the contract fixes under it."""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from console_ha.errors import ConsoleHaError

log = logging.getLogger(__name__)

ENV_DATA_DIR = "CONSOLE_HA_DATA_DIR"
# The data dir holds the household's settings, audit log and secrets: only the Console's own user enters.
DATA_DIR_MODE = 0o700
SECRETS_DIR_MODE = 0o700

# A Home Assistant the Console reads is an instance (contract, "Several Home Assistants"): `home` is the first,
# and the only one a data dir of a single Home Assistant has; its files are where that release kept them.
HOME_INSTANCE = "home"
MAX_INSTANCE_ID_LENGTH = 32  # every read's result carries its instance's id: list_entities' budget counts it
INSTANCE_ID_PATTERN = rf"^[a-z0-9_]{{1,{MAX_INSTANCE_ID_LENGTH}}}$"
_INSTANCE_ID = re.compile(INSTANCE_ID_PATTERN[1:-1])


def is_instance_id(value: object) -> bool:
    """Whether `value` is an instance id's shape (`INSTANCE_ID_PATTERN`): it may name a file under the data dir."""
    return isinstance(value, str) and _INSTANCE_ID.fullmatch(value) is not None


@dataclass(frozen=True)
class InstanceFiles:
    """Where one Home Assistant instance's settings, token and stored CA certificate live."""

    instance: str
    config: Path
    secrets: Path  # the directory of its token and CA certificate (0700)
    secrets_parents: tuple[Path, ...]  # the directories above `secrets` the Console makes 0700, outermost first
    review: Path  # what its picker showed at the last save (`store.review`), beside its settings file

    @property
    def token(self) -> Path:
        return self.secrets / "access-token"

    @property
    def ca_bundle(self) -> Path:
        return self.secrets / "ca-bundle.pem"


def default_data_dir() -> Path:
    """The per-user default: $XDG_DATA_HOME/console-ha, else ~/.local/share/console-ha."""
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "console-ha"


def resolve_data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--data-dir, else CONSOLE_HA_DATA_DIR, else the per-user default."""
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        return Path(env).expanduser().resolve()
    return default_data_dir()


def ensure_secrets_dir(files: InstanceFiles) -> None:
    """Make (or narrow to 0700) the directory of an instance's token and CA certificate, and those above it."""
    for directory in (*files.secrets_parents, files.secrets):
        directory.mkdir(parents=True, exist_ok=True, mode=SECRETS_DIR_MODE)
        os.chmod(directory, SECRETS_DIR_MODE)


@dataclass(frozen=True)
class DataDir:
    """The contract's file layout under one data dir."""

    root: Path

    def ensure(self) -> None:
        """Create the data dir 0700, or narrow an existing one to 0700 (its parents are left as they are)."""
        self.root.mkdir(parents=True, exist_ok=True, mode=DATA_DIR_MODE)
        mode = stat.S_IMODE(self.root.stat().st_mode)
        if mode != DATA_DIR_MODE:
            # A directory made by hand (or by an older version) under the default umask is 0755.
            try:
                os.chmod(self.root, DATA_DIR_MODE)
            except PermissionError as err:
                raise ConsoleHaError(
                    f"The data dir {self.root} is open to other users ({mode:o}) and this user cannot "
                    f"change that; make it {DATA_DIR_MODE:o} (chmod {DATA_DIR_MODE:o}) or use another one."
                ) from err
            log.warning("the data dir %s was %o; it is now %o", self.root, mode, DATA_DIR_MODE)

    @property
    def capabilities(self) -> Path:
        return self.root / "capabilities"

    @property
    def ha_config(self) -> Path:
        return self.capabilities / "home-assistant.json"

    @property
    def instance_configs(self) -> Path:
        # Every instance but `home`: one settings file each, `<id>.json` (`home` keeps `ha_config`).
        return self.capabilities / "home-assistant-instances"

    def instance(self, instance: str) -> InstanceFiles:
        """The files of one instance; `home`'s are the single-Home-Assistant layout, unchanged."""
        if not is_instance_id(instance):
            raise ValueError("not an instance id")  # a caller's bug: ids are checked where they arrive
        secrets = self.root / "secrets"
        if instance == HOME_INSTANCE:
            return InstanceFiles(instance, self.ha_config, self.ha_secrets, (secrets,),
                                 self.capabilities / "picker-reviewed.json")
        others = secrets / "home-assistant-instances"
        # `-` is in no id, so the review's name is never taken for an instance's settings file (`Instances.ids`).
        return InstanceFiles(instance, self.instance_configs / f"{instance}.json", others / instance,
                             (secrets, others), self.instance_configs / f"{instance}-picker-reviewed.json")

    @property
    def audit_log(self) -> Path:
        return self.capabilities / "audit.jsonl"

    @property
    def ha_secrets(self) -> Path:
        return self.root / "secrets" / "home-assistant"

    @property
    def ha_token(self) -> Path:
        return self.instance(HOME_INSTANCE).token

    @property
    def ha_ca_bundle(self) -> Path:
        return self.instance(HOME_INSTANCE).ca_bundle

    @property
    def console_secrets(self) -> Path:
        return self.root / "secrets" / "console"

    @property
    def model_config(self) -> Path:
        return self.root / "console" / "model.json"

    @property
    def console_settings(self) -> Path:
        # The Console's own settings for its pages (the household's Language), issue 26.
        return self.root / "console" / "settings.json"

    @property
    def plugin_switches(self) -> Path:
        # Which installed plugins the household turned off, issue 30.
        return self.root / "console" / "plugins.json"

    @property
    def plugin_settings(self) -> Path:
        # The values of the settings installed plugins declare (quiet hours' times, notify's URL), issue 30.
        return self.root / "console" / "plugin-settings.json"

    @property
    def model_api_key(self) -> Path:
        return self.console_secrets / "model-api-key.json"
