"""The six-stage executor, driven from plain Python against a stub Home Assistant on loopback."""

from __future__ import annotations

import dataclasses
import json
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.registry import REGISTRY
from console_ha.capabilities.stages import Turn
from console_ha.errors import CapabilityError
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.store.ha_token import TokenStore, check_token
from tests.executors import executor_over, refusal
from tests.seed import hand_edit, seed_settings

BOTH = [(LIST_ENTITIES, {}), (GET_HISTORY, {"entity_id": "sensor.living_room_temperature", "period": "day"})]
ALLOWED = ["sensor.living_room_temperature", "binary_sensor.front_door", "binary_sensor.hallway_motion"]


def configure(data_dir, stub, **changes):
    settings_ = {"enabled": True, "base_url": stub.base_url, "allowlisted_entities": ALLOWED}
    settings_.update(changes)
    seed_settings(data_dir, settings_, token=stub.token)


def ha_requests(stub):
    return [r for r in stub.requests]


def audit_lines(data_dir) -> list[dict]:
    path = data_dir.audit_log
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# --- RFC-0018 acceptance criteria -------------------------------------------------------------

def test_both_capabilities_are_registered_read_only_external_confirmation_required():
    for name in (LIST_ENTITIES, GET_HISTORY):
        capability = REGISTRY[name]
        assert capability.classification.to_dict() == {
            "side_effect": "read_only", "network": "external", "confirmation": "required"}
        assert capability.bounds.max_result_bytes == 64 * 1024
        assert capability.bounds.max_invocations_per_turn == 1
    assert REGISTRY[LIST_ENTITIES].bounds.timeout_seconds == 8
    assert REGISTRY[GET_HISTORY].bounds.timeout_seconds == 10
    assert REGISTRY[GET_HISTORY].arguments_schema["properties"]["period"]["enum"] == ["hour", "day", "week"]


@pytest.mark.parametrize(("name", "args"), BOTH)
def test_fresh_device_default_disabled_rejects_both_at_policy(executor, name, args):
    err = refusal(lambda: executor.propose(name, args, conversation_id="c"))
    assert (err.code, err.stage) == ("CAPABILITY_DISABLED", 3)
    assert executor.confirmations.pending_count() == 0


@pytest.mark.parametrize(("name", "args"), BOTH)
@pytest.mark.parametrize("missing", ["base_url", "token"])
def test_enabled_but_unconfigured_is_distinct_from_disabled(executor, data_dir, name, args, missing):
    seed_settings(data_dir, {
        "enabled": True,
        "base_url": "" if missing == "base_url" else "http://127.0.0.1:9",
        "allowlisted_entities": ALLOWED,
    })
    if missing != "token":
        TokenStore(data_dir).write(check_token("a-token"), "http://127.0.0.1:9")
    err = refusal(lambda: executor.propose(name, args, conversation_id="c"))
    assert (err.code, err.stage) == ("CAPABILITY_NOT_CONFIGURED", 3)


def test_config_is_read_fresh_per_request_without_restart(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha)
    assert executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    seed_settings(data_dir, {"enabled": False})
    assert refusal(lambda: executor.propose(LIST_ENTITIES, {}, conversation_id="c")).code == "CAPABILITY_DISABLED"
    seed_settings(data_dir, {"enabled": True})
    assert executor.propose(LIST_ENTITIES, {}, conversation_id="c")


@pytest.mark.parametrize("entity_id", ["lock.front_door", "sensor.does_not_exist_anywhere"])
def test_non_allowlisted_entity_is_refused_before_confirmation_and_before_any_request(
        executor, data_dir, stub_ha, entity_id):
    configure(data_dir, stub_ha)
    err = refusal(lambda: executor.propose(GET_HISTORY, {"entity_id": entity_id, "period": "day"},
                                           conversation_id="c"))
    assert (err.code, err.stage) == ("ENTITY_NOT_ALLOWLISTED", 3)
    assert executor.confirmations.pending_count() == 0
    assert ha_requests(stub_ha) == []


def test_allowlist_refusal_says_the_same_whether_or_not_the_entity_exists(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha)
    existing = refusal(lambda: executor.propose(
        GET_HISTORY, {"entity_id": "lock.front_door", "period": "day"}, conversation_id="c"))
    absent = refusal(lambda: executor.propose(
        GET_HISTORY, {"entity_id": "lock.back_door_nowhere", "period": "day"}, conversation_id="c"))
    assert existing.to_dict() == absent.to_dict()
    assert "lock." not in existing.message


# --- stage order ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["home_assistant.call_service", "", None, 3, "HOME_ASSISTANT.LIST_ENTITIES"])
def test_unknown_capability_is_refused_at_resolve(executor, name):
    err = refusal(lambda: executor.propose(name, {}, conversation_id="c"))
    assert (err.code, err.stage) == ("UNKNOWN_CAPABILITY", 1)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        (LIST_ENTITIES, {"entity_id": "sensor.x"}),
        (LIST_ENTITIES, []),
        (GET_HISTORY, {"entity_id": "sensor.x"}),
        (GET_HISTORY, {"period": "day"}),
        (GET_HISTORY, {"entity_id": "Sensor.X", "period": "day"}),
        (GET_HISTORY, {"entity_id": "sensor", "period": "day"}),
        (GET_HISTORY, {"entity_id": "sensor.x", "period": "month"}),
        (GET_HISTORY, {"entity_id": "sensor.x", "period": "day", "start": "2020-01-01"}),
        (GET_HISTORY, {"entity_id": ["sensor.x"], "period": "day"}),
    ],
)
def test_malformed_arguments_are_refused_at_validate_before_policy(executor, name, args):
    # The capability is disabled, yet the shape error wins: validation comes first.
    err = refusal(lambda: executor.propose(name, args, conversation_id="c"))
    assert (err.code, err.stage) == ("INVALID_ARGUMENTS", 2)


def test_one_invocation_of_each_capability_per_turn(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha)
    turn = Turn()
    executor.propose(LIST_ENTITIES, {}, conversation_id="c", turn=turn)
    executor.propose(GET_HISTORY, {"entity_id": ALLOWED[0], "period": "hour"}, conversation_id="c", turn=turn)
    err = refusal(lambda: executor.propose(LIST_ENTITIES, {}, conversation_id="c", turn=turn))
    assert (err.code, err.stage) == ("INVOCATION_LIMIT_EXCEEDED", 3)
    assert executor.propose(LIST_ENTITIES, {}, conversation_id="c", turn=Turn())


# --- confirmation, execute, shape -------------------------------------------------------------

def test_proposal_pauses_with_card_and_sends_nothing(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha, entity_names={"sensor.living_room_temperature": "Living Room Temperature"})
    proposal = executor.propose(GET_HISTORY, {"period": "week", "entity_id": "sensor.living_room_temperature"},
                                conversation_id="c")
    body = proposal.to_dict()
    assert body["capability"] == GET_HISTORY
    assert body["arguments"] == {"entity_id": "sensor.living_room_temperature", "period": "week"}
    assert "Living Room Temperature" in body["card"]["body"]
    assert "past week" in body["card"]["body"]
    assert stub_ha.base_url.split("//")[1] in body["card"]["body"]
    assert body["card"]["approve_label"] and body["card"]["deny_label"]
    assert body["expires_at"].endswith("Z")
    assert ha_requests(stub_ha) == []


def test_approved_list_entities_returns_only_allowlisted_narrowed_entities(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha, allowlisted_entities=ALLOWED + ["sensor.removed_since"])
    proposal = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    ids = [e["entity_id"] for e in result["entities"]]
    assert ids == [e for e in ALLOWED if any(s["entity_id"] == e for s in stub_ha.states)]
    assert result["missing_entities"] == ["sensor.removed_since"]
    for entity in result["entities"]:
        assert set(entity) == {"entity_id", "friendly_name", "domain", "state", "unit_of_measurement",
                               "last_changed", "unavailable", "area"}
    # The states, then one registry round for the areas (this stub has no WebSocket: areas unknown, not a failure).
    assert [(r.method, r.path) for r in stub_ha.requests] == [("GET", "/api/states"), ("GET", "/api/websocket")]
    assert result["areas_known"] is False and {e["area"] for e in result["entities"]} == {None}
    assert result["total"] == len(ids)


def test_unavailable_and_unknown_states_are_flagged(executor, data_dir, stub_ha):
    flagged = {s["entity_id"]: s["state"] for s in stub_ha.states if s["state"] in ("unavailable", "unknown")}
    assert flagged, "the stub carries unavailable and unknown entities"
    configure(data_dir, stub_ha, allowlisted_entities=list(flagged) + [ALLOWED[0]])
    result = executor.answer(executor.propose(LIST_ENTITIES, {}, conversation_id="c").token,
                             approve=True, conversation_id="c")
    by_id = {e["entity_id"]: e for e in result["entities"]}
    for entity_id in flagged:
        assert by_id[entity_id]["unavailable"] is True
    assert by_id[ALLOWED[0]]["unavailable"] is False


def test_approved_get_history_returns_the_rfc_shape(executor, data_dir, stub_ha, clock):
    configure(data_dir, stub_ha)
    now = datetime.fromtimestamp(clock.now, UTC)
    stub_ha.history["sensor.living_room_temperature"] = [
        (now - timedelta(hours=30), "19.0"),
        (now - timedelta(hours=5), "20.5"),
        (now - timedelta(hours=2), "22.0"),
        (now - timedelta(hours=1), "21.0"),
    ]
    proposal = executor.propose(GET_HISTORY, {"entity_id": "sensor.living_room_temperature", "period": "day"},
                                conversation_id="c")
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert result["entity_id"] == "sensor.living_room_temperature"
    assert result["period"] == "day"
    assert [c["state"] for c in result["changes"]] == ["20.5", "22.0", "21.0"]
    assert result["total_changes"] == 3 and result["truncated"] is False
    assert result["initial_state"]["state"] == "19.0"
    assert result["summary"]["min"] == 19.0 and result["summary"]["max"] == 22.0
    assert all(r.method == "GET" for r in stub_ha.requests)


def test_denial_sends_nothing_and_is_refused(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha)
    proposal = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    err = refusal(lambda: executor.answer(proposal.token, approve=False, conversation_id="c"))
    assert (err.code, err.stage) == ("CONFIRMATION_DENIED", 4)
    assert ha_requests(stub_ha) == []


@pytest.mark.parametrize(("name", "args"), BOTH)
def test_replayed_expired_and_foreign_tokens_run_nothing(executor, data_dir, stub_ha, clock, name, args):
    configure(data_dir, stub_ha)
    used = executor.propose(name, args, conversation_id="c")
    refusal(lambda: executor.answer(used.token, approve=False, conversation_id="c"))
    assert refusal(lambda: executor.answer(used.token, approve=True, conversation_id="c")).code == \
        "CONFIRMATION_INVALID"
    foreign = executor.propose(name, args, conversation_id="c")
    assert refusal(lambda: executor.answer(foreign.token, approve=True, conversation_id="other")).code == \
        "CONFIRMATION_INVALID"
    clock.now += 301
    late = refusal(lambda: executor.answer(foreign.token, approve=True, conversation_id="c"))
    assert (late.code, late.detail["reason"]) == ("CONFIRMATION_INVALID", "expired")
    assert audit_lines(data_dir)[-1]["event"] == "expired"
    assert ha_requests(stub_ha) == []


def test_settings_changed_while_the_card_was_open_are_honoured(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha)
    proposal = executor.propose(GET_HISTORY, {"entity_id": ALLOWED[0], "period": "day"}, conversation_id="c")
    seed_settings(data_dir, {"allowlisted_entities": ALLOWED[1:]})
    err = refusal(lambda: executor.answer(proposal.token, approve=True, conversation_id="c"))
    assert (err.code, err.stage) == ("ENTITY_NOT_ALLOWLISTED", 3)
    assert ha_requests(stub_ha) == []


@pytest.mark.parametrize(
    ("fault", "code"),
    [("401", "HA_UNAUTHORIZED"), ("403", "HA_UNAUTHORIZED"), ("500", "HA_BAD_RESPONSE"),
     ("invalid_json", "HA_BAD_RESPONSE"), ("wrong_shape", "HA_BAD_RESPONSE"), ("drop", "HA_UNREACHABLE")],
)
def test_home_assistant_failures_fail_at_execute_with_their_code(executor, data_dir, stub_ha, fault, code):
    configure(data_dir, stub_ha)
    stub_ha.fault(fault)
    proposal = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    err = refusal(lambda: executor.answer(proposal.token, approve=True, conversation_id="c"))
    assert (err.code, err.stage) == (code, 5)
    assert stub_ha.token not in repr(err) + str(err) + json.dumps(err.to_dict())
    assert audit_lines(data_dir)[-1]["event"] == "failed"


def test_allowlisted_entity_home_assistant_lacks_is_not_found_after_the_allowlist(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha, allowlisted_entities=["sensor.renamed_away"])
    proposal = executor.propose(GET_HISTORY, {"entity_id": "sensor.renamed_away", "period": "hour"},
                                conversation_id="c")
    err = refusal(lambda: executor.answer(proposal.token, approve=True, conversation_id="c"))
    assert (err.code, err.stage) == ("HA_NOT_FOUND", 5)


def test_unreachable_home_assistant(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha, base_url="http://127.0.0.1:9")
    proposal = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    assert refusal(lambda: executor.answer(proposal.token, approve=True, conversation_id="c")).code == \
        "HA_UNREACHABLE"


def test_result_over_64_kib_is_refused_at_shape(executor, data_dir, stub_ha):
    """An allowlist too large for the bound, in a file saved before saves were checked: stage 6 refuses."""
    many = [f"sensor.bulk_{i:04d}" for i in range(400)]
    for entity_id in many:
        stub_ha.states.append({"entity_id": entity_id, "state": "1" * 100,
                               "attributes": {"friendly_name": "A very long friendly name " * 4},
                               "last_changed": "2026-11-30T00:00:00+00:00",
                               "last_updated": "2026-11-30T00:00:00+00:00"})
    configure(data_dir, stub_ha)
    data_dir.ha_config.write_text(json.dumps({"enabled": True, "base_url": stub_ha.base_url,
                                              "allowlisted_entities": many}))
    proposal = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    err = refusal(lambda: executor.answer(proposal.token, approve=True, conversation_id="c"))
    assert (err.code, err.stage) == ("RESULT_TOO_LARGE", 6)


def test_broken_config_file_refuses_with_config_invalid(executor, data_dir):
    data_dir.ha_config.parent.mkdir(parents=True)
    data_dir.ha_config.write_text("{oops")
    err = refusal(lambda: executor.propose(LIST_ENTITIES, {}, conversation_id="c"))
    assert (err.code, err.stage) == ("CONFIG_INVALID", 3)
    assert data_dir.ha_config.read_text() == "{oops"


# --- audit ------------------------------------------------------------------------------------

def test_audit_records_outcomes_and_never_values(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha)
    executor.answer(executor.propose(LIST_ENTITIES, {}, conversation_id="c").token, approve=True,
                    conversation_id="c")
    history = executor.propose(GET_HISTORY, {"entity_id": ALLOWED[0], "period": "day"}, conversation_id="c")
    refusal(lambda: executor.answer(history.token, approve=False, conversation_id="c"))
    refusal(lambda: executor.propose(GET_HISTORY, {"entity_id": "lock.front_door", "period": "day"},
                                     conversation_id="c"))
    lines = audit_lines(data_dir)
    assert [line["event"] for line in lines] == [
        "proposed", "confirmation_requested", "approved", "executed",
        "proposed", "confirmation_requested", "denied",
        "proposed", "rejected",
    ]
    assert lines[-1]["code"] == "ENTITY_NOT_ALLOWLISTED" and lines[-1]["stage"] == 3
    assert all(line["classification"] == "read_only/external/required" for line in lines)
    # Each line names the Home Assistant it was for, by id (a device tracker's state may also read "home"):
    # every other field is checked for the values.
    assert all(line["instance"] == "home" for line in lines)
    raw = "\n".join(json.dumps({k: v for k, v in line.items() if k != "instance"}) for line in lines)
    for value in [stub_ha.token, *ALLOWED, "lock.front_door", "living", "day", *(s["state"] for s in stub_ha.states)]:
        assert f'"{value}"' not in raw and f"{value}," not in raw


def test_expired_confirmations_are_audited(executor, data_dir, stub_ha, clock):
    configure(data_dir, stub_ha)
    executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    clock.now += 301
    executor.sweep_expired()
    assert audit_lines(data_dir)[-1]["event"] == "expired"


# --- robustness -------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
arguments = st.one_of(
    json_values,
    st.fixed_dictionaries({"entity_id": json_values | st.sampled_from(ALLOWED + ["lock.front_door"]),
                           "period": json_values | st.sampled_from(["hour", "day", "week"])}),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from([LIST_ENTITIES, GET_HISTORY]) | json_values, args=arguments)
def test_any_proposal_either_pauses_or_raises_a_contract_error(data_dir, name, args):
    seed_settings(data_dir, {"enabled": True, "base_url": "http://127.0.0.1:9", "allowlisted_entities": ALLOWED})
    TokenStore(data_dir).write(check_token("token-for-fuzzing"), "http://127.0.0.1:9")
    executor = executor_over(data_dir)
    try:
        proposal = executor.propose(name, args, conversation_id="c")
    except CapabilityError as err:
        assert err.code in {"UNKNOWN_CAPABILITY", "INVALID_ARGUMENTS", "ENTITY_NOT_ALLOWLISTED"}
        assert err.stage in (1, 2, 3)
    else:
        assert proposal.capability in REGISTRY


class CountingClient(HomeAssistantClient):
    """A real client that counts how often it is closed."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1
        super().close()


def test_executor_closes_the_clients_it_makes_and_leaves_lent_ones_open(data_dir, stub_ha, clock, monkeypatch):
    configure(data_dir, stub_ha)
    monkeypatch.setattr("console_ha.ha.kept_clients.HomeAssistantClient", CountingClient)
    CountingClient.closed = 0
    own = executor_over(data_dir, clock=clock)
    own.answer(own.propose(LIST_ENTITIES, {}, conversation_id="c").token, approve=True, conversation_id="c")
    assert CountingClient.closed == 1

    lent = CountingClient(stub_ha.base_url, check_token(stub_ha.token))
    borrowing = executor_over(data_dir, clock=clock, clients=lambda *_: nullcontext(lent))
    borrowing.answer(borrowing.propose(LIST_ENTITIES, {}, conversation_id="c").token, approve=True,
                     conversation_id="c")
    assert CountingClient.closed == 1, "a client lent by the caller stays open for its next use"


def test_the_model_never_learns_the_home_assistant_address_from_a_failure(executor, data_dir, stub_ha):
    configure(data_dir, stub_ha, base_url="http://127.0.0.1:9")
    proposal = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    err = refusal(lambda: executor.answer(proposal.token, approve=True, conversation_id="c"))
    assert err.code == "HA_UNREACHABLE"
    assert "127.0.0.1" not in json.dumps(err.to_dict()) and ":9" not in err.message


@pytest.mark.parametrize(
    ("name", "args", "change"),
    [
        (LIST_ENTITIES, {}, {"base_url": "http://127.0.0.1:9"}),
        (GET_HISTORY, {"entity_id": ALLOWED[0], "period": "day"}, {"base_url": "http://127.0.0.1:9"}),
        (LIST_ENTITIES, {}, {"allowlisted_entities": ALLOWED + ["lock.front_door"]}),
    ],
    ids=["list-elsewhere", "history-elsewhere", "list-more-entities"],
)
def test_an_approval_covers_only_what_the_card_showed(executor, data_dir, stub_ha, name, args, change):
    """A card names the Home Assistant (and, for the list, the entities); changed since, nothing is read."""
    configure(data_dir, stub_ha)
    proposal = executor.propose(name, args, conversation_id="c")
    # As a save would leave it: another Home Assistant comes with its own token.
    seed_settings(data_dir, change, token=stub_ha.token if "base_url" in change else None)
    err = refusal(lambda: executor.answer(proposal.token, approve=True, conversation_id="c"))
    assert (err.code, err.stage, err.detail["reason"]) == ("CONFIRMATION_INVALID", 4, "settings_changed")
    assert ha_requests(stub_ha) == []
    assert audit_lines(data_dir)[-1]["event"] == "rejected"


@pytest.mark.parametrize(("name", "args"), BOTH)
def test_an_empty_allowlist_is_not_configured_and_asks_nobody(executor, data_dir, stub_ha, name, args):
    configure(data_dir, stub_ha, allowlisted_entities=[])
    err = refusal(lambda: executor.propose(name, args, conversation_id="c"))
    assert (err.code, err.stage) == ("CAPABILITY_NOT_CONFIGURED", 3)
    assert executor.confirmations.pending_count() == 0 and ha_requests(stub_ha) == []


# --- the token belongs to the Home Assistant it was saved for ------------------------------------


@pytest.mark.parametrize(("name", "args"), BOTH)
def test_a_token_saved_for_another_origin_is_not_configured(executor, data_dir, two_homes, name, args):
    """URL of `other` in the file, token saved for `home`: refused at policy, no card, nothing sent."""
    home, other = two_homes
    configure(data_dir, home)
    hand_edit(data_dir, {"base_url": other.base_url})  # a hand edit, or an old release's crash: a save refuses it
    err = refusal(lambda: executor.propose(name, args, conversation_id="c"))
    assert (err.code, err.stage) == ("CAPABILITY_NOT_CONFIGURED", 3)
    assert "saved for another Home Assistant" in err.message and "enter it again" in err.message
    assert "127.0.0.1" not in err.message  # the model is not told where the home is
    assert executor.confirmations.pending_count() == 0
    assert [r.path for r in home.requests + other.requests] == []  # paths only: headers hold tokens


@pytest.mark.parametrize(("name", "args"), BOTH)
def test_an_approved_read_checks_the_tokens_origin_again(executor, data_dir, two_homes, name, args):
    """The URL changed to another origin while the card was open (no new token): nothing is read anywhere."""
    home, other = two_homes
    configure(data_dir, home)
    proposal = executor.propose(name, args, conversation_id="c")
    hand_edit(data_dir, {"base_url": other.base_url})  # a save refuses another origin than the token's
    err = refusal(lambda: executor.answer(proposal.token, approve=True, conversation_id="c"))
    assert (err.code, err.stage) == ("CAPABILITY_NOT_CONFIGURED", 3)
    assert [r.path for r in home.requests + other.requests] == []  # paths only: headers hold tokens
    assert audit_lines(data_dir)[-1]["event"] == "rejected"


# --- stage 6: the result as its capability declares it -------------------------------------------

def test_a_result_off_its_schema_is_an_internal_error_and_nothing_of_it_leaves(
        executor, data_dir, stub_ha, monkeypatch, caplog):
    """Stage 6 checks the declared result schema: a result that departs is a bug, logged and audited without values."""
    configure(data_dir, stub_ha)
    secret_state = "the-value-no-log-may-show"
    good = REGISTRY[LIST_ENTITIES]

    def off_schema(client, config, arguments, deadline, now, notes=None):
        result = good.execute(client, config, arguments, deadline, now, notes)
        result["entities"][0]["state"] = {"leaked": secret_state}  # not a string: off the declared schema
        return result

    monkeypatch.setitem(REGISTRY, LIST_ENTITIES, dataclasses.replace(good, execute=off_schema))
    proposal = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    err = refusal(lambda: executor.answer(proposal.token, approve=True, conversation_id="c"))
    assert (err.code, err.stage, err.message) == ("INTERNAL_ERROR", 6, "Something went wrong inside the Console.")
    assert secret_state not in f"{err} {err.detail}"
    last = audit_lines(data_dir)[-1]
    assert (last["event"], last["stage"], last["code"]) == ("failed", 6, "INTERNAL_ERROR")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "result schema refuses" in logged and "properties/state/type" in logged
    assert secret_state not in logged and secret_state not in data_dir.audit_log.read_text()
    for entity_id in ALLOWED:
        assert entity_id not in logged

