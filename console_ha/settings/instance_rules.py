"""What adding, renaming and removing a Home Assistant instance must respect; checked by the save, under its lock.

An instance is made by the first save of a new id with a name, renamed by a save with another name, and removed
on its own (`saving.remove_instance`). The rules that look beyond one instance's file live here: at most
`MAX_INSTANCES`; names the household cannot mistake for one another on a card (compared as `folding.fold` does,
and `home` unnamed reads "Home" in every language); and one Home Assistant added once, so that no two instances
share an origin and a token bound to one instance's origin can never be sent to another instance's. Discovery
offers only what is not added yet, by the same origins.
"""

from __future__ import annotations

from collections.abc import Iterable

from console_ha.errors import InvalidSettingsChange, SettingsFileDamaged
from console_ha.folding import fold
from console_ha.ha.addresses import origin_of
from console_ha.ha.discovery import Instance
from console_ha.language import LANGUAGES, Words
from console_ha.store.config import NAME, HomeAssistantConfig
from console_ha.store.datadir import HOME_INSTANCE
from console_ha.store.instances import HOME_NAME, MAX_INSTANCES, Instances, name_of

# The query parameter (and the no-JavaScript form's field) that chooses the instance a request is about.
INSTANCE_FIELD = "instance"
INSTANCE_ID_SHAPE = Words("A Home Assistant's id is 1 to 32 lower-case letters, digits and underscores.")
# Why a refused base_url is refused, for a page that offers to open the instance that has it.
URL_OF_ANOTHER_INSTANCE = "url_of_another_instance"


def no_such_instance(instance: str) -> InvalidSettingsChange:
    """400 INVALID_CONFIG on `instance`: this Console has no instance with that id."""
    return InvalidSettingsChange(Words("This Console has no Home Assistant with the id {instance}.",
                                       instance=instance), field=INSTANCE_FIELD)


def check_instance_change(instances: Instances, instance: str, current: HomeAssistantConfig,
                          new: HomeAssistantConfig, *, creating: bool, reset: bool = False) -> None:
    """400 INVALID_CONFIG when a save of `instance` (`current` -> `new`) breaks a rule across instances.

    `creating`: the instance does not exist yet (this save makes it). Each rule is checked only when what it is
    about changes, so a data dir edited by hand into breaking one still lets the household save the rest.
    `reset`: the damaged file's name is lost with it, so the name `new` gives (or `home`'s "Home") is checked
    as a new one.
    """
    if creating and len(instances.ids()) >= MAX_INSTANCES:
        raise InvalidSettingsChange(
            Words("This Console reads at most {count} Home Assistants. Remove one before adding another.",
                  count=MAX_INSTANCES), field=INSTANCE_FIELD, most=MAX_INSTANCES)
    renamed = creating or reset or new.name != current.name
    if renamed and instance != HOME_INSTANCE and not new.name:
        raise NAME.refuse(Words("Give this Home Assistant a name, such as Cabin: its cards and the Settings page "
                                "show it."))
    moved = bool(new.base_url) and (creating or _origin(new.base_url) != _origin(current.base_url))
    if not (renamed or moved):
        return  # most saves (the allowlist, the switch): no other instance's file is read
    others = _others(instances, instance)
    if renamed:
        _refuse_a_taken_name(instance, new, others)
    if moved:
        _refuse_a_taken_origin(new.base_url, others)


def _others(instances: Instances, instance: str | None) -> list[tuple[str, HomeAssistantConfig]]:
    """Every instance's settings but `instance`'s; a damaged file counts as empty (its default name, no URL)."""
    others = []
    for other in instances.ids():
        if other == instance:
            continue
        try:
            others.append((other, instances.get(other).config.load()))
        except SettingsFileDamaged:
            others.append((other, HomeAssistantConfig()))
    return others


def _readings(instance: str, config: HomeAssistantConfig) -> set[str]:
    """Every way a card can show this instance's name, folded: `home` unnamed is "Home" in each language."""
    if config.name or instance != HOME_INSTANCE:
        return {fold(name_of(instance, config))}
    return {fold(HOME_NAME.in_language(language)) for language in LANGUAGES}


def _refuse_a_taken_name(instance: str, new: HomeAssistantConfig,
                         others: Iterable[tuple[str, HomeAssistantConfig]]) -> None:
    mine = _readings(instance, new)
    for other, config in others:
        if mine & _readings(other, config):
            raise NAME.refuse(Words("Another Home Assistant here is already called {name}. Choose a name its cards "
                                    "cannot be mistaken for.", name=name_of(other, config)))


def _refuse_a_taken_origin(base_url: str, others: Iterable[tuple[str, HomeAssistantConfig]]) -> None:
    origin = _origin(base_url)
    for other, config in others:
        if config.base_url and _origin(config.base_url) == origin:
            raise InvalidSettingsChange(
                Words("{name} already reads the Home Assistant at {origin}: a Home Assistant is added once.",
                      name=name_of(other, config), origin=origin),
                field="base_url", reason=URL_OF_ANOTHER_INSTANCE, instance=other)


def not_added(found: Iterable[Instance], instances: Instances) -> list[Instance]:
    """The discovered Home Assistants no instance reads yet: none of the origins it advertises is an instance's."""
    added = {_origin(config.base_url) for _, config in _others(instances, None) if config.base_url}
    return [instance for instance in found if not instance.origins() & added]


def _origin(base_url: str) -> str:
    return origin_of(base_url) if base_url else ""
