"""The executor's stage hooks (issue 30): `before_toolcall` between stages 2 and 3, `after_toolcall` after stage 6.

A plugin may refuse, narrow the arguments or narrow the result; the executor's own stages still run after it,
and every refusal, change, dropped answer and skipped plugin is audited by name, never by value.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.executor import Executor
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.stages import Stage
from console_ha.console import Console, ConsoleOptions
from console_ha.conversation.activity import EVENT_WORDS, REFUSED_BY_A_PLUGIN, summarise
from console_ha.hooks import hookimpl
from console_ha.language import Words
from console_ha.plugins.plugin_registry import Plugins
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.datadir import DataDir
from console_ha.store.instances import Instances
from console_ha.store.plugin_switches import PluginSwitches
from console_ha.words import CHAT_WORDS
from tests.executors import refusal
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant
from tests.test_narrowing import Posing

TEMPERATURE = "sensor.living_room_temperature"
DOOR = "binary_sensor.front_door"
ALLOWED = [TEMPERATURE, DOOR, "binary_sensor.hallway_motion"]
HISTORY_ARGS = {"entity_id": TEMPERATURE, "period": "day"}
# Every executor's clock: two reads of the same stub give the same result (its `retrieved_at` too).
NOW = time.time()


def plugins_with(data_dir: DataDir, **given: object) -> Plugins:
    """The household's plugins: those given, registered under their keyword's name."""
    plugins = Plugins(PluginSwitches(data_dir))
    for name, plugin in given.items():
        plugins.register(plugin, name)
    return plugins


def executor_with(data_dir: DataDir, stub: StubHomeAssistant, **given: object) -> Executor:
    """An executor over `data_dir`, set up for `stub` with `ALLOWED`, and the plugins given."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url, "allowlisted_entities": ALLOWED},
                  token=stub.token)
    return Executor(Instances(data_dir), audit=AuditLog(data_dir), confirmations=ConfirmationStore(),
                    plugins=plugins_with(data_dir, **given), clock=lambda: NOW)


def audit_lines(data_dir: DataDir) -> list[dict[str, Any]]:
    path = data_dir.audit_log
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def plugin_lines(data_dir: DataDir) -> list[tuple[str, str | None, str | None, int]]:
    return [(line["event"], line.get("plugin"), line.get("hook"), line["stage"]) for line in audit_lines(data_dir)
            if "plugin" in line or "hook" in line]


def read(executor: Executor, name: str, arguments: dict[str, Any], client: str | None = None) -> dict[str, Any]:
    proposal = executor.propose(name, arguments, conversation_id="c", client=client)
    return executor.answer(proposal.token, approve=True, conversation_id="c")


class Refuses:
    @hookimpl
    def before_toolcall(self, capability):
        return "no reads at night, from 23:00 to 07:00"


class Names:
    """Asks about another entity than the model did (one on the allowlist unless told another)."""

    def __init__(self, entity: str = DOOR) -> None:
        self.entity = entity

    @hookimpl
    def before_toolcall(self, arguments):
        return {**arguments, "entity_id": self.entity}


class Returns:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    @hookimpl
    def before_toolcall(self, principal):
        return self.answer


class Sees:
    """Records what each hook was handed."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    @hookimpl
    def before_toolcall(self, capability, arguments, principal):
        self.seen.append({"capability": capability, "arguments": arguments, "principal": principal})

    @hookimpl
    def after_toolcall(self, result, principal):
        self.seen.append({"result": result, "principal": principal})


class DropsFirstEntity:
    @hookimpl
    def after_toolcall(self, capability, result):
        if capability == LIST_ENTITIES:
            return {**result, "entities": result["entities"][1:]}
        return None


# --- before_toolcall ------------------------------------------------------------------------------


def test_a_proposal_sweeps_the_expired_cards_once_as_before_its_two_steps(data_dir, stub_ha, monkeypatch):
    """`propose` is `prepare` then `issue`; each swept the confirmation store (its lock) before, so every read of
    the household's page took one look more than before issue 30, with no plugin too (docs/benchmarks.md)."""
    executor = executor_with(data_dir, stub_ha)
    expire = executor.confirmations.expire
    swept: list[list[Any]] = []

    def sweeping() -> list[Any]:
        swept.append(expire())
        return swept[-1]

    monkeypatch.setattr(executor.confirmations, "expire", sweeping)
    executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c")
    assert len(swept) == 1


def test_a_refusal_ends_the_call_at_stage_3_before_any_card_and_names_the_plugin(data_dir, stub_ha):
    executor = executor_with(data_dir, stub_ha, quiet_hours=Refuses())
    err = refusal(lambda: executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c"))
    assert (err.code, err.stage) == ("REFUSED_BY_PLUGIN", Stage.POLICY)
    assert err.message == ("A plugin the household installed (quiet_hours) refused this read: no reads at night, "
                           "from 23:00 to 07:00")
    assert err.to_dict()["error"]["code"] == "REFUSED_BY_PLUGIN"
    events = [line["event"] for line in audit_lines(data_dir)]
    assert events == ["proposed", "rejected"]  # no card was asked for
    assert audit_lines(data_dir)[-1] | {"time": "", "invocation": ""} == {
        "time": "", "invocation": "", "event": "rejected", "capability": GET_HISTORY,
        "classification": "read_only/external/required", "stage": 3, "code": "REFUSED_BY_PLUGIN",
        "plugin": "quiet_hours", "hook": "before_toolcall", "instance": "home"}
    assert "night" not in data_dir.audit_log.read_text()  # the reason is the model's, not the audit's
    assert stub_ha.requests == []
    assert CHAT_WORDS["REFUSED_BY_PLUGIN"]


def test_a_long_reason_reaches_the_model_on_one_line_and_cut(data_dir, stub_ha):
    executor = executor_with(data_dir, stub_ha, wordy=Returns("why\n" * 200))
    err = refusal(lambda: executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c"))
    assert "\n" not in err.message and err.message.endswith("…") and len(err.message) < 300


def test_the_model_is_told_the_plugin_and_its_reason_on_one_bounded_line_with_nothing_invisible(data_dir, stub_ha):
    """A plugin names itself (an entry point's name may be 10 KB, with escapes and bidi overrides) and words its
    reason: the model is told both as a card shows text."""
    name = "loud\x1b[2J\u202e" + "n" * 10_000
    reason = "no\x00 reads\u202e\u2066 at\x1b[31m night\r\n" + "why " * 10_000
    executor = executor_with(data_dir, stub_ha, **{name: Returns(reason)})
    err = refusal(lambda: executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c"))
    assert err.message.isprintable() and len(err.message) < 400
    assert "(loud[2J" + "n" * 57 + ")" in err.message and "no reads at[31m night why why" in err.message
    assert err.message.endswith("…")
    assert "why" not in data_dir.audit_log.read_text()  # the reason stays the model's


def test_narrower_arguments_are_what_the_card_shows_and_what_is_read(data_dir, stub_ha):
    executor = executor_with(data_dir, stub_ha, door_only=Names(DOOR))
    proposal = executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c")
    assert proposal.arguments == {"entity_id": DOOR, "period": "day"}
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert result["entity_id"] == DOOR
    read_paths = [request.path for request in stub_ha.requests]
    assert read_paths and all(TEMPERATURE not in path for path in read_paths)
    assert plugin_lines(data_dir) == [("plugin_changed", "door_only", "before_toolcall", 3)]


def test_arguments_naming_an_entity_off_the_allowlist_are_refused_at_stage_3(data_dir, stub_ha):
    executor = executor_with(data_dir, stub_ha, widens=Names("lock.front_door"))
    err = refusal(lambda: executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c"))
    assert (err.code, err.stage) == ("ENTITY_NOT_ALLOWLISTED", Stage.POLICY)
    # The change is the plugin's line; the refusal is the allowlist's, as for any arguments.
    assert plugin_lines(data_dir) == [("plugin_changed", "widens", "before_toolcall", 3)]
    assert audit_lines(data_dir)[-1]["code"] == "ENTITY_NOT_ALLOWLISTED"
    assert stub_ha.requests == [] and "lock.front_door" not in data_dir.audit_log.read_text()


@pytest.mark.parametrize("answer", [
    {"entity_id": TEMPERATURE, "period": "century"},
    {"entity_id": TEMPERATURE, "period": "day", "instance": "nowhere"},
    {"entity_id": TEMPERATURE, "period": "day", "token": "x"},
])
def test_arguments_the_schema_refuses_end_the_call_at_stage_2_naming_the_plugin(data_dir, stub_ha, answer):
    executor = executor_with(data_dir, stub_ha, sloppy=Returns(answer))
    err = refusal(lambda: executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c"))
    assert (err.code, err.stage) == ("INVALID_ARGUMENTS", Stage.VALIDATE)
    assert plugin_lines(data_dir) == [("rejected", "sloppy", "before_toolcall", 2)]
    assert stub_ha.requests == []


@pytest.mark.parametrize("answer", [42, ["entity_id"], {1: "x"}, b"no", 1.5, True])
def test_an_answer_of_another_type_is_dropped_and_the_call_goes_on_as_asked(data_dir, stub_ha, answer):
    executor = executor_with(data_dir, stub_ha, odd=Returns(answer))
    proposal = executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c")
    assert proposal.arguments == HISTORY_ARGS
    assert plugin_lines(data_dir) == [("plugin_dropped", "odd", "before_toolcall", 3)]


def test_an_entity_posing_as_an_allowlisted_one_is_dropped_before_the_allowlist(data_dir, stub_ha):
    """Text equal to (and hashing as) an allowlisted id passed stage 3's `in`, and the card then asked about the
    entity its own text names."""
    executor = executor_with(data_dir, stub_ha, poser=Returns({**HISTORY_ARGS, "entity_id": Posing(
        "lock.front_door", DOOR)}))
    proposal = executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c")
    assert proposal.arguments == HISTORY_ARGS and type(proposal.arguments["entity_id"]) is str
    assert "lock.front_door" not in json.dumps(proposal.to_dict())
    assert plugin_lines(data_dir) == [("plugin_dropped", "poser", "before_toolcall", 3)]


def test_the_same_arguments_back_are_no_change(data_dir, stub_ha):
    executor = executor_with(data_dir, stub_ha, same=Returns(dict(HISTORY_ARGS)))
    executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c")
    assert plugin_lines(data_dir) == []


def test_each_plugins_arguments_are_what_the_next_is_handed(data_dir, stub_ha):
    seer = Sees()
    # pluggy calls the last registered first: `door` before `seer`.
    executor = executor_with(data_dir, stub_ha, seer=seer, door=Names(DOOR))
    executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c")
    assert [seen["arguments"] for seen in seer.seen] == [{"entity_id": DOOR, "period": "day"}]


@pytest.mark.parametrize(("client", "principal"), [(None, "household"), ("kitchen-tablet", "program:kitchen-tablet")])
def test_a_hook_is_told_who_asked(data_dir, stub_ha, client, principal):
    seer = Sees()
    executor = executor_with(data_dir, stub_ha, seer=seer)
    read(executor, LIST_ENTITIES, {}, client=client)
    assert [seen["principal"] for seen in seer.seen] == [principal, principal]
    assert seer.seen[0]["capability"] == LIST_ENTITIES


class Raises:
    @hookimpl
    def before_toolcall(self):
        raise RuntimeError("a bug")

    @hookimpl
    def after_toolcall(self):
        raise RuntimeError("a bug")


def test_a_plugin_that_raises_is_skipped_and_recorded_at_both_hooks(data_dir, stub_ha):
    executor = executor_with(data_dir, stub_ha, broken=Raises())
    result = read(executor, LIST_ENTITIES, {})
    assert result["entities"]
    assert plugin_lines(data_dir) == [("plugin_skipped", "broken", "before_toolcall", 3),
                                      ("plugin_skipped", "broken", "after_toolcall", 6)]


class Late:
    def __init__(self) -> None:
        self.release = threading.Event()

    @hookimpl
    def before_toolcall(self):
        self.release.wait(5)
        return "refused too late"


def test_a_plugin_past_its_second_is_skipped_and_its_late_answer_counts_for_nothing(data_dir, stub_ha):
    late = Late()
    executor = executor_with(data_dir, stub_ha, slow=late)
    try:
        proposal = executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c")
    finally:
        late.release.set()
    assert proposal.arguments == HISTORY_ARGS
    assert plugin_lines(data_dir) == [("plugin_skipped", "slow", "before_toolcall", 3)]


# --- after_toolcall -------------------------------------------------------------------------------


def test_a_narrower_result_is_what_the_caller_gets(data_dir, stub_ha):
    plain = read(executor_with(data_dir, stub_ha), LIST_ENTITIES, {})
    narrowed = read(executor_with(data_dir, stub_ha, fewer=DropsFirstEntity()), LIST_ENTITIES, {})
    assert narrowed == {**plain, "entities": plain["entities"][1:]}
    assert plugin_lines(data_dir) == [("plugin_changed", "fewer", "after_toolcall", 6)]


def widen_key(result):
    return {**result, "secret_extra": 1}


def widen_item(result):
    return {**result, "entities": [*result["entities"], dict(result["entities"][0])]}


def change_value(result):
    return {**result, "entities": [{**result["entities"][0], "state": "hacked"}, *result["entities"][1:]]}


def drop_instance(result):
    return {key: value for key, value in result.items() if key != "instance"}


def drop_required(result):
    return {key: value for key, value in result.items() if key != "entities"}


@pytest.mark.parametrize("change", [widen_key, widen_item, change_value, drop_instance, drop_required,
                                    lambda result: [result], lambda result: "text", lambda result: 7])
def test_a_result_that_widens_changes_or_leaves_its_schema_is_dropped(data_dir, stub_ha, change):
    class Widens:
        @hookimpl
        def after_toolcall(self, result):
            return change(result)

    plain = read(executor_with(data_dir, stub_ha), LIST_ENTITIES, {})
    assert read(executor_with(data_dir, stub_ha, wide=Widens()), LIST_ENTITIES, {}) == plain
    assert plugin_lines(data_dir) == [("plugin_dropped", "wide", "after_toolcall", 6)]


def test_a_result_with_a_field_renamed_by_a_key_posing_as_its_name_is_dropped(data_dir, stub_ha):
    class Renames:
        @hookimpl
        def after_toolcall(self, result):
            first = {(Posing("secret_state", "state") if key == "state" else key): value
                     for key, value in result["entities"][0].items()}
            return {**result, "entities": [first, *result["entities"][2:]]}  # and an entity dropped: a change

    plain = read(executor_with(data_dir, stub_ha), LIST_ENTITIES, {})
    result = read(executor_with(data_dir, stub_ha, renamer=Renames()), LIST_ENTITIES, {})
    assert "secret_state" not in json.dumps(result) and result == plain
    assert plugin_lines(data_dir) == [("plugin_dropped", "renamer", "after_toolcall", 6)]


class Touchy:
    """Raises when compared."""

    def __eq__(self, other):
        raise RuntimeError("compared")

    __ne__ = __eq__
    __hash__ = None  # type: ignore[assignment]


@pytest.mark.parametrize("field", ["instance", "total"])
def test_a_result_holding_a_value_that_raises_when_compared_is_dropped_and_the_read_kept(data_dir, stub_ha, field):
    """Compared with the original's `instance` before `narrows` looked at its type, it made the read the household
    allowed an internal error, naming no plugin."""
    class Answers:
        @hookimpl
        def after_toolcall(self, result):
            return {**result, field: Touchy()}

    plain = read(executor_with(data_dir, stub_ha), LIST_ENTITIES, {})
    assert read(executor_with(data_dir, stub_ha, touchy=Answers()), LIST_ENTITIES, {}) == plain
    assert plugin_lines(data_dir) == [("plugin_dropped", "touchy", "after_toolcall", 6)]


class CopiesAs:
    """A value whose deep copy raises, or is another value (what the Console keeps is the copy it checked)."""

    def __init__(self, copy: object) -> None:
        self.copy = copy

    def __deepcopy__(self, memo):
        if isinstance(self.copy, BaseException):
            raise self.copy
        return self.copy


@pytest.mark.parametrize("copy", [RuntimeError("no copy"), RecursionError(), "lock.front_door", DOOR])
def test_arguments_whose_copy_raises_or_is_another_value_are_judged_by_the_copy(data_dir, stub_ha, copy):
    executor = executor_with(data_dir, stub_ha, copier=Returns({**HISTORY_ARGS, "entity_id": CopiesAs(copy)}))
    if copy == "lock.front_door":
        assert refusal(lambda: executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c")).code == (
            "ENTITY_NOT_ALLOWLISTED")
        return
    proposal = executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c")
    if copy == DOOR:
        assert proposal.arguments == {**HISTORY_ARGS, "entity_id": DOOR}
    else:
        assert proposal.arguments == HISTORY_ARGS
        assert plugin_lines(data_dir) == [("plugin_dropped", "copier", "before_toolcall", 3)]


@pytest.mark.parametrize("copy", [RuntimeError("no copy"), "hacked", None])
def test_a_result_whose_copy_raises_or_widens_is_dropped(data_dir, stub_ha, copy):
    class Answers:
        @hookimpl
        def after_toolcall(self, result):
            return {**result, "entities": [{**result["entities"][0], "state": CopiesAs(copy)}]}

    plain = read(executor_with(data_dir, stub_ha), LIST_ENTITIES, {})
    assert read(executor_with(data_dir, stub_ha, copier=Answers()), LIST_ENTITIES, {}) == plain
    assert plugin_lines(data_dir) == [("plugin_dropped", "copier", "after_toolcall", 6)]


def test_the_result_kept_is_a_copy_the_plugin_cannot_change_after(data_dir, stub_ha):
    class KeepsHold:
        answer: dict[str, Any] = {}

        @hookimpl
        def after_toolcall(self, result):
            self.answer = {**result, "entities": result["entities"][1:]}
            return self.answer

    keeper = KeepsHold()
    result = read(executor_with(data_dir, stub_ha, keeper=keeper), LIST_ENTITIES, {})
    kept = json.dumps(result)
    keeper.answer["entities"].clear()
    keeper.answer["total"] = 10**6
    assert json.dumps(result) == kept


def test_after_toolcall_is_never_called_for_a_read_the_household_denied_or_that_was_withdrawn(data_dir, stub_ha):
    seer = Sees()
    executor = executor_with(data_dir, stub_ha, seer=seer)
    denied = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    refusal(lambda: executor.answer(denied.token, approve=False, conversation_id="c"))
    withdrawn = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    executor.withdraw(withdrawn.token, conversation_id="c")
    assert [sorted(seen) for seen in seer.seen] == [["arguments", "capability", "principal"]] * 2
    assert stub_ha.requests == []


def test_each_plugins_result_is_what_the_next_is_handed(data_dir, stub_ha):
    seer = Sees()
    plain = read(executor_with(data_dir, stub_ha), LIST_ENTITIES, {})
    # pluggy calls the last registered first: `fewer` before `seer`.
    read(executor_with(data_dir, stub_ha, seer=seer, fewer=DropsFirstEntity()), LIST_ENTITIES, {})
    assert seer.seen[-1]["result"]["entities"] == plain["entities"][1:]


# --- with no plugin, and from the Console -------------------------------------------------------------


def test_with_no_plugin_a_read_is_as_it_was_and_the_audit_names_none(data_dir, stub_ha):
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": ALLOWED},
                  token=stub_ha.token)
    bare = Executor(Instances(data_dir), audit=AuditLog(data_dir), confirmations=ConfirmationStore(),
                    clock=lambda: NOW)
    with_none = executor_with(data_dir, stub_ha)
    assert json.dumps(read(bare, LIST_ENTITIES, {})) == json.dumps(read(with_none, LIST_ENTITIES, {}))
    assert plugin_lines(data_dir) == []


def test_the_console_hands_its_plugins_to_both_executors(data_dir, stub_ha):
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": ALLOWED},
                  token=stub_ha.token)
    plugins = plugins_with(data_dir, quiet_hours=Refuses())
    console = Console.open(data_dir, ConsoleOptions(plugins=plugins))
    assert console.plugins is plugins
    page = refusal(lambda: console.executor.propose(LIST_ENTITIES, {}, conversation_id="c"))
    program = refusal(lambda: console.household.ask("kitchen-tablet", LIST_ENTITIES, {}))
    assert page.code == program.code == "REFUSED_BY_PLUGIN"
    assert [line.get("client") for line in audit_lines(data_dir) if line["event"] == "rejected"] == [
        None, "kitchen-tablet"]


def test_a_console_opened_without_plugins_has_those_installed(data_dir):
    console = Console.open(data_dir)
    assert isinstance(console.plugins, Plugins)
    assert {info.name for info in console.plugins.describe()} == set()  # none is installed in the test venv


# --- Activity -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("event", [AuditEvent.PLUGIN_CHANGED, AuditEvent.PLUGIN_DROPPED, AuditEvent.PLUGIN_SKIPPED])
def test_activity_names_the_plugin_and_the_hook(data_dir, stub_ha, event):
    AuditLog(data_dir).record(event, capability=LIST_ENTITIES, classification="read_only/external/required",
                              stage=6, invocation="i", plugin="quiet_hours", hook="after_toolcall")
    (shown,) = summarise(AuditLog(data_dir).events()).latest
    assert "quiet_hours" in shown.words and "after_toolcall" in shown.words
    assert isinstance(shown.words, Words) and shown.words.msgid == EVENT_WORDS[event].msgid
    assert (shown.plugin, shown.hook) == ("quiet_hours", "after_toolcall")


def test_activity_names_the_plugin_that_refused(data_dir, stub_ha):
    executor = executor_with(data_dir, stub_ha, quiet_hours=Refuses())
    refusal(lambda: executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c"))
    shown = summarise(AuditLog(data_dir).events()).latest[0]
    assert shown.words == "Refused by the plugin quiet_hours before you were asked."
    assert isinstance(shown.words, Words) and shown.words.msgid == REFUSED_BY_A_PLUGIN.msgid
    assert shown.why == CHAT_WORDS["REFUSED_BY_PLUGIN"]


def test_the_audit_refuses_a_hook_name_that_is_not_one():
    with pytest.raises(ValueError):
        AuditLog(DataDir(Path("/nonexistent"))).record(AuditEvent.PLUGIN_SKIPPED, capability=LIST_ENTITIES,
                                                 classification="x", stage=3, invocation="i", plugin="p",
                                                 hook="arguments={'entity_id': 'lock.front_door'}")
