"""One rule for naming a key a request may not carry: named, cut to 64 characters, the same everywhere."""

from __future__ import annotations

import pytest

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.registry import REGISTRY
from console_ha.capabilities.stages import validate
from console_ha.errors import CapabilityError, InvalidConfig
from console_ha.store.datadir import DataDir
from console_ha.unknown_keys import MAX_SHOWN_KEY, first_unknown, shown_key
from tests.seed import seed_settings

LONG = "k" * 10_000
CUT = "k" * MAX_SHOWN_KEY + "…"


def test_a_short_key_is_shown_whole_and_a_long_one_cut_with_an_ellipsis() -> None:
    assert shown_key("start") == "start"
    assert shown_key("x" * MAX_SHOWN_KEY) == "x" * MAX_SHOWN_KEY
    assert shown_key(LONG) == CUT


def test_the_first_unknown_key_is_the_first_in_sorted_order() -> None:
    """Stable whatever the body's order: the same body always names the same key."""
    assert first_unknown({"b": 1, "a": 2, "ok": 3}, ["ok"]) == "a"
    assert first_unknown({"ok": 1}, ["ok"]) is None


def test_the_executor_names_an_unexpected_argument_by_the_rule() -> None:
    with pytest.raises(CapabilityError) as caught:
        validate(REGISTRY[GET_HISTORY], {"entity_id": "sensor.x", "period": "day", LONG: 1})
    assert caught.value.message == f"Unexpected argument: {CUT}."


def test_the_settings_save_names_an_unknown_setting_by_the_rule(data_dir: DataDir) -> None:
    with pytest.raises(InvalidConfig) as caught:
        seed_settings(data_dir, {LONG: True})
    assert caught.value.detail["field"] == CUT and CUT in caught.value.message
