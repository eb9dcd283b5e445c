"""What every registered capability declares, checked for each: a new read is held to all of it unasked."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from console_ha.capabilities.cards import Card, host_of
from console_ha.capabilities.executor import Executor
from console_ha.capabilities.registry import CAPABILITIES, REGISTRY
from console_ha.capabilities.spec import ENTITY_ARGUMENT, ENTITY_ID_SCHEMA, ENTITY_MARK, Capability
from console_ha.capabilities.stages import validate
from console_ha.conversation.activity import UNKNOWN_CAPABILITY_WORDS, CapabilityActivity
from console_ha.conversation.model import capability_name, function_name, tool_definitions
from console_ha.conversation.turn_loop import SYSTEM_PROMPT
from console_ha.errors import CapabilityError
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.ha.websocket import ALLOWED_COMMANDS
from console_ha.mcp.server import CAPABILITY_FOR_TOOL, output_schema, tool_name, tools
from console_ha.secret import Secret
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import DataDir
from tests.executors import console_client, executor_over
from tests.result_schemas import assert_matches_result_schema
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

CONFIG = HomeAssistantConfig(
    enabled=True,
    base_url="http://homeassistant.local:8123",
    allowlisted_entities=("sensor.living_room_temperature", "binary_sensor.front_door", "light.hall",
                          # issue 28's reads each answer for one domain (`Capability.answers_for`)
                          "calendar.family", "todo.shopping_list", "weather.home"),
    entity_names={"sensor.living_room_temperature": "Living Room Temperature"},
)
# OpenAI's function names, and MCP's tool names as the SDK accepts them.
FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

# Collected before any fixture wraps a capability: these are the registered capabilities as declared.
each = pytest.mark.parametrize("capability", list(REGISTRY.values()), ids=list(REGISTRY))


def allowed_entity(capability: Capability) -> str:
    """The first allowlisted entity the capability can answer for."""
    return next(e for e in CONFIG.allowlisted_entities
                if capability.answers_for is None or e.partition(".")[0] in capability.answers_for)


def sample_arguments(capability: Capability) -> dict[str, Any]:
    """Valid arguments for every declared argument, made from the schema (an allowed entity, the first choice)."""
    arguments: dict[str, Any] = {}
    for name, schema in capability.arguments_schema["properties"].items():
        if name not in capability.arguments_schema.get("required", []):
            continue  # optional: a capability answers without it (issue 18's filters are tested in their modules)
        if "enum" in schema:
            arguments[name] = schema["enum"][0]
        elif schema.get("pattern") == ENTITY_ID_SCHEMA["pattern"]:
            arguments[name] = allowed_entity(capability)
        elif "examples" in schema:  # issue 18, part B: free text (find_entities' query) shows an example
            arguments[name] = schema["examples"][0]
        else:
            pytest.fail(f"{capability.name}: teach sample_arguments to make a valid {name!r} ({schema})")
    return arguments


def test_the_registry_is_built_from_the_capability_modules_one_entry_each() -> None:
    assert list(REGISTRY) == [c.name for c in CAPABILITIES]
    assert len(set(REGISTRY)) == len(CAPABILITIES)


@each
def test_it_is_read_only_external_and_always_asks_the_household(capability: Capability) -> None:
    assert capability.classification.to_dict() == {
        "side_effect": "read_only", "network": "external", "confirmation": "required"}


@each
def test_its_bounds_are_present_and_sane(capability: Capability) -> None:
    bounds = capability.bounds
    assert 0 < bounds.timeout_seconds <= 30, "a household waits for the answer"
    assert 0 < bounds.max_result_bytes <= 64 * 1024, "RFC-0018's bound, what a small model's context can take"
    assert bounds.max_invocations_per_turn >= 1


@each
def test_its_name_maps_to_a_function_name_for_the_model_and_a_tool_name_for_mcp(capability: Capability) -> None:
    assert re.fullmatch(r"[a-z_]+\.[a-z_]+", capability.name)
    assert FUNCTION_NAME.fullmatch(function_name(capability.name))
    assert capability_name(function_name(capability.name)) == capability.name
    assert FUNCTION_NAME.fullmatch(tool_name(capability))
    assert CAPABILITY_FOR_TOOL[tool_name(capability)] == capability.name
    assert capability.description.strip()


@each
def test_its_schemas_are_valid_draft_2020_12(capability: Capability) -> None:
    Draft202012Validator.check_schema(capability.arguments_schema)
    Draft202012Validator.check_schema(capability.result_schema)
    assert capability.arguments_schema["type"] == "object" and capability.result_schema["type"] == "object"


@each
def test_its_arguments_schema_forbids_unknown_keys_and_each_argument_has_its_words(capability: Capability) -> None:
    schema = capability.arguments_schema
    assert schema["additionalProperties"] is False and "patternProperties" not in schema
    assert set(schema.get("required", [])) <= set(schema["properties"])
    assert set(capability.argument_messages) == set(schema["properties"])
    for name, message in capability.argument_messages.items():
        assert message.startswith(name) and message.endswith("."), "the words name the argument, as a sentence"


@each
def test_stage_2_accepts_valid_arguments_and_refuses_each_fault_with_its_words(capability: Capability) -> None:
    arguments = sample_arguments(capability)
    assert validate(capability, arguments) == arguments
    with pytest.raises(CapabilityError) as caught:
        validate(capability, {**arguments, "surprise": 1})
    assert (caught.value.code, caught.value.stage, caught.value.message) == (
        "INVALID_ARGUMENTS", 2, "Unexpected argument: surprise.")
    for name in capability.arguments_schema.get("required", []):
        with pytest.raises(CapabilityError) as caught:
            validate(capability, {k: v for k, v in arguments.items() if k != name})
        assert (caught.value.code, caught.value.message) == ("INVALID_ARGUMENTS", capability.argument_messages[name])


@each
def test_its_card_says_what_is_read_and_where_the_request_goes(capability: Capability) -> None:
    card = capability.card(CONFIG, sample_arguments(capability))
    assert isinstance(card, Card) and card.title.strip() and card.approve_label and card.deny_label
    assert host_of(CONFIG.base_url) in card.body


@each
def test_what_an_approval_binds_is_json_beside_the_address(capability: Capability) -> None:
    bound = capability.binds(CONFIG)
    assert isinstance(bound, Mapping) and "base_url" not in bound
    json.dumps(bound, sort_keys=True)


@each
def test_the_activity_page_has_its_words(capability: Capability) -> None:
    words = CapabilityActivity(capability.name).words
    assert words == capability.activity_words and words.strip() and words != UNKNOWN_CAPABILITY_WORDS


@each
def test_the_system_prompt_names_its_tool_and_what_its_result_fields_mean(capability: Capability) -> None:
    assert f"\n- {function_name(capability.name)}: {capability.prompt_summary}\n" in SYSTEM_PROMPT
    schema = json.dumps(capability.result_schema)
    for field, meaning in capability.result_meanings.items():
        assert f"\n- {field}: {meaning}" in SYSTEM_PROMPT
        assert f'"{field}"' in schema and json.dumps(meaning) in schema, "the schema describes it in the same words"


@each
def test_the_model_and_mcp_are_offered_it_as_declared(capability: Capability) -> None:
    (function,) = [t["function"] for t in tool_definitions() if t["function"]["name"] == function_name(capability.name)]
    assert function == {"name": function_name(capability.name), "description": capability.description,
                        "parameters": capability.published_arguments_schema}
    (tool,) = [t for t in tools() if t.name == tool_name(capability)]
    assert (tool.description, tool.inputSchema, tool.outputSchema) == (
        capability.description, capability.published_arguments_schema, output_schema(capability))
    # The result itself, or the early return of a call still waiting for the household (issue 20).
    assert tool.outputSchema is not None and capability.result_schema in tool.outputSchema["anyOf"]
    assert tool.annotations is not None and tool.annotations.readOnlyHint is True


@each
def test_execute_takes_what_the_executor_hands_it(capability: Capability) -> None:
    assert callable(capability.execute)
    inspect.signature(capability.execute).bind("client", CONFIG, {}, "deadline", "now")


# --- through the executor: the allowlist and the result schema hold for every capability -------------

# An entity the stub Home Assistant has and the household did not allow.
NOT_ALLOWED_ENTITY = "lock.front_door"


def entity_arguments(capability: Capability) -> list[str]:
    """The arguments that name an entity (an entity id, or a list of them), by their schema, not their name."""
    def names_an_entity(schema: Mapping[str, Any]) -> bool:
        if schema.get("pattern") == ENTITY_ID_SCHEMA["pattern"]:
            return True
        items = schema.get("items")
        return isinstance(items, Mapping) and names_an_entity(items)

    return [name for name, schema in capability.arguments_schema["properties"].items() if names_an_entity(schema)]


def configured_executor(data_dir: DataDir, stub: StubHomeAssistant) -> Executor:
    """An executor reading the stub Home Assistant with CONFIG's allowlist, every read allowed by the household."""
    # Its WebSocket answers the area registries (issue 18's reads place entities in areas), one entity placed.
    stub.serve_registries({CONFIG.allowlisted_entities[0]: "Living room"})
    seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url,
                             "allowlisted_entities": list(CONFIG.allowlisted_entities)}, token=stub.token)
    stub.serve_statistics()  # issue 19: get_statistics reads the recorder's statistics over the WebSocket
    stub.serve_everyday()  # issue 28: calendar.family, todo.shopping_list and weather.home
    if stub.logbook is None:
        stub.serve_logbook()  # get_logbook's one WebSocket read (an empty logbook unless a test adds entries)
    return executor_over(data_dir, clients=console_client)


def assert_entity_arguments_are_held_to_the_allowlist(executor: Executor, capability: Capability) -> None:
    """Stage 3 refuses, for every argument that names an entity, one the household did not allow."""
    for name in entity_arguments(capability):
        schema = capability.arguments_schema["properties"][name]
        # Of a domain it answers for (issue 28's reads refuse another kind at stage 2), not on the allowlist.
        entity = (NOT_ALLOWED_ENTITY if capability.answers_for is None
                  else f"{min(capability.answers_for)}.not_allowed")
        outside = [entity] if schema.get("type") == "array" else entity
        arguments = {**sample_arguments_with_entities(capability), name: outside}
        try:
            proposal = executor.propose(capability.name, arguments, conversation_id=f"outside-{name}")
        except CapabilityError as err:
            assert (err.code, err.stage) == ("ENTITY_NOT_ALLOWLISTED", 3), f"{capability.name}: {name}"
        else:
            executor.withdraw(proposal.token, conversation_id=f"outside-{name}")
            raise AssertionError(f"{capability.name} asked the household to read {outside!r} (argument {name!r}), "
                                 "which is not on the allowlist")


def sample_arguments_with_entities(capability: Capability) -> dict[str, Any]:
    """Valid arguments (as sample_arguments makes them), where a list of entity ids holds one allowed entity."""
    arguments: dict[str, Any] = {}
    for name, schema in capability.arguments_schema["properties"].items():
        if name not in capability.arguments_schema.get("required", []):
            continue  # optional, as in sample_arguments
        if "enum" in schema:
            arguments[name] = schema["enum"][0]
        elif name in entity_arguments(capability):
            entity = allowed_entity(capability)
            arguments[name] = [entity] if schema.get("type") == "array" else entity
        elif "examples" in schema:  # issue 18, part B
            arguments[name] = schema["examples"][0]
        else:
            pytest.fail(f"{capability.name}: teach sample_arguments_with_entities to make a valid {name!r} ({schema})")
    return arguments


@each
def test_an_entity_it_names_must_be_on_the_allowlist(capability: Capability, data_dir: DataDir,
                                                      stub_ha: StubHomeAssistant) -> None:
    """Stage 3's allowlist holds for every argument that names an entity, whatever the argument is called."""
    assert_entity_arguments_are_held_to_the_allowlist(configured_executor(data_dir, stub_ha), capability)


def test_the_allowlist_invariant_catches_an_entity_argument_stage_3_does_not_check(
        data_dir: DataDir, stub_ha: StubHomeAssistant, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new read naming its entity `entity` (or taking a list) would read outside the allowlist: caught."""
    history = REGISTRY["home_assistant.get_history"]
    for properties in ({"entity": ENTITY_ID_SCHEMA, "period": history.arguments_schema["properties"]["period"]},
                       {"entity_ids": {"type": "array", "items": ENTITY_ID_SCHEMA}}):
        sketch = dataclasses.replace(
            history, name="home_assistant.sketch",
            arguments_schema={"type": "object", "required": list(properties), "properties": properties,
                              "additionalProperties": False},
            argument_messages={name: f"{name} is wrong." for name in properties},
            card=lambda config, arguments, facts=None: Card("Read it?", "A sketch of a new read."))
        monkeypatch.setitem(REGISTRY, sketch.name, sketch)
        with pytest.raises(AssertionError, match="not on the allowlist"):
            assert_entity_arguments_are_held_to_the_allowlist(configured_executor(data_dir, stub_ha), sketch)


@each
def test_every_argument_that_names_an_entity_carries_the_mark_stage_3_obeys(capability: Capability) -> None:
    """The marked arguments (what stage 3 checks) are exactly those shaped like an entity id or a list of them."""
    assert capability.entity_arguments == tuple(entity_arguments(capability))


def register_list_sketch(monkeypatch: pytest.MonkeyPatch, items: dict[str, Any]) -> Capability:
    """A sketch of a capability taking `entities`, a list whose items are `items`, registered for the test."""
    properties = {"entities": {"type": "array", "items": items}}
    sketch = dataclasses.replace(
        REGISTRY["home_assistant.get_history"], name="home_assistant.sketch",
        arguments_schema={"type": "object", "required": ["entities"], "properties": properties,
                          "additionalProperties": False},
        argument_messages={"entities": "entities is wrong."},
        card=lambda config, arguments, facts=None: Card("Read them?", "A sketch of a capability taking a list."))
    monkeypatch.setitem(REGISTRY, sketch.name, sketch)
    return sketch


def test_a_marked_list_of_entities_is_held_to_the_allowlist_entity_by_entity(
        data_dir: DataDir, stub_ha: StubHomeAssistant, monkeypatch: pytest.MonkeyPatch) -> None:
    """A capability taking a list needs no change to the executor: every entity in it must be allowed."""
    sketch = register_list_sketch(monkeypatch, ENTITY_ARGUMENT)
    assert sketch.entity_arguments == ("entities",)
    executor = configured_executor(data_dir, stub_ha)
    assert_entity_arguments_are_held_to_the_allowlist(executor, sketch)
    allowed = list(CONFIG.allowlisted_entities)
    with pytest.raises(CapabilityError) as caught:
        executor.propose(sketch.name, {"entities": [*allowed, NOT_ALLOWED_ENTITY]}, conversation_id="list")
    assert (caught.value.code, caught.value.stage, caught.value.message) == (
        "ENTITY_NOT_ALLOWLISTED", 3, "That entity is not one the household allowed the assistant to read.")
    proposal = executor.propose(sketch.name, {"entities": allowed}, conversation_id="list")
    executor.withdraw(proposal.token, conversation_id="list")


@pytest.mark.parametrize("misplaced", [
    {"type": "object", "properties": {"where": {"type": "object", "properties": {"entity": ENTITY_ARGUMENT}}},
     "additionalProperties": False},
    {"type": "object", "properties": {"entity": {**ENTITY_ID_SCHEMA, ENTITY_MARK: "yes"}},
     "additionalProperties": False},
], ids=["nested", "not-true"])
def test_a_mark_stage_3_would_not_see_is_refused_when_the_capability_is_made(misplaced: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="entity mark"):
        dataclasses.replace(REGISTRY["home_assistant.list_entities"], arguments_schema=misplaced)


def test_the_instance_argument_is_the_executor_s_and_no_read_may_declare_it() -> None:
    schema = {"type": "object", "properties": {"instance": {"type": "string"}}, "additionalProperties": False}
    with pytest.raises(ValueError, match="instance is the executor's"):
        dataclasses.replace(REGISTRY["home_assistant.list_entities"], arguments_schema=schema,
                            argument_messages={"instance": "instance is wrong."})


@each
def test_it_declares_read_only_home_assistant_reads(capability: Capability) -> None:
    # A read may be WebSocket commands only (get_statistics); it declares something either way.
    assert capability.reads.paths or capability.reads.commands
    assert all(path.startswith("/api/") for path in capability.reads.paths)
    assert capability.reads.commands <= ALLOWED_COMMANDS


@each
def test_what_it_declares_it_reads_is_all_it_needs(
        capability: Capability, data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    """Through a client allowed its declared reads and nothing else, the read succeeds as declared."""
    @contextmanager
    def declared_only(base_url: str, token: Secret, ca_bundle: str | None) -> Iterator[HomeAssistantClient]:
        with HomeAssistantClient(base_url, token, ca_bundle=ca_bundle, reads=capability.reads) as client:
            yield client

    configured_executor(data_dir, stub_ha)  # the settings and the token
    executor = executor_over(data_dir, clients=declared_only)
    proposal = executor.propose(capability.name, sample_arguments_with_entities(capability), conversation_id="c")
    assert_matches_result_schema(capability.name, executor.answer(proposal.token, approve=True, conversation_id="c"))


@each
def test_a_read_through_the_executor_returns_what_its_result_schema_declares(
        capability: Capability, data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    """Every capability runs at least once in the tests, so its result schema is checked against a real result."""
    executor = configured_executor(data_dir, stub_ha)
    proposal = executor.propose(capability.name, sample_arguments_with_entities(capability), conversation_id="c")
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert_matches_result_schema(capability.name, result)


# --- the sketch in docs/capabilities.md ("Adding a read") is held to the same checks -----------------------

DOCS = Path(__file__).resolve().parent.parent / "docs" / "capabilities.md"


def docs_sketch() -> Capability:
    """The new read the docs sketch (not registered), made from the page's own code block."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Adding a read", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, str(DOCS), "exec"), namespace)  # our own docs, read as a test fixture
    capability = namespace["CAPABILITY"]
    assert isinstance(capability, Capability) and capability.name not in REGISTRY
    return capability


@pytest.mark.parametrize("check", [
    test_it_is_read_only_external_and_always_asks_the_household,
    test_its_bounds_are_present_and_sane,
    test_its_schemas_are_valid_draft_2020_12,
    test_its_arguments_schema_forbids_unknown_keys_and_each_argument_has_its_words,
    test_stage_2_accepts_valid_arguments_and_refuses_each_fault_with_its_words,
    test_its_card_says_what_is_read_and_where_the_request_goes,
    test_what_an_approval_binds_is_json_beside_the_address,
    test_execute_takes_what_the_executor_hands_it,
], ids=lambda check: check.__name__.removeprefix("test_"))
def test_the_docs_sketch_of_a_new_read_passes_the_declarative_invariants(check: Any) -> None:
    check(docs_sketch())


def test_the_docs_sketch_registered_reads_what_it_declares_and_returns_its_schema(
        data_dir: DataDir, stub_ha: StubHomeAssistant, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sketch's steps are true: one line in the registry, and it reads through its declared reads only."""
    sketch = docs_sketch()
    monkeypatch.setitem(REGISTRY, sketch.name, sketch)
    test_what_it_declares_it_reads_is_all_it_needs(sketch, data_dir, stub_ha)


@pytest.mark.parametrize("capability", CAPABILITIES, ids=lambda c: c.name)
def test_what_callers_are_given_is_the_arguments_schema_without_the_entity_mark(capability: Capability) -> None:
    """Issue 17 changes nothing a program sees: the model's and MCP's schemas carry no mark, only the declared shape."""
    published = json.dumps(capability.published_arguments_schema)
    assert ENTITY_MARK not in published
    assert json.loads(published) == _unmarked(capability.arguments_schema)
    for definition in tool_definitions():
        if capability_name(definition["function"]["name"]) == capability.name:
            assert ENTITY_MARK not in json.dumps(definition)
    assert all(ENTITY_MARK not in json.dumps(tool.inputSchema) for tool in tools())


def _unmarked(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {key: _unmarked(value) for key, value in schema.items() if key != ENTITY_MARK}
    return schema


@pytest.mark.parametrize("named", [[["sensor.living_room_temperature"]], [{"id": "light.hall"}]],
                         ids=["nested-list", "object"])
def test_a_marked_value_that_is_not_an_id_is_refused_at_stage_3_not_raised(
        data_dir: DataDir, stub_ha: StubHomeAssistant, monkeypatch: pytest.MonkeyPatch, named: list[Any]) -> None:
    """A mark on a loose schema (items of any type) lets lists or objects through stage 2: stage 3 refuses them."""
    sketch = register_list_sketch(monkeypatch, {ENTITY_MARK: True})
    executor = configured_executor(data_dir, stub_ha)
    with pytest.raises(CapabilityError) as caught:
        executor.propose(sketch.name, {"entities": named}, conversation_id="loose")
    assert (caught.value.code, caught.value.stage) == ("ENTITY_NOT_ALLOWLISTED", 3)
    assert stub_ha.requests == []
