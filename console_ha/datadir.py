"""Where console-ha keeps its files: the data dir and the paths the contract fixes under it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ENV_DATA_DIR = "CONSOLE_HA_DATA_DIR"


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


@dataclass(frozen=True)
class DataDir:
    """The contract's file layout under one data dir."""

    root: Path

    @property
    def capabilities(self) -> Path:
        return self.root / "capabilities"

    @property
    def ha_config(self) -> Path:
        return self.capabilities / "home-assistant.json"

    @property
    def audit_log(self) -> Path:
        return self.capabilities / "audit.jsonl"

    @property
    def ha_secrets(self) -> Path:
        return self.root / "secrets" / "home-assistant"

    @property
    def ha_token(self) -> Path:
        return self.ha_secrets / "access-token"

    @property
    def ha_ca_bundle(self) -> Path:
        return self.ha_secrets / "ca-bundle.pem"

    @property
    def console_secrets(self) -> Path:
        return self.root / "secrets" / "console"

    @property
    def model_config(self) -> Path:
        return self.root / "console" / "model.json"

    @property
    def model_api_key(self) -> Path:
        return self.console_secrets / "model-api-key.json"
