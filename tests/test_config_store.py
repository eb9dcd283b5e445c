"""The configuration file: defaults, validation, fresh reads, atomic and concurrent writes.

Every write goes through the settings save (`tests.seed`), the one path the Console writes the file by.
"""

from __future__ import annotations

import json
import os
import threading

import pytest

from console_ha.errors import ConfigInvalid, InvalidConfig
from console_ha.ha.addresses import normalise_base_url
from console_ha.store.config import ConfigStore, HomeAssistantConfig, shown_name
from tests.seed import seed_settings


@pytest.fixture
def store(data_dir) -> ConfigStore:
    return ConfigStore(data_dir)


def test_absent_file_reads_as_the_contract_default(store):
    assert store.load() == HomeAssistantConfig()
    assert HomeAssistantConfig().to_json() == {"enabled": False, "base_url": "", "allowlisted_entities": []}
    assert not store.path.exists()


def test_file_is_read_fresh_on_every_call(store):
    seed_settings(store.data_dir, {"enabled": True})
    assert store.load().enabled is True
    store.path.write_text(json.dumps({"enabled": False, "base_url": "", "allowlisted_entities": []}))
    assert store.load().enabled is False


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("http://homeassistant.local:8123", "http://homeassistant.local:8123"),
        ("http://homeassistant.local:8123/", "http://homeassistant.local:8123"),
        ("http://homeassistant.local:8123/api", "http://homeassistant.local:8123"),
        ("http://homeassistant.local:8123/api/", "http://homeassistant.local:8123"),
        ("HTTPS://HA.Example:443/ha/api/", "https://ha.example:443/ha"),
        ("  http://192.168.1.10:8123  ", "http://192.168.1.10:8123"),
        ("http://[::1]:8123/", "http://[::1]:8123"),
        ("", ""),
    ],
)
def test_base_url_is_normalised(given, expected):
    assert normalise_base_url(given) == expected


@pytest.mark.parametrize(
    "bad",
    [
        "homeassistant.local:8123",
        "ftp://ha.local",
        "http://",
        "http://user:pass@ha.local:8123",
        "http://token@ha.local",
        "http://ha.local:8123/?x=1",
        "http://ha.local:8123/#top",
        "http://ha.local:99999",
        "http://ha local",
        "javascript:alert(1)",
        "http://127.0.0.1\\.homeassistant.local:8123",
        "http://ha\u202e.local:8123",
        "http://ha.local\x7f:8123",
        "http://ha.local:0",
        "http://-ha.local",
        "http://ha..local",
        "http://hä.local",
        42,
        None,
    ],
)
def test_bad_base_url_is_refused_with_its_field(store, bad):
    with pytest.raises(InvalidConfig) as caught:
        seed_settings(store.data_dir, {"base_url": bad})
    assert caught.value.code == "INVALID_CONFIG"
    assert caught.value.detail["field"] == "base_url"
    assert not store.path.exists(), "nothing is written when input is invalid"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"enabled": "yes"}, "enabled"),
        ({"enabled": 1}, "enabled"),
        ({"allowlisted_entities": "sensor.x"}, "allowlisted_entities"),
        ({"allowlisted_entities": ["Sensor.Kitchen"]}, "allowlisted_entities"),
        ({"allowlisted_entities": ["sensor"]}, "allowlisted_entities"),
        ({"allowlisted_entities": ["sensor.kitchen", 3]}, "allowlisted_entities"),
        ({"allowlisted_entities": ["sensor.a.b"]}, "allowlisted_entities"),
        ({"entity_names": ["x"]}, "entity_names"),
        ({"ca_bundle": "/etc/ca.pem"}, "ca_bundle"),  # only the file sets it (the damaged-file test checks its value)
        ({"access_token": "abc"}, "access_token"),
        ({"surprise": True}, "surprise"),
    ],
)
def test_invalid_changes_name_their_field_and_write_nothing(store, changes, field):
    seed_settings(store.data_dir, {"enabled": True, "allowlisted_entities": ["sensor.kitchen"]})
    before = store.path.read_bytes()
    with pytest.raises(InvalidConfig) as caught:
        seed_settings(store.data_dir, changes)
    assert caught.value.detail["field"] == field
    assert store.path.read_bytes() == before


def test_duplicates_are_dropped_keeping_order(store):
    saved = seed_settings(store.data_dir, {"allowlisted_entities": ["sensor.b", "sensor.a", "sensor.b"]})
    assert saved.config.allowlisted_entities == ("sensor.b", "sensor.a")


def test_written_file_is_private_and_holds_no_token(store):
    seed_settings(store.data_dir, {"enabled": True, "base_url": "http://ha.local:8123",
                                   "allowlisted_entities": ["light.hall"]})
    assert os.stat(store.path).st_mode & 0o777 == 0o600
    assert json.loads(store.path.read_text()) == {
        "enabled": True,
        "base_url": "http://ha.local:8123",
        "allowlisted_entities": ["light.hall"],
    }


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[]", b'"text"', b"\xff\xfe", b'{"enabled": "yes"}',
     b'{"allowlisted_entities": ["BAD"]}', b'{"ca_bundle": "relative/ca.pem"}', b"", b"[" * 100_000,
     b'{"enabled": ' + b"1" * 5000 + b"}"],
)
def test_broken_file_is_config_invalid_and_never_replaced(store, content):
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(content)
    with pytest.raises(ConfigInvalid) as caught:
        store.load()
    assert caught.value.code == "CONFIG_INVALID"
    with pytest.raises(ConfigInvalid):
        seed_settings(store.data_dir, {"enabled": True})
    assert store.path.read_bytes() == content


def test_reset_moves_a_broken_file_aside(store):
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(b"{broken")
    store.reset()
    assert store.load() == HomeAssistantConfig()
    kept = [p for p in store.path.parent.iterdir() if p.name.startswith("home-assistant.json.broken-")]
    assert len(kept) == 1 and kept[0].read_bytes() == b"{broken"


def test_extra_keys_in_the_file_are_tolerated(store):
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps({"enabled": True, "base_url": "", "allowlisted_entities": [], "note": "x"}))
    assert store.load().enabled is True


def test_stale_revision_is_refused(store):
    first = seed_settings(store.data_dir, {"enabled": True})
    seed_settings(store.data_dir, {"allowlisted_entities": ["sensor.a"]})
    with pytest.raises(InvalidConfig) as caught:
        seed_settings(store.data_dir, {"enabled": False}, expected_revision=first.revision)
    assert caught.value.code == "CONFIG_STALE"
    assert store.load().enabled is True


def test_concurrent_writers_never_corrupt_the_file(store):
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(25):
                seed_settings(store.data_dir, {"allowlisted_entities": [f"sensor.w{n}_{i}"] * 3})
                store.load()
        except BaseException as err:  # collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.load().allowlisted_entities) == 1
    leftovers = [p.name for p in store.path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_display_name_prefers_the_picked_friendly_name():
    config = HomeAssistantConfig(allowlisted_entities=("sensor.living_room_temperature",),
                                 entity_names={"sensor.living_room_temperature": "Living Room"})
    assert config.display_name("sensor.living_room_temperature") == "Living Room"
    assert config.display_name("light.hall_ceiling") == "Hall ceiling"


def test_reset_works_on_a_path_that_cannot_be_read_and_keeps_every_broken_file(store):
    store.path.mkdir(parents=True)  # a directory where the file should be: unreadable as a file
    with pytest.raises(ConfigInvalid):
        store.load()
    store.reset()
    store.path.write_bytes(b"{broken again")
    store.reset()
    assert store.load() == HomeAssistantConfig()
    kept = [p for p in store.path.parent.iterdir() if p.name.startswith("home-assistant.json.broken-")]
    assert len(kept) == 2, "two resets in the same second keep both broken files"


def test_entity_names_lose_control_and_bidi_characters(store):
    saved = seed_settings(store.data_dir, {"allowlisted_entities": ["lock.front_door"],
                                           "entity_names": {"lock.front_door": "Front\u202e door\x07  lock\u200b"}})
    assert saved.config.entity_names == {"lock.front_door": "Front door lock"}


def test_concurrent_updates_of_different_fields_are_all_kept(store):
    """Each update is a read-modify-write under the lock: no writer's change is lost to another's."""
    errors: list[BaseException] = []

    def writer(field: str, values: list) -> None:
        try:
            for value in values:
                seed_settings(store.data_dir, {field: value})
        except BaseException as err:  # collected and asserted below
            errors.append(err)

    urls = [f"http://ha{i}.local:8123" for i in range(150)]
    lists = [[f"sensor.s{i}"] for i in range(150)]
    threads = [threading.Thread(target=writer, args=("base_url", urls)),
               threading.Thread(target=writer, args=("allowlisted_entities", lists))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = store.load()
    assert (final.base_url, final.allowlisted_entities) == (urls[-1], tuple(lists[-1]))


def test_a_name_s_line_break_or_tab_reads_as_a_space_not_as_nothing() -> None:
    """A name typed over two lines keeps its words apart; invisible characters still go."""
    assert shown_name("Cabin\nby the\tlake\u202e\x00", 40) == "Cabin by the lake"
