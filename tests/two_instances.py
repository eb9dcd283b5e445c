"""A second Home Assistant for the tests of issue 29 that need one: created through the settings save, as the
settings page creates it (a new id with a name), beside `home` seeded by `tests.seed.seed_settings`."""

from __future__ import annotations

from console_ha.settings.saving import save_settings
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import check_token
from console_ha.store.instances import Instances
from tests.stub_ha import StubHomeAssistant

CABIN = "cabin"


def seed_instance(data_dir: DataDir, stub: StubHomeAssistant, allowlist: list[str], *, instance: str = CABIN,
                  name: str = "Cabin") -> None:
    """Create `instance` for `stub` (its URL, its token, `allowlist`, `name`) through the settings save."""
    stores = Instances(data_dir).get(instance)
    save_settings(stores.config, stores.token, {"enabled": True, "base_url": stub.base_url, "name": name,
                                                "allowlisted_entities": allowlist}, token=check_token(stub.token))
