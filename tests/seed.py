"""Settings a test starts from, saved the way the household saves them: the settings save's one pass.

`seed_settings` is the one way a test writes the Home Assistant settings: through `saving.save_settings`
(what `SettingsService.save` runs), so a seeded allowlist meets the entity budget, a token is bound to the
saved URL's origin and a URL of another origin is refused without a new token, as on the settings page.
Another instance than `home` (`instance="cabin"`) is made by its first save, which must give it a `name`,
as the settings API's is; its URL may not be another instance's.
`hand_edit` is for the few tests whose subject is a file the save would refuse (another origin than the
token's, as a hand edit or an older release leaves it; an allowlist over today's budget; `ca_bundle`, which
only the file sets): it writes the file directly, as a person editing it would, and each call says why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from console_ha.settings.saving import Saved, save_settings
from console_ha.store.config import ConfigStore
from console_ha.store.datadir import HOME_INSTANCE, DataDir
from console_ha.store.ha_token import TokenStore, check_token


def seed_settings(data_dir: DataDir, changes: Mapping[str, Any], *, token: str | None = None,
                  expected_revision: str | None = None, instance: str = HOME_INSTANCE) -> Saved:
    """Save `changes` (and `token`, bound to the saved URL) of `instance` through the settings save's checks and
    writes."""
    return save_settings(ConfigStore(data_dir, instance), TokenStore(data_dir, instance), changes,
                         expected_revision=expected_revision, token=None if token is None else check_token(token))


def hand_edit(data_dir: DataDir, changes: Mapping[str, Any], *, instance: str = HOME_INSTANCE) -> None:
    """Write `changes` into `instance`'s settings file directly, past every check of a save (the caller says why)."""
    path = data_dir.instance(instance).config
    data = json.loads(path.read_text()) if path.exists() else {}
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(json.dumps({**data, **changes}, indent=2) + "\n")
    path.chmod(0o600)
