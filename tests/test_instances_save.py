"""Adding, renaming and removing Home Assistant instances through the one save: the rules across instances."""

from __future__ import annotations

from typing import Any

import pytest

from console_ha.errors import InvalidConfig
from console_ha.settings.saving import recover_leftovers, remove_instance, save_settings
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import StoredToken, check_token
from console_ha.store.instances import MAX_INSTANCES, Instances
from tests.seed import hand_edit, seed_settings

HOUSE = "http://house.local:8123"
CABIN = "http://cabin.local:8123"


def refused(data_dir: DataDir, changes: dict[str, Any], *, instance: str, field: str, **kwargs: Any) -> str:
    """The save is refused with 400 INVALID_CONFIG on `field`, and no file of the data dir changed; its words."""
    before = _files(data_dir)
    with pytest.raises(InvalidConfig) as caught:
        seed_settings(data_dir, changes, instance=instance, **kwargs)
    assert caught.value.detail["field"] == field
    assert _files(data_dir) == before, "a refused save wrote something"
    return caught.value.message


def _files(data_dir: DataDir) -> dict[str, bytes]:
    return {str(p.relative_to(data_dir.root)): p.read_bytes() for p in data_dir.root.rglob("*")
            if p.is_file() and not p.name.endswith(".lock")}


def test_a_new_instance_needs_a_name_and_nothing_is_written_without_one(data_dir: DataDir) -> None:
    """A first save of a new id without a name (or with only spaces) makes nothing, not even its token."""
    seed_settings(data_dir, {"base_url": HOUSE}, token="house-token-123")
    refused(data_dir, {"base_url": CABIN}, instance="cabin", field="name", token="cabin-token-123")
    refused(data_dir, {"base_url": CABIN, "name": "   "}, instance="cabin", field="name")
    assert Instances(data_dir).ids() == ("home",)
    saved = seed_settings(data_dir, {"base_url": CABIN, "name": "Cabin"}, instance="cabin", token="cabin-token-123")
    assert saved.config.name == "Cabin" and Instances(data_dir).ids() == ("home", "cabin")
    assert Instances(data_dir).get("cabin").token.read_record() == StoredToken(check_token("cabin-token-123"), CABIN)


def test_at_most_eight_instances_and_the_refusal_says_so(data_dir: DataDir) -> None:
    """`home` and seven more; the ninth is refused on `instance`, naming the number."""
    for i in range(1, MAX_INSTANCES):
        seed_settings(data_dir, {"name": f"Place {i}"}, instance=f"place_{i}")
    assert len(Instances(data_dir).ids()) == MAX_INSTANCES
    words = refused(data_dir, {"name": "One too many"}, instance="ninth", field="instance")
    assert f"at most {MAX_INSTANCES} Home Assistants" in words
    remove_instance(Instances(data_dir), "place_3")
    seed_settings(data_dir, {"name": "One too many"}, instance="ninth")  # room again


@pytest.mark.parametrize("taken", ["Cabin", "cabin", "CABIN", "  Cabin ", "Cābin", "Ｃａｂｉｎ"])
def test_names_are_unique_without_case_or_diacritics(data_dir: DataDir, taken: str) -> None:
    """Two cards must never read the same: a name another instance has, as `fold` compares, is refused."""
    seed_settings(data_dir, {"name": "Cabin"}, instance="cabin")
    words = refused(data_dir, {"name": taken}, instance="shed", field="name")
    assert "already called Cabin" in words
    refused(data_dir, {"name": taken}, instance="home", field="name")  # home's rename too


def test_an_unnamed_home_is_called_home_in_every_language(data_dir: DataDir) -> None:
    """`home` without a name reads "Home", "Maison", "Zuhause", …: no other instance may be called that."""
    for name in ("Home", "Maison", "zuhause", "家"):
        refused(data_dir, {"name": name}, instance="cabin", field="name")
    seed_settings(data_dir, {"name": "House"})
    seed_settings(data_dir, {"name": "Maison"}, instance="cabin")  # home has its own name now
    # ...and home cannot go back to "Home" (empty) while the cabin reads as one of its translations.
    refused(data_dir, {"name": ""}, instance="home", field="name")


def test_a_save_with_a_name_renames_and_only_home_may_go_without_one(data_dir: DataDir) -> None:
    """A rename is a save with `name`; an empty name is `home`'s default ("Home"), never another's."""
    seed_settings(data_dir, {"name": "Cabin"}, instance="cabin")
    assert seed_settings(data_dir, {"name": "Chalet"}, instance="cabin").config.name == "Chalet"
    refused(data_dir, {"name": ""}, instance="cabin", field="name")
    assert seed_settings(data_dir, {"name": "House"}).config.name == "House"
    assert seed_settings(data_dir, {"name": ""}).config.name == ""
    assert Instances(data_dir).names() == {"home": "Home", "cabin": "Chalet"}


def test_an_instance_s_url_may_not_be_another_instance_s_origin(data_dir: DataDir) -> None:
    """One Home Assistant is added once: the cabin saved with the house's URL is refused, token or not."""
    seed_settings(data_dir, {"base_url": HOUSE}, token="house-token-123")
    words = refused(data_dir, {"name": "Cabin", "base_url": HOUSE + "/api"}, instance="cabin", field="base_url")
    assert words.startswith("Home already reads the Home Assistant at http://house.local:8123")
    seed_settings(data_dir, {"name": "Cabin", "base_url": CABIN}, instance="cabin", token="cabin-token-123")
    refused(data_dir, {"base_url": "HTTP://HOUSE.local:8123/"}, instance="cabin", field="base_url",
            token="another-token-123")
    refused(data_dir, {"base_url": CABIN}, instance="home", field="base_url", token="house-token-123")


def test_a_hand_edited_clash_still_lets_the_household_save_the_rest(data_dir: DataDir) -> None:
    """Rules are checked when what they are about changes: a clash made by hand blocks only its own fix."""
    seed_settings(data_dir, {"name": "Cabin", "base_url": CABIN}, instance="cabin")
    hand_edit(data_dir, {"base_url": CABIN, "name": "cabin"})  # the same URL and name, past the save's checks
    assert seed_settings(data_dir, {"enabled": True}).config.enabled
    assert seed_settings(data_dir, {"enabled": True}, instance="cabin").config.enabled


def test_each_instance_keeps_its_own_token_bound_to_its_own_origin(data_dir: DataDir) -> None:
    """Saving the cabin writes the cabin's token record only; moving it to another origin needs a new token."""
    seed_settings(data_dir, {"base_url": HOUSE}, token="house-token-123")
    seed_settings(data_dir, {"name": "Cabin", "base_url": CABIN}, instance="cabin", token="cabin-token-123")
    home, cabin = Instances(data_dir).home, Instances(data_dir).get("cabin")
    assert home.token.read_record() == StoredToken(check_token("house-token-123"), HOUSE)
    assert cabin.token.read_record() == StoredToken(check_token("cabin-token-123"), CABIN)
    refused(data_dir, {"base_url": "http://elsewhere.local:8123"}, instance="cabin", field="access_token")
    assert cabin.token.lookup(HOUSE, configured_url=CABIN).token is None


def test_a_create_never_adopts_what_an_unfinished_one_left(data_dir: DataDir) -> None:
    """A token written by a create that died before its settings file is not the next create's."""
    leftover = Instances(data_dir).get("cabin").token
    leftover.write(check_token("left-by-a-crash-123"), CABIN)  # the token written, the settings file never
    assert Instances(data_dir).ids() == ("home",) and Instances(data_dir).leftovers() == ("cabin",)
    saved = seed_settings(data_dir, {"name": "Cabin", "base_url": CABIN}, instance="cabin")
    assert saved.token is None and leftover.read_record() is None


def test_the_start_sweeps_the_secrets_of_ids_that_are_no_instance(data_dir: DataDir) -> None:
    """`recover_leftovers`: a token and CA left by an unfinished create or remove go; instances' stay."""
    seed_settings(data_dir, {"name": "Cabin", "base_url": CABIN}, instance="cabin", token="cabin-token-123")
    instances = Instances(data_dir)
    instances.get("shed").token.write(check_token("left-by-a-crash-123"), "http://shed.local:8123")
    instances.get("shed").files.ca_bundle.write_text("left")
    recover_leftovers(instances)
    assert not instances.get("shed").files.secrets.exists() and instances.leftovers() == ()
    assert instances.get("cabin").token.read_record() == StoredToken(check_token("cabin-token-123"), CABIN)


def test_remove_takes_the_token_ca_and_settings_and_never_home(data_dir: DataDir) -> None:
    """`remove_instance`: everything of the instance goes; `home`, or an id that is none, is refused on `instance`."""
    seed_settings(data_dir, {"name": "Cabin", "base_url": CABIN}, instance="cabin", token="cabin-token-123")
    cabin = Instances(data_dir).get("cabin")
    cabin.files.ca_bundle.write_text("a CA")
    remove_instance(Instances(data_dir), "cabin")
    assert not cabin.config.path.exists() and not cabin.files.secrets.exists()
    assert Instances(data_dir).ids() == ("home",)
    for instance in ("home", "cabin"):
        with pytest.raises(InvalidConfig) as caught:
            remove_instance(Instances(data_dir), instance)
        assert caught.value.detail["field"] == "instance"


def test_saving_home_never_touches_another_instance(data_dir: DataDir) -> None:
    """`save_settings` of home with the home stores writes home's files alone."""
    seed_settings(data_dir, {"name": "Cabin", "base_url": CABIN}, instance="cabin", token="cabin-token-123")
    cabin = Instances(data_dir).get("cabin")
    before = (cabin.config.path.read_bytes(), cabin.files.token.read_bytes())
    home = Instances(data_dir).home
    save_settings(home.config, home.token, {"base_url": HOUSE, "enabled": True}, token=check_token("house-token-1"))
    assert (cabin.config.path.read_bytes(), cabin.files.token.read_bytes()) == before
