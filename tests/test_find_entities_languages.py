"""find_entities in the household's six languages: words for kinds of things in each, and names and rooms
written the household's way (French, German, Spanish, Dutch, and Chinese, which is written without spaces)."""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

import pytest

from console_ha.capabilities.executor import Executor
from console_ha.capabilities.find_entities import find, query_words
from console_ha.capabilities.household_words import HOUSEHOLD_WORDS, LANGUAGES, STOP_WORDS, Kind, vocabulary
from console_ha.folding import fold
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import DataDir
from tests.executors import configured
from tests.stub_ha import StubHomeAssistant
from tests.test_find_entities import ids, search

TABLE = tomllib.loads(resources.files("console_ha.capabilities").joinpath("household_words.toml")
                      .read_text(encoding="utf-8"))
# Every English word find_entities understood before the table had other languages (issue 18).
ENGLISH_WORDS = {
    "lamp", "bulb", "lighting", "thermometer", "temperature", "temp", "warm", "cold", "thermostat", "heating",
    "heater", "boiler", "humidity", "humid", "door", "window", "open", "garage", "blind", "shutter", "shade",
    "curtain", "gate", "motion", "movement", "presence", "occupancy", "smoke", "leak", "flood", "moisture",
    "plug", "socket", "outlet", "power", "energy", "electricity", "consumption", "battery", "tv", "television",
    "speaker", "music", "forecast", "rain", "vacuum", "hoover", "mower", "person", "people", "phone",
    "aircon",  # added in issue 25's review: 空调, la clim, die Klimaanlage, de airco named no kind
}

# A household that names its devices and rooms in its own language: entity id, name, device class, room.
HOME: list[tuple[str, str, str | None, str]] = [
    ("light.salon", "Lampe du salon", None, "Salon"),
    ("sensor.salon_temperature", "Température du salon", "temperature", "Salon"),
    ("light.salle_de_bain", "Plafonnier", None, "Salle de bain"),
    ("light.wohnzimmer", "Deckenleuchte", None, "Wohnzimmer"),
    ("binary_sensor.haustur", "Haustür", "door", "Flur"),
    ("light.cocina", "Luz de la cocina", None, "Cocina"),
    ("cover.persiana", "Persiana del dormitorio", "blind", "Dormitorio"),
    ("light.keuken", "Keukenlamp", None, "Keuken"),
    ("binary_sensor.raam", "Raam slaapkamer", "window", "Slaapkamer"),
    ("light.keting", "客厅吊灯", None, "客厅"),
    ("sensor.woshi_wendu", "卧室温度", "temperature", "卧室"),
    ("sensor.zhuwo_wendu", "主卧温度计", "temperature", "主卧"),
    ("cover.woshi_chuanglian", "卧室窗帘", "curtain", "卧室"),
    ("binary_sensor.ruhumen", "入户门", "door", "玄关"),
    ("switch.kafeiji", "咖啡机", "outlet", "厨房"),
    ("climate.keting", "Split", None, "客厅"),
]
AREA = {entity_id: area for entity_id, _, _, area in HOME}
LIGHTS = [entity_id for entity_id, *_ in HOME if entity_id.startswith("light.")]
THERMOMETERS = [entity_id for entity_id, _, device_class, _ in HOME if device_class == "temperature"]
DOORS = [entity_id for entity_id, _, device_class, _ in HOME if device_class == "door"]


def states() -> list[dict[str, Any]]:
    return [{"entity_id": entity_id, "state": "on",
             "attributes": {"friendly_name": name, **({"device_class": device_class} if device_class else {})}}
            for entity_id, name, device_class, _ in HOME]


def found(query: str) -> dict[str, Any]:
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123",
                                 allowlisted_entities=tuple(entity_id for entity_id, *_ in HOME))
    return find(states(), config, AREA.get, query)


def test_every_english_word_has_words_in_the_five_other_languages() -> None:
    assert set(TABLE["words"]) == ENGLISH_WORDS
    for english, entry in TABLE["words"].items():
        assert entry["kinds"], english
        for language in LANGUAGES[1:]:
            assert entry[language] and all(isinstance(word, str) and word for word in entry[language]), \
                (english, language)
    assert all(TABLE["stop_words"][language] for language in LANGUAGES)


@pytest.mark.parametrize("language", LANGUAGES[1:])
def test_each_word_of_each_language_names_the_kinds_of_its_english_word(language: str) -> None:
    """Asked alone, "lampe", "Lampen", "lámpara", "lamp" or "灯" names light, as "lamp" does; none is a stop word."""
    for english, entry in TABLE["words"].items():
        english_kinds = {Kind(*spec.split("/", 1)) for spec in entry["kinds"]}
        assert english_kinds <= set(HOUSEHOLD_WORDS[english])
        for word in entry[language]:
            words = query_words(word)
            assert [w.text for w in words] == [fold(word)], (english, word)
            assert english_kinds <= set(words[0].kinds), (english, word)


def test_a_word_of_two_words_is_refused_by_the_table() -> None:
    """A query is cut at spaces and hyphens, so "chauffe-eau" in the table could never match: loading says so."""
    table = {"stop_words": {language: [] for language in LANGUAGES},
             "words": {"boiler": {"kinds": ["water_heater"], **{language: ["chauffe-eau"] for language in LANGUAGES}}}}
    with pytest.raises(ValueError, match="chauffe-eau"):
        vocabulary(table)


def test_a_word_in_two_entries_names_the_kinds_of_both() -> None:
    assert set(HOUSEHOLD_WORDS["prise"]) >= {Kind("switch", "outlet"), Kind("switch")}
    assert {"les", "die", "los", "het", "的"} <= STOP_WORDS


@pytest.mark.parametrize(("query", "first", "why"), [
    ("Quelles lampes sont allumées dans le salon ?", "light.salon",
     {"lampes": "friendly_name", "salon": "friendly_name"}),
    ("Welche Lampen sind im Wohnzimmer an?", "light.wohnzimmer", {"lampen": "domain", "wohnzimmer": "area"}),
    ("¿Qué luces están encendidas en la cocina?", "light.cocina", {"luces": "domain", "cocina": "friendly_name"}),
    ("Welke lampen zijn aan in de keuken?", "light.keuken", {"lampen": "domain", "keuken": "area"}),
    ("客厅的灯", "light.keting", {"客厅": "friendly_name", "灯": "friendly_name"}),
    ("卧室温度", "sensor.woshi_wendu", {"卧室": "friendly_name", "温度": "friendly_name"}),
    ("主卧的温度计", "sensor.zhuwo_wendu", {"主卧": "friendly_name", "温度计": "friendly_name"}),
    ("la persiana del dormitorio", "cover.persiana", {"persiana": "friendly_name", "dormitorio": "friendly_name"}),
    ("卧室的窗帘", "cover.woshi_chuanglian", {"卧室": "friendly_name", "窗帘": "friendly_name"}),
    ("le plafonnier de la salle de bain", "light.salle_de_bain",
     {"plafonnier": "friendly_name", "salle": "area", "bain": "area"}),
], ids=["fr", "de", "es", "nl", "zh-light", "zh-temperature", "zh-thermometer", "es-blind", "zh-curtain", "fr-room"])
def test_a_question_in_the_households_language_finds_its_device_first(query: str, first: str,
                                                                      why: dict[str, str]) -> None:
    match = found(query)["matches"][0]
    assert (match["entity_id"], match["why"]) == (first, why)


@pytest.mark.parametrize(("query", "expected"), [
    ("thermomètre", THERMOMETERS), ("Thermometer", THERMOMETERS), ("termómetro", THERMOMETERS),
    ("thermometer", THERMOMETERS), ("温度计", THERMOMETERS),
    ("lampes", LIGHTS), ("Leuchten", LIGHTS), ("lámparas", LIGHTS), ("lichten", LIGHTS), ("灯光", LIGHTS),
    ("portes", DOORS), ("Türen", DOORS), ("puertas", DOORS), ("deuren", DOORS), ("门", DOORS),
])
def test_a_word_for_a_kind_finds_every_device_of_that_kind_and_no_other(query: str, expected: list[str]) -> None:
    assert sorted(ids(found(query))) == sorted(expected)


@pytest.mark.parametrize("query", ["空调开着吗", "la clim est allumée ?", "Ist die Klimaanlage an?",
                                   "¿Está encendido el aire acondicionado?", "Staat de airco aan?", "aircon"])
def test_the_air_conditioning_is_found_in_each_language(query: str) -> None:
    """A climate device whose name and room hold none of the query's words is found by its kind, first."""
    assert ids(found(query))[:1] == ["climate.keting"]


def test_which_lights_are_on_in_chinese_finds_lights_and_no_door() -> None:
    """"开着" is "on" (灯开着) as well as "open" (门开着): the lights asked about, not every door and window."""
    assert sorted(ids(found("哪些灯开着？"))) == sorted(LIGHTS)
    assert ids(found("门开着吗")) == DOORS


def test_chinese_is_cut_by_the_tables_words_and_into_pairs() -> None:
    assert [w.text for w in query_words("主卧室温度计")] == ["主卧室", "温度计", "主卧", "卧室"]
    assert [w.text for w in query_words("哪些灯开着？")] == ["灯"]  # "开着" is "on" here, a stop word
    assert [w.text for w in query_words("kitchen灯")] == ["kitchen", "灯"]


def test_french_and_chinese_rooms_and_names_match_over_real_http(data_dir: DataDir,
                                                                  stub_ha: StubHomeAssistant) -> None:
    """Through the executor and the stub's /api/states and registries, as a household would ask."""
    stub_ha.states.extend(states())
    stub_ha.serve_registries(AREA)
    executor: Executor = configured(data_dir, stub_ha, [entity_id for entity_id, *_ in HOME])
    result = search(executor, "lumières de la salle de bain")
    assert ids(result)[0] == "light.salle_de_bain" and result["matches"][0]["area"] == "Salle de bain"
    result = search(executor, "卧室里的温度是多少")
    assert ids(result)[0] == "sensor.woshi_wendu" and result["matches"][0]["area"] == "卧室"
    assert ids(search(executor, "咖啡机"))[0] == "switch.kafeiji"
